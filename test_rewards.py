"""Tests of rewards.py: a table of math verdicts, adversarial inputs, and the code sandbox layer by layer."""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
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
    ("\\boxed{1} then \\boxed{2}", "2", 1), ("\\boxed{1} then \\boxed{2}", "1", 0), ("\\boxed{1}, \\boxed{2}", "1, 2", 1),
    ("<think>\\boxed{7}</think> The answer is \\boxed{8}", "8", 1), ("<think>\\boxed{8}</think> The answer is 7", "8", 0),
    ("The answer is 42.", "42", 0), ("\\boxed{}", "42", 0), ("\\boxed{42", "42", 0), ("\\fbox{42}", "42", 1),
    ("so \\boxed 42.", "42", 1), ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", 1), ("$\\boxed{\\{1, 2\\}}$", "\\{1,2\\}", 1),
    # gold given with its own box or dollars
    (B("12"), "$12$", 1), (B("12"), "\\boxed{12}", 1), (B("12"), 12.0, 1), (B("2.5"), 2.5, 1),
]


# The classes of failure an outside evaluation found, each with its own cases. Responses are written as
# Qwen3 writes them: reasoning in <think> (with a draft box that must not count), then the final box.
Q = lambda s: ("<think>\nLet me work through this carefully. A first guess is \\boxed{0}, but let me check.\n"
               "Yes, after recomputing, the value below is right.\n</think>\n\nCombining the steps above, we get "
               f"the result.\n\n**Final Answer**\n\\[\n\\boxed{{{s}}}\n\\]")
