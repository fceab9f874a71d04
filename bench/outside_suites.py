#!/usr/bin/env python3
"""Other graders' own equivalence tests as labelled cases, for bench/bench_math_suites.py.

    python bench/outside_suites.py --repos CLONES --sdists SDISTS --out SUITES

Reads, never runs, the test files of eleven projects (their graders: Math-Verify, lighteval, hendrycks'
MATH, NeMo-Skills, lm-eval's minerva_math, rLLM, MindSpeed-RL, torchforge, NeMo-RL, verifiers, TRL) and
writes SUITES/<suite>.jsonl, one {"gold", "pred", "label", "source", ...} per asserted case. Every file is
parsed with `ast`; only literal expressions are evaluated. The cases are other projects' data: they stay
out of this repository. Inputs, at the commits named in each suite's function below:
  CLONES/<owner>+<repo>   git clones (or bare mirrors, with the git directory in <owner>+<repo>/repo)
  SDISTS/*.tar.gz          `pip download --no-deps --no-binary :all: math-verify==0.9.0 lm-eval==0.4.13`
"""
import ast
import json
import math
import os
import subprocess
import sys
import tarfile
from collections import Counter, OrderedDict

OUT, MIRROR, SDISTS = "suites", "/work/.mirror", "sdists"  # set by --out, --repos, --sdists


# ----------------------------------------------------------------------------- sources
class Src:
    """A test file read from a git snapshot or an sdist; knows how to cite a line."""

    def __init__(self, text, cite_prefix):
        self.text = text
        self.cite_prefix = cite_prefix
        self.tree = ast.parse(text)

    def cite(self, line):
        return f"{self.cite_prefix}:{line}"


def git_src(repo, path, commit=None):
    base = os.path.join(MIRROR, repo.replace("/", "+"))
    gd = next((d for d in (os.path.join(base, "repo"), os.path.join(base, ".git")) if os.path.isdir(d)), base)
    rev = commit or subprocess.check_output(["git", "--git-dir", gd, "rev-parse", "HEAD"], text=True).strip()
    text = subprocess.check_output(["git", "--git-dir", gd, "show", f"{rev}:{path}"], text=True)
    return Src(text, f"{repo}@{rev}:{path}")


def sdist_src(pkg, ver, member):
    fname = f"{pkg.replace('-', '_')}-{ver}.tar.gz"
    with tarfile.open(os.path.join(SDISTS, fname)) as tf:
        text = tf.extractfile(f"{pkg.replace('-', '_')}-{ver}/{member}").read().decode("utf-8")
    return Src(text, f"pypi:{pkg}=={ver}:{member}")


# ----------------------------------------------------------------------------- literal evaluation
class NotLiteral(Exception):
    pass


