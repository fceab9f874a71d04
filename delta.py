"""DelTA: Discriminative Token Credit Assignment for RL from verifiable rewards, in one file.

The paper (Zhang, Wu and Lin, arXiv 2605.21467) and this file, in the same order:
    Eq. A      group_advantages     the response advantage: the group-normalised reward
    Eq. D      token_features       v = (1 - pi_old(o_t)) h_t, the gradient of log pi(o_t) w.r.t. its LM-head row
    Sec. 3.2   delta_coefficients   centroids, margins, soft scores, refinement, lam in a band, mean 1
    Eq. B, E   policy_loss          DAPO's clipped surrogate; DelTA multiplies each token's advantage by lam
    baselines  top_share_mask (forking tokens), fipo_weights (FIPO); SAPO is policy_loss(sapo_tau=...)
These functions are copyable: pure torch, no dependency on the rest of the file, and a collective call only on a
process group passed as `group`. Then the trainer: rl_step (one rollout batch, read like the paper's algorithm box)
and its helpers in call order, ALGOS (each algorithm as data), the step's mechanics, the engine seam (the samplers
in sampling.py, DDP and FSDP2 in engines.py), the main loop (prepare a run, train it), and the arguments.
Companions, imported where first needed: rewards.py (verifiers), tasks.py (the embedded tasks and every dataset
reader), sampling.py (rollouts), engines.py (DDP, FSDP2, GPU memory), checkpoints.py (a run's files), console.py
(the command line, progress lines, how a run ended).

    python delta.py                                   # offline tiny default on the CPU, 5 to 10 minutes
    torchrun --nproc_per_node 2 delta.py              # the same on 2 processes under DDP (gloo on CPU)
    torchrun --nproc_per_node 2 delta.py --fsdp       # parameters, gradients and AdamW state sharded (FSDP2)
    python delta.py --algo dapo                       # baselines: dapo grpo drgrpo forking sapo fipo
    python delta.py --task multistep                  # the other embedded tasks: multistep, filler
    python delta.py --task code --prompts_per_step 16 # RL on code: the rewards run in rewards.py's sandbox
    python delta.py config.yaml                       # every argument from a YAML or JSON file
    python delta.py --output_dir runs/x --resume      # continue from the newest checkpoint
    torchrun --nproc_per_node 8 delta.py --model Qwen/Qwen3-8B-Base --fsdp ...   # the paper's recipe (docs/scale.md)
"""
import contextlib
import dataclasses
import datetime
import gc
import math
import os
import random
import signal
import sys
import time
import types
import warnings
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import transformers
from tqdm import tqdm


# ======== 1. The method, in the paper's order (copyable: pure torch, collectives only on `group`) =====================
def group_advantages(rewards, group_size, scale="group", eps=1e-6):
    """Eq. A. rewards: [N] with the G responses of each prompt adjacent. Returns adv [N].
    scale="group": (R - mean) / (std + eps), GRPO and DAPO (std with Bessel's correction, as verl);
    scale="none": R - mean, Dr. GRPO."""
    r = rewards.float().view(-1, group_size)  # [N/G, G]
    adv = r - r.mean(dim=1, keepdim=True)
    if scale == "group":
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    elif scale != "none":
        raise ValueError(f"scale must be 'group' or 'none', got {scale!r}")
    return adv.view(-1)  # [N]


@torch.no_grad()
def token_features(hidden, logprobs):
    """Eq. D (paper App. F): v = (1 - pi_old(o_t)) h_t, the gradient of log pi(o_t) with respect to the
    LM-head row of o_t. hidden [..., H]: the LM head's input (after the final norm) at the position that
    predicts o_t; logprobs [...]: log pi_old(o_t) at the rollout temperature T. Returns v [..., H].
    (The exact gradient carries a factor 1/T; a constant factor leaves the coefficients unchanged.)"""
    return (1.0 - logprobs.exp()).unsqueeze(-1).to(hidden.dtype) * hidden


@torch.no_grad()
def delta_coefficients(v, adv, mask, K=1, lam_min=0.8, lam_max=1.2, eps=1e-8, stats=None, num_valid=None,
                       chunk_tokens=65536, margin="contrast", gamma=0.0, assign="soft", normalise=True, group=None):
    """Sec. 3.2: token coefficients lam from features v, advantages adv and a mask of the valid tokens.

    Layouts: padded (v [B, T, H], adv [B], mask [B, T]) or packed (v [n, H], adv [n] per token, mask [n]).
    Returns lam in mask's shape, 0 where masked. As the official code: squared Euclidean distances; a
    side's gamma is the population std of its margins (variance floored at eps), one step behind the
    centroids; a side whose scores all vanish gets a zero centroid (sums over max(mass, eps)); tokens
    of zero-advantage responses get lam_min; lam is self-normalised to mean 1 over the valid tokens.
    With no token on one side, every valid token gets 1 (DAPO).
    group: the process group whose ranks hold the rest of the batch; every sum is then all-reduced over
      it (the ranks get what one process gets on the whole batch). None: no collective call at all.
    num_valid: the valid tokens here when v leaves out zero-advantage responses (they need no feature):
      they enter step 6 only, and their lam is stats["lam_zero"].
    chunk_tokens: every pass streams v (on the device, or in pinned CPU memory) in chunks of this many tokens,
      each one cast to float32 alone: the largest temporary is [chunk_tokens, H] float32, never a copy of v.
    Ablations (Sec. 5): margin="own" (own-side closeness only), gamma > 0 (a fixed temperature),
      assign="hard" (1[g > 0], no entropy term), normalise=False (no step 6); K=0 is no refinement and
      lam_min=0, lam_max=1 no linear map.
    stats: receives gamma_pos, gamma_neg, disc_acc (the share of side tokens that the discriminator
      sign(A)(v.W + b) calls right), scale (step 6's factor) and lam_zero.
    """
    def allsum(x):  # float64 [k], summed over the group's ranks
        if group is not None:
            torch.distributed.all_reduce(x, group=group)
        return x

    device, H = mask.device, v.shape[-1]
    dtype = torch.promote_types(v.dtype, torch.float32)  # the arithmetic in float32 or better
    rows = v.reshape(-1, H)  # [N, H], a view of v wherever it lives
    valid = mask.reshape(-1).bool()  # [N]
    A = adv.to(device).reshape(adv.shape + (1,) * (mask.dim() - adv.dim())).expand(mask.shape).reshape(-1).to(dtype)
    pos, neg = valid & (A > 0), valid & (A < 0)  # [N] the "+" and "-" tokens
    w_adv = A.abs() * valid  # [N] advantage mass |A_i| m_{i,t}
    sign = torch.where(A > 0, 1.0, -1.0).to(dtype)  # [N]
    n_here = valid.sum() if num_valid is None else torch.as_tensor(num_valid, device=device)
    n_valid, n_pos, n_neg, n_given = allsum(torch.stack([n_here, pos.sum(), neg.sum(), valid.sum()]).double()).tolist()
    if n_pos == 0 or n_neg == 0:  # no contrast to draw: plain DAPO
        if stats is not None:
            stats.update(gamma_pos=0.0, gamma_neg=0.0, disc_acc=0.0, scale=1.0, lam_zero=1.0)
        return valid.to(dtype).view(mask.shape)
    step = max(1, chunk_tokens)

    def chunks():  # (start, v[start:start + step] on the device)
        return ((s, rows[s:s + step].to(device, dtype, non_blocking=True)) for s in range(0, rows.shape[0], step))

    def centroids(alpha=None):  # steps 1 and 4: the (score-weighted) advantage-weighted mean of each side
        w = w_adv if alpha is None else alpha * w_adv  # [N]
        side_w = torch.stack([w * pos, w * neg])  # [2, N]
        num = torch.zeros(2, H, dtype=torch.float64, device=device)
        for s, vc in chunks():
            num += (side_w[:, s:s + len(vc)] @ vc).double()  # [2, H]
        num_den = allsum(torch.cat([num, side_w.sum(1).double()[:, None]], 1))  # [2, H + 1]
        return (num_den[:, :-1] / num_den[:, -1:].clamp(min=eps)).to(dtype)  # [2, H] mu_+, mu_-

    def margins(mus):  # step 2: opposite-side minus own-side squared distance; DelTA departs from DAPO here
        g = torch.empty_like(A)  # [N]
        for s, vc in chunks():
            if margin == "contrast":  # ||v - mu_-||^2 - ||v - mu_+||^2 = 2 v.(mu_+ - mu_-) - (||mu_+||^2 - ||mu_-||^2)
                g_pos = 2 * (vc @ (mus[0] - mus[1])) - (mus[0].square().sum() - mus[1].square().sum())
                g[s:s + len(vc)] = sign[s:s + len(vc)] * g_pos
            else:  # ablation: -||v - mu_own||^2
                own = torch.where(pos[s:s + len(vc), None], mus[0], mus[1])  # [c, H]
                g[s:s + len(vc)] = -(vc - own).square().sum(-1)
        return g  # [N]

    def gammas(g):  # step 3: the population std of each side's margins (variance floored at eps)
        if gamma > 0:
            return torch.tensor([gamma, gamma], dtype=dtype, device=device)
        out = []
        for side, n in ((pos, n_pos), (neg, n_neg)):
            mean = allsum(g[side].double().sum()[None]) / n
            var = allsum((g[side].double() - mean).square().sum()[None]) / n
            out.append(var.clamp(min=eps).sqrt())
        return torch.cat(out).to(dtype)  # [2]

    def scores(g, gam):  # step 3: alpha = sigmoid(g / gamma_side), max_a a g + gamma H(a) in closed form
        if assign == "hard":  # ablation: no entropy term, the argmax of a g over [0, 1]
            return (g > 0).to(dtype)
        return torch.sigmoid(g / torch.where(A > 0, gam[0], gam[1]))  # [N]

    mus = centroids()  # step 1
    g = margins(mus)  # step 2
    gam = gammas(g)
    for _ in range(K):  # step 4: refinement, on the official schedule
        alpha = scores(g, gam)  # scored with the gamma in force: the std of the previous step's margins
        gam = gammas(g)  # then gamma becomes the std of the margins this step scored (the same at the first step)
        mus = centroids(alpha)
        g = margins(mus)
    # step 5: into [lam_min, lam_max]; tokens of zero-advantage responses get lam_min
    lam = torch.where(pos | neg, lam_min + (lam_max - lam_min) * scores(g, gam), lam_min) * valid  # [N]
    scale = 1.0
    if normalise:  # step 6: mean 1 over the valid tokens of the whole batch
        total = allsum(torch.stack([lam.double().sum()]))[0] + lam_min * (n_valid - n_given)  # + the tokens not given
        scale = n_valid / float(total)
        lam = lam * scale
    if stats is not None:
        right = allsum(torch.stack([((g > 0) & (pos | neg)).sum()]).double())
        stats.update(gamma_pos=float(gam[0]), gamma_neg=float(gam[1]), disc_acc=float(right) / (n_pos + n_neg),
                     scale=scale, lam_zero=lam_min * scale)
    return lam.view(mask.shape)


