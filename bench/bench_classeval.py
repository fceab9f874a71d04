"""ClassEval through assert mode: each task's canonical solution and a broken variant of it, graded by the sandbox
beside ClassEval's own way of running them (solution and tests in one module, in a throwaway folder).

    python bench/bench_classeval.py --data ClassEval_data.json                 # all 100 tasks, both variants
    python bench/bench_classeval.py --data ClassEval_data.json --tasks 2,4,14  # some tasks, by index
    python bench/bench_classeval.py --data cases/classeval_sample.json         # the committed sample the tests read

ClassEval (FudanSELab/ClassEval on GitHub, MIT) is a benchmark of class-level code: its data/ClassEval_data.json
holds 100 tasks, each a class's solution_code and unittest classes (test, test_classes). The program is the
solution; the assert tests are the task's test code and a runner of its test classes that asserts they all pass.
The broken variant keeps each class's __init__ and makes every other method return None: it must score 0.
Prints each variant's count that the reference passes, the count the sandbox passes of those, and every task where
the two disagree. --out writes a line per task and variant as it goes.
"""
import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import rewards  # noqa: E402

RUNNER = """
import unittest as _unittest
_suite = _unittest.TestSuite()
for _case in ({classes},):
    _suite.addTests(_unittest.defaultTestLoader.loadTestsFromTestCase(_case))
_result = _unittest.TextTestRunner(verbosity=0).run(_suite)
assert _result.wasSuccessful(), (len(_result.failures), len(_result.errors))
"""


def tests_of(task):
    """The task's test code and a runner that asserts every one of its test classes passes."""
    return task["test"] + "\n" + RUNNER.format(classes=", ".join(task["test_classes"]))


def broken(solution):
    """The solution with every method but __init__ returning None (its docstring kept)."""
    tree = ast.parse(solution)
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for f in cls.body:
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name != "__init__":
                doc = f.body[:1] if f.body and isinstance(f.body[0], ast.Expr) and isinstance(
                    getattr(f.body[0], "value", None), ast.Constant) and isinstance(f.body[0].value.value, str) else []
                f.body = doc + [ast.Return(value=ast.Constant(value=None))]
    return ast.unparse(tree)


def reference(solution, tests, timeout):
    """ClassEval's own way: the solution and the tests in one module, run by python in a throwaway folder."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "task.py")
        with open(path, "w") as f:
            f.write(solution + "\n\n" + tests)
        try:
            p = subprocess.run([sys.executable, path], cwd=folder, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return 0.0
    return float(p.returncode == 0)


def sandboxed(solution, tests, timeout):
    """The sandbox's verdict: the solution as the model's response, the tests in assert mode."""
    return rewards.code_reward(f"```python\n{solution}\n```", {"assert": tests}, timeout=timeout)


def read_tasks(path):
    """{index: task} of ClassEval's data file (a list), or of the committed sample ({"indices", "tasks", ...})."""
    data = json.load(open(path))
    return dict(zip(data["indices"], data["tasks"])) if isinstance(data, dict) else dict(enumerate(data))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="ClassEval_data.json, or cases/classeval_sample.json")
    p.add_argument("--tasks", default="", help="comma list of task indices (default: all)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per task and variant, either harness")
    p.add_argument("--out", default="", help="a .jsonl file: a line per task and variant, as it goes")
    a = p.parse_args(argv)
    tasks = read_tasks(a.data)
    chosen = [int(i) for i in a.tasks.split(",") if i] or sorted(tasks)
    counts = {v: {"reference": 0, "sandbox": 0, "both": 0} for v in ("canonical", "broken")}
    disagree, out = [], open(a.out, "a") if a.out else None
    print(f"sandbox mode: {rewards._sandbox().mode()}", file=sys.stderr)
    for i in chosen:
        task = tasks[i]
        tests = tests_of(task)
        for variant, solution in (("canonical", task["solution_code"]), ("broken", broken(task["solution_code"]))):
            t = time.perf_counter()
            ref, box = reference(solution, tests, a.timeout), sandboxed(solution, tests, a.timeout)
            c = counts[variant]
            c["reference"], c["sandbox"], c["both"] = c["reference"] + ref, c["sandbox"] + box, c["both"] + ref * box
            if ref != box:
                disagree.append((i, task["class_name"], variant, ref, box))
            line = dict(index=i, task_id=task["task_id"], class_name=task["class_name"], variant=variant,
                        reference=ref, sandbox=box, seconds=round(time.perf_counter() - t, 2))
            print(json.dumps(line), file=sys.stderr)
            if out:
                out.write(json.dumps(line) + "\n")
                out.flush()
    print(f"\n{len(chosen)} tasks of {a.data}")
    print("| variant | reference passes | sandbox passes | of the reference's passes, the sandbox passes |")
    print("|---|---|---|---|")
    for variant, c in counts.items():
        print(f"| {variant} | {c['reference']:.0f} | {c['sandbox']:.0f} | {c['both']:.0f} of {c['reference']:.0f} |")
    for i, name, variant, ref, box in disagree:
        print(f"disagree: task {i} {name} ({variant}): reference {ref:.0f}, sandbox {box:.0f}")


if __name__ == "__main__":
    main()
