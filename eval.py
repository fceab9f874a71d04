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
paper's Table 1. A model folder written by delta.py carries the prompt settings it was trained with and how its
run sampled (delta_prompt.json: temperature, top_p, top_k, max_new_tokens); they are the default here, and said.
"""
import datetime
import json
import math
import os
import random
import re
import sys
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist

import checkpoints
import console
import delta
import engines
import rewards
import sampling
import tasks
from tasks import CODE_SCHEMAS, code_prompt, code_specs, lcb_in_window, lcb_release_files

# name -> where it lives on the hub and how to read it (columns, kind of verifier)
BENCHMARKS = {
    "aime24": dict(hub="HuggingFaceH4/aime_2024", split="train", question="problem", answer="answer", title="AIME24",
                   aime=True),
    "aime25": dict(hub="MathArena/aime_2025", split="train", question="problem", answer="answer", title="AIME25",
                   aime=True),
    "aime26": dict(hub="MathArena/aime_2026", split="train", question="problem", answer="answer", title="AIME26",
                   aime=True),
    "hmmt25feb": dict(hub="MathArena/hmmt_feb_2025", split="train", question="problem", answer="answer",
                      title="HMMT25 Feb"),
    "hmmt25nov": dict(hub="MathArena/hmmt_nov_2025", split="train", question="problem", answer="answer",
                      title="HMMT25 Nov"),
    "hmmt26feb": dict(hub="MathArena/hmmt_feb_2026", split="train", question="problem", answer="answer",
                      title="HMMT26 Feb"),
    "brumo25": dict(hub="MathArena/brumo_2025", split="train", question="problem", answer="answer", title="Brumo25"),
    "math500": dict(hub="HuggingFaceH4/MATH-500", split="test", question="problem", answer="answer", title="MATH500"),
    "gsm8k": dict(hub="openai/gsm8k", config="main", split="test", question="question", answer="answer", title="GSM8K"),
    "humaneval": dict(hub="openai/openai_humaneval", split="test", kind="code", title="HumanEval"),
    "mbpp": dict(hub="google-research-datasets/mbpp", config="full", split="test", kind="code", title="MBPP"),
    # code_generation_lite's release files, --lcb_release, and the window --lcb_start/--lcb_end (read_livecodebench)
    "livecodebench": dict(hub="livecodebench/code_generation_lite", split="test", kind="code", title="LiveCodeBench"),
    # out of domain: four shuffled choices, a letter extracted (gpqa_rows, choice_letter); a gated hub dataset
    "gpqa_diamond": dict(hub="Idavidrein/gpqa", config="gpqa_diamond", split="train", kind="choice",
                         title="GPQA-Diamond"),
}
PAPER = ["aime24", "aime25", "aime26", "hmmt25feb", "hmmt25nov", "hmmt26feb", "brumo25"]  # Table 1
CODE_INSTRUCTION = "Write the complete solution in one ```python code block."
MATHARENA_INSTRUCTION = "Put your final answer within \\boxed{}."  # MathArena: before the problem, one user message
MATHARENA_AIME_HINT = "The answer is an integer between 0 and 999 inclusive."
HUMANEVAL_STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")  # the Codex paper's stops for bare completions
# lighteval's gpqa:diamond prompt (tasks/tasks/gpqa.py, gpqa_instruct_prompt), which is simple-evals' GPQA template
GPQA_INSTRUCTION = ("Answer the following multiple choice question. The last line of your response should be of the "
                    "following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by "
                    "step before answering.")


arg = delta.arg  # a dataclass field with a one-line help, as delta.py's Args


@dataclass
class EvalArgs(delta.SamplerArgs):  # the sampler's settings are delta.py's (temperature, top_p, vllm, ...)
    model: str = arg("", "hub id or local path of the model to evaluate")
    model_name: str = arg("", "name in the table; default the path's last two parts")
    benchmarks: str = arg("", f"comma list of {', '.join(BENCHMARKS)}; 'paper' = the paper's seven")
    benchmark_dir: str = arg("", "offline copies in the hub's schema: DIR holding <name>.jsonl/.json/.parquet/.csv "
                                 "(livecodebench: also a folder of the hub's files), or name=path,name=path")
    data: str = arg("", "a local .json/.jsonl/.parquet benchmark: math answers or code tests (a run's "
                        "held_out.jsonl as it was trained)")
    prompt_key: str = arg("question", "question column of --data; a dotted key reads a nested column")
    answer_key: str = arg("answer", "answer column of --data, e.g. reward_model.ground_truth; for --data_schema "
                                    "jsonl the spec column")
    data_schema: str = arg("auto", "auto: delta.py's held_out.jsonl as written, a code layout by its columns, else "
                                   "math | math | a code layout: deepcoder, primeintellect, apps, taco, "
                                   "livecodebench, jsonl")
    lcb_release: str = arg("release_v5", "LiveCodeBench release: release_vN / release_latest (files 1..N), vN "
                                         "(file N), vA_vB")
    lcb_start: str = arg("", "LiveCodeBench problems dated on or after YYYY-MM-DD")
    lcb_end: str = arg("", "LiveCodeBench problems dated on or before YYYY-MM-DD (at 00:00, as LiveCodeBench "
                           "filters)")
    lcb_timeout: float = arg(6.0, "seconds per test (LiveCodeBench's): a test past it fails and ends the sample, "
                                  "whose tests stop at the first failure; a sample gets (t + 1) x its tests + 5 in "
                                  "all, as LiveCodeBench's harness")
    lcb_wrap_stdin: bool = arg(True, "run LiveCodeBench's stdin programs as its harness does: top-level code "
                                     "wrapped in one function")
    lcb_extract: str = arg("lcb", "LiveCodeBench's code: lcb = its extract_code (the lines between the last two "
                                  "lines holding ```), block = the graded python block (rewards.extract_code)")
    code_timeout: float = arg(60.0, "wall-clock cap of one --data code sample, all its tests together (its "
                                    "(--lcb_timeout + 1) x tests + 5 when smaller); LiveCodeBench samples get "
                                    "their harness's bound")
    gpqa_shuffle_seed: int = arg(0, "seed of GPQA's choice order; each question is shuffled by it and its Record ID")
    gpqa_extract: str = arg("tiers", "GPQA's letter: tiers = choice_letter (lighteval's tiers, hedges and mixed "
                                     "letters read as no choice), simple-evals = its first `Answer: X` "
                                     "(simple_evals_letter)")
    instruction: str = arg("auto", "appended to each math question; auto: as the rows or the model were trained "
                                   "(held_out.jsonl, delta_prompt.json), else the answer format's request unless "
                                   "the prompt makes one")
    answer_format: str = arg("auto", "where a math answer is stated: boxed | answer_line | last_number; auto: as "
                                     "the rows or the model were trained, else what the prompts ask for, else boxed")
    prompt_style: str = arg("train", "train: the training prompt | matharena: MathArena's instruction before the "
                                     "problem, AIME's integer hint")
    n_samples: int = field(default=16, metadata={"help": "samples per problem (the paper: 16)",
                                                 "aliases": ["-n", "--num_samples"]})
    limit: int = arg(0, "evaluate only the first N problems of each benchmark (0 = all)")
    seed: int = arg(0, "sampling seed (each rank adds its rank)")
    output_dir: str = arg("eval_out", "results.json and samples.jsonl go here")
    # the paper's evaluation, where it samples otherwise than the rollouts (delta.SamplerArgs' fields, other defaults)
    max_new_tokens: int = arg(30000, "generation limit (the paper: 30,000)")
    top_p: float = arg(0.7, "nucleus sampling (the paper: 0.7)")
    gen_max_tokens: int = arg(1 << 20, "tokens of one generate call on one rank: sequences x (prompt + max_new_tokens)")
    vllm_gpu_memory: float = arg(0.9, "share of GPU memory vLLM may take (no trainer beside it)")


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
    spread = math.sqrt(sum((a - out[f"avg@{n}"]) ** 2 for a in accs) / (P - 1)) if P > 1 else 0.0
    out["stderr"] = spread / math.sqrt(P) if P > 1 else 0.0
    for k in sorted({2 ** i for i in range(int(math.log2(n)) + 1)} | {n}):
        out[f"pass@{k}"] = sum(pass_at_k(len(rs), round(sum(r["correct"] for r in rs)), k)
                               for rs in by_problem.values()) / max(P, 1)
    if kind in ("math", "choice"):  # a choice's answers are letters: equal when the same letter
        equal = str.__eq__ if kind == "choice" else None
        out[f"maj@{n}"] = sum(majority_vote([r["extracted"] for r in rs], [r["correct"] for r in rs], equal)
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
def read_jsonl(path):
    """JSON lines read as they are (LiveCodeBench's test strings run to megabytes; no type inference); a line that
    is not JSON is a DataError naming it."""
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    try:
        return [json.loads(line) for line in lines]
    except ValueError:
        raise rewards.DataError(tasks.json_problem(path)) from None


def read_livecodebench(source, release):
    """code_generation_lite's rows of a release: its files from the hub (hf_hub_download, cached), from a folder
    holding them (a snapshot of the hub repository), or one local file taken whole (then the release is the
    file's own and only the date window applies)."""
    files = lcb_release_files(release)
    if os.path.isfile(source):
        return read_jsonl(source) if source.endswith(".jsonl") else tasks.read_table(source)
    if os.path.isdir(source):
        missing = [f for f in files if not os.path.exists(os.path.join(source, f))]
        if missing:
            raise delta.ArgumentError(f"{source} lacks {missing} of LiveCodeBench {release}")
        paths = [os.path.join(source, f) for f in files]
    else:
        from huggingface_hub import hf_hub_download

        paths = [hf_hub_download(source, f, repo_type="dataset") for f in files]
    return [row for path in paths for row in read_jsonl(path)]


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
        for ext in tasks.LOCAL_EXTS + ("",):  # "": a folder (livecodebench: the hub's release files)
            path = os.path.join(benchmark_dir, name + ext)
            if os.path.isfile(path) or (not ext and name == "livecodebench" and os.path.isdir(path)):
                found[name] = path
                break
        else:
            raise delta.ArgumentError(f"--benchmark_dir {benchmark_dir} has no {name}.jsonl, .json, .parquet or .csv"
                                      + (" nor a livecodebench/ folder" if name == "livecodebench" else ""))
    return found


def mbpp_entry_point(tests):
    m = re.search(r"assert\s*\(?\s*(?:not\s+)?(?:set\()?\s*(\w+)\s*\(", tests[0])
    return m.group(1) if m else None


def gpqa_rows(table, seed=0):
    """GPQA in lighteval's gpqa:diamond prompt. The four choices, [correct, incorrect 1, 2, 3], are shuffled by a
    generator seeded with the seed and the question's Record ID (its text when there is none), so each question has
    one order whatever the run, the rank or the other questions; answer: the correct choice's letter."""
    rows = []
    for i, r in enumerate(table):
        key = r.get("Record ID") or r["Question"]
        choices = [r["Correct Answer"], r["Incorrect Answer 1"], r["Incorrect Answer 2"], r["Incorrect Answer 3"]]
        order = list(range(4))
        random.Random(f"gpqa:{seed}:{key}").shuffle(order)
        options = "\n".join(f"{'ABCD'[j]}) {str(choices[k]).strip()}" for j, k in enumerate(order))
        question = f"{GPQA_INSTRUCTION}\n\n{r['Question'].strip()}\n\n{options}"
        rows.append({"id": r.get("Record ID", i), "question": question,
                     "answer": "ABCD"[order.index(0)], "order": order})
    return rows


def livecodebench_rows(table, start="", end="", test_timeout=6.0):
    """code_generation_lite rows in the window, each with its spec (public then private tests; a bad row is named
    before any work; LiveCodeBench's comparison and its per-test limit), LiveCodeBench's prompt, and the test count
    that sets its time limit."""
    kept = [r for r in table if lcb_in_window(r, start or None, end or None)]
    specs = [dict(spec, compare="lcb", test_timeout=test_timeout) for spec in code_specs(kept, "livecodebench")]
    return [{"id": r["question_id"], "question": code_prompt(r["question_content"], r.get("starter_code") or ""),
             "answer": spec, "platform": r.get("platform"), "difficulty": r.get("difficulty"),
             "contest_date": str(r["contest_date"]), "tests": len(spec["inputs"])} for r, spec in zip(kept, specs)]


def data_rows(table, args):
    """--data: (kind, rows) as tasks.dataset_rows reads them, delta.py's training rows too: a run's held_out.jsonl
    as it was trained (prompt, spec, answer format, instruction), code rows of a known layout, or math rows."""
    kind, rows = tasks.dataset_rows(table, args.prompt_key, args.answer_key, args.data_schema)
    for i, r in enumerate(rows):
        r["id"] = i
        if kind == "code":
            r["tests"] = len(r["answer"].get("inputs", [0]))
    return kind, rows


def benchmark_rows(name, table, args=None):
    """Rows {"id", "question", "answer"} of a registered benchmark from its table in the hub's schema.
    answer: the gold string (math), the test spec of rewards.code_reward (code) or the right letter (choice)."""
    spec = BENCHMARKS[name]
    if name == "livecodebench":
        return livecodebench_rows(table, args.lcb_start if args else "", args.lcb_end if args else "",
                                  args.lcb_timeout if args else 6.0)
    if name == "gpqa_diamond":
        return gpqa_rows(table, args.gpqa_shuffle_seed if args else 0)
    rows = []
    for i, r in enumerate(table):
        if name == "gsm8k":
            row = {"question": r["question"], "answer": tasks.gold_answer(r["answer"], i, "answer")}  # after ####
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


def lcb_stdin_program(code):
    """A stdin program as LiveCodeBench's harness runs it (testing_util.py: clean_if_name, make_function, call_method):
    a final `if __name__ == '__main__':` replaced by its body, the top-level imports kept at the top and every other
    top-level statement moved into one function, which is called once, a SystemExit ignored. So a top-level `return`
    ends the program, and a module-level name that shadows a builtin it reads first (`min = min(a)`) fails, as
    there. Code that does not parse is left as it is (it fails either way). The code is parsed, never run."""
    import ast

    try:
        body = ast.parse(code).body
        if body and isinstance(body[-1], ast.If) and ast.unparse(body[-1].test).strip() == "__name__ == '__main__'":
            body = body[:-1] + body[-1].body
        imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))]
        wrapped = ast.FunctionDef(name="wrapped_function", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                                  kw_defaults=[], defaults=[]), body=[s for s in body if s not in imports],
                                  decorator_list=[], lineno=1)
        program = ast.unparse(imports) + "\n" + ast.unparse(wrapped)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return code
    return program + "\n\n\ntry:\n    wrapped_function()\nexcept SystemExit:\n    pass\n"


