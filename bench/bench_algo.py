"""Benchmark: wall time per RL step of --algo dapo vs --algo delta, same seed and config, one invocation.

    python bench/bench_algo.py                      # tiny default, 30 steps per run, runs in ABBA order
    python bench/bench_algo.py --steps 50 -- --model PATH --dataset FILE.jsonl   # extra delta.py flags

Each run starts from the same weights and seed (no warm start: --sft_max_steps 0), evaluation and
checkpoints off. Prints the mean seconds per step of each phase (generate, score = the no-grad pass plus,
for DelTA, features and coefficients, train) after the first 3 steps, and the DelTA/DAPO ratios.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASES = ("time/generate", "time/score", "time/train")


def run(algo, steps, extra, out):
    cmd = [sys.executable, "delta.py", "--algo", algo, "--max_steps", str(steps), "--output_dir", out,
           "--sft_max_steps", "0", "--eval_every", "0", "--save_every", "0", "--eval_size", "16",
           "--progress", "false", *extra]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    return [r for r in rows if "time/train" in r][3:]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=30, help="RL steps per run (the first 3 are not counted)")
    p.add_argument("extra", nargs="*", help="flags passed on to delta.py (after --)")
    a = p.parse_args()
    rows = {"dapo": [], "delta": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i, algo in enumerate(("dapo", "delta", "delta", "dapo")):  # ABBA: drift hits both alike
            rows[algo] += run(algo, a.steps, a.extra, os.path.join(tmp, f"{i}-{algo}"))
    mean = {algo: {k: sum(r[k] for r in rs) / len(rs) for k in PHASES + ("response/length",)} for algo, rs in rows.items()}
    for m in mean.values():
        m["step"] = sum(m[k] for k in PHASES)
    print(f"{'seconds per step':<18}{'dapo':>10}{'delta':>10}{'delta/dapo':>12}")
    for k in PHASES + ("step",):
        print(f"{k:<18}{mean['dapo'][k]:>10.3f}{mean['delta'][k]:>10.3f}{mean['delta'][k] / mean['dapo'][k]:>12.3f}")
    print(f"{'response length':<18}{mean['dapo']['response/length']:>10.1f}{mean['delta']['response/length']:>10.1f}")
    print(f"steps timed: {len(rows['dapo'])} per algorithm")


if __name__ == "__main__":
    main()
