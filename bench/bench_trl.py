"""Seconds per RL step: `delta.py --algo dapo` next to TRL's GRPOTrainer (`loss_type="dapo"`), and DelTA's
overhead inside TRL (examples/trl_delta.py over TRL's own DAPO), on this machine, in one run.

    python bench/bench_trl.py                 # 8 rollout steps each after 2 warm-up steps, the tiny default
    python bench/bench_trl.py --steps 4

The same warmed-up tiny model (made once by `delta.py --warm_start_only`), the addition task, 32 prompts x 8
samples per step, 2 optimizer steps per step (16 prompts each), responses of at most 64 tokens at temperature
1, AdamW at a constant 1e-4, DAPO's clip-higher, dual clip and soft overlong penalty (buffer 16). Each setting
runs in its own process with both cores (OMP_NUM_THREADS=2). The split, per rollout step:
    generate  sampling and rewards (delta.py: sample, verify, advantages; TRL: _generate, _calculate_rewards)
    score     the no-grad pass for old log-probs (and, for DelTA, h and lam); TRL: the rest of
              _generate_and_score_completions
    train     the optimizer steps (delta.py: update; TRL: training_step minus the rollout it starts)
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = dict(prompts=32, group=8, mini_batch_prompts=16, max_new_tokens=64, lr=1e-4)


def trl_child(algo, model, steps, out):
    """One TRL run in this process; prints one JSON line of per-rollout-step timings."""
    sys.path[:0] = [ROOT, os.path.join(ROOT, "examples")]
    import torch
    import trl_delta
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer
    from trl.rewards import get_soft_overlong_punishment

    base = trl_delta.DeltaGRPOTrainer if algo == "delta" else GRPOTrainer

    class Timed(base):  # one record per rollout step: its sampling, its rollout, its training steps
        records = []

        def timed(self, key, fn, *a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.records[-1][key] += time.perf_counter() - t

        def _generate(self, *a, **k):
            return self.timed("generate", super()._generate, *a, **k)

        def _calculate_rewards(self, *a, **k):
            return self.timed("generate", super()._calculate_rewards, *a, **k)

        def _generate_and_score_completions(self, *a, **k):
            self.records.append(dict.fromkeys(("generate", "rollout", "step"), 0.0))
            return self.timed("rollout", super()._generate_and_score_completions, *a, **k)

        def training_step(self, *a, **k):
            t = time.perf_counter()
            out = super().training_step(*a, **k)  # starts a rollout every 2 steps (a new record)
            self.records[-1]["step"] += time.perf_counter() - t
            return out

    torch.manual_seed(0)
    model, tok = AutoModelForCausalLM.from_pretrained(model), AutoTokenizer.from_pretrained(model)
    train, _ = trl_delta.addition_data()
    per_rollout = SETTINGS["prompts"] // SETTINGS["mini_batch_prompts"]
    rewards = [trl_delta.correct, get_soft_overlong_punishment(SETTINGS["max_new_tokens"], 16)]
    trainer = Timed(model=model, reward_funcs=rewards, train_dataset=train, processing_class=tok,
                    args=trl_delta.config(out, (2 + steps) * per_rollout, **SETTINGS))
    trainer.train()
    timed = Timed.records[2:]  # after 2 warm-up rollout steps
    print(json.dumps({"generate": mean(r["generate"] for r in timed),
                      "score": mean(r["rollout"] - r["generate"] for r in timed),
                      "train": mean(r["step"] - r["rollout"] for r in timed)}))


def delta_run(model, steps, out):
    """delta.py --algo dapo for 2 + steps rollout steps; the mean timings of the last `steps`."""
    argv = ["--algo", "dapo", "--model", model, "--output_dir", out, "--max_steps", str(2 + steps), "--eval_every",
            "0", "--save_every", "0", "--eval_size", "16", "--progress", "false", "--prompts_per_step",
            str(SETTINGS["prompts"]), "--group_size", str(SETTINGS["group"]), "--mini_batch_prompts",
            str(SETTINGS["mini_batch_prompts"]), "--max_new_tokens", str(SETTINGS["max_new_tokens"]),
            "--lr", str(SETTINGS["lr"])]
    run([sys.executable, "delta.py", *argv])
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    rows = [r for r in rows if "time/train" in r][2:]
    return {"generate": mean(r["time/generate"] for r in rows), "score": mean(r["time/score"] for r in rows),
            "train": mean(r["time/train"] for r in rows)}


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs)


def run(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="2", PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1")
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{' '.join(cmd[:3])} failed:\n{p.stderr[-3000:]}")
    return p.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=8, help="timed rollout steps per setting (after 2 warm-up steps)")
    p.add_argument("--out", default=os.path.join(ROOT, "runs", "bench_trl"))
    p.add_argument("--trl_child", choices=("dapo", "delta"), help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.trl_child:
        return trl_child(args.trl_child, args.model, args.steps, os.path.join(args.out, f"trl-{args.trl_child}"))
    warm = os.path.join(args.out, "warm")
    if not os.path.exists(os.path.join(warm, "final")):
        run([sys.executable, "delta.py", "--warm_start_only", "--output_dir", warm, "--progress", "false"])
    model = os.path.join(warm, "final")
    got = {"delta.py dapo": delta_run(model, args.steps, os.path.join(args.out, f"delta-dapo-{time.time():.0f}"))}
    for algo in ("dapo", "delta"):
        out = run([sys.executable, __file__, "--trl_child", algo, "--model", model, "--steps", str(args.steps),
                   "--out", args.out])
        got[f"TRL {algo}"] = json.loads(out.strip().splitlines()[-1])
    print(f"seconds per rollout step ({SETTINGS['prompts']} prompts x {SETTINGS['group']}, 2 optimizer steps, "
          f"mean of {args.steps} after 2 warm-up steps; 2 cores)\n")
    print("| | " + " | ".join(got) + " | TRL dapo / delta.py dapo | TRL delta / TRL dapo |")
    print("|---" * (len(got) + 3) + "|")
    for k in ("generate", "score", "train", "total"):
        v = {name: (sum(t.values()) if k == "total" else t[k]) for name, t in got.items()}
        print(f"| {k} | " + " | ".join(f"{x:.2f}" for x in v.values()) +
              f" | {v['TRL dapo'] / v['delta.py dapo']:.2f} | {v['TRL delta'] / v['TRL dapo']:.2f} |")


if __name__ == "__main__":
    main()
