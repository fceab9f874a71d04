"""Benchmark: does one batch's DelTA update point closer to the expected reward's gradient than DAPO's?

    python tools/direction.py                                          # the tiny default (warm-started), 8 batches
    python tools/direction.py --model M --dataset D --max_new_tokens 256        # your model and data: the verdict
    python tools/direction.py --algos dapo,big --batches 4 --out runs/pilot.jsonl   # a pilot: DAPO and the control
    python tools/direction.py --out runs/d.jsonl --resume              # continue: batches in the file are skipped
                                     # (E's vectors read back from runs/d.jsonl.E.pt, which the first run saved)
    python tools/direction.py --report runs/d.jsonl                    # the tables again, from the file alone
    python tools/direction.py --out runs/e.jsonl --e_from runs/d.jsonl    # other arms or batches, d's E (same settings)
    python tools/direction.py --model M --dataset D --precondition runs/x/checkpoint-20   # + AdamW's view
Every other flag is delta.py's (`python delta.py --help`), read by its own parser; a recipe file may come first.

At the given policy (`--model`, else the tiny default warm-started as `python delta.py` does), the bench draws M
(--batches) independent training batches the way a step draws them (--prompts_per_step prompts, --group_size
responses each at --temperature, the verifier's rewards, Eq. A's advantages, one no-grad pass for the old log-probs,
the entropy and Eq. D's features) and from each batch's same rollouts the update direction of every algorithm of
--algos: the gradient, over all trainable parameters, of the algorithm's surrogate at ratio 1 (old_logp is the
score pass's log-prob of the same weights: the ratio is 1 to fp32 rounding, so no clip binds) with the whole batch
as one mini-batch, the token weights (DelTA's lam, forking's top-entropy mask, the lam subsets) and the normaliser
taken from delta.py's ALGOS (and SIGNAL_SUBSETS: lam_top_signal and lam_bottom_signal, the lam subsets ranked over
the tokens of non-zero-advantage responses only). `big` is the positive control: DAPO's direction from a batch --big
times larger (the batch's own rollouts and --big - 1 more batches'); its lower noise must show as a higher cosine.

The reference, E: --e_prompts held-out prompts (delta.py's held-out rows, never in a training batch) with
--e_group responses each, drawn once, split by prompt into --parts equal parts. From each part p, the expected
reward's gradient by REINFORCE with the leave-one-out baseline,
    g_p = 1/N_p sum_i (r_i - mean_{j != i in i's group} r_j) grad log pi(y_i | x_i)
        = 1/N_p sum_i G/(G-1) (r_i - mean_group r) grad log pi(y_i | x_i)
(r: the verifier's verdict, 1 right, 0 wrong; log pi(y): the response's summed token log-probs at the rollout
temperature, the distribution that sampled it): unbiased for grad E[r] over the held-out prompts, since each
response's baseline does not depend on it, and much less noisy than plain REINFORCE; g_E is the mean of the parts.
Also from each part, the held-out discriminator m_p = grad (mean log pi over its right responses - mean over its
wrong ones). A batch direction u (unit) is read against every part: cosine u.g_p / |g_E|, first-order reward gain
of a unit step u.g_p, margin u.m_p; each figure is their mean over batches and parts, its standard error that of a
crossed design, sqrt(s_batches^2 / M + s_parts^2 / P) (conservative), so E's own noise is in it. E's noise also
shrinks every cosine by the same factor (|g| / |g_E| < 1): the cross-products of independent parts estimate |g|^2
unbiasedly (split-part), and the table prints the cosine corrected by it; paired differences and their test do not
depend on the correction. The paired differences from DAPO are taken batch by batch and part by part.

The second view, AdamW's (--precondition CHECKPOINT: a delta.py checkpoint's optimizer state; or
--precondition_steps N: N DAPO steps of the run from the policy on a copy, the policy itself unchanged): each
direction divided elementwise by sqrt(v_hat) + eps (v_hat: AdamW's bias-corrected second moment, eps its own;
parameters with v = 0, which no gradient reached, are left out of this view). Cosine of D u with D g_E, and the
gain and margin of a unit step along D u.

Memory: E's 2P vectors (and D) as flat fp32 vectors, (2P + 1) x 4 bytes a parameter; each batch direction is made
in .grad, read off as running dot products and norms parameter by parameter, and zeroed: none is kept. Each
(batch, algorithm) is a line of --out as it is measured (its dot products and norms; every figure is derived from
them), and a progress line per batch goes to stderr. One process (no torchrun).
"""
import argparse
import contextlib
import copy
import dataclasses
import json
import math
import os
import shutil
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import checkpoints  # noqa: E402
import delta  # noqa: E402

CONTROL = "big"  # the positive control's name in --algos


def signal_subset(largest):
    """Sec. 5's lam subset (the top or bottom half by DelTA's lam) ranked over the tokens that carry a gradient
    only, those of responses of non-zero advantage (issue 51, item 3); delta.py's lam_top and lam_bottom rank every
    valid token, the zero-advantage responses' too (at lam_zero)."""
    def weights(run, roll):
        signal = roll["batch"]["response_mask"] & (roll["adv"] != 0)[:, None]  # [N, R]
        return delta.top_share_mask(delta.delta_weights(run, roll), signal, 0.5, largest, run.group).float()
    return weights


SIGNAL_SUBSETS = {f"lam_{side}_signal": dict(delta.ALGOS["lam_top"], weights=signal_subset(side == "top"))
                  for side in ("top", "bottom")}


def algorithm(name):
    """An algorithm of --algos: delta.py's ALGOS, or one of SIGNAL_SUBSETS."""
    return delta.ALGOS[name] if name in delta.ALGOS else SIGNAL_SUBSETS[name]


