"""Tests of rewards.py: a table of math verdicts, adversarial inputs, and the code sandbox layer by layer."""
import os
import socket
import subprocess
import threading
import time

import pytest

import rewards
from rewards import code_reward, extract_answer, math_reward, score_batch

B = lambda s: f"Some reasoning first. So the answer is $\\boxed{{{s}}}$."

MATH_CASES = [  # (response, gold, expected verdict)
    # plain numbers, signs, leading zeros, decimals, huge integers
    (B("42"), "42", 1), (B("42"), 42, 1), (B("-42"), "42", 0), (B("+42"), "42", 1), (B("007"), "7", 1),
    (B("4.0"), "4", 1), (B("4.00"), 4, 1), (B("4.01"), "4", 0), (B("0.5"), "\\frac{1}{2}", 1),
    (B("\\frac{1}{2}"), "0.5", 1), (B("\\dfrac{1}{2}"), "0.5", 1), (B("\\tfrac{1}{2}"), "\\frac12", 1),
    (B("\\frac12"), "0.5", 1), (B("1/2"), "\\frac{1}{2}", 1), (B("-\\frac{3}{4}"), "-0.75", 1),
    (B("\\frac{-3}{4}"), "-0.75", 1), (B("0.333"), "\\frac{1}{3}", 0), (B("0.3333333"), "1/3", 0),
    (B(".5"), "0.5", 1), (B("2/4"), "\\frac{1}{2}", 1),
    (B("123456789012345678901234567890"), "123456789012345678901234567890", 1),
    (B("123456789012345678901234567891"), "123456789012345678901234567890", 0),
    (B("1" + "0" * 5000), "1" + "0" * 5000, 1), (B("1" + "0" * 5000), "1" + "0" * 4999 + "1", 0),
    # thousands separators
    (B("1,000"), "1000", 1), (B("1{,}000"), "1000", 1), (B("1,000,000"), 1000000, 1), (B("1\\,000"), "1000", 1),
    (B("1,000"), "100", 0),
    # radicals, pi, symbolic
    (B("\\sqrt{8}"), "2\\sqrt{2}", 1), (B("2\\sqrt{2}"), "\\sqrt{8}", 1), (B("\\sqrt{2}"), "2\\sqrt{2}", 0),
    (B("\\frac{\\sqrt{2}}{2}"), "\\frac{1}{\\sqrt{2}}", 1), (B("1.41421356237"), "\\sqrt{2}", 1),
    (B("1.4142"), "\\sqrt{2}", 0), (B("2\\pi"), "2\\pi", 1), (B("\\pi \\cdot 2"), "2\\pi", 1), (B("6.28"), "2\\pi", 0),
    (B("x^2+2x+1"), "(x+1)^2", 1), (B("x^2+1"), "(x+1)^2", 0), (B("\\frac{a}{b}"), "a/b", 1),
    # units, degrees, text, percent
    (B("30^\\circ"), "30", 1), (B("30^{\\circ}"), "30", 1), (B("30"), "30^\\circ", 1), (B("5\\text{ cm}"), "5", 1),
    (B("5 \\text{cm}"), "5", 1), (B("5 cm"), "5", 1), (B("50\\%"), "50", 1), (B("\\text{Monday}"), "Monday", 1),
    (B("\\text{monday}"), "Monday", 1), (B("Tuesday"), "Monday", 0), (B("\\text{(B)}"), "(B)", 1),
    (B("2x"), "2", 0),
    # equations
    (B("x=3"), "3", 1), (B("x = 3"), "3", 1), (B("3"), "x=3", 1), (B("y=2x+1"), "2x+1", 1), (B("x=4"), "3", 0),
    # tuples, sets, intervals, lists, pm
    (B("(1,2)"), "(1,2)", 1), (B("(2,1)"), "(1,2)", 0), (B("\\{1,2\\}"), "\\{2,1\\}", 1),
    (B("\\{1,2\\}"), "\\{1,3\\}", 0), (B("[1,2)"), "[1,2)", 1), (B("[1,2]"), "[1,2)", 0),
    (B("(-\\infty, 0]"), "(-\\infty,0]", 1), (B("(-\\infty,1)\\cup(2,\\infty)"), "(-\\infty,1)\\cup(2,\\infty)", 1),
    (B("1, 2"), "2, 1", 1), (B("1, 2"), "1, 2, 3", 0), (B("(0.5, \\frac{1}{3})"), "(\\frac12, \\frac{1}{3})", 1),
    (B("1 \\pm \\sqrt{2}"), "1+\\sqrt{2}, 1-\\sqrt{2}", 1), (B("1+\\sqrt{2}, 1-\\sqrt{2}"), "1\\pm\\sqrt{2}", 1),
    (B("\\pm 2"), "2, -2", 1), (B("2"), "\\pm 2", 0),
    # matrices in any bracket style
    (B("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}"), "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", 1),
    (B("\\begin{bmatrix}1 & 2 \\\\ 3 & 4\\end{bmatrix}"), "\\begin{pmatrix}1&2\\\\3&5\\end{pmatrix}", 0),
    (B("\\begin{pmatrix}0.5\\\\ 1\\end{pmatrix}"), "\\begin{pmatrix}\\frac12\\\\1\\end{pmatrix}", 1),
    # extraction: last box, think, missing / empty / unclosed box, fbox, \boxed x
    ("\\boxed{1} then \\boxed{2}", "2", 1), ("\\boxed{1} then \\boxed{2}", "1", 0), ("\\boxed{1}, \\boxed{2}", "1, 2", 0),
    ("<think>\\boxed{7}</think> The answer is \\boxed{8}", "8", 1), ("<think>\\boxed{8}</think> The answer is 7", "8", 0),
    ("The answer is 42.", "42", 0), ("\\boxed{}", "42", 0), ("\\boxed{42", "42", 0), ("\\fbox{42}", "42", 1),
    ("so \\boxed 42.", "42", 1), ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", 1), ("$\\boxed{\\{1, 2\\}}$", "\\{1,2\\}", 1),
    # gold given with its own box or dollars
    (B("12"), "$12$", 1), (B("12"), "\\boxed{12}", 1), (B("12"), 12.0, 1), (B("2.5"), 2.5, 1),
]


