"""Tests of rewards.py: math on the project's one case table, code grading (its rules, in the parent), the pool.

Sections: math (cases/math_cases.py graded once per session, the composition with math-verify, extraction,
hostile LaTeX); code grading (the three modes, how outputs compare, which block is graded, specs); the worker
pool; the code datasets' readers (each schema on rows in its real layout, LiveCodeBench's private tests without
unpickling). The sandbox itself (isolation, attacks, honest programs) is test_sandbox.py's.
"""
import base64
import hashlib
import json
import os
import pickle
import subprocess
import sys
import threading
import time
import zlib

import pytest

import rewards
import tasks
from conftest import ADD, ASSERT, CALL, STDIN, fence, lcb_encode, lcb_row_1873a
from rewards import code_reward, extract_answer, math_reward, score_batch

B = lambda s: f"Some reasoning first. So the answer is $\\boxed{{{s}}}$."


# ------------------------------------------------------------------------------------- math
@pytest.fixture(scope="session")
def graded_table():
    """cases/math_cases.py's pairs and rewards.py's verdicts on them, graded once for every test here."""
    from math_cases import CASES
    return CASES, score_batch([c["response"] for c in CASES], [c["gold"] for c in CASES])


def test_the_math_case_table(graded_table):
    """Every pair that is not debatable gets its expected verdict (the README's figure on cases written here)."""
    cases, got = graded_table
    assert len(cases) > 900 and len({c["cls"] for c in cases}) > 25
    wrong = [(c["cls"], extract_answer(c["response"]), c["gold"], c["expected"]) for c, v in zip(cases, got)
             if not c["debatable"] and v != c["expected"]]
    assert not wrong, f"{len(wrong)} wrong verdicts: {wrong}"


def test_what_plain_math_verify_proves_equal_is_accepted_unless_a_veto_names_it(graded_table):
    """The composition: math-verify's verdict is the base; a pair it proves equal (its own call, the gold as
    given against the boxed answer) is accepted unless one of the named vetoes applies."""
    import logging

    from math_verify import parse, verify
    logging.disable(logging.WARNING)
    cases, got = graded_table
    checked = vetoed = 0
    for case, verdict in zip(cases, got):
        answers = rewards.final_answers(case["response"])
        if len(answers) != 1:
            continue
        try:
            proved = verify(parse(str(case["gold"])), parse("\\boxed{" + answers[0] + "}"))
        except Exception:
            continue
        if proved:
            checked += 1
            veto = rewards._veto(answers[0], rewards._gold_text(case["gold"]))
            vetoed += veto
            assert verdict == 1.0 or veto, (answers[0], case["gold"])
    assert checked > 60 and vetoed >= 5, (checked, vetoed)  # both branches are exercised


def test_only_the_text_after_the_last_think_counts():
    assert math_reward("<think>so \\boxed{42}</think>The answer is 42.", "42") == 0.0  # the box is inside think
    assert math_reward("<think>\\boxed{41}</think>\\boxed{42}", "42") == 1.0
    assert math_reward("\\boxed{42} and the unclosed <think> never matters", "42") == 1.0


def test_math_reward_single_call_and_extract_answer():
    assert math_reward(B("\\frac{3}{6}"), "0.5") == 1.0
    assert math_reward(None, "1") == 0.0 and math_reward(B("1"), None) == 0.0
    assert extract_answer("a \\boxed{\\frac{1}{2}} b \\boxed{x^{2}}") == "x^{2}"
    assert extract_answer("\\boxed{\\{1\\}}") == "\\{1\\}"
    assert extract_answer("no box") is None and extract_answer("\\boxed{ }") is None


def test_answer_formats_read_the_answer_where_each_asks_for_it():
    """answer_line reads the last `Answer:` as DAPO's verifier does (the rest of its line, a box in it opened);
    last_number the last number of the response (signs, decimals, fractions, thousands separators); text before the
    last </think> never counts; each format is graded by the same equivalence as the box."""
    line = lambda r: extract_answer(r, "answer_line")
    assert line("work...\nAnswer: 34") == "34" and line("**Answer:** \\boxed{7}") == "7"
    assert line("Answer: $\\frac{1}{2}$.") == "\\frac{1}{2}" and line("answer: 3\nso Answer: 5") == "5"
    assert line("Answer:") is None and line("no line") is None and line("<think>Answer: 1</think>") is None
    last = lambda r: extract_answer(r, "last_number")
    assert last("59 + 63 = 122.") == "122" and last("so it is -3") == "-3" and last("5-3 gives 2") == "2"
    assert last("$1,234.50 in all") == "1234.50" and last("x = 3/4") == "3/4" and last("none") is None
    assert last("<think>9</think> so 10") == "10" and last("x2 and y") is None
    assert score_batch(["Answer: \\frac{68}{2}", "Answer: 33", "\\boxed{34}"], ["34"] * 3,
                       answer_format="answer_line") == [1.0, 0.0, 0.0]
    assert score_batch(["it is 122.", "122 or 123", "\\boxed{122} and 5"], ["122"] * 3,
                       answer_format="last_number") == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="answer_format"):
        score_batch(["a"], ["b"], answer_format="first_line")