def policy_loss(logp, old_logp, adv, mask, lam=None, clip_low=0.2, clip_high=0.28, clip_c=10.0, num_tokens=None,
                sapo_tau=None):
    """Eq. B / Eq. E as a loss to minimise: -sum_{i,t} min(r A', clip(r) A') / num_tokens, A' = A_i lam_{i,t}.

    logp, old_logp, mask: [B, T]; adv: [B]; lam: [B, T] or None (= 1: DAPO). The clip is asymmetric,
    [1 - clip_low, 1 + clip_high]; the dual clip caps a negative token's loss at -A' clip_c (None: off).
    num_tokens: the normaliser, by default this call's valid tokens; a trainer passes the count of the
    whole mini-batch (all micro-batches and ranks), so the gradient does not depend on the split. Eq. E
    divides by sum lam, which is the token count once lam has mean 1 (the official code divides by it).
    sapo_tau: (tau_pos, tau_neg) replaces the clipped term by SAPO's gate (Gao et al. 2025),
    -A' (4 / tau) sigmoid(tau (r - 1)), tau_pos where A > 0. Returns (loss, metrics)."""
    valid = mask.bool()
    A_lam = adv[:, None].to(logp.dtype) * (1.0 if lam is None else lam)  # [B, T]  DelTA departs from DAPO here: A lam
    log_ratio = torch.where(valid, logp - old_logp, 0.0)  # [B, T]
    ratio = log_ratio.exp()  # [B, T]
    loss_unclipped = -A_lam * ratio
    loss_clipped = -A_lam * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(loss_unclipped, loss_clipped)  # [B, T] -min(r A', clip(r) A')
    dual = (A_lam < 0) & (per_token > -A_lam * clip_c) if clip_c is not None else torch.zeros_like(valid)  # [B, T]
    per_token = torch.where(dual, -A_lam * clip_c if clip_c is not None else 0.0, per_token)  # -A' c at most, A' < 0
    if sapo_tau is not None:  # SAPO departs from DAPO here: a soft gate instead of both clips
        tau = torch.where(adv[:, None] > 0, sapo_tau[0], sapo_tau[1]).to(logp.dtype)  # [B, 1]
        per_token = -A_lam * (4.0 / tau) * torch.sigmoid(tau * (ratio - 1.0))
    n_here = valid.sum()
    loss = torch.where(valid, per_token, 0.0).sum() / (n_here if num_tokens is None else num_tokens)
    with torch.no_grad():
        count = n_here.clamp(min=1)
        metrics = {"clipfrac": ((loss_clipped > loss_unclipped) & valid).sum() / count,
                   "clipfrac_dual": (dual & valid).sum() / count,
                   "approx_kl": torch.where(valid, ratio - 1 - log_ratio, 0.0).sum() / count}  # k3 of KL(old || new)
    return loss, metrics


# --- the baselines' departures from DAPO ------------------------------------------------------------------
def top_share_mask(values, mask, ratio=0.2, largest=True, group=None):
    """The valid tokens whose value is among the top `ratio` of the batch (bottom: largest=False), ties at
    the threshold kept. Forking tokens (Wang et al. 2025): the entropy's top 20 %; the paper's Sec. 5
    subsets: lam's top or bottom 50 %. values, mask: [B, T]. group: as in delta_coefficients."""
    import math
    picked = values[mask.bool()]  # [n] in values' own dtype: threshold and comparison alike
    if group is not None:  # every rank's values, for the global threshold
        parts = [None] * torch.distributed.get_world_size(group)
        torch.distributed.all_gather_object(parts, picked.cpu(), group=group)
        picked = torch.cat(parts).to(values.device)
    if picked.numel() == 0:
        return torch.zeros_like(mask, dtype=torch.bool)
    threshold = picked.topk(max(1, math.ceil(ratio * picked.numel())), largest=largest).values[-1]
    return mask.bool() & ((values >= threshold) if largest else (values <= threshold))  # [B, T]


def fipo_weights(logp, old_logp, adv, mask, decay=32.0, low=0.8, high=1.2, safety=3.0, clip_c=10.0, chunk=256):
    """FIPO (Ma et al. 2026): influence weights f from the discounted future KL of each token, no gradient.
    FutureKL_t = sum_{k >= t} gamma^(k-t) M_k D_k, D = log(pi / pi_old) clamped to +-20, M = [D <= log c],
    gamma = 2^(-1/decay); f = clip(exp(FutureKL), low, high), clipped to [0.8, 1] where A < 0 and r > safety.
    Returns (f [B, T], keep [B]): keep is False for a response with more than one negative token whose
    dual clip binds (FIPO drops it). logp, old_logp, mask: [B, T]; adv: [B]."""
    import math
    with torch.no_grad():
        d = (logp - old_logp).clamp(-20, 20) * mask  # [B, T]
        d = torch.where(d <= math.log(clip_c), d, 0.0)
        B, T = d.shape
        g = 2.0 ** (-1.0 / decay)
        future = torch.empty_like(d)
        carry = torch.zeros(B, dtype=d.dtype, device=d.device)
        for end in range(T, 0, -chunk):  # blocks from the end; inside a block a [c, c] discount matrix
            s = max(0, end - chunk)
            i = torch.arange(end - s, device=d.device)
            lag = (i[None, :] - i[:, None]).to(d.dtype)  # [c, c] k - t
            weights = torch.where(lag >= 0, g ** lag.clamp(min=0), 0.0)
            future[:, s:end] = d[:, s:end] @ weights.T + carry[:, None] * g ** (end - s - i).to(d.dtype)
            carry = future[:, s]
        f = future.exp().clamp(low, high)  # [B, T]
        ratio = (logp - old_logp).exp()
        negative = (adv[:, None] < 0) & mask.bool()
        f = torch.where(negative & (ratio > safety), f.clamp(0.8, 1.0), f)  # FIPO's code fixes the 0.8
        keep = (negative & (ratio > clip_c)).sum(1) <= 1  # [B] the dual clip binds where r > c
    return f, keep


# ======== 2. One RL step, as the paper's algorithm box, and the helpers it names ======================================
def rl_step(run, step):
    """One RL step as the paper's box: returns its metrics (step_metrics), averaged over ranks."""
    a, algo, times = run.args, run.algo, [clock(run)]
    rows, epoch = step_prompts(run, step)  # this rank's share of the step's prompts
    batch = sample(run.sampler, [prompt_text(run.tok, r["question"], a.instruction) for r in rows], a.temperature,
                   a.group_size, seed=((a.seed * 100_003 + step) * 101 + run.rank) * 10_007)  # 1. G responses each
    correct, reward = verify(run, batch, rows)  # 2. 1 right, 0 wrong; DAPO's overlong penalty
    adv = group_advantages(reward, a.group_size, algo["scale"])  # 3. Eq. A  [N]
    times.append(clock(run))
    train_plan, score_plan = forward_plans(run, batch, adv)  # the rows each pass forwards: of advantage != 0
    hooks = [h for h in run.hooks if getattr(h, "due", lambda run, step: True)(run, step + 1)]  # this step's readers
    keep = algo["features"] or bool(hooks)  # Eq. D's v: for lam, and for the hooks that read this rollout
    batch["old_logp"], entropy, features = score(run, batch, adv, score_plan, keep)  # 4. Eq. D
    roll = dict(batch=batch, rows=rows, adv=adv, correct=correct, reward=reward, entropy=entropy, features=features,
                stats={})
    times.append(clock(run))
    weights = algo["weights"](run, roll) if algo["weights"] else None  # 5. DelTA: lam [N, R], Sec. 3.2
    times.append(clock(run))
    for hook in hooks:  # what the benches and --dump_rollouts_every read of a rollout: hook(run, roll, lam, step)
        hook(run, roll, weights, step + 1)
    roll["features"] = features = None  # v is done with: the update's memory starts without it
    losses = update(run, batch, adv, weights, train_plan)  # 6. Eq. B/E, one optimizer step per mini-batch
    times.append(clock(run))
    return dict(step_metrics(run, roll, weights, (train_plan, score_plan), losses, times), epoch=epoch)


