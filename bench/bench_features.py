"""Benchmark: DelTA's features stored packed in bf16 against the padded fp32 layout, on real rollouts.

    python bench/bench_features.py              # the tiny default after its warm start, 4 rollout steps

For each rollout batch: the bytes of the features v as delta.py stores them (the tokens of non-zero-
advantage responses only, [n, H] in bf16, the compute dtype on GPU) and as padded fp32 [N, R, H]; and
how far the coefficients lam move when computed from the bf16 features instead of fp32 ones (max and
mean absolute difference over the valid tokens).
"""
import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402
import tasks  # noqa: E402
import rewards  # noqa: E402


def main():
    args = delta.parse_args(sys.argv[1:] + ["--output_dir", "/tmp/bench_features"])
    delta.validate_args(args)
    delta.resolve_defaults(args)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    _, train_rows, eval_rows = delta.load_task(args)  # (kind, training rows, held-out rows)
    path = os.path.join(args.output_dir, "tiny-init")
    tasks.build_tiny(path, args.seed)
    model, tok = delta.load_model(path, torch.device("cpu"))
    run = delta.make_run(args, model, tok, path, train_rows=train_rows, eval_rows=eval_rows)
    torch.manual_seed(args.seed)
    delta.warm_start(run, print)
    print(f"{'step':>4}{'tokens':>8}{'side tokens':>13}{'padded fp32':>13}"
          f"{'packed bf16':>13}{'max |dlam|':>12}{'mean |dlam|':>13}")
    for step in range(4):
        rows = delta.step_prompts(run, step)[0]
        batch = delta.sample(run.sampler, [delta.prompt_text(tok, r["question"], args.instruction) for r in rows],
                             args.temperature, args.group_size)
        correct = torch.tensor(rewards.score_batch(delta.decode_responses(tok, batch),
                                                   [r["answer"] for r in rows for _ in range(args.group_size)]))
        adv = delta.group_advantages(correct, args.group_size)
        mask = batch["response_mask"]
        plans = delta.micro_batches(run, batch)
        lams = {}
        for dtype in ("fp32", "bf16"):
            run.args = dataclasses.replace(args, feature_dtype=dtype)
            batch["old_logp"], _, packed = delta.score(run, batch, adv, plans, True)
            lams[dtype] = delta.delta_weights(run, dict(batch=batch, features=packed, stats={}))
            if dtype == "bf16":
                packed_bytes = packed[0].numel() * packed[0].element_size()
                side = packed[0].shape[0]
        diff = (lams["fp32"] - lams["bf16"])[mask].abs()
        H = model.config.hidden_size
        print(f"{step:>4}{int(mask.sum()):>8}{side:>13}{mask.numel() * H * 4:>13,}{packed_bytes:>13,}"
              f"{diff.max().item():>12.2e}{diff.mean().item():>13.2e}")


if __name__ == "__main__":
    main()
