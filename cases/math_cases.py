r"""The one table of math cases written for this project: test_rewards.py grades it (once per session) and
bench/bench_math_cases.py compares plain math-verify with it. Answer pairs in the formats of real data.

CASES = [dict(cls, response, gold, expected, debatable, note), ...]
  cls       'A'..'K' (failure classes from the outside evaluation), 'bulk' (realistic mix), and, merged from
            test_rewards.py's former table, 'short' rows and the named classes of CLASSES
  response  a full model response (mostly Qwen3 style: <think>...</think> then a boxed final answer)
  gold      the reference answer (str; a few int / float in DeepMath / GSM8K style)
  expected  1 if a careful human grader would count the response correct, else 0
  debatable True where reasonable graders could disagree (kept under 10 %)

Grading rule assumed for extraction: only the text after the last </think> is graded (the whole
response if there is no </think>); the final answer is the last \boxed{...} in that text.
Exact values are compared exactly; a numeric tolerance applies only when one side is an irrational
(non-rational) finite number and the other is a decimal approximation of it with many digits. Four
12-digit decimals of fractions (1/3, 1/7, 22/7, 2/3) were marked debatable when the verifier adopted, for
the outside suites, the rule that a decimal of 8 or more significant digits within one unit of its last
digit of a value no decimal writes counts as that value.
"""
from math import comb, factorial

ZWSP, ZWNJ, ZWJ, WJ, BOM, NBSP, NNBSP = "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00a0", "\u202f"

_THINKS = [
    "Okay, let me try to figure this out. "
    "First, I should write down what the problem gives us and what it asks for.\n\n"
    "Let me set up the equations. If I substitute the first relation into the second one, I get a simpler expression. "
    "Hmm, wait, let me double-check the arithmetic here... yes, that's right.\n\n"
    "So putting everything together gives the value I need. Let me verify with a quick sanity check. Looks consistent.",
    "Alright, so the problem is asking for a specific quantity. Let me think step by step.\n\n"
    "First, consider the small cases: for $n = 1$ we get $1$, for $n = 2$ we get $3$, for $n = 3$ we get $7$. "
    "There seems to be a pattern, but I should prove it rather than guess.\n\n"
    "Using the recurrence and simplifying, the closed form follows. Wait, is there an edge case I'm missing? "
    "No, the boundary case also works. Okay, I'm fairly confident now.",
    "Let me start by recalling the relevant formula. "
    "We have $a^2 + b^2 = c^2$ here, so I can compute the missing length.\n\n"
    "Then, the area is $\\frac{1}{2} \\cdot b \\cdot h$. Plugging in the numbers... Let me recompute to be safe.\n\n"
    "Actually, hold on. I need to make sure I'm answering the question that was asked, not an intermediate quantity. "
    "Yes, the question asks for exactly this. Good.",
    "Hmm, this looks like a standard problem. Let me consider the function and its derivative.\n\n"
    "$f'(x) = 0$ gives the critical points. Checking the second derivative to classify them... "
    "and also checking the endpoints of the domain.\n\n"
    "Comparing all candidate values, I get the answer. Let me just re-verify by plugging back in. It works.",
    "Okay, so I need to be careful with the counting here. Let me count the complementary cases instead.\n\n"
    "Total arrangements minus the bad ones. The bad ones can be counted with inclusion-exclusion: "
    "$|A \\cup B| = |A| + |B| - |A \\cap B|$.\n\n"
    "Computing each term and combining them gives the final count. Let me double check with a smaller example... "
    "matches.",
]

_SUMMARIES = [
    "We simplify the given expression step by step and verify the result by substitution.",
    "Combining the two cases above, we obtain the required value.",
    "Solving the resulting system and checking the constraints gives the answer.",
    "After simplifying, the computation yields the final result.",
    "Putting everything together:",
]

_N = [0]


def _resp(ans, style=None, think=None):
    """A response whose final answer is \\boxed{ans}, in one of several realistic layouts."""
    k = _N[0]
    _N[0] += 1
    style = k % 5 if style is None else style
    t = think if think is not None else _THINKS[k % len(_THINKS)]
    s = _SUMMARIES[k % len(_SUMMARIES)]
    if style == 0:
        return f"<think>\n{t}\n</think>\n\n{s}\n\n**Final Answer**\n\\[\n\\boxed{{{ans}}}\n\\]"
    if style == 1:
        return f"<think>\n{t}\n</think>\n\n{s} Therefore, the answer is $\\boxed{{{ans}}}$."
    if style == 2:
        return f"{s}\n\nThe answer is $\\boxed{{{ans}}}$."
    if style == 3:
        return f"<think>\n{t}\n</think>\n\n### Solution\n\n{s}\n\n$$\n\\boxed{{{ans}}}\n$$"
    return f"<think>\n{t}\n</think>\n\n{s}\n\n**Final Answer:** $\\boxed{{{ans}}}$"


CASES = []


def c(cls, ans, gold, expected, note="", debatable=False, style=None, think=None, response=None):
    CASES.append(dict(cls=cls, response=response if response is not None else _resp(ans, style, think),
                      gold=gold, expected=expected, debatable=debatable, note=note))


# =====================================================================================
# A. exact values must be compared exactly (near misses score 0)
# =====================================================================================
c("A", r"2^{64}", r"2^{64}-1", 0, "power vs off-by-one")
c("A", str(2**64 - 1), r"2^{64}-1", 1, "expanded integer")
c("A", r"2^{64}-2", r"2^{64}-1", 0, "off by one below")
c("A", r"3628801", r"10!", 0, "factorial +1")
c("A", r"3628800", r"10!", 1, "factorial expanded")
c("A", r"3628799", r"10!", 0, "factorial -1")
c("A", r"3^{40}+1", r"3^{40}", 0, "power +1")
c("A", str(3**40), r"3^{40}", 1, "power expanded")
c("A", str(3**40 - 1), r"3^{40}", 0, "expanded power -1")
c("A", r"10^{-12}", r"0", 0, "tiny vs 0")
c("A", r"1e-10", r"0", 0, "tiny (e-notation) vs 0")
c("A", r"0.000000000001", r"0", 0, "tiny decimal vs 0")
c("A", r"0", r"10^{-15}", 0, "0 vs tiny gold")
c("A", r"10^{-13}", r"10^{-12}", 0, "tiny vs tiny, different")
c("A", r"2^{-51}", r"2^{-50}", 0, "tiny powers of two")
c("A", r"10^{-12}", r"\frac{1}{10^{12}}", 1, "same tiny value, two spellings")
c("A", r"0.333333333333", r"\frac{1}{3}", 0, "12-digit truncation of a rational", debatable=True)
c("A", r"0.142857142857", r"\frac{1}{7}", 0, "12-digit truncation of 1/7", debatable=True)
c("A", r"3.142857142857", r"\frac{22}{7}", 0, "rational 22/7 truncated", debatable=True)
c("A", r"0.666666666667", r"\frac{2}{3}", 0, "rounded 2/3", debatable=True)
c("A", r"0.123456789013", r"0.123456789012", 0, "decimals differing in 12th digit")
c("A", r"\frac{1}{1000000000000}", r"\frac{1}{999999999999}", 0, "close rationals")
c("A", r"1", r"\frac{10^{12}}{10^{12}+1}", 0, "rational close to 1")
c("A", r"1", r"1-10^{-12}", 0, "1 minus tiny")
c("A", r"1.000000000001", r"1", 0, "1 plus tiny decimal")
c("A", r"10^6", r"\sqrt{10^{12}+1}", 0, "close radical")
c("A", r"\sqrt{10^{12}+1}", r"10^{6}", 0, "close radical (reverse)")
c("A", r"10^{10}", r"\sqrt{10^{20}+1}", 0, "close radical, bigger")
c("A", r"10^6", r"\sqrt[3]{10^{18}+1}", 0, "close cube root")
c("A", r"2^{100}+1", r"2^{100}", 0, "huge power +1")
c("A", str(2**100), r"2^{100}", 1, "huge power expanded")
c("A", str(factorial(20) + 1), r"20!", 0, "20! + 1 expanded")
c("A", str(factorial(20)), r"20!", 1, "20! expanded")
c("A", r"100!+1", r"100!", 0, "100! + 1")
c("A", str(comb(50, 25) + 1), r"\binom{50}{25}", 0, "binomial off by one")
c("A", str(comb(50, 25)), r"\binom{50}{25}", 1, "binomial expanded")
c("A", r"12345678901234568", r"12345678901234567", 0, "17-digit integers (float64 collide)")
c("A", r"10^{12}", r"999999999999", 0, "10^12 vs 10^12-1")
c("A", r"999999999999", r"10^{12}", 0, "10^12-1 vs 10^12")
c("A", r"2147483648", r"2^{31}-1", 0, "2^31 vs 2^31-1")
c("A", r"2^{31}-1", r"2147483647", 1, "Mersenne prime spelled as power")
c("A", r"10^9+9", r"1000000007", 0, "the other prime modulus")
c("A", r"10^9+7", r"1000000007", 1, "modulus spelled as power")
c("A", r"7^{20}-1", r"7^{20}", 0, "power -1")
c("A", r"3^{2023}+1", r"3^{2023}", 0, "very large power +1")
c("A", r"3\cdot 3^{2022}", r"3^{2023}", 1, "very large power rewritten")
c("A", r"10^{100}+1", r"10^{100}", 0, "googol +1")
c("A", r"\frac{10^{30}+1}{10^{30}}", r"1", 0, "rational 1 + 10^-30")
c("A", r"\frac{1}{2^{40}}", r"0", 0, "2^-40 vs 0")
c("A", r"1", r"0.99999999999", 0, "decimal gold just under 1")
c("A", r"-1.0000000001", r"-1", 0, "negative near miss")
c("A", r"0.1000000000001", r"0.1", 0, "decimal near miss")
c("A", r"0", r"e^{-30}", 0, "tiny irrational vs exact 0")
c("A", r"0", r"\sqrt{10^{12}+1}-10^{6}", 0, "tiny radical difference vs 0")
c("A", r"3.14159265358979", r"\pi", 1, "15-digit approximation of pi")
c("A", r"3.14", r"\pi", 0, "3-digit approximation of pi")
c("A", r"\frac{355}{113}", r"\pi", 0, "rational approximation of pi (exact fraction, not pi)")
c("A", r"\frac{104348}{33215}", r"\pi", 0, "better rational approximation of pi")
c("A", r"2.718281828459045", r"e", 1, "16-digit approximation of e")
c("A", r"2.718", r"e", 0, "4-digit approximation of e")
c("A", r"1.4142135623730951", r"\sqrt{2}", 1, "float repr of sqrt 2")
c("A", r"\frac{665857}{470832}", r"\sqrt{2}", 0, "Pell convergent, exact fraction != sqrt 2")
c("A", r"1.732", r"\sqrt{3}", 0, "4-digit approximation of sqrt 3")
c("A", r"0.6931471805599453", r"\ln 2", 1, "float repr of ln 2")
c("A", r"1.6449340668482264", r"\frac{\pi^2}{6}", 1, "float repr of zeta(2)")
c("A", r"1.6449", r"\frac{\pi^2}{6}", 0, "5-digit approximation of zeta(2)")
c("A", r"\frac{832040}{514229}", r"\frac{1+\sqrt{5}}{2}", 0, "Fibonacci ratio vs golden ratio")
c("A", r"1.618033988749895", r"\frac{1+\sqrt{5}}{2}", 1, "float repr of golden ratio")
c("A", r"1.8446744073709552\times10^{19}", r"2^{64}", 0, "float rendering of an exact integer", debatable=True)