def step_prompts(run, step):
    """This rank's prompts of a step: a fixed permutation per epoch, an equal share of every mini-batch."""
    a, n, p = run.args, len(run.train_rows), run.args.prompts_per_step
    epoch, i = divmod(step, n // p)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(a.seed * 1000 + epoch))
    ids = perm[i * p:(i + 1) * p].view(-1, run.world, a.mini_batch_prompts // run.world)
    return [run.train_rows[j] for j in ids[:, run.rank].flatten()], epoch


def prompt_text(tok, question, instruction=""):
    """The chat template when the tokenizer has one, a plain template otherwise. question: text, or chat messages
    (a dataset's prompt column, DAPO-Math-17k's); the instruction goes at the end of the last user message."""
    messages = [dict(m) for m in question] if isinstance(question, list) else [{"role": "user", "content": question}]
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=len(messages) - 1)
    if instruction:
        messages[last]["content"] = f"{messages[last]['content']}\n{instruction}"
    if getattr(tok, "chat_template", None):
        return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "".join(f"{m['content']}\n" if m["role"] == "system" else f"Question: {m['content']}\n" if m["role"] ==
                   "user" else f"Answer: {m['content']}\n" for m in messages) + "Answer: "


def sample(sampler, prompts, temperature, n=1, seed=0, what="generate"):
    """n responses to each prompt, adjacent, in the rollout layout (greedy at temperature 0); the sampler's
    log-probs, if it has them, in "sampler_logp" [N, R] (sampling.rollout_batch: the layout, through the first eos).
    what: the phase's name in the progress lines."""
    tok, layout = sampler.tok, sampling()
    prompt_ids = [layout.encode_prompt(tok, p) for p in prompts]
    responses, logprobs = sampler.generate(prompt_ids, temperature, n, seed, what=what)
    if not prompts:
        return None
    batch = layout.rollout_batch([p for p in prompt_ids for _ in range(n)], responses, sampler.eos, tok.pad_token_id,
                                 sampler.device)
    if logprobs is not None:
        R = batch["response_mask"].shape[1]
        batch["sampler_logp"] = torch.tensor([(lp + [0.0] * R)[:R] for lp in logprobs], device=sampler.device)
    return batch


def verify(run, batch, rows):
    """rewards.py's verdicts (1 right, 0 wrong) on the final answers (math) or the rows' tests run in the sandbox
    (code), timed (time/reward), and the reward: with DAPO's soft overlong punishment."""
    a, t = run.args, time.perf_counter()
    golds = [r["answer"] for r in rows for _ in range(a.group_size)]
    tick = run.report("reward", len(golds), "responses")  # the heartbeat's, while the verdicts are out
    correct = torch.tensor(rewards().score_batch(sampling().decode_responses(run.tok, batch), golds, run.reward,
                                                 a.reward_timeout or None, stats=run.reward_stats,
                                                 answer_format=run.answer_format))
    run.reward_seconds = time.perf_counter() - t
    tick(len(golds))
    reward = correct.to(run.device)  # [N]
    if run.algo["overlong"]:
        reward = reward + overlong_penalty(batch["response_mask"].sum(1), a.max_new_tokens, a.overlong_buffer,
                                           a.overlong_penalty)
    return correct, reward


def forward_plans(run, batch, adv):
    """The micro-batch plans of the update and of scoring. A row of advantage 0 adds exactly 0 to the loss and its
    gradient, so with --skip_zero_advantage neither pass runs it (the normalisers and lam's step 6 still count it:
    they read the masks). Forking scores every row (entropy ranks all tokens); an MoE's router loss trains every row."""
    every = torch.ones_like(adv, dtype=torch.bool)
    nonzero = adv != 0 if run.args.skip_zero_advantage else every
    trained, scored = every if run.router_coef else nonzero, every if run.algo["score_all"] else nonzero
    train_plan = micro_batches(run, batch, trained)
    return train_plan, train_plan if scored is trained else micro_batches(run, batch, scored)


@torch.no_grad()
def score(run, batch, adv, plans, features):
    """The one no-grad pass over the rows of `plans`: old log-probs and entropy [N, R] (0 in rows not scored) and,
    with `features`, Eq. D's v of the tokens of non-zero-advantage responses (no others need one) packed into one
    buffer [n, H] of the compute dtype (pinned CPU memory with --offload_features), their advantages [n] and
    positions [n]."""
    a, mask = run.args, batch["response_mask"]
    device, (N, R) = mask.device, mask.shape
    old_logp, entropy = torch.zeros(N, R, device=device), torch.zeros(N, R, device=device)
    side = mask & (adv != 0)[:, None]  # [N, R]
    if features:
        H = unwrap(run.model).get_output_embeddings().weight.shape[1]
        auto = torch.bfloat16 if bf16_compute(a, device) else torch.float32  # --feature_dtype's
        n, dtype = int(side.sum()), {"auto": auto, "bf16": torch.bfloat16, "fp32": torch.float32}[a.feature_dtype]
        buffer = (engines().feature_buffer(run, n, H, dtype) if a.offload_features or run.accel.gpu
                  else torch.empty(n, H, dtype=dtype, device=device))  # [n, H]
        adv_tok, where, offset = [adv[:0]], [torch.zeros(0, dtype=torch.long, device=device)], 0
    tick = run.report("score", sum(len(rows) for groups in plans for rows in groups), "rows")
    for rows in (rows for groups in plans for rows in groups):
        ids, am, Rm = micro_batch(batch, rows)
        tick(len(rows), int(am.sum()))
        with autocast(device, bf16_compute(a, device)):
            out = response_logprobs(run.train_model, ids, am, Rm, a.temperature, a.head_chunk_tokens,
                                    with_entropy=True, share_prompts=not run.sharding.sharded)
            # a group's prompt forwarded once; not under FSDP, where every forward gathers and the ranks' counts of
            # forwards must agree (one rank's micro-batch may repeat no prompt)
        logp, ent, hidden = (x[:len(rows)] for x in out)  # [b, Rm] (b = 0: an empty micro-batch)
        old_logp[rows, :Rm], entropy[rows, :Rm] = logp.float(), ent.float()
        if features:  # DelTA departs from DAPO here: the same forward yields v, Eq. D
            sel = side[rows, :Rm]  # [b, Rm]
            v = token_features(hidden[sel].float(), logp[sel].float())  # [n_mb, H]
            buffer[offset:offset + len(v)].copy_(v, non_blocking=True)
            adv_tok.append(adv[rows, None].expand(-1, Rm)[sel])
            where.append((rows[:, None] * R + torch.arange(Rm, device=device))[sel])
            offset += len(v)
    if not features:
        return old_logp, entropy, None
    run.accel.synchronize()  # the non-blocking copies into pinned host memory are complete
    return old_logp, entropy, (buffer, torch.cat(adv_tok), torch.cat(where))


def update(run, batch, adv, weights, plans):
    """Eq. B/E: one optimizer step per mini-batch (optimizer_step), the token weights fixed for all. Each term is
    divided by its mini-batch's global normaliser, which counts every row of the mini-batch, forwarded or not, and
    multiplied by world_size (DDP and FSDP average): no split changes it."""
    a, algo, model, mask = run.args, run.algo, run.train_model, batch["response_mask"]  # [N, R]
    live = mask & (adv != 0)[:, None]  # [N, R] the tokens with a gradient: the metrics' tokens
    weight = torch.ones_like(mask, dtype=torch.float32) if weights is None else weights.float()  # [N, R]
    weight, row_count = algo["normaliser"](mask, weight, a)  # [N, R], [N]: the algorithm's own choice of tokens
    weight, out = importance_weights(run, batch, weight, live)  # --vllm: the sampler's kernels are not the trainer's
    per_rank = a.mini_batch_prompts // run.world * a.group_size  # a mini-batch's rows on each rank
    losses, sums, norms = [], torch.zeros(4, dtype=torch.float64, device=mask.device), []
    model.train()  # HF checkpoints its layers (--gradient_checkpointing) in training mode only; dropout is off
    tick = run.report("update", sum(len(rows) for groups in plans for rows in groups), "rows")
    for k, groups in enumerate(plans):  # one optimizer step per mini-batch
        block = slice(k * per_rank, (k + 1) * per_rank)  # the mini-batch's rows, before any was dropped
        count = reduce(run, row_count[block].sum().double()).clamp(min=1)  # the mini-batch's normaliser
        # (1 when it counts no token: forking's or a lam subset's mini-batch may choose none; 0, not 0 / 0, is its sum)
        seen = reduce(run, batch["attention_mask"][block].sum().double())  # its tokens, for the MoE's router loss
        loss = torch.zeros(2, device=mask.device)  # policy, router: this rank's part of the mini-batch's loss
        for j, rows in enumerate(groups):
            with run.sharding.no_sync(model, sync=j == len(groups) - 1):  # gradients reduced once a mini-batch
                part, metrics = micro_batch_loss(run, batch, adv, weight, live, rows, count, seen)
                (part.sum() * run.world).backward()
            tick(len(rows), int(batch["attention_mask"][rows].sum()))
            loss, sums = loss + part.detach() * run.world, sums + metrics
        norms.append(optimizer_step(run, model, forwarded=bool(groups)))
        losses.append(loss)
    model.eval()
    sums = reduce(run, sums)  # clipped, dual-clipped, k3 KL and the count of the tokens with a gradient, all ranks
    means = (torch.stack(losses).mean(0).tolist() + (sums[:3] / sums[3].clamp(min=1)).tolist())  # one sync
    names = ("loss/policy", "loss/router", "loss/clipfrac", "loss/clipfrac_dual", "loss/approx_kl")
    out.update((name, x) for name, x in zip(names, means) if name != "loss/router" or run.router_coef)
    return dict(out, grad_norm=sum(norms) / len(norms))


def micro_batch_loss(run, batch, adv, weight, live, rows, count, seen):
    """One micro-batch's forward: its terms of the mini-batch's policy loss (Eq. B/E over `count`) and router loss
    [2], and the token sums of its metrics [4] (clipped, dual-clipped, k3 KL, tokens). No rows: 0, with a gradient
    of 0 through the whole model (the forward and backward the other ranks' collectives wait for)."""
    a, algo, mask = run.args, run.algo, batch["response_mask"]
    ids, am, Rm = micro_batch(batch, rows)
    extra = {}
    with autocast(mask.device, bf16_compute(a, mask.device)):
        logp = response_logprobs(run.train_model, ids, am, Rm, a.temperature, a.head_chunk_tokens, checkpoint=True,
                                 extra=extra)[0][:len(rows)]  # [b, Rm]
    logp, m, w, old = logp.float(), live[rows, :Rm], weight[rows, :Rm], batch["old_logp"][rows, :Rm]
    if algo["step_weights"]:  # FIPO departs from DAPO here: weights from the new log-probs
        f, m = algo["step_weights"](run, logp, old, adv[rows], m)
        w = w * f
    loss, met = policy_loss(logp, old, adv[rows], m, w, num_tokens=count, **algo["gate"](a))
    router = (run.router_coef * extra["aux_loss"].float() * am.sum() / seen if run.router_coef
              else loss.new_zeros(()))  # an MoE's load balancing, its micro-batches token-weighted
    n = m.sum().double()
    metrics = torch.stack([met["clipfrac"] * n, met["clipfrac_dual"] * n, met["approx_kl"] * n, n]).double()
    return torch.stack([loss, router]), metrics


# ======== 3. The algorithms as data: where each departs from DAPO =====================================================
# An entry: scale (Eq. A with or without the std), overlong (DAPO's length penalty), gate (the clip settings,
# or SAPO's gate), weights (token weights fixed for every update of a rollout), step_weights (from each
# micro-batch's new log-probs), normaliser (the loss's denominator), features (keep Eq. D's v), score_all
# (score the rows of advantage 0 too: forking ranks every response's tokens by entropy).
def delta_weights(run, roll):  # Sec. 3.2 on this rank's packed features, sums over the run's process group
    a, mask, (v, adv_tok, where) = run.args, roll["batch"]["response_mask"], roll["features"]
    side_lam = delta_coefficients(v, adv_tok, torch.ones_like(adv_tok, dtype=torch.bool), a.K, a.lam_min, a.lam_max,
                                  stats=roll["stats"], num_valid=mask.sum(), margin=a.delta_margin, gamma=a.delta_gamma,
                                  chunk_tokens=a.feature_chunk_tokens,
                                  assign=a.delta_assign, normalise=a.delta_normalise, group=run.group)  # [n]
    lam = torch.where(mask, roll["stats"]["lam_zero"], 0.0)  # [N, R]
    lam.view(-1)[where] = side_lam.float()
    return lam


def forking_weights(run, roll):  # Wang et al. 2025: the policy gradient on the top-entropy tokens only
    mask = roll["batch"]["response_mask"]
    return top_share_mask(roll["entropy"], mask, run.args.forking_ratio, group=run.group).float()


def lam_subset_weights(largest):  # paper Sec. 5: DAPO on the top (or bottom) half of the tokens by DelTA's lam
    return lambda run, roll: top_share_mask(delta_weights(run, roll), roll["batch"]["response_mask"], 0.5, largest,
                                            run.group).float()


def fipo_step_weights(run, logp, old, adv, mask):  # Ma et al. 2026: weights from the future KL, per micro-batch
    a = run.args
    f, keep = fipo_weights(logp, old, adv, mask, a.fipo_decay, a.fipo_low, a.fipo_high, a.fipo_safety, a.clip_c)
    return f, mask & keep[:, None]


# The normalisers, named as verl names its loss aggregation modes: (mask [N, R], weights [N, R], args) ->
# (weights, count per response [N]); the loss is divided by the mini-batch's sum of the counts.
def token_mean(mask, w, args):
    """verl's "token-mean" (DAPO): every valid token of the mini-batch counts once."""
    return w, mask.sum(1)


def chosen_token_mean(mask, w, args):
    """"token-mean" over the tokens the weights choose (forking, lam subsets): a token of weight 0 does not count."""
    return w, ((w > 0) & mask).sum(1)


def seq_mean_token_mean(mask, w, args):
    """verl's "seq-mean-token-mean" (GRPO): each response's token mean, then the mean over responses."""
    return w / mask.sum(1, keepdim=True).clamp(min=1), mask.new_ones(mask.shape[0], dtype=torch.float)


def seq_mean_token_sum_norm(mask, w, args):
    """verl's "seq-mean-token-sum-norm" (Dr. GRPO): each response's token sum over the longest response allowed,
    then the mean over responses."""
    return w, mask.new_full((mask.shape[0],), args.max_new_tokens, dtype=torch.float)


DAPO = dict(scale="group", overlong=True, weights=None, step_weights=None, normaliser=token_mean,
            features=False, score_all=False,
            gate=lambda a: dict(clip_low=a.clip_low, clip_high=a.clip_high, clip_c=a.clip_c))
SYMMETRIC = lambda a: dict(clip_low=a.clip_low, clip_high=a.clip_low, clip_c=None)  # GRPO's references: no dual clip
ALGOS = {
    "dapo": DAPO,
    "delta": dict(DAPO, weights=delta_weights, features=True),  # Sec. 3.2's lam in Eq. E
    "grpo": dict(DAPO, overlong=False, gate=SYMMETRIC, normaliser=seq_mean_token_mean),
    "drgrpo": dict(DAPO, scale="none", overlong=False, gate=SYMMETRIC, normaliser=seq_mean_token_sum_norm),
    "forking": dict(DAPO, weights=forking_weights, normaliser=chosen_token_mean, score_all=True),
    "sapo": dict(DAPO, gate=lambda a: dict(sapo_tau=(a.sapo_tau_pos, a.sapo_tau_neg))),  # Gao et al. 2025
    "fipo": dict(DAPO, step_weights=fipo_step_weights),
    "lam_top": dict(DAPO, weights=lam_subset_weights(True), features=True, normaliser=chosen_token_mean),
    "lam_bottom": dict(DAPO, weights=lam_subset_weights(False), features=True, normaliser=chosen_token_mean),
}


# ======== 4. The step's mechanics: layouts, micro-batches, the sliced LM head, the optimizer step, figures ============
def step_metrics(run, roll, weights, plans, losses, times):
    """A step's figures, all in one place: the update's losses, rewards, lengths, the rows forwarded, entropy, the
    time of each phase (times: the clock before generation, scoring, lam, the update and after it), the sampler's
    log-prob gap; averaged over ranks, then lam's statistics over the global batch."""
    a, batch, adv, reward, entropy = run.args, roll["batch"], roll["adv"], roll["reward"], roll["entropy"]
    mask, groups, n = batch["response_mask"], reward.view(-1, a.group_size), batch["response_mask"].sum().item()
    live = mask & (adv != 0)[:, None]  # [N, R] the tokens with a gradient: token metrics of log-probs cover these
    forwarded = lambda plan: sum(len(rows) for groups in plan for rows in groups) / len(mask)
    tokens = lambda plan: sum(int(batch["attention_mask"][rows].sum()) for groups in plan for rows in groups)
    t0, t1, t2, t3, t4 = times
    m = dict(losses)
    m.update({"reward/mean": reward.mean().item(), "reward/acc": roll["correct"].float().mean().item(),
              "reward/timeouts": run.reward_stats["timeouts"], "reward/errors": run.reward_stats["errors"],
              "response/length": n / len(mask), "response/truncated": batch["truncated"].float().mean().item(),
              "groups/zero_std": (groups.max(1).values == groups.min(1).values).float().mean().item(),
              "rows/scored": forwarded(plans[1]), "rows/trained": forwarded(plans[0]),
              "entropy/trained": (entropy * live).sum().item() / max(1, live.sum().item()),
              "time/generate": t1 - t0, "time/score": t2 - t1,
              "time/reward": run.reward_seconds, "time/coefficients": t3 - t2, "time/train": t4 - t3,
              # a process's rates: response tokens sampled, tokens (prompt and response) forwarded a second
              "speed/generate_tokens_per_s": n / max(t1 - t0 - run.reward_seconds, 1e-9),
              "speed/score_tokens_per_s": tokens(plans[1]) / max(t2 - t1, 1e-9),
              "speed/train_tokens_per_s": tokens(plans[0]) / max(t4 - t3, 1e-9)})
    if not a.skip_zero_advantage or run.algo["score_all"]:  # every response scored on every rank (the same keys on
        m["entropy"] = (entropy * mask).sum().item() / n  # all ranks: all_mean reduces them as one tensor)
    if "sampler_logp" in batch:  # the sampler's and the trainer's log-probs of the sampled tokens
        gap = (batch["sampler_logp"] - batch["old_logp"]).abs() * live
        m["rollout/logp_gap"] = gap.sum().item() / max(1, live.sum().item())
    m = all_mean(run, m)
    if weights is not None:
        m.update(weight_stats(run, weights, mask), **{f"delta/{k}": x for k, x in roll["stats"].items()})
    return m


def overlong_penalty(lengths, max_len, buffer, factor):
    """DAPO's soft overlong punishment: 0 up to max_len - buffer, then linear down to -factor at max_len."""
    if buffer <= 0:
        return torch.zeros_like(lengths, dtype=torch.float32)
    return -((lengths.float() - (max_len - buffer)).clamp(min=0) / buffer).clamp(max=1.0) * factor


def micro_batches(run, batch, keep=None):
    """Each mini-batch's rows (those in `keep` [N], all by default) in micro-batches of at most
    max_tokens_per_micro_batch padded tokens (similar lengths together), as many in each mini-batch on every rank
    (FSDP gathers in every forward): a rank short of rows gets empty micro-batches (micro_batch: one token). The
    mini-batches are the rollout's whatever `keep` drops; one that no rank keeps a row of has no micro-batch."""
    a, device, P = run.args, batch["input_ids"].device, batch["prompt_len"]
    per_rank = a.mini_batch_prompts // run.world * a.group_size
    prompt, response = batch["attention_mask"][:, :P].sum(1).tolist(), batch["response_mask"].sum(1).tolist()  # [N]
    kept = [True] * len(prompt) if keep is None else keep.tolist()
    padded = lambda rows: len(rows) * (max(prompt[i] for i in rows) + max(response[i] for i in rows))
    plans = []
    for m0 in range(0, len(prompt), per_rank):
        groups = []
        for i in sorted((i for i in range(m0, m0 + per_rank) if kept[i]), key=lambda i: prompt[i] + response[i]):
            if groups and padded(groups[-1] + [i]) <= a.max_tokens_per_micro_batch:
                groups[-1].append(i)
            else:
                groups.append([i])
        plans.append(groups)
    counts = reduce(run, torch.tensor([len(groups) for groups in plans], device=device), dist.ReduceOp.MAX)
    for groups, most in zip(plans, counts.tolist()):
        while len(groups) < most:  # split the largest group until the count is the same everywhere
            big = max(range(len(groups)), key=lambda j: len(groups[j]), default=None)
            if big is None or len(groups[big]) < 2:
                groups.append([])
                continue
            groups[big:big + 1] = [groups[big][:len(groups[big]) // 2], groups[big][len(groups[big]) // 2:]]
    return [[torch.tensor(g, dtype=torch.long, device=device) for g in groups] for groups in plans]


def micro_batch(batch, rows):
    """Rows of the rollout trimmed to their own longest prompt and response: input_ids, attention_mask, R'. No
    rows: row 0's last prompt token and first response token, a forward that keeps this rank's collectives in step
    with the others' (the callers slice its outputs to the 0 rows)."""
    P, am = batch["prompt_len"], batch["attention_mask"][rows]
    if len(rows) == 0:
        ids = batch["input_ids"][:1, P - 1:P + 1]
        return ids, torch.ones_like(ids, dtype=torch.bool), 1
    left = int(am[:, :P].any(0).long().argmax())  # the first column a prompt uses (prompts are left-padded)
    R = max(1, int(batch["response_mask"][rows].sum(1).max()))
    return batch["input_ids"][rows, left:P + R], am[:, left:P + R], R


def response_logprobs(model, input_ids, attention_mask, R, temperature, chunk_tokens=2048, checkpoint=False,
                      with_entropy=False, extra=None, share_prompts=False):
    """One forward of `model` (plain, DDP or FSDP): log pi(o_t) [b, R] at temperature T for the last R
    tokens, their entropy [b, R] (zeros unless asked) and the LM head's inputs h [b, R, H] (Eq. D's h).
    extra: a dict that receives the model's own auxiliary loss, "aux_loss" (an MoE's load balancing, which HF
    computes when the config sets output_router_logits), or None. share_prompts (no gradient): rows with the same
    prompt run on one forward of it (prompt_cache), the same values to fp32 rounding."""
    position_ids = (attention_mask.long().cumsum(1) - 1).clamp(min=0)  # [b, P + R] as generate sets them
    upto = input_ids.shape[1] - R - 1  # the cache holds every prompt token but the last
    cache = sampling().prompt_cache(model, input_ids, attention_mask, upto) if share_prompts else {}
    start = upto if cache else 0
    with sliced_lm_head(model, input_ids[:, -R:], temperature, chunk_tokens, checkpoint, with_entropy) as head:
        out = model(input_ids=input_ids[:, start:], attention_mask=attention_mask.long(),
                    position_ids=position_ids[:, start:], logits_to_keep=R + 1, use_cache=False, **cache,
                    **(sampling().router_off(model) if cache else {}))
    if extra is not None:
        extra["aux_loss"] = getattr(out, "aux_loss", None)
    stats = out.logits  # [b, R, 2]
    return stats[..., 0], stats[..., 1], head["hidden"]


@contextlib.contextmanager
def sliced_lm_head(model, targets, temperature, chunk_tokens, checkpoint, with_entropy):
    """The memory trick: for one forward of `model`, the LM head keeps its input h and runs on slices of
    chunk_tokens positions (recomputed in backward with `checkpoint`), returning log pi(target) and the
    entropy [b, R, 2] instead of logits, so no [b, R, V] tensor exists. It replaces the head's forward
    inside the model's own, so DDP and FSDP see an ordinary call. Yields a dict receiving "hidden"."""
    head, flat_targets, out = unwrap(model).get_output_embeddings(), targets.reshape(-1), {}

    def stats(h, target):  # [c, H], [c] -> [c, 2]
        logits = type(head).forward(head, h).float() / temperature  # [c, V]
        lse = logits.logsumexp(-1)  # [c]
        ent = lse - (logits.softmax(-1) * logits).sum(-1) if with_entropy else torch.zeros_like(lse)
        return torch.stack([logits.gather(-1, target[:, None]).squeeze(-1) - lse, ent], -1)

    def sliced(hidden):  # [b, R + 1, H]: HF keeps the last R + 1 positions (logits_to_keep)
        h = out["hidden"] = hidden[:, :-1]  # [b, R, H]: position P - 1 + t predicts response token t
        flat, parts = h.reshape(-1, h.shape[-1]), []  # [b R, H]
        for s in range(0, flat.shape[0], chunk_tokens):
            piece = (flat[s:s + chunk_tokens], flat_targets[s:s + chunk_tokens])
            parts.append(torch.utils.checkpoint.checkpoint(stats, *piece, use_reentrant=False) if checkpoint
                         else stats(*piece))
        return torch.cat(parts).view(h.shape[0], h.shape[1], 2).clone()  # a new tensor: FSDP hooks the output

    head.forward = sliced
    try:
        yield out
    finally:
        del head.forward  # the class's forward again


def importance_weights(run, batch, weight, live):
    """--vllm (--is_cap > 0): the token weights times the truncated importance weight min(pi_old / pi_vllm, C), as
    vLLM's kernels are not the trainer's; with its figures. Otherwise the weights as they are."""
    a = run.args
    if "sampler_logp" not in batch or a.is_cap <= 0:
        return weight, {}
    is_w = sampling().is_correction(batch["old_logp"], batch["sampler_logp"], a.is_cap)  # [N, R]
    n = reduce(run, live.sum().double()).clamp(min=1)
    return weight * is_w, {"rollout/is_mean": (reduce(run, (is_w * live).sum().double()) / n).item(),
                           "rollout/is_capped": (reduce(run, ((is_w >= a.is_cap) & live).sum().double()) / n).item()}


def optimizer_step(run, model, forwarded=True):
    """AdamW's step on the mini-batch's gradients, clipped to --max_grad_norm (the global norm, under FSDP too),
    skipped with a warning when the norm is not finite; then the gradients zeroed. A mini-batch no rank forwarded a
    row of (all its rows of advantage 0) has the gradient 0, on which AdamW steps as after the forwards. -> norm"""
    if not forwarded:
        for p in model.parameters():
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), run.args.max_grad_norm))
    if math.isfinite(norm):
        run.optimizer.step()
    else:
        warnings.warn(f"non-finite gradient norm {norm}: optimizer step skipped")
    run.sharding.zero_grad(run.optimizer)
    return norm


