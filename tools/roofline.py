"""Benchmark: the RL step phase by phase against this machine's own measured limits (a roofline table).

    python tools/smollm2.py --out /tmp/smollm2
    python tools/roofline.py --real /tmp/smollm2       # SmolLM2 at the recipe's settings: 8 prompts x 8, 32 new tokens
    python tools/roofline.py                           # the tiny default's model and task (not warm-started)

The limits first, measured here: matmul GFLOP/s in fp32 and bf16 (2048 x 2048 x 2048) and memory GB/s (a 256 MiB
copy, bytes read + written). Then one rollout, sampled once and reused by every phase, and each phase timed
--repeat times (the median), before issue 50 (bench_speed.before: HF generate on each prompt repeated G times, no
prompt shared in scoring) and after (delta.py as it is), in fp32 and under bf16 autocast, in alternating order:
    prefill       the prompts' forward: before, every row's whole prompt; after, each distinct prompt once, then its
                  last token in every row (a generation of one token)
    decode        the other tokens, a step each (the generation's time minus its prefill's)
    score         the no-grad pass: log-probs, entropy and Eq. D's features of the rows with a signal
    coefficients  Sec. 3.2 on those features
    update        forward, gradient checkpointing's recompute and backward, AdamW: one step a mini-batch
FLOPs: 2 x the matmul weights a token passes (the LM head only where a logit is kept) + attention's 4 x layers x
query width x context a token; the update is 4 forwards (forward, recompute, backward twice). Bytes: the weights
once a forward (decode: once a step; bf16 autocast reads its bf16 copies) + the KV cache a decode step reads; the
coefficients' passes over v [n, H] (2 + 2K of them, 4 FLOPs an element a pass). The bound is max(FLOPs / the
dtype's matmul peak, bytes / bandwidth); "of bound" is bound / time (1 = at this machine's limit).
"""
import argparse
import dataclasses
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import delta  # noqa: E402
import sampling  # noqa: E402
from bench_speed import before  # noqa: E402

PHASES = ("prefill", "decode", "score", "coefficients", "update")


def peaks(seconds=2.0):
    """Measured: fp32 and bf16 matmul FLOP/s, memory bytes/s (read + written)."""
    def rate(f, work):
        f()
        t, k = time.perf_counter(), 0
        while time.perf_counter() - t < seconds:
            f()
            k += 1
        return work * k / (time.perf_counter() - t)
    out, n = {}, 2048
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
        out[name] = rate(lambda: a @ b, 2 * n ** 3)
    x = torch.empty(64 << 20)
    y = torch.empty_like(x)
    out["bytes"] = rate(lambda: y.copy_(x), 2 * x.numel() * 4)
    return out


def shape(model):
    """(matmul weights below the head, the head's, layers, query width, KV width a layer) of an HF decoder."""
    head = model.get_output_embeddings().weight
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)
                 and m.weight is not head)
    c = model.config
    hd = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return linear, head.numel(), c.num_hidden_layers, c.num_attention_heads * hd, c.num_key_value_heads * hd


def forward_work(model, tokens, context, kept, dtype_bytes, reads=1):
    """(FLOPs, bytes) of forwards of `tokens` tokens with `context` summed over them, `kept` logits, the weights
    read `reads` times."""
    linear, head, L, q, _ = shape(model)
    flops = 2 * linear * tokens + 4 * L * q * context + 2 * head * kept
    return flops, (linear + head) * dtype_bytes * reads


