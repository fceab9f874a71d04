"""Benchmark evaluation the way the paper reports it: n samples per problem, mean accuracy (avg@n).

    python eval.py --model runs/delta-tiny-s0/final --data held_out.jsonl --n 4
    python eval.py --model Qwen/Qwen3-8B-Base --benchmarks paper --n 16 --max_new_tokens 30000 \\
        --temperature 1.0 --top_p 0.7 --output_dir evals/qwen3-8b
    torchrun --nproc_per_node 8 eval.py --model ... --benchmarks paper -n 16   # samples sharded over ranks
(torchrun's own parser takes `--n` for an abbreviation of its options: write -n or --num_samples there.)

Writes DIR/results.json (per benchmark: avg@n, pass@k for k = 1, 2, 4, ..., n, maj@n, stderr of avg@n,
num_problems, mean_length, truncated; plus the macro average over the benchmarks) and DIR/samples.jsonl
(one record per sample), and prints a markdown table in the layout of the paper's Table 1.
delta.py's periodic evaluation calls sample_benchmark and summarize from here.
"""
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist

import delta
import rewards

# name -> where it lives on the hub and how to read it (columns, kind of verifier)
BENCHMARKS = {
    "aime24": dict(hub="HuggingFaceH4/aime_2024", split="train", question="problem", answer="answer", title="AIME24"),
    "aime25": dict(hub="MathArena/aime_2025", split="train", question="problem", answer="answer", title="AIME25"),
    "aime26": dict(hub="MathArena/aime_2026", split="train", question="problem", answer="answer", title="AIME26"),
    "hmmt25feb": dict(hub="MathArena/hmmt_feb_2025", split="train", question="problem", answer="answer", title="HMMT25 Feb"),
    "hmmt25nov": dict(hub="MathArena/hmmt_nov_2025", split="train", question="problem", answer="answer", title="HMMT25 Nov"),
    "hmmt26feb": dict(hub="MathArena/hmmt_feb_2026", split="train", question="problem", answer="answer", title="HMMT26 Feb"),
    "brumo25": dict(hub="MathArena/brumo_2025", split="train", question="problem", answer="answer", title="Brumo25"),
    "math500": dict(hub="HuggingFaceH4/MATH-500", split="test", question="problem", answer="answer", title="MATH500"),
    "gsm8k": dict(hub="openai/gsm8k", config="main", split="test", question="question", answer="answer", title="GSM8K"),
    "humaneval": dict(hub="openai/openai_humaneval", split="test", kind="code", title="HumanEval"),
    "mbpp": dict(hub="google-research-datasets/mbpp", split="test", kind="code", title="MBPP"),
}
PAPER = ["aime24", "aime25", "aime26", "hmmt25feb", "hmmt25nov", "hmmt26feb", "brumo25"]  # Table 1
CODE_INSTRUCTION = "Write the complete solution in one ```python code block."