ZW = "\u200b"
CLASSES = {
    "exact values are compared exactly (near misses score 0)": [
        ("2^{64}", "2^{64}-1", 0), ("2^{64}-1", "2^{64}-1", 1), ("18446744073709551615", "2^{64}-1", 1),
        ("18446744073709551616", "2^{64}-1", 0), ("3^{40}+1", "3^{40}", 0), ("12157665459056928801", "3^{40}", 1),
        ("3628801", "10!", 0), ("3628800", "10!", 1), ("20!+1", "20!", 0), ("2432902008176640000", "20!", 1),
        ("126410606437753", "\\binom{50}{25}", 0), ("126410606437752", "\\binom{50}{25}", 1), ("100!+1", "100!", 0),
        ("10^{-12}", "0", 0), ("0", "10^{-15}", 0), ("1e-10", "0", 0), ("10^{-13}", "10^{-12}", 0),
        ("2^{-51}", "2^{-50}", 0), ("\\frac{1}{2^{40}}", "0", 0), ("1", "1-10^{-12}", 0),
        ("1", "\\frac{10^{12}}{10^{12}+1}", 0), ("\\frac{10^{30}+1}{10^{30}}", "1", 0), ("0.999999999999", "1", 0),
        ("10^6", "\\sqrt{10^{12}+1}", 0), ("\\sqrt{10^{12}+1}", "10^{6}", 0), ("10^6", "\\sqrt[3]{10^{18}+1}", 0),
        ("\\sqrt{10^{12}}", "10^{6}", 1), ("0", "e^{-30}", 0), ("\\frac{104348}{33215}", "\\pi", 0),
        ("\\frac{665857}{470832}", "\\sqrt{2}", 0), ("3.14159265358979", "\\pi", 1), ("3.14", "\\pi", 0),
        ("3.1415926535897932", "\\pi", 1), ("1.4142135623731", "\\sqrt{2}", 1), ("1.41421", "\\sqrt{2}", 0),
        ("0.333333333333", "\\frac{1}{3}", 1), ("0.142857142857", "\\frac{1}{7}", 1), ("0.1000000000001", "0.1", 0),
        ("2.7182818284590452", "e", 1), ("0.6931471805599453", "\\ln 2", 1), ("0.6931471", "\\ln 2", 0),
        ("1.8446744073709552\\times10^{19}", "2^{64}", 0), ("2^{10}", "1024", 1), ("7^{20}-1", "7^{20}", 0),
    ],
    "signed infinities": [
        ("-\\infty", "\\infty", 0), ("\\infty", "-\\infty", 0), ("10^{100}", "\\infty", 0), ("-10^{100}", "-\\infty", 0),
        ("+\\infty", "\\infty", 1), ("\\infty", "+\\infty", 1), ("+ \\infty", "\\infty", 1), ("- \\infty", "-\\infty", 1),
        ("\\infty", "\\infty", 1), ("-\\infty", "+\\infty", 0), ("0", "\\infty", 0), ("\\infty", "0", 0),
        ("(0, \\infty)", "(-\\infty, 0)", 0), ("[3, +\\infty)", "[3, \\infty)", 1), ("(-\\infty, 2]", "(-\\infty, 2)", 0),
        ("(-\\infty, +\\infty)", "(-\\infty, \\infty)", 1), ("\\mathbb{R}", "(-\\infty, \\infty)", 1), ("∞", "\\infty", 1),
        ("-∞", "-\\infty", 1), ("(-\\infty,-1)\\cup(1,+\\infty)", "(-\\infty, -1) \\cup (1, \\infty)", 1),
        ("(-\\infty,-1)\\cup(1,\\infty)", "(-\\infty, 1) \\cup (1, \\infty)", 0), (float("inf"), "\\infty", 1),
    ],
    "multiple-choice letters in every spelling": [
        ("(A) or (B)", "A", 0), ("(A) (B) (C) (D)", "A", 0), ("(C) A", "C", 0), ("(B) \\frac{1}{2}", "B", 1),
        ("C", "\\text{(C)}", 1), ("(C)", "\\text{(C)}", 1), ("\\text{(C)}", "C", 1), ("\\textbf{(C)}", "(C)", 1),
        ("\\mathrm{(C)}", "C", 1), ("(\\text{C})", "C", 1), ("\\text{C}", "\\text{(C)}", 1), ("\\textbf{(E)}", "E", 1),
        ("E", "(E)", 1), ("\\textbf{(C) }12", "\\text{(C)}", 1), ("(B) 12", "B", 1), ("D", "\\text{(C)}", 0),
        ("\\text{(A)}", "\\text{(B)}", 0), ("(C) 12", "\\text{(D)}", 0), ("12", "\\text{(C)}", 0), ("\\textbf{(B)}", "\\mathrm{B}", 1),
    ],
    "the empty set in any spelling": [
        ("\\emptyset", "\\varnothing", 1), ("\\varnothing", "\\emptyset", 1), ("\\{\\}", "\\emptyset", 1),
        ("\\{ \\}", "\\varnothing", 1), ("\\left\\{ \\right\\}", "\\emptyset", 1), ("\\{\\,\\}", "\\varnothing", 1),
        ("∅", "\\emptyset", 1), ("\\emptyset", "\\{0\\}", 0), ("\\{0\\}", "\\emptyset", 0), ("0", "\\emptyset", 0),
        ("\\emptyset", "\\{\\}", 1),
    ],
    "membership and variable prefixes": [
        ("x \\in (-\\infty, 2]", "(-\\infty, 2]", 1), ("(-\\infty, 2]", "x \\in (-\\infty, 2]", 1),
        ("x \\in [1,3]", "[1,3]", 1), ("x \\in [1,3)", "[1,3]", 0), ("x \\in [-2, 7]", "x \\in [-2,7]", 1),
        ("k = 5", "5", 1), ("n=12", "12", 1), ("n = 13", "12", 0), ("f(x) = x^2", "x^2", 1), ("y = 2x+3", "2x+3", 1),
        ("\\theta = \\frac{\\pi}{3}", "\\frac{\\pi}{3}", 1), ("AB = 5", "5", 1), ("x \\in \\mathbb{R}", "(-\\infty,\\infty)", 1),
        ("x\\in(-\\infty,-2)\\cup(3,\\infty)", "(-\\infty,-2)\\cup(3,\\infty)", 1), ("x \\in \\{1, 2\\}", "\\{1,2\\}", 1),
        ("g(x) = \\frac{1}{x}", "\\frac1x", 1),
    ],
    "lists of roots joined by words": [
        ("x = -2 \\text{ or } x = 3", "-2, 3", 1), ("x = -2 \\text{ or } x = 3", "3, -2", 1), ("-2 \\text{ or } 3", "-2, 3", 1),
        ("x=1 \\text{ and } x=2", "1, 2", 1), ("x=1 \\quad \\text{or} \\quad x=2", "1,2", 1), ("x = -1 \\text{ or } x = 1", "\\pm 1", 1),
        ("x = 0 \\text{ or } x = 1 \\text{ or } x = 2", "0, 1, 2", 1), ("x = 3", "-2, 3", 0), ("x = -2 \\text{ or } x = 4", "-2, 3", 0),
        ("x = \\frac{-1 \\pm \\sqrt{5}}{2}", "\\frac{-1+\\sqrt5}{2}, \\frac{-1-\\sqrt5}{2}", 1), ("-2, 3, 4", "-2, 3", 0),
    ],
    "matrices written with array": [
        ("\\left[\\begin{array}{cc} 1 & 2 \\\\ 3 & 4 \\end{array}\\right]", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", 1),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\left[\\begin{array}{cc} 1 & 2 \\\\ 3 & 4 \\end{array}\\right]", 1),
        ("\\left(\\begin{array}{cc} 1 & 2 \\\\ 3 & 4 \\end{array}\\right)", "\\begin{bmatrix} 1 & 2 \\\\ 3 & 4 \\end{bmatrix}", 1),
        ("\\left[\\begin{array}{c} 1 \\\\ -2 \\end{array}\\right]", "\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}", 1),
        ("\\left[\\begin{array}{rr} -\\frac{1}{2} & \\frac{3}{2} \\\\ 1 & -1 \\end{array}\\right]",
         "\\begin{pmatrix} -1/2 & 3/2 \\\\ 1 & -1 \\end{pmatrix}", 1),
        ("\\left[\\begin{array}{cc} 1 & 2 \\\\ 3 & 5 \\end{array}\\right]", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", 0),
        ("\\begin{pmatrix}1&2\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", 0),
    ],
    "commuted products": [
        ("ba", "ab", 1), ("cab", "abc", 1), ("2r\\pi", "2\\pi r", 1), ("y^2x", "xy^2", 1), ("\\sqrt{3}\\cdot 2", "2\\sqrt{3}", 1),
        ("3\\pi\\sqrt2", "3\\sqrt{2}\\pi", 1), ("r^2h\\pi", "\\pi r^2 h", 1), ("cb^2a", "ab^2c", 1), ("ab\\pi", "\\pi ab", 1),
        ("\\pi r^2", "\\pi r^2 h", 0), ("ab^2", "ab^2c", 0), ("\\pi", "\\pi ab", 0), ("2\\pi rh", "2\\pi r h", 1), ("a^2b", "ab^2", 0),
    ],
    "equations equal up to a non-zero factor": [
        ("2x+2y=2", "x+y=1", 1), ("3x+6y=9", "x+2y=3", 1), ("y = \\frac{2}{3}x + 2", "2x - 3y + 6 = 0", 1),
        ("x + 2y = 4", "y = -\\frac{1}{2}x + 2", 1), ("2x^2+2y^2=8", "x^2+y^2=4", 1), ("4x - 2y = 2", "y = 2x - 1", 1),
        ("x+y=1", "x+y=2", 0), ("x^2+y^2 = 9", "(x-1)^2+(y+2)^2=9", 0), ("x + y = 1", "x - y = 1", 0), ("0x = 0", "x+y=1", 0),
    ],
    "scientific notation": [
        ("1e3", "1000", 1), ("1\\times10^{3}", "1000", 1), ("1 \\times 10^3", "1000", 1), ("2.5\\cdot10^{-3}", "0.0025", 1),
        ("6.02\\times10^{23}", "602000000000000000000000", 1), ("1.5e-3", "0.0015", 1), ("9.11e-31", "9.11\\times 10^{-31}", 1),
        ("9.11\\times10^{-30}", "9.11\\times10^{-31}", 0), ("1.7\\times10^{-19}", "1.6\\times10^{-19}", 0), ("1e4", "1000", 0),
        ("6.02\\times10^{23}", 6.02e23, 1), ("2.5\\times 10^{-3}", "0.025", 0),
    ],
    "unicode and invisible characters": [
        ("½", "\\frac12", 1), ("√3", "\\sqrt{3}", 1), ("2√2", "2\\sqrt{2}", 1), ("3√2", "\\sqrt{18}", 1), ("π", "\\pi", 1),
        ("−5", "-5", 1), ("2×3", "6", 1), ("2·3", "6", 1), ("x²+1", "x^2+1", 1), ("π²", "\\pi^2", 1), ("⅓", "\\frac{1}{3}", 1),
        ("¾", "0.75", 1), (f"12{ZW}3", "123", 1), (f"4\u200c2", "42", 1), (f"\u200d7", "7", 1), (f"1\u2060024", "1024", 1),
        (f"\ufeff99", "99", 1), ("1\u00a0000", "1000", 1), ("\\frac{\\sqrt{3}}{\u00a02}", "\\frac{\\sqrt3}{2}", 1),
        ("√3", "1.732", 0), ("½", "0.51", 0), (f"12{ZW}4", "123", 0), ("−5", "5", 0),
    ],
    "realistic golds (DeepMath, MATH-500, AIME, HMMT)": [
        ("\\dfrac{3}{4}", "0.75", 1), ("0.75", "\\frac34", 1), ("033", "33", 1), ("204", "204", 1), ("205", "204", 0),
        ("\\frac{9\\sqrt{23}}{23}", "\\frac{9}{\\sqrt{23}}", 1), ("2^{25} \\cdot 3^{3}", "905969664", 1),
        ("\\sqrt{6}-\\sqrt{2}", "-\\sqrt{2}+\\sqrt{6}", 1), ("\\sqrt{6}+\\sqrt{2}", "\\sqrt{6}-\\sqrt{2}", 0),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2})", 1), ("\\text{Evelyn}", "\\text{Evelyn}", 1),
        ("\\text{Evelyn}", "\\text{Evie}", 0), ("p - q", "-q + p", 1), ("\\log_2 3", "\\frac{\\ln 3}{\\ln 2}", 1),
        ("e^{2}", "e^2", 1), ("\\binom{10}{3}", "120", 1), ("0.1\\overline{6}", "\\frac{1}{6}", 1), ("0.\\overline{3}", "1/3", 1),
        ("0.\\overline{3}", "0.33", 0), ("(3)", "3", 1), ("(3)", "4", 0), ("20\\text{ m}^2", "20", 1), ("20\\text{ m}^2", "400", 0), ("12.5\\%", "12.5", 1),
        ("30°", "30", 1), ("\\$32", "32", 1), ("\\text{YES}", "Yes", 1), ("\\sqrt{242}", "11\\sqrt2", 1),
    ],
}
CLASSES.update({  # the classes of an outside evaluation against other graders' suites (issue 15), our own cases
    "several boxes are one answer when the gold has several parts": [
        ("-2} \\text{ and } \\boxed{1", "-2, 1", 1), ("1},\\boxed{2},\\boxed{3", "1, 2, 3", 1),
        ("(2, 2)} \\quad\\text{and}\\quad \\boxed{(6, 2)", "(2, 2), (6, 2)", 1), ("3} or \\boxed{-3", "\\pm 3", 1),
        ("1},\\boxed{2},\\boxed{3", "1, 2", 0), ("1}, \\boxed{2", "1, 2, 3", 0), ("5} or \\boxed{6} or \\boxed{7", "6", 0),
        ("x=2} \\text{ and } \\boxed{x=5", "2, 5", 1), ("2} \\text{ for part (a) and } \\boxed{9", "2, 9", 1),
        ("4} and \\boxed{4", "4, 5", 0),
    ],
    "a left-hand side that names the answer": [
        ("(3,2)", "(p,q)=(3,2)", 1), ("(p,q)=(3,2)", "(3,2)", 1), ("11:21", "V_{1}:V_{2}=11:21", 1), ("1", "|AB|=1", 1),
        ("\\frac{1}{\\sqrt6}", "\\frac{NO}{BO}=\\frac{1}{\\sqrt6}", 1), ("|AB| = 2", "1", 0), ("(p,q)=(2,3)", "(3,2)", 0),
        ("11:20", "V_1:V_2=11:21", 0), ("S_{ABC}=12", "12", 1), ("x + y = 1", "1", 0),
    ],
    "inequalities written the other way round": [
        ("5 \\geq x", "x \\leq 5", 1), ("-x > -1", "x < 1", 1), ("5 \\leq x", "x \\geq 5", 1), ("3 < x", "x > 3", 1),
        ("5 \\geq x", "x \\geq 5", 0), ("-x > -1", "x > 1", 0), ("2x \\le 8", "x \\le 4", 1), ("x > 3", "x \\ge 3", 0),
    ],
    "undefined values equal nothing": [
        ("1:00", "12:00", 0), ("\\frac{1}{0}", "\\frac{5}{0}", 0), ("\\frac{0}{0}", "\\frac{1}{0}", 0),
        ("\\frac{2}{0}", "0", 0), ("1/0", "\\infty", 0), ("\\frac{1}{0}", "1", 0), ("12:00", "1:00", 0),
    ],
    "notation": [
        ("28 percent", "28\\%", 1), ("28 pct", "28\\%", 1), ("28\\%", "28 percent", 1), ("125\\textnormal{ miles}", "125", 1),
        ("(0;0;0)", "(0,0,0)", 1), ("(11,7)or(7,11)", "(7,11), (11,7)", 1), ("\\frac3{3}", "1", 1),
        ("{-2021, 2021}", "\\pm 2021", 1), ("[3,4]\\cup[1,2]", "[1,2]\\cup[3,4]", 1), ("29 percent", "28\\%", 0),
        ("(0;0;1)", "(0,0,0)", 0), ("\\frac3{4}", "1", 0), ("{-2021, 2022}", "\\pm 2021", 0),
    ],
    "conventions decided (README)": [
        ("x = 5+5+1 = 11", "11", 1), ("32, 349", "32349", 0), ("32,349", "32349", 1), ("0.333333333333", "\\frac{1}{3}", 1),
        ("0.3333333", "\\frac13", 0), ("1.4142135623730951", "\\sqrt2", 1), ("3.33333333", "\\frac{10}{3}", 1),
        ("10, 4, -2", "4, 10, -2", 1), ("1.8446744073709552\\times10^{19}", "2^{64}", 0), ("0.0833333", "\\frac{1}{12}", 0),
    ],
})
CLASS_CASES = [(Q(p), g, e, name) for name, rows in CLASSES.items() for p, g, e in rows]


