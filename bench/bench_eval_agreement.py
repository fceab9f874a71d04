"""eval.py's grading against the reference harnesses, verdict for verdict, on programs and answers written by others.

    python bench/bench_eval_agreement.py --lcb_harness /work/scratch_lcb/testing_util.py \\
        --taco /work/scratch_lcb/sampled_problems.jsonl \\
        --gpqa /work/scratch_lcb/gpqa/data --lighteval_python /work/scratch_gpqa/venv/bin/python

LiveCodeBench. The reference is LiveCodeBench's own lcb_runner/evaluation/testing_util.py (run_test), fetched into
a scratch folder and never part of this repository; it runs here inside sandbox/ (one item per program, the
harness imported as a module as lcb_runner imports it, with LiveCodeBench's global time bound (t + 1) x tests + 5
and its sys.set_int_max_str_digits(50000)), since it executes programs in its own process. The problems are real
ones with their real tests and public human solutions: TACO and PrimeIntellect rows (stdin and call-based) as
copied in github.com/Baidicoot/rl-character (code_generation/test_scripts/sampled_problems.jsonl), each written
into code_generation_lite's layout (the first test public, the rest private in LiveCodeBench's zlib/base64/pickle
encoding, func_name in metadata; a call-based test as one JSON argument per line, TACO's [value] unwrapped), then
graded by eval.py exactly as a LiveCodeBench sample (livecodebench_rows -> grade), the program fenced as a response.

GPQA. The answers are real model responses to GPQA-Diamond (github.com/kuk/simple-evals-ru, MIT: data/benches/
gpqa.jsonl and data/results/gpqa/*.jsonl, lighteval's prompt). The reference is lighteval's gpqa:diamond metric
(Metrics.gpqa_instruct_metric: extractive match of the letter), run with --lighteval_python (a venv with lighteval
installed); simple-evals' own extraction (each record's `pred`, its regex "Answer: X") is a second reference.

Prints the tables (N, agreements, disagreements by cause) and writes every disagreement to --out.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import pickle
import re
import subprocess
import sys
import time
import zlib
import base64

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import eval as evaluation  # noqa: E402
import rewards  # noqa: E402

# The reference harness runs as the program of a sandbox item: it reads {harness, input_output, code, timeout} from
# stdin, imports the harness as a module (so its reliability_guard sees a module's __builtins__ dict, as under
# lcb_runner) and prints run_test's results after a marker (the graded program may print to the real stdout too).
MARK = "@@LCB-VERDICT@@"
DRIVER = f"""
import json, sys, types
sys.set_int_max_str_digits(50000)  # lcb_runner/evaluation/compute_code_generation_metrics.py sets this at import
payload = json.loads(sys.stdin.read())
harness = types.ModuleType("testing_util")
exec(compile(payload["harness"], "testing_util.py", "exec"), harness.__dict__)
try:
    results, meta = harness.run_test({{"input_output": json.dumps(payload["input_output"])}}, test=payload["code"],
                                     debug=False, timeout=payload["timeout"])
except BaseException as e:  # run_test's own failures are a verdict too: lcb_runner scores them -5 (all fail)
    results, meta = [-5], {{"error_message": repr(e)}}