@dataclass
class EvalArgs:
    model: str = field(default="", metadata={"help": "hub id or local path of the model to evaluate"})
    benchmarks: str = field(default="", metadata={"help": f"comma list of {', '.join(BENCHMARKS)}; 'paper' = the paper's seven"})
    data: str = field(default="", metadata={"help": "a local .json/.jsonl/.parquet benchmark (math answers)"})
    prompt_key: str = field(default="question", metadata={"help": "question column of --data"})
    answer_key: str = field(default="answer", metadata={"help": "answer column of --data"})
    instruction: str = field(default=delta.PROMPT_INSTRUCTION, metadata={"help": "appended to each math question"})
    n: int = field(default=16, metadata={"help": "samples per problem (the paper: 16); under torchrun write -n or --num_samples",
                                         "aliases": ["-n", "--num_samples"]})
    max_new_tokens: int = field(default=30000, metadata={"help": "generation limit (the paper: 30,000)"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature; 0 = greedy"})
    top_p: float = field(default=0.7, metadata={"help": "nucleus sampling"})
    top_k: int = field(default=0, metadata={"help": "top-k sampling, 0 = off"})
    batch_size: int = field(default=64, metadata={"help": "sequences per generate call on one rank"})
    limit: int = field(default=0, metadata={"help": "evaluate only the first N problems of each benchmark (0 = all)"})
    seed: int = field(default=0, metadata={"help": "sampling seed (each rank adds its rank)"})
    output_dir: str = field(default="eval_out", metadata={"help": "results.json and samples.jsonl go here"})
    bf16: bool = field(default=True, metadata={"help": "bf16 autocast on GPU"})


# =====================================================================================
# Metrics
# =====================================================================================
def pass_at_k(n, c, k):
    """Unbiased pass@k, 1 - C(n-c, k) / C(n, k), as a stable product; 1.0 when n - c < k."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def majority_vote(answers, verdicts, equal=None):
    """maj@n of one problem: the largest group of extracted answers, grouped by verifier equivalence
    (ties: the group seen first), is right if its answers are. None answers do not vote."""
    groups = []  # [representative, count, verdict]
    pending = [(a, v) for a, v in zip(answers, verdicts) if a is not None]
    if not pending:
        return 0.0
    uniq = list(dict.fromkeys(a for a, _ in pending))
    if equal is None:  # verifier equivalence of every pair of distinct answers, in the worker pool
        pairs = [(i, j) for i in range(len(uniq)) for j in range(i)]
        same = rewards.score_batch([f"\\boxed{{{uniq[i]}}}" for i, _ in pairs], [uniq[j] for _, j in pairs])
        table = {p: s == 1.0 for p, s in zip(pairs, same)}
        equal = lambda a, b: a == b or table.get((uniq.index(a), uniq.index(b)), False) or \
            table.get((uniq.index(b), uniq.index(a)), False)
    for a, v in pending:
        for g in groups:
            if equal(a, g[0]):
                g[1] += 1
                break
        else:
            groups.append([a, 1, v])
    best = max(groups, key=lambda g: g[1])  # max keeps the first of equal counts
    return float(best[2])


def summarize(records, n, kind="math"):
    """Metrics of one benchmark from its sample records (see module docstring)."""
    by_problem = {}
    for r in records:
        by_problem.setdefault(r["problem_id"], []).append(r)
    accs = [sum(r["correct"] for r in rs) / len(rs) for rs in by_problem.values()]
    P = len(accs)
    out = {f"avg@{n}": sum(accs) / P if P else 0.0}
    out["stderr"] = (math.sqrt(sum((a - out[f"avg@{n}"]) ** 2 for a in accs) / (P - 1)) / math.sqrt(P)) if P > 1 else 0.0
    ks = sorted({2 ** i for i in range(int(math.log2(n)) + 1)} | {n})
    for k in ks:
        out[f"pass@{k}"] = sum(pass_at_k(len(rs), round(sum(r["correct"] for r in rs)), k)
                               for rs in by_problem.values()) / max(P, 1)
    if kind == "math":
        out[f"maj@{n}"] = sum(majority_vote([r["extracted"] for r in rs], [r["correct"] for r in rs])
                              for rs in by_problem.values()) / max(P, 1)
    out["num_problems"] = P
    out["mean_length"] = sum(r["length"] for r in records) / max(len(records), 1)
    out["truncated"] = sum(r["truncated"] for r in records) / max(len(records), 1)
    return out


# =====================================================================================
# Data and sampling
# =====================================================================================
def load_benchmark(name, limit=0):
    """-> (rows [{"id", "question", "answer"}], kind). answer: gold string (math) or test spec (code)."""
    import datasets

    spec = BENCHMARKS[name]
    ds = datasets.load_dataset(spec["hub"], spec.get("config"), split=spec["split"])
    rows = []
    for i, r in enumerate(ds):
        if name == "gsm8k":
            rows.append({"question": r["question"], "answer": r["answer"].split("####")[-1].strip().replace(",", "")})
        elif name == "humaneval":
            rows.append({"question": f"Complete this Python function:\n```python\n{r['prompt']}```",
                         "answer": {"assert": f"{r['test']}\ncheck({r['entry_point']})"}})
        elif name == "mbpp":
            rows.append({"question": f"{r['text']}\nYour code should pass this test:\n{r['test_list'][0]}",
                         "answer": {"assert": (r.get("test_setup_code") or "") + "\n" + "\n".join(r["test_list"])}})
        else:
            rows.append({"question": r[spec["question"]], "answer": r[spec["answer"]]})
        rows[-1]["id"] = r.get("task_id", r.get("problem_idx", r.get("unique_id", i)))
    rows = rows[:limit] if limit else rows
    return rows, spec.get("kind", "math")


def load_local(path, prompt_key, answer_key, limit=0):
    rows = delta.load_rows(path, "train", prompt_key, answer_key)
    for i, r in enumerate(rows):
        r["id"] = i
    return rows[:limit] if limit else rows


def sample_benchmark(model, tok, rows, kind, n, max_new_tokens, temperature, top_p=1.0, top_k=0, batch_size=64,
                     instruction=delta.PROMPT_INSTRUCTION, bf16=True, name="data"):
    """n samples for every row; (problem, sample) pairs are sharded over ranks, records gathered on every rank."""
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    items = [(p, s) for p in range(len(rows)) for s in range(n)][rank::world]
    ask = CODE_INSTRUCTION if kind == "code" else instruction
    records = []
    for b in range(0, len(items), batch_size):
        chunk = items[b:b + batch_size]
        batch = delta.generate(model, tok, [delta.format_prompt(tok, rows[p]["question"], ask) for p, _ in chunk],
                               max_new_tokens, temperature, top_p, top_k, batch_size, bf16)
        texts = delta.decode_responses(tok, batch)
        verdicts = rewards.score_batch(texts, [rows[p]["answer"] for p, _ in chunk], kind)
        for (p, s), text, ok, length, trunc in zip(chunk, texts, verdicts, batch["response_mask"].sum(1).tolist(),
                                                   batch["truncated"].tolist()):
            records.append({"benchmark": name, "problem_id": rows[p].get("id", p), "problem_index": p, "sample": s,
                            "response": text,
                            "extracted": rewards.extract_answer(text) if kind == "math" else rewards.extract_code(text),
                            "correct": ok, "length": length, "truncated": trunc})
    if world > 1:
        parts = [None] * world
        dist.all_gather_object(parts, records)
        records = [r for part in parts for r in part]
    return sorted(records, key=lambda r: (r["problem_index"], r["sample"]))


def markdown_table(model_name, results, n):
    names = list(results["benchmarks"])
    head = "| model | " + " | ".join(BENCHMARKS.get(b, {}).get("title", b) for b in names) + " | Avg |"
    cells = [f"{100 * results['benchmarks'][b][f'avg@{n}']:.2f}" for b in names]
    row = f"| {model_name} | " + " | ".join(cells) + f" | {100 * results['average'][f'avg@{n}']:.2f} |"
    return "\n".join([head, "|" + "---|" * (len(names) + 2), row])


def main(args: EvalArgs):
    if not args.model:
        raise delta.ArgumentError("--model is required (a hub id or a local path)")
    names = PAPER if args.benchmarks == "paper" else [b for b in args.benchmarks.split(",") if b]
    unknown = [b for b in names if b not in BENCHMARKS]
    if unknown:
        raise delta.ArgumentError(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}, paper")
    if not names and not args.data:
        raise delta.ArgumentError("give --benchmarks and/or --data")
    if args.data and not os.path.exists(args.data):
        raise delta.ArgumentError(f"--data {args.data}: no such file")
    if args.n < 1 or args.max_new_tokens < 1 or args.temperature < 0 or args.batch_size < 1:
        raise delta.ArgumentError("--n, --max_new_tokens and --batch_size must be >= 1 and --temperature >= 0")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    rank, world, device = delta.setup_distributed()
    torch.manual_seed(args.seed + rank)
    model, tok = delta.load_model(args.model, device)
    suites = [(b, *load_benchmark(b, args.limit)) for b in names]
    if args.data:
        suites.append((os.path.splitext(os.path.basename(args.data))[0],
                       load_local(args.data, args.prompt_key, args.answer_key, args.limit), "math"))
    results, samples = {"model": args.model, "config": asdict(args), "benchmarks": {}}, []
    for name, rows, kind in suites:
        t = time.perf_counter()
        recs = sample_benchmark(model, tok, rows, kind, args.n, args.max_new_tokens, args.temperature, args.top_p,
                                args.top_k, args.batch_size, args.instruction, args.bf16, name)
        results["benchmarks"][name] = summarize(recs, args.n, kind)
        if rank == 0:
            print(f"{name}: avg@{args.n} {100 * results['benchmarks'][name][f'avg@{args.n}']:.2f} "
                  f"({len(rows)} problems, {time.perf_counter() - t:.0f}s)", file=sys.stderr)
        samples += recs
    keys = sorted(set.intersection(*(set(k for k, v in m.items() if isinstance(v, float))
                                     for m in results["benchmarks"].values())))
    results["average"] = {k: sum(m[k] for m in results["benchmarks"].values()) / len(results["benchmarks"])
                          for k in keys}  # macro average over the benchmarks run
    if rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        with open(os.path.join(args.output_dir, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
        with open(os.path.join(args.output_dir, "samples.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in samples)
        print(markdown_table(os.path.basename(args.model.rstrip("/")), results, args.n))
    del model
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return results


if __name__ == "__main__":
    from transformers import HfArgumentParser

    try:
        main(HfArgumentParser(EvalArgs).parse_args_into_dataclasses()[0])
    except delta.ArgumentError as e:
        sys.exit(f"eval.py: error: {e}")