def test_case_tables_cover_every_class_many_times():
    assert len(MATH_CASES) >= 60 and all(len(rows) >= 7 for rows in CLASSES.values())
    assert len(CLASS_CASES) >= 200


def test_math_table():
    got = score_batch([r for r, _, _ in MATH_CASES], [g for _, g, _ in MATH_CASES])
    wrong = [(r[-60:], g, e) for (r, g, e), v in zip(MATH_CASES, got) if v != e]
    assert not wrong, f"{len(wrong)} wrong verdicts: {wrong}"


def test_failure_classes():
    got = score_batch([r for r, _, _, _ in CLASS_CASES], [g for _, g, _, _ in CLASS_CASES])
    wrong = [(name, rewards.extract_answer(r), g, e) for (r, g, e, name), v in zip(CLASS_CASES, got) if v != e]
    assert not wrong, f"{len(wrong)} wrong verdicts: {wrong}"


def test_what_plain_math_verify_proves_equal_is_accepted_unless_a_veto_names_it():
    """The composition: math-verify's verdict is the base; a pair it proves equal (its own call, the gold as
    given against the boxed answer) is accepted unless one of the named vetoes applies."""
    import logging

    from math_verify import parse, verify
    logging.disable(logging.WARNING)
    cases = [(r, g) for r, g, _ in MATH_CASES] + [(r, g) for r, g, _, _ in CLASS_CASES]
    got = score_batch([r for r, _ in cases], [g for _, g in cases])
    checked = vetoed = 0
    for (response, gold), verdict in zip(cases, got):
        answers = rewards.final_answers(response)
        if len(answers) != 1:
            continue
        try:
            proved = verify(parse(str(gold)), parse("\\boxed{" + answers[0] + "}"))
        except Exception:
            continue
        if proved:
            checked += 1
            veto = rewards._veto(answers[0], rewards._gold_text(gold))
            vetoed += veto
            assert verdict == 1.0 or veto, (answers[0], gold)
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