def test_table_has_at_least_60_cases():
    assert len(MATH_CASES) >= 60


def test_math_table():
    got = score_batch([r for r, _, _ in MATH_CASES], [g for _, g, _ in MATH_CASES])
    wrong = [(r[-60:], g, e) for (r, g, e), v in zip(MATH_CASES, got) if v != e]
    assert not wrong, f"{len(wrong)} wrong verdicts: {wrong}"


def test_math_reward_single_call_and_extract_answer():
    assert math_reward(B("\\frac{3}{6}"), "0.5") == 1.0
    assert math_reward(None, "1") == 0.0 and math_reward(B("1"), None) == 0.0
    assert extract_answer("a \\boxed{\\frac{1}{2}} b \\boxed{x^{2}}") == "x^{2}"
    assert extract_answer("\\boxed{\\{1\\}}") == "\\{1\\}"
    assert extract_answer("no box") is None and extract_answer("\\boxed{ }") is None


@pytest.mark.parametrize("response,gold", [
    (B("2^{2^{2^{2^{2^{2^{2}}}}}}"), "3"),  # power tower
    (B("9^{9^{9^{9^{9}}}}"), "9^{9^{9^{9^{9}}}}+1"),
    (B("(" * 5000 + "1" + ")" * 5000), "1"),  # thousands of nested parentheses
    (B("1+" * 30000 + "1"), "30001"),  # a 100 kB answer
    ("x" * 100_000 + "\\boxed{" * 2000, "1"),  # 100 kB of junk with unclosed boxes
    (B("__import__('os').system('touch /tmp/pwned_by_math')"), "0"),  # model text is never executed
])
def test_adversarial_math_returns_quickly_and_never_raises(response, gold):
    t = time.monotonic()
    assert score_batch([response], [gold], timeout=3.0)[0] in (0.0, 1.0)
    assert time.monotonic() - t < 8.0
    assert not os.path.exists("/tmp/pwned_by_math")


def test_slow_items_do_not_block_the_batch():
    responses = [B("9^{9^{9^{9^{9}}}}")] * 2 + [B(str(i)) for i in range(40)]
    golds = ["9^{9^{9^{9^{9}}}}+1"] * 2 + [str(i) for i in range(40)]
    t = time.monotonic()
    got = score_batch(responses, golds, timeout=2.0)
    assert got[2:] == [1.0] * 40 and time.monotonic() - t < 10.0


def test_score_batch_works_from_a_thread():
    out = []
    th = threading.Thread(target=lambda: out.append(score_batch([B("\\sqrt{8}"), B("3")], ["2\\sqrt{2}", "4"])))
    th.start()
    th.join(60)
    assert out == [[1.0, 0.0]]


def test_gold_content_is_kept():
    assert rewards._gold_text(0) == "0" and rewards._gold_text(10**30) == str(10**30)
    assert rewards._gold_text("The answer is \\boxed{5} apples") == "The answer is \\boxed{5} apples"
    assert rewards._gold_text("$\\boxed{\\frac{1}{2}}$") == "\\frac{1}{2}"
    assert math_reward(B("0"), 0) == 1.0


def test_score_batch_validates_its_input():
    with pytest.raises(ValueError, match="kind"):
        score_batch(["a"], ["b"], kind="proof")
    with pytest.raises(ValueError, match="golds"):
        score_batch(["a"], [])


# ------------------------------------------------------------------------------------- code
fence = lambda src: f"Here is my solution.\n```python\n{src}\n```\n"
STDIN = {"inputs": ["1 2\n", "10 20\n"], "outputs": ["3\n", "30"]}
CALL = {"fn_name": "add", "inputs": [[1, 2], [10, 20]], "outputs": [3, 30]}
ASSERT = {"assert": "assert add(1, 2) == 3\nassert add(10, 20) == 30"}


