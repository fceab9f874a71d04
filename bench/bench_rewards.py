"""Benchmark: verifications per second through rewards.score_batch (worker pool, 2 cores here).

    python bench/bench_rewards.py                 # 1,000 typical math responses, 200 typical code responses

Math responses: ~1.5 kB of reasoning ending in a boxed answer (integers, fractions, radicals, tuples,
expressions), half right. Code responses: a short function checked by asserts, or a stdin program,
half right. The pool is started before timing; each batch is timed once, end to end.
"""
import random
import sys
import time
import os

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import rewards  # noqa: E402

FILLER = ("We first rewrite the condition and simplify both sides. Substituting the value found above gives "
          "a quadratic whose discriminant is positive, so there are two real roots. ") * 8


def math_items(n, rng):
    kinds = [
        lambda k: (str(k), str(k) if rng.random() < .5 else str(k + 1)),
        lambda k: (f"\\frac{{{k}}}{{{k + 1}}}",
                   f"\\frac{{{k}}}{{{k + 1}}}" if rng.random() < .5 else f"{k / (k + 1):.3f}"),
        lambda k: (f"{k}\\sqrt{{2}}", f"\\sqrt{{{2 * k * k}}}" if rng.random() < .5 else f"\\sqrt{{{2 * k * k + 1}}}"),
        lambda k: (f"({k}, {k + 2})", f"({k},{k + 2})" if rng.random() < .5 else f"({k + 2},{k})"),
        lambda k: (f"x^2+{2 * k}x+{k * k}", f"(x+{k})^2" if rng.random() < .5 else f"(x-{k})^2"),
    ]
    out = []
    for i in range(n):
        pred, gold = kinds[i % len(kinds)](rng.randint(2, 999))
        out.append((f"{FILLER}Therefore the answer is $\\boxed{{{pred}}}$.", gold))
    return out


def code_items(n, rng):
    out = []
    for i in range(n):
        k = rng.randint(1, 9)
        if i % 2:
            src = f"def f(x):\n    return x * {k if rng.random() < .5 else k + 1}\n"
            tests = {"assert": "\n".join(f"assert f({j}) == {j * k}" for j in range(5))}
        else:
            src = f"n = int(input())\nprint(n + {k if rng.random() < .5 else k + 1})\n"
            tests = {"inputs": [f"{j}\n" for j in range(3)], "outputs": [f"{j + k}\n" for j in range(3)]}
        out.append((f"Here is the program.\n```python\n{src}```\n", tests))
    return out


def main():
    rng = random.Random(0)
    rewards.score_batch(["\\boxed{1}"], ["1"])  # start the pool
    for kind, items in (("math", math_items(1000, rng)), ("code", code_items(200, rng))):
        t = time.perf_counter()
        verdicts = rewards.score_batch([r for r, _ in items], [g for _, g in items], kind)
        dt = time.perf_counter() - t
        print(f"{kind}: {len(items)} items in {dt:.1f} s = {len(items) / dt:.1f} verifications/s "
              f"({sum(verdicts) / len(items):.0%} right)")
    print(f"sandbox mode: {rewards._sandbox().mode()}, workers: {min(4, os.cpu_count() or 1)}")


if __name__ == "__main__":
    main()
