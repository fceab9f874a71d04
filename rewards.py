"""Verifiers for RL from verifiable rewards: math answers and code. Used by delta.py, eval.py and tasks.py.

The API (a verdict is 1.0 or 0.0, never an exception for anything a model wrote):
    math_reward(response, gold, answer_format) -> float   the final answer equals the gold answer
    code_reward(response, tests, timeout, entry_point) -> float   the graded python block passes every test
    run_tests(code, tests, timeout) -> float      the same for code already extracted
    score_batch(responses, golds, kind="math" | "code", timeout, workers, stats, answer_format) -> list[float]
                                                  many at once, in worker processes, a deadline per item
The parts they are made of, public too:
    ANSWER_FORMATS                                where a math answer is stated: boxed (default), answer_line
                                                  (DAPO-Math's `Answer: X`), last_number, hashes (GSM8K's `#### X`);
                                                  each with its instruction
    extract_answer(response, answer_format) -> str | None   the final answer, e.g. the last \\boxed{...}
    final_answers(response, answer_format) -> list[str]     what is graded: the last box, or a final run of boxes
    asked_format(prompt, graded) -> str | None    the format a prompt's own text asks for (graded=False: one no
                                                  rule here reads, such as `<answer>` tags)
    prompt_settings(answer_format, instruction, rows, kind, trained) -> (format, instruction)   the one rule for
                                                  "auto" (delta.py's arguments, eval.py's)
    extract_code(response, entry_point) -> str | None   the fenced python block that is graded
    stdout_matches(got, expected), value_matches(got, expected) -> bool   how results are compared
    lcb_stdout_matches(got, expected) -> bool     LiveCodeBench's rule (a spec's "compare": "lcb")
    returned(data)                                a call's value as the sandbox sends it (JSON, or a Fraction, ...)
    MATH_TIMEOUT, CODE_TIMEOUT, FLOAT_TOLERANCE, HARNESS_IMPORTS, STARTUP_TIMEOUT   the conventions
    SandboxError                                  the sandbox's: the sandbox failed, not the program
    DataError                                     a row that cannot be read or graded (tasks.py reads datasets)

Math: the project's exact rules, then math-verify's verdict minus named vetoes, in docs/verifier.md's order.
Model text is never executed: LaTeX goes through math-verify's parser and the project's own readers, never
sympify. Code: run in the sandbox/ package (beside this file, imported only for code items; docs/security.md lists
what it guarantees and the test behind each line); the expected outputs stay here, in the parent.
"""
import atexit
import collections
import contextlib
import functools
import json
import logging
import math
import multiprocessing as mp
import multiprocessing.connection
import numbers
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from decimal import Decimal
from fractions import Fraction

__all__ = ["math_reward", "code_reward", "run_tests", "score_batch", "extract_answer", "final_answers", "extract_code",
           "stdout_matches", "value_matches", "returned", "lcb_stdout_matches", "MATH_TIMEOUT", "CODE_TIMEOUT",
           "FLOAT_TOLERANCE", "HARNESS_IMPORTS", "STARTUP_TIMEOUT", "DataError", "asked_format", "prompt_settings",
           "ANSWER_FORMATS"]  # and SandboxError, which loads sandbox/ (a copy of rewards.py without it grades math)
MATH_TIMEOUT = 5.0  # seconds of wall clock per math item, parsing and sympy included
CODE_TIMEOUT = 10.0  # seconds per code item, all its tests together


# =====================================================================================
# 1. The API
# =====================================================================================
class DataError(ValueError):
    """A dataset row that cannot be read or graded; the message names the row and what to change."""


def math_reward(response, gold, answer_format="boxed"):
    """1.0 if the final answer of `response` (ANSWER_FORMATS: the last box by default) equals `gold`
    (docs/verifier.md), else 0.0."""
    return score_batch([response], [gold], "math", workers=1, answer_format=answer_format)[0]


def code_reward(response, tests, timeout=CODE_TIMEOUT, entry_point=None):
    """1.0 when the graded python block of `response` passes every test, else 0.0.

    tests (dict or JSON string), one of:
      {"inputs": [stdin text], "outputs": [expected stdout]}          stdin programs
      {"fn_name": name, "inputs": [argument lists], "outputs": [return values]}   call-based
      {"assert": test source, "setup": code run first, "entry_point": name}     HumanEval/MBPP style
    stdin and call-based specs compare as stdout_matches and value_matches do, or, with "compare": "lcb", by
    LiveCodeBench's own rules (lcb_stdout_matches; the returned value == the expected one); a returned numpy
    scalar is the number it holds under both;
    with "test_timeout": seconds, each test gets that long and the first failing one ends the item, as
    LiveCodeBench's harness runs (`timeout` stays the item's limit in all). The graded block
    is the last one defining the entry point (`entry_point`, the spec's entry_point or fn_name) when one does,
    else the last block. Raises SandboxError when the sandbox itself fails and
    ValueError for malformed tests; a wrong, crashing or slow program scores 0.0.
    """
    return _code_verdict(response, _check_spec(tests), timeout, entry_point)


def _code_verdict(response, spec, timeout, entry_point=None):
    """code_reward on a spec _check_spec has passed (score_batch's workers: each spec is checked once, before)."""
    code = extract_code(response, entry_point or spec.get("entry_point") or spec.get("fn_name"))
    return 0.0 if code is None else _grade(code, spec, timeout)


def run_tests(code, tests, timeout=CODE_TIMEOUT):
    """1.0 when `code` passes every test, else 0.0 (see code_reward for `tests`); never an exception for
    anything the program does. Raises SandboxError when the sandbox itself fails and ValueError for
    malformed tests."""
    return _grade(code, _check_spec(tests), timeout)


def score_batch(responses, golds, kind="math", timeout=None, workers=None, stats=None, answer_format="boxed"):
    """Verdicts (1.0 / 0.0) for many responses, in parallel worker processes.

    golds: gold answers (math) or test specs (code, see code_reward). `timeout` is the wall-clock limit
    of one item, or a list of one per item (default MATH_TIMEOUT, or CODE_TIMEOUT for the sandboxed program,
    whose worker gets 5 s more to clean up). answer_format: where a math response states its answer
    (ANSWER_FORMATS). Pass a dict as `stats` to receive the number of `timeouts` and `errors`.
    """
    if kind not in ("math", "code"):
        raise ValueError(f"kind must be 'math' or 'code', got {kind!r}")
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"answer_format must be one of {', '.join(ANSWER_FORMATS)}, got {answer_format!r}")
    if len(responses) != len(golds):
        raise ValueError(f"{len(responses)} responses but {len(golds)} golds")
    if kind == "code":
        golds = [_check_spec(g) for g in golds]
        _sandbox()  # here, not in every worker: a copy without sandbox/ says so at once
    limits = list(timeout) if isinstance(timeout, (list, tuple)) else [timeout] * len(responses)
    if len(limits) != len(responses):
        raise ValueError(f"{len(responses)} responses but {len(limits)} timeouts")
    limits = [t or (MATH_TIMEOUT if kind == "math" else CODE_TIMEOUT) for t in limits]
    items = [(r, g, answer_format) if kind == "math" else (r, g, t) for r, g, t in zip(responses, golds, limits)]
    results, errors, timeouts = _schedule(kind, items, [t + (0.0 if kind == "math" else 5.0) for t in limits],
                                          workers or max(1, min(4, os.cpu_count() or 1)))
    if stats is not None:
        stats.update(timeouts=timeouts, errors=len(errors))
    if errors:
        first = next(iter(errors.values()))
        if len(errors) == len(responses):
            raise RuntimeError(f"rewards: every one of {len(responses)} items failed in the verifier, e.g. {first}")
        warnings.warn(f"rewards: {len(errors)} of {len(responses)} items failed in the verifier and scored 0, "
                      f"e.g. {first}")
    return results


