"""The positive control of docs/experiment.md, added to delta.py's ALGOS from outside, as a user adds an
algorithm: DAPO with lam_max on the tokens known to decide correctness on the embedded tasks (each step's
result and the boxed answer), lam_min elsewhere, self-normalised to mean 1 like DelTA's lam.

    python tools/oracle.py --task filler --algo oracle ...    # delta.py's arguments
"""
import itertools
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402


def deciding_tokens(tok, batch):
    """[N, R] the tokens that decide correctness on the embedded tasks: each step's result (the digits after
    `=`) and the boxed answer's digits."""
    P, mask = batch["prompt_len"], batch["response_mask"]
    out = torch.zeros_like(mask)
    for i in range(len(mask)):
        pieces = tok.batch_decode([[t] for t in batch["input_ids"][i, P:P + int(mask[i].sum())].tolist()])
        text, starts = "".join(pieces), [0, *itertools.accumulate(map(len, pieces))][:-1]  # each token's first char
        hit = [False] * (len(text) + 1)
        for m in re.finditer(r"(?<==)\d+|(?<=\\boxed\{)\d+", text):
            hit[m.start():m.end()] = [True] * (m.end() - m.start())
        out[i, :len(pieces)] = torch.tensor([hit[s] for s in starts], dtype=torch.bool)
    return out & mask


def oracle_weights(run, roll):
    """lam_max on the deciding tokens of non-zero-advantage responses, lam_min elsewhere, mean 1 over the
    valid tokens of every rank's batch."""
    mask, a = roll["batch"]["response_mask"], run.args
    deciding = deciding_tokens(run.tok, roll["batch"]).to(mask.device)  # [N, R]
    lam = torch.where(deciding & (roll["adv"] != 0)[:, None], a.lam_max, a.lam_min) * mask  # [N, R]
    total = delta.reduce(run, torch.stack([lam.double().sum(), mask.sum().double()]))
    return lam * float(total[1] / total[0])


delta.ALGOS["oracle"] = dict(delta.DAPO, weights=oracle_weights)  # the token weights: the only departure

if __name__ == "__main__":
    try:
        args = delta.parse_args()
        if args.algo == "oracle" and args.dataset:
            raise delta.ArgumentError("--algo oracle knows the deciding tokens of the embedded tasks only")
        delta.train(delta.prepare(args))
    except delta.ArgumentError as e:
        sys.exit(f"oracle.py: error: {e}")
