"""Verifiers for RL from verifiable rewards: math answers and code. Used by delta.py and eval.py.

    extract_answer(response) -> str | None       last \\boxed{...} after the last </think>
    math_reward(response, gold) -> float         1.0 if that answer equals the gold answer, else 0.0
    code_reward(response, tests, timeout) -> float   1.0 if the last ```python block passes every test
    score_batch(responses, golds, kind="math" | "code") -> list[float]

Every check runs in a pool of worker processes with a wall-clock limit per item: a worker that
overruns is killed and replaced and the item scores 0, so callers never hang and never see an
exception. Model text is never executed by the math path (no sympify/parse_expr on raw strings:
LaTeX goes through math-verify's LaTeX parser). Model code runs in a sandbox (the Code: the sandbox
section below; docs/security.md lists its guarantees and the tests behind them).
"""
import atexit
import contextlib
import functools
import json
import logging
import math
import multiprocessing as mp
import multiprocessing.connection
import os
import re
import select
import shutil
import signal
import site
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from fractions import Fraction

MATH_TIMEOUT = 5.0  # seconds of wall clock per math item, parsing and sympy included
CODE_TIMEOUT = 10.0  # seconds per code item, all its tests together


# =====================================================================================
# Math: extraction
# =====================================================================================
_BOX = re.compile(r"\\(?:boxed|fbox)\b")


def extract_answer(response):
    """The last brace-matched \\boxed{...} (or \\fbox{...}, or `\\boxed x`) after the last </think>.
    None when it is missing, empty or unclosed."""
    boxes = _boxes(response)
    return boxes[-1][0] if boxes else None


_MINERVA = re.compile(r"[Ff]inal [Aa]nswer:?\s*(?:[Tt]he final answer is\s*)?\$([^$]+)\$")


def final_answers(response):
    """The answers to grade: the last box (or a Minerva-style `Final Answer: The final answer is $X$`
    after it), and, when the final answer is a run of boxes joined by short phrases (`\\boxed{-2} and
    \\boxed{1}`, `\\boxed{(3, 3)} for part (a) and \\boxed{(1, 1)}`: at most 60 characters and 4 words
    between boxes, no blank line), the run joined as one list."""
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


# =====================================================================================
# Math: equivalence (runs inside a worker process)
# =====================================================================================
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
    "⅕": r"\frac{1}{5}", "⅙": r"\frac{1}{6}", "⅛": r"\frac{1}{8}", "∞": r"\infty ", "π": r"\pi ", "∅": r"\emptyset ",
    "−": "-", "×": r"\times ", "·": r"\cdot ", "⋅": r"\cdot ", "÷": r"\div ", "≤": r"\le ", "≥": r"\ge ",
    "≠": r"\ne ", "∈": r"\in ", "∪": r"\cup ", "∩": r"\cap ", "θ": r"\theta ", "α": r"\alpha ", "β": r"\beta ",
}
_SUPERSCRIPT = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+"))
_INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")
_SPACES = re.compile("[\u00a0\u2007\u2009\u202f\u3000]")


def _unicode_to_latex(s):
    s = _SPACES.sub(" ", _INVISIBLE.sub("", s))
    s = re.sub("[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+", lambda m: "^{" + "".join(_SUPERSCRIPT[c] for c in m.group()) + "}", s)
    s = re.sub(r"√\s*(\d+(?:\.\d+)?|[A-Za-z]|\{[^{}]*\}|\([^()]*\))",
               lambda m: r"\sqrt{" + m.group(1).strip("{}()") + "}" if m.group(1)[0] in "{(" else r"\sqrt{" + m.group(1) + "}", s)
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
    s = re.sub(r"\\(?:text|mbox|mathrm)\s*\{\s*(?:" + "|".join(_UNITS) + r")(?:\^?\d)?\s*\}(?:\^\{?\d\}?)?", "", s)  # \text{ m}^2
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
    m = re.match(r"^\s*((?:[a-zA-Z]{1,3}|\\[a-zA-Z]+)(?:_\{?\w+\}?)?'*(?:\([a-zA-Z]\))?)\s*(?:=(?!=)|\\in(?![a-zA-Z]))(.*)$",
                 s, re.S)
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
        value = int(m.group(2) or 0) + (Fraction(int(head or 0)) + Fraction(int(rep), 10 ** len(rep) - 1)) / 10 ** len(head)
        return -value if m.group(1) == "-" else value
    m = re.fullmatch(r"([+-]?)\\frac\{([+-]?\d+)\}\{([+-]?\d+)\}", t) or \
        re.fullmatch(r"([+-]?)\\frac(\d)(\d)", t) or re.fullmatch(r"([+-]?)(\d+)/(\d+)", t)
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


_MATRIX = re.compile(r"^[(\[]?\s*\\begin\{(?:(p|b|B|v|V|small|)matrix|array\}\{[^{}]*)\}(.*)\\end\{(?:\1matrix|array)\}\s*[)\]]?$",
                     re.S)


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
            if not (node.exp.is_Rational and abs(node.exp) <= 10_000) and node.base.is_number and node.base not in (0, 1, -1):
                return False
        if isinstance(node, (sympy.factorial, sympy.binomial)) and any(a.is_number and not (a.is_Integer and abs(a) <= 5000)
                                                                      for a in node.args):
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

        return ra == rb or _rounds_to(a, sympy.Rational(rb.numerator, rb.denominator)) or \
            _rounds_to(b, sympy.Rational(ra.numerator, ra.denominator))
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
    return bool(x and y) and all(isinstance(v[0], sympy.Expr) and _computable(v[0]) for v in (x, y)) and \
        x[0].free_symbols == y[0].free_symbols


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