# =====================================================================================
# 2. Math, in docs/verifier.md's order: extraction, the exact rules, math-verify's verdict and its vetoes
# =====================================================================================
# ---------------------------------------------------------------------------- extraction
_BOX = re.compile(r"\\(?:boxed|fbox)\b")


ANSWER_FORMATS = {  # where a response states its final answer -> the instruction that asks for it
    "boxed": "Put the final answer in \\boxed{}.",  # the paper's; MATH, DeepMath
    "answer_line": "End your response with a line of the form 'Answer: X', where X is the final answer.",  # DAPO-Math
    "last_number": "Give the answer as a number at the end of your response.",  # small models' arithmetic
    "hashes": "End your response with a line of the form '#### X', where X is the final answer.",  # GSM8K's
}
# A prompt that already asks for a format (DAPO-Math-17k's own text asks for an `Answer:` line) needs no instruction.
_ASKS = {"answer_line": re.compile(r"(?i)\b(?:form|after|with)\W{0,3}answer\s*:"),
         "boxed": re.compile(r"\\boxed"),
         "hashes": re.compile(r"(?i)\b(?:after|with|following|form|format)\W{0,3}####")}  # verl's GSM8K prompts
_UNGRADED = {"<answer></answer> tags": re.compile(r"<answer>")}  # formats prompts ask for that no rule here reads
_HASHES = re.compile(r"####[ \t]*([^\n]*)")  # GSM8K: the rest of the line after the last `####`
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?(?!\w)")
_ANSWER_LINE = re.compile(r"(?i)\banswer\s*\**\s*[:：]\**[ \t]*([^\n]*)")  # as DAPO's: the last `Answer:`, its line


def asked_format(prompt, graded=True):
    """The answer format a prompt's own text asks for (a string, or a list of chat messages), or None; with
    graded=False, the name of a format it asks for that no rule of ANSWER_FORMATS reads (`<answer>` tags), or None."""
    text = prompt if isinstance(prompt, str) else " ".join(str(m.get("content", "")) for m in prompt)
    return next((fmt for fmt, pattern in (_ASKS if graded else _UNGRADED).items() if pattern.search(text)), None)


def prompt_settings(answer_format, instruction, rows, kind="math", trained=None):
    """The one rule for "auto" (delta.py's --answer_format and --instruction, eval.py's): the format given, else the
    one the model or the rows were trained with (`trained`: a model folder's delta_prompt.json, a run's held-out
    rows), else what most prompts ask for, else the box; the instruction given, else the trained one, else the format's
    request unless the prompts ask themselves (code prompts carry theirs). -> (answer_format, instruction)"""
    trained, questions = trained or {}, [r["question"] for r in rows] if kind == "math" else []
    asked = collections.Counter(asked_format(q) for q in questions)
    asked = max(asked, key=asked.get) if asked else None  # what most prompts ask for themselves, if anything
    other = collections.Counter(asked_format(q, graded=False) for q in questions)
    other.pop(None, None)
    if other and not asked and not trained and "auto" in (answer_format, instruction):
        formats = " | ".join(ANSWER_FORMATS)
        raise DataError(f"{sum(other.values())} of {len(rows)} prompts ask for {max(other, key=other.get)}, an "
                        f"answer format no rule here grades: give --answer_format ({formats}) and --instruction "
                        "(the text that asks for it; '' to leave the prompts as they are)")
    if answer_format == "auto":
        answer_format = trained.get("answer_format") or asked or "boxed"
    elif asked and asked != answer_format:
        warnings.warn(f"the prompts ask for {asked} answers, graded as --answer_format {answer_format}")
    if instruction == "auto":
        ask = kind == "math" and not asked
        instruction = trained.get("instruction", ANSWER_FORMATS[answer_format] if ask else "")
    return answer_format, instruction


def _after_think(response):
    return response.rsplit("</think>", 1)[-1] if isinstance(response, str) else ""


def extract_answer(response, answer_format="boxed"):
    """The final answer of `response` after the last </think>, or None (missing, empty or unclosed). boxed: the last
    brace-matched \\boxed{...} (or \\fbox{...}, or `\\boxed x`); answer_line: the rest of the last line that
    follows the last `Answer:` (a box in it: the box's content; as DAPO's verifier reads it); last_number: the last
    number (an integer, decimal or fraction, thousands separators dropped); hashes: the rest of the line after the
    last `####` (GSM8K's convention)."""
    if answer_format == "hashes":
        lines = _HASHES.findall(_after_think(response))
        answer = lines[-1].strip("$ ").rstrip(".").strip("$ ") if lines else ""
        return answer or None
    if answer_format == "answer_line":
        lines = _ANSWER_LINE.findall(_after_think(response))
        answer = lines[-1].strip() if lines else ""
        boxes = _boxes(answer)
        answer = boxes[-1][0] if boxes else answer.strip("$ ").rstrip(".").strip("$ ")
        return answer or None
    if answer_format == "last_number":
        numbers = _NUMBER.findall(_after_think(response))
        return re.sub(r"[,\s]", "", numbers[-1]).lstrip("+") if numbers else None
    boxes = _boxes(response)
    return boxes[-1][0] if boxes else None


_MINERVA = re.compile(r"[Ff]inal [Aa]nswer:?\s*(?:[Tt]he final answer is\s*)?\$([^$]+)\$")


def final_answers(response, answer_format="boxed"):
    """The answers to grade. boxed: the last box (or a Minerva-style `Final Answer: The final answer is $X$`
    after it), and, when the final answer is a run of boxes joined by short phrases (`\\boxed{-2} and
    \\boxed{1}`, `\\boxed{(3, 3)} for part (a) and \\boxed{(1, 1)}`: at most 60 characters and 4 words
    between boxes, no blank line), the run joined as one list. Other formats: extract_answer's one answer."""
    if answer_format != "boxed":
        answer = extract_answer(response, answer_format)
        return [answer] if answer is not None else []
    boxes = _boxes(response)
    tail = response[boxes[-1][2]:] if boxes else response if isinstance(response, str) else ""
    minerva = _MINERVA.search(tail.rsplit("</think>", 1)[-1])
    if minerva and minerva.group(1).strip():
        return [minerva.group(1).strip()]
    if not boxes:
        return []
    run = [boxes[-1]]
    for box in reversed(boxes[:-1]):
        gap = response[box[2]:run[0][1]]
        if len(gap) > 60 or "\n\n" in gap or len(re.findall(r"[A-Za-z]+", re.sub(r"\\[A-Za-z]+", "", gap))) > 4:
            break
        run.insert(0, box)
    return [boxes[-1][0]] + ([", ".join(b[0] for b in run)] if len(run) > 1 else [])


def _boxes(response):
    """(content, start, end) of the last 50 boxes after the last </think>, in order; none when the last box
    is empty or unclosed (the final answer is missing)."""
    if not isinstance(response, str):
        return []
    offset = response.rfind("</think>") + 8 if "</think>" in response else 0
    out = []
    for m in list(_BOX.finditer(response, offset))[-50:]:
        found = _box_at(response, m.end())
        out.append((found[0], m.start(), found[1]) if found else None)
    return [b for b in out if b] if out and out[-1] else []


def _box_at(response, i):
    """The content of the box whose name ends at i and where it ends, or None (empty or unclosed)."""
    start = i
    while i < len(response) and response[i] == " ":
        i += 1
    if i < len(response) and response[i] == "{":
        depth = 0
        for j in range(i, len(response)):
            c = response[j]
            if c == "{" and response[j - 1] != "\\":
                depth += 1
            elif c == "}" and response[j - 1] != "\\":
                depth -= 1
                if depth == 0:
                    ans = response[i + 1:j].strip()
                    return (ans, j + 1) if ans else None
        return None  # unclosed
    if i == start:  # neither `\boxed{` nor `\boxed x`
        return None
    m = re.match(r"[^\s$]+", response[i:])  # `\boxed 5`: the next word
    return (m.group(0).rstrip("."), i + m.end()) if m and m.group(0).rstrip(".") else None