def lcb_extract_code(text):
    """LiveCodeBench's extraction (lcb_runner/utils/extraction_utils.py, extract_code, chat models): the lines
    between the last two lines that hold ``` anywhere, "" when there are fewer than two. So a fenced `text` block
    after the code, or a later line that mentions ```, is what it grades."""
    lines = text.split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    return "\n".join(lines[fences[-2] + 1:fences[-1]]) if len(fences) >= 2 else ""


def code_to_grade(text, row, name, lcb_wrap=True, lcb_extract="lcb"):
    """The response as rewards.code_reward grades it: fenced blocks as written; a bare completion (a base
    model continuing the prompt) cut at the Codex stop sequences and fenced. LiveCodeBench's code is what its
    extraction takes (lcb_extract_code; "block": rewards.extract_code's), and its stdin programs are rewritten
    as its harness runs them (lcb_stdin_program) unless lcb_wrap is false."""
    if name == "livecodebench" and lcb_extract == "lcb":
        code = lcb_extract_code(text) if isinstance(text, str) else ""
        if not code.strip():
            return ""  # nothing to grade: 0, as there
        stdin = lcb_wrap and "fn_name" not in row["answer"]
        return f"```python\n{lcb_stdin_program(code) if stdin else code}\n```"
    if name == "livecodebench" and lcb_wrap and "fn_name" not in row["answer"]:
        code = rewards.extract_code(text)
        return f"```python\n{lcb_stdin_program(text if code is None else code)}\n```"
    if rewards.extract_code(text) is not None:
        return text
    if name == "humaneval":
        cut = min([text.find(s) for s in HUMANEVAL_STOP if s in text] or [len(text)])
        text = text[:cut]
    return f"```python\n{text}\n```"