def _math_check(response, gold):
    """Runs in a worker: 1.0 or 0.0, never raises. The project's exact ladder, then math-verify's verdict
    minus the vetoes, for the last box and for a final run of boxes."""
    try:
        gold_text = _gold_text(gold)
        raw_gold = gold_text if isinstance(gold, (int, float)) else str(gold)
        for pred in final_answers(response):
            if _too_complex(pred):  # no parser gets it: the strings decide
                if _clean(pred) == _clean(gold_text):
                    return 1.0
            elif (not _too_complex(gold_text) and _equal(pred, gold_text)) or _mv_equal(pred, gold_text, raw_gold):
                return 1.0
        return 0.0
    except Exception:
        return 0.0


# =====================================================================================
# Code: which block to grade, and how outputs are compared (in the parent, never in the sandbox)
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


def value_matches(got, expected):
    """fn_name tests: equal JSON values (tuples arrive as lists), floats within FLOAT_TOLERANCE, bools
    only equal to bools. An expected value wrapped in a one-element list (APPS writes call-based outputs
    so) also accepts the bare value."""
    def same(a, b):
        if isinstance(a, bool) or isinstance(b, bool):
            return a is b
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a == b if isinstance(a, int) and isinstance(b, int) else a == b or _close(a, b)
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(map(same, a, b))
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in b)
        return type(a) is type(b) and a == b
    return same(got, expected) or (isinstance(expected, list) and len(expected) == 1 and same(got, expected[0]))