# ------------------------------------------------------------------------------------- code
fence = lambda src: f"Here is my solution.\n```python\n{src}\n```\n"
STDIN = {"inputs": ["1 2\n", "10 20\n"], "outputs": ["3\n", "30"]}
CALL = {"fn_name": "add", "inputs": [[1, 2], [10, 20]], "outputs": [3, 30]}
ASSERT = {"assert": "assert add(1, 2) == 3\nassert add(10, 20) == 30"}
ADD = "def add(a, b):\n    return a + b"
NOISY_ADD = ("import sys\nprint('debug: loading')\ndef add(a, b):\n    print('debug', a, b)\n    print('to stderr', file=sys.stderr)\n"
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
    (dict(CALL, fn_name="pair", outputs=[[1, 2], [10, 20]]), "def pair(a, b):\n    return (a, b)", 1),
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
])
def test_value_matches_json_values(got, expected, ok):
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
    assert code_reward(fence("def total(xs: List[int]) -> int:\n    return sum(xs)"), tests) == 1.0  # uses the prompt's import
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


# ------------------------------------------------------------------------------------- reward hacks
SECRET = "7f3a9c1e5b"  # an expected output; the programs below search for it by its hash only
HUNT = ("import gc, hashlib, os, re\ntexts = list(os.environ.values())\nfor root, _, files in os.walk('.'):\n"
        "    for f in files:\n        try:\n            texts.append(open(os.path.join(root, f), errors='ignore').read())\n"
        "        except OSError:\n            pass\ntexts += [repr(o) for o in gc.get_objects() if isinstance(o, (dict, list, tuple))]\n"
        f"H = {hashlib.sha256(SECRET.encode()).hexdigest()!r}\n"
        "hit = [w for t in texts for w in re.findall('[0-9a-f]{10}', t) if hashlib.sha256(w.encode()).hexdigest() == H]\n")


def test_stdin_expected_outputs_never_enter_the_sandbox():
    src = HUNT + "print(hit[0] if hit else 'nothing')"
    assert code_reward(fence(src), {"inputs": ["abc\n"], "outputs": [SECRET]}) == 0.0
    assert code_reward(fence(src), {"inputs": [SECRET], "outputs": [SECRET]}) == 1.0  # the hunt works where it can


def test_call_expected_outputs_never_enter_the_sandbox():
    src = HUNT + "def f(x):\n    return hit[0] if hit else 'nothing'"
    assert code_reward(fence(src), {"fn_name": "f", "inputs": [["abc"]], "outputs": [SECRET]}) == 0.0
    assert code_reward(fence(src), {"fn_name": "f", "inputs": [[SECRET]], "outputs": [SECRET]}) == 1.0


FORGERIES = {
    "verdict on every descriptor": "import os, json\nfor fd in range(3, 64):\n    try:\n"
                                   "        os.write(fd, json.dumps({'ok': True}).encode())\n    except OSError:\n"
                                   "        pass\nos._exit(0)",
    "verdict on stdout": "print('confined')\nprint('{\"ok\": true}')\nimport os\nos._exit(0)",
    "exit hook": "import atexit, sys\natexit.register(lambda: print('{\"ok\": true}'))\nsys.exit(0)",
    "nonce from files or environment": "import os, json\nnonce = [open(f).read() for f in os.listdir('.') if os.path.isfile(f)]\n"
                                       "nonce += list(os.environ.values())\nfor n in nonce:\n"
                                       "    print(json.dumps({'nonce': n, 'ok': True}))\nos._exit(0)",
    "builtins replaced": "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.len = lambda x: 3\ndef add(a, b):\n    return 0",
    "json and exec replaced": "import json, builtins\njson.dumps = lambda *a, **k: '{\"ok\": true}'\n"
                              "builtins.exec = lambda *a, **k: None\nbuiltins.compile = lambda *a, **k: None\n"
                              "def add(a, b):\n    return 0",
    "stdin read for secrets": "import sys\ndata = sys.stdin.read()\nprint(data)\ndef add(a, b):\n    return 0",
}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_assert_mode_cannot_forge_a_pass(name):
    tests = {"assert": "assert abs(add(1, 2) - 3) < 1e-9\nassert len([add(1, 2)]) == 1"}
    assert code_reward(fence(FORGERIES[name]), tests) == 0.0
    assert code_reward(fence(ADD), tests) == 1.0  # the same tests pass an honest solution


# ------------------------------------------------------------------------------------- sandbox
def leftover_processes(marker):
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def leftover_sandbox_processes():
    """Processes of the sandbox's fresh uids, and any child of this process's zygote (it has none between
    items)."""
    out = subprocess.run(["ps", "-eo", "uid=,pid=,args="], capture_output=True, text=True).stdout
    left = [line for line in out.splitlines() if int(line.split()[0]) >= 0x70000000]
    z = getattr(rewards._ZYGOTES, "z", None)
    if z is not None:
        with open(f"/proc/{z[0].pid}/task/{z[0].pid}/children") as f:
            left += f.read().split()
    return left