def test_asked_format_reads_a_prompts_own_request():
    """DAPO-Math-17k's prompt asks for an `Answer:` line, a MATH-style one for a box; a bare question for neither."""
    dapo = [{"role": "user", "content": "Solve the following math problem step by step. The last line of your "
                                        "response should be of the form Answer: $Answer (without quotes) ..."}]
    assert rewards.asked_format(dapo) == "answer_line"
    assert rewards.asked_format("... put your final answer within \\boxed{}.") == "boxed"
    assert rewards.asked_format("What is 2 + 2?") is None and rewards.asked_format(tasks.code_prompt("Add.")) is None


def test_dataset_rows_read_prompts_as_text_or_chat_messages():
    """A prompt column holds text or chat messages (also stored as a JSON string); anything else is refused naming
    the row; delta.py's held-out rows come back as written, with their answer format and instruction."""
    msgs = [{"role": "user", "content": "1+1?"}]
    kind, rows = tasks.dataset_rows([{"prompt": msgs, "gold": 2}, {"prompt": json.dumps(msgs), "gold": 2}],
                                      "prompt", "gold")
    assert kind == "math" and rows == [{"question": msgs, "answer": 2}] * 2
    with pytest.raises(rewards.DataError, match="row 1: --prompt_key prompt holds int"):
        tasks.dataset_rows([{"prompt": "a", "gold": 1}, {"prompt": 7, "gold": 1}], "prompt", "gold")
    held = [{"question": "1+1?", "answer": "2", "reward": "math", "answer_format": "last_number", "instruction": "x"}]
    assert tasks.dataset_rows(held) == ("math", [{"answer_format": "last_number", "instruction": "x",
                                                    "question": "1+1?", "answer": "2"}])
    code = [{"question": "f?", "answer": {"fn_name": "f", "inputs": [[1]], "outputs": [1]}, "reward": "code"}]
    assert tasks.dataset_rows(code)[0] == "code"
    with pytest.raises(tasks.CodeSpecError, match="row 0"):
        tasks.dataset_rows([dict(code[0], answer={"fn_name": "f", "inputs": "1", "outputs": [1]})])


NESTED_300 = "1"
for _ in range(300):
    NESTED_300 = "\\frac{1}{1+" + NESTED_300 + "}"


@pytest.mark.parametrize("response,gold", [
    (B("2^{2^{2^{2^{2^{2^{2}}}}}}"), "3"),  # power tower
    (B("9^{9^{9^{9^{9}}}}"), "9^{9^{9^{9^{9}}}}+1"),
    (B("(" * 5000 + "1" + ")" * 5000), "1"),  # thousands of nested parentheses
    (B("1+" * 30000 + "1"), "30001"),  # a 100 kB answer
    ("x" * 100_000 + "\\boxed{" * 2000, "1"),  # 100 kB of junk with unclosed boxes
    (B("__import__('os').system('touch /tmp/pwned_by_math')"), "0"),  # model text is never executed
    (B(NESTED_300), "1"), (B(NESTED_300), NESTED_300),  # a 300-level nested fraction, against itself too
    (B("x^{" * 21 + "2" + "}" * 21), "1"), (B("9^" * 20 + "9"), "9"), (B("\\sqrt{" * 20 + "2" + "}" * 20), "2"),
])
def test_adversarial_math_returns_quickly_and_never_raises(response, gold):
    """Every call ends within the 5 s of MATH_TIMEOUT by itself (no item hits the deadline)."""
    stats, t = {}, time.monotonic()
    assert score_batch([response], [gold], stats=stats)[0] in (0.0, 1.0)
    assert stats["timeouts"] == 0 and time.monotonic() - t < rewards.MATH_TIMEOUT + 10  # + a loaded machine's margin
    assert not os.path.exists("/tmp/pwned_by_math")


def test_slow_items_do_not_block_the_batch():
    responses = [B("9^{9^{9^{9^{9}}}}")] * 2 + [B(str(i)) for i in range(40)]
    golds = ["9^{9^{9^{9^{9}}}}+1"] * 2 + [str(i) for i in range(40)]
    t = time.monotonic()
    got = score_batch(responses, golds, timeout=2.0)
    assert got[2:] == [1.0] * 40 and time.monotonic() - t < 2.0 + 30


def test_score_batch_works_from_a_thread():
    out = []
    th = threading.Thread(target=lambda: out.append(score_batch([B("\\sqrt{8}"), B("3")], ["2\\sqrt{2}", "4"])))
    th.start()
    th.join(60)
    assert out == [[1.0, 0.0]]


def test_gold_content_is_kept():
    assert rewards._gold_text(0) == "0" and rewards._gold_text(10**30) == str(10**30)
    assert rewards._gold_text("The answer is \\boxed{5} apples") == "5"  # a gold with boxes: its final answer
    assert rewards._gold_text("$\\boxed{\\frac{1}{2}}$") == "\\frac{1}{2}"
    assert math_reward(B("0"), 0) == 1.0


def test_score_batch_validates_its_input():
    with pytest.raises(ValueError, match="kind"):
        score_batch(["a"], ["b"], kind="proof")
    with pytest.raises(ValueError, match="golds"):
        score_batch(["a"], [])