def router_loss_coef(config):
    """The weight of an MoE's load-balancing loss when its config asks HF to compute it (output_router_logits, as
    Qwen3-MoE and Mixtral configs can), with the config's own coefficient; 0 otherwise."""
    coef = getattr(config, "router_aux_loss_coef", None) if getattr(config, "output_router_logits", False) else 0.0
    if coef is None:
        raise ArgumentError(f"{type(config).__name__} sets output_router_logits but names no router_aux_loss_coef: "
                            "the load-balancing loss it asks for has no weight")
    return float(coef)


def weight_stats(run, lam, mask):
    """Mean, std, min and max of the token weights over the valid tokens of the global batch."""
    lv = lam[mask].double()
    moments = reduce(run, torch.stack([lv.sum(), lv.square().sum(), lv.new_tensor(float(lv.numel()))]))
    lo, hi = reduce(run, lv.min().clone(), dist.ReduceOp.MIN), reduce(run, lv.max().clone(), dist.ReduceOp.MAX)
    mean, var = moments[0] / moments[2], moments[1] / moments[2] - (moments[0] / moments[2]) ** 2
    return {"delta/lam_mean": mean.item(), "delta/lam_std": var.clamp(min=0).sqrt().item(),
            "delta/lam_min": lo.item(), "delta/lam_max": hi.item()}