HOSTILE = {
    "infinite loop": "while True:\n    pass",
    "sleep": "import time\ntime.sleep(60)",
    "memory hog": "x = []\nwhile True:\n    x.append(bytearray(50_000_000))",
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "output flood": "import sys\nwhile True:\n    sys.stdout.write('x' * 100000)",
    "subprocess sleeper": "import subprocess\nsubprocess.Popen(['sleep', '300'])\nimport time\ntime.sleep(60)",
    "daemon": "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(300)\n"
              "    os._exit(0)\ntime.sleep(60)",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_code_scores_zero_within_timeout_and_leaves_nothing(name):
    marker = f"# hostile-{name.replace(' ', '-')}"
    t = time.monotonic()
    assert code_reward(fence(HOSTILE[name] + "\n" + marker), ASSERT, timeout=3) == 0.0
    assert time.monotonic() - t < 3 + 10  # the timeout plus a margin for a loaded machine
    time.sleep(0.2)
    assert leftover_processes("sleep 300") == [] and leftover_processes("rlvr-code-") == []
    assert leftover_sandbox_processes() == []


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
    src = (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n" + ADD)
    verdict = code_reward(fence(src), ASSERT, timeout=5)
    server.close()
    th.join()
    if rewards._sandbox_mode() != "none":
        assert verdict == 0.0 and hits == []


def test_code_cannot_write_outside_its_temp_dir(tmp_path):
    target = tmp_path / "escaped.txt"
    os.chmod(tmp_path, 0o777)
    verdict = code_reward(fence(f"open({str(target)!r}, 'w').write('x')\n" + ADD), ASSERT, timeout=5)
    assert verdict == 0.0 and not target.exists()  # read-only mounts, or (root caller) a stranger's uid
    assert code_reward(fence("open('scratch.txt', 'w').write('x')\n" + ADD), ASSERT, timeout=5) == 1.0


def test_code_runs_with_a_minimal_environment():
    os.environ["RLVR_SECRET_TOKEN"] = "hunter2"
    try:
        assert code_reward(fence("import os\nassert 'RLVR_SECRET_TOKEN' not in os.environ\n" + ADD), ASSERT) == 1.0
    finally:
        del os.environ["RLVR_SECRET_TOKEN"]


# ------------------------------------------------------------------------------------- the sandbox as root
# The suite runs as root, as CI and most GPU containers do. Each attack runs through the public API; the host
# is checked before and after: files, sockets, IPC objects, keys, processes, cgroups, disk.
needs_root_ns = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                   reason="the root sandbox needs root and unshare")

PROBE = r"""
import ctypes, json, os, resource, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
def can(path, flags):
    try:
        os.close(os.open(path, flags))
        return True
    except OSError:
        return False
def fails(fn):
    try:
        fn()
        return False
    except Exception:
        return True
status = dict(l.split(":\t") for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
print(json.dumps({
    "uid": os.getuid(), "groups": os.getgroups(), "pid": os.getpid(),
    "caps": [int(status[k], 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
    "no_new_privs": status["NoNewPrivs"].strip(), "seccomp": status["Seccomp"].strip(),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "root": sorted(os.listdir("/")), "etc": sorted(os.listdir("/etc")), "dev": sorted(os.listdir("/dev")),
    "tmp": sorted(os.listdir("/tmp")), "sys": os.path.exists("/sys"), "home": os.path.exists("/home"),
    "proc_sys": os.path.exists("/proc/sys"), "secret_file": can(sys.argv[0] if False else SECRET_FILE, os.O_RDONLY),
    "socket": not fails(lambda: connect(SOCKET)), "shm": libc.shmget(SHM_KEY, 0, 0) != -1,
    "userns": not fails(lambda: os.unshare(os.CLONE_NEWUSER)), "mount": libc.mount(b"none", b"/work", b"tmpfs", 0, None) == 0,
    "key_read": libc.syscall(250, 11, KEY, None, 0) >= 0, "key_add": libc.syscall(248, b"user", b"x", b"y", 1, -3) >= 0,
    "root_writable": os.access("/", os.W_OK) or can("/usr/rlvr-probe", os.O_WRONLY | os.O_CREAT), "work_writable": can("x", os.O_WRONLY | os.O_CREAT),
    "mknod": not fails(lambda: os.mknod("/work/node", 0o600 | 0o020000, os.makedev(1, 3))),
}))
"""


def host_state():
    """What a sandboxed item could leave behind on the host: IPC objects, keys, cgroups, temp folders."""
    lines = lambda path: open(path).read().splitlines()[1:] if os.path.exists(path) else []
    cgroups = [d for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory") if os.path.isdir(root)
               for d in os.listdir(root) if d.startswith("rlvr-")]
    return {"shm": lines("/proc/sysvipc/shm"), "msg": lines("/proc/sysvipc/msg"), "sem": lines("/proc/sysvipc/sem"),
            "key_users": [l.split(":")[0].strip() for l in open("/proc/key-users")], "cgroups": cgroups,
            "tmp": sorted(d for d in os.listdir(tempfile.gettempdir()) if d.startswith("rlvr-code-"))}


@pytest.fixture
def host_bait(tmp_path):
    """What a program must not reach: a world-readable file and a world-writable unix socket in a
    world-readable folder, a SysV shared-memory segment, a key in the caller's session keyring."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    folder = tempfile.mkdtemp(prefix="bait-")
    os.chmod(folder, 0o755)
    secret = os.path.join(folder, "expected.txt")
    with open(secret, "w") as f:
        f.write("SECRET_ANSWER")
    os.chmod(secret, 0o644)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.path.join(folder, "db.sock"))
    os.chmod(os.path.join(folder, "db.sock"), 0o666)
    sock.listen(1)
    sock.settimeout(0.1)
    shm_key = 0x52_4C_56_52
    shm_id = libc.shmget(shm_key, 4096, 0o1000 | 0o666)  # IPC_CREAT
    key = libc.syscall(248, b"user", b"rlvr-secret", b"hunter2", 7, -3)  # add_key to the session keyring
    bait = dict(SECRET_FILE=secret, SOCKET=os.path.join(folder, "db.sock"), SHM_KEY=shm_key, KEY=key, sock=sock)
    yield bait
    libc.shmctl(shm_id, 0, None)  # IPC_RMID
    if key > 0:
        libc.syscall(250, 3, key)  # KEYCTL_REVOKE
    sock.close()
    shutil.rmtree(folder)


def accepted(sock):
    try:
        sock.accept()
        return True
    except OSError:
        return False


@needs_root_ns
def test_the_program_sees_only_its_own_root_as_a_stranger(host_bait):
    """Inside: a fresh unprivileged uid, no capability, no_new_privs and seccomp, not PID 1; a root made of
    read-only binds (/usr, the library folders, Python), a minimal /dev, its own /proc, a writable /work;
    none of the host's files, sockets, shared memory or keys; no user namespace, no mount, no device node."""
    src = "\n".join(f"{k} = {v!r}" for k, v in host_bait.items() if k != "sock") + PROBE
    before = host_state()
    report = rewards._run_sandboxed(src, {"mode": "stdin", "inputs": [""]}, 20)
    seen = json.loads(report["results"][0]["out"])
    assert seen["uid"] >= 0x70000000 and seen["groups"] in ([], [seen["uid"]]) and seen["caps"] == [0] * 5
    assert seen["no_new_privs"] == "1" and seen["seccomp"] == "2" and seen["pid"] != 1  # the driver is PID 1
    assert seen["pids"] == [seen["pid"]]  # its own PID namespace, and only its own uid's processes are visible
    python_tops = {"/" + os.path.realpath(p).split("/")[1] for p in (sys.prefix, sys.base_prefix)}
    assert set(seen["root"]) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr",
                                 "work", ".old"} | {p[1:] for p in python_tops}, seen["root"]
    assert set(seen["etc"]) <= {"ld.so.cache", "localtime"} and not seen["sys"] and not seen["proc_sys"]
    assert seen["dev"] == ["fd", "null", "random", "shm", "urandom", "zero"]
    under_tmp = {b.split("/")[2] for b in rewards._binds() if b.startswith("/tmp/")}  # a Python below /tmp (a venv)
    assert set(seen["tmp"]) <= {".in0", ".out0"} | under_tmp  # /tmp is the item's own /work, not the host's /tmp
    assert "home" not in seen["root"] or not seen["home"]
    assert not any(seen[k] for k in ("secret_file", "socket", "shm", "userns", "mount", "key_read", "key_add",
                                     "root_writable", "mknod")), seen
    assert seen["work_writable"] and not accepted(host_bait["sock"])
    assert host_state() == before