# =====================================================================================
# Code: the sandbox
# =====================================================================================
# Each calling thread has a zygote: a fresh interpreter (the string below, started once) that has loaded
# the driver and the harness's modules and, outside any namespace, forks one process per item. That process
# takes its own session, joins the item's cgroups (processes, memory), enters fresh network, PID, IPC, UTS
# and mount namespaces and forks the driver, PID 1 of them. The zygote never reads a request; it kills an
# item's session when the caller's deadline passes, and kills and reaps whatever the item left (their
# subreaper). The driver builds the program's root from nothing (a tmpfs with read-only binds of /usr, the
# library folders and the Python installation, a minimal /dev, its own /proc, a size-limited tmpfs /work),
# pivots into it, joins a fresh session keyring, writes "confined", and only then forks the program's
# processes, which drop to fresh unprivileged uids with no capability, no_new_privs, resource limits and a
# seccomp filter. The driver is never the program: the program never holds the report channel, and what it
# writes reaches the parent as data in the report.
#   stdin:  each input in a fresh fork as __main__, its stdout to a file; the parent compares.
#   call:   the program loaded as module `solution`; one JSON line per call; the parent compares.
#   assert: the program's process serves its objects over a socket to a second process (another uid, not
#           dumpable) that runs the tests against handles and, if they all pass, writes the nonce. That
#           process is forked only after the program's, from the driver, which only then reads the tests
#           and the nonce: the program never holds them, and a value crosses to the tests as plain data.
_DRIVER = r'''
import ctypes, json, numbers, os, resource, sys

libc = ctypes.CDLL(None, use_errno=True)
ARCH = os.uname().machine
NR = {"x86_64": dict(audit=0xC000003E, unshare=272, setns=308, clone=56, clone3=435, keyctl=250, add_key=248,
                     request_key=249, ptrace=101, process_vm_readv=310, process_vm_writev=311, kcmp=312, pidfd_getfd=438,
                     perf_event_open=298, bpf=321, userfaultfd=323, io_uring_setup=425, mount=165, umount2=166,
                     pivot_root=155, chroot=161, open_tree=428, move_mount=429, fsopen=430, fsmount=432, fspick=433),
      "aarch64": dict(audit=0xC00000B7, unshare=97, setns=268, clone=220, clone3=435, keyctl=219, add_key=217,
                      request_key=218, ptrace=117, process_vm_readv=270, process_vm_writev=271, kcmp=272, pidfd_getfd=438,
                      perf_event_open=241, bpf=280, userfaultfd=282, io_uring_setup=425, mount=40, umount2=39,
                      pivot_root=41, chroot=51, open_tree=428, move_mount=429, fsopen=430, fsmount=432, fspick=433)}.get(ARCH)


def check(ok, what):
    if ok != 0:
        raise OSError(ctypes.get_errno(), what)


def mount(src, dst, flags, fstype=None, data=None):
    enc = lambda s: s.encode() if s else None
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    check(libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {dst}")


RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC, PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18


def read_exact(fd, n):
    out = b""
    while len(out) < n:
        part = os.read(fd, n - len(out))
        if not part:
            raise EOFError
        out += part
    return out


def frame(fd):  # a length-prefixed JSON object, read without buffering ahead (a fork must not inherit more)
    return json.loads(read_exact(fd, int.from_bytes(read_exact(fd, 8), "big")))


def build_root(req):
    """A fresh root: tmpfs, read-only binds of what Python needs, a minimal /dev, its own /proc, a
    size-limited tmpfs /work (/tmp and /dev/shm point there); then pivot_root, the host gone."""
    root = req["root"]
    mount(None, "/", REC | PRIVATE)
    mount("tmpfs", root, NOSUID | NODEV, "tmpfs", "size=8m,mode=755")
    os.makedirs(root + "/work")  # first: a Python installation may live below /tmp or /work (a venv there)
    mount("tmpfs", root + "/work", NOSUID | NODEV, "tmpfs", f"size={req['disk']},nr_inodes={req['files']},mode=1777")
    os.makedirs(root + "/tmp")
    mount(root + "/work", root + "/tmp", BIND)  # /tmp is /work
    for src in req["binds"]:
        dst = root + src
        if os.path.islink(src):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.lexists(dst):
                os.symlink(os.readlink(src), dst)
            continue
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            open(dst, "w").close()
        mount(src, dst, BIND | REC)
        f = os.statvfs(dst).f_flag  # keep the flags a user namespace locks: nosuid, nodev, noexec, atime
        mount(None, dst, REMOUNT | BIND | RDONLY | (f & (NOSUID | NODEV | NOEXEC | 1024 | 2048)) | (1 << 21 if f & 4096 else 0))
    os.makedirs(root + "/dev")
    mount("tmpfs", root + "/dev", NOSUID | NOEXEC, "tmpfs", "size=64k,mode=755")
    for name in ("null", "zero", "random", "urandom"):
        open(f"{root}/dev/{name}", "w").close()
        mount(f"/dev/{name}", f"{root}/dev/{name}", BIND)
    os.symlink("/work", root + "/dev/shm")
    os.symlink("/proc/self/fd", root + "/dev/fd")
    os.makedirs(root + "/proc")
    for options in ("hidepid=invisible,subset=pid", "hidepid=2", None):  # this PID namespace's processes only
        try:
            mount("proc", root + "/proc", NOSUID | NODEV | NOEXEC, "proc", options)
            break
        except OSError:
            continue
    os.makedirs(root + "/.old")
    mount(None, root, REMOUNT | RDONLY | NOSUID | NODEV)  # the root itself is read-only
    os.chdir(root)
    check(libc.syscall(NR["pivot_root"] if NR else 155, b".", b".old"), "pivot_root")
    check(libc.umount2(b"/.old", 2), "umount the host")  # MNT_DETACH
    os.chdir("/work")


def confine(req):
    """The driver's own confinement, before any program: the fresh root, a session keyring of its own (the
    caller's keys are not the program's)."""
    if req["namespaces"]:
        build_root(req)
    else:
        os.chdir(req["root"])
    libc.syscall(NR["keyctl"] if NR else 250, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING: a new, empty one
    sys.path.extend(req["site"])  # the interpreter's site-packages, for the program's imports


def seccomp():
    """A filter: no namespaces, no keyrings, no tracing of other processes, no mounts, no eBPF or io_uring."""
    if not NR:
        return
    EPERM, ENOSYS, ALLOW, KILL = 0x50001, 0x50026, 0x7FFF0000, 0x80000000
    prog = [(0x20, 0, 0, 4), (0x15, 1, 0, NR["audit"]), (0x06, 0, 0, KILL), (0x20, 0, 0, 0)]
    if ARCH == "x86_64":
        prog += [(0x35, 0, 1, 0x40000000), (0x06, 0, 0, EPERM)]  # the x32 ABI
    for name in ("unshare", "setns", "keyctl", "add_key", "request_key", "ptrace", "process_vm_readv", "process_vm_writev",
                 "kcmp", "pidfd_getfd", "perf_event_open", "bpf", "userfaultfd", "io_uring_setup", "mount", "umount2",
                 "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsmount", "fspick"):
        prog += [(0x15, 0, 1, NR[name]), (0x06, 0, 0, EPERM)]
    prog += [(0x15, 0, 1, NR["clone3"]), (0x06, 0, 0, ENOSYS),  # glibc falls back to clone
             (0x15, 0, 3, NR["clone"]), (0x20, 0, 0, 16), (0x45, 0, 1, 0x7E020000), (0x06, 0, 0, EPERM),  # CLONE_NEW*
             (0x06, 0, 0, ALLOW)]

    class Insn(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]
    insns = (Insn * len(prog))(*[Insn(*i) for i in prog])
    check(libc.prctl(22, 2, ctypes.byref(Prog(len(prog), insns)), 0, 0), "seccomp")


def drop(req, uid, keep_fds, dumpable=True):
    """In a fork, before any program code: only the given descriptors, the resource limits, a fresh
    unprivileged uid (a root caller), no capability, no_new_privs, the seccomp filter."""
    for fd in range(3, 256):
        if fd not in keep_fds:
            try:
                os.close(fd)
            except OSError:
                pass
    for name, value in req["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    for cap in range(64):  # an empty bounding set: no exec can grant a capability again
        if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break
    if uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    libc.capset(ctypes.byref(Header(0x20080522, 0)), ctypes.byref((ctypes.c_uint32 * 6)()))
    check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
    if not dumpable:  # no other process of this uid may read this one's memory
        check(libc.prctl(4, 0, 0, 0, 0), "dumpable")
    seccomp()


def quiet():
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)


def spawn(req, uid, keep, body, dumpable=True):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            quiet()
            drop(req, uid, keep, dumpable)
            code = body()
        except BaseException:
            pass
        os._exit(code or 0)
    return pid


def slurp(fd, limit):
    out = b""
    while True:
        part = os.read(fd, 65536)
        if not part:
            return out
        out += part[:max(0, limit - len(out))]


def load(req, name):
    g = {"__name__": name, "__builtins__": __builtins__}
    exec(compile(req["program"], "solution.py", "exec"), g)
    return g


def run_stdin(req):
    results = []
    for i, inp in enumerate(req["inputs"]):
        with open(f".in{i}", "w") as f:
            f.write(inp)
        os.chmod(f".in{i}", 0o644)

        def body():
            os.dup2(os.open(f".in{i}", os.O_RDONLY), 0)
            os.dup2(os.open(f".out{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
            sys.stdin = open(0, closefd=False)
            sys.stdout = open(1, "w", closefd=False)
            try:
                exec(compile(req["program"], "solution.py", "exec"), {"__name__": "__main__"})
            except SystemExit as e:
                sys.stdout.flush()
                return 0 if e.code in (None, 0) else 1
            sys.stdout.flush()
            return 0
        pid = spawn(req, req["uids"][0], (), body)
        status = os.waitpid(pid, 0)[1]
        try:
            with open(f".out{i}", "rb") as f:
                out = f.read(req["output_limit"])
        except OSError:
            out = b""
        results.append({"ok": os.waitstatus_to_exitcode(status) == 0, "out": out.decode("utf-8", "replace")})
    return {"results": results}


def run_call(req):
    r, w = os.pipe()

    def body():
        g = load(req, "solution")
        f = getattr(g["Solution"](), req["fn_name"]) if "Solution" in g else g[req["fn_name"]]
        for args in req["inputs"]:
            try:
                line = json.dumps(f(*args))
            except BaseException:
                line = "null"  # an error or a value JSON cannot hold: a mismatch
            os.write(w, line.encode() + b"\n")
        return 0
    pid = spawn(req, req["uids"][0], (w,), body)
    os.close(w)
    out = slurp(r, req["output_limit"])
    os.waitpid(pid, 0)
    return {"lines": out.decode("utf-8", "replace")}


class Channel:
    """Objects of one process lent to another over a socket: plain data crosses by value (exact builtin
    types only; a number-like object as the int or float it converts to), anything else as a handle that
    the other side can only use through this channel. The tests' side lends its callables for calls only;
    the program's side answers calls, attributes, items, len, iteration, membership, repr and truth."""
    LIMIT = 16 << 20

    def __init__(self, sock, full):
        self.sock, self.full, self.objects = sock, full, {}

    def send(self, msg):
        data = json.dumps(msg).encode()
        if len(data) > self.LIMIT:
            raise ValueError("message too large")
        self.sock.sendall(len(data).to_bytes(8, "big") + data)

    def recv(self):
        def exact(n):
            out = b""
            while len(out) < n:
                part = self.sock.recv(n - len(out))
                if not part:
                    raise EOFError("the other side is gone")
                out += part
            return out
        n = int.from_bytes(exact(8), "big")
        if n > self.LIMIT:
            raise ValueError("message too large")
        return json.loads(exact(n))

    def enc(self, x, depth=0):
        if depth > 100:
            raise ValueError("too deep")
        t = type(x)
        if x is None or t in (bool, str):
            return x
        if t is int:
            return x if abs(x) < 1 << 53 else {"int": str(x)}
        if t is float:
            return {"float": repr(x)}
        if t is complex:
            return {"complex": [repr(x.real), repr(x.imag)]}
        if t is bytes:
            return {"bytes": x.hex()}
        if t in (list, tuple, set, frozenset):
            return {t.__name__: [self.enc(v, depth + 1) for v in x]}
        if t is dict:
            return {"dict": [[self.enc(k, depth + 1), self.enc(v, depth + 1)] for k, v in x.items()]}
        if t is Remote and x._channel is self:
            return {"yours": x._h}
        if self.full and isinstance(x, numbers.Integral):
            return self.enc(int(x))
        if self.full and isinstance(x, numbers.Real):
            return self.enc(float(x))
        if self.full and type(x).__module__.split(".")[0] == "numpy" and hasattr(x, "tolist"):
            return self.enc(x.tolist(), depth + 1)
        self.objects[id(x)] = x
        return {"mine": id(x)}

    def dec(self, v):
        if not isinstance(v, dict):
            return v
        (kind, x), = v.items()
        if kind == "int":
            return int(x)
        if kind == "float":
            return float(x)
        if kind == "complex":
            return complex(float(x[0]), float(x[1]))
        if kind == "bytes":
            return bytes.fromhex(x)
        if kind in ("list", "tuple", "set", "frozenset"):
            return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[kind](self.dec(e) for e in x)
        if kind == "dict":
            return {self.dec(k): self.dec(e) for k, e in x}
        if kind == "mine":
            return Remote(self, x)
        if kind == "yours":
            return self.objects[x]
        raise ValueError(kind)

    def request(self, op, *args, **kwargs):
        self.send({"op": op, "args": [self.enc(a) for a in args], "kw": {k: self.enc(a) for k, a in kwargs.items()}})
        while True:
            msg = self.recv()
            if "op" in msg:  # a call back while the other side works on ours
                self.serve(msg)
            elif "err" in msg:
                kind = getattr(__builtins__, str(msg["err"][0]), None)
                raise (kind if isinstance(kind, type) and issubclass(kind, Exception) else RuntimeError)(str(msg["err"][1]))
            else:
                return self.dec(msg["ok"])

    def serve(self, msg):
        try:
            args, kw = [self.dec(a) for a in msg["args"]], {k: self.dec(a) for k, a in msg["kw"].items()}
            op, obj = msg["op"], args[0] if args else None
            if op == "call":
                result = obj(*args[1:], **kw)
            elif not self.full:
                raise PermissionError("only calls")
            else:
                result = {"getattr": lambda: getattr(obj, args[1]), "setattr": lambda: setattr(obj, args[1], args[2]),
                          "getitem": lambda: obj[args[1]], "setitem": lambda: obj.__setitem__(args[1], args[2]),
                          "delitem": lambda: obj.__delitem__(args[1]), "len": lambda: len(obj), "list": lambda: list(obj),
                          "contains": lambda: args[1] in obj, "repr": lambda: repr(obj), "str": lambda: str(obj),
                          "bool": lambda: bool(obj)}[op]()
            reply = {"ok": self.enc(result)}
        except BaseException as e:
            reply = {"err": [type(e).__name__, str(e)[:500]]}
        self.send(reply)


class Remote:
    """An object of the program, in the tests' process: every use goes through the channel. Equality is
    identity, so an object that claims to equal everything cannot pass an assert here."""
    __slots__ = ("_channel", "_h")

    def __init__(self, channel, h):
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_h", h)

    def __getattr__(self, name):
        return self._channel.request("getattr", self, name)

    def __setattr__(self, name, value):
        self._channel.request("setattr", self, name, value)

    def __call__(self, *args, **kwargs):
        return self._channel.request("call", self, *args, **kwargs)

    def __getitem__(self, key):
        return self._channel.request("getitem", self, key)

    def __setitem__(self, key, value):
        self._channel.request("setitem", self, key, value)

    def __delitem__(self, key):
        self._channel.request("delitem", self, key)

    def __len__(self):
        return self._channel.request("len", self)

    def __iter__(self):
        return iter(self._channel.request("list", self))

    def __contains__(self, x):
        return self._channel.request("contains", self, x)

    def __repr__(self):
        return self._channel.request("repr", self)

    def __str__(self):
        return self._channel.request("str", self)

    def __bool__(self):
        return self._channel.request("bool", self)

    def __eq__(self, other):
        return type(other) is Remote and other._h == self._h

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._h)


def run_assert(req):
    """The program and the tests in two processes: the program's (forked before the tests and the nonce
    were read) serves its objects; the tests' (another uid, not dumpable) runs them against handles and,
    only when every test passed, writes the nonce."""
    import socket

    a, b = socket.socketpair()

    def program():
        g = load(req, "solution")
        ch = Channel(b, full=True)
        ch.send({"globals": {k: ch.enc(v) for k, v in g.items() if not k.startswith("__")}})
        while True:
            try:
                msg = ch.recv()
            except EOFError:
                return 0
            ch.serve(msg)
    server = spawn(req, req["uids"][0], (b.fileno(),), program)
    secret = frame(REQUEST)  # only now: the program's process never held the tests or the nonce
    r, w = os.pipe()

    def tests():
        ch = Channel(a, full=False)
        names = {k: ch.dec(v) for k, v in ch.recv()["globals"].items()}
        exec(compile(secret["assert"], "tests.py", "exec"), dict(names, __name__="tests", __builtins__=__builtins__))
        os.write(w, (secret["nonce"] + " ok\n").encode())
        return 0
    tester = spawn(req, req["uids"][1], (a.fileno(), w), tests, dumpable=False)
    del secret
    for fd in (a, b):
        fd.close()
    os.close(w)
    out = slurp(r, 1024)
    os.waitpid(tester, 0)
    os.kill(server, 9)
    os.waitpid(server, 0)
    return {"verdict": out.decode("utf-8", "replace")}


def driver():
    """The item's PID 1: reads the request, confines itself, says "confined", runs the mode, reports."""
    global REQUEST
    req = frame(0)
    try:
        confine(req)
    except Exception as e:
        print(f"sandbox: {type(e).__name__}: {e}", file=sys.stderr)
        os._exit(97)
    REQUEST, report = os.dup(0), os.dup(1)  # the rest of the request (assert mode), the report channel
    os.write(report, b"confined\n")
    quiet()
    out = {"stdin": run_stdin, "call": run_call, "assert": run_assert}[req["mode"]](req)
    os.write(report, json.dumps(out).encode())
    os._exit(0)


NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET = 0x20000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000


def enter_namespaces(mode):
    """Fresh mount, UTS, IPC, network and PID namespaces (the PID one for the next fork); an unprivileged
    caller's inside a user namespace whose root is the caller."""
    if mode == "root-ns":
        check(libc.unshare(NEWNS | NEWUTS | NEWIPC | NEWPID | NEWNET), "unshare")
    elif mode == "user-ns":
        uid, gid = os.getuid(), os.getgid()
        check(libc.unshare(NEWUSER | NEWNS | NEWUTS | NEWIPC | NEWPID | NEWNET), "unshare")
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)


def item(header):
    """A fork of the zygote for one item: its own session, the item's cgroups, fresh namespaces, and the
    driver, forked into them (PID 1), which dies with it (and it with the zygote)."""
    os.setsid()
    libc.prctl(1, 9)  # PR_SET_PDEATHSIG: SIGKILL
    for path in header["cgroups"]:
        with open(path + "/cgroup.procs", "w") as f:
            f.write("0")  # this process and all it starts, whatever its pid namespace
    enter_namespaces(header["mode"])
    pid = os.fork()
    if pid == 0:
        libc.prctl(1, 9)  # (should this process end first, the driver still is in its session, which a kill ends)
        driver()
    for fd in (0, 1, 2):
        os.close(fd)
    os.waitpid(pid, 0)
    os._exit(0)


def zygote(modules):
    """Serves one caller, one item at a time: forks `item` for a header and three descriptors (request,
    report, log), tells the caller when it ended, and kills it when the caller asks. It loads the
    interpreter, this script and the harness's modules once; it never sees a request."""
    import select, socket
    for m in modules:
        __import__(m)
    sock = socket.socket(fileno=os.dup(0))
    quiet()
    libc.prctl(1, 9)  # PR_SET_PDEATHSIG: SIGKILL with the caller
    libc.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: an item's orphans become this process's children
    sock.send(b"ready")
    while True:
        try:
            header, fds, _, _ = socket.recv_fds(sock, 65536, 3)
        except OSError:
            return
        if not header:
            return  # the caller is gone
        if len(fds) != 3:
            continue  # a late kill request for an item that had already ended
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                for i, fd in enumerate(fds):
                    os.dup2(fd, i)
                    os.close(fd)
                item(json.loads(header))
            except BaseException as e:
                print(f"sandbox: {type(e).__name__}: {e}", file=sys.stderr)
            finally:
                os._exit(1)
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        if sock in select.select([sock, pidfd], [], [])[0]:  # a kill request, or the caller gone
            try:
                os.killpg(pid, 9)  # the item's session: the driver, and with it its PID namespace
            except OSError:
                pass
        os.close(pidfd)
        os.waitpid(pid, 0)
        while True:  # processes that left the item's session, orphaned to this subreaper: killed and reaped
            with open(f"/proc/self/task/{os.getpid()}/children") as f:
                left = [int(p) for p in f.read().split()]
            if not left:
                break
            for p in left:
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            for p in left:
                os.waitpid(p, 0)
        try:
            sock.send(b"ended")
        except OSError:
            return


def probe(mode):
    pid = os.fork()
    if pid == 0:
        try:
            enter_namespaces(mode)
            os._exit(0 if os.fork() == 0 else os.waitstatus_to_exitcode(os.wait()[1]))
        finally:
            os._exit(1)
    os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))


{"zygote": lambda: zygote(sys.argv[2:]), "probe": lambda: probe(sys.argv[2])}[sys.argv[1]]()
'''


