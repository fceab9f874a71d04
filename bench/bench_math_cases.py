"""Benchmark: answer-equivalence accuracy on bench/math_cases.py, rewards.py against plain math-verify.

    python bench/bench_math_cases.py

bench/math_cases.py holds 580 answer pairs written for this project in the formats of DeepMath
`final_answer`, MATH-500, AIME/HMMT/BRUMO golds and Qwen3 `<think>` responses, each with the verdict a
careful grader gives, 15 of them marked debatable; they cover the failure classes an outside evaluation
found (exact values, infinities, choice letters, empty sets, prefixes, root lists, matrices, commuted
products, equations, scientific notation, unicode) and a realistic bulk. Prints the accuracy on the
non-debatable pairs per class and the near misses accepted (a wrong answer scored 1), for
rewards.score_batch and for `math_verify.verify(parse(gold), parse(response))`, with the gold as given
and wrapped in `$...$` (math-verify's parser reads a bare gold only in part). The verifier was mended
against these pairs: they show the listed classes are handled, not how it generalises.
"""
import collections
import concurrent.futures
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rewards  # noqa: E402
from math_cases import CASES  # noqa: E402


def math_verify_verdicts(case):
    """(bare gold, gold in $...$) verdicts of plain math-verify; in a worker process (its timeouts use signals)."""
    import logging

    from math_verify import parse, verify
    logging.disable(logging.WARNING)
    out = []
    for gold in (str(case["gold"]), f"${case['gold']}$"):
        try:
            out.append(float(bool(verify(parse(gold), parse(case["response"])))))
        except Exception:
            out.append(0.0)
    return out


def report(name, verdicts):
    per, near = collections.defaultdict(lambda: [0, 0]), 0
    for case, v in zip(CASES, verdicts):
        if case["debatable"]:
            continue
        per[case["cls"]][0] += v == case["expected"]
        per[case["cls"]][1] += 1
        near += case["expected"] == 0 and v == 1
    right, total = sum(r for r, _ in per.values()), sum(n for _, n in per.values())
    classes = "  ".join(f"{k} {r}/{n}" for k, (r, n) in sorted(per.items()))
    print(f"{name:<34} {right}/{total} right ({100 * right / total:.1f} %), {near} near misses accepted\n    {classes}")


def main():
    ours = rewards.score_batch([c["response"] for c in CASES], [c["gold"] for c in CASES])
    with concurrent.futures.ProcessPoolExecutor(2) as pool:
        mv = list(pool.map(math_verify_verdicts, CASES, chunksize=20))
    print(f"{len(CASES)} pairs, {sum(c['debatable'] for c in CASES)} debatable (left out)")
    report("rewards.score_batch", ours)
    report("math-verify, gold as given", [m[0] for m in mv])
    report("math-verify, gold in $...$", [m[1] for m in mv])


if __name__ == "__main__":
    main()
