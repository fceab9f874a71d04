"""Shared by the test files: the repository's paths, the code-spec constants, and a subprocess runner.

Kept small: a fixture belongs here only when two test files need it.
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "bench"))  # the benches' data and helpers (math_cases, bench_honest)

# ------------------------------------------------------------------------------------- code specs
fence = lambda src: f"Here is my solution.\n```python\n{src}\n```\n"
ADD = "def add(a, b):\n    return a + b"
STDIN = {"inputs": ["1 2\n", "10 20\n"], "outputs": ["3\n", "30"]}  # one of each mode, all passed by ADD's idea
CALL = {"fn_name": "add", "inputs": [[1, 2], [10, 20]], "outputs": [3, 30]}
ASSERT = {"assert": "assert add(1, 2) == 3\nassert add(10, 20) == 30"}
STDIN_ADD = "a, b = map(int, input().split())\nprint(a + b)"


# ------------------------------------------------------------------------------------- subprocesses
def run_script(args, cwd=ROOT, timeout=600, env=None, **kwargs):
    """`python ARGS...` in a fresh process, its output captured as text (two threads per numeric library: the
    suite runs one test at a time on this machine's two cores)."""
    env = dict(os.environ, OMP_NUM_THREADS="2", PYTHONWARNINGS="ignore", **(env or {}))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, **kwargs)
