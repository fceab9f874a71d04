"""Benchmark: wall time per RL step of --algo dapo vs --algo delta, same seed and config, one process.

    python bench/bench_algo.py                          # tiny default, 40 steps each
    python bench/bench_algo.py --steps 20 --model PATH  # another model (synthetic task, flags of delta.py)

Both algorithms start from the same warm-started weights and the same RNG state and each keeps its own
model, optimizer and RNG stream, so each follows exactly the trajectory a separate `python delta.py
--algo X` run would. Their steps alternate (dapo, delta, delta, dapo, ...), so drift in the machine's
speed falls on both alike. Prints the mean seconds per step of each phase after the first 3 steps:
generate (sampling and rewards), score (the no-grad pass, with the features for DelTA), coefficients
(Sec. 3.2, DelTA only), train (the optimizer steps), and the DelTA/DAPO ratios.
"""
import copy
import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402

PHASES = ("time/generate", "time/score", "time/coefficients", "time/train")


def main(argv):
    steps = 40
    if "--steps" in argv:
        i = argv.index("--steps")
        steps, argv = int(argv[i + 1]), argv[:i] + argv[i + 2:]
    base = delta.prepare(delta.parse_args(argv + ["--output_dir", "/tmp/bench_algo", "--progress", "false"]))
    torch.manual_seed(base.args.seed)  # delta.py's boot: checks, rows, the model (the tiny default warm-started)
    runs = {}
    for algo in ("dapo", "delta"):
        run = delta.make_run(dataclasses.replace(base.args, algo=algo), copy.deepcopy(base.model), base.tok,
                             base.source, train_rows=base.train_rows, eval_rows=base.eval_rows)
        run.rng, run.rows = torch.get_rng_state(), []
        runs[algo] = run
    for step in range(steps):
        for algo in (("dapo", "delta") if step % 2 == 0 else ("delta", "dapo")):
            r = runs[algo]
            torch.set_rng_state(r.rng)
            r.rows.append(delta.rl_step(r, step))
            r.rng = torch.get_rng_state()
    mean = {}
    for algo, r in runs.items():
        rows = r.rows[3:]
        mean[algo] = {k: sum(x.get(k, 0.0) for x in rows) / len(rows)
                      for k in PHASES + ("response/length", "reward/acc")}
        mean[algo]["step"] = sum(mean[algo][k] for k in PHASES)
    print(f"{'seconds per step':<18}{'dapo':>10}{'delta':>10}{'delta/dapo':>12}")
    for k in PHASES + ("step",):
        ratio = f"{mean['delta'][k] / mean['dapo'][k]:>12.3f}" if mean["dapo"][k] > 1e-3 else f"{'-':>12}"
        print(f"{k:<18}{mean['dapo'][k]:>10.4f}{mean['delta'][k]:>10.4f}{ratio}")
    share = mean["delta"]["time/coefficients"] / mean["delta"]["step"]
    print(f"coefficients (Sec. 3.2): {share:.2%} of a DelTA step")
    for k in ("response/length", "reward/acc"):
        print(f"{k:<18}{mean['dapo'][k]:>10.3f}{mean['delta'][k]:>10.3f}")
    print(f"steps timed: {steps - 3} per algorithm, {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main(sys.argv[1:])