# ======== 5. The companion files, and the engine seam: a sampler and a sharding strategy ==============================
# sampler: generate(prompt_ids, temperature, n, seed, what) -> (responses, log-probs or None), token ids in and out,
#   plus tok, eos and device; sampling.HFSampler, or sampling.VLLMSampler for --vllm (sampling.py).
# sharding: wrap, no_sync, gathered, zero_grad, model_state, optim_state and `group` (None in one process), which
#   the trainer passes to the copyable functions; engines.DDP, or engines.FSDP2 for --fsdp (checkpoints.py: either's).
# The device seam: engines.Accelerator. Then the processes, from torchrun's variables.
def rewards():
    """rewards.py, imported where a reward is computed: delta.py alone holds the copyable API."""
    import rewards
    return rewards


def engines():
    """engines.py, imported where a run is made: the device seam, DDP or FSDP2, GPU memory."""
    import engines
    return engines


def sampling():
    """sampling.py, imported where a run samples: the HF decoder, vLLM's sampler, stop tokens, the rollout layout."""
    import sampling
    return sampling


def tasks():
    """tasks.py, what a run trains and evaluates on: the embedded tasks (the tiny model and its warm start too) and
    every dataset reader."""
    import tasks
    return tasks


def console():
    """console.py: what a user types and sees (the command line, progress lines, how a run ended)."""
    import console
    return console


def checkpoints():
    """checkpoints.py: what a run writes and reads back (checkpoints, model folders, weights read once)."""
    import checkpoints
    return checkpoints


def unwrap(model):
    return model.module if hasattr(model, "module") else model


def bf16_compute(args, device):
    """--precision: bf16 autocast (DDP) or bf16 gathered weights (FSDP) on a GPU by default, fp32 on a CPU; bf16
    on a CPU gives the GPU's dtypes to a CPU run (tools/memory_measured.py)."""
    return args.precision == "bf16" or (args.precision == "auto" and engines().Accelerator(device).gpu)


def autocast(device, enabled):
    return torch.autocast(device.type, torch.bfloat16) if enabled else contextlib.nullcontext()


def setup_distributed(timeout_minutes=60):
    """DDP from torchrun's environment variables (one node or several); `python delta.py` runs alone. A collective
    waits timeout_minutes for the slowest rank (NCCL's own default, 10, is shorter than a vLLM rank's lead or a
    large checkpoint's write)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    accel = engines().Accelerator(device)
    if accel.gpu:
        engines().expandable_segments()  # before the first allocation
    if accel.cuda:
        torch.cuda.set_device(device)
    elif world > 1 and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", world))))
    if world > 1:
        dist.init_process_group(accel.backend, timeout=datetime.timedelta(minutes=timeout_minutes))
        if accel.gpu:  # NCCL connects lazily: now, before vLLM sizes itself by the free memory
            engines().connect_collectives(device, world)
    return rank, world, device


def clock(run):
    """Seconds, once the device has finished its queued work (phase timings on a GPU)."""
    run.accel.synchronize()
    return time.perf_counter()


def reduce(run, x, op=dist.ReduceOp.SUM):
    """x all-reduced over the run's process group (in one process, x itself)."""
    if run.group is not None:
        dist.all_reduce(x, op=op, group=run.group)
    return x


def all_mean(run, values):
    """The mean of each metric over ranks (every rank holds an equal share of the batch)."""
    if run.world == 1:
        return values
    t = reduce(run, torch.tensor([float(values[k]) for k in sorted(values)], dtype=torch.float64, device=run.device))
    return {k: x / run.world for k, x in zip(sorted(values), t.tolist())}


# ======== 6. The main loop: evaluation, preparing a run, training it ==================================================
def evaluate(run, step, temperature=0.0, n=1, limit=None, answered=None):
    """Held-out accuracy, the mean over n samples a problem (greedy by default) of the first `limit` problems (all
    by default), rows sharded over ranks, sampled from generators seeded by the step, apart from the training
    stream. `answered` (a list) receives the share of math responses that state an answer in the run's format."""
    mine, seed = run.eval_rows[:limit][run.rank::run.world], run.args.seed * 7919 + step
    with torch.random.fork_rng(devices=run.accel.rng_devices()):
        torch.manual_seed(seed + run.rank)
        what = f"evaluate (step {step})" if step >= 0 else "warm start: evaluate"
        batch = sample(run.sampler, [prompt_text(run.tok, r["question"], run.args.instruction) for r in mine],
                       temperature, n, seed=(seed * 101 + run.rank) * 10_007, what=what)
    golds = [r["answer"] for r in mine for _ in range(n)]
    texts = sampling().decode_responses(run.tok, batch) if mine else []
    fmt = run.answer_format
    right = sum(rewards().score_batch(texts, golds, run.reward, run.args.reward_timeout or None,
                                      answer_format=fmt)) if mine else 0.0
    stated = sum(rewards().extract_answer(t, fmt) is not None for t in texts) if run.reward == "math" else len(texts)
    counts = reduce(run, torch.tensor([right, stated, len(golds)], dtype=torch.float64, device=run.device))
    if answered is not None:
        answered.append(float(counts[1] / counts[2]))
    return float(counts[0] / counts[2])


def evaluation(run, step):
    """Greedy accuracy, the share of greedy responses that state an answer (math), and with --eval_samples the
    accuracy of samples at the temperature. A model that never states an answer in the run's format is told so."""
    a, answered = run.args, []
    out = {"eval/accuracy": evaluate(run, step, answered=answered)}
    if run.reward == "math":
        out["eval/answered"] = answered[0]
        if answered[0] == 0 and run.rank == 0 and step == 0:
            print(f"warning: none of the {len(run.eval_rows)} greedy held-out responses states an answer in the "
                  f"format {run.answer_format}, so every reward is 0 and RL has nothing to learn from: choose the "
                  f"format the model writes (--answer_format {' | '.join(rewards().ANSWER_FORMATS)}) or ask for it "
                  "(--instruction)", file=sys.stderr)
    if a.eval_samples:
        out["eval/sampled_accuracy"] = evaluate(run, step, a.temperature, a.eval_samples)
    return out