@pytest.mark.parametrize("tests,source,expected", [
    (STDIN, "a, b = map(int, input().split())\nprint(a + b)", 1),
    (STDIN, "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)", 1),
    (STDIN, "a, b = map(int, open(0).read().split())\nprint(a + b)\n", 1),
    (STDIN, "a, b = map(int, input().split())\nprint(a - b)", 0),
    (STDIN, "a, b = map(int, input().split())\nprint(a + b)\nimport sys\nsys.exit(0)", 1),
    (CALL, "def add(a, b):\n    return a + b", 1),
    (CALL, "class Solution:\n    def add(self, a, b):\n        return a + b", 1),
    (CALL, "def add(a, b):\n    return a * b", 0),
    (dict(CALL, fn_name="pair", outputs=[[1, 2], [10, 20]]), "def pair(a, b):\n    return (a, b)", 1),
    (ASSERT, "def add(a, b):\n    return a + b", 1),
    (ASSERT, "def add(a, b):\n    return a + b + 1", 0),
    # early exit with status 0 before the tests ran must not pass
    (ASSERT, "import sys\nsys.exit(0)\ndef add(a, b):\n    return a + b", 0),
    (ASSERT, "import os\nos._exit(0)", 0),
    (CALL, "import os\nos._exit(0)", 0),
    (STDIN, "import sys\nsys.exit(0)", 0),
])
def test_code_reward(tests, source, expected):
    assert code_reward(fence(source), tests, timeout=10) == expected


def test_code_reward_takes_the_last_fenced_block_and_json_tests():
    resp = fence("def add(a, b):\n    return 0") + "Better:\n" + fence("def add(a, b):\n    return a + b")
    assert code_reward(resp, '{"assert": "assert add(2, 2) == 4"}') == 1.0
    assert code_reward("no code here", ASSERT) == 0.0
    assert code_reward(fence("def add(a,b): return a+b"), {"bogus": 1}) == 0.0


def leftover_processes(marker):
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


HOSTILE = {
    "infinite loop": "while True:\n    pass",
    "sleep": "import time\ntime.sleep(60)",
    "memory hog": "x = []\nwhile True:\n    x.append(bytearray(50_000_000))",
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "output flood": "import sys\nwhile True:\n    sys.stdout.write('x' * 100000)",
    "subprocess sleeper": "import subprocess\nsubprocess.Popen(['sleep', '300'])\nimport time\ntime.sleep(60)",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_code_scores_zero_within_timeout_and_leaves_nothing(name):
    marker = f"# hostile-{name.replace(' ', '-')}"
    t = time.monotonic()
    assert code_reward(fence(HOSTILE[name] + "\n" + marker), ASSERT, timeout=3) == 0.0
    assert time.monotonic() - t < 3 + 3  # the timeout plus a small margin
    time.sleep(0.2)
    assert leftover_processes("sleep 300") == [] and leftover_processes("rlvr-code-") == []
    assert leftover_processes("-B driver.py") == []


def test_code_cannot_reach_the_network():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]
    hits = []

    def accept():
        try:
            hits.append(server.accept())
        except OSError:
            pass

    th = threading.Thread(target=accept)
    th.start()
    src = (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
           "def add(a, b):\n    return a + b")
    verdict = code_reward(fence(src), ASSERT, timeout=5)
    server.close()
    th.join()
    if rewards._namespaces_available():
        assert verdict == 0.0 and hits == []


def test_code_cannot_write_outside_its_temp_dir(tmp_path):
    target = tmp_path / "escaped.txt"
    os.chmod(tmp_path, 0o777)
    src = f"open({str(target)!r}, 'w').write('x')\ndef add(a, b):\n    return a + b"
    verdict = code_reward(fence(src), ASSERT, timeout=5)
    if rewards._namespaces_available():
        assert verdict == 0.0 and not target.exists()
    # writing inside its own temp dir is fine
    ok = "open('scratch.txt', 'w').write('x')\ndef add(a, b):\n    return a + b"
    assert code_reward(fence(ok), ASSERT, timeout=5) == 1.0


def test_code_runs_with_a_minimal_environment():
    os.environ["RLVR_SECRET_TOKEN"] = "hunter2"
    try:
        src = "import os\nassert 'RLVR_SECRET_TOKEN' not in os.environ\ndef add(a, b):\n    return a + b"
        assert code_reward(fence(src), ASSERT) == 1.0
    finally:
        del os.environ["RLVR_SECRET_TOKEN"]


def test_score_batch_runs_code_items():
    got = score_batch([fence("def add(a, b):\n    return a + b"), fence("while True: pass")], [ASSERT, ASSERT],
                      kind="code", timeout=2)
    assert got == [1.0, 0.0]


def test_sandbox_without_namespaces_still_isolates_and_times_out(monkeypatch):
    """Where unshare is unavailable the other layers remain: limits, temp dir, group kill at the deadline."""
    monkeypatch.setattr(rewards, "_NAMESPACES", False)
    assert code_reward(fence("def add(a, b):\n    return a + b"), ASSERT) == 1.0
    t = time.monotonic()
    assert code_reward(fence("import time\ntime.sleep(60)\n# no-ns-sleeper"), ASSERT, timeout=2) == 0.0
    assert time.monotonic() - t < 5 and leftover_processes("-B driver.py") == []