LIMITS = {  # of one sandboxed item, all its processes together where a cgroup can hold them
    "memory": 1 << 30, "processes": 64, "disk": 256 << 20, "files": 4096, "file_size": 64 << 20, "open_files": 64,
    "output": 1 << 20}
# Imports that LiveCodeBench's harness (lcb_runner/evaluation/testing_util.py) puts before a solution, in both
# its call-based and stdin modes: LeetCode-style code uses List[int], deque, heappush, ... without importing.
HARNESS_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
                   "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")
HARNESS_IMPORTS = "".join(f"from {m} import *\n" for m in HARNESS_MODULES) + "".join(
    f"import {m}\n" for m in HARNESS_MODULES[:-2]) + "sys.setrecursionlimit(50000)\n"


class SandboxError(RuntimeError):
    """The sandbox itself failed before the program ran: an infrastructure failure, never a verdict."""


_MODE = None


def _sandbox_mode():
    """How to isolate, checked once: 'root-ns' (the caller is root: namespaces made as root, programs run as
    fresh unprivileged uids), 'user-ns' (an unprivileged caller: namespaces through a user namespace whose
    root is the caller), or 'none' (no namespaces; a warning says what is missing)."""
    global _MODE
    if _MODE is None:
        _MODE = "root-ns" if os.geteuid() == 0 else "user-ns"
        try:
            ok = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", _DRIVER, "probe", _MODE],
                                capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if not ok:
            _MODE = "none"
            warnings.warn("rewards: Linux namespaces are unavailable, so sandboxed code sees the host's files and "
                          "network (a fresh interpreter, a temp dir, resource limits, a seccomp filter and, for a "
                          "root caller, fresh unprivileged uids remain)")
    return _MODE