# =====================================================================================
# B. signed infinities and intervals with infinities
# =====================================================================================
c("B", r"-\infty", r"\infty", 0, "sign of infinity")
c("B", r"\infty", r"-\infty", 0, "sign of infinity (reverse)")
c("B", r"10^{100}", r"\infty", 0, "large finite vs infinity")
c("B", r"-10^{100}", r"-\infty", 0, "large negative finite vs -infinity")
c("B", r"10^{1000}", r"\infty", 0, "larger finite vs infinity")
c("B", r"-10^{100}", r"\infty", 0, "negative finite vs infinity")
c("B", r"+\infty", r"\infty", 1, "+infinity spelling")
c("B", r"\infty", r"+\infty", 1, "+infinity gold")
c("B", r"+ \infty", r"\infty", 1, "+ infinity with space")
c("B", r"- \infty", r"-\infty", 1, "- infinity with space")
c("B", r"\infty", r"\infty", 1, "identical")
c("B", r"-\infty", r"-\infty", 1, "identical negative")
c("B", r"-\infty", r"+\infty", 0, "sign vs explicit +")
c("B", r"+\infty", r"-\infty", 0, "explicit + vs -")
c("B", r"\infty", r"0", 0, "infinity vs 0")
c("B", r"0", r"\infty", 0, "0 vs infinity")
c("B", r"(-\infty, 2)", r"(-\infty, 2]", 0, "open vs closed endpoint")
c("B", r"(-\infty, 2]", r"(-\infty, 2)", 0, "closed vs open endpoint")
c("B", r"(-\infty, 2]", r"(-\infty, 2]", 1, "same interval")
c("B", r"[3, +\infty)", r"[3, \infty)", 1, "+infinity in interval")
c("B", r"(3, \infty)", r"[3, \infty)", 0, "open vs closed at 3")
c("B", r"[2, \infty)", r"(-\infty, 2]", 0, "wrong side")
c("B", r"(0, \infty)", r"(-\infty, 0)", 0, "wrong half-line")
c("B", r"\mathbb{R}", r"(-\infty, \infty)", 1, "R vs whole line")
c("B", r"(-\infty, +\infty)", r"(-\infty, \infty)", 1, "whole line with +")
c("B", r"(-\infty,-1)\cup(1,+\infty)", r"(-\infty, -1) \cup (1, \infty)", 1, "union with +infinity")
c("B", r"(-\infty,-1]\cup[1,\infty)", r"(-\infty, -1) \cup (1, \infty)", 0, "union, closed vs open")
c("B", r"(-\infty, 0)\cup(0,\infty)", r"(-\infty, \infty)", 0, "missing point")
c("B", r"\left(-\infty, \frac{1}{2}\right]", r"(-\infty, \frac12]", 1, "left/right and dfrac")
c("B", r"\left(-\infty, \frac{1}{2}\right)", r"(-\infty, \frac12]", 0, "left/right, wrong bracket")
c("B", r"[0,+\infty)", r"[0,\infty)", 1, "+infinity in interval")
c("B", r"-\infty", r"-\infty", 1, "draft box in think is +infinity, final -infinity",
  think="The limit... as $x \\to 0^-$ the expression goes to $\\boxed{\\infty}$? "
        "No wait, the denominator is negative, so it goes to minus infinity.")
c("B", r"+\infty", r"-\infty", 0, "draft -infinity in think, final +infinity",
  think="Hmm, so $\\lim = \\boxed{-\\infty}$. Wait, I made a sign error; the leading coefficient is positive.")

# =====================================================================================
# C. multiple-choice letters in every spelling
# =====================================================================================
for ans, gold in [(r"\text{(C)}", r"\text{(C)}"), (r"(C)", r"\text{(C)}"), (r"C", r"\text{(C)}"),
                  (r"\textbf{(C)}", r"\text{(C)}"), (r"\mathrm{(C)}", r"\text{(C)}"), (r"(\text{C})", r"\text{(C)}"),
                  (r"\text{C}", r"\text{(C)}"), (r"\text{(C)}", r"C"), (r"\textbf{(E)}", r"E"), (r"E", r"(E)"),
                  (r"(A)", r"\text{(A)}"), (r"\mathrm{(B)}", r"\textbf{(B)}"), (r"\text{B}", r"B"),
                  (r"\text{(D)}", r"(D)"), (r"(\text{D})", r"D"), (r"\text{(B)}", r"\mathrm{B}"),
                  (r"\textbf{(B)}", r"B"), (r"\text{A}", r"\text{(A)}"), (r"(\textbf{A})", r"\text{(A)}"),
                  (r"\textbf{(C) }12", r"\text{(C)}")]:
    c("C", ans, gold, 1, "same letter, different spelling")
for ans, gold in [(r"\text{(D)}", r"\text{(C)}"), (r"(B)", r"\text{(C)}"), (r"B", r"\text{(C)}"),
                  (r"\textbf{(A)}", r"\text{(C)}"), (r"\text{(E)}", r"\text{(D)}"), (r"D", r"\text{(E)}"),
                  (r"\mathrm{(A)}", r"(B)"), (r"(\text{B})", r"C"), (r"\textbf{(D) }12", r"\text{(C)}")]:
    c("C", ans, gold, 0, "wrong letter")
c("C", r"c", r"\text{(C)}", 1, "lower-case letter", debatable=True)
c("C", r"\text{(C)}", r"\text{(C)}", 1, "draft (B) boxed in think",
  think="Checking the options: (A) is too small... I think it's $\\boxed{(B)}$. Hmm, no: "
        "(B) fails the second condition, so (C).")
c("C", r"\text{(A)}", r"\text{(C)}", 0, "correct letter only in think",
  think="So the answer should be $\\boxed{\\text{(C)}}$... wait, let me recheck option (A). Actually (A) also works? "
        "I'll go with (A).")

# =====================================================================================
# D. empty set
# =====================================================================================
for ans, gold in [(r"\varnothing", r"\emptyset"), (r"\{\}", r"\emptyset"), (r"\{ \}", r"\emptyset"),
                  (r"\emptyset", r"\varnothing"), (r"\emptyset", r"\{\}"), (r"\varnothing", r"\{ \}"),
                  (r"\left\{ \right\}", r"\emptyset"), (r"\{\,\}", r"\varnothing"), ("∅", r"\emptyset"),
                  (r"\emptyset", r"\emptyset")]:
    c("D", ans, gold, 1, "empty set spellings")