def lit(node, env=None):
    """Evaluate a literal-ish AST node. `env` maps local names to already-evaluated values."""
    env = env or {}
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [lit(e, env) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {lit(k, env): lit(v, env) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = lit(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BinOp):
        a, b = lit(node.left, env), lit(node.right, env)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b, ast.Div: lambda: a / b}
        if type(node.op) in ops:
            return ops[type(node.op)]()
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise NotLiteral(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"  # e.g. Language.FRENCH -> "Language.FRENCH"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            isinstance(node.func.value, ast.Name) and node.func.value.id == "math":
        return getattr(math, node.func.attr)(*[lit(a, env) for a in node.args])
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(v.value)
            else:
                spec = "".join(lit(s, env) for s in v.format_spec.values) if v.format_spec else ""
                parts.append(format(lit(v.value, env), spec))
        return "".join(parts)
    raise NotLiteral(ast.dump(node)[:80])


def call_name(node):
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            return f.id
        if isinstance(f, ast.Attribute):
            return f.attr
    return None


def functions(tree):
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield n


def parametrize_rows(fn):
    """Yield (argnames, values-or-None, lineno) for each row of @pytest.mark.parametrize on fn."""
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and call_name(dec) == "parametrize":
            names = lit(dec.args[0])
            names = [s.strip() for s in names.split(",")] if isinstance(names, str) else names
            for elt in dec.args[1].elts:
                if isinstance(elt, ast.Call) and call_name(elt) == "param":
                    vals = elt.args
                elif len(names) == 1:
                    vals = [elt]
                else:
                    vals = elt.elts
                if len(vals) != len(names):
                    yield names, None, elt.lineno  # malformed row (pytest would error on it)
                    continue
                yield names, [lit(v) for v in vals], elt.lineno


def n_param_rows(fn):
    return sum(len(d.args[1].elts) for d in fn.decorator_list
               if isinstance(d, ast.Call) and call_name(d) == "parametrize")


def str_env(fn, upto=None):
    """Names assigned literal values in fn's body (in order, up to statement index `upto`)."""
    env = {}
    for st in fn.body[:upto]:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            try:
                env[st.targets[0].id] = lit(st.value, env)
            except NotLiteral:
                pass
    return env


# ----------------------------------------------------------------------------- suite bookkeeping
class Suite:
    def __init__(self, name):
        self.name = name
        self.cases = []
        self.skipped = Counter()

    def add(self, src, line, gold, pred, label, test, **extra):
        rec = OrderedDict(gold=gold, pred=pred, label=bool(label), source=src.cite(line))
        for k, v in extra.items():
            if v not in (None, False, {}):
                rec[k] = v
        rec["test"] = test
        self.cases.append(rec)

    def skip(self, reason, n=1):
        self.skipped[reason] += n

    def write(self):
        with open(os.path.join(OUT, f"{self.name}.jsonl"), "w") as f:
            for c in self.cases:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
        t = sum(c["label"] for c in self.cases)
        return {"cases": len(self.cases), "true": t, "false": len(self.cases) - t,
                "sources": sorted({c["source"].rsplit(":", 1)[0] for c in self.cases}),
                "skipped": dict(self.skipped)}


def count_asserts(fn):
    return sum(isinstance(n, ast.Assert) or (isinstance(n, ast.Call) and (call_name(n) or "").startswith("assert"))
               for n in ast.walk(fn))


# ----------------------------------------------------------------------------- 1. Math-Verify / lighteval
def mv_options(fn, params, helper_positional, defaults):
    """Options of the compare_strings(...) call in fn, resolving names against the row params."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and call_name(n) == "compare_strings":
            opts = dict(defaults)
            for name, a in zip(helper_positional, n.args):
                if name in ("gold", "pred"):
                    continue
                opts[name] = lit(a, params)
            for kw in n.keywords:
                opts[kw.arg] = lit(kw.value, params)
            return opts
    return None


def extract_compare_strings_file(suite, src, helper_positional, defaults, skip_fn=None):
    for fn in functions(src.tree):
        rows = list(parametrize_rows(fn))
        if rows:
            if skip_fn and skip_fn(fn.name):
                suite.skip(f"{skip_fn(fn.name)} ({fn.name})", len(rows))
                continue
            for names, vals, line in rows:
                if vals is None:
                    suite.skip(f"malformed parametrize row, wrong arity ({fn.name})")
                    continue
                p = dict(zip(names, vals))
                exp = p.get("expected", p.get("result"))
                opts = mv_options(fn, p, helper_positional, defaults)
                if opts is None:  # test_yujianll: verify(parse(gold), parse(pred)) with parse() defaults
                    opts = {"grader": "verify(parse(gold), parse(pred))", "parse": "defaults"}
                suite.add(src, line, p["gold"], p["pred"], exp, fn.name,
                          pred_is_response=True, gold_is_response=True, options=opts)
            continue
        # non-parametrized: literal `assert compare_strings(...) == N`; everything else is skipped
        got = 0
        for n in ast.walk(fn):
            if isinstance(n, ast.Assert) and isinstance(n.test, ast.Compare) and \
                    call_name(n.test.left) == "compare_strings":
                c = n.test.left
                opts = dict(defaults)
                args = [lit(a) for a in c.args]
                for name, v in zip(helper_positional[2:], args[2:]):
                    opts[name] = v
                for kw in c.keywords:
                    opts[kw.arg] = lit(kw.value)
                suite.add(src, n.lineno, args[0], args[1], lit(n.test.comparators[0]), fn.name,
                          pred_is_response=True, gold_is_response=True, options=opts)
                got += 1
        rest = count_asserts(fn) - got
        if fn.name.startswith("test") and rest:
            suite.skip(f"not a (gold, pred) string comparison: {fn.name}", rest)


def suite_math_verify():
    s = Suite("math_verify")
    defaults = {"match_types": ["latex", "expr"], "precision": 6, "strict": True, "allow_set_relation_comp": False}
    pos = ["gold", "pred", "match_types", "precision", "strict", "allow_set_relation_comp"]
    for f in ["test_all.py", "test_boxed.py", "test_numina_cases.py", "test_open_thoughts.py",
              "test_strict.py", "test_yujianll.py"]:
        extract_compare_strings_file(s, sdist_src("math-verify", "0.9.0", f"tests/{f}"), pos, defaults)
    for f in ["test_configs.py", "test_string_extraction.py", "test_timeout.py", "test_raise_on_error.py",
              "test_gamma_func.py"]:
        src = sdist_src("math-verify", "0.9.0", f"tests/{f}")
        n = 0
        for fn in functions(src.tree):
            if fn.name.startswith("test"):
                n += n_param_rows(fn) or count_asserts(fn)
        s.skip(f"parser/config/timeout test, no (gold, pred) pair: {f}", n)
    return s


def suite_lighteval():
    s = Suite("lighteval")
    defaults = {"language": "Language.ENGLISH", "match_types": ["latex", "expr"], "precision": 6}
    pos = ["gold", "pred", "language", "match_types", "precision"]
    src = git_src("huggingface/lighteval", "tests/unit/metrics/test_extractive_match.py")
    skip = lambda name: "multiple-choice letter extraction, not math equivalence" if "abc" in name else None
    extract_compare_strings_file(s, src, pos, defaults, skip_fn=skip)
    return s


# ----------------------------------------------------------------------------- 2. hendrycks/math
def suite_hendrycks():
    s = Suite("hendrycks_math")
    src = git_src("hendrycks/math", "modeling/math_equivalence_test.py")
    for fn in functions(src.tree):
        env = str_env(fn)
        for n in ast.walk(fn):
            if isinstance(n, ast.Call) and call_name(n) in ("assertTrue", "assertFalse"):
                inner = n.args[0]
                assert call_name(inner) == "is_equiv"
                pred, gold = (lit(a, env) for a in inner.args)  # is_equiv(model_output, answer)
                s.add(src, n.lineno, gold, pred, call_name(n) == "assertTrue", fn.name)
    return s


# ----------------------------------------------------------------------------- 3. NeMo-Skills
def suite_nemo_skills():
    s = Suite("nemo_skills")
    src = git_src("NVIDIA/NeMo-Skills", "tests/test_math_equal.py")
    for fn in functions(src.tree):
        label = {"test_correct_examples": True, "test_incorrect_examples": False}.get(fn.name)
        for names, vals, line in parametrize_rows(fn):
            a, b = vals[0]
            if a is None or b is None:
                s.skip("pair with None (tests the grader's None handling), both directions", 2)
                continue
            note = None
            if not (isinstance(a, str) and isinstance(b, str)):
                note = "non-string value in the test; str() applied, as math_equal itself does"
            # math_equal(gt_answer, predicted_answer); the test asserts both argument orders
            s.add(src, line, str(a), str(b), label, fn.name, note=note)
            s.add(src, line, str(b), str(a), label, fn.name + "[swapped]", note=note)
    return s


# ----------------------------------------------------------------------------- 4. lm-eval minerva_math
def suite_lm_eval_minerva():
    s = Suite("lm_eval_minerva_math")
    src = sdist_src("lm-eval", "0.4.13", "tests/test_minerva_math.py")
    norm_opt = {"normalize_final_answer_on_both": True}
    for fn in functions(src.tree):
        rows = list(parametrize_rows(fn))
        if rows:
            for names, vals, line in rows:
                p = dict(zip(names, vals))
                if fn.name in ("test_unparseable_answer_matches_itself", "test_parseable_answer_still_matches_itself"):
                    s.add(src, line, p["answer"], p["answer"], True, fn.name)
                elif fn.name == "test_different_answers_are_not_equivalent":
                    s.add(src, line, p["x2"], p["x1"], False, fn.name)  # is_equiv(pred, gold)
                elif fn.name == "test_is_equiv_indexed_roots_through_pipeline":
                    s.add(src, line, p["gold"], p["pred"], True, fn.name, options=norm_opt)
                else:
                    s.skip(f"normalize_final_answer output test, not equivalence ({fn.name})")
            continue
        got = 0
        for n in ast.walk(fn):
            if not isinstance(n, ast.Assert):
                continue
            t, label = n.test, True
            if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not):
                t, label = t.operand, False
            if call_name(t) == "is_equiv":
                args, opts = [], None
                for a in t.args:
                    if call_name(a) == "normalize":
                        args.append(lit(a.args[0]))
                        opts = norm_opt
                    else:
                        args.append(lit(a))
                s.add(src, n.lineno, args[1], args[0], label, fn.name, options=opts,
                      note="empty strings" if args == ["", ""] else None)
                got += 1
        rest = count_asserts(fn) - got
        if fn.name.startswith("test") and rest:
            s.skip(f"normalize_final_answer output test, not equivalence ({fn.name})", rest)
    return s


# ----------------------------------------------------------------------------- 5. rllm
def suite_rllm():
    s = Suite("rllm")
    src = git_src("rllm-org/rllm", "tests/rewards/test_math_reward.py")
    for fn in functions(src.tree):
        if any(call_name(d) == "skip" or (isinstance(d, ast.Attribute) and d.attr == "skip")
               for d in fn.decorator_list):
            s.skip(f"test marked skip ({fn.name})")
            continue
        env = {}
        for st in fn.body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
                try:
                    env[st.targets[0].id] = lit(st.value, {"RewardType": None})
                except NotLiteral:
                    # task_info dicts hold RewardType.MATH etc. (attributes -> strings via lit)
                    pass
            if not isinstance(st, ast.Assert):
                continue
            t = st.test
            if isinstance(t, ast.Compare) and isinstance(t.left, ast.Attribute) and t.left.attr == "is_correct":
                label = lit(t.comparators[0])
            elif isinstance(t, ast.UnaryOp) and isinstance(t.operand, ast.Attribute) and t.operand.attr == "is_correct":
                label = False
            else:
                continue
            resp, info = env.get("model_response"), env.get("task_info", {})
            gt = info.get("ground_truth")
            if info.get("problem_type") != "RewardType.MATH":
                s.skip(f"non-math problem type ({fn.name})")
            elif not isinstance(gt, str):
                s.skip(f"ground_truth is a list or None, not one gold string ({fn.name})")
            elif "</think>" not in resp or "\\boxed" not in resp:
                s.skip(f"label set by response format (no </think> or no \\boxed), not equivalence ({fn.name})")
            else:
                s.add(src, st.lineno, gt, resp, label, fn.name, pred_is_response=True)
    return s


# ----------------------------------------------------------------------------- 6. MindSpeed-RL
def suite_mindspeed():
    s = Suite("mindspeed_rl")
    # (a) port of the Qwen2.5-Math grader: math_equal(prediction, reference)
    src = git_src("Ascend/MindSpeed-RL", "tests/ut/utils/test_grader.py")
    for fn in functions(src.tree):
        env, calls = {}, {}
        for st in fn.body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
                if call_name(st.value) == "math_equal":
                    calls[st.targets[0].id] = st.value
                else:
                    env[st.targets[0].id] = lit(st.value, env)
            if isinstance(st, ast.Assert) and isinstance(st.test, ast.Compare):
                left = st.test.left
                c = calls.get(left.id) if isinstance(left, ast.Name) else left
                if call_name(c) == "math_equal":
                    pred, gold = (lit(a, env) for a in c.args[:2])
                    s.add(src, st.lineno, gold, pred, lit(st.test.comparators[0]), fn.name,
                          options={"grader": "math_equal (Qwen2.5-Math port)", "timeout": True},
                          note="true only under the grader's numeric tolerance (math.isclose rel_tol=1e-4)"
                          if (pred, gold) == ("1", "1.0001") else None)
    # (b) port of verl's math_dapo reward: responses, strict-box or minerva ("Answer:") extraction
    src = git_src("Ascend/MindSpeed-RL", "tests/ut/models/test_math_dapo.py")
    graders = {"is_correct_minerva", "is_correct_strict_box", "verify", "compute_score"}
    for fn in functions(src.tree):
        env, call, n_eq = {}, None, 0
        for st in fn.body:
            if isinstance(st, ast.Assign):
                if call_name(st.value) in graders:
                    call = st.value
                elif isinstance(st.targets[0], ast.Name):
                    try:
                        env[st.targets[0].id] = lit(st.value, env)
                    except NotLiteral:
                        pass
            if isinstance(st, ast.Assert) and call is not None:
                t = st.test
                # only the assert on the first returned value (score / result / correct) carries the verdict
                tgt = [a for a in ast.walk(fn) if isinstance(a, ast.Assign) and a.value is call][0].targets[0]
                first_name = tgt.elts[0].id if isinstance(tgt, ast.Tuple) else tgt.id
                if not (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == first_name):
                    continue
                v = lit(t.comparators[0])
                label = v is True or v == 1
                args = [lit(a, env) for a in call.args]
                kw = {k.arg: lit(k.value, env) for k in call.keywords}
                resp, gold = args[0], args[1]
                pos_opts = args[2:]
                if pos_opts:
                    kw["pause_tokens_index"] = pos_opts[0]
                name = call_name(call)
                minerva = name == "is_correct_minerva" or (name in ("verify", "compute_score")
                                                           and not kw.get("strict_box_verify"))
                if minerva and "answer_pattern" not in kw and "Answer:" not in resp:
                    s.skip(f"minerva path finds no 'Answer:' line, label reflects extraction failure ({fn.name})")
                    continue
                if not minerva and "\\boxed" not in resp:
                    s.skip(f"no \\boxed in response, extraction-only ({fn.name})")
                    continue
                s.add(src, st.lineno, gold, resp, label, fn.name, pred_is_response=True,
                      options=dict(grader=f"math_dapo.{name}", **kw))
                n_eq += 1
        if fn.name.startswith("test") and call is None:
            s.skip(f"helper test (boxed extraction / normalisation / raises), no verdict: {fn.name}")
    # (c) rule_verifier accuracy rewards on one full response
    src = git_src("Ascend/MindSpeed-RL", "tests/ut/models/test_verifier.py")
    for fn in functions(src.tree):
        env = str_env(fn)
        for n in ast.walk(fn):
            if isinstance(n, ast.Assert) and isinstance(n.test, ast.Compare) and \
                    call_name(n.test.left) in ("accuracy_reward", "base_model_accuracy_reward"):
                c = n.test.left
                text, label = (lit(a, env) for a in c.args)
                s.add(src, n.lineno, label[0], text[0], lit(n.test.comparators[0]) == [1.0], fn.name,
                      pred_is_response=True, options={"grader": f"rule_verifier.{call_name(c)}"})
            elif isinstance(n, ast.Assert):
                s.skip("format/reasoning-step reward assert, not equivalence (test_verifier)")
    return s


# ----------------------------------------------------------------------------- 7. torchforge
def suite_torchforge():
    s = Suite("torchforge")
    src = git_src("meta-pytorch/torchforge", "tests/unit_tests/rl/test_math_reward.py")
    opts_by_obj = {"reward": {"tolerance": 1e-6, "partial_credit": 0.1},
                   "custom_reward": {"tolerance": 1e-3, "partial_credit": 0.2}}
    for fn in functions(src.tree):
        env = {}
        for st in fn.body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
                try:
                    env[st.targets[0].id] = lit(st.value, env)
                except NotLiteral:
                    pass
            for n in ast.walk(st):
                if not (isinstance(n, ast.Call) and call_name(n) == "assertEqual"):
                    continue
                c = n.args[0]
                obj = c.func.attr if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) else None
                if obj not in opts_by_obj:
                    continue
                _, resp, target = (lit(a, env) for a in c.args)
                value = lit(n.args[1])
                if "<answer>" not in resp:
                    s.skip(f"no <answer> tag, reward is partial credit/format, not equivalence ({fn.name})")
                    continue
                note = None
                if value not in (0.0, 1.0):
                    note = f"reward {value} = partial credit (answer wrong, target number appears elsewhere)"
                if resp.count("<answer>") > 1:
                    note = "several <answer> tags; grader uses the first"
                s.add(src, n.lineno, target, resp, value == 1.0, fn.name, pred_is_response=True,
                      options=opts_by_obj[obj], note=note)
        if fn.name.startswith("test_to_float") or fn.name.startswith("test_init"):
            s.skip(f"_to_float/__init__ unit test, no pair ({fn.name})", count_asserts(fn))
    return s


# ----------------------------------------------------------------------------- 8. NeMo-RL
def suite_nemo_rl():
    s = Suite("nemo_rl")
    src = git_src("NVIDIA-NeMo/RL", "tests/unit/environments/test_math_environment.py")
    # labels from the test that consumes each fixture (see REPORT.md)
    fixture_labels = {
        "basic_test_data": ("test_math_env_step_basic", [True, True, True], None),
        "mixed_test_data": ("test_math_env_step_mixed", [True, False, True], None),
        "multiple_assistant_test_data": ("test_math_env_step_multiple_assistant_messages", [True, True],
                                         "several assistant messages; the env grades the last one"),
        "multi_reward_test_data": ("test_multi_reward_env_step_basic", [True, False, True],
                                   "math_multi_reward env, reward/correctness component"),
    }
    inline_labels = {
        "test_math_env_various_batches": {0: True},
        "test_math_exception_handling": {0: False},
        "test_math_timeout_handling": {0: False},
        "test_math_env_extracted_answers_stay_aligned_with_rewards": {0: True, 2: False},
    }

    def last_assistant(conv):
        return [m["content"] for m in conv if m["role"] == "assistant"][-1]

    for fn in functions(src.tree):
        if fn.name in fixture_labels:
            ret = [st for st in fn.body if isinstance(st, ast.Return)][0]
            data = lit(ret.value)
            test, labels, note = fixture_labels[fn.name]
            for conv, meta, lab, node in zip(data["message_log_batch"], data["metadata"], labels,
                                             ret.value.values[0].elts):
                s.add(src, node.lineno, meta["ground_truth"], last_assistant(conv), lab, f"{test}[{fn.name}]",
                      pred_is_response=True, note=note)
        elif fn.name == "multichoice_test_data":
            s.skip("multiple-choice letter verifier, not math equivalence (3 rows x 2 params)", 6)
        elif fn.name in inline_labels:
            env = {}
            for st in fn.body:
                if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
                    try:
                        env[st.targets[0].id] = lit(st.value, env)
                    except NotLiteral:
                        pass
            contents, golds = [], []
            for n in ast.walk(fn):
                if isinstance(n, ast.Dict):
                    keys = [k.value for k in n.keys if isinstance(k, ast.Constant)]
                    if keys == ["role", "content"] and lit(n.values[0]) == "assistant":
                        try:
                            contents.append((lit(n.values[1], env), n.lineno))
                        except NotLiteral:  # content taken from a loop variable over `responses`
                            resp_node = [a for a in fn.body if isinstance(a, ast.Assign)
                                         and getattr(a.targets[0], "id", None) == "responses"][0].value
                            contents.extend((lit(e), e.lineno) for e in resp_node.elts)
                    elif keys == ["ground_truth"]:
                        golds.append(lit(n.values[0], env))
            for i, lab in inline_labels[fn.name].items():
                resp, line = contents[i]
                s.add(src, line, golds[0], resp, lab, fn.name, pred_is_response=True,
                      note="truncated response, expected to time out" if "timeout" in fn.name else None)
            if fn.name.endswith("aligned_with_rewards"):
                s.skip("row with no asserted reward (unparseable response) in aligned_with_rewards")
    return s


# ----------------------------------------------------------------------------- 9. verifiers
def suite_verifiers():
    s = Suite("verifiers")
    src = git_src("PrimeIntellect-ai/verifiers", "tests/test_math_rubric.py")
    for fn in functions(src.tree):
        label = {"test_score_valid_answers": True, "test_score_invalid_answers": False}.get(fn.name)
        for names, vals, line in parametrize_rows(fn):
            if label is None:
                s.skip(f"timeout/other parametrised test ({fn.name})")
                continue
            tc = vals[0]
            s.add(src, line, tc["answer"], tc["completion"], label, fn.name, pred_is_response=True)
    return s


# ----------------------------------------------------------------------------- 10. trl
def suite_trl():
    s = Suite("trl")
    src = git_src("huggingface/trl", "tests/test_rewards.py")
    format_driven = {"test_correct_answer_in_reasoning_yields_zero_reward",
                     "test_incomplete_reasoning_yields_zero_reward"}
    for fn in functions(src.tree):
        env, call = {}, None
        for st in fn.body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
                if call_name(st.value) in ("accuracy_reward", "reasoning_accuracy_reward"):
                    call = st.value
                else:
                    try:
                        env[st.targets[0].id] = lit(st.value, env)
                    except NotLiteral:
                        pass
        if call is None:
            if fn.name == "test_accuracy_reward_in_worker_thread":  # results == [1.0]
                comps, sols = env["completions"], env["solutions"]
                line = [n for n in ast.walk(fn) if isinstance(n, ast.Assert)][-1].lineno
                s.add(src, line, sols[0], comps[0][0]["content"], True, fn.name, pred_is_response=True,
                      options={"grader": "trl.rewards.accuracy_reward"})
            continue
        comps, sols = (lit(a, env) for a in call.args[:2])
        kw = {k.arg: lit(k.value, env) for k in call.keywords}
        for n in ast.walk(fn):
            if not (isinstance(n, ast.Assert) and isinstance(n.test, ast.Compare) and
                    isinstance(n.test.left, ast.Subscript)):
                continue
            i = lit(n.test.left.slice)
            v = lit(n.test.comparators[0])
            if v is None:
                s.skip(f"expected reward None (unparsable gold), not a boolean ({fn.name})")
                continue
            if fn.name in format_driven:
                s.skip(f"reward 0 set by reasoning-tag format, not equivalence ({fn.name})")
                continue
            s.add(src, n.lineno, sols[i], comps[i][0]["content"], v == 1.0, fn.name, pred_is_response=True,
                  options=dict(grader=f"trl.rewards.{call_name(call)}", **kw))
    return s


SUITES = [suite_math_verify, suite_lighteval, suite_hendrycks, suite_nemo_skills, suite_lm_eval_minerva,
          suite_rllm, suite_mindspeed, suite_torchforge, suite_nemo_rl, suite_verifiers, suite_trl]


def main():
    import argparse

    global OUT, MIRROR, SDISTS
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repos", default=MIRROR, help="folder of <owner>+<repo> clones")
    p.add_argument("--sdists", default=SDISTS, help="folder of the two sdists")
    p.add_argument("--out", default=OUT, help="where the .jsonl files go")
    args = p.parse_args()
    OUT, MIRROR, SDISTS = args.out, args.repos, args.sdists
    os.makedirs(OUT, exist_ok=True)
    summary = OrderedDict()
    for f in SUITES:
        s = f()
        summary[s.name] = s.write()
        info = summary[s.name]
        print(f"{s.name:22s} {info['cases']:4d} cases ({info['true']} true / {info['false']} false); "
              f"skipped {sum(info['skipped'].values())}", file=sys.stderr)
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