# ---------------------------------------------------------------------------- the exact rules (in a worker)
# The ladder, for each pair of answers after normalisation (_clean):
#   1. equal strings; one multiple-choice letter; the empty set in any spelling;
#   2. compound answers (tuples, intervals, sets, lists of roots, matrices) element by element;
#      `x = 3` and `x \in [1, 2]` against an answer without the left side;
#   3. exact values (integers, decimals, fractions, scientific notation, repeating decimals), exactly;
#   4. words, case-insensitively;
#   5. sympy on math-verify's LaTeX parse: exact numbers exactly (a decimal counts as its exact value);
#      a tolerance only between a decimal and an irrational finite number; infinities by sign;
#      expressions by symbolic difference; equations up to a non-zero factor.
_UNITS = ("cm", "mm", "km", "m", "in", "inch", "inches", "ft", "feet", "foot", "yd", "yards", "miles", "mph",
          "g", "kg", "s", "sec", "seconds", "min", "minutes", "hours", "hour", "days", "day", "units", "unit",
          "degrees", "degree", "dollars", "cents", "meters", "meter", "sq", "square", "cubic", "liters", "ml",
          "people", "ways", "students", "points", "times")
_TEXT_CMDS = r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox|operatorname)\s*\{([^{}]*)\}"
_UNICODE = {  # characters models write for LaTeX
    "½": r"\frac{1}{2}", "⅓": r"\frac{1}{3}", "⅔": r"\frac{2}{3}", "¼": r"\frac{1}{4}", "¾": r"\frac{3}{4}",
    "⅕": r"\frac{1}{5}", "⅙": r"\frac{1}{6}", "⅛": r"\frac{1}{8}", "∞": r"\infty ", "π": r"\pi ",
    "∅": r"\emptyset ",
    "−": "-", "×": r"\times ", "·": r"\cdot ", "⋅": r"\cdot ", "÷": r"\div ", "≤": r"\le ", "≥": r"\ge ",
    "≠": r"\ne ", "∈": r"\in ", "∪": r"\cup ", "∩": r"\cap ", "θ": r"\theta ", "α": r"\alpha ",
    "β": r"\beta ",
}
_SUPERSCRIPT = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+"))
_INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")
_SPACES = re.compile("[\u00a0\u2007\u2009\u202f\u3000]")


def _unicode_to_latex(s):
    s = _SPACES.sub(" ", _INVISIBLE.sub("", s))
    s = re.sub("[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+",
               lambda m: "^{" + "".join(_SUPERSCRIPT[c] for c in m.group()) + "}", s)
    s = re.sub(r"√\s*(\d+(?:\.\d+)?|[A-Za-z]|\{[^{}]*\}|\([^()]*\))",
               lambda m: (r"\sqrt{" + m.group(1).strip("{}()") + "}" if m.group(1)[0] in "{("
                          else r"\sqrt{" + m.group(1) + "}"), s)
    return "".join(_UNICODE.get(c, c) for c in s)


def _clean(s):
    """Light, content-preserving normalisation of a LaTeX answer."""
    s = _unicode_to_latex(str(s)).strip()
    s = re.sub(r"^\$+|\$+$", "", s).strip()
    s = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", s).strip()
    s = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)(?![a-zA-Z])", "", s)
    s = re.sub(r"(\d),\s*\\!\s*(?=\d{3}(?!\d))", r"\1,", s)  # 11,\! 111: a thousands separator
    s = re.sub(r"(?<!\\)\\[,!;: ]|\\(?:displaystyle|quad|qquad)(?![a-zA-Z])|~", " ", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = re.sub(r"\\frac\s*(\w)\s*(\w)", r"\\frac{\1}{\2}", s)  # \frac12
    s = re.sub(r"\\sqrt\s*(\[\w+\])?\s*(\w)", r"\\sqrt\1{\2}", s)  # \sqrt2, \sqrt[3]2
    s = re.sub(r"\^\s*\{?\\circ\}?|°|\\degree", "", s)  # degrees
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "")
    s = re.sub(r"\\(?:text|mbox|mathrm)\s*\{\s*(?:" + "|".join(_UNITS) + r")(?:\^?\d)?\s*\}(?:\^\{?\d\}?)?",
               "", s)  # \text{ m}^2
    for _ in range(3):
        s = re.sub(_TEXT_CMDS, r"\1", s)
    s = re.sub(r"\\mathbb\{R\}|\\R(?![a-zA-Z])", r"(-\\infty,\\infty)", s)
    s = re.sub(r"(^|[\s(\[,])\+\s*\\infty", r"\1\\infty", s)  # +\infty
    s = re.sub(r"-\s+\\infty", r"-\\infty", s)
    s = re.sub(r"(\d)\{,\}(\d)", r"\1,\2", s)  # 1{,}000
    s = re.sub(r"\s+", " ", s).strip().rstrip(".").strip()
    # 5 cm, 12kg: a unit after a number at the end; one-letter units only after a space (2m may be 2 * m)
    s = re.sub(r"(?<=[\d}])(?:\s+(?:" + "|".join(_UNITS) + r")|(?:" + "|".join(u for u in _UNITS if len(u) > 1) +
               r"))(?:\^?\{?\d\}?)?$", "", s)
    return s.strip()


_EMPTY = re.compile(r"\\emptyset|\\varnothing|\\\{\s*\\\}|\{\s*\}")


def _choice(s, loose=False):
    """The letter of a multiple-choice answer: C, (C); with loose, also `(C) 12`, but never a hedge such as
    `(A) or (B)` that names a second letter. None otherwise."""
    m = re.fullmatch(r"\(?\s*([A-Z])\s*\)?", s)
    if not m and loose:
        m = re.fullmatch(r"\(([A-Z])\)\s*(\S.*)", s)
        m = m if m and not re.search(r"(?<![A-Za-z\\])[A-Z](?![A-Za-z])", m.group(2)) else None
    return m.group(1) if m else None


def _split_lhs(s):
    """`x = 3`, `\\theta = 3`, `AB = 3`, `f(x) = 3`, `x \\in [1, 2]` -> (left side, right side); else None."""
    m = re.match(r"^\s*((?:[a-zA-Z]{1,3}|\\[a-zA-Z]+)(?:_\{?\w+\}?)?'*(?:\([a-zA-Z]\))?)\s*"
                 r"(?:=(?!=)|\\in(?![a-zA-Z]))(.*)$", s, re.S)
    return (m.group(1), m.group(2).strip()) if m and m.group(2).strip() else None


def _rational(s):
    """Exact value of a number written as an integer, decimal, fraction, in scientific notation or as a
    repeating decimal (0.1\\overline{6}); None for anything else."""
    if re.fullmatch(r"\s*[+-]?[1-9]\d{0,2}(,\d{3})+(\.\d+)?\s*", s):  # 1,000; never 32, 349
        s = s.replace(",", "")
    t = s.replace(" ", "")
    if len(t) > 4000:
        return None
    m = re.fullmatch(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]|\\(?:times|cdot)10\^)\{?([+-]?\d{1,4})\}?", t)
    if m:
        return Fraction(m.group(1)) * Fraction(10) ** int(m.group(2))
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)", t):
        return Fraction(t)
    m = re.fullmatch(r"([+-]?)(\d*)\.(\d*)\\overline\{?(\d+)\}?", t)
    if m:
        head, rep = m.group(3), m.group(4)
        value = (int(m.group(2) or 0)
                 + (Fraction(int(head or 0)) + Fraction(int(rep), 10 ** len(rep) - 1)) / 10 ** len(head))
        return -value if m.group(1) == "-" else value
    m = (re.fullmatch(r"([+-]?)\\frac\{([+-]?\d+)\}\{([+-]?\d+)\}", t)
         or re.fullmatch(r"([+-]?)\\frac(\d)(\d)", t) or re.fullmatch(r"([+-]?)(\d+)/(\d+)", t))
    if m and int(m.group(3)) != 0:
        return Fraction(int(m.group(2)), int(m.group(3))) * (-1 if m.group(1) == "-" else 1)
    return None


