"""Where the token weights go, read from the rollouts that `delta.py --dump_rollouts_every N` saves.

    python tools/rollouts.py runs/x/rollout-50.pt                 # per-category table of one rollout batch
    python tools/rollouts.py runs/x/rollout-50.pt --html page.html  # the lambda page: tokens coloured by weight
    python tools/rollouts.py runs/x --json stats.json              # every dump of a run, one row per step

Token categories of the embedded tasks (one character a token): answer (inside the last box), restated (the
numbers left of a step's `=`), result (a step's result), first_wrong (the result of the first wrong step),
filler (the random words of --task filler), eos, format (the rest). Of a real model's text (REAL_CATEGORIES, a
run with --model): answer (the characters of the graded final answer in the run's answer format), restated (a
number the question holds), number (any other digits), operator (+ - * / = and kin), stop word (a function word of
STOP_WORDS), word (any other word: the reasoning's), format (whitespace, punctuation, markdown and LaTeX markup),
template (special tokens: the stop token). Per category and side (pos: A > 0, neg: A < 0), over the tokens of
non-zero-advantage responses:
    lam     the mean weight (DAPO's weights are 1)
    lamw    the mean weight, each token weighted by its share of the update at theta_old, |A| ||v|| (Eq. C,
            v the token feature of Eq. D)
    share   the category's share of its side's update, sum lam |A| ||v|| / the side's sum
    share_uniform  the same share with every weight 1 (DAPO's update of the same rollout)
and per side the Spearman rank correlation of lam with the token's probability (rho_p).
"""
import argparse
import glob
import html
import itertools
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import checkpoints  # noqa: E402
import delta  # noqa: E402
import sampling  # noqa: E402

CATEGORIES = ("format", "restated", "result", "first_wrong", "answer", "filler", "eos")
REAL_CATEGORIES = ("answer", "restated", "number", "operator", "word", "stop word", "format", "template")
STOP_WORDS = frozenset("""a an the and or but if so as of to in on at by for from with without into onto over under
than then that this these those it its is are was were be been being am do does did have has had will would can could
shall should may might must i you he she we they me him her us them my your his our their what which who whom whose
when where why how all any each both either neither not no nor only own same too very just there here also let s t
up down out off again further once""".split())
_OPERATOR = re.compile(r"^[\s+\-*/=×÷^<>()\[\]%±·−]+$")
_MARKUP = re.compile(r"^(?:\s|[.,:;!?'\"`*#_~|$\\{}&]|\\[A-Za-z]+)+$")


def real_token_categories(pieces, special, question, answer_format="boxed"):
    """The REAL_CATEGORIES name of each token of a real model's response: pieces (each token's text), special (True
    for special tokens), the question (its numbers are "restated") and the run's answer format (which span is the
    graded answer: rewards.extract_answer's, found from the end of the text)."""
    import rewards
    text = "".join(pieces)
    answer, span = rewards.extract_answer(text, answer_format), range(0)
    if answer is not None and answer_format == "last_number":  # the last number, as extract_answer reads it
        span = range(*list(rewards._NUMBER.finditer(text))[-1].span())
    elif answer is not None:
        found = list(re.finditer(re.escape(answer), text))
        span = range(*found[-1].span()) if found else span
    given = set(re.findall(r"\d+", question if isinstance(question, str) else str(question)))
    restated = {c for m in re.finditer(r"\d+", text) if m.group(0) in given for c in range(*m.span())}
    cats, start = [], 0
    for piece, sp in zip(pieces, special):
        chars = range(start, start + len(piece))
        start += len(piece)
        word = piece.strip().lower()
        if sp:
            cats.append("template")
        elif any(c in span for c in chars) and piece.strip():
            cats.append("answer")
        elif re.search(r"\d", piece):  # a digit of a number the question holds, or of another number
            digits = [c for c in chars if text[c].isdigit()]
            cats.append("restated" if all(c in restated for c in digits) else "number")
        elif _OPERATOR.match(piece) and piece.strip() and not re.fullmatch(r"\s*\*{2,}\s*", piece):  # ** is bold
            cats.append("operator")
        elif re.fullmatch(r"[a-z']+", word):
            cats.append("stop word" if word in STOP_WORDS else "word")
        elif not piece.strip() or _MARKUP.match(piece):
            cats.append("format")
        else:
            cats.append("word")
    return cats


