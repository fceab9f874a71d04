"""Tests of eval.py: the estimators against exact formulas, the CLI offline, 2 ranks = 1 rank."""
import json
import math
import os
import subprocess
import sys
from fractions import Fraction

import pytest

import delta
import eval as evaluation
from eval import majority_vote, pass_at_k, summarize

ROOT = os.path.dirname(os.path.abspath(__file__))


def test_pass_at_k_equals_exact_binomials_for_all_n_up_to_20():
    for n in range(1, 21):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
                assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12), (n, c, k)
    assert pass_at_k(10, 10, 1) == 1.0 and pass_at_k(10, 0, 10) == 0.0 and pass_at_k(10, 1, 10) == 1.0


def test_pass_at_k_is_stable_for_large_n():
    assert pass_at_k(2000, 1, 1) == pytest.approx(1 / 2000, rel=1e-9)
    assert 0 < pass_at_k(5000, 3, 100) < 1


def test_majority_vote_on_hand_made_votes():
    # three spellings of one half outvote two threes, although the threes are more frequent verbatim
    assert majority_vote(["\\frac{1}{2}", "0.5", "3", "3", "1/2"], [1, 1, 0, 0, 1]) == 1.0
    assert majority_vote(["3", "0.5", "3", "\\frac12", "3"], [0, 1, 0, 1, 0]) == 0.0
    assert majority_vote([None, None, "7"], [0, 0, 1]) == 1.0  # missing answers do not vote
    assert majority_vote([None, None], [0, 0]) == 0.0
    assert majority_vote(["2", "5"], [0, 1]) == 0.0  # tie: the group seen first
    assert majority_vote(["a", "b", "b"], [1, 0, 0], equal=lambda x, y: x == y) == 0.0


def test_summarize_keys_and_values():
    recs = []
    for p, verdicts in enumerate([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]):
        for s, v in enumerate(verdicts):
            recs.append({"problem_id": p, "sample": s, "correct": float(v), "extracted": "1" if v else "2",
                         "length": 10 + s, "truncated": s == 3})
    m = summarize(recs, 4)
    assert set(m) == {"avg@4", "stderr", "pass@1", "pass@2", "pass@4", "maj@4", "num_problems", "mean_length", "truncated"}
    assert m["avg@4"] == pytest.approx(0.5) and m["pass@1"] == pytest.approx(0.5)
    assert m["pass@2"] == pytest.approx((pass_at_k(4, 2, 2) + 0 + 1) / 3) and m["pass@4"] == pytest.approx(2 / 3)
    assert m["stderr"] == pytest.approx(0.5 / math.sqrt(3))  # std of [0.5, 0, 1] over sqrt(3)
    assert m["num_problems"] == 3 and m["mean_length"] == 11.5 and m["truncated"] == 0.25
    assert m["maj@4"] == pytest.approx(2 / 3)  # problem 0 ties 2:2 and the first group ("1") is right


@pytest.fixture(scope="module")
def tiny_and_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("evaldata")
    delta.build_tiny(str(d / "model"))
    rows = delta.addition_task(0, 12)[1]
    with open(d / "bench.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps({"q": r["question"], "a": int(r["answer"])}) + "\n")
    return str(d / "model"), str(d / "bench.jsonl")


def run_eval(model, data, out, *extra, torchrun=False):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"] if torchrun else [sys.executable]
    argv = ["eval.py", "--model", model, "--data", data, "--prompt_key", "q", "--answer_key", "a",
            "--max_new_tokens", "24", "--output_dir", out, "--instruction", "", *extra]
    return subprocess.run(cmd + argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_cli_writes_results_and_samples_with_documented_keys(tiny_and_data, tmp_path):
    model, data = tiny_and_data
    p = run_eval(model, data, str(tmp_path), "--n", "4", "--temperature", "1.0")
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
    assert "| model | bench | Avg |" in p.stdout


def test_cli_rejects_bad_arguments(tiny_and_data, tmp_path):
    model, data = tiny_and_data
    p = run_eval(model, data, str(tmp_path), "--benchmarks", "aime99")
    assert p.returncode != 0 and "unknown benchmark" in p.stderr


def test_two_ranks_give_the_same_results_as_one_with_greedy_decoding(tiny_and_data, tmp_path):
    model, data = tiny_and_data
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    p1 = run_eval(model, data, one, "--n", "2", "--temperature", "0")
    p2 = run_eval(model, data, two, "-n", "2", "--temperature", "0", torchrun=True)
    assert p1.returncode == 0 and p2.returncode == 0, (p1.stderr[-2000:], p2.stderr[-2000:])
    r1, r2 = json.load(open(f"{one}/results.json")), json.load(open(f"{two}/results.json"))
    assert r1["benchmarks"] == r2["benchmarks"] and r1["average"] == r2["average"]
    s1, s2 = open(f"{one}/samples.jsonl").read(), open(f"{two}/samples.jsonl").read()
    assert s1 == s2


def test_registry_covers_the_papers_benchmarks():
    assert evaluation.PAPER == ["aime24", "aime25", "aime26", "hmmt25feb", "hmmt25nov", "hmmt26feb", "brumo25"]
    assert all(b in evaluation.BENCHMARKS for b in evaluation.PAPER + ["math500", "gsm8k", "humaneval", "mbpp"])
