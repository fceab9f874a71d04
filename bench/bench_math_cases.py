"""Benchmark: plain math-verify against the project's math case table (cases/math_cases.py).

    python bench/bench_math_cases.py

The table's expected verdicts are asserted for rewards.py by test_rewards.py (test_the_math_case_table); this
script adds the baseline the README quotes: `math_verify.verify(parse(gold), parse(response))`, with the
gold as given and wrapped in `$...$` (math-verify's parser reads a bare gold only in part), per class, and
the near misses it accepts (a wrong answer scored 1). Debatable pairs are left out. The verifier was mended
against these pairs: they show the listed classes are handled, not how it generalises.
"""
import collections
import concurrent.futures
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cases"))
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
    classes = "  ".join(f"{k[:24]} {r}/{n}" for k, (r, n) in sorted(per.items()))
    print(f"{name:<34} {right}/{total} right ({100 * right / total:.1f} %), {near} near misses accepted\n    {classes}")


def main():
    with concurrent.futures.ProcessPoolExecutor(2) as pool:
        mv = list(pool.map(math_verify_verdicts, CASES, chunksize=20))
    print(f"{len(CASES)} pairs, {sum(c['debatable'] for c in CASES)} debatable (left out); "
          "rewards.py agrees with every other one (test_rewards.py::test_the_math_case_table)")
    report("math-verify, gold as given", [m[0] for m in mv])
    report("math-verify, gold in $...$", [m[1] for m in mv])


if __name__ == "__main__":
    main()
