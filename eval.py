"""Benchmark evaluation the way the paper reports it: n samples per problem, mean accuracy (avg@n).

    python eval.py --model runs/delta-tiny-s0/final --data runs/delta-tiny-s0/held_out.jsonl -n 4
    python eval.py --model Qwen/Qwen3-8B-Base --benchmarks paper -n 16 --max_new_tokens 30000 \\
        --temperature 1.0 --top_p 0.7 --output_dir evals/qwen3-8b
    torchrun --nproc_per_node 8 eval.py --model ... --benchmarks paper -n 16   # samples sharded over ranks
    python eval.py --model ... --benchmarks paper --benchmark_dir /data/benchmarks   # offline copies
    python eval.py --model ... --benchmarks humaneval,mbpp -n 1 --temperature 0      # code, sandboxed

Writes DIR/results.json (per benchmark: avg@n, pass@k for k = 1, 2, 4, ..., n, maj@n for math, the
standard error of avg@n, num_problems, mean_length, truncated; plus their average over the benchmarks)
and DIR/samples.jsonl (one record per sample), and prints a markdown table in the layout of the
paper's Table 1. A model folder written by delta.py carries the prompt settings it was trained with
(delta_prompt.json); they are the default here.
"""
import json
import math
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist

import delta
import rewards

# name -> where it lives on the hub and how to read it (columns, kind of verifier)
BENCHMARKS = {
    "aime24": dict(hub="HuggingFaceH4/aime_2024", split="train", question="problem", answer="answer", title="AIME24", aime=True),
    "aime25": dict(hub="MathArena/aime_2025", split="train", question="problem", answer="answer", title="AIME25", aime=True),
    "aime26": dict(hub="MathArena/aime_2026", split="train", question="problem", answer="answer", title="AIME26", aime=True),
    "hmmt25feb": dict(hub="MathArena/hmmt_feb_2025", split="train", question="problem", answer="answer", title="HMMT25 Feb"),
    "hmmt25nov": dict(hub="MathArena/hmmt_nov_2025", split="train", question="problem", answer="answer", title="HMMT25 Nov"),
    "hmmt26feb": dict(hub="MathArena/hmmt_feb_2026", split="train", question="problem", answer="answer", title="HMMT26 Feb"),
    "brumo25": dict(hub="MathArena/brumo_2025", split="train", question="problem", answer="answer", title="Brumo25"),
    "math500": dict(hub="HuggingFaceH4/MATH-500", split="test", question="problem", answer="answer", title="MATH500"),
    "gsm8k": dict(hub="openai/gsm8k", config="main", split="test", question="question", answer="answer", title="GSM8K"),
    "humaneval": dict(hub="openai/openai_humaneval", split="test", kind="code", title="HumanEval"),
    "mbpp": dict(hub="google-research-datasets/mbpp", config="full", split="test", kind="code", title="MBPP"),
}
PAPER = ["aime24", "aime25", "aime26", "hmmt25feb", "hmmt25nov", "hmmt26feb", "brumo25"]  # Table 1
CODE_INSTRUCTION = "Write the complete solution in one ```python code block."
MATHARENA_INSTRUCTION = "Put your final answer within \\boxed{}."  # MathArena: before the problem, one user message
MATHARENA_AIME_HINT = "The answer is an integer between 0 and 999 inclusive."
HUMANEVAL_STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")  # the Codex paper's stops for bare completions