_CGROUPS = None


def _item_cgroups():
    """Fresh cgroups for one item, where this process may make them: pids (LIMITS processes) and memory
    (LIMITS memory, no swap), cgroup v1 or v2. [] where it may not (a warning, once): then each process has
    an address-space limit instead, and the processes are bounded by RLIMIT_NPROC and the PID namespace."""
    global _CGROUPS
    if _CGROUPS is None:
        _CGROUPS = []
        v2 = "/sys/fs/cgroup"
        if os.path.exists(f"{v2}/cgroup.controllers"):
            with contextlib.suppress(OSError):
                with open(f"{v2}/cgroup.subtree_control", "w") as f:
                    f.write("+pids +memory")
            candidates = [(v2, ("pids.max", "memory.max"))]
        else:
            candidates = [(f"{v2}/pids", ("pids.max",)), (f"{v2}/memory", ("memory.limit_in_bytes",))]
        for base, files in candidates:
            probe = os.path.join(base, f"rlvr-probe-{os.getpid()}")
            try:
                os.mkdir(probe)
                ok = all(os.path.exists(os.path.join(probe, f)) for f in files)
                os.rmdir(probe)
            except OSError:
                continue
            if ok:
                _CGROUPS.append((base, files))
        if len(_CGROUPS) < (1 if os.path.exists(f"{v2}/cgroup.controllers") else 2):
            warnings.warn("rewards: no writable pids and memory cgroups: each sandboxed process gets an address-space "
                          "limit instead of the item a memory limit")
    paths = []
    for base, files in _CGROUPS:
        path = os.path.join(base, f"rlvr-{os.getpid()}-{os.urandom(4).hex()}")
        os.mkdir(path)
        paths.append(path)
        for name in files:
            value = LIMITS["processes"] if name.startswith("pids") else LIMITS["memory"]
            with open(os.path.join(path, name), "w") as f:
                f.write(str(value))
        for name, value in (("memory.swap.max", "0"), ("memory.memsw.limit_in_bytes", str(LIMITS["memory"]))):
            with contextlib.suppress(OSError):  # no swap for the item where the kernel accounts it
                with open(os.path.join(path, name), "w") as f:
                    f.write(value)
    return paths


