"""Seconds per RL step: `delta.py --algo dapo` next to TRL's GRPOTrainer (`loss_type="dapo"`), and DelTA's
overhead inside TRL (examples/trl_delta.py over TRL's own DAPO), on this machine, in one run.

    python bench/bench_trl.py                 # 20 rollout steps after 2 warm-up steps, each setting twice
    python bench/bench_trl.py --steps 4

The same warmed-up tiny model (made once by `delta.py --warm_start_only`), the addition task, 32 prompts x 8
samples per step, 2 optimizer steps per step (16 prompts each), responses of at most 64 tokens at temperature
1, AdamW at a constant 1e-4, DAPO's clip-higher, dual clip and soft overlong penalty (buffer 16). Each setting
runs in its own process with both cores (OMP_NUM_THREADS=2), twice, in the order A B C C B A. The split, per
rollout step:
    generate  sampling and rewards (delta.py: sample, verify, advantages; TRL: _generate, _calculate_rewards)
    score     the no-grad pass for old log-probs (and, for DelTA, h and lam); TRL: the rest of
              _generate_and_score_completions
    train     the optimizer steps (delta.py: update; TRL: the time from one rollout's start to the next one's,
              less the rollout: forward, backward, optimizer steps and the trainer's logging)
Each setting samples its own responses from the same start, so their lengths drift apart and the times with them:
HF generation and the padded training batches last as long as the batch's longest response, so the share of
responses cut at the length limit (the last row) moves the times more than the mean length does.
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

    class Timed(base):  # one record per rollout step: when it started, its sampling, its whole rollout
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
            self.records.append(dict(start=time.perf_counter(), generate=0.0, rollout=0.0))
            return self.timed("rollout", super()._generate_and_score_completions, *a, **k)

    torch.manual_seed(0)
    model, tok = AutoModelForCausalLM.from_pretrained(model), AutoTokenizer.from_pretrained(model)
    train, _ = trl_delta.addition_data()
    per_rollout = SETTINGS["prompts"] // SETTINGS["mini_batch_prompts"]
    rewards = [trl_delta.correct, get_soft_overlong_punishment(SETTINGS["max_new_tokens"], 16)]
    trainer = Timed(model=model, reward_funcs=rewards, train_dataset=train, processing_class=tok,
                    args=trl_delta.config(out, (3 + steps) * per_rollout, **SETTINGS))
    trainer.train()
    rec = Timed.records  # a step lasts from its rollout's start to the next one's: optimizer steps and logs included
    timed = [dict(r, total=nxt["start"] - r["start"]) for r, nxt in zip(rec[2:2 + steps], rec[3:3 + steps])]
    logs = [e for e in trainer.state.log_history if "completions/mean_length" in e][2:2 + steps]  # one per rollout
    print(json.dumps({"generate": mean(r["generate"] for r in timed),
                      "score": mean(r["rollout"] - r["generate"] for r in timed),
                      "train": mean(r["total"] - r["rollout"] for r in timed),
                      "length": mean(e["completions/mean_length"] for e in logs),
                      "truncated": mean(e["completions/clipped_ratio"] for e in logs)}))


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
            "train": mean(r["time/train"] for r in rows), "length": mean(r["response/length"] for r in rows),
            "truncated": mean(r["response/truncated"] for r in rows)}


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
    p.add_argument("--steps", type=int, default=20, help="timed rollout steps per setting (after 2 warm-up steps)")
    p.add_argument("--rounds", type=int, default=2, help="runs of each setting, in alternating order")
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
    settings = {"delta.py dapo": lambda: delta_run(model, args.steps, os.path.join(args.out, f"d-{time.time():.0f}")),
                **{f"TRL {algo}": lambda algo=algo: json.loads(run([
                    sys.executable, __file__, "--trl_child", algo, "--model", model, "--steps", str(args.steps),
                    "--out", args.out]).strip().splitlines()[-1]) for algo in ("dapo", "delta")}}
    runs = {name: [] for name in settings}
    for r in range(args.rounds):  # A B C, then C B A, ...: a drift of the machine's speed falls on all alike
        for name in (list(settings) if r % 2 == 0 else list(settings)[::-1]):
            runs[name].append(settings[name]())
    got = {name: {k: mean(t[k] for t in ts) for k in ts[0]} for name, ts in runs.items()}
    print(f"seconds per rollout step ({SETTINGS['prompts']} prompts x {SETTINGS['group']}, 2 optimizer steps, "
          f"mean of {args.steps} after 2 warm-up steps, "
          f"{args.rounds} runs of each; 2 cores)\n")
    print("| | " + " | ".join(got) + " | TRL dapo / delta.py dapo | TRL delta / TRL dapo |")
    print("|---" * (len(got) + 3) + "|")
    names = dict(length="mean response length (tokens)", truncated=f"share cut at {SETTINGS['max_new_tokens']} tokens")
    for k in ("generate", "score", "train", "total", "length", "truncated"):
        v = {name: (t["generate"] + t["score"] + t["train"] if k == "total" else t[k]) for name, t in got.items()}
        ratios = "| |" if k == "truncated" else f"| {v['TRL dapo'] / v['delta.py dapo']:.2f} | " \
                                                f"{v['TRL delta'] / v['TRL dapo']:.2f} |"
        print(f"| {names.get(k, k)} | " + " | ".join(f"{x:.3f}" if k == "truncated" else f"{x:.2f}" for x in v.values())
              + f" {ratios}")

if __name__ == "__main__":
    main()