# ------------------------------------------------------------------------------------- code grading
NOISY_ADD = ("import sys\nprint('debug: loading')\ndef add(a, b):\n    print('debug', a, b)\n"
             "    print('to stderr', file=sys.stderr)\n"
             "    return a + b\nprint(add(2, 2))\nif __name__ == '__main__':\n    print('demo')\n    sys.exit(3)")


@pytest.mark.parametrize("tests,source,expected", [
    (STDIN, "a, b = map(int, input().split())\nprint(a + b)", 1),
    (STDIN, "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)", 1),
    (STDIN, "a, b = map(int, open(0).read().split())\nprint(a + b)\n", 1),
    (STDIN, "a, b = map(int, input().split())\nprint(a - b)", 0),
    (STDIN, "a, b = map(int, input().split())\nprint(a + b)\nimport sys\nsys.exit(0)", 1),
    (STDIN, "a, b = map(int, input().split())\nprint(a + b)\nraise SystemExit(1)", 0),  # a failing exit status
    (STDIN, "a, b = map(int, input().split())\nprint(a + b)\nimport sys\nprint('log', file=sys.stderr)", 1),
    (CALL, ADD, 1),
    (CALL, "class Solution:\n    def add(self, a, b):\n        return a + b", 1),
    (CALL, "def add(a, b):\n    return a * b", 0),
    (CALL, "def add(a, b):\n    return str(a + b)", 0),  # "3" is not 3
    (CALL, "def add(a, b):\n    return {a + b}", 0),  # not JSON: cannot equal anything
    (dict(CALL, outputs=[None, None]), "def add(a, b):\n    raise ValueError", 0),  # an error is not the value None
    (dict(CALL, outputs=[None, None]), "def add(a, b):\n    return None", 1),
    (dict(CALL, fn_name="pair", outputs=[[1, 2], [10, 20]]), "def pair(a, b):\n    return (a, b)", 1),
    (CALL, "import numpy as np\ndef add(a, b):\n    return np.int64(a) + b", 1),  # a numpy integer (review-6 B7)
    (CALL, "def add(a, b):\n    return float(a + b) + 1e-9", 0),  # an integer expected: no tolerance
    (ASSERT, ADD, 1),
    (ASSERT, "def add(a, b):\n    return a + b + 1", 0),
    # output of the solution is kept apart from the verdict: debug prints and demo blocks change nothing
    (CALL, NOISY_ADD, 1), (ASSERT, NOISY_ADD, 1), (CALL, NOISY_ADD.replace("a + b\n", "a - b\n"), 0),
    (ASSERT, NOISY_ADD.replace("a + b\n", "a - b\n"), 0),
    # early exit with status 0 before the tests ran must not pass
    (ASSERT, "import sys\nsys.exit(0)\ndef add(a, b):\n    return a + b", 0),
    (ASSERT, "import os\nos._exit(0)", 0),
    (CALL, "import os\nos._exit(0)", 0),
    (STDIN, "import sys\nsys.exit(0)", 0),
])
def test_code_reward(tests, source, expected):
    assert code_reward(fence(source), tests, timeout=10) == expected


@pytest.mark.parametrize("got,expected,ok", [
    ("3\n", "3", True), ("3", "3\n\n", True), ("1  2 \n", "1 2", True), ("\n1 2\n\n3\n", "1 2\n3", True),
    ("1\n2", "1 2", False), ("1 2 3", "1 2", False), ("", "0", False), ("3", "", False), ("YES", "yes", False),
    ("0.3333333333", "0.333333", True), ("0.3334", "0.333333", False), ("1e-7", "0.0", True),
    ("1000000.5", "1000000.0", True), ("2.0", "2.00000", True), ("1.0", "1", False), ("1", "1.0", True),
    ("nan", "0.5", False), ("inf", "1e308", False), ("abc", "0.5", False), ("-0.0", "0.0", True),
])
def test_stdout_matches_token_rules(got, expected, ok):
    """Lines of whitespace-separated tokens; a float tolerance only where the expected token is a float."""
    assert rewards.stdout_matches(got, expected) is ok


@pytest.mark.parametrize("got,expected,ok", [
    (3, 3, True), (3, 4, False), (3.0000000001, 3.0, True), (3.1, 3.0, False), (3, 3.0, True), ([1, 2], [1, 2], True),
    ([2, 1], [1, 2], False), (True, 1, False), (1, True, False), (True, True, True), ("3", 3, False),
    ({"a": [1.0]}, {"a": [1]}, True), ({"a": 1}, {"b": 1}, False), (None, None, True), (None, [], False),
    (5, [5], True), ([5], [5], True), (5, [5, 6], False), ([[1, 2]], [[1, 2]], True), ([1, 2], [[1, 2]], True),
    (10_000_001.0, 10_000_000, False), (10_000_001, 10_000_000, False), (10_000_000.0, 10_000_000, True),
    (3.0000000001, 3, False), (10_000_000.5, 10_000_000.0, True), (2 ** 60 + 1, 2 ** 60, False),
])
def test_value_matches_json_values(got, expected, ok):
    """An integer expected: an equal number only (LiveCodeBench's and APPS's ==); a float: also within 1e-6, as
    stdin's tokens (the last rule took 10,000,001.0 for 10,000,000)."""
    assert rewards.value_matches(got, expected) is ok