plain = [x if isinstance(x, bool) else (bool(x) if type(x).__name__ == "bool_" else int(x)) for x in results or [-4]]
print("\\n{MARK}" + json.dumps({{"results": plain, "meta": {{k: str(v) for k, v in (meta or {{}}).items()}}}}))
"""


def lcb_extract(response):
    """LiveCodeBench's code extraction for chat models (lcb_runner/utils/extraction_utils.py): the lines between
    the last two lines that contain a fence; nothing without two."""
    lines = response.split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    return "\n".join(lines[fences[-2] + 1:fences[-1]]) if len(fences) >= 2 else ""


def as_response(program):
    """A solution as a model would answer it: in a fence, unless it already is (PrimeIntellect's gold solutions)."""
    return program if "```" in program else f"```python\n{program}\n```"


def lcb_encode(tests):
    """code_generation_lite's private-test encoding: base64(zlib(pickle(json text)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode("ascii")


def taco_problems(path, max_solutions, max_tests):
    """Rows of the TACO/PrimeIntellect sample in code_generation_lite's layout, their tests, and their solutions."""
    problems = []
    for r in map(json.loads, open(path)):
        cases = r["test_cases"][:max_tests]
        fn = r["metadata"].get("func_name")
        if cases[0]["type"] == "functional":
            unwrap = lambda o: o[0] if isinstance(o, list) and len(o) == 1 else o  # TACO wraps return values in [ ]
            tests = [{"input": "\n".join(json.dumps(a) for a in c["input"]), "output": json.dumps(unwrap(c["output"])),
                      "testtype": "functional"} for c in cases]
        else:
            tests = [{"input": c["input"], "output": c["output"], "testtype": "stdin"} for c in cases]
        row = {"question_id": r["problem_id"], "question_title": "", "question_content": r["problem"],
               "platform": "codeforces", "contest_id": "", "contest_date": "2025-01-01T00:00:00", "starter_code": "",
               "difficulty": "medium", "public_test_cases": json.dumps(tests[:1]),
               "private_test_cases": lcb_encode(tests[1:]), "metadata": json.dumps({"func_name": fn} if fn else {})}
        io = {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests],
              "fn_name": fn if cases[0]["type"] == "functional" else None}
        problems.append({"row": row, "input_output": io, "kind": cases[0]["type"],
                         "programs": r["solutions"][:max_solutions]})
    return problems


def run_reference(harness, items, per_test, workers):
    """LiveCodeBench's verdict of each (input_output, code): all of run_test's results True."""
    import sandbox

    def one(item):
        io, code = item
        payload = json.dumps({"harness": harness, "input_output": io, "code": code, "timeout": per_test})
        bound = (per_test + 1) * len(io["inputs"]) + 5  # check_correctness's global timeout
        report = sandbox.run(DRIVER, {"mode": "stdin", "inputs": [payload]}, bound + 5, preload=rewards.HARNESS_MODULES)
        out = (report or {}).get("results", [{}])[0].get("out", "") if report else ""
        if MARK not in out:
            return {"results": [-1], "meta": {"error_message": "global timeout or crash (no verdict)"}}
        return json.loads(out.rsplit(MARK, 1)[1])
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, items))


def lcb_stdout_equal(got, expected):
    """LiveCodeBench's stdout rule (grade_stdio), written here for diagnosis: the outputs stripped, split at newlines,
    each line stripped; as many lines; each line equal, or equal as lists of Decimals (no tolerance)."""
    from decimal import Decimal, InvalidOperation

    lines = lambda s: [line.strip() for line in s.strip().split("\n")]
    g, e = lines(got), lines(expected)
    if len(g) != len(e):
        return False
    for a, b in zip(g, e):
        try:
            if a != b and [Decimal(x) for x in a.split()] != [Decimal(x) for x in b.split()]:
                return False
        except InvalidOperation:
            return False
    return True


def lcb_value_equal(got, expected):
    """LiveCodeBench's call rule (grade_call_based): a tuple becomes a list, then Python's ==."""
    return (list(got) if isinstance(got, tuple) else got) == expected


