"""rewards.py's math verifier against plain math-verify on OTHER graders' own equivalence tests.

    python bench/outside_suites.py --repos CLONES --sdists SDISTS --out SUITES   # extract the cases (once)
    python bench/bench_math_suites.py --suites SUITES                            # one row per suite

The suites are the (gold, prediction, label) cases that other projects assert for their own graders
(bench/outside_suites.py says which files, at which commits). Each prediction is graded as a model
would write it: inside \\boxed{} after the reasoning (a case whose prediction is prose, a test of
extraction rather than of equivalence, is counted apart). The baseline is the call the issue names,
math_verify.verify(math_verify.parse(gold), math_verify.parse(response)), with math-verify's defaults.
Printed per suite: the cases graded, how many verdicts agree with the suite's label for each grader,
and the wrong answers each accepts that the other rejects.
"""
import argparse
import glob
import json
import multiprocessing as mp
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import rewards  # noqa: E402

_DELIMS = re.compile(r"^\s*(?:\$\$?|\\\(|\\\[)(.*?)(?:\$\$?|\\\)|\\\])\s*\.?\s*$", re.S)


def response_of(case):
    """The case's prediction as a boxed final answer; None for a prose prediction (an extraction test)."""
    pred = case["pred"]
    if "\\boxed" in pred or "\\fbox" in pred:
        return pred
    tag = re.search(r"<answer>(.*?)</answer>", pred, re.S)  # an answer tag (the first, as torchforge reads them)
    if tag:
        return f"\\boxed{{{tag.group(1).strip()}}}" if tag.group(1).strip() else None
    if case.get("pred_is_response") and not re.search(r"Answer:", pred):
        m = _DELIMS.match(pred)
        bare = m.group(1) if m else pred
        words = re.findall(r"(?<!\\)\b[A-Za-z]{3,}\b",
                           re.sub(r"\\(?:text|mathrm|textbf|mbox)\{[^{}]*\}|\\[A-Za-z]+", " ", bare))
        if "$" in bare or len(words) >= 2:
            return None
        pred = bare
    elif case.get("pred_is_response"):
        return None
    return f"\\boxed{{{pred}}}"


def plain_math_verify(pair):
    """The baseline, in a worker process (math-verify's timeouts use signals)."""
    from math_verify import parse, verify

    gold, response = pair
    try:
        return bool(verify(parse(gold), parse(response)))
    except Exception:
        return False


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--suites", required=True, help="folder of <suite>.jsonl files from bench/outside_suites.py")
    p.add_argument("--show", default="", help="print the disagreements of this suite")
    args = p.parse_args(argv)
    files = sorted(glob.glob(os.path.join(args.suites, "*.jsonl")))
    if not files:
        sys.exit(f"bench_math_suites.py: no .jsonl in {args.suites}")
    print("| suite | cases | prose (skipped) | rewards.py agrees | math-verify agrees "
          "| wrong accepted, rewards.py only | wrong accepted, math-verify only |\n|---|---|---|---|---|---|---|")
    totals = [0] * 6
    with mp.get_context("fork").Pool(2) as pool:
        for path in files:
            name = os.path.basename(path)[:-6]
            cases = [json.loads(line) for line in open(path)]
            graded = [(c, r) for c in cases for r in [response_of(c)] if r is not None]
            ours = rewards.score_batch([r for _, r in graded], [c["gold"] for c, _ in graded])
            base = pool.map(plain_math_verify, [(c["gold"], r) for c, r in graded])
            agree_ours = sum((o == 1.0) == c["label"] for (c, _), o in zip(graded, ours))
            agree_base = sum(b == c["label"] for (c, _), b in zip(graded, base))
            fp_ours = sum(o == 1.0 and not b and not c["label"] for (c, _), o, b in zip(graded, ours, base))
            fp_base = sum(b and o != 1.0 and not c["label"] for (c, _), o, b in zip(graded, ours, base))
            row = [len(graded), len(cases) - len(graded), agree_ours, agree_base, fp_ours, fp_base]
            totals = [t + x for t, x in zip(totals, row)]
            print(f"| {name} | {row[0]} | {row[1]} | {row[2]} ({100 * row[2] / max(row[0], 1):.1f} %) | "
                  f"{row[3]} ({100 * row[3] / max(row[0], 1):.1f} %) | {row[4]} | {row[5]} |")
            if name == args.show:
                for (c, r), o, b in zip(graded, ours, base):
                    if (o == 1.0) != c["label"] or b != c["label"]:
                        print(f"   label {c['label']!s:5} ours {o == 1.0!s:5} mv {b!s:5} "
                              f"gold {c['gold']!r} response {r!r}")
    print(f"| all | {totals[0]} | {totals[1]} | {totals[2]} ({100 * totals[2] / totals[0]:.1f} %) | "
          f"{totals[3]} ({100 * totals[3] / totals[0]:.1f} %) | {totals[4]} | {totals[5]} |")


if __name__ == "__main__":
    main()