def _split_top(s, seps=(",",)):
    """Split at separators outside any bracket, iteratively (no recursion, any nesting depth)."""
    parts, depth, cur, i = [], 0, [], 0
    while i < len(s):
        if s.startswith("\\{", i) or s.startswith("\\}", i):
            depth += 1 if s[i + 1] == "{" else -1
            cur.append(s[i:i + 2])
            i += 2
            continue
        c = s[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        hit = next((sep for sep in seps if depth == 0 and s.startswith(sep, i)), None)
        if hit:
            parts.append("".join(cur).strip())
            cur, i = [], i + len(hit)
            continue
        cur.append(c)
        i += 1
    parts.append("".join(cur).strip())
    return parts


_MATRIX = re.compile(r"^[(\[]?\s*\\begin\{(?:(p|b|B|v|V|small|)matrix|array\}\{[^{}]*)\}(.*)"
                     r"\\end\{(?:\1matrix|array)\}\s*[)\]]?$", re.S)


def _structure(s):
    """('set' | 'list' | '(]' brackets | 'union' | 'matrix' | 'det', [elements]) for compound answers,
    else ('atom', s). Lists of roots may be joined by commas, `or`, `and` or semicolons; a thousands
    separator has no space after its comma (32,349 is a number, 32, 349 a list)."""
    m = _MATRIX.match(s)
    if m:
        kind = "det" if m.group(1) in ("v", "V") else "matrix"
        return kind, [[c.strip() for c in row.split("&")] for row in re.split(r"\\\\", m.group(2)) if row.strip()]
    if s.startswith("\\{") and s.endswith("\\}"):
        return "set", _split_top(s[2:-2])
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and _balanced_inside(s):
        inside = _split_top(s[1:-1])
        if s[0] == "(" and s[-1] == ")" and len(inside) == 1:  # (3): parentheses around one value
            return _structure(inside[0])
        return s[0] + s[-1], inside
    if s.count("\\pm") == 1 and "," not in s:  # 1 \pm \sqrt{2}, \frac{-1 \pm \sqrt{5}}{2}
        return "set", [s.replace("\\pm", "+"), s.replace("\\pm", "-")]
    if "\\cup" in s and len(_split_top(s, ("\\cup",))) > 1:
        return "union", _split_top(s, ("\\cup",))
    if not re.fullmatch(r"[+-]?[1-9]\d{0,2}(,\d{3})+(\.\d+)?", s):
        parts = [p for p in _split_top(s, (",", " or ", " and ", ";")) if p]
        if len(parts) > 1:  # a list of roots or solutions: unordered, as math-verify's suites label them
            return "set", parts
    return "atom", s


def _balanced_inside(s):
    """The outer brackets of s enclose everything: (a, b) but not (a)+(b)."""
    depth = 0
    for i, c in enumerate(s):
        depth += c in "([{"
        depth -= c in ")]}"
        if depth == 0 and i < len(s) - 1:
            return False
    return True


@functools.lru_cache(maxsize=4096)
def _sympy(s):
    """LaTeX -> (sympy expression, has_decimals) through math-verify's LaTeX parser, never sympify on raw
    text; None if it fails. Decimals become exact fractions first, so 0.333 is 333/1000, never 1/3; the
    flag says the answer was written with decimals (an approximation)."""
    from latex2sympy2_extended.math_normalization import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse

    s = re.sub(r"(?<![\d.])(\d+(?:\.\d*)?|\.\d+)[eE]([+-]?\d+)(?![\d.])", r"\1\\times10^{\2}", s)  # 1.5e-3
    decimals = False

    def exact(m):
        nonlocal decimals
        decimals = True
        whole, frac = m.group(1) or "0", m.group(2)
        return f"\\frac{{{whole}{frac}}}{{1{'0' * len(frac)}}}"
    s = re.sub(r"(?<![\d.])(\d*)\.(\d+)(?![\d.])", exact, s)
    config = LatexExtractionConfig(normalization_config=NormalizationConfig(
        basic_latex=True, units=False, malformed_operators=False, nits=False, boxed="none", equations=False))
    out = parse(f"${s}$", extraction_config=[config], parsing_timeout=None)
    return (out[0], decimals) if out else None


def _computable(x):
    """No integer power, factorial or binomial too big to evaluate exactly in a moment."""
    import sympy

    for node in sympy.preorder_traversal(x):
        if isinstance(node, sympy.Pow) and node.exp.is_number:
            if (not (node.exp.is_Rational and abs(node.exp) <= 10_000) and node.base.is_number
                    and node.base not in (0, 1, -1)):
                return False
        if isinstance(node, (sympy.factorial, sympy.binomial)) and any(
                a.is_number and not (a.is_Integer and abs(a) <= 5000) for a in node.args):
            return False
    return True


def _numbers_equal(x, y, x_text=None, y_text=None):
    """Two constants, exactly (symbolically). A decimal literal (x_text, y_text) against a value no decimal
    writes (irrational, or a fraction whose denominator has a prime other than 2 and 5) counts as that
    value when it is within one unit of its last digit of it and has 8 significant digits or more:
    3.33333333 = 10/3, 3.14159265 = pi; 0.3333333 != 1/3; 0.333 != 1/3; 1.8446744073709552e19 != 2^64."""
    import sympy

    x, y = x.doit(), y.doit()
    if not (x.is_finite and y.is_finite):  # oo and -oo equal only themselves; zoo and nan nothing
        return x == y and x in (sympy.oo, -sympy.oo)
    if x.is_Rational and y.is_Rational:
        return x == y or any(text and _rounds_to(text, value) for text, value in ((x_text, y), (y_text, x)))
    d = x - y
    try:
        dv = complex(sympy.N(d, 30))
        scale = max(1.0, abs(complex(sympy.N(x, 30))), abs(complex(sympy.N(y, 30))))
    except (TypeError, ValueError, OverflowError):
        return False
    if abs(dv) <= 1e-20 * scale and (sympy.simplify(d) == 0 or d.equals(0) is True):
        return True
    return any(text and _rounds_to(text, value) for text, value in ((x_text, y), (y_text, x)))


_DECIMAL = re.compile(r"([+-]?)(\d*)\.(\d+)(?:(?:[eE]|\\times\s*10\^)\{?([+-]?\d{1,4})\}?)?")


def _rounds_to(text, value):
    """The decimal literal `text` is `value` up to one unit in its last digit (rounded, truncated, or a float's
    printout), has 8 or more significant digits, and `value` is a number no decimal writes exactly."""
    import decimal

    import sympy

    m = _DECIMAL.fullmatch(text.replace(" ", ""))
    if not m or len((m.group(2) + m.group(3)).lstrip("0")) < 8 or value.is_zero:
        return False
    if value.is_Rational and not (set(sympy.factorint(value.q)) - {2, 5}):
        return False  # a terminating value: the decimal must be exact
    places = len(m.group(3)) - int(m.group(4) or 0)
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        exact = decimal.Decimal(str(sympy.N(value, places + 40)))
        written = decimal.Decimal(m.group(1) + (m.group(2) or "0") + "." + m.group(3)).scaleb(int(m.group(4) or 0))
        return abs(written - exact) <= decimal.Decimal(1).scaleb(-places)  # one unit in the last written place


def _expressions_equal(x, y):
    """Expressions with free symbols: a zero difference (expanded, or simplified after a random-point check)."""
    import sympy

    d = x - y
    if sympy.expand(d) == 0:
        return True
    symbols = sorted(d.free_symbols, key=str)
    for point in (0.5772, 1.3247):  # a difference that is non-zero at a point is not identically zero
        try:
            value = complex(d.subs({s: point + k / 7 for k, s in enumerate(symbols)}).evalf(30))
            if abs(value) > 1e-12:
                return False
        except (TypeError, ValueError, ZeroDivisionError):
            break
    return sympy.simplify(d) == 0


def _scalar_equal(a, b):
    if a == b:
        return True
    ra, rb = _rational(a), _rational(b)
    if ra is not None and rb is not None:  # exact: 0.333 != 1/3, huge integers digit by digit
        import sympy

        return (ra == rb or _rounds_to(a, sympy.Rational(rb.numerator, rb.denominator))
                or _rounds_to(b, sympy.Rational(ra.numerator, ra.denominator)))
    letters = lambda s: re.fullmatch(r"[A-Za-z]+(?: [A-Za-z]+)*", s) is not None
    if letters(a) and letters(b) and len(a) > 2 and a.lower() == b.lower():
        return True  # YES = Yes
    if letters(a) and (len(a) > 3 or " " in a) or letters(b) and (len(b) > 3 or " " in b):
        return False  # words (Monday, Evelyn) equal only as words; products of symbols (ab = ba) go on
    import sympy

    px, py = _sympy(a), _sympy(b)
    if px is None or py is None:
        return False
    (x, _), (y, _) = px, py
    if not all(isinstance(e, sympy.Basic) and _computable(e) for e in (x, y)):
        return False
    if isinstance(x, sympy.Eq) or isinstance(y, sympy.Eq):  # equations: the same up to a non-zero factor
        if not (isinstance(x, sympy.Eq) and isinstance(y, sympy.Eq)):
            return False
        ex, ey = x.lhs - x.rhs, y.lhs - y.rhs
        if sympy.simplify(ey) == 0:
            return sympy.simplify(ex) == 0
        ratio = sympy.simplify(ex / ey)
        return not ratio.free_symbols and ratio.is_finite is True and ratio != 0
    if isinstance(x, sympy.core.relational.Relational) and isinstance(y, sympy.core.relational.Relational):
        symbols = x.free_symbols | y.free_symbols  # inequalities in one variable: the same solution set
        if len(symbols) == 1:
            try:
                return x.as_set() == y.as_set()
            except Exception:
                return False
    if not isinstance(x, sympy.Expr) or not isinstance(y, sympy.Expr):
        return x == y  # sets, intervals: structurally equal
    if not x.free_symbols and not y.free_symbols:
        return _numbers_equal(x, y, _decimal_text(a), _decimal_text(b))
    return _expressions_equal(x, y)


def _decimal_text(s):
    return s if _DECIMAL.fullmatch(s.replace(" ", "")) else None


def _equal(pred, gold):
    p, g = _clean(pred), _clean(gold)
    if p == g:
        return True
    if _choice(g):  # multiple choice: the letter decides, in any spelling
        return _choice(p, loose=True) == _choice(g)
    if _EMPTY.fullmatch(p) or _EMPTY.fullmatch(g):
        return bool(_EMPTY.fullmatch(p) and _EMPTY.fullmatch(g))
    relation = lambda s: "=" in s or re.search(r"\\in(?![a-zA-Z])", s) is not None
    sp, sg = _split_lhs(p), _split_lhs(g)
    if sp and sg and sp[0] == sg[0]:  # x = 3 against x = 3.0: the right sides decide
        p, g = sp[1], sg[1]
    elif sp and not relation(g):  # x = 3 against 3
        p = sp[1]
    elif sg and not relation(p):
        g = sg[1]
    if p == g:
        return True
    (kp, ep), (kg, eg) = _structure(p), _structure(g)
    if kp != kg:
        return False
    if kp == "atom":
        return _scalar_equal(p, g)
    if kp in ("matrix", "det"):
        return len(ep) == len(eg) and all(len(r) == len(s) and all(_equal(x, y) for x, y in zip(r, s))
                                          for r, s in zip(ep, eg))
    if len(ep) != len(eg):
        return False
    if kp in ("set", "union"):  # unordered: match every element once
        left = list(eg)
        for x in ep:
            hit = next((i for i, y in enumerate(left) if _equal(x, y)), None)
            if hit is None:
                return False
            left.pop(hit)
        return True
    return all(_equal(x, y) for x, y in zip(ep, eg))  # tuples, intervals (bracket types matched), unions


# math-verify's verdict, and the layers around it (docs/verifier.md):
#   normalisers rewrite both sides into forms math-verify compares (_normalise);
#   vetoes turn math-verify's "equal" into "not equal" for named near misses (_veto).
_PERCENT = re.compile(r"(?<=\d)\s*(?:\\?%|\\text\{\s*%\s*\}|(?:percentage|percent|pct)\b)", re.I)
_NAME = r"(?:[A-Za-z](?:_\{?\w+\}?)?'*|\\[A-Za-z]+)"  # x, V_{1}, x', \theta
_LHS = re.compile(rf"^\s*(?:\(?{_NAME}(?:\s*,\s*{_NAME})*\)?|\|[A-Za-z]+\||{_NAME}\s*:\s*{_NAME}|"
                  rf"\\frac\{{[A-Za-z]+\}}\{{[A-Za-z]+\}}|[A-Za-z]+\([A-Za-z]\))\s*=(?!=)")


def _normalise(s):
    """Spellings that math-verify reads differently, rewritten: 28 percent / pct / \\% alike, \\textnormal,
    tuples with `;`, `or` between answers without spaces, \\frac3{3}, bare braces {a, b} as a set, and a
    left-hand side that names the answer ((p,q)=, V_1:V_2=, |AB|=, \\frac{NO}{BO}=, f(x)=; the last value of
    a chain of equalities)."""
    s = _clean(s)
    s = _PERCENT.sub("\\%", s).replace("\\textnormal", "\\text")
    s = re.sub(r"\\frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"(?<=[)\]}\d])\s*\bor\b\s*(?=[(\[{\-\d\\])", ", ", s)
    s = re.sub(r"\(([^()]*;[^()]*)\)", lambda m: "(" + m.group(1).replace(";", ",") + ")", s)
    if s.startswith("{") and s.endswith("}") and _balanced_inside(s) and len(_split_top(s[1:-1])) > 1:
        s = "\\{" + s[1:-1] + "\\}"
    parts = _split_top(s, ("=",))
    if len(_split_top(s, (",", ";"))) == 1 and len(parts) > 1 and all(parts) and (len(parts) > 2 or _LHS.match(s)):
        s = parts[-1]  # one answer named on the left (V_1:V_2 = 11:21), or a chain x = 5+5+1 = 11: the last value
    return s


def _mv_parse(s, as_is=None):
    """math-verify's parse of an answer in a box, as a model writes it; of a gold as given (as_is=True,
    plain math-verify's call) or in $...$ (as_is=False, which math-verify reads whole); [] if it fails. Its
    signal-based timeouts are off (the pool's apply)."""
    from math_verify import parse

    if as_is is None:
        s = f"\\boxed{{{s}}}"
    elif not as_is:
        s = f"${s}$"
    try:
        return parse(s, parsing_timeout=None)
    except Exception:
        return []


_mv_parse_cached = functools.lru_cache(maxsize=4096)(_mv_parse)


def _mv_equal(pred, gold, raw_gold):
    """math-verify's verdict on the answer against the gold (as given, and both normalised), unless a veto
    applies."""
    from math_verify import verify

    if _depth(raw_gold) > 30 or len(raw_gold) > 20000:
        return False
    if _decided(_clean(pred), _clean(gold)):
        return False  # the exact rules above read both sides: a verdict of math-verify's would be vetoed
    tries = [(pred, raw_gold, True)]  # a gold in long prose: math-verify's own extraction alone
    tries += [] if _too_complex(gold) else [(pred, gold, False), (_normalise(pred), _normalise(gold), False)]
    for p, g, as_is in dict.fromkeys(tries):
        pp, gp = _mv_parse_cached(p), _mv_parse_cached(g, as_is)
        try:  # the vetoes judge the answers as written (a gold in prose: the answer math-verify read in it)
            if pp and gp and verify(gp, pp, timeout_seconds=None) and not _veto(p, gp[-1] if _prose(g) else g):
                return True
        except Exception:
            continue
    return False


def _decided(p, g):
    """Both sides are single numbers or expressions in the same one-letter symbols that the exact rules
    parsed: their "not equal" stands (math-verify could only agree, or be vetoed)."""
    import sympy

    if _rational(p) is not None and _rational(g) is not None:
        return True
    (kp, ep), (kg, eg) = _structure(p), _structure(g)
    if kp != "atom" or kg != "atom":  # tuples, sets, intervals: decided when every element is
        flat = lambda es: [x for e in es for x in (e if isinstance(e, list) else [e])]
        return kp == kg and len(ep) == len(eg) and all(_decided(x, y) for x, y in zip(flat(ep), flat(eg)))
    if _prose(p + " " + g) or any(re.search(r"[A-Za-z]{3}", re.sub(r"\\[A-Za-z]+", "", t)) for t in (p, g)):
        return False
    x, y = _sympy(p), _sympy(g)
    return (bool(x and y) and all(isinstance(v[0], sympy.Expr) and _computable(v[0]) for v in (x, y))
            and x[0].free_symbols == y[0].free_symbols)


def _prose(s):
    return len(re.findall(r"[A-Za-z]{3,}", re.sub(r"\\[A-Za-z]+|\\text\{[^{}]*\}", " ", s))) >= 4


def _too_complex(s):
    """Answers no parser should see: over 1,000 characters, over 20 nested brackets, over 12 exponents or 30
    fractions, or a tower of more than 3 exponents (9^{9^{9^{9}}} has no value sympy could compute)."""
    tower = depth = 0
    opened = []
    for i, c in enumerate(s):
        if c == "{":
            opened.append(s[i - 1:i] == "^")
            depth += opened[-1]
            tower = max(tower, depth)
        elif c == "}" and opened:
            depth -= opened.pop()
    chain = max((len(m) for m in re.findall(r"(?:\^[^{}^\s]){2,}", s)), default=0) // 2  # x^x^x without braces
    return len(s) > 1000 or _depth(s) > 20 or s.count("^") > 12 or s.count("\\frac") > 30 or max(tower, chain) > 3


def _depth(s):
    depth = deepest = 0
    for c in s:
        depth += c in "{([" and 1 or (-1 if c in "})]" else 0)
        deepest = max(deepest, depth)
    return deepest


def _veto(pred, gold):
    """The named near misses that math-verify accepts and this verifier does not (docs/verifier.md):
    - undefined values (a division by zero: 12:00 against 1:00) equal nothing;
    - two numbers are equal only by _numbers_equal's exact rules: a tolerance never joins two different
      exact values (9.11e-30 is not 9.11e-31, 0.333 is not 1/3, 50% is 50 and not 0.5), infinities keep
      their sign;
    - one number never equals a list of several (2 is not \\pm 2);
    - expressions are equal only symbolically, and a letter is a symbol, never a unit dropped (\\pi r^2 is
      not \\pi r^2 h);
    - equations are equal only up to a non-zero factor (x + y = 1 is not x - y = 1), and an equation is no
      value unless its left side names the answer ((p,q)= or V_1:V_2=, removed by _normalise)."""
    import sympy

    values, texts = [], (_normalise(pred), _normalise(gold))
    kinds = [_structure(t) for t in texts]
    for (kind, parts), side in zip(kinds, texts):
        parsed = _sympy(side) if kind == "atom" and not re.search(r"[<>]|\\[lg]e", side) else None
        if parsed is not None and isinstance(parsed[0], sympy.Basic) and parsed[0].has(sympy.zoo, sympy.nan):
            return True
        values.append(parsed[0] if parsed and isinstance(parsed[0], sympy.Basic) and _computable(parsed[0]) else None)
    numbers = [v is not None and isinstance(v, sympy.Expr) and not v.free_symbols for v in values]
    if all(numbers):
        return not _numbers_equal(values[0], values[1], *map(_decimal_text, texts))
    several = r"\\pm|,\s|,[+-]|,.*,| or | and "  # a list, not a decimal comma (1,22)
    if any(numbers) and any(kind == "set" and re.search(several, t) for (kind, _), t in zip(kinds, texts)):
        return True
    words = any(re.search(r"[A-Za-z]{3}", re.sub(r"\\[A-Za-z]+", "", t)) for t in texts)
    if all(isinstance(v, sympy.Expr) for v in values) and not words:  # expressions, exactly: no letter dropped
        return values[0].free_symbols != values[1].free_symbols or not _scalar_equal(*texts)
    if all(isinstance(v, sympy.Eq) for v in values):
        return not _scalar_equal(*texts)
    if sum(isinstance(v, sympy.Eq) for v in values) == 1 and not re.search(r"\\in\b", "".join(texts)):
        return True  # an equation whose left side names no answer against a bare value (x + y = 1 is not 1)
    return False


def _gold_text(gold):
    """Gold answers may be int, float or str; keep all of their content."""
    if isinstance(gold, bool):
        return str(gold)
    if isinstance(gold, int):
        return str(gold)
    if isinstance(gold, float):  # the shortest decimal that is this float: 6.02e+23, 0.1, 2.0
        return repr(gold) if math.isfinite(gold) else "\\infty" if gold > 0 else "-\\infty" if gold < 0 else "nan"
    gold = str(gold).strip()
    answers = final_answers(gold) if _boxes(gold) else []  # a gold with boxes: its final box or run of boxes
    return answers[-1] if answers else gold


def _math_check(response, gold, answer_format="boxed"):
    """Runs in a worker: 1.0 or 0.0, never raises. The project's exact ladder, then math-verify's verdict
    minus the vetoes, for the final answer (boxed: the last box and a final run of boxes). A list of golds (the
    acceptable answers, as Skywork-OR1 stores them): 1.0 if any is matched."""
    if isinstance(gold, (list, tuple)):
        return max((_math_check(response, g, answer_format) for g in gold), default=0.0)
    try:
        gold_text = _gold_text(gold)
        raw_gold = gold_text if isinstance(gold, (int, float)) else str(gold)
        for pred in final_answers(response, answer_format):
            if _too_complex(pred):  # no parser gets it: the strings decide
                if _clean(pred) == _clean(gold_text):
                    return 1.0
            elif (not _too_complex(gold_text) and _equal(pred, gold_text)) or _mv_equal(pred, gold_text, raw_gold):
                return 1.0
        return 0.0
    except Exception:
        return 0.0


# =====================================================================================
# 3. Code: which block to grade, the spec, the modes, and how results are compared (here, in the parent)
# =====================================================================================
_PYTHON = ("", "python", "python3", "py")


def _python_blocks(text):
    """The bodies of the fenced blocks of `text` marked python (or unmarked), in order. A block opens at
    a line starting with ``` and closes at the next such line; an unclosed block does not count."""
    blocks, lang, body = [], None, []
    for line in text.split("\n"):
        fence = line.strip().startswith("```")
        if lang is None and fence:
            lang, body = line.strip()[3:].strip().lower(), []
        elif fence:
            if lang in _PYTHON:
                blocks.append("\n".join(body) + "\n")
            lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def extract_code(response, entry_point=None):
    """The fenced python block to grade: the last block that defines `entry_point` (a function name)
    when one does, else the last block. None without a closed python block."""
    blocks = _python_blocks(response) if isinstance(response, str) else []
    if entry_point:
        defines = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(entry_point)}[ \t]*\(", re.M)
        blocks = [b for b in blocks if defines.search(b)] or blocks
    return blocks[-1] if blocks else None


def _check_spec(tests):
    """Test specs as dicts; a malformed one, or one that tests nothing, is the caller's error, raised
    before any work."""
    import ast

    spec = json.loads(tests) if isinstance(tests, str) else dict(tests)
    if "assert" in spec:
        if not isinstance(spec["assert"], str):
            raise ValueError("code tests: 'assert' must hold test source code")
        try:
            tree = ast.parse(spec["assert"])
        except SyntaxError as e:
            raise ValueError(f"code tests: the assert source does not parse: {e}") from None
        if not any(isinstance(node, ast.Assert) for node in ast.walk(tree)):
            raise ValueError("code tests: the assert source holds no assert statement, so it would pass any program")
    elif "inputs" in spec and "outputs" in spec:
        if not isinstance(spec["inputs"], list) or not isinstance(spec["outputs"], list):
            raise ValueError("code tests: inputs and outputs must be lists")
        if spec.get("compare", "default") not in ("default", "lcb"):
            raise ValueError(f"code tests: compare {spec['compare']!r}; default or lcb (LiveCodeBench's rules)")
        t = spec.get("test_timeout")
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf):
            raise ValueError(f"code tests: test_timeout {t!r}; seconds per test, a number > 0")
        if len(spec["inputs"]) != len(spec["outputs"]):
            raise ValueError(f"code tests: {len(spec['inputs'])} inputs but {len(spec['outputs'])} outputs")
        if not spec["inputs"]:
            raise ValueError("code tests: no test inputs, so any program would pass")
        if "fn_name" not in spec and not all(isinstance(x, str) for x in spec["inputs"] + spec["outputs"]):
            raise ValueError("code tests: stdin inputs and outputs must be strings")
        if "fn_name" in spec and not all(isinstance(x, list) for x in spec["inputs"]):
            raise ValueError("code tests: fn_name inputs must be lists of arguments")
    else:
        raise ValueError("code tests need 'assert', or 'inputs' and 'outputs' (with 'fn_name' for calls); "
                         f"got {sorted(spec)}")
    return spec


# Imports that LiveCodeBench's harness (lcb_runner/evaluation/testing_util.py) puts before a solution, in both
# its call-based and stdin modes: LeetCode-style code uses List[int], deque, heappush, ... without importing.
HARNESS_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
                   "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")
HARNESS_IMPORTS = "".join(f"from {m} import *\n" for m in HARNESS_MODULES) + "".join(
    f"import {m}\n" for m in HARNESS_MODULES[:-2]) + "sys.setrecursionlimit(50000)\n"


def _program(setup, code):
    """Setup code (a HumanEval prompt) runs before the solution. A solution that starts indented is a bare
    function body and continues the setup's last `def`."""
    if not setup:
        return code
    if code.lstrip("\n")[:1] in (" ", "\t"):
        return setup.rstrip("\n") + "\n" + code
    return setup + "\n" + code


def _grade(code, spec, timeout):
    """Run a checked spec's tests on `code` in the sandbox. stdin and call results stream back one by one and
    are compared here as they come (nothing is kept); assert mode passes when the tests' process reports
    the nonce it alone was given."""
    sandbox = _sandbox()
    program = _program(spec.get("setup", ""), code)
    if "assert" in spec:  # the setup goes to the tests' side too, which runs its own copy of it (sandbox/)
        nonce = os.urandom(16).hex()
        report = sandbox.run(program, {"mode": "assert", "entry_point": spec.get("entry_point")}, timeout,
                             secret={"assert": spec["assert"], "nonce": nonce, "setup": spec.get("setup", "")},
                             preload=HARNESS_MODULES)
        return 1.0 if report and report.get("verdict") == f"{nonce} ok" else 0.0
    expected, passed, lcb = spec["outputs"], [False] * len(spec["outputs"]), spec.get("compare") == "lcb"
    per_test = {"test_timeout": float(spec["test_timeout"])} if spec.get("test_timeout") else {}
    if "fn_name" in spec:  # LiveCodeBench's rule: the returned value == the expected one (True == 1 too)
        request = {"mode": "call", "fn_name": spec["fn_name"], "inputs": spec["inputs"]}
        compare = (lambda got, exp: got == exp) if lcb else value_matches
        same = lambda data, exp: compare(returned(data), exp)
    else:
        request = {"mode": "stdin", "inputs": spec["inputs"]}
        compare = lcb_stdout_matches if lcb else stdout_matches
        same = lambda data, exp: compare(data.decode("utf-8", "replace"), exp)

    def sink(i, ok, data):  # False (a failed test) ends the item: LiveCodeBench's early exit
        if isinstance(i, int) and 0 <= i < len(passed) and ok:
            try:  # anything the program wrote (a value too deep, too big, not JSON): a mismatch, never our error
                passed[i] = bool(same(data, expected[i]))
            except Exception:
                passed[i] = False
        return isinstance(i, int) and 0 <= i < len(passed) and passed[i]
    report = sandbox.run(HARNESS_IMPORTS + program, dict(request, **per_test), timeout, sink=sink,
                         preload=HARNESS_MODULES)
    return 1.0 if report is not None and all(passed) else 0.0


def returned(data):
    """A call's value as the sandbox sends it: JSON ("J", as LiveCodeBench's harness reads it), else the sandbox's
    own values ("V": what JSON cannot hold, such as a Fraction)."""
    return json.loads(data[1:], parse_int=_int) if data[:1] == b"J" else _sandbox().loads(data[1:])


def _int(digits):
    """An integer of any length from its decimal digits (int() refuses more than 4,300 of them)."""
    if len(digits) <= 4000:
        return int(digits)
    if digits[0] in "+-":
        return -_int(digits[1:]) if digits[0] == "-" else _int(digits[1:])
    half = len(digits) // 2
    return _int(digits[:half]) * 10 ** (len(digits) - half) + _int(digits[half:])


FLOAT_TOLERANCE = 1e-6  # absolute, or relative to the expected value, for expected numbers written as floats
_FLOAT = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+(?:\.\d*)?[eE][+-]?\d+)")