def test_the_block_defining_the_entry_point_is_graded():
    usage = "\nExample usage:\n" + fence("print(add(2, 3))")
    assert code_reward(fence(ADD) + usage, ASSERT, entry_point="add") == 1.0
    assert code_reward(fence(ADD) + usage, dict(ASSERT, entry_point="add")) == 1.0
    assert code_reward(fence(ADD) + usage, CALL) == 1.0  # fn_name names the entry point
    assert code_reward(fence(ADD) + usage, ASSERT) == 0.0  # no entry point: the last block
    resp = fence("def add(a, b):\n    return 0") + "Better:\n" + fence(ADD)
    assert code_reward(resp, '{"assert": "assert add(2, 2) == 4"}') == 1.0  # the last block defining it
    assert rewards.extract_code("```cpp\nint main() {}\n```\n" + fence("x = 1")) == "x = 1\n"
    assert code_reward("no code here", ASSERT) == 0.0 and code_reward("```python\nunclosed", ASSERT) == 0.0


def test_setup_runs_before_the_solution_and_a_bare_body_continues_it():
    """HumanEval-style: the prompt runs first; a full redefinition and a bare body completion both work."""
    prompt = 'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum of xs."""\n'
    tests = {"assert": "assert total([1, 2, 3]) == 6", "setup": prompt, "entry_point": "total"}
    assert code_reward(fence("    return sum(xs)"), tests) == 1.0  # a body
    assert code_reward(fence("def total(xs: List[int]) -> int:\n    return sum(xs)"),
                       tests) == 1.0  # uses the prompt's import
    assert code_reward(fence("    return 0"), tests) == 0.0


@pytest.mark.parametrize("spec,message", [
    ({"bogus": 1}, "need 'assert'"), ({"inputs": ["1"], "outputs": []}, "1 inputs but 0 outputs"),
    ({"fn_name": "f", "inputs": [1], "outputs": [1]}, "lists of arguments"), ({"assert": 5}, "test source"),
    ({"inputs": [1], "outputs": ["1"]}, "strings"),
])
def test_malformed_tests_are_the_callers_error(spec, message):
    with pytest.raises(ValueError, match=message):
        code_reward(fence(ADD), spec)
    with pytest.raises(ValueError, match=message):
        score_batch([fence(ADD)], [spec], kind="code")


SECRET = "7f3a9c1e5b"  # an expected output; the programs below search for it by its hash only
HUNT = ("import gc, hashlib, os, re\ntexts = list(os.environ.values())\nfor root, _, files in os.walk('.'):\n"
        "    for f in files:\n        try:\n"
        "            texts.append(open(os.path.join(root, f), errors='ignore').read())\n"
        "        except OSError:\n            pass\n"
        "texts += [repr(o) for o in gc.get_objects() if isinstance(o, (dict, list, tuple))]\n"
        f"H = {hashlib.sha256(SECRET.encode()).hexdigest()!r}\n"
        "hit = [w for t in texts for w in re.findall('[0-9a-f]{10}', t)"
        " if hashlib.sha256(w.encode()).hexdigest() == H]\n")


def test_stdin_expected_outputs_never_enter_the_sandbox():
    src = HUNT + "print(hit[0] if hit else 'nothing')"
    assert code_reward(fence(src), {"inputs": ["abc\n"], "outputs": [SECRET]}) == 0.0
    assert code_reward(fence(src), {"inputs": [SECRET], "outputs": [SECRET]}) == 1.0  # the hunt works where it can


def test_call_expected_outputs_never_enter_the_sandbox():
    src = HUNT + "def f(x):\n    return hit[0] if hit else 'nothing'"
    assert code_reward(fence(src), {"fn_name": "f", "inputs": [["abc"]], "outputs": [SECRET]}) == 0.0
    assert code_reward(fence(src), {"fn_name": "f", "inputs": [[SECRET]], "outputs": [SECRET]}) == 1.0


def test_a_spec_without_tests_is_refused():
    for spec in ({"assert": "x = 1\ncheck = lambda f: None"}, {"inputs": [], "outputs": []},
                 {"fn_name": "f", "inputs": [], "outputs": []}):
        with pytest.raises(ValueError, match="any program"):
            code_reward(fence(ADD), spec)


def test_leetcode_style_solutions_get_the_harness_imports():
    src = ("class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
           "        seen = defaultdict(int)\n"
           "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
           "                return [seen[target - x], i]\n"
           "            seen[x] = i\n        return []")
    spec = {"fn_name": "twoSum", "inputs": [[[2, 7, 11, 15], 9], [[3, 2, 4], 6]], "outputs": [[0, 1], [1, 2]]}
    assert code_reward(fence(src), spec) == 1.0
    assert code_reward(fence("print(max(accumulate(map(int, input().split()))))"),
                       {"inputs": ["1 2 3\n"], "outputs": ["6\n"]}) == 1.0