for ans, gold in [(r"\{0\}", r"\emptyset"), (r"\emptyset", r"\{0\}"), (r"0", r"\emptyset"),
                  (r"\{\emptyset\}", r"\emptyset"), (r"\emptyset", r"\{\varnothing\}"), (r"\varnothing", r"\{1\}"),
                  (r"\{ 0 \}", r"\varnothing")]:
    c("D", ans, gold, 0, "not the empty set")
c("D", r"\text{no solution}", r"\emptyset", 1, "words for the empty solution set", debatable=True)

# =====================================================================================
# E. set membership and variable prefixes
# =====================================================================================
for ans, gold, e in [
    (r"x \in (-\infty, 2]", r"(-\infty, 2]", 1), (r"(-\infty, 2]", r"x \in (-\infty, 2]", 1),
    (r"x \in [1,3]", r"[1,3]", 1), (r"x \in [1,3]", r"[1,3)", 0), (r"k = 5", r"5", 1), (r"k = 6", r"5", 0),
    (r"n=12", r"12", 1), (r"n = 13", r"12", 0), (r"f(x) = x^2", r"x^2", 1), (r"f(x) = 2x", r"x^2", 0),
    (r"y = 2x+3", r"2x+3", 1), (r"y = 2x-3", r"2x+3", 0), (r"y = 2x + 3", r"y=2x+3", 1),
    (r"[-2,7]", r"x \in [-2,7]", 1), (r"x \in [-2, 7]", r"x \in [-2,7]", 1), (r"a = \frac{1}{2}", r"0.5", 1),
    (r"x \in \{1, 2\}", r"\{1,2\}", 1), (r"p(x) = x^3 - 1", r"x^3-1", 1), (r"x \in (0,1)", r"(0,1]", 0),
    (r"x\in(-\infty,-2)\cup(3,\infty)", r"(-\infty,-2)\cup(3,\infty)", 1),
    (r"\theta = \frac{\pi}{3}", r"\frac{\pi}{3}", 1),
    (r"AB = 5", r"5", 1), (r"m = -3", r"-3", 1), (r"g(x) = \frac{1}{x}", r"\frac1x", 1),
    (r"x \in \mathbb{R}", r"(-\infty,\infty)", 1),
    (r"S = 210", r"210", 1), (r"x \in [-2, 6]", r"x \in [-2,7]", 0),
]:
    c("E", ans, gold, e, "variable prefix / membership")
c("E", r"x \geq 2", r"[2, \infty)", 1, "inequality vs interval", debatable=True)

# =====================================================================================
# F. lists of roots with words
# =====================================================================================
for ans, gold, e in [
    (r"x = -2 \text{ or } x = 3", r"-2, 3", 1), (r"x = -2 \text{ or } x = 3", r"3, -2", 1),
    (r"x=1 \text{ and } x=2", r"1, 2", 1), (r"-2 \text{ or } 3", r"-2, 3", 1),
    (r"x = -2 \text{ or } x = 4", r"-2, 3", 0),
    (r"x = 3", r"-2, 3", 0), (r"-2, 3, 5", r"-2, 3", 0), (r"x = \pm 2", r"-2, 2", 1), (r"x = 1, x = 2", r"1, 2", 1),
    (r"x_1 = 1, x_2 = 2", r"1, 2", 1), (r"1 \text{ and } 2", r"1,2", 1), (r"x=3 \text{ or } x=-2", r"-2, 3", 1),
    (r"x = -1 \text{ or } x = \frac{1}{2}", r"\frac12, -1", 1), (r"x = 2 \text{ or } x = -2", r"2", 0),
    (r"x=1 \quad \text{or} \quad x=2", r"1,2", 1), (r"\{-2, 3\}", r"-2, 3", 1), (r"x = -2,\ 3", r"-2,3", 1),
    (r"x = 2 \text{ or } x = 3", r"-2, -3", 0),
    (r"x = \frac{-1 \pm \sqrt{5}}{2}", r"\frac{-1+\sqrt5}{2}, \frac{-1-\sqrt5}{2}", 1),
    (r"x = -1 \text{ or } x = 1", r"\pm 1", 1), (r"x = 0 \text{ or } x = 1 \text{ or } x = 2", r"0, 1, 2", 1),
    (r"x = 0 \text{ or } x = 2", r"0, 1, 2", 0), (r"x=-3 \text{ or } x=\frac{1}{2}", r"-3, \frac{1}{2}", 1),
    (r"x = -3 \text{ or } x = -\frac{1}{2}", r"-3, \frac{1}{2}", 0), (r"x = 5 \text{ or } x = -1", r"-1,5", 1),
]:
    c("F", ans, gold, e, "roots with words")

# =====================================================================================
# G. matrices in any environment
# =====================================================================================
AM = r"\left[\begin{array}{cc} 1 & 2 \\ 3 & 4 \end{array}\right]"
PM = r"\begin{pmatrix}1&2\\3&4\end{pmatrix}"
BM = r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}"
for ans, gold, e in [
    (AM, PM, 1), (PM, AM, 1), (BM, PM, 1), (AM, BM, 1),
    (r"\left(\begin{array}{cc} 1 & 2 \\ 3 & 4 \end{array}\right)", PM, 1),
    (r"\begin{pmatrix}1&2\\3&5\end{pmatrix}", PM, 0), (r"\begin{pmatrix}1&3\\2&4\end{pmatrix}", PM, 0),
    (r"\left[\begin{array}{cc} 1 & 2 \\ 4 & 3 \end{array}\right]", PM, 0),
    (r"\begin{pmatrix}1&2&0\\3&4&0\end{pmatrix}", PM, 0),
    (r"\begin{pmatrix}1&0&0\\0&1&0\\0&0&1\end{pmatrix}", PM, 0),
    (r"\begin{pmatrix}\frac12 & 0\\0&1\end{pmatrix}", r"\begin{pmatrix}0.5&0\\0&1\end{pmatrix}", 1),
    (r"\left[\begin{array}{c} 1 \\ -2 \end{array}\right]", r"\begin{pmatrix} 1 \\ -2 \end{pmatrix}", 1),
    (r"\begin{pmatrix} -2 \\ 1 \end{pmatrix}", r"\begin{pmatrix} 1 \\ -2 \end{pmatrix}", 0),
    (r"\begin{pmatrix} \dfrac{\sqrt{3}}{2} & -\dfrac{1}{2} \\ \dfrac{1}{2} & \dfrac{\sqrt{3}}{2} \end{pmatrix}",
     r"\begin{pmatrix} \frac{\sqrt{3}}{2} & -\frac{1}{2} \\ \frac{1}{2} & \frac{\sqrt{3}}{2} \end{pmatrix}", 1),
    (r"\begin{pmatrix} \frac{\sqrt{3}}{2} & \frac{1}{2} \\ \frac{1}{2} & \frac{\sqrt{3}}{2} \end{pmatrix}",
     r"\begin{pmatrix} \frac{\sqrt{3}}{2} & -\frac{1}{2} \\ \frac{1}{2} & \frac{\sqrt{3}}{2} \end{pmatrix}", 0),
    (r"\begin{bmatrix} 2 & -1 \\ -1 & 2 \end{bmatrix}", r"\begin{pmatrix} 2 & -1 \\ -1 & 2 \end{pmatrix}", 1),
    (r"\begin{bmatrix} 2 & -1 \\ -1 & -2 \end{bmatrix}", r"\begin{pmatrix} 2 & -1 \\ -1 & 2 \end{pmatrix}", 0),
    (r"\left[\begin{array}{rr} -\frac{1}{2} & \frac{3}{2} \\ 1 & -1 \end{array}\right]",
     r"\begin{pmatrix} -1/2 & 3/2 \\ 1 & -1 \end{pmatrix}", 1),
    (r"\begin{pmatrix}-1\\2\end{pmatrix}", r"\begin{pmatrix} -1 \\ 2 \end{pmatrix}", 1),
    (r"\begin{pmatrix} \sqrt{2} \\ \sqrt{4} \end{pmatrix}", r"\begin{pmatrix} \sqrt{2} \\ 2 \end{pmatrix}", 1),
    (r"\begin{pmatrix} 4 \\ 1 \\ 3 \end{pmatrix}", r"\begin{pmatrix} 4 \\ -1 \\ 3 \end{pmatrix}", 0),
]:
    c("G", ans, gold, e, "matrix environments")