def _close(got, expected):
    return math.isfinite(got) and abs(got - expected) <= FLOAT_TOLERANCE * max(1.0, abs(expected))


def _token_matches(got, expected):
    """Equal text, or, when the expected token is written as a float, a number within the tolerance."""
    if got == expected:
        return True
    if not _FLOAT.fullmatch(expected):
        return False
    try:
        return _close(float(got), float(expected))
    except ValueError:
        return False


def stdout_matches(got, expected):
    """stdin/stdout tests, compared as the public harnesses do: the same non-blank lines, each with the
    same whitespace-separated tokens; a token expected as a float matches within FLOAT_TOLERANCE."""
    rows = lambda s: [line.split() for line in s.splitlines() if line.strip()]
    g, e = rows(got), rows(expected)
    return len(g) == len(e) and all(len(a) == len(b) and all(map(_token_matches, a, b)) for a, b in zip(g, e))


def lcb_stdout_matches(got, expected):
    """LiveCodeBench's own rule (lcb_runner/evaluation/testing_util.py, grade_stdio), for specs with "compare":
    "lcb": both texts stripped and split at newlines, each line stripped; as many lines; each line equal as text,
    or as a list of Decimals (a token that is not a number is a mismatch)."""
    lines = lambda s: [line.strip() for line in s.strip().split("\n")]

    def decimals(line):
        try:
            return [Decimal(token) for token in line.split()]
        except ArithmeticError:
            return None
    g, e = lines(got), lines(expected)
    return len(g) == len(e) and all(a == b or (decimals(a) is not None and decimals(a) == decimals(b))
                                    for a, b in zip(g, e))