# ------------------------------------------------------------------------------------- the worker pool
def test_a_script_read_from_stdin_gets_real_verdicts():
    """Workers never re-import the caller's __main__, so `python - <<EOF` works (it scored 0.0 before)."""
    script = ("import rewards\nprint(rewards.math_reward('\\\\boxed{5}', '5'),"
              " rewards.math_reward('\\\\boxed{4}', '5'))\n")
    out = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.abspath(rewards.__file__)))
    assert out.stdout.split() == ["1.0", "0.0"], out.stderr[-2000:]


@pytest.fixture
def fresh_pool():
    rewards._shutdown()
    yield
    rewards._shutdown()


def boot_with(patch):
    """A worker boot line that applies `patch` (code run with the module as `m`) before serving."""
    return rewards._BOOT.replace("m._serve(", patch + "; m._serve(")


def test_a_worker_that_cannot_start_raises(fresh_pool, monkeypatch):
    monkeypatch.setattr(rewards, "_BOOT",
                        "import sys; print('cannot import the verifier', file=sys.stderr); sys.exit(3)")
    with pytest.raises(RuntimeError, match="(?s)failed to start.*exit code 3.*cannot import the verifier"):
        score_batch([B("1")], ["1"])


def test_worker_start_up_does_not_count_against_the_item(fresh_pool, monkeypatch):
    monkeypatch.setattr(rewards, "_BOOT", boot_with("import time; time.sleep(4)"))
    stats = {}
    assert score_batch([B("\\frac{1}{2}"), B("3")], ["0.5", "3"], timeout=2, stats=stats) == [1.0, 1.0]
    assert stats["timeouts"] == 0


def test_crashes_and_timeouts_are_counted_and_a_broken_verifier_raises(fresh_pool, monkeypatch):
    crash = ("import os, time; f = m._math_check; "
             "m._math_check = lambda r, g, *a: os._exit(1) if r == 'crash' else time.sleep(60) if r == 'slow' else "
             "f(r, g, *a)")
    monkeypatch.setattr(rewards, "_BOOT", boot_with(crash))
    stats = {}
    with pytest.warns(UserWarning, match="1 of 3 items failed"):
        got = score_batch([B("1"), "crash", "slow"], ["1", "1", "2"], timeout=1, stats=stats)
    assert got == [1.0, 0.0, 0.0] and stats == {"timeouts": 1, "errors": 1}
    with pytest.raises(RuntimeError, match="every one of 2 items failed"):
        score_batch(["crash", "crash"], ["1", "1"])


def test_score_batch_runs_code_items():
    stats = {}
    got = score_batch([fence(ADD), fence("while True: pass")], [ASSERT, ASSERT], kind="code", timeout=2, stats=stats)
    assert got == [1.0, 0.0] and stats == {"timeouts": 0, "errors": 0}  # the sandbox's own limit ended the loop


def test_livecodebench_comparison_is_its_harness_rule():
    """"compare": "lcb" compares as lcb_runner/evaluation/testing_util.py does: stripped lines, the same count, each
    equal as text or as Decimals (so 2.50 == 2.5 but not 2.6666666666666665 == 2.6666666667, and a word is a
    mismatch); call-based results by plain == (0 == False there). The default rules are kept otherwise."""
    assert rewards.lcb_stdout_matches("  3\n2.50 1\n\n", "3\n2.5 1.0")
    assert not rewards.lcb_stdout_matches("2.6666666666666665", "2.6666666667")
    assert rewards.stdout_matches("2.6666666666666665", "2.6666666667")  # the default: within FLOAT_TOLERANCE
    assert not rewards.lcb_stdout_matches("1 2", "1\n2") and not rewards.lcb_stdout_matches("YES", "yes")
    assert not rewards.lcb_stdout_matches("abc 1", "abc 2") and rewards.lcb_stdout_matches("abc 1", "abc 1")
    zero = fence("def f(x):\n    return 0")
    spec = {"fn_name": "f", "inputs": [[1]], "outputs": [False]}
    assert code_reward(zero, spec) == 0.0 and code_reward(zero, dict(spec, compare="lcb")) == 1.0
    with pytest.raises(ValueError, match="compare"):
        code_reward(zero, dict(spec, compare="loose"))


SLEEPY_STDIN = "import time\nn = float(input())\ntime.sleep(n)\nprint(n)"
SLEEPY_CALL = "import time\ndef f(n):\n    time.sleep(n)\n    return n"


def test_a_per_test_limit_with_early_exit_as_livecodebench_runs():
    """"test_timeout": each test gets that long (LiveCodeBench's signal.alarm per test) and the first failing test
    ends the item (its early exit), in stdin and call modes: a program over the limit on one test fails though the
    item's limit in all would fit it (without the key it passes, as the last design graded every spec); tests that
    each fit pass though together they take longer than one limit; a wrong first test ends the item at once."""
    def spec(times, outs=None, **kw):
        stdin = {"inputs": [f"{t}\n" for t in times], "outputs": [f"{t}\n" for t in (outs or times)]}
        call = {"fn_name": "f", "inputs": [[t] for t in times], "outputs": list(outs or times)}
        return [dict(stdin, **kw), dict(call, **kw)]
    cases = {"one test over the limit": (spec([0.1, 2.5], test_timeout=1.5), 0.0),  # a second of margin either way
             "the same without a per-test limit": (spec([0.1, 2.5]), 1.0),
             "every test within it, longer together": (spec([0.5] * 4, test_timeout=1.5), 1.0),
             "a wrong first test, slow ones after": (spec([0.0, 3, 3, 3], outs=[9, 3, 3, 3], test_timeout=5), 0.0)}
    for name, (specs, verdict) in cases.items():
        for program, s in zip((SLEEPY_STDIN, SLEEPY_CALL), specs):
            t = time.monotonic()
            assert code_reward(fence(program), s, timeout=20) == verdict, (name, s)
            if name.startswith("a wrong first"):
                assert time.monotonic() - t < 2.5, name  # 9 s of tests left undone
    with pytest.raises(ValueError, match="test_timeout"):
        code_reward(fence(SLEEPY_CALL), dict(specs[1], test_timeout=0))