def diagnose(p, code, reference):
    """Why the verdicts differ: the program run here test by test (sandbox/, as rewards.py runs it), its results
    compared by both rules; the first test where the rules part names the cause, else the reference's report."""
    import sandbox

    io, outs = p["input_output"], []
    sink = lambda i, ok, data: outs.append((i, ok, data))
    if p["kind"] == "functional":
        request = {"mode": "call", "fn_name": io["fn_name"],
                   "inputs": [[json.loads(x) for x in i.split("\n")] for i in io["inputs"]]}
    else:
        request = {"mode": "stdin", "inputs": io["inputs"]}
    sandbox.run(rewards.HARNESS_IMPORTS + code, request, 60, sink=sink, preload=rewards.HARNESS_MODULES)
    for i, ok, data in sorted(outs, key=lambda x: x[0]):
        if not ok:
            continue
        if p["kind"] == "functional":
            got, exp = rewards.returned(data), json.loads(io["outputs"][i])
            here, there = rewards.value_matches(got, exp), lcb_value_equal(got, exp)
            if here != there:
                why = ("a bool expected, an int returned (== there, not here)"
                       if isinstance(exp, bool) or isinstance(got, bool)
                       else "an expected [x] met by x here" if isinstance(exp, list) and len(exp) == 1
                       else "floats within 1e-6 here, exact there" if isinstance(exp, float) or isinstance(got, float)
                       else "values")
                return f"value compare: {why}"
        else:
            got = data.decode("utf-8", "replace")
            here, there = rewards.stdout_matches(got, io["outputs"][i]), lcb_stdout_equal(got, io["outputs"][i])
            if here != there:
                return ("stdout compare: a float within 1e-6 accepted here; LiveCodeBench wants equal decimals"
                        if any(c.isdigit() for c in got) else "stdout compare: blank lines / spacing")
    meta = reference["meta"]
    if "error" not in meta and "error_message" not in meta:  # the reference passed: the program fails here as run
        return "passes in LiveCodeBench's in-process harness, fails here as a script (see the code in --out)"
    return ("runs differently in LiveCodeBench's in-process harness: "
            f"{meta.get('error', meta.get('error_message'))[:90]}")


def bench_lcb(args):
    harness = open(args.lcb_harness).read()
    problems = taco_problems(args.taco, args.max_solutions, args.max_tests)
    rows = evaluation.livecodebench_rows([p["row"] for p in problems])  # eval.py's reader: decodes the private tests
    assert [r["id"] for r in rows] == [p["row"]["question_id"] for p in problems]
    for row, p in zip(rows, problems):  # the spec eval.py built equals the tests the reference gets
        assert row["answer"]["inputs"] == ([[json.loads(x) for x in i.split("\n")] for i in p["input_output"]["inputs"]]
                                           if p["kind"] == "functional" else p["input_output"]["inputs"])
    items = [(p, row, code) for p, row in zip(problems, rows) for code in p["programs"]]
    print(f"LiveCodeBench: {len(items)} programs on {len(problems)} problems, "
          f"{sum(len(p['input_output']['inputs']) for p in problems)} tests", file=sys.stderr)
    t = time.perf_counter()
    ours = {}
    for wrap in (True, False):  # eval.py as it runs (stdin programs wrapped as LiveCodeBench does), and without
        eargs = evaluation.EvalArgs(lcb_timeout=args.per_test, code_timeout=args.code_timeout, lcb_wrap_stdin=wrap)
        verdicts = [0.0] * len(items)
        for kind in ("stdin", "functional"):  # one grade call per kind (its time limit is its largest problem's)
            at = [i for i, (p, _, _) in enumerate(items) if p["kind"] == kind]
            got, _ = evaluation.grade([as_response(items[i][2]) for i in at], [items[i][1] for i in at], "code",
                                      "livecodebench", eargs)
            for i, v in zip(at, got):
                verdicts[i] = v
        ours["eval.py" if wrap else "eval.py --lcb_wrap_stdin false"] = verdicts
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    ref = run_reference(harness, [(p["input_output"], lcb_extract(as_response(code))) for p, _, code in items],
                        args.per_test, args.workers)
    t_ref = time.perf_counter() - t
    order = [i for kind in ("stdin", "functional") for i, (p, _, _) in enumerate(items) if p["kind"] == kind]
    ours_v = [0.0] * len(items)
    for i, v in zip(order, ours):
        ours_v[i] = v
    print(f"eval.py {t_ours:.0f} s (both variants), reference {t_ref:.0f} s", file=sys.stderr)
    table, disagreements = collections.Counter(), []
    for i, ((p, row, code), theirs) in enumerate(zip(items, ref)):
        r_pass = bool(theirs["results"]) and all(x is True for x in theirs["results"])
        for variant, verdicts in ours.items():
            mine = verdicts[i] == 1.0
            table[(variant, p["kind"], mine, r_pass)] += 1
            if mine != r_pass:
                disagreements.append({"variant": variant, "problem": row["id"], "kind": p["kind"], "ours": mine,
                                      "reference": r_pass, "cause": diagnose(p, lcb_extract(as_response(code)), theirs),
                                      "reference_report": theirs, "code": code})
    print("\n### LiveCodeBench: eval.py vs lcb_runner/evaluation/testing_util.py\n")
    print("| grader | tests | N | both pass | both fail | agree | eval.py pass, reference fail "
          "| eval.py fail, reference pass |")
    print("|---|---|---|---|---|---|---|---|")
    for variant in ours:
        for kind in ("stdin", "functional", None):
            sel = lambda k: k[0] == variant and (kind is None or k[1] == kind)
            count = lambda mine, theirs: sum(v for k, v in table.items() if sel(k) and k[2] == mine and k[3] == theirs)
            n = sum(v for k, v in table.items() if sel(k))
            agree = count(True, True) + count(False, False)
            print(f"| {variant} | {kind or '**all**'} | {n} | {count(True, True)} | {count(False, False)} | "
                  f"{agree} ({100 * agree / max(n, 1):.1f} %) | {count(True, False)} | {count(False, True)} |")
    causes = collections.Counter((d["variant"], d["kind"], d["ours"], d["cause"]) for d in disagreements)
    if causes:
        print("\n| grader | tests | eval.py | cause (diagnosed per case; each in --out) | N |\n|---|---|---|---|---|")
        for (variant, kind, mine, cause), n in sorted(causes.items()):
            print(f"| {variant} | {kind} | {'pass' if mine else 'fail'} | {cause} | {n} |")
    return disagreements