def value_matches(got, expected):
    """fn_name tests: equal JSON values (tuples arrive as lists), bools only equal to bools; a number expected
    as an integer only by an equal number (an exact one, a Fraction or a Decimal, too), one expected as a float
    also within FLOAT_TOLERANCE (as stdin's tokens). An expected value wrapped in a one-element list (APPS writes
    call-based outputs so) also accepts the bare value."""
    def same(a, b):
        if isinstance(a, bool) or isinstance(b, bool):
            return a is b
        if isinstance(a, (numbers.Real, Decimal)) and isinstance(b, (int, float)):  # a Fraction too
            return a == b or (isinstance(b, float) and _close(float(a), b))
        if isinstance(a, (list, tuple)) and isinstance(b, list):  # (JSON's lists; a tuple among other values)
            return len(a) == len(b) and all(map(same, a, b))
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in b)
        return type(a) is type(b) and a == b
    return same(got, expected) or (isinstance(expected, list) and len(expected) == 1 and same(got, expected[0]))


_SANDBOX = None


def _sandbox():
    """The sandbox/ package, beside this file, loaded on the first code item (math never needs it)."""
    global _SANDBOX
    if _SANDBOX is None:
        import importlib.util

        folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox")
        path = os.path.join(folder, "__init__.py")
        if not os.path.exists(path):
            raise ModuleNotFoundError(f"rewards.py grades code in the sandbox/ folder, which must sit beside it: {path}"
                                      " is missing (copy the sandbox folder there; math needs only rewards.py)",
                                      name="sandbox")
        known = sys.modules.get("sandbox")
        if known is not None and os.path.realpath(getattr(known, "__file__", "") or "") == os.path.realpath(path):
            _SANDBOX = known  # `import sandbox` and rewards share one module (tests patch it)
        else:
            spec = importlib.util.spec_from_file_location("sandbox", path, submodule_search_locations=[folder])
            _SANDBOX = importlib.util.module_from_spec(spec)
            sys.modules["sandbox"] = _SANDBOX  # (its files import each other through it)
            spec.loader.exec_module(_SANDBOX)
    return _SANDBOX