DEFAULT_ALGOS = f"dapo,{CONTROL},forking,lam_top,lam_bottom,delta"
FIXED = ("source", "dataset", "task", "seed", "prompts_per_step", "group_size", "temperature", "max_new_tokens",
         "instruction", "answer_format", "K", "lam_min", "lam_max", "forking_ratio", "big", "e_prompts", "e_group",
         "parts", "precondition", "precondition_steps", "precision")  # what a --resume must share with the file
WAS = {"precision": "auto"}  # a setting a file written before it was recorded was measured with
LEVEL = 0.05  # the one-sided tests' level (docs/direction.md's rule)


def options(argv):
    """The bench's own flags, and the rest for delta.py's parser."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False,
                                epilog="every other flag is delta.py's: python delta.py --help")
    p.add_argument("--batches", type=int, default=8, help="M, the independent training batches")
    p.add_argument("--first_batch", type=int, default=0, help="measure batches first_batch .. first_batch + M - 1 "
                   "(fresh batches beside another file's, with its E: --e_from)")
    p.add_argument("--algos", default=DEFAULT_ALGOS, help=f"comma-separated ALGOS keys and {CONTROL} (the control)")
    p.add_argument("--big", type=int, default=4, help="K: the positive control's batch is K times a step's")
    p.add_argument("--e_prompts", type=int, default=0, help="held-out prompts in E; 0: all of delta.py's held-out")
    p.add_argument("--e_group", type=int, default=0, help="responses per held-out prompt in E; 0: --group_size")
    p.add_argument("--parts", type=int, default=4, help="P, E split by prompt into this many parts (>= 2)")
    p.add_argument("--precondition", default="", help="a delta.py checkpoint: AdamW's second moments, 2nd view")
    p.add_argument("--precondition_steps", type=int, default=0, help="else N DAPO steps from the policy: their v")
    p.add_argument("--e_on_cpu", action="store_true", help="keep E's vectors in host memory (a GPU run)")
    p.add_argument("--categories", action="store_true",
                   help="DelTA's lam by token category and side in its lines (claim (b), tools/rollouts.py's table)")
    p.add_argument("--out", default="", help="the results file (jsonl); default runs/direction-<model>-s<seed>.jsonl")
    p.add_argument("--resume", action="store_true", help="skip the (batch, algorithm) pairs already in --out")
    p.add_argument("--e_from", default="", help="measure against E of this results file (the same settings): its "
                   "E line and the vectors saved beside it, not drawn again")
    p.add_argument("--report", default="", help="print the tables of a results file, nothing run")
    opts, rest = p.parse_known_args(argv)
    opts.algos = [x for x in opts.algos.split(",") if x]
    unknown = [x for x in opts.algos if x != CONTROL and x not in delta.ALGOS and x not in SIGNAL_SUBSETS]
    if unknown or "dapo" not in opts.algos:
        p.error(f"--algos {','.join(opts.algos)}: need dapo, and each of {', '.join([*delta.ALGOS, *SIGNAL_SUBSETS])} "
                f"or {CONTROL}")
    if opts.parts < 2 or opts.batches < 1 or opts.big < 2 or opts.first_batch < 0:
        p.error("--parts must be >= 2 (E's noise needs two parts), --batches >= 1, --big >= 2, --first_batch >= 0")
    return opts, rest


def boot(argv, workdir):
    """A run as delta.py prepares one (its arguments, checks, rows, the model, the tiny default warm-started), in
    one process (a GPU when there is one)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.exit("direction.py runs in one process: run it with python, not torchrun")
    return delta.prepare(delta.parse_args(argv + ["--progress", "false", "--output_dir", workdir]))


# ---------------------------------------------------------------------------------- gradients, read off as dots
def trainable(model):
    return [p for p in model.parameters() if p.requires_grad]


def zero_grad(params):
    for p in params:
        p.grad = None


def flat_grad(params, out):
    """The gradient in .grad copied into the flat vector `out` [n] (0 where a parameter has none), then zeroed."""
    offset = 0
    for p in params:
        k = p.numel()
        if p.grad is None:
            out[offset:offset + k].zero_()
        else:
            out[offset:offset + k].copy_(p.grad.reshape(-1))
        offset += k
    zero_grad(params)
    return out


def dot64(e, g, chunk=1 << 20):
    """e [V, k] @ g [k] summed in float64 a chunk at a time: [V] float64 on the CPU."""
    return sum((e[:, s:s + chunk].double() @ g[s:s + chunk].double()).cpu() for s in range(0, g.numel(), chunk))


def gram(vectors, scale=None, chunk=1 << 20):
    """vectors [V, n] (each scaled elementwise by `scale` [n] if given) -> their dot products [V, V], in float64."""
    out = torch.zeros(vectors.shape[0], vectors.shape[0], dtype=torch.float64)
    for s in range(0, vectors.shape[1], chunk):
        x = vectors[:, s:s + chunk].double() * (1.0 if scale is None else scale[s:s + chunk].double())
        out += (x @ x.T).cpu()
    return out


def read_dots(params, vectors, d=None, sign=-1.0):
    """The direction g = sign * .grad against the rows of `vectors` [V, n], parameter by parameter, in float64
    sums: |g|^2 and g.e for each row e; with the preconditioner d [n] (D = diag(d)) also |D g|^2, (D g).e and
    (D g).(D e). No flat copy of g is made. Zeroes .grad."""
    V, device, zero = vectors.shape[0], vectors.device, torch.zeros((), dtype=torch.float64)
    out = dict(g2=zero, dots=torch.zeros(V, dtype=torch.float64))
    if d is not None:
        out.update(pg2=zero, pdots=torch.zeros(V, dtype=torch.float64), ppdots=torch.zeros(V, dtype=torch.float64))
    offset = 0
    for p in params:
        k = p.numel()
        if p.grad is not None:
            g, e = sign * p.grad.reshape(-1).float().to(device), vectors[:, offset:offset + k]  # [k], [V, k]
            out["g2"] = out["g2"] + dot64(g[None], g)[0]
            out["dots"] += dot64(e, g)
            if d is not None:
                gd = g * d[offset:offset + k]  # [k] D g
                out["pg2"] = out["pg2"] + dot64(gd[None], gd)[0]
                out["pdots"] += dot64(e, gd)
                out["ppdots"] += dot64(e, gd * d[offset:offset + k])
        offset += k
    zero_grad(params)
    return {key: x.tolist() for key, x in out.items()}