def test_each_item_of_a_batch_has_its_own_limit():
    """score_batch takes one limit per item: the same sleeper fails under a 1 s limit and passes under 6 s in one
    batch (LiveCodeBench's bound differs with each problem's number of tests)."""
    spec = {"fn_name": "f", "inputs": [[2]], "outputs": [2]}
    stats = {}
    assert score_batch([fence(SLEEPY_CALL)] * 2, [spec] * 2, "code", timeout=[1, 6], stats=stats) == [0.0, 1.0]
    with pytest.raises(ValueError, match="timeouts"):
        score_batch([fence(SLEEPY_CALL)] * 2, [spec] * 2, "code", timeout=[1])


# ------------------------------------------------------------------------------------- code datasets -> test specs
# Each schema on rows in its real layout; where a row comes from is said beside it (rewards.py, section 4).
def test_livecodebench_private_tests_are_read_from_the_datasets_encoding():
    row = lcb_row_1873a()
    spec = tasks.spec_livecodebench(row)
    assert "fn_name" not in spec and len(spec["inputs"]) == 5  # 1 public + 4 private, public first
    assert spec["inputs"][0].startswith("6\nabc") and spec["inputs"][1] == "1\nabc\n" and spec["outputs"][1] == "YES\n"
    assert tasks.spec_livecodebench(row, private=False)["inputs"] == spec["inputs"][:1]
    # the encoding rebuilt here as the dataset does it, for every pickle protocol that writes a str this way
    tests = json.loads(row["public_test_cases"])
    for protocol in (2, 3, 4, 5):
        again = dict(row, private_test_cases=lcb_encode(tests * 3, protocol))
        assert tasks.spec_livecodebench(again)["inputs"] == [tests[0]["input"]] * 4
    assert tasks.lcb_private_tests(json.dumps(tests)) == tests  # stored as plain JSON: read as JSON
    solution = ("t = int(input())\nfor _ in range(t):\n    s = input().strip()\n"
                "    print('YES' if sum(a != b for a, b in zip(s, 'abc')) in (0, 2) else 'NO')\n")
    got = rewards.score_batch([f"```python\n{solution}```", "```python\nprint('YES')\n```"], [spec, spec], "code")
    assert got == [1.0, 0.0]


def test_hostile_pickle_is_refused_before_any_object_is_built(monkeypatch, tmp_path):
    """pickle.loads runs whatever a pickle says; the reader admits only the bytes of one pickled str and raises
    at the first other opcode, so the payload's os.system is never reached."""
    import posix

    class Hostile:
        def __reduce__(self):
            return os.system, (f"touch {tmp_path / 'pwned'}",)
    payloads = [pickle.dumps(Hostile()), pickle.dumps([Hostile()]), pickle.dumps("fine") + pickle.dumps(Hostile()),
                pickle.dumps(Hostile(), protocol=0), pickle.dumps(Hostile(), protocol=2)]
    calls = []  # os.system (posix.system, as the pickle names it) only records from here on
    monkeypatch.setattr(posix, "system", lambda cmd: calls.append(cmd) or 0)
    monkeypatch.setattr(os, "system", posix.system)
    for payload in payloads:
        blob = base64.b64encode(zlib.compress(payload)).decode()
        with pytest.raises(tasks.CodeSpecError, match="not a pickled str"):
            tasks.lcb_private_tests(blob)
        with pytest.raises(ValueError, match="opcode"):
            tasks.pickled_str(payload)
    assert calls == [] and not (tmp_path / "pwned").exists()
    pickle.loads(payloads[0])  # the threat is real: pickle.loads would have called it
    assert calls == [f"touch {tmp_path / 'pwned'}"]
    with pytest.raises(ValueError, match="inflates past"):  # a zlib bomb stops at the limit
        tasks._inflate(zlib.compress(b"\0" * 100_000), 1000)
    with pytest.raises(tasks.CodeSpecError, match="neither JSON"):
        tasks.lcb_private_tests("not base64 at all!")