def prepare(args):
    """A run ready for its first step, the one boot path (delta.py, eval.py's sampler settings aside, the benches):
    every check of the arguments, the data and the resume before any work (an ArgumentError says what to change);
    then the model, the engines and AdamW, restored from the newest checkpoint (--resume) or seeded, the tiny
    default warm-started. The run also holds its logger (run.log), its first step and whether it resumed."""
    started = time.perf_counter()
    transformers.utils.logging.disable_progress_bar()
    validate_args(args, int(os.environ.get("WORLD_SIZE", "1")))  # every check before any work
    rank, world, device = setup_distributed(args.dist_timeout_minutes)
    try:  # every check of the data and the resume before any work: nothing is loaded or written until they pass
        kind, train_rows, eval_rows = tasks().load_task(args)  # a dataset without its columns, a bad test spec
        given = args.reward
        resolve_defaults(args, kind, train_rows)
        if not args.model and any("solution" not in r for r in train_rows + eval_rows):  # the tiny default's SFT
            raise ArgumentError(f"{args.dataset}: the tiny default model is warm-started on worked solutions, a "
                                "'solution' column this dataset lacks: pass --model (a pretrained model, e.g. "
                                "HuggingFaceTB/SmolLM2-135M-Instruct), which needs no warm start")
        ckpts = checkpoints().found(args.output_dir) if args.resume else []
        source = ckpts[-1] if ckpts else args.model  # the newest checkpoint, a hub id or path, or the tiny default
        tok = checkpoints().load_tokenizer(source) if source else tasks().tiny_tokenizer()
        train_rows, eval_rows = fit_prompts(args, tok, train_rows, eval_rows)
        state, problem = checkpoints().resume_state(args, ckpts, world)  # the newest checkpoint's state, or None
        if problem:
            raise ArgumentError(problem)
        final = os.path.join(args.output_dir, "final")
        if state and state["step"] >= planned_steps(args, len(train_rows)) > 0 and os.path.isdir(final):
            raise FinishedAlready(f"{args.output_dir} finished at step {state['step']} already: the model is in "
                                  f"{final}; nothing is left to do")
        os.makedirs(args.output_dir, exist_ok=True)
        log, close_log = metrics_logger(args, rank, state["step"] if state else None)
    except (ArgumentError, rewards().DataError, FinishedAlready) as e:  # tasks.py's DataError: an ArgumentError
        if world > 1:
            dist.destroy_process_group()
        raise (e if isinstance(e, FinishedAlready) else ArgumentError(str(e))) from None
    if rank == 0:
        why = " (inferred: the rows carry test specs)" if given == "auto" and args.reward == "code" else ""
        fmt = f", answers: {args.answer_format}" if args.reward == "math" else ""
        print(f"reward: {args.reward}{why}{fmt}, prompts up to {args.max_prompt_length} tokens", file=sys.stderr)
    if rank == 0 and args.dataset:  # what the model sees and what it is graded against, before any step
        gold = f"\nits gold answer: {train_rows[0]['answer']!r}" if args.reward == "math" else ""
        print(f"the first prompt as the model sees it:\n{prompt_text(tok, train_rows[0]['question'], args.instruction)}"
              f"{gold}", file=sys.stderr)
    if not source:
        source = os.path.join(args.output_dir, "tiny-init")
        if rank == 0:
            tasks().build_tiny(source, args.seed)
        if world > 1:
            dist.barrier()
    done = console().progress(args, rank)(f"model: {source}, its config" + (" (its weights follow, read once a node)" if
                                                                   world > 1 else " and weights"))
    model, tok = checkpoints().load_model(source, device, meta=world > 1)  # dropout off; read once a node
    done()
    if args.gradient_checkpointing:
        checkpoints().enable_checkpointing(model)
    run = make_run(args, model, tok, source, rank, world, device, train_rows, eval_rows)
    run.log, run.close_log, run.step, run.resumed = log, close_log, state["step"] if state else 0, bool(state)
    run.started = started  # the summary's wall time, from the start of the checks
    catch_stop(run)  # from here a signal stops the run at the end of a warm-start or RL step
    restore_or_seed(run, state, ckpts[-1] if state else None)
    return run


def restore_or_seed(run, state, checkpoint):
    """--resume: the checkpoint's AdamW state and generators (checkpoints.restore). A new run: seeded generators,
    args.json and held_out.jsonl written, the tiny default warmed up."""
    if state:
        return checkpoints().restore(run, state, checkpoint)
    torch.manual_seed(run.args.seed + run.rank)  # sampling differs per rank
    random.seed(run.args.seed + run.rank)
    checkpoints().save_run_files(run)
    if not run.args.model:  # the tiny default learns the answer format from worked solutions first
        tasks().warm_start(run, run.log, sys.modules[__name__])


def train(run):
    """The RL steps from the run's first, each logged; held-out evaluations, checkpoints (and one on SIGINT or
    SIGTERM, after the step), the final model; then the processes taken down in the order that cannot hang.
    Returns the exit status (console.EXIT): 0 finished, said with a summary; 128 + N stopped by signal N."""
    a, step = run.args, run.step
    total_steps = planned_steps(a, len(run.train_rows))
    catch_stop(run)
    if stopped(run):  # a signal in the start or the warm start: nothing to save, RL had not begun
        if run.rank == 0:
            where = f" (the warm start at {run.warm_state})" if run.warm_state else ""
            print(f"\ninterrupted before RL's first step{where}: no checkpoint is written before it; the same command "
                  "starts the run over", file=sys.stderr)
        close(run)
        return console().EXIT["signal"] + (run.stop or [signal.SIGTERM])[0]
    if a.warm_start_only:
        checkpoints().save_model(run, os.path.join(a.output_dir, "final"))
    elif not run.resumed:
        if run.rank == 0:
            tokens = len(run.eval_rows) * (1 + a.eval_samples) * a.max_new_tokens
            print(f"evaluation at step 0: {len(run.eval_rows)} held-out problems greedy"
                  f"{f' and {a.eval_samples} samples each' if a.eval_samples else ''}, up to {a.max_new_tokens:,} "
                  f"new tokens a response ({tokens:,} tokens at most, over {run.world} process(es))" +
                  (f"; a line at least every {a.progress_seconds:g} s gives the rate and the time left" if a.progress
                   else ""), file=sys.stderr, flush=True)
        run.log(dict(step=0, **evaluation(run, 0)))
    quiet = run.rank != 0 or not a.progress or not total_steps
    bar = tqdm(total=total_steps, initial=step, desc=a.run_name, disable=quiet)  # rank 0's progress bar
    interrupted = False
    while step < total_steps and not interrupted:
        m = rl_step(run, step)
        step += 1
        if a.eval_every and step % a.eval_every == 0 or step == total_steps:
            m.update(evaluation(run, step))
        run.log(dict(m, step=step))
        warn_truncation(run, m, step)
        bar.update(1)
        bar.set_postfix(acc=f"{m['reward/acc']:.2f}", eval=f"{m.get('eval/accuracy', float('nan')):.3f}")
        interrupted = stopped(run)
        if interrupted or (a.save_every and step % a.save_every == 0):
            checkpoints().save(run, step)
        if interrupted and run.rank == 0:
            print(f"\ninterrupted: checkpoint at step {step} in {a.output_dir}; continue with --resume",
                  file=sys.stderr)
    bar.close()
    if step == total_steps > 0:
        checkpoints().save_model(run, os.path.join(a.output_dir, "final"))
        if a.save_every == 0 or step % a.save_every:
            checkpoints().save(run, step)
    close(run)
    if step < total_steps:  # stopped by a signal, its checkpoint written
        return console().EXIT["signal"] + (run.stop or [signal.SIGTERM])[0]
    if run.rank == 0:
        print(console().summary(a, step, time.perf_counter() - run.started), file=sys.stderr)
    return 0


def planned_steps(args, n_rows):
    """The run's RL steps: --max_steps, or --epochs over n_rows training prompts (0 with --warm_start_only)."""
    return 0 if args.warm_start_only else args.max_steps or args.epochs * (n_rows // args.prompts_per_step)


def catch_stop(run):
    """SIGINT and SIGTERM append to run.stop: the warm start and each RL step finish their step, then train ends.
    A second signal ends the process at once, as an uncaught one would (Ctrl-C twice: KeyboardInterrupt)."""
    def stop(sig, frame):
        run.stop.append(sig)
        if len(run.stop) > 1:
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
            signal.raise_signal(sig)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)


def stopped(run):
    """Whether any rank was signalled (every rank calls it at the same point: a collective)."""
    return reduce(run, torch.tensor([float(len(run.stop))], device=run.device)).item() > 0


def warn_truncation(run, m, step):
    """Most responses cut at --max_new_tokens: the reward is mostly DAPO's overlong penalty, the run learns length.
    Said on the first such step, then every 10th step it lasts."""
    a, share = run.args, m["response/truncated"]
    run.truncated_steps += share > 0.5
    if share > 0.5 and run.rank == 0 and run.truncated_steps % 10 == 1:
        penalty = (f"; DAPO's overlong penalty starts at {a.max_new_tokens - a.overlong_buffer} (--overlong_buffer "
                   f"{a.overlong_buffer})" if run.algo["overlong"] else "")
        tqdm.write(f"warning: step {step}: {100 * share:.0f} % of the responses reached --max_new_tokens "
                   f"{a.max_new_tokens} and were cut{penalty}, so the update mostly trains on length: raise "
                   "--max_new_tokens (on the command line, which overrides a recipe) or give shorter tasks",
                   file=sys.stderr)


def close(run):
    """The metrics file, vLLM and the process group closed, in that order (gloo + DDP can hang at exit otherwise)."""
    run.report(None)  # no phase runs: the heartbeat stops
    run.close_log()
    if run.world > 1:
        dist.barrier()
    if hasattr(run.sampler, "close"):  # vLLM: after the last collective (its shutdown ends the process group too)
        run.sampler.close()
    world = run.world
    for name in ("model", "train_model", "optimizer", "sampler"):  # every reference to the model and AdamW
        setattr(run, name, None)
    gc.collect()
    if world > 1 and dist.is_initialized():
        dist.destroy_process_group()


def make_run(args, model, tok, source, rank=0, world=1, device=torch.device("cpu"), train_rows=(), eval_rows=()):
    """What a step reads: arguments, model and wrapper, optimizer (built after sharding), engines, data. A run made
    without resolve_defaults (the tests, the benches) reads --reward auto and --answer_format auto as it would."""
    kind = "code" if train_rows and isinstance(train_rows[0]["answer"], dict) else "math"  # rows with test specs
    if model_problem(model.config):  # the sliced LM head cannot train this family
        raise ArgumentError(f"{source}: {model_problem(model.config)}")
    bf16 = bf16_compute(args, device)
    sharding = (engines().FSDP2(world, device, bf16, engines().Accelerator(device)) if args.fsdp
                else engines().DDP(world, device, bf16))
    counts = engines().param_counts(model) if sharding.accel.gpu or args.offload_features else None  # before wrap
    meta = next(model.parameters()).is_meta  # load_model(meta=True): the weights are read once, here
    report = console().progress(args, rank)  # the run's progress lines: its sampler's and its phases'
    done = report(f"weights: rank 0 reads {source}, the {world} processes receive them") if meta else lambda: None
    if meta and not sharding.sharded:  # DDP wraps whole tensors (and broadcasts rank 0's again)
        checkpoints().load_weights(model, source, device, rank)
    train_model = sharding.wrap(model, args)
    if meta and sharding.sharded:  # FSDP2 shards the meta tensors: each rank makes and fills its shards only
        checkpoints().load_weights(model, source, device, rank)
    done()
    run = types.SimpleNamespace(args=args, algo=ALGOS[args.algo], rank=rank, world=world, device=device, tok=tok,
                                accel=sharding.accel, model=model, train_model=train_model, sharding=sharding,
                                group=sharding.group, train_rows=train_rows, eval_rows=eval_rows, reward_stats={},
                                reward=kind if args.reward == "auto" else args.reward,  # "auto" (tests, benches)
                                answer_format=rewards().prompt_settings(args.answer_format, "", (), kind)[0],
                                reward_seconds=0.0, router_coef=router_loss_coef(model.config), param_counts=counts,
                                source=source, hooks=[engines().dump_rollout] if args.dump_rollouts_every else [],
                                report=report, started=time.perf_counter(),  # progress lines, the wall time
                                stop=[], warm_state="", truncated_steps=0)  # signals, the warm start, warnings
    run.optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    # --vllm: the sampler makes AdamW's state first, then vLLM sizes itself by what the trainer leaves
    done = report("vLLM: the engine's start, its memory profile and CUDA graphs") if args.vllm else lambda: None
    run.sampler = sampling().make_sampler(args, model, tok, source, sharding, rank, run.optimizer, report)
    done()
    return run