HOST_ATTACKS = {  # stdin programs; the test expects SECRET_ANSWER, which only the host knows
    "read the expected output from a host file": "print(open(SECRET_FILE).read())",
    "ask a host service over its unix socket": "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect(SOCKET)\n"
                                               "s.sendall(b'GET')\nprint(s.recv(100))",
    "read and leave SysV shared memory, queues, semaphores": (
        "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.shmget(SHM_KEY, 0, 0)\nlibc.shmget(0x1234, 192 << 20, 0o1000 | 0o666)\n"
        "libc.msgget(0x1235, 0o1000 | 0o666)\nlibc.semget(0x1236, 1, 0o1000 | 0o666)\nprint('left behind')"),
    "plant and read keys": "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.syscall(248, b'user', b'planted', b'x', 1, -3)\n"
                           "libc.syscall(248, b'user', b'planted', b'x', 1, -4)\nbuf = ctypes.create_string_buffer(100)\n"
                           "libc.syscall(250, 11, KEY, buf, 100)\nprint(buf.value.decode())",
    "a nested user namespace": "import os\nos.unshare(os.CLONE_NEWUSER)\nprint(open('/proc/self/uid_map').read())",
    "a 1,200-deep folder chain": "import os\nfor i in range(1200):\n    os.mkdir('d')\n    os.chdir('d')\nprint('deep')",
    "2 GB and 150,000 files in the work folder": (
        "import os\ntry:\n    with open('big', 'wb') as f:\n        for _ in range(2048):\n            f.write(b'x' * (1 << 20))\n"
        "except OSError:\n    pass\ntry:\n    for i in range(150_000):\n        open(f'f{i}', 'w').close()\nexcept OSError:\n"
        "    pass\nprint('full')"),
    "memory across many processes": (
        "import os, time\nfor _ in range(8):\n    if os.fork() == 0:\n        x = bytearray(400 << 20)\n        "
        "x[::4096] = b'y' * len(x[::4096])\n        time.sleep(5)\n        os._exit(0)\nfor _ in range(8):\n    os.wait()\n"
        "print('SECRET_ANSWER' if False else 'alive')"),
    "print the answer, then kill itself": "import os, signal, sys\nprint('SECRET_ANSWER')\nsys.stdout.flush()\n"
                                          "os.kill(os.getpid(), signal.SIGKILL)",  # not PID 1: the kill lands
    "signal its parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)\nprint('x')",
}


@needs_root_ns
@pytest.mark.parametrize("name", list(HOST_ATTACKS))
def test_attacks_score_zero_and_leave_the_host_as_it_was(host_bait, name):
    src = "\n".join(f"{k} = {v!r}" for k, v in host_bait.items() if k != "sock") + "\n" + HOST_ATTACKS[name]
    before = host_state()
    free = shutil.disk_usage(tempfile.gettempdir()).free
    stats = {}
    got = score_batch([fence(src)], [{"inputs": [""], "outputs": ["SECRET_ANSWER"]}], "code", timeout=8, stats=stats)
    assert got == [0.0] and stats == {"timeouts": stats["timeouts"], "errors": 0}
    assert host_state() == before and not accepted(host_bait["sock"])
    assert shutil.disk_usage(tempfile.gettempdir()).free > free - (64 << 20)  # nothing stays on the host's disk


SERVE_THE_ANSWER = """import os, socket, time
os.makedirs('/tmp', exist_ok=True)
servers = []
for where in ('\\0rlvr-answer', os.path.abspath('answer.sock'), '/tmp/answer.sock'):
    s = socket.socket(socket.AF_UNIX)
    s.bind(where)
    s.listen()
    s.setblocking(False)
    servers.append(s)
end = time.time() + 5
while time.time() < end:
    for s in servers:
        try:
            s.accept()[0].sendall(b'SECRET_ANSWER')
        except BlockingIOError:
            pass
    time.sleep(0.02)
print('served')"""
ASK_A_SIBLING = """import glob, os, socket, time
end, got = time.time() + 5, ''
while time.time() < end and not got:
    places = ['\\0rlvr-answer'] + [p for d in ('.', '..', '../*', '/tmp', '/tmp/*', '/tmp/*/*', '/dev/shm', '/run')
                                 for p in glob.glob(os.path.join(d, '*.sock'))]
    for where in places:
        try:
            c = socket.socket(socket.AF_UNIX)
            c.connect(where)
            got = c.recv(64).decode()
        except OSError:
            pass
    time.sleep(0.05)
print(got or 'alone')"""


@needs_root_ns
def test_items_graded_at_once_cannot_reach_each_other():
    """Two items on the pool's two workers at once: one serves the expected output on a unix socket (abstract, in its
    work folder and in /tmp), the other looks for it there, in its siblings' folders and in the abstract namespace."""
    stats = {}
    spec = {"inputs": [""], "outputs": ["SECRET_ANSWER"]}
    got = score_batch([fence(SERVE_THE_ANSWER), fence(ASK_A_SIBLING)], [spec, spec], "code", timeout=10, stats=stats)
    assert got == [0.0, 0.0] and stats["errors"] == 0
    with tempfile.TemporaryDirectory() as d:  # the control: the same two programs unconfined, in sibling folders
        os.makedirs(f"{d}/a")
        os.makedirs(f"{d}/b")
        server = subprocess.Popen([sys.executable, "-c", SERVE_THE_ANSWER.replace(", '/tmp/answer.sock'", "")],
                                  cwd=f"{d}/a", stdout=subprocess.DEVNULL)
        asked = subprocess.run([sys.executable, "-c", ASK_A_SIBLING], cwd=f"{d}/b", capture_output=True, text=True)
        server.wait()
    assert asked.stdout.strip() == "SECRET_ANSWER"