def test_deepcoder_rows_of_each_source():
    """agentica-org/DeepCoder-Preview-Dataset: `tests` is a JSON string shaped by its source (NeMo-RL's DeepCoder
    processor and rllm's deepcoder preparation read it so): lcbv5 = LiveCodeBench's list with testtype, the
    function in metadata.func_name (metadata a dict); primeintellect = a list with "type"; taco = APPS's dict."""
    lcb = lcb_row_1873a()
    tests = json.loads(lcb["public_test_cases"]) + tasks.lcb_private_tests(lcb["private_test_cases"])
    stdin_row = {"problem": lcb["question_content"], "tests": json.dumps(tests), "starter_code": "", "metadata": {}}
    assert tasks.spec_deepcoder(stdin_row) == tasks.spec_livecodebench(lcb)
    functional = {"problem": "Find the number of triplets...",
                  "starter_code": "class Solution:\n    def unequalTriplets(self, nums)",
                  "tests": json.dumps([{"input": "[4,4,2,4,3]", "output": "3", "testtype": "functional"}]),
                  "metadata": {"func_name": "unequalTriplets"}}
    assert tasks.spec_deepcoder(functional) == {"fn_name": "unequalTriplets", "inputs": [[[4, 4, 2, 4, 3]]],
                                                  "outputs": [3]}
    prime = {"problem": "...", "tests": json.dumps([{"type": "function_call", "fn_name": "majorityElement",
                                                     "input": [[3, 2, 3]], "output": [3]}])}
    assert tasks.spec_deepcoder(prime) == {"fn_name": "majorityElement", "inputs": [[[3, 2, 3]]], "outputs": [[3]]}
    taco = {"problem": "...", "tests": json.dumps({"inputs": [[[5, 4, 3, 2, 1]], [[1, 2, 0]]],
                                                   "outputs": [[[4, 3, 2, 1, 0]], [[1, 1, 0]]], "fn_name": "smaller"})}
    spec = tasks.spec_deepcoder(taco)
    solution = "def smaller(arr):\n    return [sum(b < a for b in arr[i + 1:]) for i, a in enumerate(arr)]\n"
    assert rewards.score_batch([f"```python\n{solution}```"], [spec], "code") == [1.0]  # [x] met by x, as APPS grades


def test_primeintellect_rows():
    """PrimeIntellect/verifiable-coding-problems: verification_info is a JSON string {"language", "test_cases"}
    (its dataset card); open-r1's verifiable-coding-problems-python stores the same as a dict. The stdin row is the
    one shown in ms-swift's docs (docs/source_en/BestPractices/GRPO-Code-Training.md, dataset open-r1/verifiable-
    coding-problems-python-10k): Codeforces 1277D, its expected output with trailing spaces and an empty line."""
    info = {"language": "python", "test_cases": [{
        "input": "4\n4\n0001\n1000\n0011\n0111\n3\n010\n101\n0\n2\n00000\n00001\n4\n01\n001\n0001\n00001\n",
        "output": "1\n3 \n-1\n0\n\n2\n1 2 \n", "type": "stdin_stdout"}]}
    for stored in (info, json.dumps(info)):
        spec = tasks.spec_primeintellect({"prompt": "Polycarp has $n$ different binary words...",
                                            "verification_info": stored})
        assert spec == {"inputs": [info["test_cases"][0]["input"]], "outputs": [info["test_cases"][0]["output"]]}
    call = {"language": "python", "test_cases": [{"fn_name": "majorityElement", "input": [[3, 2, 3]], "output": 3,
                                                  "type": "function_call"}]}
    assert tasks.spec_primeintellect({"verification_info": call})["fn_name"] == "majorityElement"
    with pytest.raises(tasks.CodeSpecError, match="only python"):
        tasks.spec_primeintellect({"verification_info": dict(info, language="cpp")})


def test_apps_and_taco_rows():
    """APPS (codeparrot/apps) and TACO (BAAI/TACO): input_output is a JSON string {"inputs", "outputs", "fn_name"}.
    The stdin row is APPS test problem 76 as quoted in a public data-conversion note (id, question, solutions and
    input_output as strings); TACO's call-based row is taco_train_428 (`smaller`) with its [value]-wrapped outputs."""
    apps = {"id": 76, "question": "Lee is going to decorate his house using regular convex polygons...",
            "solutions": json.dumps(["t = int(input())\nfor _ in range(t):\n    n = int(input())\n    if n % 4 == 0:\n"
                                     "        print('YES')\n    else:\n        print('NO')\n"]),
            "input_output": ("{\"inputs\":[\"4\\n3\\n4\\n12\\n1000000000\\n\"],"
                             "\"outputs\":[\"NO\\nYES\\nYES\\nYES\\n\"]}"),
            "difficulty": "interview", "url": "https://codeforces.com/problemset/problem/1369/A", "starter_code": ""}
    spec = tasks.spec_apps(apps)
    assert spec == {"inputs": ["4\n3\n4\n12\n1000000000\n"], "outputs": ["NO\nYES\nYES\nYES\n"]}
    assert rewards.score_batch([f"```python\n{json.loads(apps['solutions'])[0]}```"], [spec], "code") == [1.0]
    lines = dict(apps, input_output=json.dumps({"inputs": [["4", "3", "4", "12", "1000000000"]],
                                                "outputs": [["NO", "YES", "YES", "YES"]]}))
    assert tasks.spec_apps(lines) == {"inputs": ["4\n3\n4\n12\n1000000000"], "outputs": ["NO\nYES\nYES\nYES"]}
    taco = {"question": "Write smaller(arr)...", "starter_code": "def smaller(arr):\n\t",
            "input_output": json.dumps({"fn_name": "smaller", "inputs": [[[5, 4, 3, 2, 1]], [[1, 2, 0]]],
                                        "outputs": [[[4, 3, 2, 1, 0]], [[1, 1, 0]]]})}
    assert tasks.spec_apps(taco)["fn_name"] == "smaller"
    prompt = tasks.code_prompt(taco["question"], taco["starter_code"])
    assert "def smaller(arr)" in prompt and tasks.LCB_STDIN not in prompt
    assert tasks.LCB_STDIN in tasks.code_prompt(apps["question"])  # stdin: "Read the inputs from stdin ..."
    assert "`smaller`" in tasks.code_prompt("...", "", "smaller")