def model_problem(config):
    """What stops a model family from training here (None: nothing)."""
    if getattr(config, "final_logit_softcapping", None):
        return ("logit soft-capping (Gemma-2 and kin) is not supported: the LM head runs in slices that return "
                "log-probabilities, and the cap would have to act on the logits between them")
    return None


def metrics_logger(args, rank, resumed_step=None):
    """(log, close): metrics.jsonl on rank 0 (checkpoints.metrics_log), also to TensorBoard or W&B."""
    sink = None
    if args.report_to != "none":  # engines.metrics_sink imports the package on every rank, before any work
        try:
            sink = engines().metrics_sink(args, dataclasses.asdict(args), rank)
        except ImportError:
            raise ArgumentError(f"--report_to {args.report_to} needs the {args.report_to} package: pip install "
                                f"{args.report_to} (W&B offline: WANDB_MODE=offline)") from None
    return checkpoints().metrics_log(args.output_dir, rank, resumed_step, sink), sink.close if sink else lambda: None


# ======== 7. The arguments, each with a one-line help, and their checks before any work ===============================
def arg(default, help):
    return field(default=default, metadata={"help": help})


@dataclass
class SamplerArgs:  # what the sampler reads (HFSampler or vLLM): delta.py's rollouts, eval.py's samples (EvalArgs)
    temperature: float = arg(1.0, "sampling temperature; training log-probs use logits / temperature")
    top_p: float = arg(1.0, "nucleus sampling (the paper's rollouts: 1.0)")
    top_k: int = arg(0, "top-k sampling, 0 = off (the paper's rollouts: off)")
    max_new_tokens: int = arg(0, "response length limit; 0: 64 on embedded tasks; a --dataset sets it (paper: 20480)")
    max_prompt_length: int = arg(0, "delta.py drops longer prompts at load time; 0: the longest prompt (paper: 2048)")
    gen_max_tokens: int = arg(65536, "tokens of one sampling call on one rank: sequences x (prompt + max_new_tokens)")
    precision: str = arg("auto", "auto: bf16 compute on GPU, fp32 on CPU | bf16 (on CPU too: the GPU's dtypes) | fp32")
    vllm: bool = arg(False, "sample with a colocated vLLM engine (requirements-vllm.txt)")
    vllm_gpu_memory: float = arg(0.0, "share of GPU memory vLLM takes (weights, KV cache); 0 = what the trainer leaves")
    vllm_max_batched_tokens: int = arg(8192, "tokens vLLM schedules in one forward (also sizes its profiling peak)")
    vllm_max_model_len: int = arg(0, "vLLM's maximum sequence length; 0 = max_prompt_length + max_new_tokens")
    progress: bool = arg(True, "on rank 0: the steps' bar, and inside each long phase a line with its rate and ETA")
    progress_seconds: float = arg(30.0, "the most seconds a running phase goes without a progress line (--progress)")


@dataclass
class Args(SamplerArgs):
    # --- run
    algo: str = arg("delta", "delta | dapo | grpo | drgrpo | forking | sapo | fipo | lam_top | lam_bottom")
    run_name: str = arg("", "name of the run; default '<algo>-<model or task>-s<seed>'")
    output_dir: str = arg("", "metrics.jsonl, checkpoints, the final model; default runs/<run_name>")
    seed: int = arg(0, "seed of the data order, the initialisation and the sampling (each rank adds its rank)")
    resume: bool = arg(False, "continue from the newest checkpoint in output_dir")
    report_to: str = arg("none", "none | tensorboard | wandb: also log the metrics there (optional packages)")
    reward: str = arg("auto", "math: the final answer | code: the rows' tests, sandboxed | auto: code for test specs")
    answer_format: str = arg("auto", "boxed | answer_line ('Answer: X') | last_number | hashes ('#### X'); auto: as "
                                     "the prompts ask, else boxed")
    reward_timeout: float = arg(0.0, "seconds per response for its verdict; 0: rewards.py's (math 5, code 10)")
    # --- model and data
    model: str = arg("", "hub id or local path; empty: a tiny Qwen3 built in code (the offline default)")
    task: str = arg("addition", "embedded task without --dataset: addition | multistep | filler | code")
    dataset: str = arg("", "hub id or local .json/.jsonl/.parquet/.csv; empty: the embedded --task")
    code_schema: str = arg("auto", "deepcoder | primeintellect | apps | taco | livecodebench | jsonl; auto: by columns")
    dataset_split: str = arg("train", "split of a hub dataset")
    prompt_key: str = arg("question", "column holding the problem: text or a list of chat messages")
    answer_key: str = arg("final_answer", "column holding the reference answer")
    eval_dataset: str = arg("", "held-out set (same columns); empty: hold out eval_size training rows")
    eval_size: int = arg(256, "held-out problems")
    instruction: str = arg("auto", "appended to each question; auto: the answer format's, unless prompts ask already")
    # --- rollout
    prompts_per_step: int = arg(32, "prompts per rollout batch, all ranks together (paper: 128)")
    group_size: int = arg(8, "G, responses sampled per prompt (paper: 16)")
    # --- optimisation
    lr: float = arg(1e-4, "AdamW learning rate, constant, no warm-up (paper: 1e-6)")
    weight_decay: float = arg(0.1, "AdamW weight decay (paper: 0.1)")
    max_grad_norm: float = arg(1.0, "gradient clipping (paper: 1.0)")
    mini_batch_prompts: int = arg(16, "prompts per optimizer step, all ranks (paper: 32, so 4 steps a rollout)")
    max_tokens_per_micro_batch: int = arg(16384, "padded tokens of one forward/backward on one rank; longer: alone")
    skip_zero_advantage: bool = arg(True, "no forward for rows of advantage 0 (groups of equal rewards): exact")
    head_chunk_tokens: int = arg(2048, "the LM head runs on slices of this many positions (no [b, R, V] logits)")
    epochs: int = arg(2, "passes over the training prompts (paper: 2)")
    max_steps: int = arg(200, "rollout steps; 0 = run all epochs")
    gradient_checkpointing: bool = arg(False, "non-reentrant activation checkpointing of the decoder layers")
    # --- the surrogate (Eq. B) and the baselines' departures
    clip_low: float = arg(0.2, "eps_low of the ratio clip")
    clip_high: float = arg(0.28, "eps_high, clip-higher (grpo and drgrpo use clip_low)")
    clip_c: float = arg(10.0, "dual-clip bound c for negative advantages (not in grpo and drgrpo)")
    overlong_buffer: int = arg(16, "DAPO's soft overlong buffer in tokens (paper: 4096; not in grpo and drgrpo)")
    overlong_penalty: float = arg(1.0, "DAPO's overlong penalty factor (paper: 1.0)")
    forking_ratio: float = arg(0.2, "forking: the share of highest-entropy tokens that get the policy gradient")
    sapo_tau_pos: float = arg(1.0, "sapo: gate temperature for positive advantages (verl's default)")
    sapo_tau_neg: float = arg(1.05, "sapo: gate temperature for other advantages (verl's default)")
    fipo_decay: float = arg(32.0, "fipo: half-life in tokens of the future-KL discount (FIPO's run script)")
    fipo_low: float = arg(0.8, "fipo: lower clip of the influence weight (FIPO's symmetric band, r = 0.2)")
    fipo_high: float = arg(1.2, "fipo: upper clip of the influence weight (FIPO's band)")
    fipo_safety: float = arg(3.0, "fipo: ratio above which a negative token's weight is clipped to [0.8, 1]")
    # --- DelTA (Sec. 3.2) and its ablations (paper Sec. 5)
    K: int = arg(1, "refinement iterations of the centroids (paper: 1; 0 = the no-refinement ablation)")
    lam_min: float = arg(0.8, "lower end of the coefficient band (paper: 0.8; 0 with lam_max 1: no linear map)")
    lam_max: float = arg(1.2, "upper end of the coefficient band (paper: 1.2)")
    delta_margin: str = arg("contrast", "contrast: opposite- minus own-side distance (paper) | own: own side only")
    delta_gamma: float = arg(0.0, "0: adaptive temperature, the std of a side's margins (paper); > 0: fixed")
    delta_assign: str = arg("soft", "soft: sigmoid(g / gamma), entropy-regularised (paper) | hard: 1[g > 0]")
    delta_normalise: bool = arg(True, "self-normalise lam to mean 1 over the batch (paper); false: ablation")
    # --- engines: sharding, feature memory, vLLM (engines.py)
    fsdp: bool = arg(False, "FSDP2: shard parameters, gradients and optimizer state over the processes")
    dist_timeout_minutes: int = arg(60, "how long a collective waits for the slowest process before the run fails")
    feature_dtype: str = arg("auto", "stored features v: auto (bf16 under bf16 autocast, else fp32) | bf16 | fp32")
    offload_features: bool = arg(False, "keep the features in (pinned) CPU memory, streamed in chunks for Sec. 3.2")
    feature_chunk_tokens: int = arg(65536, "tokens per chunk when Sec. 3.2 streams offloaded features")
    vllm_offload_trainer: bool = arg(False, "--vllm: trainer weights, AdamW state wait in host memory for vLLM's cache")
    is_cap: float = arg(2.0, "--vllm: the cap C of the importance weight min(pi_old / pi_vllm, C); 0 = off")
    # --- warm start of the tiny default (no effect with --model)
    sft_target_acc: float = arg(0.0, "stop the warm start at this accuracy of samples; 0: the task's own")
    sft_max_steps: int = arg(1500, "upper bound on warm-start steps")
    sft_lr: float = arg(1e-3, "warm-start learning rate")
    sft_batch_size: int = arg(64, "warm-start examples per step, all ranks")
    warm_start_only: bool = arg(False, "stop after the warm start, saved as final/ (to share between runs)")
    # --- logging, evaluation, checkpoints
    eval_every: int = arg(25, "held-out evaluation every N steps (0 = at the start and the end only)")
    eval_samples: int = arg(0, "also the mean accuracy of this many samples a held-out problem at the temperature")
    save_every: int = arg(50, "checkpoint every N steps (0 = only at the end and on Ctrl-C)")
    keep_checkpoints: int = arg(2, "newest checkpoints kept on disk")
    dump_rollouts_every: int = arg(0, "save rollout-<step>.pt every N steps, for tools/rollouts.py (0 = never)")

    def __post_init__(self):  # the embedded tasks' responses are short; a dataset's limit is the user's to set
        self.max_new_tokens = self.max_new_tokens or (0 if self.dataset else 64)


class ArgumentError(ValueError):
    """Bad input, reported before any work starts."""


class FinishedAlready(Exception):
    """--resume of a run that has finished: said in one line, exit status 0."""