# =====================================================================================
# H. commuted products, reordered sums
# =====================================================================================
for ans, gold, e in [
    (r"ba", r"ab", 1), (r"2r\pi", r"2\pi r", 1), (r"y^2x", r"xy^2", 1), (r"\sqrt{3}\cdot 2", r"2\sqrt{3}", 1),
    (r"3\pi\sqrt2", r"3\sqrt{2}\pi", 1), (r"r^2h\pi", r"\pi r^2 h", 1), (r"cab", r"abc", 1), (r"ba^2", r"a^2b", 1),
    (r"2a+b", r"2ab", 0), (r"a+b", r"ab", 0), (r"\frac{1}{4}\pi", r"\frac{\pi}{4}", 1),
    (r"\sqrt{2}\cdot\sqrt{3}", r"\sqrt{6}", 1),
    (r"\pi r", r"2\pi r", 0), (r"xy^2", r"x^2y", 0), (r"\pi\cdot 4", r"4\pi", 1), (r"e^{2}\cdot 3", r"3e^2", 1),
    (r"(n+1)n", r"n(n+1)", 1), (r"\frac{(n+1)n}{2}", r"\frac{n(n+1)}{2}", 1), (r"-q + p", r"p - q", 1),
    (r"a - b", r"b - a", 0), (r"\frac{n(n-1)}{2}", r"\frac{n(n+1)}{2}", 0),
    (r"\sqrt{3}\,\pi\cdot 2", r"2\pi\sqrt{3}", 1),
    (r"cb^2a", r"ab^2c", 1), (r"ab\pi", r"\pi ab", 1), (r"2^{n}\cdot n", r"n2^n", 1), (r"n\cdot 2^{n-1}", r"n2^n", 0),
    (r"\pi r^2", r"\pi r^2 h", 0), (r"ab^2", r"ab^2c", 0), (r"\pi", r"\pi ab", 0), (r"\pi a", r"\pi ab", 0),
    (r"\pi r^2h", r"\pi r^2 h", 1), (r"2\pi rh", r"2\pi r h", 1), (r"\frac{4}{3}\pi", r"\frac{4}{3}\pi r^3", 0),
]:
    c("H", ans, gold, e, "commuted / reordered")

# =====================================================================================
# I. equations equal up to a non-zero factor
# =====================================================================================
for ans, gold, e in [
    (r"2x+2y=2", r"x+y=1", 1), (r"2x - y + 1 = 0", r"y=2x+1", 1), (r"x+y=2", r"x+y=1", 0),
    (r"y - x = -3", r"x - y = 3", 1),
    (r"3x+6y=9", r"x+2y=3", 1), (r"x + 2y = 4", r"y = -\frac{1}{2}x + 2", 1), (r"x+2y=8", r"x+2y=4", 0),
    (r"2x^2+2y^2=8", r"x^2+y^2=4", 1), (r"x^2+y^2=2", r"x^2+y^2=4", 0), (r"3x-y=2", r"y=3x-2", 1),
    (r"3x+y=2", r"y=3x-2", 0),
    (r"y = \frac{2}{3}x + 2", r"2x - 3y + 6 = 0", 1), (r"x^2 - 2x + y^2 + 4y - 4 = 0", r"(x-1)^2+(y+2)^2=9", 1),
    (r"2x + 3y - z = 0", r"z = 2x + 3y", 1), (r"2x+2y+2z=12", r"x+y+z=6", 1), (r"y=-x", r"y=x", 0),
    (r"-x - y = -1", r"x + y = 1", 1),
    (r"x^2+y^2 = 9", r"(x-1)^2+(y+2)^2=9", 0), (r"\frac{x}{2} + \frac{y}{3} = 1", r"3x + 2y = 6", 1),
    (r"4x - 2y = 2", r"y = 2x - 1", 1),
    (r"y = 2x + 2", r"y = 2x + 1", 0), (r"2x - 4y + 6z = 10", r"x - 2y + 3z = 5", 1),
    (r"x - 2y + 3z = 10", r"x - 2y + 3z = 5", 0),
]:
    c("I", ans, gold, e, "equation up to factor")

# =====================================================================================
# J. scientific notation
# =====================================================================================
for ans, gold, e in [
    (r"1e3", r"1000", 1), (r"1\times10^{3}", r"1000", 1), (r"1 \times 10^3", r"1000", 1),
    (r"2.5\cdot10^{-3}", r"0.0025", 1),
    (r"6.02\times10^{23}", r"6.02 \times 10^{23}", 1), (r"602000000000000000000000", r"6.02\times10^{23}", 1),
    (r"6.02\times10^{22}", r"6.02\times10^{23}", 0), (r"1\times10^{4}", r"1000", 0),
    (r"2.5\times10^{-4}", r"0.0025", 0),
    (r"1.5e-3", r"0.0015", 1), (r"3 \times 10^{8}", r"300000000", 1), (r"3 \times 10^{8}", r"30000000", 0),
    (r"1.2E6", r"1200000", 1), (r"10^{3}", r"1000", 1), (r"0.0000005", r"5 \times 10^{-7}", 1),
    (r"4,500,000", r"4.5 \times 10^{6}", 1), (r"9.11e-31", r"9.11\times 10^{-31}", 1),
    (r"9.11\times10^{-30}", r"9.11\times10^{-31}", 0),
    (r"1e4", r"1000", 0), (r"1.024\times10^3", r"2^{10}", 1), (r"1.7\times10^{-19}", r"1.6\times10^{-19}", 0),
    (r"7.5 \times 10^{5}", r"750000", 1), (r"7.5 \times 10^{5}", r"75000", 0),
    (r"3.0 \times 10^{8}", r"3 \times 10^{8}", 1),
    (r"6.02\times10^{23}", 6.02e23, 1),
]:
    c("J", ans, gold, e, "scientific notation")

# =====================================================================================
# K. unicode forms and invisible characters
# =====================================================================================
for ans, gold, e, note in [
    ("½", r"\frac12", 1, "vulgar fraction"), ("√3", r"\sqrt{3}", 1, "unicode root"),
    ("2√2", r"2\sqrt{2}", 1, "unicode root"),
    ("π", r"\pi", 1, "unicode pi"), ("−5", r"-5", 1, "U+2212 minus"), ("2×10^{3}", r"2000", 1, "unicode times"),
    ("∞", r"\infty", 1, "unicode infinity"), ("−∞", r"-\infty", 1, "unicode minus infinity"),
    ("12" + ZWSP + "3", r"123", 1, "ZWSP inside number"), ("4" + ZWNJ + "2", r"42", 1, "ZWNJ inside number"),
    (ZWJ + "7", r"7", 1, "ZWJ before number"), ("1" + WJ + "024", r"1024", 1, "word joiner inside number"),
    (BOM + "99", r"99", 1, "BOM before number"), ("x" + NBSP + "=" + NBSP + "5", r"5", 1, "NBSP around ="),
    (r"\frac{1}{2}" + NBSP, r"0.5", 1, "trailing NBSP"), ("−5", r"5", 0, "U+2212 minus, wrong sign"),
    ("√3", r"\sqrt{2}", 0, "unicode root, wrong radicand"), ("½", r"\frac{1}{3}", 0, "vulgar fraction, wrong"),
    ("2π", r"\pi", 0, "unicode pi, wrong factor"), ("12" + ZWSP + "3", r"12", 0, "ZWSP number is 123 not 12"),
    ("∞", r"-\infty", 0, "unicode infinity, wrong sign"),
    ("−∞", r"\infty", 0, "unicode minus infinity, wrong sign"),
    ("⅓", r"\frac13", 1, "vulgar third"), ("¾", r"0.75", 1, "vulgar three quarters"),
    ("x²+1", r"x^2+1", 1, "superscript two"),
    ("π/4", r"\frac{\pi}{4}", 1, "unicode pi over 4"), ("2·3", r"6", 1, "middle dot product"),
    ("x − 1", r"x-1", 1, "U+2212 in expression"),
    ("1" + NNBSP + "000", r"1000", 1, "narrow NBSP thousands separator"),
    ("3√2", r"\sqrt{18}", 1, "unicode root times 3"),
    ("2" + ZWSP + "0" + ZWSP + "2" + ZWSP + "5", r"2025", 1, "ZWSP between every digit"),
    (r"\frac{\sqrt{3}}{" + NBSP + "2}", r"\frac{\sqrt3}{2}", 1, "NBSP inside frac"),
    ("π²", r"\pi^2", 1, "pi squared, superscript"),
    ("4" + ZWSP + "2", r"24", 0, "ZWSP number 42 vs 24"), ("−" + r"\frac{1}{2}", r"-0.5", 1, "U+2212 before frac"),
    ("3×4", r"12", 1, "unicode times product"), (r"-1", "−1", 1, "U+2212 minus in the gold"),
    ("√3", r"1.732", 0, "unicode root vs low-precision decimal gold"),
]:
    c("K", ans, gold, e, note, debatable=(gold == r"1.732"))

