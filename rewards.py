"""Verifiers for RL from verifiable rewards: math answers and code.

extract_answer(response) -> str | None      the last \\boxed{...} after the last </think>
math_reward(response, gold) -> float        1.0 if the boxed answer equals the gold answer
score_batch(responses, golds, kind="math")  many verdicts; never raises
"""
import re


def _last_boxed(text):
    """Content of the last brace-matched \\boxed{...} / \\fbox{...} (or `\\boxed x`); None if missing or unclosed."""
    starts = [m for m in re.finditer(r"\\(?:boxed|fbox)\s*(\{|\s+(\S+))", text)]
    if not starts:
        return None
    m = starts[-1]
    if m.group(1) != "{":
        return m.group(2).rstrip("$.")
    depth, i = 1, m.end()
    while i < len(text):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[m.end():i]
        i += 1
    return None


def extract_answer(response):
    if response is None:
        return None
    if "</think>" in response:
        response = response.rsplit("</think>", 1)[1]
    ans = _last_boxed(response)
    if ans is None or not ans.strip():
        return None
    return ans.strip()


def _normalize(s):
    s = str(s).strip()
    s = re.sub(r"\s+", "", s)
    return s


def math_reward(response, gold):
    ans = extract_answer(response)
    if ans is None:
        return 0.0
    return float(_normalize(ans) == _normalize(gold))


def score_batch(responses, golds, kind="math", **kw):
    return [math_reward(r, g) for r, g in zip(responses, golds)]