def __getattr__(name):
    if name == "SandboxError":  # the sandbox's, so that `except rewards.SandboxError` catches what it raises
        return _sandbox().SandboxError
    raise AttributeError(f"module 'rewards' has no attribute {name!r}")


# =====================================================================================
# 4. The worker pool
# =====================================================================================
# Workers are fresh interpreters that load this file (never the caller's __main__, so a script read from
# stdin works and the trainer's imports are not repeated). An item's clock starts when it is sent to a
# worker that reported ready. A worker that overruns is killed and replaced and the item scores 0 (a
# timeout); a worker that fails to start raises; an item that crashes its worker, or whose sandbox
# fails, scores 0 and counts as an error, and a batch in which every item errs raises.
_BOOT = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('rewards', sys.argv[1]); "
         "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); m._serve(int(sys.argv[2]))")
STARTUP_TIMEOUT = 300.0  # seconds a new worker may take to import and report ready


def _serve(fd):
    """The worker's loop: warm up, report ready, then answer (kind, args) with (verdict, error)."""
    conn = mp.connection.Connection(fd)
    logging.disable(logging.WARNING)  # math-verify logs every disabled timeout
    _math_check("\\boxed{x^2}", "x \\cdot x")  # import sympy and math-verify's parser before the first clock
    fns = {"math": _math_check, "code": _code_verdict}  # score_batch checked the specs
    conn.send("ready")
    while True:
        try:
            kind, args = conn.recv()
        except EOFError:
            return
        try:
            conn.send((fns[kind](*args), None))
        except Exception as e:  # a sandbox or verifier failure, reported as such
            conn.send((0.0, f"{type(e).__name__}: {e}"))