@dataclass
class EvalArgs:
    model: str = field(default="", metadata={"help": "hub id or local path of the model to evaluate"})
    model_name: str = field(default="", metadata={"help": "name in the table; default the path's last two parts"})
    benchmarks: str = field(default="", metadata={"help": f"comma list of {', '.join(BENCHMARKS)}; 'paper' = the paper's seven"})
    benchmark_dir: str = field(default="", metadata={"help": "offline copies in the hub's schema: DIR holding <name>.jsonl/.json/.parquet, or name=path,name=path"})
    data: str = field(default="", metadata={"help": "a local .json/.jsonl/.parquet benchmark of math answers"})
    prompt_key: str = field(default="question", metadata={"help": "question column of --data"})
    answer_key: str = field(default="answer", metadata={"help": "answer column of --data"})
    instruction: str = field(default="auto", metadata={"help": "appended to each math question; auto: as the model was trained (delta_prompt.json), else ask for \\boxed{}"})
    prompt_style: str = field(default="train", metadata={"help": "train: the training prompt | matharena: MathArena's instruction before the problem, AIME's integer hint"})
    n_samples: int = field(default=16, metadata={"help": "samples per problem (the paper: 16)", "aliases": ["-n", "--num_samples"]})
    max_new_tokens: int = field(default=30000, metadata={"help": "generation limit (the paper: 30,000)"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature; 0 = greedy"})
    top_p: float = field(default=0.7, metadata={"help": "nucleus sampling"})
    top_k: int = field(default=0, metadata={"help": "top-k sampling, 0 = off"})
    gen_max_tokens: int = field(default=1 << 20, metadata={"help": "token budget of one generate call on one rank (sequences x (prompt + max_new_tokens))"})
    limit: int = field(default=0, metadata={"help": "evaluate only the first N problems of each benchmark (0 = all)"})
    seed: int = field(default=0, metadata={"help": "sampling seed (each rank adds its rank)"})
    output_dir: str = field(default="eval_out", metadata={"help": "results.json and samples.jsonl go here"})
    bf16: bool = field(default=True, metadata={"help": "on GPU, load the weights in bf16 (as lm-eval-harness and vLLM do)"})
    vllm: bool = field(default=False, metadata={"help": "sample with vLLM (requirements-vllm.txt)"})
    vllm_gpu_memory: float = field(default=0.9, metadata={"help": "share of GPU memory vLLM may take"})
    vllm_max_model_len: int = field(default=0, metadata={"help": "vLLM's maximum sequence length; 0 = longest prompt + max_new_tokens"})


# =====================================================================================
# Metrics
# =====================================================================================
def pass_at_k(n, c, k):
    """Unbiased pass@k, 1 - C(n-c, k) / C(n, k), as a stable product; 1.0 when n - c < k."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n = {n} samples")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def majority_vote(answers, verdicts, equal=None):
    """maj@n of one problem: answers are grouped by verifier equivalence and the largest group wins. When
    several groups tie for largest, the credit is the share of them that is right (the expected accuracy
    of a random tie-break). Missing answers (None) do not vote."""
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
    groups = []  # [representative, count, verdict]
    for a, v in pending:
        for g in groups:
            if equal(a, g[0]):
                g[1] += 1
                break
        else:
            groups.append([a, 1, v])
    top = max(g[1] for g in groups)
    tied = [g[2] for g in groups if g[1] == top]
    return float(sum(tied)) / len(tied)


def summarize(records, n, kind="math"):
    """Metrics of one benchmark from its sample records (see module docstring)."""
    by_problem = {}
    for r in records:
        by_problem.setdefault(r["problem_id"], []).append(r)
    accs = [sum(r["correct"] for r in rs) / len(rs) for rs in by_problem.values()]
    P = len(accs)
    out = {f"avg@{n}": sum(accs) / P if P else 0.0}
    out["stderr"] = (math.sqrt(sum((a - out[f"avg@{n}"]) ** 2 for a in accs) / (P - 1)) / math.sqrt(P)) if P > 1 else 0.0
    for k in sorted({2 ** i for i in range(int(math.log2(n)) + 1)} | {n}):
        out[f"pass@{k}"] = sum(pass_at_k(len(rs), round(sum(r["correct"] for r in rs)), k)
                               for rs in by_problem.values()) / max(P, 1)
    if kind == "math":
        out[f"maj@{n}"] = sum(majority_vote([r["extracted"] for r in rs], [r["correct"] for r in rs])
                              for rs in by_problem.values()) / max(P, 1)
    out["num_problems"] = P
    out["mean_length"] = sum(r["length"] for r in records) / max(len(records), 1)
    out["truncated"] = sum(r["truncated"] for r in records) / max(len(records), 1)
    return out


def average(per_benchmark, n):
    """The macro average over benchmarks; its standard error treats them as independent,
    sqrt(sum of squared standard errors) / count. maj@n averages the math benchmarks only."""
    out = {}
    for key in sorted({k for m in per_benchmark.values() for k, v in m.items() if isinstance(v, float)}):
        having = [m for m in per_benchmark.values() if key in m]
        if key == "stderr":
            out[key] = math.sqrt(sum(m[key] ** 2 for m in having)) / len(having)
        else:
            out[key] = sum(m[key] for m in having) / len(having)
        if len(having) < len(per_benchmark):
            out.setdefault("partial", {})[key] = sorted(b for b, m in per_benchmark.items() if key in m)
    return out


# =====================================================================================
# Data: the registry, local copies, prompts, and what a code response runs
# =====================================================================================
def read_table(path, config=None, split="train"):
    """A local file (.jsonl/.json/.parquet) or a hub dataset, as a list of dicts."""
    import datasets

    ext = os.path.splitext(path)[1]
    if ext in (".json", ".jsonl", ".parquet"):
        return list(datasets.load_dataset("parquet" if ext == ".parquet" else "json", data_files=path, split="train"))
    return list(datasets.load_dataset(path, config, split=split))


def local_copies(benchmark_dir, names):
    """--benchmark_dir: name -> local file, from a folder of <name>.<ext> files or name=path pairs."""
    if not benchmark_dir:
        return {}
    if "=" in benchmark_dir:
        pairs = dict(item.split("=", 1) for item in benchmark_dir.split(",") if item)
        unknown = [n for n in pairs if n not in BENCHMARKS]
        if unknown:
            raise delta.ArgumentError(f"--benchmark_dir names unknown benchmarks {unknown}")
        missing = [p for p in pairs.values() if not os.path.exists(p)]
        if missing:
            raise delta.ArgumentError(f"--benchmark_dir: no such file {missing}")
        return pairs
    if not os.path.isdir(benchmark_dir):
        raise delta.ArgumentError(f"--benchmark_dir {benchmark_dir}: no such folder")
    found = {}
    for name in names:
        for ext in (".jsonl", ".json", ".parquet"):
            if os.path.exists(os.path.join(benchmark_dir, name + ext)):
                found[name] = os.path.join(benchmark_dir, name + ext)
                break
        else:
            raise delta.ArgumentError(f"--benchmark_dir {benchmark_dir} has no {name}.jsonl, .json or .parquet")
    return found


def mbpp_entry_point(tests):
    m = re.search(r"assert\s*\(?\s*(?:not\s+)?(?:set\()?\s*(\w+)\s*\(", tests[0])
    return m.group(1) if m else None


def benchmark_rows(name, table):
    """Rows {"id", "question", "answer"} of a registered benchmark from its table in the hub's schema.
    answer: the gold string (math) or the test spec of rewards.code_reward (code)."""
    spec = BENCHMARKS[name]
    rows = []
    for i, r in enumerate(table):
        if name == "gsm8k":
            row = {"question": r["question"], "answer": r["answer"].split("####")[-1].strip().replace(",", "")}
        elif name == "humaneval":  # HumanEval's harness: prompt, then the completion, then test + check(entry_point)
            row = {"question": f"Complete this Python function:\n```python\n{r['prompt']}```", "prompt": r["prompt"],
                   "answer": {"setup": r["prompt"], "assert": f"{r['test']}\ncheck({r['entry_point']})",
                              "entry_point": r["entry_point"]}}
        elif name == "mbpp":  # the original MBPP prompt shows all three tests; test_setup_code runs before them
            tests = list(r["test_list"])
            row = {"question": f"You are an expert Python programmer, and here is your task: {r['text']} "
                               f"Your code should pass these tests:\n\n" + "\n".join(tests),
                   "answer": {"assert": (r.get("test_setup_code") or "") + "\n" + "\n".join(tests),
                              "entry_point": mbpp_entry_point(tests)}}
        else:
            row = {"question": r[spec["question"]], "answer": str(r[spec["answer"]])}
        row["id"] = r.get("task_id", r.get("problem_idx", r.get("unique_id", r.get("id", i))))
        rows.append(row)
    return rows


def code_to_grade(text, row, name):
    """The response as rewards.code_reward grades it: fenced blocks as written; a bare completion (a base
    model continuing the prompt) cut at the Codex stop sequences and fenced."""
    if rewards.extract_code(text) is not None:
        return text
    if name == "humaneval":
        cut = min([text.find(s) for s in HUMANEVAL_STOP if s in text] or [len(text)])
        text = text[:cut]
    return f"```python\n{text}\n```"


def prompt_text(tok, row, kind, name, args, instruction):
    if kind == "code":
        return delta.prompt_text(tok, row["question"], CODE_INSTRUCTION)
    if args.prompt_style == "matharena":  # the instruction first, then the problem, in one user message
        head = MATHARENA_INSTRUCTION + ("\n" + MATHARENA_AIME_HINT if BENCHMARKS.get(name, {}).get("aime") else "")
        return delta.prompt_text(tok, f"{head}\n\n{row['question']}", "")
    return delta.prompt_text(tok, row["question"], instruction)


def trained_instruction(model):
    """The instruction a delta.py model folder was trained with; the \\boxed{} request otherwise."""
    path = os.path.join(model, delta.PROMPT_FILE)
    if os.path.isfile(path):
        return json.load(open(path))["instruction"]
    return delta.PROMPT_INSTRUCTION


# =====================================================================================
# Sampling and grading
# =====================================================================================
def sample_benchmark(sampler, rows, kind, args, instruction, name="data"):
    """n samples for every row with delta.py's sampler (HF generate or vLLM); (problem, sample) pairs are
    sharded over ranks, records gathered on every rank."""
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    n, tok = args.n_samples, sampler.tok
    mine = [(p, s) for p in range(len(rows)) for s in range(n)][rank::world]
    prompts = [prompt_text(tok, rows[p], kind, name, args, instruction) for p, _ in mine]
    batch = delta.sample(sampler, prompts, args.temperature, 1, seed=(args.seed * 101 + rank) * 1_000_003)
    records = []
    if mine:
        texts = delta.decode_responses(tok, batch)
        if kind == "code":
            graded = [code_to_grade(t, rows[p], name) for t, (p, _) in zip(texts, mine)]
            verdicts = rewards.score_batch(graded, [rows[p]["answer"] for p, _ in mine], "code")
            extracted = [rewards.extract_code(g, rows[p]["answer"].get("entry_point")) for g, (p, _) in zip(graded, mine)]
        else:
            verdicts = rewards.score_batch(texts, [rows[p]["answer"] for p, _ in mine])
            extracted = [rewards.extract_answer(t) for t in texts]
        for (p, s), text, ok, ex, length, trunc in zip(mine, texts, verdicts, extracted, batch["response_mask"].sum(1).tolist(),
                                                       batch["truncated"].tolist()):
            records.append({"benchmark": name, "problem_id": rows[p]["id"], "problem_index": p, "sample": s,
                            "response": text, "extracted": ex, "correct": ok, "length": length, "truncated": trunc})
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


def sampler_args(args, longest_prompt):
    """delta.py's arguments for its sampler (HF generate or vLLM), from eval.py's."""
    return delta.Args(seed=args.seed, bf16=args.bf16, max_prompt_length=longest_prompt, max_new_tokens=args.max_new_tokens,
                      top_p=args.top_p, top_k=args.top_k, gen_max_tokens=args.gen_max_tokens, vllm=args.vllm,
                      vllm_gpu_memory=args.vllm_gpu_memory, vllm_max_model_len=args.vllm_max_model_len)


def validate(args):
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
    if args.n_samples < 1 or args.max_new_tokens < 1 or args.temperature < 0 or args.gen_max_tokens < 1:
        raise delta.ArgumentError("--n_samples, --max_new_tokens and --gen_max_tokens must be >= 1 and --temperature >= 0")
    if args.prompt_style not in ("train", "matharena"):
        raise delta.ArgumentError(f"--prompt_style {args.prompt_style!r}: use train or matharena")
    if args.vllm:
        delta.validate_args(sampler_args(args, 1))  # vLLM installed
    return names, local_copies(args.benchmark_dir, names)


def main(args: EvalArgs):
    names, copies = validate(args)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    rank, world, device = delta.setup_distributed()
    torch.manual_seed(args.seed + rank)
    bf16 = device.type == "cuda" and args.bf16
    if args.vllm:  # vLLM samples from the model folder; no second copy of the weights on the GPU
        model, tok = None, delta.load_tokenizer(args.model)
    else:
        model, tok = delta.load_model(args.model, device, torch.bfloat16 if bf16 else torch.float32)
        model.eval()
    instruction = trained_instruction(args.model) if args.instruction == "auto" else args.instruction
    suites = [(b, benchmark_rows(b, read_table(copies.get(b) or BENCHMARKS[b]["hub"], BENCHMARKS[b].get("config"),
                                               BENCHMARKS[b]["split"])), BENCHMARKS[b].get("kind", "math")) for b in names]
    if args.data:
        local = os.path.splitext(os.path.basename(args.data))[0]
        local = f"{local}-local" if local in BENCHMARKS else local  # never overwrite a registered benchmark
        rows = delta.load_rows(args.data, "train", args.prompt_key, args.answer_key)
        suites.append((local, [dict(r, id=i) for i, r in enumerate(rows)], "math"))
    suites = [(name, rows[:args.limit] if args.limit else rows, kind) for name, rows, kind in suites]
    longest = max(len(tok(prompt_text(tok, r, k, n, args, instruction), add_special_tokens=False).input_ids)
                  for n, rows, k in suites for r in rows)
    sampler = delta.make_sampler(sampler_args(args, longest), model, tok, args.model, delta.DDP(world, device), rank,
                                 world, device)
    model_name = args.model_name or "/".join(args.model.rstrip("/").split("/")[-2:])
    results, samples = {"model": args.model, "config": asdict(args), "instruction": instruction, "benchmarks": {}}, []
    for name, rows, kind in suites:
        t = time.perf_counter()
        recs = sample_benchmark(sampler, rows, kind, args, instruction, name)
        if rank == 0:  # metrics (maj@n's verifier calls) on one rank only
            results["benchmarks"][name] = summarize(recs, args.n_samples, kind)
            print(f"{name}: avg@{args.n_samples} {100 * results['benchmarks'][name][f'avg@{args.n_samples}']:.2f} "
                  f"({len(rows)} problems, {time.perf_counter() - t:.0f}s)", file=sys.stderr)
        samples += recs
    if rank == 0:
        results["average"] = average(results["benchmarks"], args.n_samples)
        os.makedirs(args.output_dir, exist_ok=True)
        with open(os.path.join(args.output_dir, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
        with open(os.path.join(args.output_dir, "samples.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in samples)
        print(markdown_table(model_name, results, args.n_samples))
    del model, sampler
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