@needs_root_ns
def test_a_python_in_a_venv_below_tmp_runs_the_sandbox(tmp_path):
    """A virtual environment below /tmp (or /work), as a fresh CI set-up makes: its binds live inside the program's
    /tmp, which is the item's /work, and grading still works."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); import rewards; "
            f"print(rewards.code_reward({fence(ADD)!r}, {ASSERT!r}), rewards.code_reward({fence(ADD)!r}, {CALL!r}))")
    p = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.split() == ["1.0", "1.0"], p.stderr[-2000:]


@needs_root_ns
def test_limits_hold_for_the_item_not_per_process():
    """Memory is the item's (a cgroup), not an address-space limit per process: 20 threads run; disk bytes
    and files are the work folder's (a tmpfs)."""
    threads = ("import threading\ndef add(a, b):\n    return a + b\nts = [threading.Thread(target=lambda: sum(range(10**5)))"
               " for _ in range(20)]\nfor t in ts:\n    t.start()\nfor t in ts:\n    t.join()")
    assert code_reward(fence(threads), ASSERT) == 1.0
    probe = ("import os\nwith open('/proc/self/cgroup') as f:\n    print(f.read())\nprint(os.statvfs('.').f_blocks * "
             "os.statvfs('.').f_frsize, os.statvfs('.').f_files)")
    out = rewards._run_sandboxed(probe, {"mode": "stdin", "inputs": [""]}, 20)["results"][0]["out"]
    size, files = map(int, out.split()[-2:])
    assert size == rewards.LIMITS["disk"] and files == rewards.LIMITS["files"]
    if rewards._memory_limited(rewards._item_cgroups()):
        assert "rlvr-" in out  # the item's cgroups hold it
        hog = ("import os, time\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n    if pid == 0:\n        x = bytearray(400 << 20)\n"
               "        x[::4096] = b'y' * len(x[::4096])\n        time.sleep(4)\n        os._exit(0)\n"
               "    kids.append(pid)\n"
               "print(sum(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) == 0 for p in kids))")
        out = rewards._run_sandboxed(hog, {"mode": "stdin", "inputs": [""]}, 30)["results"][0]["out"]
        assert int(out or 0) <= 2  # 4 x 400 MiB held at once (each sleeps) do not fit in the item's 1 GiB


GRADER_ATTACKS = {  # call and assert programs that try to make grading itself fail
    "deeply nested JSON as a return value": "def add(a, b):\n    x = []\n    for _ in range(100000):\n        x = [x]\n"
                                           "    return x",
    "a value that is not JSON": "def add(a, b):\n    return object()",
    "garbage on every descriptor": "import os\nfor fd in range(64):\n    try:\n        os.write(fd, b'[' * 100000)\n"
                                   "    except OSError:\n        pass\ndef add(a, b):\n    return a + b",
    "truncate every descriptor, exit 97": "import os\nfor fd in range(64):\n    try:\n        os.ftruncate(fd, 0)\n"
                                          "    except OSError:\n        pass\nos._exit(97)",
    "exit 97 at once": "import os\nos._exit(97)",
}


@pytest.mark.parametrize("name", list(GRADER_ATTACKS))
@pytest.mark.parametrize("tests", [CALL, ASSERT], ids=["call", "assert"])
def test_grading_returns_a_verdict_whatever_the_program_does(name, tests):
    stats = {}
    got = score_batch([fence(GRADER_ATTACKS[name]), fence(ADD)], [tests, tests], "code", stats=stats)
    assert got[1] == 1.0 and got[0] in (0.0, 1.0) and stats["errors"] == 0
    assert code_reward(fence(GRADER_ATTACKS[name]), tests) in (0.0, 1.0)  # never an exception


ASSERT_HACKS = {  # the tests live in another process: what worked when they shared the program's interpreter
    "the caller's frame and its constants": (
        "import sys\ndef add(a, b):\n    f = sys._getframe(1)\n    while f:\n        for c in f.f_code.co_consts:\n"
        "            if isinstance(c, int) and c > 2:\n                return c\n        f = f.f_back\n    return 0"),
    "the tests' source through an audit hook": (
        "import sys, re\nseen = []\nsys.addaudithook(lambda e, a: seen.append(a))\n"
        "def add(a, b):\n    nums = [int(n) for x in seen for n in re.findall(r'== (\\d+)', str(x))]\n    return nums[0] if nums else 0"),
    "an object equal to everything": "class Yes:\n    def __eq__(self, other):\n        return True\n"
                                     "    __hash__ = None\ndef add(a, b):\n    return Yes()",
    "an int that equals everything": "class Int(int):\n    def __eq__(self, other):\n        return True\n"
                                     "    __hash__ = int.__hash__\ndef add(a, b):\n    return Int(0)",
    "the pristine builtins through gc": (
        "import gc\nfor o in gc.get_objects():\n    if isinstance(o, dict) and 'nonce' in o:\n        print(o['nonce'])\n"
        "def add(a, b):\n    return 0"),
    "settrace past the asserts": "import sys\nsys.settrace(lambda *a: None)\ndef add(a, b):\n    return 0",
}


@pytest.mark.parametrize("name", list(ASSERT_HACKS))
def test_assert_mode_keeps_the_tests_out_of_the_programs_reach(name):
    tests = {"assert": "assert add(1, 2) == 3\nassert add(3, 4) == 7\nassert add(5, 5) == 10"}
    assert code_reward(fence(ASSERT_HACKS[name]), tests) == 0.0
    assert code_reward(fence(ADD), tests) == 1.0


def test_a_spec_without_tests_is_refused():
    for spec in ({"assert": "x = 1\ncheck = lambda f: None"}, {"inputs": [], "outputs": []},
                 {"fn_name": "f", "inputs": [], "outputs": []}):
        with pytest.raises(ValueError, match="any program"):
            code_reward(fence(ADD), spec)


def test_leetcode_style_solutions_get_the_harness_imports():
    src = ("class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        seen = defaultdict(int)\n"
           "        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n"
           "            seen[x] = i\n        return []")
    spec = {"fn_name": "twoSum", "inputs": [[[2, 7, 11, 15], 9], [[3, 2, 4], 6]], "outputs": [[0, 1], [1, 2]]}
    assert code_reward(fence(src), spec) == 1.0
    assert code_reward(fence("print(max(accumulate(map(int, input().split()))))"),
                       {"inputs": ["1 2 3\n"], "outputs": ["6\n"]}) == 1.0