def measure(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--real", default="", help="a SmolLM2 folder: tools/real_learning.py's task and settings")
    p.add_argument("--repeat", type=int, default=3, help="timings of each phase (the median is shown)")
    opts, argv = p.parse_known_args(argv)
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    lim = peaks()
    print(f"measured limits, {torch.get_num_threads()} threads: fp32 matmul {lim['fp32'] / 1e9:.0f} GFLOP/s, bf16 "
          f"matmul {lim['bf16'] / 1e9:.0f} GFLOP/s, memory {lim['bytes'] / 1e9:.1f} GB/s (read + written)")
    from bench_skip import build
    base = build(argv + ([] if opts.real else ["--sft_max_steps", "0"]), opts.real)
    a, model = base.args, base.model
    runs = {prec: delta.make_run(dataclasses.replace(a, precision=prec), model, base.tok, base.source,
                                 train_rows=base.train_rows) for prec in ("fp32", "bf16")}
    run = runs["fp32"]
    rows, _ = delta.step_prompts(run, 0)
    prompts = [delta.prompt_text(run.tok, r["question"], a.instruction) for r in rows]
    torch.manual_seed(a.seed)
    batch = delta.sample(run.sampler, prompts, a.temperature, a.group_size)
    correct, reward = delta.verify(run, batch, rows)
    adv = delta.group_advantages(reward, a.group_size, run.algo["scale"])
    train_plan, score_plan = delta.forward_plans(run, batch, adv)
    G, N, P = a.group_size, len(adv), batch["prompt_len"]
    R = batch["response_mask"].shape[1]
    prompt_ids = [sampling.encode_prompt(run.tok, t) for t in prompts]
    live = (adv != 0).sum().item()
    linear, head, L, q, kv = shape(model)
    print(f"{base.source}: {len(prompts)} prompts x {G}, prompt {P} tokens (padded), responses up to {R} tokens "
          f"(mean {batch['response_mask'].sum(1).float().mean():.1f}), {live} of {N} rows with a signal; "
          f"{(linear + head) / 1e6:.1f} M matmul weights")

    ids = [p for p in prompt_ids for _ in range(G)]
    pad = run.tok.pad_token_id
    x = torch.tensor([[pad] * (P - len(p)) + p for p in ids])  # [N, P] left-padded, as the sampler builds it
    am = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in ids])
    steps = R  # every row decodes R tokens (no eos ends one): both paths do the same work
    batch["old_logp"], _, features = delta.score(run, batch, adv, score_plan, True)

    def phase_fns(r, prec):
        def generate(new):
            def f():
                with torch.no_grad(), delta.autocast(torch.device("cpu"), prec == "bf16"):
                    sampling.decode(r.model, x, am, new, [], pad, a.temperature)
            return f
        return {"prefill": generate(1), "generate": generate(steps),
                "score": lambda: delta.score(r, batch, adv, score_plan, True),
                "coefficients": lambda: run.algo["weights"](r, dict(batch=batch, adv=adv, features=features, stats={})),
                "update": lambda: delta.update(r, batch, adv, None, train_plan)}

    times = {}
    arms = [(path, prec) for path in ("before", "after") for prec in ("fp32", "bf16")]
    for k in range(opts.repeat):
        for path, prec in arms if k % 2 == 0 else arms[::-1]:
            fns = phase_fns(runs[prec], prec)
            with before(path == "before"):
                for name in ("prefill", "generate", "score", "coefficients", "update"):
                    times.setdefault((path, prec, name), []).append(measure(fns[name], 1))
    med = {key: statistics.median(v) for key, v in times.items()}

    u, wb = len(prompts), {"fp32": 4, "bf16": 2}
    ctx = lambda first, last: (last * (last + 1) - first * (first + 1)) // 2  # sum of contexts first+1 .. last
    sc_rows = int(sum(len(g) for gs in score_plan for g in gs))
    tr_rows = int(sum(len(g) for gs in train_plan for g in gs))
    n_feat = int((batch["response_mask"] & (adv != 0)[:, None]).sum())

    def work(path, prec, name):
        b = wb[prec]
        if name == "prefill":
            if path == "before":
                return forward_work(model, N * P, N * ctx(0, P), N, b)
            f1 = forward_work(model, u * (P - 1), u * ctx(0, P - 1), u, b)
            f2 = forward_work(model, N, N * P, N, b)
            return f1[0] + f2[0], f1[1] + f2[1]
        if name == "decode":
            f, by = forward_work(model, N * (steps - 1), N * ctx(P, P + steps - 1), N * (steps - 1), b,
                                 reads=steps - 1)
            return f, by + (steps - 1) * N * L * 2 * kv * b * (P + steps / 2)  # the KV cache read a step
        if name == "score":
            if path == "before":
                return forward_work(model, sc_rows * (P + R), sc_rows * ctx(0, P + R), sc_rows * R, b)
            f1 = forward_work(model, u * (P - 1), u * ctx(0, P - 1), u, b)
            f2 = forward_work(model, sc_rows * (R + 1), sc_rows * ctx(P - 1, P + R), sc_rows * R, b)
            return f1[0] + f2[0], f1[1] + f2[1]
        if name == "coefficients":
            passes = 2 + 2 * a.K
            return passes * 4 * n_feat * model.config.hidden_size, passes * n_feat * model.config.hidden_size * 4
        f, by = forward_work(model, tr_rows * (P + R), tr_rows * ctx(0, P + R), tr_rows * R, b,
                             reads=3 * len(train_plan))
        return 4 * f, by + 16 * (linear + head) * len(train_plan)  # AdamW: weights, gradients, two moments

    print(f"\n| phase | path | dtype | seconds | GFLOP | GB moved | GFLOP/s | bound s | of bound |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for name in PHASES:
        for path, prec in arms:
            if name == "decode":
                t = med[(path, prec, "generate")] - med[(path, prec, "prefill")]
            else:
                t = med[(path, prec, name)]
            f, by = work(path, prec, name)
            peak = lim["bf16"] if prec == "bf16" and name != "coefficients" else lim["fp32"]
            bound = max(f / peak, by / lim["bytes"])
            print(f"| {name} | {path} | {prec} | {t:.3f} | {f / 1e9:.1f} | {by / 1e9:.2f} | {f / t / 1e9:.0f} | "
                  f"{bound:.3f} | {bound / t:.2f} |")
    print("\n| path | dtype | prefill + decode s | + score + coefficients + update s |\n|---|---|---|---|")
    for path, prec in arms:
        g = med[(path, prec, "generate")]
        rest = sum(med[(path, prec, n)] for n in ("score", "coefficients", "update"))
        print(f"| {path} | {prec} | {g:.2f} | {g + rest:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