# ---------------------------------------------------------------------------------- rollouts, as a step draws them
@contextlib.contextmanager
def swapped(run, **changes):  # run.args with other values for a while (delta.verify reads group_size)
    saved = run.args
    run.args = dataclasses.replace(saved, **changes)
    try:
        yield
    finally:
        run.args = saved


def rollout(run, rows, n, seed):
    """n responses to each row's prompt at the run's temperature, from generators seeded by `seed`, and their
    verdicts: {"batch", "rows", "correct" [N]}."""
    a = run.args
    with torch.random.fork_rng(devices=run.accel.rng_devices()):
        torch.manual_seed(seed)
        batch = delta.sample(run.sampler, [delta.prompt_text(run.tok, r["question"], a.instruction) for r in rows],
                             a.temperature, n, seed=seed)
    with swapped(run, group_size=n):
        correct, _ = delta.verify(run, batch, rows)  # its reward (the run's algo's overlong) is made per algorithm
    return dict(batch=batch, rows=rows, correct=correct.float().to(run.device))


def advantages(run, roll, algo):
    """Eq. A for `algo`: its reward (the verdict, with DAPO's overlong penalty where the algorithm has it) and its
    scale, as delta.verify and rl_step make them."""
    a, lengths = run.args, roll["batch"]["response_mask"].sum(1)
    reward = roll["correct"] + (delta.overlong_penalty(lengths, a.max_new_tokens, a.overlong_buffer,
                                                       a.overlong_penalty) if algo["overlong"] else 0.0)
    return delta.group_advantages(reward, a.group_size, algo["scale"])


def scored(run, roll, algos=("dapo",), features=False):
    """The score pass (delta.score): the old log-probs into the batch, the entropy and, with `features`, Eq. D's
    features of the DAPO advantages' side tokens into the roll. The rows scored: those of advantage != 0 under any
    of `algos` (their rewards and scales may differ), every row when one of them scores all (forking's entropy)."""
    batch, adv = roll["batch"], advantages(run, roll, delta.ALGOS["dapo"])
    algos = [algorithm(x) for x in algos]
    keep = None if any(x["score_all"] for x in algos) else torch.stack([advantages(run, roll, x) != 0
                                                                         for x in algos]).any(0)  # [N]
    plans = delta.micro_batches(run, batch, keep)
    batch["old_logp"], roll["entropy"], roll["features"] = delta.score(run, batch, adv, plans, features)
    roll.update(adv=adv, stats={})
    return roll


def surrogate_grad(run, algo, rolls, weights):
    """The gradient of `algo`'s surrogate (its loss, to minimise) at ratio 1 into .grad: the rollouts `rolls` as one
    mini-batch, token weights `weights` (one [N, R] or None per roll), each term divided by the normaliser of all of
    them, through delta.micro_batch_loss as update() runs it. Rows of advantage 0 add 0 and are not forwarded."""
    a, parts, total = run.args, [], 0.0
    for roll, w in zip(rolls, weights):
        batch, adv = roll["batch"], advantages(run, roll, algo)
        mask = batch["response_mask"]  # [N, R]
        w = torch.ones_like(mask, dtype=torch.float32) if w is None else w.float()
        w, row_count = algo["normaliser"](mask, w, a)  # [N, R], [N]
        parts.append((batch, adv, w, mask & (adv != 0)[:, None]))
        total += float(row_count.sum())
    count = torch.tensor(max(total, 1.0), dtype=torch.float64, device=run.device)
    saved, run.algo = run.algo, algo
    run.train_model.train()
    try:
        for batch, adv, w, live in parts:
            for rows in (rows for groups in delta.micro_batches(run, batch, adv != 0) for rows in groups):
                part, _ = delta.micro_batch_loss(run, batch, adv, w, live, rows, count, 1.0)
                part[0].backward()  # the policy term (an MoE's router term is no part of the direction)
    finally:
        run.algo = saved
        run.train_model.eval()


def logp_grad(run, batch, coef):
    """grad of sum_i coef_i log pi(y_i) into .grad: log pi(y) the response's summed token log-probs at the run's
    temperature; rows of coef 0 are not forwarded."""
    a, mask = run.args, batch["response_mask"]
    run.train_model.train()
    for rows in (rows for groups in delta.micro_batches(run, batch, coef != 0) for rows in groups):
        ids, am, Rm = delta.micro_batch(batch, rows)
        with delta.autocast(mask.device, delta.bf16_compute(a, mask.device)):
            logp = delta.response_logprobs(run.train_model, ids, am, Rm, a.temperature, a.head_chunk_tokens,
                                           checkpoint=True)[0][:len(rows)]  # [b, Rm]
        ((logp.float() * mask[rows, :Rm]).sum(1) * coef[rows]).sum().backward()
    run.train_model.eval()