# GPQA's letter, read in tiers; the first tier with a match decides and, within it, the last match. The tiers follow
# lighteval's order for choice indices (metrics/utils/extractive_match_utils.py): "final answer is X", then the word
# answer with a colon, then the word answer nearby, then a line that starts with the letter, then a letter standing
# alone. Its last tier (any capital A-D anywhere, "DNA" included) is left out, \boxed{X} is read before the line
# tiers (reasoning models box their letter), and a response whose last line is an answer without a letter ("Answer:
# None of the above", "Answer: ABCD") chose none. Not credited either: a hedge ("Answer: A or B", "A/B", "A, C"),
# and, in the two unanchored tiers, a text that names more than one letter ("I'd go with D, though B is tempting"
# has no last-letter reading). Text after the last </think> when there is one.
_L = r"(?<![A-Za-z0-9/])\(?([ABCD])\)?"  # a letter, perhaps in parentheses, not the end of a word or of "N/A"
# markdown, quotes, $, \( \), \boxed{, \text{
_OPEN = r"""(?:[\s*$({\["'“‘]|\\\(|\\\[|\\boxed\{|\\text(?:bf)?\{|\\mathrm\{)*"""
_END = r"(?![A-Za-z0-9])"
CHOICE_TIERS = [re.compile(p) for p in (
    rf"(?i:final answer)[^\n]{{0,100}}?(?i:\bis)\s*:?{_OPEN}{_L}{_END}",
    rf"(?i:\banswer)\s*(?:\*\*)?\s*[:：]{_OPEN}(?:(?i:option|choice)\s*)?{_L}{_END}",
    rf"(?i:\banswer\b)[^\n]{{0,50}}?{_OPEN}{_L}(?:\*\*)?(?=[.,:;!)\s]|$)",
    rf"\\boxed\{{(?:\\text\{{)?\s*{_L}",
    rf"(?m)^\s*(?:\*\*)?{_L}(?:\*\*)?(?=[.,:)\s]|$)",
    rf"(?<![A-Za-z0-9]){_L}(?![A-Za-z0-9'’-])",
)]
_ANCHORED = 4  # the tiers before this one need an answer anchor (or a box)
_HEDGE = re.compile(r"[\s)}*$]*(?:,|/|&|\bor\b|\band\b)[\s(*$]*(?:\\boxed\{|\\text\{)?\s*\(?[ABCD](?![A-Za-z0-9])")
SIMPLE_EVALS_ANSWER = re.compile(r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?")  # simple-evals' ANSWER_PATTERN_MULTICHOICE


def choice_letter(text):
    """The letter a GPQA response chose, or None (see CHOICE_TIERS)."""
    if not isinstance(text, str):
        return None
    text = text[text.rfind("</think>") + len("</think>"):] if "</think>" in text else text
    for k, tier in enumerate(CHOICE_TIERS):
        if k == _ANCHORED and re.match(r"\W*(?:final\s+|correct\s+)?answer\b", text.strip().rsplit("\n", 1)[-1], re.I):
            return None  # an answer stated without a letter: no choice, not a guess from the text before it
        found = list(tier.finditer(text))
        if found:
            if k >= _ANCHORED and len({m.group(1) for m in found}) > 1:
                return None  # no anchor, several letters: no reading of the last one
            return None if _HEDGE.match(text, found[-1].end()) else found[-1].group(1)
    return None


def simple_evals_letter(text):
    """simple-evals' GPQA extraction (common.py, ANSWER_PATTERN_MULTICHOICE with re.search): the first `Answer: X`,
    case as written (so `answer: b` is not B), in the text after the last </think>; None without one."""
    if not isinstance(text, str):
        return None
    text = text[text.rfind("</think>") + len("</think>"):] if "</think>" in text else text
    m = SIMPLE_EVALS_ANSWER.search(text)
    return m.group(1) if m else None


def prompt_text(tok, row, kind, name, args, instruction):
    if "instruction" in row and args.instruction == "auto":  # a run's held-out row: the prompt it was trained on
        return delta.prompt_text(tok, row["question"], row["instruction"])
    if kind == "code" and str(row["question"]).startswith("### Question:"):  # code_prompt's: the format is in it
        return delta.prompt_text(tok, row["question"], "")
    if kind == "choice":
        return delta.prompt_text(tok, row["question"], "")
    if kind == "code":
        return delta.prompt_text(tok, row["question"], CODE_INSTRUCTION)
    if args.prompt_style == "matharena":  # the instruction first, then the problem, in one user message
        head = MATHARENA_INSTRUCTION + ("\n" + MATHARENA_AIME_HINT if BENCHMARKS.get(name, {}).get("aime") else "")
        return delta.prompt_text(tok, f"{head}\n\n{row['question']}", "")
    return delta.prompt_text(tok, row["question"], instruction)


def trained_prompt(model):
    """The prompt settings a delta.py model folder was trained with ({} for any other model)."""
    path = os.path.join(model, checkpoints.PROMPT_FILE)
    return json.load(open(path)) if os.path.isfile(path) else {}


# =====================================================================================
# Sampling and grading
# =====================================================================================
def sample_benchmark(sampler, rows, kind, args, instruction, name="data", fmt="boxed"):
    """n samples for every row with delta.py's sampler (HF generate or vLLM); (problem, sample) pairs are
    sharded over ranks, records gathered on every rank."""
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    n, tok = args.n_samples, sampler.tok
    mine = [(p, s) for p in range(len(rows)) for s in range(n)][rank::world]
    prompts = [prompt_text(tok, rows[p], kind, name, args, instruction) for p, _ in mine]
    batch = delta.sample(sampler, prompts, args.temperature, 1, seed=(args.seed * 101 + rank) * 1_000_003,
                         what=f"{name}: sample")
    records = []
    if mine:
        texts = sampling.decode_responses(tok, batch)
        verdicts, extracted = grade(texts, [rows[p] for p, _ in mine], kind, name, args, fmt)
        lengths = batch["response_mask"].sum(1).tolist()
        for (p, s), text, ok, ex, length, trunc in zip(mine, texts, verdicts, extracted, lengths,
                                                       batch["truncated"].tolist()):
            records.append({"benchmark": name, "problem_id": rows[p]["id"], "problem_index": p, "sample": s,
                            "response": text, "extracted": ex, "correct": ok, "length": length, "truncated": trunc})
    if world > 1:
        parts = [None] * world
        dist.all_gather_object(parts, records)
        records = [r for part in parts for r in part]
    return sorted(records, key=lambda r: (r["problem_index"], r["sample"]))


def code_timeout(rows, name, args):
    """Each code sample's limit in all, from its own problem: LiveCodeBench's bound, (per-test limit + 1) x tests + 5
    as its check_correctness allows (its tests also get the per-test limit and stop at the first failure); the same
    bound capped by --code_timeout for --data code rows; rewards.py's default elsewhere (None)."""
    if name != "livecodebench" and not any("tests" in r for r in rows):
        return None
    per_test = args.lcb_timeout if args is not None else 6.0
    cap = math.inf if name == "livecodebench" else args.code_timeout if args is not None else 60.0
    return [min(cap, (per_test + 1) * r.get("tests", 1) + 5) for r in rows]


def grade(texts, rows, kind, name, args=None, fmt="boxed"):
    """(verdicts, extracted) of responses, each against its row: code sandboxed through rewards.score_batch (the
    graded block, or a bare completion), math through its verifier (its answer format fmt), a choice by its
    letter."""
    if kind == "code":
        extract = args.lcb_extract if args is not None else "lcb"
        graded = [code_to_grade(t, r, name, args.lcb_wrap_stdin if args is not None else True, extract)
                  for t, r in zip(texts, rows)]
        verdicts = rewards.score_batch(graded, [r["answer"] for r in rows], "code",
                                       timeout=code_timeout(rows, name, args))
        entry = lambda spec: spec.get("entry_point") or spec.get("fn_name")  # the model's block, before any rewrite
        return verdicts, [rewards.extract_code(code_to_grade(t, r, name, False, extract), entry(r["answer"]))
                          for t, r in zip(texts, rows)]
    if kind == "choice":
        read = simple_evals_letter if args is not None and args.gpqa_extract == "simple-evals" else choice_letter
        letters = [read(t) for t in texts]
        return [float(x is not None and x == r["answer"]) for x, r in zip(letters, rows)], letters
    return (rewards.score_batch(texts, [r["answer"] for r in rows], answer_format=fmt),
            [rewards.extract_answer(t, fmt) for t in texts])


def markdown_table(model_name, results, n):
    names = list(results["benchmarks"])
    head = "| model | " + " | ".join(BENCHMARKS.get(b, {}).get("title", b) for b in names) + " | Avg |"
    cells = [f"{100 * results['benchmarks'][b][f'avg@{n}']:.2f}" for b in names]
    row = f"| {model_name} | " + " | ".join(cells) + f" | {100 * results['average'][f'avg@{n}']:.2f} |"
    return "\n".join([head, "|" + "---|" * (len(names) + 2), row])


def validate(args):
    """Every check before any work, the files and folders the user named first (delta.py's rule)."""
    if not args.model:
        raise delta.ArgumentError("--model is required (a hub id or a local path)")
    problem = checkpoints.source_problem(args.model)
    if problem:
        raise delta.ArgumentError(f"--model {problem}")
    if args.data and not os.path.exists(args.data):
        raise delta.ArgumentError(f"--data {args.data}: no such file")
    if os.path.isfile(args.output_dir):
        raise delta.ArgumentError(f"--output_dir {args.output_dir} is a file: give a folder")
    names = PAPER if args.benchmarks == "paper" else [b for b in args.benchmarks.split(",") if b]
    unknown = [b for b in names if b not in BENCHMARKS]
    if unknown:
        raise delta.ArgumentError(f"--benchmarks: unknown {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}, paper")
    if not names and not args.data:
        raise delta.ArgumentError("give --benchmarks and/or --data")
    if args.n_samples < 1 or args.max_new_tokens < 1 or args.temperature < 0 or args.gen_max_tokens < 1:
        raise delta.ArgumentError("--n_samples, --max_new_tokens and --gen_max_tokens must be >= 1 and "
                                  "--temperature >= 0")
    if args.precision not in ("auto", "bf16", "fp32"):
        raise delta.ArgumentError(f"--precision {args.precision!r}: use auto, bf16 or fp32")
    if args.prompt_style not in ("train", "matharena"):
        raise delta.ArgumentError(f"--prompt_style {args.prompt_style!r}: use train or matharena")
    if args.data_schema not in ("auto", "math") and args.data_schema not in CODE_SCHEMAS:
        raise delta.ArgumentError(f"--data_schema {args.data_schema!r}: use auto, math or one of "
                                  f"{', '.join(CODE_SCHEMAS)}")
    if args.answer_format not in ("auto", *rewards.ANSWER_FORMATS):
        raise delta.ArgumentError(f"--answer_format {args.answer_format!r}: use auto or one of "
                                  f"{', '.join(rewards.ANSWER_FORMATS)}")
    try:
        lcb_release_files(args.lcb_release)
        for date in filter(None, (args.lcb_start, args.lcb_end)):
            datetime.datetime.strptime(date, "%Y-%m-%d")
    except ValueError as e:
        raise delta.ArgumentError(f"--lcb_release/--lcb_start/--lcb_end: {e}") from None
    if args.lcb_timeout <= 0 or args.code_timeout <= 0:
        raise delta.ArgumentError("--lcb_timeout and --code_timeout must be > 0")
    if args.lcb_extract not in ("lcb", "block") or args.gpqa_extract not in ("tiers", "simple-evals"):
        raise delta.ArgumentError("--lcb_extract is lcb or block, --gpqa_extract tiers or simple-evals")
    if args.vllm:
        problem = sampling.vllm_problem(args)  # vLLM installed, a model length that fits
        if problem:
            raise delta.ArgumentError(problem)
    return names, local_copies(args.benchmark_dir, names)


def load_benchmark(name, copies, args):
    """A registered benchmark's table: the local copy when given, else the hub (LiveCodeBench: a release's files)."""
    source = copies.get(name) or BENCHMARKS[name]["hub"]
    if name == "livecodebench":
        return read_livecodebench(source, args.lcb_release)
    return tasks.read_table(source, BENCHMARKS[name].get("config"), BENCHMARKS[name]["split"])


def main(args: EvalArgs):
    names, copies = validate(args)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    rank, world, device = delta.setup_distributed()
    torch.manual_seed(args.seed + rank)
    # every benchmark's rows first, so that a malformed test spec or an empty window stops the run before any work
    suites = [(b, benchmark_rows(b, load_benchmark(b, copies, args), args), BENCHMARKS[b].get("kind", "math"))
              for b in names]
    if args.data:
        local = os.path.splitext(os.path.basename(args.data))[0]
        local = f"{local}-local" if local in BENCHMARKS else local  # never overwrite a registered benchmark
        try:
            table = read_jsonl(args.data) if args.data.endswith(".jsonl") else tasks.read_table(args.data)
            kind, rows = data_rows(table, args)
        except rewards.DataError as e:
            raise delta.ArgumentError(f"--data {args.data}: {e}") from None
        suites.append((local, rows, kind))
    suites = [(name, rows[:args.limit] if args.limit else rows, kind) for name, rows, kind in suites]
    empty = [name for name, rows, _ in suites if not rows]
    if empty:
        raise delta.ArgumentError(f"no problems in {empty} (LiveCodeBench: --lcb_release {args.lcb_release}, window "
                                  f"{args.lcb_start or '...'} to {args.lcb_end or '...'})")
    bf16 = delta.bf16_compute(args, device)
    if args.vllm:  # vLLM samples from the model folder; no second copy of the weights on the GPU
        model, tok = None, checkpoints.load_tokenizer(args.model)
    else:
        model, tok = checkpoints.load_model(args.model, device, torch.bfloat16 if bf16 else torch.float32)
        model.eval()
    math_rows = [r for _, rows, k in suites if k == "math" for r in rows]
    own = {"answer_format": math_rows[0]["answer_format"]} if math_rows and "answer_format" in math_rows[0] else {}
    fmt, instruction = rewards.prompt_settings(args.answer_format, args.instruction, math_rows, "math",
                                               dict(trained_prompt(args.model), **own))  # the one rule for "auto"
    longest = max(len(sampling.encode_prompt(tok, prompt_text(tok, r, k, n, args, instruction)))
                  for n, rows, k in suites for r in rows)
    if args.max_prompt_length and args.max_prompt_length < longest:
        raise delta.ArgumentError(f"--max_prompt_length {args.max_prompt_length}: the longest prompt has {longest} "
                                  "tokens (0: the longest)")
    args.max_prompt_length = args.max_prompt_length or longest  # what vLLM's model length is sized by
    sampler = sampling.make_sampler(args, model, tok, args.model, engines.DDP(world, device, bf16), rank,
                                    report=console.progress(args, rank))
    model_name = args.model_name or "/".join(args.model.rstrip("/").split("/")[-2:])
    results, samples = {"model": args.model, "config": asdict(args), "instruction": instruction,
                        "answer_format": fmt, "benchmarks": {}}, []
    for name, rows, kind in suites:
        t = time.perf_counter()
        recs = sample_benchmark(sampler, rows, kind, args, instruction, name, fmt)
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
        print(f"results in {os.path.join(args.output_dir, 'results.json')}, each sample in "
              f"{os.path.join(args.output_dir, 'samples.jsonl')} (--output_dir)", file=sys.stderr)
    del model, sampler
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return results


def parse_args(argv=None):
    """EvalArgs from the command line. A model folder written by delta.py also holds how its run sampled
    (delta_prompt.json): those settings replace eval.py's defaults (the paper's evaluation) unless given as flags,
    and the output says which came from where."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = delta.parse_args(argv, EvalArgs, "eval.py")  # a mistake: one line, a misspelt flag's nearest name
    given = {a[2:].split("=")[0].replace("-", "_") for a in argv if a.startswith("--")}
    trained = trained_prompt(args.model).get("sampling", {}) if args.model and os.path.isdir(args.model) else {}
    taken = {k: v for k, v in trained.items() if k in checkpoints.SAMPLING and k not in given}
    for k, v in taken.items():
        setattr(args, k, v)
    if trained and int(os.environ.get("RANK", "0")) == 0:
        said = ", ".join(f"{k} {getattr(args, k)}" + ("" if k in taken else " (a flag)") for k in checkpoints.SAMPLING)
        print(f"sampling: {said}; as {args.model} was trained, from its {checkpoints.PROMPT_FILE}, except flags "
              f"(the paper's evaluation: --temperature 1.0 --top_p 0.7 --max_new_tokens 30000)", file=sys.stderr)
    return args


def command(argv=None):
    """eval.py's command: its exit status, 0 or 2 for a mistake in the input (said in one line, before any work)."""
    try:
        main(parse_args(argv))
        return 0
    except (delta.ArgumentError, rewards.DataError) as e:  # CodeSpecError is a DataError
        print(f"eval.py: error: {e}", file=sys.stderr)
        return console.EXIT["mistake"]


if __name__ == "__main__":
    sys.exit(command())