# =====================================================================================
# bulk: DeepMath-103K style golds
# =====================================================================================
BULK = [
    # (response answer, gold, expected, note[, debatable])
    (r"0.75", r"\dfrac{3}{4}", 1, "decimal for fraction"), (r"\frac{3}{4}", r"\dfrac{3}{4}", 1, "frac vs dfrac"),
    (r"\frac{6}{8}", r"\dfrac{3}{4}", 1, "unreduced fraction"), (r"3/4", r"\dfrac{3}{4}", 1, "slash fraction"),
    (r"\frac{4}{3}", r"\dfrac{3}{4}", 0, "inverted fraction"), (r"0.7", r"\dfrac{3}{4}", 0, "wrong decimal"),
    (r"\sqrt{20}", r"2\sqrt{5}", 1, "unsimplified radical"), (r"2\sqrt5", r"2\sqrt{5}", 1, "brace-less sqrt"),
    (r"4.47", r"2\sqrt{5}", 0, "low-precision decimal"), (r"\sqrt{5}", r"2\sqrt{5}", 0, "missing factor"),
    (r"\pi/4", r"\frac{\pi}{4}", 1, "slash form"), (r"0.785", r"\frac{\pi}{4}", 0, "low-precision decimal"),
    (r"\frac{\pi}{2}", r"\frac{\pi}{4}", 0, "wrong multiple of pi"),
    (r"e^2", r"e^{2}", 1, "brace-less exponent"), (r"\exp(2)", r"e^{2}", 1, "exp notation"),
    (r"7.389", r"e^{2}", 0, "low-precision decimal"), (r"2e", r"e^{2}", 0, "2e vs e^2"),
    (r"\ln(2)", r"\ln 2", 1, "parenthesised ln"), (r"-\ln\frac{1}{2}", r"\ln 2", 1, "equivalent log"),
    (r"\ln 3", r"\ln 2", 0, "wrong log"), (r"\log 2", r"\ln 2", 1, "log as natural log", True),
    (r"(1,2)", r"(1, 2)", 1, "tuple spacing"), (r"\left(1, 2\right)", r"(1, 2)", 1, "left/right tuple"),
    (r"(2, 1)", r"(1, 2)", 0, "swapped tuple"),
    (r"[0,1)", r"[0, 1)", 1, "half-open interval"), (r"[0,1]", r"[0, 1)", 0, "closed vs half-open"),
    (r"(0,1)", r"[0, 1)", 0, "open vs half-open"),
    (r"\{3,2,1\}", r"\{1,2,3\}", 1, "set order"), (r"\{1,2\}", r"\{1,2,3\}", 0, "missing element"),
    (r"\{1, 2, 3, 4\}", r"\{1,2,3\}", 0, "extra element"),
    (r"1+x^2", r"x^2+1", 1, "commuted sum"), (r"x^2-1", r"x^2+1", 0, "sign error"),
    (r"0", r"0", 1, "zero"), (r"0.0", r"0", 1, "zero as decimal"), (r"1", r"0", 0, "one vs zero"),
    (r"-1", r"-1", 1, "minus one"), (r"1", r"-1", 0, "sign error"),
    (r"\frac12", r"\dfrac{1}{2}", 1, "frac12"), (r"0.5", r"\dfrac{1}{2}", 1, "decimal half"),
    (r"24", r"24", 1, "integer"), (r"4!", r"24", 1, "factorial form"), (r"25", r"24", 0, "off by one"),
    (r"120", r"\binom{10}{3}", 1, "binomial value"), (r"\binom{10}{7}", r"\binom{10}{3}", 1, "symmetric binomial"),
    (r"720", r"\binom{10}{3}", 0, "permutations instead of combinations"),
    (r"3^{2023}", r"3^{2023}", 1, "big power"), (r"3^{2022}", r"3^{2023}", 0, "exponent off by one"),
    (r"\frac{\ln 3}{\ln 2}", r"\log_2 3", 1, "change of base"), (r"\log_3 2", r"\log_2 3", 0, "inverted base"),
    (r"\frac{\log 3}{\log 2}", r"\log_2 3", 1, "change of base, log"),
    (r"24", 24, 1, "int gold"), (r"\frac{1}{2}", 0.5, 1, "float gold"), (r"3", 3.0, 1, "float integral gold"),
    (r"\sqrt{4}", 2, 1, "radical for int gold"), (r"99", 100, 0, "int gold, off by one"),
    (r"1.50", 1.5, 1, "trailing zero"), (r"2.5", 2, 0, "float vs int gold"),
    (r"e^{-1}", r"\frac{1}{e}", 1, "negative exponent"), (r"\sqrt{2}\sqrt{\pi}", r"\sqrt{2\pi}", 1, "split radical"),
    (r"0.6667", r"\frac{2}{3}", 0, "rounded rational"), (r"1.0", r"1", 1, "1.0"),
    (r"0.1\overline{6}", r"\frac{1}{6}", 1, "repeating decimal"),
    (r"0.\overline{3}", r"\frac{1}{3}", 1, "repeating decimal"),
    (r"\frac{1}{2}\sqrt{3}", r"\frac{\sqrt{3}}{2}", 1, "coefficient form"),
    (r"\sin\frac{\pi}{3}", r"\frac{\sqrt{3}}{2}", 1, "unevaluated trig"),
    (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}", 1, "rationalised"),
    (r"\frac{\pi^2}{6}", r"\dfrac{\pi^2}{6}", 1, "dfrac"),
    (r"\frac{\pi^2}{8}", r"\dfrac{\pi^2}{6}", 0, "wrong constant"), (r"\infty", r"\infty", 1, "infinity"),
    (r"1", r"\infty", 0, "finite vs infinity"), (r"-\frac{1}{12}", r"-\dfrac{1}{12}", 1, "negative dfrac"),
    (r"\frac{1}{12}", r"-\dfrac{1}{12}", 0, "sign"),
    (r"\frac{n(n+1)(2n+1)}{6}", r"\dfrac{n(n+1)(2n+1)}{6}", 1, "formula"),
    (r"\frac{n^3}{3}+\frac{n^2}{2}+\frac{n}{6}", r"\dfrac{n(n+1)(2n+1)}{6}", 1, "expanded formula"),
    (r"\frac{n(n+1)}{2}", r"\dfrac{n(n+1)(2n+1)}{6}", 0, "wrong formula"),
    # MATH-500 style golds
    (r"\frac{28}{6}", r"\frac{14}{3}", 1, "unreduced"), (r"\dfrac{14}{3}", r"\frac{14}{3}", 1, "dfrac"),
    (r"14/3", r"\frac{14}{3}", 1, "slash"), (r"4.67", r"\frac{14}{3}", 0, "rounded"),
    (r"4\frac{2}{3}", r"\frac{14}{3}", 1, "mixed number", True),
    (r"Evelyn", r"\text{Evelyn}", 1, "name"), (r"\text{evelyn}", r"\text{Evelyn}", 1, "name, case"),
    (r"\text{Emily}", r"\text{Evelyn}", 0, "wrong name"), (r"q - p", r"p - q", 0, "reversed difference"),
    (r"10", r"10\%", 1, "percent gold, bare number"), (r"10\%", r"10\%", 1, "percent"),
    (r"20\%", r"10\%", 0, "wrong percent"),
    (r"0.1", r"10\%", 1, "fraction for percent", True),
    (r"32", r"\$32", 1, "dollar gold"), (r"\$32.00", r"\$32", 1, "dollars and cents"),
    (r"23", r"\$32", 0, "digits swapped"),
    (r"18.90", r"\$18.90", 1, "dollar decimal"), (r"18.9", r"\$18.90", 1, "dollar decimal, trailing zero"),
    (r"\$18.09", r"\$18.90", 0, "wrong cents"),
    (r"90", r"90^\circ", 1, "degrees gold"), (r"90^{\circ}", r"90^\circ", 1, "degrees braces"),
    (r"180^\circ", r"90^\circ", 0, "wrong angle"),
    (r"\frac{\pi}{2}", r"90^\circ", 1, "radians for degrees", True),
    (r"\sqrt{50}", r"5\sqrt{2}", 1, "unsimplified"), (r"7.07", r"5\sqrt{2}", 0, "rounded"),
    (r"5\sqrt{2}\text{ cm}", r"5\sqrt{2}", 1, "unit"),
    (r"(3, \frac{\pi}{2})", r"\left( 3, \frac{\pi}{2} \right)", 1, "polar point"),
    (r"\left(3,\frac{\pi}{2}\right)", r"\left( 3, \frac{\pi}{2} \right)", 1, "polar point"),
    (r"(3, \frac{\pi}{3})", r"\left( 3, \frac{\pi}{2} \right)", 0, "wrong angle"),
    (r"[-2, 7]", r"[-2,7]", 1, "interval"), (r"(-2, 7)", r"[-2,7]", 0, "open vs closed"),
    (r"-2 \le x \le 7", r"[-2,7]", 1, "inequality for interval", True),
    (r"-5i + 6", r"6 - 5i", 1, "complex reordered"), (r"6+5i", r"6 - 5i", 0, "conjugate"),
    (r"\frac{1}{\sqrt{3}}", r"\frac{\sqrt{3}}{3}", 1, "unrationalised"),
    (r"0.3888", r"\frac{243}{625}", 1, "exact decimal"), (r"0.389", r"\frac{243}{625}", 0, "rounded decimal"),
    (r"\frac{-2}{3}", r"-\frac{2}{3}", 1, "sign in numerator"),
    (r"-0.\overline{6}", r"-\frac{2}{3}", 1, "repeating decimal"),
    (r"\frac{2}{3}", r"-\frac{2}{3}", 0, "sign"), (r"\sqrt{242}", r"11\sqrt2", 1, "unsimplified"),
    (r"1/350", r"\frac{1}{350}", 1, "slash"), (r"-2, 1", r"1,-2", 1, "list order"), (r"1", r"1,-2", 0, "missing root"),
    (r"(x+2)(x+5)", r"x^2+7x+10", 1, "factored form"), (r"(x+2)(x-5)", r"x^2+7x+10", 0, "wrong factor"),
    (r"odd", r"\text{odd}", 1, "word"), (r"\text{even}", r"\text{odd}", 0, "wrong word"),
    (r"\sqrt{51}", r"\sqrt{51}", 1, "radical"), (r"7.14", r"\sqrt{51}", 0, "rounded radical"),
    (r"5,1", r"1,5", 1, "list order"), (r"15", r"1,5", 0, "list vs number"),
    (r"\text{Tuesday}", r"\text{Tuesday}", 1, "day"), (r"\text{Thursday}", r"\text{Tuesday}", 0, "wrong day"),
    (r"2-2i", r"2 - 2i", 1, "complex"), (r"\frac{9}{2}", r"\frac92", 1, "brace-less frac gold"),
    # AIME / HMMT / BRUMO integer golds
    (r"33", r"033", 1, "AIME leading zeros"), (r"033", r"33", 1, "AIME leading zeros in response"),
    (r"204", r"204", 1, "AIME"), (r"240", r"204", 0, "AIME digits permuted"), (r"80", r"080", 1, "AIME leading zero"),
    (r"1000", r"999", 0, "AIME off by one"), (r"70", 70, 1, "int gold"), (r"025", r"025", 1, "AIME zero-padded"),
    (r"5", r"005", 1, "AIME zero-padded"), (r"50", r"005", 0, "not a padding"), (r"371", r"371", 1, "AIME"),
    (r"17", r"017", 1, "AIME leading zero"), (r"5", r"500", 0, "AIME missing zeros"), (r"001", r"1", 1, "padded one"),
    (r"73", r"073", 1, "AIME"), (r"902", r"902", 1, "AIME"), (r"0", r"0", 1, "zero"), (r"113", r"131", 0, "digits"),
    (r"2025", r"2025", 1, "BRUMO year"), (r"2024", r"2025", 0, "year off by one"),
    # HMMT / BRUMO expression golds
    (r"\frac{9}{\sqrt{23}}", r"\frac{9\sqrt{23}}{23}", 1, "unrationalised"),
    (r"\frac{9\sqrt{23}}{46}", r"\frac{9\sqrt{23}}{23}", 0, "half"),
    (r"\dfrac{9\sqrt{23}}{23}", r"\frac{9\sqrt{23}}{23}", 1, "dfrac"),
    (r"1.8766", r"\frac{9\sqrt{23}}{23}", 0, "rounded"),
    (str(2**25 * 27), r"2^{25} \cdot 3^{3}", 1, "expanded product"),
    (r"2^{25}\cdot 3^{2}", r"2^{25} \cdot 3^{3}", 0, "exponent"),
    (r"27\cdot 2^{25}", r"2^{25} \cdot 3^{3}", 1, "reordered"),
    (r"3^3 \times 2^{25}", r"2^{25} \cdot 3^{3}", 1, "times"),
    (str(2**25 * 27 + 1), r"2^{25} \cdot 3^{3}", 0, "expanded off by one"),
    (r"-\sqrt{2}+\sqrt{6}", r"\sqrt{6}-\sqrt{2}", 1, "reordered"),
    (r"\sqrt{2}-\sqrt{6}", r"\sqrt{6}-\sqrt{2}", 0, "negated"),
    (r"\sqrt{8-4\sqrt{3}}", r"\sqrt{6}-\sqrt{2}", 1, "nested radical"), (r"1.0353", r"\sqrt{6}-\sqrt{2}", 0, "rounded"),
    (r"\sqrt[3]{16}", r"2\sqrt[3]{2}", 1, "cube root"), (r"2^{4/3}", r"2\sqrt[3]{2}", 1, "fractional power"),
    (r"\sqrt[3]{2}", r"2\sqrt[3]{2}", 0, "missing factor"),
    (r"\frac{\sqrt{17}-1}{2}", r"\frac{-1+\sqrt{17}}{2}", 1, "reordered"),
    (r"\frac{-1-\sqrt{17}}{2}", r"\frac{-1+\sqrt{17}}{2}", 0, "other root"),
    (r"63 \pi", r"63\pi", 1, "pi"), (r"63", r"63\pi", 0, "missing pi"),
    (r"149.33", r"\frac{448}{3}", 0, "rounded"), (r"\frac{448}{3}", r"\frac{448}{3}", 1, "fraction"),
    (r"\frac{9}{4}\cdot 2^{2024}", r"9 \cdot 2^{2022}", 1, "rewritten power"),
    (r"9\cdot 2^{2021}", r"9 \cdot 2^{2022}", 0, "exponent"),
    (r"\frac{1}{24^2}", r"\frac{1}{576}", 1, "power in denominator"), (r"\sqrt{128}", r"8\sqrt{2}", 1, "unsimplified"),
    (r"11.3137", r"8\sqrt{2}", 0, "rounded"), (r"4\sqrt{3}", r"4\sqrt{3}", 1, "radical"),
    (r"\sqrt{48}", r"4\sqrt{3}", 1, "radical"),
    (r"2\sqrt{3}", r"4\sqrt{3}", 0, "factor"), (r"\frac{2}{3}", r"\frac{2}{3}", 1, "fraction"),
    # text, yes/no
    (r"yes", r"\text{Yes}", 1, "yes"), (r"\text{yes}", r"\text{Yes}", 1, "yes"), (r"\text{YES}", r"Yes", 1, "yes caps"),
    (r"No", r"\text{Yes}", 0, "no vs yes"), (r"\text{No}", r"No", 1, "no"), (r"no", r"No", 1, "no"),
    (r"Yes", r"No", 0, "yes vs no"),
    (r"\text{true}", r"True", 1, "true"), (r"\text{False}", r"True", 0, "false vs true"),
    # units, percentages, degrees, thousands separators
    (r"5\text{ cm}", r"5", 1, "unit"), (r"6\text{ cm}", r"5", 0, "unit, wrong value"),
    (r"18 \text{ inches}", r"18", 1, "unit"),
    (r"20\text{ m}^2", r"20", 1, "unit squared"), (r"20\text{ m}^2", r"400", 0, "unit squared is not a square"),
    (r"12\text{ minutes}", r"12", 1, "unit"), (r"45 \text{ degrees}", r"45", 1, "degrees word"),
    (r"50\%", r"50", 1, "percent response"), (r"50", r"50\%", 1, "percent gold"),
    (r"0.5", r"50\%", 1, "fraction vs percent", True),
    (r"12.5\%", r"12.5", 1, "decimal percent"), (r"40\%", r"60\%", 0, "wrong percent"),
    (r"25\%", r"\frac{1}{4}", 1, "percent vs fraction", True),
    (r"30^\circ", r"30", 1, "degrees"), (r"30°", r"30", 1, "unicode degree sign"),
    (r"60^\circ", r"30", 0, "wrong degrees"),
    (r"1,000", r"1000", 1, "thousands separator"), (r"10,000", r"10000", 1, "thousands separator"),
    (r"1,000,000", r"1000000", 1, "thousands separators"), (r"1,234", r"1234", 1, "thousands separator"),
    (r"1,234", r"1243", 0, "thousands separator, wrong"), (r"12,345,678", r"12345678", 1, "thousands separators"),
    (r"1{,}000", r"1000", 1, "LaTeX thousands separator"), (r"(1,000)", r"1000", 0, "tuple or number?", True),
    (r"1,000", r"1,000", 1, "same"), (r"1000", 1000, 1, "int gold"), (r"1,001", 1000, 0, "separator, wrong"),
]
for row in BULK:
    ans, gold, e, note = row[:4]
    c("bulk", ans, gold, e, note, debatable=(len(row) > 4 and row[4]))