def test_a_mixed_batch_grades_every_item_and_leaves_nothing():
    hostile = [HOSTILE["fork bomb"], HOSTILE["daemon"], GRADER_ATTACKS["deeply nested JSON as a return value"],
               ASSERT_HACKS["an object equal to everything"], HOST_ATTACKS["a 1,200-deep folder chain"].replace(
                   "print('deep')", "def add(a, b):\n    return a + b")]
    items = [(fence(h + "\n" + ADD) if i % 2 else fence(h), ASSERT if i % 2 else CALL) for i, h in enumerate(hostile)]
    items += [(fence(ADD), ASSERT), (fence(ADD), CALL), (fence("a, b = map(int, input().split())\nprint(a + b)"), STDIN)] * 3
    before = host_state() if os.geteuid() == 0 else None
    stats = {}
    got = score_batch([r for r, _ in items], [s for _, s in items], "code", timeout=5, stats=stats)
    assert got[len(hostile):] == [1.0] * 9 and all(v in (0.0, 1.0) for v in got) and stats["errors"] == 0
    assert before is None or host_state() == before
    time.sleep(0.2)
    assert leftover_processes("sleep 300") == [] and leftover_processes("rlvr-code-") == []


def test_the_programs_own_exit_status_is_a_verdict_never_a_sandbox_error():
    """Once the driver is confined, exiting with the sandbox's failure code 97 is the program's doing: 0."""
    for mode in (ASSERT, CALL, STDIN):
        assert code_reward(fence("import os\nos._exit(97)\n" + ADD), mode) == 0.0


def test_sandbox_failure_is_an_error_not_a_verdict(monkeypatch):
    """A sandbox that cannot confine raises SandboxError; score_batch counts it and never calls it wrong."""
    monkeypatch.setattr(rewards, "_run_sandboxed", lambda *a, **k: (_ for _ in ()).throw(rewards.SandboxError("no mounts")))
    with pytest.raises(rewards.SandboxError):
        code_reward(fence(ADD), ASSERT)


def test_score_batch_runs_code_items():
    stats = {}
    got = score_batch([fence(ADD), fence("while True: pass")], [ASSERT, ASSERT], kind="code", timeout=2, stats=stats)
    assert got == [1.0, 0.0] and stats == {"timeouts": 0, "errors": 0}  # the sandbox's own limit ended the loop


def test_sandbox_without_namespaces_still_isolates_and_times_out(monkeypatch):
    """Where namespaces are unavailable the other layers remain: a fresh uid for a root caller, limits, temp
    dir, and a kill of the group and of the uid at the deadline."""
    monkeypatch.setattr(rewards, "_MODE", "none")
    assert code_reward(fence(ADD), ASSERT) == 1.0
    t = time.monotonic()
    assert code_reward(fence("import time\ntime.sleep(60)\n# no-ns-sleeper"), ASSERT, timeout=2) == 0.0
    assert time.monotonic() - t < 2 + 10 and leftover_sandbox_processes() == []
    daemon = HOSTILE["daemon"] + "\n# no-ns-daemon"
    assert code_reward(fence(daemon), ASSERT, timeout=2) == 0.0
    time.sleep(0.2)
    assert leftover_sandbox_processes() == []
    if os.geteuid() == 0:
        report = rewards._run_sandboxed("import os\nprint(os.getuid())", {"mode": "stdin", "inputs": [""]}, 10)
        assert int(report["results"][0]["out"]) != 0


def test_sandbox_through_a_user_namespace(monkeypatch):
    """An unprivileged caller's path (namespaces inside a user namespace whose root is the caller), taken
    here by a root caller: the same fresh root, PID and network namespaces, and grading."""
    if rewards._sandbox_mode() == "none":
        pytest.skip("no namespaces here")
    monkeypatch.setattr(rewards, "_MODE", "user-ns")
    assert code_reward(fence(ADD), ASSERT) == 1.0 and code_reward(fence(ADD.replace("+", "-")), ASSERT) == 0.0
    probe = "import json, os\nprint(json.dumps([os.listdir('/'), os.getpid(), open('/proc/self/uid_map').read().split()]))"
    root, pid, uid_map = json.loads(rewards._run_sandboxed(probe, {"mode": "stdin", "inputs": [""]}, 10)["results"][0]["out"])
    assert "work" in root and "proc" in root and "home" not in root and pid > 1  # its own root; not PID 1
    assert uid_map == ["0", str(os.getuid()), "1"]  # a user namespace whose root is the caller


# ------------------------------------------------------------------------------------- the worker pool
def test_a_script_read_from_stdin_gets_real_verdicts():
    """Workers never re-import the caller's __main__, so `python - <<EOF` works (it scored 0.0 before)."""
    script = "import rewards\nprint(rewards.math_reward('\\\\boxed{5}', '5'), rewards.math_reward('\\\\boxed{4}', '5'))\n"
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
    monkeypatch.setattr(rewards, "_BOOT", "import sys; print('cannot import the verifier', file=sys.stderr); sys.exit(3)")
    with pytest.raises(RuntimeError, match="(?s)failed to start.*exit code 3.*cannot import the verifier"):
        score_batch([B("1")], ["1"])


def test_worker_start_up_does_not_count_against_the_item(fresh_pool, monkeypatch):
    monkeypatch.setattr(rewards, "_BOOT", boot_with("import time; time.sleep(4)"))
    stats = {}
    assert score_batch([B("\\frac{1}{2}"), B("3")], ["0.5", "3"], timeout=2, stats=stats) == [1.0, 1.0]
    assert stats["timeouts"] == 0


def test_crashes_and_timeouts_are_counted_and_a_broken_verifier_raises(fresh_pool, monkeypatch):
    crash = ("import os, time; f = m._math_check; "
             "m._math_check = lambda r, g: os._exit(1) if r == 'crash' else time.sleep(60) if r == 'slow' else f(r, g)")
    monkeypatch.setattr(rewards, "_BOOT", boot_with(crash))
    stats = {}
    with pytest.warns(UserWarning, match="1 of 3 items failed"):
        got = score_batch([B("1"), "crash", "slow"], ["1", "1", "2"], timeout=1, stats=stats)
    assert got == [1.0, 0.0, 0.0] and stats == {"timeouts": 1, "errors": 1}
    with pytest.raises(RuntimeError, match="every one of 2 items failed"):
        score_batch(["crash", "crash"], ["1", "1"])
