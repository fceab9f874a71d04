"""Minutes per RL step at a recipe's shape, phase by phase, and the wall time of the run: a model for planning GPU
weeks, beside bench/memory.py (which says whether a step fits). Arithmetic, no GPU:

    generate  vLLM decodes bandwidth-bound: each decode step reads the bf16 weights and the KV cache in use once,
              (2 N + kv) / (HBM bandwidth x efficiency); the batch is what vLLM's KV cache holds (memory.vllm_kv) at the
              mean context of a sequence over its life (prompt + half its response); the longest response adds its
              own tail, decoded at small batch (weights only) after the rest are done
    score     one forward over every token: 2 x the matmul weights a token, plus attention's 2 L H T (causal: each
              token attends to T / 2 before it, for scores and values), at the GPU's bf16 peak x MFU
    update    the forward again, gradient checkpointing's recompute and the backward (2 x the forward): 4 forwards;
              FSDP2's collectives overlap it (docs/scale.md)

Score and update run only the rows of non-zero advantage (--skip_zero_advantage, delta.py's default): with
--zero_spread Z, the expected share of groups whose rewards are all equal, they forward 1 - Z of the tokens (forking
scores every row).

    python bench/steptime.py --model bench/configs/qwen3-8b-base.json --gpu h100 --world_size 8 \\
        --prompts_per_step 128 --group_size 16 --max_prompt_length 2048 --max_new_tokens 20480 --vllm --fsdp \\
        --gradient_checkpointing --mean_response_tokens 10240 --mean_prompt_tokens 256 --steps 1608
    ... --calibrate runs/gpu_check.md   # MFU from bench/gpu_check.py's ms per token on a lent GPU, not assumed

MFU (model FLOPs utilisation) 0.4 and HBM efficiency 0.8 are assumptions until a device check's table calibrates
the first (its slice's FLOPs per token over its measured ms per token, forward and forward + backward apart).
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402
import memory  # noqa: E402

GPUS = {"h100": dict(flops=989e12, hbm=3.35e12, gib=79.6),  # SXM, bf16 dense (NVIDIA's data sheets)
        "h200": dict(flops=989e12, hbm=4.8e12, gib=139.8)}


def forward_flops(cfg, tokens, context):
    """FLOPs of one forward over `tokens` tokens whose mean attention context is `context` tokens."""
    s, n = memory.shape(cfg), memory.parameters(cfg)
    return tokens * (2 * n["linear"] + 2 * 2 * s["L"] * s["heads"] * s["hd"] * context)


def calibrated_mfu(path, gpu):
    """(forward MFU, forward + backward MFU) from a bench/gpu_check.py table: its slice's FLOPs a token at each
    micro-batch over the ms per token measured there, averaged over the micro-batches."""
    import gpu_check
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs", "qwen3-8b-base.json")) as f:
        cfg = dict(json.load(f), **gpu_check.SLICE["gpu"])
    fwd, bwd = [], []
    for line in open(path):
        m = re.match(r"\| (\d+) x ([\d,]+) \| ms per token: forward \(scoring\) / forward \+ backward \(update\) "
                     r"\| ([\d.]+) / ([\d.]+) \|", line)
        if m:
            tokens = int(m.group(2).replace(",", ""))
            per_token = forward_flops(cfg, 1, tokens / 2)
            fwd.append(per_token / (float(m.group(3)) / 1e3) / gpu["flops"])
            bwd.append(4 * per_token / (float(m.group(4)) / 1e3) / gpu["flops"])
    if not fwd:
        raise SystemExit(f"{path}: no 'ms per token' rows of bench/gpu_check.py")
    return sum(fwd) / len(fwd), sum(bwd) / len(bwd)


def step_minutes(cfg, args, world, gpu, mean_prompt, mean_response, mfu=(0.4, 0.4), hbm_efficiency=0.8,
                 zero_spread=0.0):
    """{phase: minutes} of one step on each GPU (every GPU does its share at once)."""
    s, n = memory.shape(cfg), memory.parameters(cfg)
    seqs = args.prompts_per_step * args.group_size / world  # this GPU's responses
    tokens, context = seqs * (mean_prompt + mean_response), mean_prompt + mean_response / 2
    _, kv, _ = memory.vllm_kv(cfg, args, world, args.fsdp, gpu["gib"] * memory.GiB)
    per_token_kv = 2 * s["L"] * s["kv"] * s["hd"] * 2  # bf16 K and V
    batch = min(seqs, max(1.0, kv / per_token_kv / context))  # sequences decoded at once
    bandwidth = gpu["hbm"] * hbm_efficiency
    decode_step = (2 * n["total"] + batch * context * per_token_kv) / bandwidth
    tail = (args.max_new_tokens - mean_response) * 2 * n["total"] / bandwidth  # the longest, alone at the end
    generate = seqs * mean_response / batch * decode_step + max(0.0, tail)
    forward = forward_flops(cfg, tokens, context)
    kept = 1 - zero_spread if args.skip_zero_advantage else 1.0  # the rows forwarded
    scored = 1.0 if delta.ALGOS[args.algo]["score_all"] else kept
    return {"generate": generate / 60, "score": scored * forward / (gpu["flops"] * mfu[0]) / 60,
            "update": kept * 4 * forward / (gpu["flops"] * mfu[1]) / 60}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], add_help=False)
    p.add_argument("--gpu", default="h100", choices=sorted(GPUS))
    p.add_argument("--world_size", type=int, default=8)
    p.add_argument("--mean_response_tokens", type=int, default=0, help="default: half of --max_new_tokens")
    p.add_argument("--mean_prompt_tokens", type=int, default=256)
    p.add_argument("--steps", type=int, default=0, help="steps of the run (the recipe: 2 epochs of 103k / 128)")
    p.add_argument("--mfu", type=float, default=0.4)
    p.add_argument("--hbm_efficiency", type=float, default=0.8)
    p.add_argument("--calibrate", default="", help="a bench/gpu_check.py table: MFU from its ms per token")
    p.add_argument("--zero_spread", type=float, default=0.0, help="expected share of groups with all rewards equal")
    opts, rest = p.parse_known_args(argv)
    args = delta.parse_args(rest)
    cfg, gpu = memory.read_config(args.model), GPUS[opts.gpu]
    mean = opts.mean_response_tokens or args.max_new_tokens // 2
    mfu = calibrated_mfu(opts.calibrate, GPUS["h200"]) if opts.calibrate else (opts.mfu, opts.mfu)
    minutes = step_minutes(cfg, args, opts.world_size, gpu, opts.mean_prompt_tokens, mean, mfu, opts.hbm_efficiency,
                           opts.zero_spread)
    total = sum(minutes.values())
    print(f"{args.model} on {opts.world_size} x {opts.gpu}: {args.prompts_per_step} x {args.group_size} responses, "
          f"mean prompt {opts.mean_prompt_tokens} + response {mean} tokens; MFU {mfu[0]:.2f} forward, {mfu[1]:.2f} "
          f"forward + backward{' (calibrated)' if opts.calibrate else ' (assumed)'}, HBM efficiency "
          f"{opts.hbm_efficiency}; zero-spread groups {opts.zero_spread:.0%} (skipped: "
          f"{args.skip_zero_advantage})\n\n| phase | minutes a step | share |\n|---|---|---|")
    for k, x in minutes.items():
        print(f"| {k} | {x:.1f} | {x / total:.0%} |")
    print(f"| **step** | **{total:.1f}** | |")
    if opts.steps:
        hours = opts.steps * total / 60
        print(f"\n{opts.steps} steps: {hours:,.0f} hours, {hours / 24 / 7:.1f} weeks")
    return minutes


if __name__ == "__main__":
    main(sys.argv[1:])