# --- bulk: extraction rules (last box after the last </think>; whole response if no </think>) ---
T = _THINKS[0]
c("bulk", None, r"5", 1, "several boxes after think, last counts", response=(
    f"<think>\n{T}\n</think>\n\nFirst we get $\\boxed{{3}}$ for the sub-case, then adding the other case:\n\n"
    "**Final Answer**\n\\[\n\\boxed{5}\n\\]"))
c("bulk", None, r"3", 0, "several boxes after think, earlier one is gold", response=(
    f"<think>\n{T}\n</think>\n\nFirst we get $\\boxed{{3}}$ for the sub-case, then adding the other case:\n\n"
    "**Final Answer**\n\\[\n\\boxed{5}\n\\]"))
c("bulk", None, r"42", 0, "box only inside think, nothing after", response=(
    f"<think>\n{T}\nSo the answer is $\\boxed{{42}}$.\n</think>\n\n"
    "I hope this helps! Let me know if you have questions."))
c("bulk", None, r"42", 1, "wrong draft box in think, right box after", response=(
    f"<think>\n{T}\nSo maybe $\\boxed{{24}}$? No, I swapped the digits.\n</think>\n\nThe answer is $\\boxed{{42}}$."))
c("bulk", None, r"24", 0, "right draft box in think, wrong box after", response=(
    f"<think>\n{T}\nSo maybe $\\boxed{{24}}$? No, I think I swapped the digits.\n</think>\n\n"
    "The answer is $\\boxed{42}$."))
