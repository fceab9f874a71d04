"""Seconds per RL step: `delta.py --algo dapo` next to TRL's GRPOTrainer (`loss_type="dapo"`), and DelTA's
overhead inside TRL (examples/trl_delta.py over TRL's own DAPO), on this machine, in one run.

    python bench/bench_trl.py                 # 20 rollout steps after 2 warm-up steps, each setting twice
    python bench/bench_trl.py --steps 4
    git worktree add /tmp/before50 a4eb0e4^   # delta.py before issue 50's sampler, timed beside today's
    python bench/bench_trl.py --real /tmp/delta-smollm2 --rows runs/smollm2-rows.jsonl --before /tmp/before50 \
        --steps 4 --rounds 2                  # SmolLM2 at real_learning.py's settings

--real: SmolLM2 (or another model folder) on real_learning.py's task and settings instead (REAL: 8 prompts x 8,
2 optimizer steps of 4 prompts, 32 new tokens at temperature 0.6, lr 1e-5, overlong buffer 8, the rows of
`--rows` less the 128 that delta.py holds out, each question with the last_number instruction, graded by
rewards.py's last_number rule in both trainers). --before DIR: a checkout whose delta.py runs as a fourth setting.

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
REAL = dict(prompts=8, group=8, mini_batch_prompts=4, max_new_tokens=32, lr=1e-5, temperature=0.6)  # real_learning's
REAL_FLAGS = ["--answer_format", "last_number", "--overlong_buffer", "8", "--temperature", "0.6"]
HELD_OUT = 128  # the rows delta.py holds out of --rows (its --eval_size here)


def trl_child(algo, model, steps, out, rows=None):
    """One TRL run in this process (rows: --real's task); prints one JSON line of per-rollout-step timings."""
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
    settings = REAL if rows else SETTINGS
    train, correct = real_data(rows) if rows else (trl_delta.addition_data()[0], trl_delta.correct)
    per_rollout = settings["prompts"] // settings["mini_batch_prompts"]
    rewards = [correct, get_soft_overlong_punishment(settings["max_new_tokens"], 8 if rows else 16)]
    trainer = Timed(model=model, reward_funcs=rewards, train_dataset=train, processing_class=tok,
                    args=trl_delta.config(out, (3 + steps) * per_rollout, **settings))
    trainer.train()
    rec = Timed.records  # a step lasts from its rollout's start to the next one's: optimizer steps and logs included
    timed = [dict(r, total=nxt["start"] - r["start"]) for r, nxt in zip(rec[2:2 + steps], rec[3:3 + steps])]
    logs = [e for e in trainer.state.log_history if "completions/mean_length" in e][2:2 + steps]  # one per rollout
    print(json.dumps({"generate": mean(r["generate"] for r in timed),
                      "score": mean(r["rollout"] - r["generate"] for r in timed),
                      "train": mean(r["total"] - r["rollout"] for r in timed),
                      "length": mean(e["completions/mean_length"] for e in logs),
                      "truncated": mean(e["completions/clipped_ratio"] for e in logs)}))


def real_data(path):
    """--real's task as TRL prompts: the rows of `path` that delta.py trains on (it holds out the first HELD_OUT),
    each question with the last_number instruction as delta.py appends it, and rewards.py's last_number verdict."""
    sys.path.insert(0, ROOT)
    import rewards
    from datasets import Dataset

    with open(path) as f:
        rows = [json.loads(line) for line in f][HELD_OUT:]
    ask = rewards.ANSWER_FORMATS["last_number"]
    train = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{r['question']}\n{ask}"}],
                                "answer": r["final_answer"]} for r in rows])

    def correct(completions, answer, **_):
        return rewards.score_batch([c[-1]["content"] for c in completions], answer, answer_format="last_number")
    return train, correct


def delta_run(model, steps, out, root=ROOT, rows=None):
    """delta.py --algo dapo (of the checkout at `root`) for 2 + steps rollout steps; the mean timings of the last
    `steps`."""
    settings = REAL if rows else SETTINGS
    argv = ["--algo", "dapo", "--model", model, "--output_dir", out, "--max_steps", str(2 + steps), "--eval_every",
            "0", "--save_every", "0", "--eval_size", str(HELD_OUT if rows else 16), "--progress", "false",
            "--prompts_per_step", str(settings["prompts"]), "--group_size", str(settings["group"]),
            "--mini_batch_prompts", str(settings["mini_batch_prompts"]), "--max_new_tokens",
            str(settings["max_new_tokens"]), "--lr", str(settings["lr"])]
    run([sys.executable, "delta.py", *argv, *(["--dataset", rows, *REAL_FLAGS] if rows else [])], cwd=root)
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    rows = [r for r in rows if "time/train" in r][2:]
    return {"generate": mean(r["time/generate"] for r in rows), "score": mean(r["time/score"] for r in rows),
            "train": mean(r["time/train"] for r in rows), "length": mean(r["response/length"] for r in rows),
            "truncated": mean(r["response/truncated"] for r in rows)}


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs)