def held_out(run, opts, params, n, partial=None):
    """E: the held-out rollouts, split by prompt into P parts; per part the leave-one-out REINFORCE gradient and
    the discriminator gradient. Returns (vectors [2P, n] fp32: rows 0..P-1 g_p, P..2P-1 m_p, E's summary).
    `partial`: a folder where the rollouts and each part's two vectors are kept as they are made, so that a stopped
    run (SIGINT, SIGTERM: after the part under way) goes on from its next part; the caller removes it."""
    a, P, t = run.args, opts.parts, time.perf_counter()
    G = opts.e_group or a.group_size
    rows = run.eval_rows[:opts.e_prompts or None]
    per = len(rows) // P
    if per < 1 or G < 2:
        sys.exit(f"E: {len(rows)} held-out prompts for {P} parts, {G} responses each: need a prompt a part and 2 "
                 "responses a prompt (--e_prompts, --eval_size, --e_group)")
    rows, step = rows[:per * P], a.mini_batch_prompts * a.group_size  # the gradient passes' mini-batches
    if len(rows) * G % step:
        sys.exit(f"E: {len(rows)} held-out prompts x {G} responses must be a multiple of --mini_batch_prompts x "
                 f"--group_size ({step}): choose --e_prompts or --e_group")
    kept = lambda name: os.path.join(partial, name) if partial else None  # noqa: E731
    if partial and os.path.exists(kept("rollout.pt")):
        roll, spent = torch.load(kept("rollout.pt"), map_location=run.device), 0.0
        print(f"E: its rollouts read back from {partial}", file=sys.stderr, flush=True)
    else:
        roll, spent = rollout(run, rows, G, seed=(a.seed + 1) * 1_000_003), 0.0
        if partial:
            os.makedirs(partial, exist_ok=True)
            save_whole(roll, kept("rollout.pt"))
    correct, device = roll["correct"], "cpu" if opts.e_on_cpu else run.device
    vectors = torch.zeros(2 * P, n, dtype=torch.float32, device=device)
    r = correct.view(-1, G)
    loo = (G / (G - 1) * (r - r.mean(1, keepdim=True))).view(-1)  # [N] r_i - the mean of the group's others
    part = torch.arange(len(correct), device=correct.device) // (per * G)  # [N] each response's part
    sides = []
    for p in range(P):
        mine = (part == p).float()
        right, wrong = correct * mine, (1 - correct) * mine
        sides.append([int(right.sum()), int(wrong.sum())])
        if partial and os.path.exists(kept(f"part-{p}.pt")):  # made before a stop
            done = torch.load(kept(f"part-{p}.pt"), mmap=True)  # mapped: files of an older run hold all of E
            vectors[p], vectors[P + p], spent = done["g"], done["m"], spent + done["seconds"]
            continue
        start = time.perf_counter()
        logp_grad(run, roll["batch"], loo * mine / (per * G))  # g_p
        flat_grad(params, vectors[p])
        if right.sum() and wrong.sum():  # m_p; a part without both sides has none (0)
            logp_grad(run, roll["batch"], right / right.sum() - wrong / wrong.sum())
            flat_grad(params, vectors[P + p])
        if partial:
            save_whole(dict(g=vectors[p].clone().cpu(), m=vectors[P + p].clone().cpu(),  # clone: a view's
                            seconds=time.perf_counter() - start), kept(f"part-{p}.pt"))  # save writes all of E
        print(f"E: part {p + 1} of {P} in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        if p + 1 < P and delta.stopped(run):
            print(f"E: stopped after part {p + 1} of {P}; the same command with --resume goes on from there",
                  file=sys.stderr)
            sys.exit(0)
    mixed = ((r.min(1).values != r.max(1).values).float().mean())
    grams = gram(vectors)  # [2P, 2P]
    summary = dict(kind="E", prompts=len(rows), group=G, responses=len(correct), accuracy=float(correct.mean()),
                   mixed_groups=float(mixed), sides=sides, gram=grams[:P, :P].tolist(),
                   margin_gram=grams[P:, P:].tolist(), tokens=int(roll["batch"]["response_mask"].sum()),
                   seconds=round(time.perf_counter() - t + spent, 2))
    return vectors, summary


def save_whole(obj, path):
    """torch.save to `path` whole or not at all (a stop never leaves half a file that a resume would read)."""
    torch.save(obj, path + ".tmp")
    os.replace(path + ".tmp", path)


def preconditioner(run, opts, params):
    """AdamW's 1 / (sqrt(v_hat) + eps) [n] (0 where v = 0) from a checkpoint's optimizer state or from
    --precondition_steps DAPO steps on a copy of the run; None without either."""
    if not opts.precondition and not opts.precondition_steps:
        return None
    if opts.precondition:
        zero_grad(params)  # torch's loader makes AdamW's state by a step at lr 0 only where no parameter has a grad
        checkpoints.load_state(opts.precondition, run.model, run.optimizer)
        optimizer, order = run.optimizer, params
    else:
        warm = delta.make_run(dataclasses.replace(run.args, algo="dapo"), copy.deepcopy(run.model), run.tok,
                              run.source, device=run.device, train_rows=run.train_rows, eval_rows=run.eval_rows)
        with torch.random.fork_rng(devices=run.accel.rng_devices()):
            torch.manual_seed(run.args.seed + 17)
            for step in range(opts.precondition_steps):
                m = delta.rl_step(warm, step)
                print(f"preconditioner: DAPO step {step + 1}/{opts.precondition_steps}, reward "
                      f"{m['reward/mean']:.3f}", file=sys.stderr, flush=True)
        optimizer, order = warm.optimizer, trainable(warm.model)
    parts = []
    for p in order:
        state, group = optimizer.state.get(p, {}), next(g for g in optimizer.param_groups if any(
            q is p for q in g["params"]))
        if "exp_avg_sq" not in state or float(state["step"]) == 0:
            parts.append(torch.zeros(p.numel(), device=run.device))
            continue
        v_hat = state["exp_avg_sq"].reshape(-1).float() / (1 - group["betas"][1] ** float(state["step"]))
        parts.append(torch.where(v_hat > 0, 1.0 / (v_hat.sqrt() + group["eps"]), 0.0).to(run.device))
    zero_grad(params)
    return torch.cat(parts)


# ---------------------------------------------------------------------------------- the batches
def batch_rows(run, b, k):
    """Batch b's prompts and the positive control's k - 1 more batches' (distinct), from a permutation of the
    training rows seeded by the seed and b: [k lists of --prompts_per_step rows], the batch's first."""
    a = run.args
    perm = torch.randperm(len(run.train_rows), generator=torch.Generator().manual_seed(a.seed * 1_000_003 + b))
    p = a.prompts_per_step
    return [[run.train_rows[i] for i in perm[j * p:(j + 1) * p].tolist()] for j in range(k)]


def category_lam(run, roll, lam):
    """Claim (b) on a batch's own rollouts (--categories): DelTA's lam [N, R] by token category and side, as
    tools/rollouts.py reads a dump of delta.py's (lam, lamw, share and share_uniform a category and side; rho_p a
    side); a model folder's text in REAL_CATEGORIES."""
    import engines
    import rollouts
    (v, _, where), mask = roll["features"], roll["batch"]["response_mask"]
    dump = dict(batch=roll["batch"], adv=roll["adv"], lam=lam,
                v_norm=engines.feature_norms(v, where, mask, run.args.feature_chunk_tokens),
                questions=[r["question"] for r in roll["rows"]],
                args=dict(group_size=run.args.group_size, model=run.args.model, answer_format=run.answer_format))
    return rollouts.category_stats(run.tok, dump)


def measure_batch(run, opts, b, todo, params, vectors, d, write):
    """Batch b: its rollouts (and the control's), then each algorithm of `todo`'s direction, read off and written
    as a line; returns the batch's lines."""
    a, t0, lines = run.args, time.perf_counter(), []
    k = opts.big if CONTROL in todo else 1
    prompts = batch_rows(run, b, k)
    seed = lambda j: (a.seed * 1_000_003 + b) * 101 + j  # noqa: E731  batch b's j-th sub-batch, whatever k is
    main = rollout(run, prompts[0], a.group_size, seed(0))
    algos = [x if x != CONTROL else "dapo" for x in todo]
    scored(run, main, algos, features=any(algorithm(x)["features"] for x in algos))
    t1 = time.perf_counter()
    for name in todo:
        t = time.perf_counter()
        if name == CONTROL:
            extra = [scored(run, rollout(run, rows, a.group_size, seed(j))) for j, rows in enumerate(prompts[1:], 1)]
            surrogate_grad(run, delta.ALGOS["dapo"], [main] + extra, [None] * k)
            reward = float(torch.cat([r["correct"] for r in [main] + extra]).mean())
        else:
            algo = algorithm(name)
            weights = algo["weights"](run, main) if algo["weights"] else None  # lam, the forking mask, a subset
            surrogate_grad(run, algo, [main], [weights])
            reward = float(main["correct"].mean())
        groups = main["correct"].view(-1, a.group_size)
        line = dict(kind="direction", batch=b, algo=name, reward=reward,
                    mixed_groups=float((groups.min(1).values != groups.max(1).values).float().mean()),
                    **read_dots(params, vectors, d), seconds=round(time.perf_counter() - t, 2))
        if opts.categories and name == "delta":
            line["categories"] = category_lam(run, main, weights)
        write(line)
        lines.append(line)
    main["features"] = None
    return lines, t1 - t0, time.perf_counter() - t0


# ---------------------------------------------------------------------------------- the figures
def t_sf(t, df):
    """P(T > t) for Student's t with df degrees of freedom (Simpson's rule on the density; no scipy needed)."""
    if not math.isfinite(t):
        return 0.0 if t > 0 else 1.0 if t < 0 else float("nan")
    c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    f = lambda x: math.exp(c - (df + 1) / 2 * math.log1p(x * x / df))  # noqa: E731
    n, x = 2000, abs(t)
    h = x / n
    area = h / 3 * (f(0) + f(x) + sum((4 if i % 2 else 2) * f(i * h) for i in range(1, n)))
    return 0.5 - area if t >= 0 else 0.5 + area


def crossed(x):
    """x [M, P] (batches by E's parts) -> (mean, standard error, degrees of freedom). The error is
    sqrt(var(row means) / M + var(column means) / P), conservative for a crossed design, so both the batches' and
    E's noise are in it; the degrees of freedom Satterthwaite's for that sum (between P - 1 and M + P - 2)."""
    M, P = x.shape
    a = float(x.mean(1).var()) / M if M > 1 else float("nan")  # the batches' share of the variance of the mean
    c = float(x.mean(0).var()) / P if P > 1 else 0.0  # E's parts'
    df = (a + c) ** 2 / (a ** 2 / (M - 1) + (c ** 2 / (P - 1) if P > 1 else 0.0)) if M > 1 and a + c > 0 else float(
        "nan")
    return float(x.mean()), math.sqrt(a + c), df


def figures(lines):
    """Everything the tables print, from the results file's lines: per algorithm and view, [M, P] cells of cosine,
    gain and margin, their crossed means and errors, and the paired differences from DAPO with one-sided p."""
    settings = next(x for x in lines if x.get("kind") == "settings")
    E = next(x for x in lines if x.get("kind") == "E")
    gr, mgr = torch.tensor(E["gram"], dtype=torch.float64), torch.tensor(E["margin_gram"], dtype=torch.float64)
    P = gr.shape[0]
    gE2 = float(gr.sum()) / P ** 2  # |g_E|^2, g_E the mean of the parts
    signal2 = float(gr.sum() - gr.trace()) / (P * (P - 1))  # unbiased |grad E[r]|^2: independent parts
    pre = E.get("pre_gram")
    pE2 = float(torch.tensor(pre, dtype=torch.float64).sum()) / P ** 2 if pre else None
    rows = {}
    for x in (x for x in lines if x.get("kind") == "direction"):
        rows[(x["batch"], x["algo"])] = x  # a later line of a pair replaces an earlier one
    algos = list(dict.fromkeys(x["algo"] for x in rows.values()))
    batches = sorted({b for b, _ in rows})
    # the batches measured for every algorithm (a batch still being measured is left out)
    common = [b for b in batches if all((b, n) in rows for n in algos)]
    cells, have = {}, {}  # per algorithm: [M, P] cells over `common`, NaN rows where it has no direction
    for name in algos:
        xs = [rows[(b, name)] for b in common]
        if not xs:
            continue
        have[name] = torch.tensor([x["g2"] > 0 for x in xs])  # [M] a batch whose tokens all have weight 0 has none
        norm = torch.tensor([x["g2"] if x["g2"] > 0 else float("nan") for x in xs], dtype=torch.float64).sqrt()[:, None]
        dots = torch.tensor([x["dots"] for x in xs], dtype=torch.float64)  # [M, 2P]
        views = {"raw": dict(cosine=dots[:, :P] / norm / math.sqrt(gE2), gain=dots[:, :P] / norm,
                             margin=dots[:, P:] / norm)}
        if pre and all("pg2" in x for x in xs):
            pnorm = torch.tensor([x["pg2"] if x["g2"] > 0 else float("nan") for x in xs], dtype=torch.float64).sqrt()
            pd = torch.tensor([x["pdots"] for x in xs], dtype=torch.float64)
            ppd = torch.tensor([x["ppdots"] for x in xs], dtype=torch.float64)
            views["AdamW"] = dict(cosine=ppd[:, :P] / pnorm[:, None] / math.sqrt(pE2), gain=pd[:, :P] / pnorm[:, None],
                                  margin=pd[:, P:] / pnorm[:, None])
        cells[name] = views
    out = dict(settings=settings, E=E, P=P, gE2=gE2, signal2=signal2, batches=common, dropped=len(batches) -
               len(common), algos=[n for n in algos if n in cells], table={},
               without={n: int((~h).sum()) for n, h in have.items() if not h.all()})
    margined = [p for p in range(P) if mgr[p, p] > 0]  # parts with both right and wrong responses

    def paired(a, b, x, y):  # a - b over the batches where both have a direction: (mean, se, one-sided p, df, M)
        both = have[a] & have[b]
        m, se, df = crossed(x[both] - y[both]) if both.sum() > 1 else (float("nan"),) * 3
        return m, se, t_sf(m / se, df) if se > 0 and df > 0 else float("nan"), df, int(both.sum())

    for name, views in cells.items():
        for view, metrics in views.items():
            row = {}
            for metric, x in metrics.items():
                x = x[:, margined] if metric == "margin" else x
                row[metric] = crossed(x[have[name]]) if x.numel() and have[name].sum() > 1 else (float("nan"),) * 3
                if name != "dapo" and x.numel():
                    base = cells["dapo"][view][metric]
                    row[metric + " - dapo"] = paired(name, "dapo", x, base[:, margined] if metric == "margin" else base)
            out["table"][(name, view)] = row
    for key, top in (("ordering", "lam_top"), ("ordering_signal", "lam_top_signal")):  # the paper's ordering of
        bottom = top.replace("top", "bottom")  # the lam subsets (Sec. 5), paired; ranked over all tokens, or over
        if {top, bottom} <= set(cells):  # those that carry a gradient
            out[key] = paired(top, bottom, cells[top]["raw"]["cosine"], cells[bottom]["raw"]["cosine"])
    cats = [rows[(b, "delta")]["categories"] for b in common if "categories" in rows.get((b, "delta"), {})]
    if cats:  # claim (b): each figure of category_lam over the batches (mean, standard error, batches)
        keys = list(dict.fromkeys(k for c in cats for k in c))
        out["categories"] = {k: (float(x.mean()), float(x.std() / math.sqrt(len(x))) if len(x) > 1 else float("nan"),
                                 len(x)) for k in keys
                             for x in [torch.tensor([c[k] for c in cats if k in c], dtype=torch.float64)]}
    if "dapo" in cells and have["dapo"].sum() > 1:  # the power calculation's inputs, from DAPO's arm alone
        x = cells["dapo"]["raw"]["cosine"][have["dapo"]]
        sd, se_E = float(x.mean(1).std()), float(x.mean(0).std()) / math.sqrt(P)
        z = 1.6449 + 0.8416  # one-sided 0.05, power 0.8
        need = lambda d: math.ceil((z * sd / d) ** 2) if d > 0 else "-"  # noqa: E731
        out["power"] = dict(sd_batches=sd, se_E=se_E, M=[(d, need(d)) for d in (0.1 * float(x.mean()),
                                                                                0.25 * float(x.mean()))])
        if "delta" in cells and (have["dapo"] & have["delta"]).sum() > 1:  # the paired difference's two terms
            both = have["dapo"] & have["delta"]  # (crossed's), which size a rule by their ratio to DAPO's own
            y = cells["delta"]["raw"]["cosine"][both] - cells["dapo"]["raw"]["cosine"][both]
            out["power"]["pair"] = dict(sd_batches=float(y.mean(1).std()), se_E=float(y.mean(0).std()) / math.sqrt(P))
    return out


def verdict(f):
    """The one-line answer, by docs/direction.md's rule: the control's gate first, then DelTA - DAPO on the cosine."""
    q = "DelTA's direction is closer to E's gradient than DAPO's:"
    if "delta" not in f["algos"]:
        return f"{q} not measured (--algos has no delta: a pilot)"
    if CONTROL not in f["algos"]:
        return f"{q} cannot tell (no positive control: add {CONTROL} to --algos)"
    m, se, p = f["table"][(CONTROL, "raw")]["cosine - dapo"][:3]
    if not p < LEVEL:
        return (f"{q} cannot tell (positive control failed: {CONTROL} - dapo cosine {m:+.4f}, se {se:.4f}, one-sided "
                f"p = {p:.3f})")
    m, se, p, _, M = f["table"][("delta", "raw")]["cosine - dapo"]
    return (f"{q} {'yes' if p < LEVEL else 'no'} (delta - dapo cosine {m:+.4f}, se {se:.4f}, one-sided p = {p:.3f}, "
            f"{M} batches; the positive control passed)")


def report(lines, out=sys.stdout):
    f = figures(lines)
    E, P = f["E"], f["P"]
    share = f["signal2"] / f["gE2"] if f["gE2"] > 0 else float("nan")
    fix = 1 / math.sqrt(share) if share > 0 else float("nan")
    print(f"E: {E['prompts']} held-out prompts x {E['group']} responses, accuracy {100 * E['accuracy']:.1f} %, "
          f"{100 * E['mixed_groups']:.0f} % of groups mixed, {P} parts; |g_E| = {math.sqrt(f['gE2']):.4g}, split-part "
          f"signal share {share:.3f} (cosines x {fix:.2f} to correct for E's noise)", file=out)
    print(f"{len(f['batches'])} batches measured for every algorithm" + (f" ({f['dropped']} not measured for all yet)"
          if f["dropped"] else "") + "".join(f"; {n} has no direction in {k} (every token of weight 0): its figures "
                                             "and differences over the rest" for n, k in f["without"].items()),
          file=out)
    cell = lambda x: f"{x[0]:.4g} ± {x[1]:.2g}"  # noqa: E731
    diff = lambda x: "-" if x is None else (f"{x[0]:+.4g} ± {x[1]:.2g} (p {x[2]:.3f}, df {x[3]:.0f}" + (  # noqa: E731
        f", {x[4]} batches)" if x[4] != len(f["batches"]) else ")"))
    for view in ("raw", "AdamW"):
        names = [n for n in f["algos"] if (n, view) in f["table"]]
        if not names:
            continue
        title = "parameter space" if view == "raw" else "under AdamW's preconditioning"
        print(f"\n{title}: mean ± standard error over batches and E's parts; differences paired, one-sided p\n"
              "| algorithm | cosine with g_E | corrected cosine | gain per unit step | held-out margin per unit step "
              "| cosine - dapo | gain - dapo | margin - dapo |\n|---|---|---|---|---|---|---|---|", file=out)
        for n in names:
            row = f["table"][(n, view)]
            corrected = f"{row['cosine'][0] * fix:.4g}" if view == "raw" else "-"
            print(f"| {n} | {cell(row['cosine'])} | {corrected} | {cell(row['gain'])} | {cell(row['margin'])} | "
                  f"{diff(row.get('cosine - dapo'))} | {diff(row.get('gain - dapo'))} | "
                  f"{diff(row.get('margin - dapo'))} |", file=out)
    if "ordering" in f:
        print(f"\nthe paper's ordering of the lam subsets, lam_top - lam_bottom in cosine: {diff(f['ordering'])}",
              file=out)
    if "ordering_signal" in f:
        print("the same, ranked over the tokens that carry a gradient, lam_top_signal - lam_bottom_signal: "
              f"{diff(f['ordering_signal'])}", file=out)
    cats = f.get("categories")
    if cats:
        print("\nclaim (b), DelTA's lam by token category and side on each batch's rollouts (--categories; mean ± "
              "standard error over batches): lam a token, lamw weighted by |A| ||v||, the category's share of the "
              "update under DelTA and under DAPO (uniform lam)\n| side | category | lam | lamw | share, DelTA | "
              "share, DAPO |\n|---|---|---|---|---|---|", file=out)
        for side in ("pos", "neg"):
            for name in dict.fromkeys(k.split("/")[1] for k in cats if k.endswith("/" + side) and k.count("/") == 2):
                got = [cats.get(f"{m}/{name}/{side}") for m in ("lam", "lamw", "share", "share_uniform")]
                print(f"| {'correct' if side == 'pos' else 'incorrect'} | {name} | " + " | ".join(
                    "-" if x is None else f"{x[0]:.3f} ± {x[1]:.3f}" for x in got) + " |", file=out)
        rho = [(side, cats[f"rho_p/{s}"]) for s, side in (("pos", "correct"), ("neg", "incorrect"))
               if f"rho_p/{s}" in cats]
        print("rank correlation of lam with the token's probability: " + ", ".join(
            f"{side} side {x[0]:+.3f} ± {x[1]:.3f}" for side, x in rho), file=out)
    power = f.get("power")
    if power:
        print(f"\npower (docs/direction.md): DAPO's cosine has a between-batch sd of {power['sd_batches']:.4g} and "
              f"E's parts add a standard error of {power['se_E']:.4g} to its mean. Batches for a paired difference d "
              f"at one-sided {LEVEL} with 80 % power, M = (2.486 sd / d)^2 (the differences' sd taken as DAPO's): " +
              ", ".join(f"d = {d:.3g} (a {r} of DAPO's cosine): M = {m}" for (d, m), r in zip(power["M"],
                                                                                          ("tenth", "quarter"))),
              file=out)
        pair = power.get("pair")
        if pair:
            r_b, r_p = pair["sd_batches"] / power["sd_batches"], pair["se_E"] / power["se_E"]
            print(f"delta - dapo: a between-batch sd of {pair['sd_batches']:.4g} ({r_b:.3f} of DAPO's) and E's parts' "
                  f"standard error {pair['se_E']:.4g} ({r_p:.3f} of DAPO's)", file=out)
    line = verdict(f)
    print("\n" + line, file=out)
    return f, line


# ---------------------------------------------------------------------------------- the bench
def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv=None):
    opts, rest = options(sys.argv[1:] if argv is None else list(argv))
    if opts.report:
        return report(read_lines(opts.report))
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as workdir:
        run = boot(rest, workdir)
        return measure(run, opts)