c("bulk", None, r"12", 1, "no think block at all", response="We have $3 \\times 4 = 12$. The answer is $\\boxed{12}$.")
c("bulk", None, r"7", 1, "truncated, no </think>: whole response graded", response=(
    "<think>\nLet me compute. $3 + 4 = 7$, so the answer is $\\boxed{7}$. Let me double check by another method. "
    "Consider the complementary count: the total is"))
c("bulk", None, r"42", 0, "empty box", response=f"<think>\n{T}\n</think>\n\nThe answer is $\\boxed{{}}$.")
c("bulk", None, r"12", 1, "no box at all, answer stated in words", debatable=True,
  response="We have $3 \\times 4 = 12$, so there are 12 ways in total. The answer is 12.")
c("bulk", None, r"240", 1, "box in think, unboxed final answer after think", debatable=True, response=(
    f"<think>\n{T}\nSo the count is $\\boxed{{240}}$.\n</think>\n\n"
    "Counting arrangements and removing the bad ones gives\n\n"
    "**Final Answer**\n240"))
c("bulk", None, r"113", 0, "think reaches gold, final box differs", response=(
    f"<think>\nSo $m + n = 113$. Hmm wait, let me recheck the denominator... it should be 131.\n</think>\n\n"
    "Thus $m+n = \\boxed{131}$."))
c("bulk", None, r"468", 1, "multi boxes after think: intermediate values then final", response=(
    "<think>\nLet me find the area first, then the perimeter.\n</think>\n\n"
    "The area is $\\boxed{234}$ per half, so the total is\n\n**Final Answer**\n\\[\n\\boxed{468}\n\\]"))
c("bulk", None, r"\frac{1}{2}", 1, "note after the final box", response=(
    f"<think>\n{T}\n</think>\n\nThe probability is $\\boxed{{\\dfrac{{1}}{{2}}}}$.\n\n"
    "(Note: this assumes the coin is fair.)"))
c("bulk", None, r"5", 1, "fbox", response=f"<think>\n{T}\n</think>\n\nHence the answer is $\\fbox{{5}}$.")
c("bulk", None, r"\frac{3}{4}", 1, "boxed equation with variable", response=(
    f"<think>\n{T}\n</think>\n\nSolving, we find\n\\[\n\\boxed{{p = \\frac{{3}}{{4}}}}\n\\]"))
c("bulk", None, r"-2, 3", 1, "roots with words, Qwen style", response=(
    "<think>\nFactor: $(x+2)(x-3)=0$.\n</think>\n\nThe solutions are\n\\[\n\\boxed{x = -2 \\text{ or } x = 3}\n\\]"))
c("bulk", None, r"\text{(B)}", 1, "letter with value after think", response=(
    "<think>\nThe value is 12, which is option (B).\n</think>\n\nThe answer is $\\boxed{\\textbf{(B) } 12}$."))