def run(cmd, cwd=ROOT):
    env = dict(os.environ, OMP_NUM_THREADS="2", PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1")
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{' '.join(cmd[:3])} failed:\n{p.stderr[-3000:]}")
    return p.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="timed rollout steps per setting (after 2 warm-up steps)")
    p.add_argument("--rounds", type=int, default=2, help="runs of each setting, in alternating order")
    p.add_argument("--out", default=os.path.join(ROOT, "runs", "bench_trl"))
    p.add_argument("--real", help="a model folder (SmolLM2): real_learning.py's task and settings (REAL)")
    p.add_argument("--rows", default=os.path.join(ROOT, "runs", "smollm2-rows.jsonl"),
                   help="--real's rows (python tools/real_learning.py --rows FILE)")
    p.add_argument("--before", help="a checkout of an earlier delta.py, timed as a fourth setting")
    p.add_argument("--trl_child", choices=("dapo", "delta"), help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--child_rows", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.out = os.path.abspath(args.out)  # (a --before checkout runs in its own folder)
    if args.trl_child:
        return trl_child(args.trl_child, args.model, args.steps, os.path.join(args.out, f"trl-{args.trl_child}"),
                         args.child_rows)
    rows = os.path.abspath(args.rows) if args.real else None
    if rows and not os.path.exists(rows):
        sys.exit(f"{rows}: no such file; make it: python tools/real_learning.py --rows {args.rows}")
    model = os.path.abspath(args.real) if args.real else os.path.join(args.out, "warm", "final")
    if not args.real and not os.path.exists(model):
        run([sys.executable, "delta.py", "--warm_start_only", "--output_dir", os.path.dirname(model), "--progress",
             "false"])
    new = lambda: os.path.join(args.out, f"d-{time.time():.0f}")  # noqa: E731
    settings = {"delta.py dapo": lambda: delta_run(model, args.steps, new(), rows=rows),
                **{f"TRL {algo}": lambda algo=algo: json.loads(run([
                    sys.executable, __file__, "--trl_child", algo, "--model", model, "--steps", str(args.steps),
                    "--out", args.out, *(["--child_rows", rows] if rows else [])]).strip().splitlines()[-1])
                   for algo in ("dapo", "delta")}}
    if args.before:
        settings["delta.py dapo, before"] = lambda: delta_run(model, args.steps, new(), args.before, rows)
    runs = {name: [] for name in settings}
    for r in range(args.rounds):  # A B C, then C B A, ...: a drift of the machine's speed falls on all alike
        for name in (list(settings) if r % 2 == 0 else list(settings)[::-1]):
            runs[name].append(settings[name]())
            print(f"{name}: {json.dumps(runs[name][-1])}", file=sys.stderr, flush=True)
    got = {name: {k: mean(t[k] for t in ts) for k in ts[0]} for name, ts in runs.items()}
    s = REAL if rows else SETTINGS
    print(f"seconds per rollout step ({s['prompts']} prompts x {s['group']}, 2 optimizer steps, "
          f"mean of {args.steps} after 2 warm-up steps, {args.rounds} runs of each; 2 cores; "
          f"{args.real or 'the tiny model'})\n")
    before = ["delta.py before / delta.py"] if args.before else []
    print("| | " + " | ".join(got) + " | " + " | ".join(["TRL dapo / delta.py dapo", "TRL delta / TRL dapo", *before])
          + " |")
    print("|---" * (len(got) + 3 + len(before)) + "|")
    names = dict(length="mean response length (tokens)", truncated=f"share cut at {s['max_new_tokens']} tokens")
    for k in ("generate", "score", "train", "total", "length", "truncated"):
        v = {name: (t["generate"] + t["score"] + t["train"] if k == "total" else t[k]) for name, t in got.items()}
        ratios = [v["TRL dapo"] / v["delta.py dapo"], v["TRL delta"] / v["TRL dapo"]] + (
            [v["delta.py dapo, before"] / v["delta.py dapo"]] if args.before else [])
        ratios = "| " * len(ratios) if k == "truncated" else "".join(f"| {x:.2f} " for x in ratios)
        print(f"| {names.get(k, k)} | " + " | ".join(f"{x:.3f}" if k == "truncated" else f"{x:.2f}" for x in v.values())
              + f" {ratios}|")


if __name__ == "__main__":
    main()