def token_categories(text, question):
    """The category of each character of an embedded task's response (see the module docstring)."""
    cats = ["format"] * len(text)
    box = text.rfind("\\boxed{")
    end = text.find("}", box) if box >= 0 else -1
    for j in range(box + 7, end if end >= 0 else len(text)) if box >= 0 else ():
        cats[j] = "answer"
    xs = [int(x) for x in re.findall(r"\d+", question)]
    total, wrong_seen = xs[0] if xs else 0, False
    steps = list(re.finditer(r"(\d+)\+(\d+)=(\d+)", text[:box] if box >= 0 else text))
    for k, st in enumerate(steps):
        for j in list(range(*st.span(1))) + list(range(*st.span(2))):
            cats[j] = "restated"
        total += xs[k + 1] if k + 1 < len(xs) else 0
        wrong = int(st.group(3)) != total and not wrong_seen
        wrong_seen |= wrong
        for j in range(*st.span(3)):
            cats[j] = "first_wrong" if wrong else "result"
    start = steps[0].end() if steps else len(text)
    for m in re.finditer(r"[a-z]+", text[start:box if box >= 0 else len(text)]):
        cats[start + m.start():start + m.end()] = ["filler"] * (m.end() - m.start())
    return cats


def token_category_ids(tok, batch, questions, real=None):
    """[N, R] the index in CATEGORIES of every response token, -1 at padding (one question per response). real: a
    real model's answer format, for REAL_CATEGORIES."""
    P, mask = batch["prompt_len"], batch["response_mask"]
    cat = torch.full(mask.shape, -1, dtype=torch.long)
    for i, question in enumerate(questions):
        ids = batch["input_ids"][i, P:P + int(mask[i].sum())].tolist()
        pieces = tok.batch_decode([[t] for t in ids])
        if real:
            specials = set(tok.all_special_ids)
            names = real_token_categories(pieces, [t in specials for t in ids], question, real)
            cat[i, :len(ids)] = torch.tensor([REAL_CATEGORIES.index(c) for c in names], dtype=torch.long)
            continue
        cats = token_categories("".join(pieces), question)
        starts = [0] + list(itertools.accumulate(map(len, pieces)))[:-1]  # the first character of each token
        cat[i, :len(ids)] = torch.tensor([CATEGORIES.index("eos" if t == tok.eos_token_id else cats[s] if s < len(cats)
                                                           else "format") for t, s in zip(ids, starts)])
    return cat


def rank(x):  # ranks 0..n-1, ties broken by position (continuous values)
    r = torch.empty_like(x)
    r[x.argsort()] = torch.arange(len(x), dtype=x.dtype)
    return r


def categories_of(dump):
    """The category names of a dump: a real model's (a run with --model) or the embedded tasks'."""
    return REAL_CATEGORIES if dump["args"].get("model") else CATEGORIES


def category_stats(tok, dump):
    """lam/lamw/share per category and side, and rho_p per side, of one dumped rollout (see above)."""
    batch, adv, G = dump["batch"], dump["adv"].cpu(), dump["args"]["group_size"]
    mask = batch["response_mask"].cpu()
    names = categories_of(dump)
    real = dump["args"].get("answer_format", "boxed") if names is REAL_CATEGORIES else None
    cat = token_category_ids(tok, {k: (v.cpu() if torch.is_tensor(v) else v) for k, v in batch.items()},
                             [q for q in dump["questions"] for _ in range(G)], real)
    lam = (mask.double() if dump["lam"] is None else dump["lam"].cpu().double()) * mask  # [N, R]
    size = adv.abs().double()[:, None] * dump["v_norm"].cpu().double()  # [N, R] |A| ||v||
    out = {}
    for k, label in enumerate(("pos", "neg")):
        side = (adv > 0 if k == 0 else adv < 0)[:, None] & mask  # [N, R]
        total = (lam * size)[side].sum()
        for c, name in enumerate(names):
            sel = side & (cat == c)
            if sel.any():
                out[f"lam/{name}/{label}"] = float(lam[sel].mean())
                if size[sel].sum() > 0:
                    out[f"lamw/{name}/{label}"] = float((lam * size)[sel].sum() / size[sel].sum())
                    out[f"share/{name}/{label}"] = float((lam * size)[sel].sum() / total)
                    out[f"share_uniform/{name}/{label}"] = float(size[sel].sum() / size[side].sum())  # DAPO's
        p = batch["old_logp"].cpu().double().exp()[side]
        if dump["lam"] is not None and side.sum() > 2:
            out[f"rho_p/{label}"] = float(torch.corrcoef(torch.stack([rank(lam[side]), rank(p)]))[0, 1])
    return out