def validate_args(a: Args, world_size: int = 1) -> None:
    """Fail before any work, with a message that says what to change: first the files and folders the user named
    (they are what a user most often writes wrong), then the values, in --help's order."""
    def need(ok, msg):
        if not ok:
            raise ArgumentError(msg)
    for name in ("model", "dataset", "eval_dataset"):
        path = getattr(a, name)
        if path and (path.startswith((".", "/", "~")) or os.path.splitext(path)[1] in tasks().LOCAL_EXTS):
            need(os.path.exists(path), f"--{name} {path}: no such file or folder")
    need(not os.path.isfile(a.output_dir), f"--output_dir {a.output_dir} is a file: give a folder (new or a run's)")
    if a.model:  # the config only: a folder without one, a file, an unreachable hub id, a family the head cannot train
        problem = checkpoints().source_problem(a.model)
        need(not problem, f"--model {problem}")
        config = transformers.AutoConfig.from_pretrained(a.model)
        need(not model_problem(config), f"--model {a.model}: {model_problem(config)}")
    embedded = (a.task,) if a.dataset else tasks().TASKS  # a --dataset needs no --task
    for name, known in (("algo", ALGOS), ("task", embedded), ("delta_margin", ("contrast", "own")),
                        ("delta_assign", ("soft", "hard")), ("feature_dtype", ("auto", "bf16", "fp32")),
                        ("precision", ("auto", "bf16", "fp32")), ("reward", ("auto", "math", "code")),
                        ("answer_format", ("auto", *rewards().ANSWER_FORMATS)),
                        ("code_schema", ("auto", *tasks().CODE_SCHEMAS)),
                        ("report_to", ("none", "tensorboard", "wandb"))):
        need(getattr(a, name) in known, f"--{name} {getattr(a, name)!r} is unknown; use one of {', '.join(known)}")
    need(a.max_new_tokens > 0 or not a.dataset, f"--dataset {a.dataset}: set --max_new_tokens, the response limit in "
         "tokens (the paper: 20480 on DeepMath; a 135 M model on short arithmetic: 64)")
    for name in ("prompts_per_step", "mini_batch_prompts", "max_tokens_per_micro_batch", "max_new_tokens", "lr",
                 "gen_max_tokens", "eval_size", "sft_batch_size", "head_chunk_tokens", "feature_chunk_tokens",
                 "temperature", "lam_max", "keep_checkpoints", "sapo_tau_pos", "sapo_tau_neg", "fipo_decay",
                 "vllm_max_batched_tokens", "dist_timeout_minutes"):
        need(getattr(a, name) > 0, f"--{name} {getattr(a, name)} must be > 0")
    for name in ("max_steps", "save_every", "eval_every", "dump_rollouts_every", "eval_samples", "K", "lam_min",
                 "progress_seconds", "max_prompt_length", "delta_gamma", "top_k", "vllm_max_model_len", "is_cap",
                 "clip_high", "vllm_gpu_memory", "reward_timeout"):
        need(getattr(a, name) >= 0, f"--{name} {getattr(a, name)} must be >= 0")
    need(a.group_size >= 2, f"--group_size {a.group_size}: group advantages need at least 2 responses per prompt")
    for name in ("prompts_per_step", "mini_batch_prompts", "sft_batch_size"):
        need(getattr(a, name) % world_size == 0,
             f"--{name} {getattr(a, name)} must be divisible by the {world_size} processes")
    need(a.prompts_per_step % a.mini_batch_prompts == 0,
         f"--prompts_per_step {a.prompts_per_step} must be a multiple of --mini_batch_prompts {a.mini_batch_prompts}")
    need(not a.fsdp or world_size > 1, "--fsdp shards over processes: run it under torchrun (e.g. --nproc_per_node 2)")
    need(a.lam_min <= a.lam_max, f"--lam_min {a.lam_min} / --lam_max {a.lam_max}: need 0 <= lam_min <= lam_max")
    need(0 <= a.clip_low < 1 and a.clip_c > 1, f"--clip_low {a.clip_low} must be in [0, 1), --clip_c {a.clip_c} > 1")
    need(0 < a.forking_ratio <= 1 and 0 < a.top_p <= 1 and a.vllm_gpu_memory < 1,
         "--forking_ratio and --top_p must be in (0, 1], --vllm_gpu_memory in [0, 1)")
    need(a.fipo_low <= 1 <= a.fipo_high, f"--fipo_low {a.fipo_low}, --fipo_high {a.fipo_high}: need low <= 1 <= high")
    need(0 <= a.overlong_buffer < a.max_new_tokens,
         f"--overlong_buffer {a.overlong_buffer} must be in [0, max_new_tokens={a.max_new_tokens})")
    need(a.epochs > 0 or a.max_steps > 0, "give --max_steps > 0 or --epochs > 0")
    need(not a.warm_start_only or not a.model, "--warm_start_only warms up the tiny default: give no --model")
    need(not a.resume or a.output_dir, "--resume needs the --output_dir of the run to continue")
    need(a.vllm or not a.vllm_offload_trainer, "--vllm_offload_trainer frees the trainer's memory for vLLM: add --vllm")
    if a.vllm:
        need(not sampling().vllm_problem(a), sampling().vllm_problem(a))  # installed, a model length that fits


def resolve_defaults(args, kind=None, rows=()):
    """Every "auto" resolved once, before any work (args.json records the outcome): the names, the reward (the rows'
    kind), the answer format (what the prompts ask for, else the box) and the instruction that asks for it."""
    source = os.path.basename(args.model.rstrip("/")) or ("tiny" if args.task == "addition" else f"tiny-{args.task}")
    args.run_name = args.run_name or f"{args.algo}-{source}-s{args.seed}"
    args.output_dir = args.output_dir or os.path.join("runs", args.run_name)
    kind = kind or ("code" if args.task == "code" and not args.dataset else "math")
    if args.reward not in ("auto", kind):
        raise ArgumentError(f"--reward {args.reward}, but the rows are {kind} rows ("
                            f"{'test specs' if kind == 'code' else 'answers, no test specs'}): use --reward auto")
    args.reward = kind
    embedded = not args.dataset  # the embedded tasks' responses learned their format in the warm start: no request
    rows, trained = ((), {"instruction": ""}) if embedded else (rows, None)
    try:  # rewards.prompt_settings: the one rule for "auto"
        args.answer_format, args.instruction = rewards().prompt_settings(args.answer_format, args.instruction, rows,
                                                                         kind, trained)
    except rewards().DataError as e:
        raise ArgumentError(str(e)) from None
    if not args.model:  # the tiny default's warm start
        args.sft_target_acc = args.sft_target_acc or tasks().TASKS[args.task]["sft_target"]
    elif args.lr == Args.lr and int(os.environ.get("RANK", "0")) == 0:  # the tiny default's rate on a real model
        print(f"--lr {args.lr:g}, the tiny default's: the paper trains 8B and 14B models at 1e-6 (recipes/), the "
              "SmolLM2 recipe 135M at 1e-5; give --lr to choose", file=sys.stderr)


def fit_prompts(args, tok, train_rows, eval_rows):
    """--max_prompt_length: 0 becomes the longest prompt (none dropped); rows with longer prompts are dropped, and
    said; too few left to fill a step stops the run, naming the flag."""
    length = lambda r: len(sampling().encode_prompt(tok, prompt_text(tok, r["question"], args.instruction)))
    lengths = [length(r) for r in train_rows], [length(r) for r in eval_rows]
    args.max_prompt_length = args.max_prompt_length or max(max(ls, default=0) for ls in lengths)
    kept = [[r for r, n in zip(rows, ls) if n <= args.max_prompt_length] for rows, ls in zip((train_rows, eval_rows),
                                                                                             lengths)]
    dropped = len(train_rows) - len(kept[0]), len(eval_rows) - len(kept[1])
    if any(dropped) and int(os.environ.get("RANK", "0")) == 0:
        print(f"--max_prompt_length {args.max_prompt_length}: dropped {dropped[0]} of {len(train_rows)} training and "
              f"{dropped[1]} of {len(eval_rows)} held-out prompts (longest {max(lengths[0] + lengths[1])} tokens)",
              file=sys.stderr)
    if len(kept[0]) < args.prompts_per_step:
        raise ArgumentError(f"only {len(kept[0])} training prompts fit --max_prompt_length {args.max_prompt_length} "
                            f"(the longest has {max(lengths[0], default=0)} tokens); need at least --prompts_per_step "
                            f"{args.prompts_per_step}: raise --max_prompt_length (0: the longest prompt)")
    return kept


GROUPS = {  # --help's sections: every argument in one (a test holds it)
    "the run": "algo output_dir run_name seed resume max_steps epochs warm_start_only",
    "the model and data": "model dataset task dataset_split prompt_key answer_key eval_dataset eval_size code_schema "
                          "reward answer_format instruction reward_timeout",
    "the algorithm (DelTA, Sec. 3.2; the surrogate, Eq. B; the baselines)": "K lam_min lam_max delta_margin "
        "delta_gamma delta_assign delta_normalise clip_low clip_high clip_c overlong_buffer overlong_penalty "
        "forking_ratio sapo_tau_pos sapo_tau_neg fipo_decay fipo_low fipo_high fipo_safety",
    "rollouts": "prompts_per_step group_size temperature top_p top_k max_new_tokens max_prompt_length "
                "gen_max_tokens vllm vllm_gpu_memory vllm_max_batched_tokens vllm_max_model_len is_cap",
    "optimisation (and the tiny default's warm start)": "lr weight_decay max_grad_norm mini_batch_prompts "
        "sft_target_acc sft_max_steps sft_lr sft_batch_size",
    "scale": "fsdp precision max_tokens_per_micro_batch skip_zero_advantage head_chunk_tokens gradient_checkpointing "
             "feature_dtype offload_features feature_chunk_tokens vllm_offload_trainer dist_timeout_minutes",
    "logging": "eval_every eval_samples save_every keep_checkpoints report_to progress progress_seconds "
               "dump_rollouts_every",
}
ABOUT = """DelTA and its baselines (RL from verifiable rewards), in one file. The README's three paths:
  python delta.py                                    the tiny default, offline on a CPU
  python delta.py recipes/smollm2-addition.yaml      a real model on a dataset (docs/real-model.md)
  from delta import delta_coefficients, policy_loss  the loss in your trainer (README, "Copy the loss")
RECIPE: a .yaml or .json file of these arguments (recipes/), given first; flags after it override it."""


def parse_args(argv=None, cls=None, prog="delta.py") -> Args:
    """Command-line flags, after an optional recipe (a .yaml or .json file of them, recipes/) that they override:
    `delta.py recipes/qwen3-8b-deepmath.yaml --output_dir runs/x`, read by console.py; each mistake an ArgumentError
    of one line. eval.py reads its EvalArgs here too."""
    c, ours = console(), cls in (None, Args)
    try:
        return c.parse_args(sys.argv[1:] if argv is None else argv, cls or Args, prog, ABOUT if ours else None,
                            GROUPS if ours else None, c.ENDINGS if ours else None)
    except c.UsageError as e:
        raise ArgumentError(str(e)) from None


def main(argv=None):
    """delta.py's command: the exit status (EXIT), every mistake in the input said in one line."""
    try:
        return train(prepare(parse_args(argv)))
    except ArgumentError as e:
        print(f"delta.py: error: {e}", file=sys.stderr)
        return console().EXIT["mistake"]
    except FinishedAlready as e:
        if int(os.environ.get("RANK", "0")) == 0:
            print(e, file=sys.stderr)
        return 0


if __name__ == "__main__":
    sys.exit(main())