def _memory_limited(cgroups):
    return any(os.path.exists(os.path.join(p, f)) for p in cgroups for f in ("memory.max", "memory.limit_in_bytes"))


def _binds():
    """What the program's root holds, read-only: the system's /usr and library folders (symlinks kept), the
    dynamic loader's cache, and the Python installation with its site-packages (real paths)."""
    out = [p for p in ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc/ld.so.cache",
                       "/etc/localtime") if os.path.lexists(p)]
    python = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages())}
    python.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    covered = lambda p: any(p == q or p.startswith(q.rstrip("/") + "/") for q in out if os.path.isdir(q))
    for p in sorted(python):
        if os.path.isdir(p) and not covered(os.path.realpath(p)):
            out.append(p)
    return out


def _sweep(cgroups, mode, uids):
    """After the zygote killed the item's session (and with its driver the PID namespace): without
    namespaces, every process of the fresh uids (a daemon that left the session); then whatever the
    cgroups still hold; the cgroups go."""
    for uid in (set(uids) - {0}) if mode == "none" else ():
        pid = os.fork()
        if pid == 0:
            try:
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    for cgroup in cgroups:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with open(os.path.join(cgroup, "cgroup.procs")) as f:
                left = [int(p) for p in f.read().split()]
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        with contextlib.suppress(OSError):
            os.rmdir(cgroup)


