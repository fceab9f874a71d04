"""Issue 51, item 2: a task with long reasoning for SmolLM2, probed before any run: rows this project writes.

    python experiments/long_task.py --model /tmp/delta-smollm2 --probe            # every candidate, the base model
    python experiments/long_task.py --task four_sums --rows runs/four-sums.jsonl   # the rows of one, for delta.py

What the issue asks of the task: SmolLM2 writes worked reasoning of at least 60 tokens before its answer and is right
20-60 % of the time at the rollout temperature (so most groups of 8 hold a right and a wrong answer), most tokens
being shared phrasing (restated numbers, connectives, the format) and a few deciding. Each candidate is a family of
arithmetic word problems whose working restates its numbers; the instruction asks for the working, then the answer
as rewards.py's last_number rule reads it. The probe samples --problems problems x 8 at T 0.6 (and greedy), with
up to --max_new_tokens tokens, and prints per candidate: accuracy, the share of groups with spread, the mean
response length in tokens, the share of responses of at least 60 tokens, and the share cut at the limit.
"""
import argparse
import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTRUCTION = "Work it out step by step, writing each intermediate result, then give the answer as a number at the end."


def small_story(rng):
    start, more, eaten = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 5)
    return (f"Tom has {start} apples. His friend gives him {more} more apples, and then Tom eats {eaten} of them. "
            f"How many apples does Tom have now?", start + more - eaten)


NAMES, THINGS = ("Tom", "Anna", "Sam", "Lily", "Ben", "Mia"), ("apples", "pencils", "stickers", "cookies", "marbles")


def one_step_story(rng):
    start, more, name, thing = rng.randint(2, 9), rng.randint(2, 9), rng.choice(NAMES), rng.choice(THINGS)
    return (f"{name} has {start} {thing}. A friend gives {name} {more} more {thing}. How many {thing} does {name} "
            f"have now?", start + more)


def three_small_sums(rng):
    n = [rng.randint(2, 9) for _ in range(3)]
    return f"What is {n[0]} + {n[1]} + {n[2]}?", sum(n)


def boxes(rng):
    per, count = rng.randint(2, 9), rng.randint(2, 5)
    return (f"A box holds {per} pencils. Lily has {count} full boxes. How many pencils does Lily have?",
            per * count)


def four_sums(rng):
    n = [rng.randint(10, 99) for _ in range(4)]
    return f"What is {n[0]} + {n[1]} + {n[2]} + {n[3]}?", sum(n)


def shopping(rng):
    price, count, other = rng.randint(3, 9), rng.randint(3, 9), rng.randint(10, 60)
    return (f"Sam buys {count} notebooks at {price} dollars each and a bag that costs {other} dollars. How many "
            f"dollars does he spend in all?", price * count + other)


def marbles(rng):
    start, bags, per, lost = rng.randint(10, 60), rng.randint(2, 5), rng.randint(4, 12), rng.randint(1, 9)
    return (f"Anna has {start} marbles. She buys {bags} bags with {per} marbles in each bag, then loses {lost} "
            f"marbles. How many marbles does she have now?", start + bags * per - lost)


def change(rng):
    a, b = rng.randint(11, 45), rng.randint(11, 45)
    return (f"A book costs {a} dollars and a pen costs {b} dollars. Mia pays for both with a 100 dollar note. How "
            f"many dollars of change does she get?", 100 - a - b)


CANDIDATES = {f.__name__: f for f in (small_story, one_step_story, three_small_sums, boxes, four_sums, shopping,
                                       marbles, change)}


def make_rows(task, count, seed=0):
    """Up to `count` distinct problems of `task` in a fixed order (the first 128 are delta.py's held-out set); fewer
    when the task has fewer (boxes: 32)."""
    rng, seen, out = random.Random(seed), set(), []
    for _ in range(100 * count):
        if len(out) == count:
            break
        question, answer = CANDIDATES[task](rng)
        if question not in seen:
            seen.add(question)
            out.append({"question": question, "final_answer": str(answer)})
    return out


def probe(model, problems, max_new_tokens, tasks, temperatures, group=8):
    import torch

    sys.path.insert(0, ROOT)
    import checkpoints
    import delta
    import engines
    import sampling
    import rewards
    net, tok = checkpoints.load_model(model, torch.device("cpu"))
    print(f"{model}; instruction: {INSTRUCTION!r}; {problems} problems, {group} samples at each temperature, up to "
          f"{max_new_tokens} tokens\n")
    print("| task | greedy accuracy | T | accuracy | groups with spread | mean tokens | >= 60 tokens | cut at the "
          "limit |\n|---|---|---|---|---|---|---|---|", flush=True)
    for name in tasks:
        rows = make_rows(name, problems, seed=1)
        prompts = [delta.prompt_text(tok, r["question"], INSTRUCTION) for r in rows]
        golds = [r["final_answer"] for r in rows]
        sampler = sampling.HFSampler(delta.Args(max_new_tokens=max_new_tokens), net, tok, sampling.eos_ids(model, tok),
                                  engines.DDP(1, torch.device("cpu")))
        greedy = None
        for temperature, n in [(0.0, 1)] + [(t, group) for t in temperatures]:
            torch.manual_seed(0)
            batch = delta.sample(sampler, prompts, temperature, n)
            texts = sampling.decode_responses(tok, batch)
            right = rewards.score_batch(texts, [g for g in golds for _ in range(n)], answer_format="last_number")
            if n == 1:
                greedy = f"{100 * sum(right) / len(right):.1f} %"
                continue
            lengths = batch["response_mask"].sum(1).float()
            groups = [right[i:i + n] for i in range(0, len(right), n)]
            cells = [f"{temperature}", f"{100 * sum(right) / len(right):.1f} %",
                     f"{100 * sum(0 < sum(g) < n for g in groups) / len(groups):.0f} %", f"{lengths.mean():.0f}",
                     f"{100 * (lengths >= 60).float().mean():.0f} %",
                     f"{100 * (lengths >= max_new_tokens).float().mean():.0f} %"]
            print(f"  {name}, a sample at T {temperature}: {texts[0]!r}", file=sys.stderr, flush=True)
            print(f"| {name} | {greedy} | " + " | ".join(cells) + " |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="/tmp/delta-smollm2")
    p.add_argument("--probe", action="store_true", help="every candidate on the base model")
    p.add_argument("--problems", type=int, default=32)
    p.add_argument("--tasks", default=",".join(CANDIDATES), help="the candidates to probe, comma-separated")
    p.add_argument("--temperatures", default="0.6", help="sampling temperatures, comma-separated (8 samples each)")
    p.add_argument("--max_new_tokens", type=int, default=160)
    p.add_argument("--task", choices=list(CANDIDATES), help="write this task's rows to --rows")
    p.add_argument("--rows", help="the rows file (jsonl: question, final_answer)")
    p.add_argument("--count", type=int, default=4096, help="rows to write")
    args = p.parse_args()
    if args.probe:
        return probe(args.model, args.problems, args.max_new_tokens, args.tasks.split(","),
                     [float(t) for t in args.temperatures.split(",")])
    if not (args.task and args.rows):
        p.error("--probe, or --task with --rows")
    rows = make_rows(args.task, args.count)
    with open(args.rows, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"{len(rows)} rows of {args.task} in {args.rows}")


if __name__ == "__main__":
    main()