def _start_worker():
    here, there = socket.socketpair()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-c", _BOOT, os.path.abspath(__file__), str(there.fileno())],
                            pass_fds=[there.fileno()], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            start_new_session=True)  # Ctrl-C in the terminal is the caller's to handle
    there.close()
    return {"proc": proc, "conn": mp.connection.Connection(here.detach()), "log": log,
            "started": time.monotonic(), "ready": False}


def _stop_worker(w):
    w["proc"].kill()
    w["proc"].wait()
    w["conn"].close()
    w["log"].close()


def _worker_failed_to_start(w):
    with contextlib.suppress(subprocess.TimeoutExpired):
        w["proc"].wait(timeout=5)
    w["log"].seek(0)
    tail = w["log"].read()[-3000:].decode("utf-8", "replace").strip()
    return RuntimeError(f"rewards: a verifier worker failed to start (exit code {w['proc'].poll()}); "
                        f"its output:\n{tail}")


_POOL = []
_POOL_LOCK = threading.Lock()


@atexit.register
def _shutdown():
    while _POOL:
        _stop_worker(_POOL.pop())


def _schedule(kind, items, limits, workers):
    """Send items (argument tuples) to `workers` workers, each with its `limits` seconds once sent; returns
    (verdicts, {item: error}, timeouts). A crashed worker's item is retried once on a fresh worker."""
    results, errors, timeouts = [0.0] * len(items), {}, 0
    with _POOL_LOCK:
        while len(_POOL) < workers:
            _POOL.append(_start_worker())
        todo = list(range(len(items)))[::-1]
        tries = [0] * len(items)
        busy = {}  # worker index -> (item, deadline)
        while todo or busy:
            for i in range(workers):
                w = _POOL[i]
                if w["ready"] and i not in busy and todo:
                    item = todo.pop()
                    try:
                        w["conn"].send((kind, items[item]))
                        busy[i] = (item, time.monotonic() + limits[item])
                    except OSError:  # it died while idle: replace it, keep the item
                        todo.append(item)
                        _stop_worker(w)
                        _POOL[i] = _start_worker()
            waiting = [i for i in range(workers) if i in busy or not _POOL[i]["ready"]]
            deadlines = [d for _, d in busy.values()] + [_POOL[i]["started"] + STARTUP_TIMEOUT
                                                         for i in waiting if i not in busy]
            ready = mp.connection.wait([_POOL[i]["conn"] for i in waiting],
                                       timeout=max(0.0, min(deadlines) - time.monotonic()))
            for i in waiting:
                w = _POOL[i]
                if w["conn"] in ready:
                    try:
                        message = w["conn"].recv()
                    except (EOFError, OSError):
                        message = None
                    if not w["ready"]:
                        if message != "ready":
                            raise _worker_failed_to_start(w)
                        w["ready"] = True
                        continue
                    item = busy.pop(i)[0]
                    if message is None:  # the worker crashed on this item: retry it once on a fresh one
                        tries[item] += 1
                        if tries[item] < 2:
                            todo.append(item)
                        else:
                            errors[item] = "the verifier worker crashed"
                        _stop_worker(w)
                        _POOL[i] = _start_worker()
                        continue
                    results[item] = float(message[0])
                    if message[1]:
                        errors[item] = message[1]
                elif i in busy and time.monotonic() > busy[i][1]:
                    busy.pop(i)
                    timeouts += 1
                    _stop_worker(w)
                    _POOL[i] = _start_worker()
                elif not w["ready"] and time.monotonic() > w["started"] + STARTUP_TIMEOUT:
                    raise _worker_failed_to_start(w)
    return results, errors, timeouts