def test_spec_column_and_dotted_keys():
    """A local jsonl with the spec written out, and a nested answer column as DAPO-Math-17k and verl's parquet
    files store it: {"prompt": [{"role", "content"}], "reward_model": {"ground_truth", "style"}} (verl's
    data preprocessing examples)."""
    row = {"question": "Add two numbers.", "tests": {"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]}}
    assert tasks.spec_jsonl(row) == row["tests"]
    assert tasks.spec_jsonl({"tests": json.dumps({"assert": "assert add(1, 2) == 3"})})["assert"]
    verl = {"data_source": "math_dapo", "prompt": [{"role": "user", "content": "What is 2+2?"}],
            "reward_model": {"ground_truth": "4", "style": "rule"}, "extra_info": {"index": 7}}
    assert tasks.get_field(verl, "reward_model.ground_truth") == "4"
    assert tasks.get_field(dict(verl, reward_model=json.dumps(verl["reward_model"])),
                             "reward_model.ground_truth") == "4"
    assert tasks.get_field({"reward_model.ground_truth": "5"}, "reward_model.ground_truth") == "5"  # a flat column
    assert tasks.get_field(verl, "prompt.0.content") == "What is 2+2?"  # a list indexed by number
    with pytest.raises(KeyError, match="reward_model has no 'answer'"):
        tasks.get_field(verl, "reward_model.answer")


def test_malformed_specs_are_refused_naming_the_row():
    good = {"question_id": "ok",
            "public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
            "private_test_cases": "", "metadata": "{}"}
    bad = [
        ({"public_test_cases": json.dumps([{"input": "1", "output": "1", "testtype": "functional"}]), "metadata": "{}"},
         "no metadata func_name"),
        ({"public_test_cases": json.dumps([{"input": "[1", "output": "1", "testtype": "functional"}]),
          "metadata": json.dumps({"func_name": "f"})}, "not one JSON value per line"),
        ({"public_test_cases": json.dumps([{"input": "1", "output": "1", "testtype": "stdin"},
                                           {"input": "1", "output": "1", "testtype": "functional"}])},
         "one of stdin or functional"),
        ({"public_test_cases": "[]", "private_test_cases": ""}, "no test inputs"),
        ({"public_test_cases": "{not json"}, "not JSON"),
        ({"public_test_cases": json.dumps([{"input": 1, "output": "1", "testtype": "stdin"}])}, "must be strings"),
    ]
    for row, why in bad:
        with pytest.raises(tasks.CodeSpecError, match=rf"row 1 \(abc1\) of livecodebench: .*{why}"):
            tasks.code_specs([good, dict(row, question_id="abc1")], "livecodebench")
    with pytest.raises(tasks.CodeSpecError, match="row 0 .*3 inputs but 1 outputs"):
        tasks.code_specs([{"input_output": json.dumps({"inputs": ["1", "2", "3"], "outputs": ["1"]})}], "apps")
    with pytest.raises(tasks.CodeSpecError, match="row 0 of primeintellect: .*verification_info"):
        tasks.code_specs([{"prompt": "..."}], "primeintellect")
    for spec, why in (({"inputs": "1\n", "outputs": "1\n"}, "must be lists"), ({"assert": "x = 1"}, "no assert")):
        with pytest.raises(tasks.CodeSpecError, match=rf"row 0 of jsonl: tests: .*{why}"):  # a string is not a list
            tasks.code_specs([{"tests": spec}], "jsonl")


def test_livecodebench_releases_and_date_window():
    files = tasks.lcb_release_files
    assert files("release_v5") == ["test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl"]
    assert (files("v1") == ["test.jsonl"] and files("v5") == ["test5.jsonl"]
            and files("v4_v6") == ["test4.jsonl", "test5.jsonl", "test6.jsonl"])
    assert files("release_latest")[-1] == "test6.jsonl"
    with pytest.raises(ValueError, match="unknown LiveCodeBench release"):
        files("v5.1")
    inside = lambda date, start="2024-08-01", end="2025-02-01": (
        tasks.lcb_in_window({"contest_date": date}, start, end))
    assert inside("2024-08-01T00:00:00") and inside("2025-02-01T00:00:00") and inside("2024-12-31T23:59:00")
    assert not inside("2024-07-31T23:00:00") and not inside("2025-02-01T12:00:00")  # LiveCodeBench: end at midnight
    assert inside("2020-01-01T00:00:00", None, None)