def _remove(path):
    """A work folder, however deep a program nested it (rmtree recurses; GNU rm does not)."""
    shutil.rmtree(path, ignore_errors=True)
    if os.path.exists(path):
        subprocess.run(["rm", "-rf", "--one-file-system", path], capture_output=True)


def _frame(obj):
    data = json.dumps(obj).encode()
    return len(data).to_bytes(8, "big") + data


def _feed(pipe, data):
    with contextlib.suppress(OSError):  # a driver that died early stops reading
        with pipe:
            pipe.write(data)


_ZYGOTES = threading.local()  # one per calling thread


def _zygote():
    """This thread's zygote (started on first use, again if it died): a fresh interpreter, outside any
    namespace, that has loaded the driver and the harness's modules and forks one process per item."""
    z = getattr(_ZYGOTES, "z", None)
    if z is not None and z[0].poll() is None:
        return z[1]
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # messages keep their bounds
    env = {"PATH": "/usr/bin:/bin", "HOME": "/work", "TMPDIR": "/work", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "MALLOC_ARENA_MAX": "2"}
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-B", "-c", _DRIVER, "zygote", *HARNESS_MODULES], cwd="/",
                            env=env, stdin=there, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    there.close()
    if not select.select([here], [], [], 60)[0] or here.recv(16) != b"ready":
        proc.kill()
        raise SandboxError(f"the sandbox's zygote did not start: {proc.communicate()[1][-2000:].decode(errors='replace')}")
    proc.stderr.close()
    _ZYGOTES.z = (proc, here)
    return here


def _run_sandboxed(program, request, timeout, secret=None):
    """Run `program` in the sandbox (docs/security.md). `request`: the mode and the tests'
    inputs, never their expected outputs; `secret`: in assert mode the tests and the nonce, sent only after
    the program's process exists. Returns the driver's report (a dict), or None when the run overran or
    ended before reporting; raises SandboxError when the confinement failed before the program ran."""
    mode = _sandbox_mode()
    fresh = lambda: 0x70000000 + int.from_bytes(os.urandom(3), "big")  # uids no system convention uses
    uids = [fresh(), fresh()] if os.geteuid() == 0 and mode != "user-ns" else [0, 0]
    work = tempfile.mkdtemp(prefix="rlvr-code-")  # with namespaces the empty mount point of the program's root
    cgroups = _item_cgroups()
    try:
        if mode == "none" and uids[0]:
            os.chown(work, uids[0], uids[0])
        limits = {"RLIMIT_FSIZE": LIMITS["file_size"], "RLIMIT_CORE": 0, "RLIMIT_NOFILE": LIMITS["open_files"],
                  "RLIMIT_CPU": int(timeout) + 1}
        if not _memory_limited(cgroups):
            limits["RLIMIT_AS"] = LIMITS["memory"]  # per process; MALLOC_ARENA_MAX keeps threads within it
        if uids[0]:  # RLIMIT_NPROC counts every process of a uid: it bounds this run only under its own fresh uid
            limits["RLIMIT_NPROC"] = LIMITS["processes"]
        public = dict(request, program=program, namespaces=mode != "none", root=work, uids=uids, limits=limits,
                      binds=_binds(), disk=LIMITS["disk"], files=LIMITS["files"],
                      site=[os.path.realpath(p) for p in site.getsitepackages()], output_limit=LIMITS["output"])
        with tempfile.TemporaryFile() as channel, tempfile.TemporaryFile() as log:
            zygote = _zygote()
            r, w = os.pipe()
            try:
                socket.send_fds(zygote, [json.dumps({"mode": mode, "cgroups": cgroups}).encode()],
                                [r, channel.fileno(), log.fileno()])
            finally:
                os.close(r)
            feed = threading.Thread(target=_feed, args=(open(w, "wb"), _frame(public) + _frame(secret or {})),
                                    daemon=True)
            feed.start()
            overran = not select.select([zygote], [], [], timeout)[0]
            if overran:
                zygote.send(b"kill")
            ended = zygote.recv(16) == b"ended"
            _sweep(cgroups, mode, uids)
            feed.join()
            if not ended:
                raise SandboxError("the sandbox's zygote died")
            channel.seek(0)
            head, _, body = channel.read(len(request.get("inputs", ())) * (LIMITS["output"] + 64) + (2 << 20)).partition(b"\n")
            if head != b"confined":  # only the driver ran: a failure now is the sandbox's, a kill the deadline's
                if not overran:
                    log.seek(0)
                    raise SandboxError("the sandbox failed before running the code: "
                                       f"{log.read(2000).decode('utf-8', 'replace').strip()}")
                return None
    finally:
        _remove(work)
    try:
        report = json.loads(body)
    except Exception:  # a report cut short by the deadline
        return None
    return report if isinstance(report, dict) else None