def measure(run, opts):
    a = run.args
    name = os.path.basename(a.model.rstrip("/")) or "tiny"
    path = opts.out or os.path.join(ROOT, "runs", f"direction-{name}-s{a.seed}.jsonl")
    settings = dict(kind="settings", source=a.model or "tiny default", dataset=a.dataset, task=a.task, seed=a.seed,
                    prompts_per_step=a.prompts_per_step, group_size=a.group_size, temperature=a.temperature,
                    max_new_tokens=a.max_new_tokens, instruction=a.instruction, answer_format=run.answer_format,
                    K=a.K, lam_min=a.lam_min, lam_max=a.lam_max, forking_ratio=a.forking_ratio, big=opts.big,
                    e_prompts=opts.e_prompts, e_group=opts.e_group, parts=opts.parts,
                    precondition=opts.precondition, precondition_steps=opts.precondition_steps, precision=a.precision)
    old = read_lines(path) if opts.resume else []
    if not old and os.path.exists(path) and os.path.getsize(path):
        sys.exit(f"{path} holds results: pass --resume to continue it, or choose another --out")
    for flag, lines, where in (("--resume", old, path), ("--e_from", read_lines(opts.e_from) if opts.e_from else [],
                                                          opts.e_from)):
        was = next((x for x in lines if x.get("kind") == "settings"), {}) if lines else settings
        changed = [f"{k} {was.get(k, WAS.get(k))!r} (now {settings[k]!r})" for k in FIXED
                   if was.get(k, WAS.get(k)) != settings[k]]
        if changed:
            sys.exit(f"{flag}: {where} was measured with " + ", ".join(changed))
    E_lines = old or (read_lines(opts.e_from) if opts.e_from else [])  # E: this file's, or the one it is measured by
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    log = open(path, "a")

    def write(line):
        log.write(json.dumps(line) + "\n")
        log.flush()
    params = trainable(run.model)
    n = sum(p.numel() for p in params)
    print(f"{run.source}: {n:,} trainable parameters; E's vectors {2 * opts.parts * n * 4 / 2 ** 30:.2f} GiB; "
          f"results to {path}", file=sys.stderr, flush=True)
    d = preconditioner(run, opts, params)
    was_E = next((x for x in E_lines if x.get("kind") == "E"), None)
    cache = (opts.e_from or path) + ".E.pt"  # E's vectors, for a --resume or --e_from (.gitignore: *.E.pt)
    saved = torch.load(cache, mmap=True) if was_E and os.path.exists(cache) else {}
    if was_E and saved.get("E") == was_E:  # the file's own E: its vectors read back, not drawn again (26 min)
        vectors, E = saved["vectors"].to("cpu" if opts.e_on_cpu else run.device), was_E
        d = d if d is None else d.to(vectors.device)
        print(f"E: read back from {cache}", file=sys.stderr, flush=True)
        if not old:  # a new file measured by another's E
            write(settings)
            write(E)
    elif opts.e_from:
        sys.exit(f"--e_from: {opts.e_from} has no E with its vectors saved beside it ({cache})")
    else:
        partial = path + ".E.parts"  # E as it is made: kept for a --resume of the same settings only
        if os.path.isdir(partial) and not (opts.resume and read_lines(os.path.join(partial, "settings.jsonl")) == [
                settings]):
            shutil.rmtree(partial)
        os.makedirs(partial, exist_ok=True)
        with open(os.path.join(partial, "settings.jsonl"), "w") as f:
            f.write(json.dumps(settings) + "\n")
        vectors, E = held_out(run, opts, params, n, partial)
        if d is not None:
            d = d.to(vectors.device)
            E["pre_gram"], E["pre_dropped"] = gram(vectors[:opts.parts], d).tolist(), float((d == 0).float().mean())
        if was_E:  # the same policy and E, else the file's earlier batches were read against another reference
            was, now = torch.tensor(was_E["gram"]), torch.tensor(E["gram"])
            if not torch.allclose(was, now, rtol=1e-3, atol=1e-4 * float(now.diagonal().max())):
                sys.exit(f"--resume: E's gradient differs from the one in {path} (another policy, or other samples): "
                         "start a new --out")
        else:
            write(settings)
            write(E)
        save_whole({"E": was_E or E, "vectors": vectors.cpu()}, cache)
        shutil.rmtree(partial)
    print(f"E: {E['responses']} responses, accuracy {E['accuracy']:.3f}, {E['seconds']:.1f} s", file=sys.stderr,
          flush=True)
    done = {(x["batch"], x["algo"]) for x in old if x.get("kind") == "direction"}
    last = opts.first_batch + opts.batches
    for b in range(opts.first_batch, last):
        todo = [x for x in opts.algos if (b, x) not in done]
        if not todo:
            continue
        lines, t_roll, t_all = measure_batch(run, opts, b, todo, params, vectors, d, write)
        gE = math.sqrt(max(sum(map(sum, E["gram"])), 0.0)) / opts.parts  # |g_E|
        cosine = lambda x: sum(x["dots"][:opts.parts]) / opts.parts / max(math.sqrt(x["g2"]) * gE, 1e-300)  # noqa
        cos = " ".join(f"{x['algo']} {cosine(x):+.4f}" for x in lines)
        print(f"batch {b + 1}/{last}: reward {lines[0]['reward']:.3f}, mixed groups "
              f"{lines[0]['mixed_groups']:.0%}, {t_all:.1f} s (rollouts and scoring {t_roll:.1f}); cosine: {cos}",
              file=sys.stderr, flush=True)
        if delta.stopped(run):  # SIGINT or SIGTERM (delta.catch_stop): the batch is in the file; a second one kills
            print(f"stopped after batch {b + 1} of {last}: the same command with --resume continues (no "
                  "tables from a part of the batches: --report prints them)", file=sys.stderr)
            log.close()
            return None
    log.close()
    return report(read_lines(path))


if __name__ == "__main__":
    try:
        main()
    except delta.ArgumentError as e:
        sys.exit(f"direction.py: error: {e}")
