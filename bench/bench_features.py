"""Benchmark: DelTA's features stored packed in bf16 against the padded fp32 layout, on real rollouts.

    python bench/bench_features.py              # the tiny default after its warm start, 4 RL steps

For each step's rollout (a rollout hook of delta.rl_step sees it scored, before the update): the bytes of the
features v as delta.py stores them (the tokens of non-zero-advantage responses only, [n, H] in bf16, the compute
dtype on GPU) and as padded fp32 [N, R, H]; and how far the coefficients lam move when computed from the bf16
features instead of fp32 ones (max and mean absolute difference over the valid tokens).
"""
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402


def main():
    run = delta.prepare(delta.parse_args(sys.argv[1:] + ["--output_dir", "/tmp/bench_features", "--progress", "false"]))
    args, H = run.args, run.model.config.hidden_size  # delta.py's boot: the tiny default, warm-started
    print(f"{'step':>4}{'tokens':>8}{'side tokens':>13}{'padded fp32':>13}"
          f"{'packed bf16':>13}{'max |dlam|':>12}{'mean |dlam|':>13}")

    def features_both_ways(run, roll, weights, step):  # a rollout hook: rl_step's scored rollout, before its update
        batch, adv, mask = roll["batch"], roll["adv"], roll["batch"]["response_mask"]
        lams, plans = {}, delta.micro_batches(run, batch)
        for dtype in ("fp32", "bf16"):
            run.args = dataclasses.replace(args, feature_dtype=dtype)
            old_logp, _, packed = delta.score(run, batch, adv, plans, True)
            scored = dict(batch=dict(batch, old_logp=old_logp), features=packed, stats={})
            lams[dtype] = delta.delta_weights(run, scored)
        run.args = args
        diff, (n, nbytes) = (lams["fp32"] - lams["bf16"])[mask].abs(), (packed[0].shape[0], packed[0].nbytes)
        print(f"{step:>4}{int(mask.sum()):>8}{n:>13}{mask.numel() * H * 4:>13,}{nbytes:>13,}"
              f"{diff.max().item():>12.2e}{diff.mean().item():>13.2e}")
    run.hooks.append(features_both_ways)
    for step in range(4):
        delta.rl_step(run, step)


if __name__ == "__main__":
    main()