def _program(setup, code):
    """Setup code (a HumanEval prompt) runs before the solution. A solution that starts indented is a bare
    function body and continues the setup's last `def`."""
    if not setup:
        return code
    if code.lstrip("\n")[:1] in (" ", "\t"):
        return setup.rstrip("\n") + "\n" + code
    return setup + "\n" + code


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
        if len(spec["inputs"]) != len(spec["outputs"]):
            raise ValueError(f"code tests: {len(spec['inputs'])} inputs but {len(spec['outputs'])} outputs")
        if not spec["inputs"]:
            raise ValueError("code tests: no test inputs, so any program would pass")
        if "fn_name" not in spec and not all(isinstance(x, str) for x in spec["inputs"] + spec["outputs"]):
            raise ValueError("code tests: stdin inputs and outputs must be strings")
        if "fn_name" in spec and not all(isinstance(x, list) for x in spec["inputs"]):
            raise ValueError("code tests: fn_name inputs must be lists of arguments")
    else:
        raise ValueError(f"code tests need 'assert', or 'inputs' and 'outputs' (with 'fn_name' for calls); got {sorted(spec)}")
    return spec


def run_tests(code, tests, timeout=CODE_TIMEOUT):
    """1.0 when `code` passes every test, else 0.0 (see code_reward for `tests`); never an exception for
    anything the program does. Raises SandboxError when the sandbox itself fails and ValueError for
    malformed tests."""
    spec = _check_spec(tests)
    if "assert" in spec:
        nonce = os.urandom(16).hex()
        report = _run_sandboxed(_program(spec.get("setup", ""), code), {"mode": "assert"}, timeout,
                                secret={"assert": spec["assert"], "nonce": nonce})
        return 1.0 if report and report.get("verdict") == f"{nonce} ok\n" else 0.0
    program = HARNESS_IMPORTS + _program(spec.get("setup", ""), code)
    if "fn_name" in spec:
        report = _run_sandboxed(program, {"mode": "call", "fn_name": spec["fn_name"], "inputs": spec["inputs"]}, timeout)
        lines = str((report or {}).get("lines", "")).split("\n")[:len(spec["outputs"])]
        try:
            values = [json.loads(line) for line in lines]
        except Exception:  # anything the program wrote: never an exception of ours
            return 0.0
        try:  # a value nested too deep for the comparison is a mismatch, never our exception
            return 1.0 if len(values) == len(spec["outputs"]) and all(map(value_matches, values, spec["outputs"])) else 0.0
        except Exception:
            return 0.0
    report = _run_sandboxed(program, {"mode": "stdin", "inputs": spec["inputs"]}, timeout)
    got = (report or {}).get("results", [])
    ok = isinstance(got, list) and len(got) == len(spec["outputs"]) and all(
        isinstance(r, dict) and r.get("ok") is True and stdout_matches(str(r.get("out")), exp)
        for r, exp in zip(got, spec["outputs"]))
    return 1.0 if ok else 0.0


def code_reward(response, tests, timeout=CODE_TIMEOUT, entry_point=None):
    """1.0 when the graded python block of `response` passes every test, else 0.0.

    tests (dict or JSON string), one of:
      {"inputs": [stdin text], "outputs": [expected stdout]}          stdin programs
      {"fn_name": name, "inputs": [argument lists], "outputs": [return values]}   call-based
      {"assert": test source, "setup": code run first, "entry_point": name}     HumanEval/MBPP style
    The graded block is the last one defining the entry point (`entry_point`, the spec's entry_point or
    fn_name) when one does, else the last block. Raises SandboxError when the sandbox itself fails and
    ValueError for malformed tests; a wrong, crashing or slow program scores 0.0.
    """
    spec = _check_spec(tests)
    code = extract_code(response, entry_point or spec.get("entry_point") or spec.get("fn_name"))
    return 0.0 if code is None else run_tests(code, spec, timeout)


# =====================================================================================
# Worker pool with per-item deadlines
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
    fns = {"math": _math_check, "code": code_reward}
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


def score_batch(responses, golds, kind="math", timeout=None, workers=None, stats=None):
    """Verdicts (1.0 / 0.0) for many responses, in parallel worker processes.

    golds: gold answers (math) or test specs (code, see code_reward). `timeout` is the wall-clock limit
    of one item (default MATH_TIMEOUT, or CODE_TIMEOUT for the sandboxed program, whose worker gets
    5 s more to clean up). Pass a dict as `stats` to receive the number of `timeouts` and `errors`.
    """
    if kind not in ("math", "code"):
        raise ValueError(f"kind must be 'math' or 'code', got {kind!r}")
    if len(responses) != len(golds):
        raise ValueError(f"{len(responses)} responses but {len(golds)} golds")
    if kind == "code":
        golds = [_check_spec(g) for g in golds]
    limit = timeout or (MATH_TIMEOUT if kind == "math" else CODE_TIMEOUT)
    grace = 0.0 if kind == "math" else 5.0
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    results, errors, timeouts = [0.0] * len(responses), {}, 0
    with _POOL_LOCK:
        while len(_POOL) < workers:
            _POOL.append(_start_worker())
        todo = list(range(len(responses)))[::-1]
        tries = [0] * len(responses)
        busy = {}  # worker index -> (item, deadline)
        while todo or busy:
            for i in range(workers):
                w = _POOL[i]
                if w["ready"] and i not in busy and todo:
                    item = todo.pop()
                    args = (responses[item], golds[item]) if kind == "math" else (responses[item], golds[item], limit)
                    try:
                        w["conn"].send((kind, args))
                        busy[i] = (item, time.monotonic() + limit + grace)
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
    if stats is not None:
        stats.update(timeouts=timeouts, errors=len(errors))
    if errors:
        first = next(iter(errors.values()))
        if len(errors) == len(responses):
            raise RuntimeError(f"rewards: every one of {len(responses)} items failed in the verifier, e.g. {first}")
        warnings.warn(f"rewards: {len(errors)} of {len(responses)} items failed in the verifier and scored 0, e.g. {first}")
    return results


def math_reward(response, gold):
    """1.0 if the last boxed answer equals `gold` (see _equal), else 0.0."""
    return score_batch([response], [gold], "math", workers=1)[0]