LIGHTEVAL = r"""
import json, sys, logging
logging.disable(logging.WARNING)
from lighteval.metrics.metrics import Metrics
from lighteval.tasks.requests import Doc
from lighteval.models.model_output import ModelResponse
metric = Metrics.gpqa_instruct_metric.value
for line in sys.stdin:
    item = json.loads(line)
    doc = Doc(query="", choices=["A", "B", "C", "D"], gold_index="ABCD".index(item["gold"]), task_name="gpqa:diamond")
    score = metric.compute_sample(doc=doc, model_response=ModelResponse(text=[item["response"]]))
    preds = (doc.specific or {}).get("extracted_predictions", [])
    print(json.dumps({"score": list(score.values())[0], "pred": preds[0] if preds else None}), flush=True)
"""


def bench_gpqa(args):
    gold = {r["id"]: r["target"] for r in map(json.loads, open(os.path.join(args.gpqa, "benches", "gpqa.jsonl")))}
    folder = os.path.join(args.gpqa, "results", "gpqa")
    records = []
    for name in sorted(os.listdir(folder)):
        for r in map(json.loads, open(os.path.join(folder, name))):
            if isinstance(r.get("answer"), str) and r["id"] in gold:
                records.append({"model": name[:-6], "id": r["id"], "response": r["answer"], "gold": gold[r["id"]],
                                "simple_evals": r.get("pred")})
    t = time.perf_counter()
    feed = "".join(json.dumps({"response": r["response"], "gold": r["gold"]}) + "\n" for r in records)
    p = subprocess.run([args.lighteval_python, "-c", LIGHTEVAL], input=feed, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"lighteval failed:\n{p.stderr[-3000:]}")
    theirs = [json.loads(line) for line in p.stdout.splitlines()]
    print(f"GPQA: {len(records)} responses of {len({r['model'] for r in records})} models; "
          f"lighteval {time.perf_counter() - t:.0f} s", file=sys.stderr)
    table, disagreements = collections.Counter(), []
    for r, ref in zip(records, theirs):
        letter = evaluation.choice_letter(r["response"])
        mine, their = letter == r["gold"], ref["score"] == 1.0
        simple = r["simple_evals"] == r["gold"]
        table["N"] += 1
        table["agree"] += mine == their
        table["agree_simple"] += mine == simple
        table["same_letter"] += letter == ref["pred"]
        table["ours_right"] += mine
        table["ref_right"] += their
        table["simple_right"] += simple
        if mine != their:
            tail = r["response"][-160:].replace("\n", "\\n")
            disagreements.append({"model": r["model"], "id": r["id"], "gold": r["gold"], "ours": letter,
                                  "lighteval": ref["pred"], "simple_evals": r["simple_evals"], "tail": tail})
    n = table["N"]
    print("\n### GPQA-Diamond: eval.py's letter vs lighteval's gpqa:diamond metric (and simple-evals' regex)\n")
    print("| N | verdicts agree with lighteval | disagree | same letter as lighteval | agree with simple-evals "
          "| accuracy: eval.py / lighteval / simple-evals |")
    print("|---|---|---|---|---|---|")
    print(f"| {n} | {table['agree']} ({100 * table['agree'] / n:.1f} %) | {n - table['agree']} | "
          f"{table['same_letter']} | {table['agree_simple']} ({100 * table['agree_simple'] / n:.1f} %) | "
          f"{100 * table['ours_right'] / n:.1f} / {100 * table['ref_right'] / n:.1f} / "
          f"{100 * table['simple_right'] / n:.1f} % |")
    for d in disagreements:
        last = [line for line in d["tail"].split("\\n") if line.strip()][-1:] or [""]
        if d["ours"] is None:
            d["how"] = ("no single letter stated (cut off, 'None of the above', 'ABD'): eval.py none, "
                        "lighteval a capital from the text")
        elif d["ours"] in re.findall(r"(?<![A-Za-z0-9/])\(?([ABCD])\)?(?![A-Za-z0-9])", last[0]):
            d["how"] = ("the last line's letter ('Answer: $C$', '\\text{C}', 'Final Answer: B) ...'): "
                        "eval.py reads it, lighteval another")
        else:
            d["how"] = "no answer line: each takes a letter from the text"
    kinds = collections.Counter((d["how"], "eval.py" if d["ours"] == d["gold"] else "lighteval") for d in disagreements)
    if kinds:
        print("\n| disagreement (classified from the response's last line; each in --out) | the gold letter is | N |\n"
              "|---|---|---|")
        for (how, who), k in sorted(kinds.items()):
            print(f"| {how} | {who}'s | {k} |")
    return disagreements


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lcb_harness", help="LiveCodeBench's lcb_runner/evaluation/testing_util.py (a scratch copy)")
    ap.add_argument("--taco", help="the TACO/PrimeIntellect sample (sampled_problems.jsonl)")
    ap.add_argument("--max_solutions", type=int, default=12, help="human solutions graded per problem")
    ap.add_argument("--max_tests", type=int, default=40,
                    help="tests kept per problem (the same ones for both harnesses)")
    ap.add_argument("--per_test", type=int, default=6, help="seconds per test, LiveCodeBench's default")
    ap.add_argument("--code_timeout", type=float, default=60.0, help="eval.py's --code_timeout")
    ap.add_argument("--gpqa", help="simple-evals-ru's data folder (benches/gpqa.jsonl, results/gpqa/)")
    ap.add_argument("--lighteval_python", help="a python with lighteval installed")
    ap.add_argument("--workers", type=int, default=2, help="reference items run at once")
    ap.add_argument("--out", default="runs/bench_eval_agreement.json", help="every disagreement, with its evidence")
    args = ap.parse_args()
    report = {}
    if args.lcb_harness and args.taco:
        report["livecodebench"] = bench_lcb(args)
    if args.gpqa and args.lighteval_python:
        report["gpqa"] = bench_gpqa(args)
    if not report:
        ap.error("give --lcb_harness and --taco, and/or --gpqa and --lighteval_python")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    json.dump(report, open(args.out, "w"), indent=1)
    print(f"\ndisagreements: {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