def lambda_page(tok, dump, per_side=6):
    """A self-contained HTML page: sampled responses of both sides of the update (named by the sign of the
    advantage: a wrong answer can sit on the positive side when a sibling's overlong penalty lowered the group's
    mean), each marked right or wrong with its reward, no response text twice, the question as the dataset gives it,
    each token coloured by its weight (red above 1, blue below; the value on hover), and a legend."""
    batch, adv, args, G = dump["batch"], dump["adv"].cpu(), dump["args"], dump["args"]["group_size"]
    P, mask = batch["prompt_len"], batch["response_mask"].cpu()
    weight = dump["lam"].cpu() if dump["lam"] is not None else mask.float()
    correct, reward = dump.get("correct"), dump.get("reward")
    spread = max(1e-6, float((weight[mask] - 1).abs().max())) if mask.any() else 1.0
    what = "DelTA coefficients lam" if args["algo"] == "delta" else f"token weights of {args['algo']}"
    texts = sampling.decode_responses(tok, batch)
    parts = [f"<!doctype html><meta charset='utf-8'><title>lambda, step {dump['step']}</title><style>body{{font:14px "
             f"monospace;max-width:70em;margin:2em auto}} span{{white-space:pre-wrap}} .r{{margin:1em 0;padding:.5em;"
             f"border:1px solid #ccc}} .q{{color:#555}}</style><h2>{html.escape(args['run_name'])}: token weights at "
             f"step {dump['step']}</h2><p>{what}, one colour a token: <span style='background:rgba(220,40,40,1)'>"
             f"above 1</span>, <span style='background:rgba(40,90,220,1)'>below 1</span>, full colour at |lam - 1| = "
             f"{spread:.3f}, white at 1; hover a token for its value. The sides are the update's: A &gt; 0 is pushed "
             f"up, A &lt; 0 down. Each response says whether its answer is right (&#10003;) or wrong (&#10007;) and "
             f"its reward (the verdict plus DAPO's overlong penalty), so a wrong answer on the A &gt; 0 side shows."
             "</p>"]
    seen = set()
    for label, side in (("A > 0: the update raises these responses", adv > 0),
                        ("A < 0: the update lowers these responses", adv < 0)):
        rows = [i for i in side.nonzero().flatten().tolist()
                if (i // G, texts[i]) not in seen and not seen.add((i // G, texts[i]))]  # each response text once
        picked = [rows[int(j)] for j in torch.linspace(0, len(rows) - 1, min(per_side, len(rows))).round().long()
                  .unique()] if rows else []  # spread over the batch: many groups
        parts.append(f"<h3>{html.escape(label)} ({len(picked)} of {int(side.sum())})</h3>")
        for i in picked:
            ids = batch["input_ids"][i].cpu()
            spans = []
            for t, tid in enumerate(ids[P:P + int(mask[i].sum())].tolist()):
                w = float(weight[i, t])
                x = max(-1.0, min(1.0, (w - 1) / spread))
                colour = f"rgba(220,40,40,{x:.2f})" if x > 0 else f"rgba(40,90,220,{-x:.2f})"
                piece = tok.decode([tid]) or "\u2205"
                spans.append(f"<span style='background:{colour}' title='{html.escape(repr(piece))} lam={w:.4f}'>"
                             f"{html.escape(piece)}</span>")
            verdict = ("verdict not recorded" if correct is None else
                       f"{'&#10003; right' if float(correct[i]) > 0 else '&#10007; wrong'}, reward "
                       f"{float(reward[i]):+.3f}")
            question = dump["questions"][i // G]
            question = question if isinstance(question, str) else question[-1]["content"]  # chat: the user's turn
            gold = html.escape(str(dump["golds"][i // G]))
            parts.append(f"<div class='r'><b>{verdict}</b>, A = {float(adv[i]):+.3f}, reference {gold}<br>"
                         f"<span class='q'>Q: {html.escape(question)}</span><br>{''.join(spans)}</div>")
    return "\n".join(parts)


def load(path):
    dump = torch.load(path, weights_only=False, map_location="cpu")
    a = dump["args"]
    tok = checkpoints.load_tokenizer(a["model"] or os.path.join(a["output_dir"], "tiny-init"))
    return tok, dump


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("path", help="a rollout-<step>.pt file, or a run folder holding them")
    p.add_argument("--html", default="", help="write the lambda page of the (first) dump here")
    p.add_argument("--json", default="", help="write one row of statistics per dump here")
    args = p.parse_args(argv)
    paths = [args.path] if os.path.isfile(args.path) else sorted(
        glob.glob(os.path.join(args.path, "rollout-*.pt")), key=lambda f: int(re.findall(r"\d+", f)[-1]))
    if not paths:
        sys.exit(f"rollouts.py: no rollout-<step>.pt in {args.path} (run delta.py with --dump_rollouts_every N)")
    rows = []
    for i, path in enumerate(paths):
        tok, dump = load(path)
        rows.append(dict(step=dump["step"], **category_stats(tok, dump)))
        if args.html and i == 0:
            with open(args.html, "w") as f:
                f.write(lambda_page(tok, dump))
    if args.json:
        with open(args.json, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    last = rows[-1]
    print(f"step {last['step']}: | category | lam + | lam - | lamw + | lamw - | share + | share - |")
    for name in categories_of(dump):
        cells = [last.get(f"{k}/{name}/{s}") for k in ("lam", "lamw", "share") for s in ("pos", "neg")]
        if any(c is not None for c in cells):
            print(f"| {name} | " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    print("rho(lam, p):", {k: round(v, 3) for k, v in last.items() if k.startswith("rho_p")})


if __name__ == "__main__":
    main()