# =====================================================================================
# The rows test_rewards.py held before the merge (one table now): short responses, and the failure classes of
# an outside evaluation written as Qwen3 writes (reasoning in <think> with a draft box that must not count)
# =====================================================================================
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
    ("\\boxed{1} then \\boxed{2}", "2", 1), ("\\boxed{1} then \\boxed{2}", "1", 0),
    ("\\boxed{1}, \\boxed{2}", "1, 2", 1),
    ("<think>\\boxed{7}</think> The answer is \\boxed{8}", "8", 1),
    ("<think>\\boxed{8}</think> The answer is 7", "8", 0),
    ("The answer is 42.", "42", 0), ("\\boxed{}", "42", 0), ("\\boxed{42", "42", 0), ("\\fbox{42}", "42", 1),
    ("so \\boxed 42.", "42", 1), ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", 1),
    ("$\\boxed{\\{1, 2\\}}$", "\\{1,2\\}", 1),
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
        ("-\\infty", "\\infty", 0), ("\\infty", "-\\infty", 0), ("10^{100}", "\\infty", 0),
        ("-10^{100}", "-\\infty", 0),
        ("+\\infty", "\\infty", 1), ("\\infty", "+\\infty", 1), ("+ \\infty", "\\infty", 1),
        ("- \\infty", "-\\infty", 1),
        ("\\infty", "\\infty", 1), ("-\\infty", "+\\infty", 0), ("0", "\\infty", 0), ("\\infty", "0", 0),
        ("(0, \\infty)", "(-\\infty, 0)", 0), ("[3, +\\infty)", "[3, \\infty)", 1),
        ("(-\\infty, 2]", "(-\\infty, 2)", 0),
        ("(-\\infty, +\\infty)", "(-\\infty, \\infty)", 1), ("\\mathbb{R}", "(-\\infty, \\infty)", 1),
        ("∞", "\\infty", 1),
        ("-∞", "-\\infty", 1), ("(-\\infty,-1)\\cup(1,+\\infty)", "(-\\infty, -1) \\cup (1, \\infty)", 1),
        ("(-\\infty,-1)\\cup(1,\\infty)", "(-\\infty, 1) \\cup (1, \\infty)", 0), (float("inf"), "\\infty", 1),
    ],
    "multiple-choice letters in every spelling": [
        ("(A) or (B)", "A", 0), ("(A) (B) (C) (D)", "A", 0), ("(C) A", "C", 0), ("(B) \\frac{1}{2}", "B", 1),
        ("C", "\\text{(C)}", 1), ("(C)", "\\text{(C)}", 1), ("\\text{(C)}", "C", 1), ("\\textbf{(C)}", "(C)", 1),
        ("\\mathrm{(C)}", "C", 1), ("(\\text{C})", "C", 1), ("\\text{C}", "\\text{(C)}", 1), ("\\textbf{(E)}", "E", 1),
        ("E", "(E)", 1), ("\\textbf{(C) }12", "\\text{(C)}", 1), ("(B) 12", "B", 1), ("D", "\\text{(C)}", 0),
        ("\\text{(A)}", "\\text{(B)}", 0), ("(C) 12", "\\text{(D)}", 0), ("12", "\\text{(C)}", 0),
        ("\\textbf{(B)}", "\\mathrm{B}", 1),
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
        ("\\theta = \\frac{\\pi}{3}", "\\frac{\\pi}{3}", 1), ("AB = 5", "5", 1),
        ("x \\in \\mathbb{R}", "(-\\infty,\\infty)", 1),
        ("x\\in(-\\infty,-2)\\cup(3,\\infty)", "(-\\infty,-2)\\cup(3,\\infty)", 1),
        ("x \\in \\{1, 2\\}", "\\{1,2\\}", 1),
        ("g(x) = \\frac{1}{x}", "\\frac1x", 1),
    ],
    "lists of roots joined by words": [
        ("x = -2 \\text{ or } x = 3", "-2, 3", 1), ("x = -2 \\text{ or } x = 3", "3, -2", 1),
        ("-2 \\text{ or } 3", "-2, 3", 1),
        ("x=1 \\text{ and } x=2", "1, 2", 1), ("x=1 \\quad \\text{or} \\quad x=2", "1,2", 1),
        ("x = -1 \\text{ or } x = 1", "\\pm 1", 1),
        ("x = 0 \\text{ or } x = 1 \\text{ or } x = 2", "0, 1, 2", 1), ("x = 3", "-2, 3", 0),
        ("x = -2 \\text{ or } x = 4", "-2, 3", 0),
        ("x = \\frac{-1 \\pm \\sqrt{5}}{2}", "\\frac{-1+\\sqrt5}{2}, \\frac{-1-\\sqrt5}{2}", 1),
        ("-2, 3, 4", "-2, 3", 0),
    ],
    "matrices written with array": [
        ("\\left[\\begin{array}{cc} 1 & 2 \\\\ 3 & 4 \\end{array}\\right]",
         "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", 1),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
         "\\left[\\begin{array}{cc} 1 & 2 \\\\ 3 & 4 \\end{array}\\right]", 1),
        ("\\left(\\begin{array}{cc} 1 & 2 \\\\ 3 & 4 \\end{array}\\right)",
         "\\begin{bmatrix} 1 & 2 \\\\ 3 & 4 \\end{bmatrix}", 1),
        ("\\left[\\begin{array}{c} 1 \\\\ -2 \\end{array}\\right]", "\\begin{pmatrix} 1 \\\\ -2 \\end{pmatrix}", 1),
        ("\\left[\\begin{array}{rr} -\\frac{1}{2} & \\frac{3}{2} \\\\ 1 & -1 \\end{array}\\right]",
         "\\begin{pmatrix} -1/2 & 3/2 \\\\ 1 & -1 \\end{pmatrix}", 1),
        ("\\left[\\begin{array}{cc} 1 & 2 \\\\ 3 & 5 \\end{array}\\right]",
         "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", 0),
        ("\\begin{pmatrix}1&2\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", 0),
    ],
    "commuted products": [
        ("ba", "ab", 1), ("cab", "abc", 1), ("2r\\pi", "2\\pi r", 1), ("y^2x", "xy^2", 1),
        ("\\sqrt{3}\\cdot 2", "2\\sqrt{3}", 1),
        ("3\\pi\\sqrt2", "3\\sqrt{2}\\pi", 1), ("r^2h\\pi", "\\pi r^2 h", 1), ("cb^2a", "ab^2c", 1),
        ("ab\\pi", "\\pi ab", 1),
        ("\\pi r^2", "\\pi r^2 h", 0), ("ab^2", "ab^2c", 0), ("\\pi", "\\pi ab", 0), ("2\\pi rh", "2\\pi r h", 1),
        ("a^2b", "ab^2", 0),
    ],
    "equations equal up to a non-zero factor": [
        ("2x+2y=2", "x+y=1", 1), ("3x+6y=9", "x+2y=3", 1), ("y = \\frac{2}{3}x + 2", "2x - 3y + 6 = 0", 1),
        ("x + 2y = 4", "y = -\\frac{1}{2}x + 2", 1), ("2x^2+2y^2=8", "x^2+y^2=4", 1), ("4x - 2y = 2", "y = 2x - 1", 1),
        ("x+y=1", "x+y=2", 0), ("x^2+y^2 = 9", "(x-1)^2+(y+2)^2=9", 0), ("x + y = 1", "x - y = 1", 0),
        ("0x = 0", "x+y=1", 0),
    ],
    "scientific notation": [
        ("1e3", "1000", 1), ("1\\times10^{3}", "1000", 1), ("1 \\times 10^3", "1000", 1),
        ("2.5\\cdot10^{-3}", "0.0025", 1),
        ("6.02\\times10^{23}", "602000000000000000000000", 1), ("1.5e-3", "0.0015", 1),
        ("9.11e-31", "9.11\\times 10^{-31}", 1),
        ("9.11\\times10^{-30}", "9.11\\times10^{-31}", 0), ("1.7\\times10^{-19}", "1.6\\times10^{-19}", 0),
        ("1e4", "1000", 0),
        ("6.02\\times10^{23}", 6.02e23, 1), ("2.5\\times 10^{-3}", "0.025", 0),
    ],
    "unicode and invisible characters": [
        ("½", "\\frac12", 1), ("√3", "\\sqrt{3}", 1), ("2√2", "2\\sqrt{2}", 1), ("3√2", "\\sqrt{18}", 1),
        ("π", "\\pi", 1),
        ("−5", "-5", 1), ("2×3", "6", 1), ("2·3", "6", 1), ("x²+1", "x^2+1", 1), ("π²", "\\pi^2", 1),
        ("⅓", "\\frac{1}{3}", 1),
        ("¾", "0.75", 1), (f"12{ZW}3", "123", 1), (f"4\u200c2", "42", 1), (f"\u200d7", "7", 1),
        (f"1\u2060024", "1024", 1),
        (f"\ufeff99", "99", 1), ("1\u00a0000", "1000", 1), ("\\frac{\\sqrt{3}}{\u00a02}", "\\frac{\\sqrt3}{2}", 1),
        ("√3", "1.732", 0), ("½", "0.51", 0), (f"12{ZW}4", "123", 0), ("−5", "5", 0),
    ],
    "realistic golds (DeepMath, MATH-500, AIME, HMMT)": [
        ("\\dfrac{3}{4}", "0.75", 1), ("0.75", "\\frac34", 1), ("033", "33", 1), ("204", "204", 1), ("205", "204", 0),
        ("\\frac{9\\sqrt{23}}{23}", "\\frac{9}{\\sqrt{23}}", 1), ("2^{25} \\cdot 3^{3}", "905969664", 1),
        ("\\sqrt{6}-\\sqrt{2}", "-\\sqrt{2}+\\sqrt{6}", 1), ("\\sqrt{6}+\\sqrt{2}", "\\sqrt{6}-\\sqrt{2}", 0),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2})", 1), ("\\text{Evelyn}", "\\text{Evelyn}", 1),
        ("\\text{Evelyn}", "\\text{Evie}", 0), ("p - q", "-q + p", 1), ("\\log_2 3", "\\frac{\\ln 3}{\\ln 2}", 1),
        ("e^{2}", "e^2", 1), ("\\binom{10}{3}", "120", 1), ("0.1\\overline{6}", "\\frac{1}{6}", 1),
        ("0.\\overline{3}", "1/3", 1),
        ("0.\\overline{3}", "0.33", 0), ("(3)", "3", 1), ("(3)", "4", 0), ("20\\text{ m}^2", "20", 1),
        ("20\\text{ m}^2", "400", 0), ("12.5\\%", "12.5", 1),
        ("30°", "30", 1), ("\\$32", "32", 1), ("\\text{YES}", "Yes", 1), ("\\sqrt{242}", "11\\sqrt2", 1),
    ],
}
CLASSES.update({  # the classes of an outside evaluation against other graders' suites (issue 15), our own cases
    "several boxes are one answer when the gold has several parts": [
        ("-2} \\text{ and } \\boxed{1", "-2, 1", 1), ("1},\\boxed{2},\\boxed{3", "1, 2, 3", 1),
        ("(2, 2)} \\quad\\text{and}\\quad \\boxed{(6, 2)", "(2, 2), (6, 2)", 1), ("3} or \\boxed{-3", "\\pm 3", 1),
        ("1},\\boxed{2},\\boxed{3", "1, 2", 0), ("1}, \\boxed{2", "1, 2, 3", 0),
        ("5} or \\boxed{6} or \\boxed{7", "6", 0),
        ("x=2} \\text{ and } \\boxed{x=5", "2, 5", 1), ("2} \\text{ for part (a) and } \\boxed{9", "2, 9", 1),
        ("4} and \\boxed{4", "4, 5", 0),
    ],
    "a left-hand side that names the answer": [
        ("(3,2)", "(p,q)=(3,2)", 1), ("(p,q)=(3,2)", "(3,2)", 1), ("11:21", "V_{1}:V_{2}=11:21", 1), ("1", "|AB|=1", 1),
        ("\\frac{1}{\\sqrt6}", "\\frac{NO}{BO}=\\frac{1}{\\sqrt6}", 1), ("|AB| = 2", "1", 0),
        ("(p,q)=(2,3)", "(3,2)", 0),
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
        ("28 percent", "28\\%", 1), ("28 pct", "28\\%", 1), ("28\\%", "28 percent", 1),
        ("125\\textnormal{ miles}", "125", 1),
        ("(0;0;0)", "(0,0,0)", 1), ("(11,7)or(7,11)", "(7,11), (11,7)", 1), ("\\frac3{3}", "1", 1),
        ("{-2021, 2021}", "\\pm 2021", 1), ("[3,4]\\cup[1,2]", "[1,2]\\cup[3,4]", 1), ("29 percent", "28\\%", 0),
        ("(0;0;1)", "(0,0,0)", 0), ("\\frac3{4}", "1", 0), ("{-2021, 2022}", "\\pm 2021", 0),
    ],
    "conventions decided (README)": [
        ("x = 5+5+1 = 11", "11", 1), ("32, 349", "32349", 0), ("32,349", "32349", 1),
        ("0.333333333333", "\\frac{1}{3}", 1),
        ("0.3333333", "\\frac13", 0), ("1.4142135623730951", "\\sqrt2", 1), ("3.33333333", "\\frac{10}{3}", 1),
        ("10, 4, -2", "4, 10, -2", 1), ("1.8446744073709552\\times10^{19}", "2^{64}", 0),
        ("0.0833333", "\\frac{1}{12}", 0),
    ],
})

for _response, _gold, _expected in MATH_CASES:
    c("short", None, _gold, _expected, response=_response)
for _name, _rows in CLASSES.items():
    for _pred, _gold, _expected in _rows:
        c(_name, None, _gold, _expected, response=Q(_pred))

if __name__ == "__main__":
    from collections import Counter
    print(len(CASES), Counter(x["cls"] for x in CASES), sum(x["debatable"] for x in CASES), "debatable")
