"""Minutes per RL step at a recipe's shape, phase by phase, and the wall time of the run, as a range: a model for
planning GPU weeks, beside tools/memory.py (which says whether a step fits). Arithmetic, no GPU:

    generate  vLLM decodes bandwidth-bound: each decode step reads the bf16 weights and the KV cache in use once,
              (2 N + kv) / (HBM bandwidth x efficiency); the batch is what vLLM's KV cache holds (memory.vllm_kv) at the
              mean context of a sequence over its life (prompt + half its response); the longest response adds its
              own tail, decoded at small batch (weights only) after the rest are done
    score     one forward over every token: 2 x the matmul weights a token, plus attention's 2 L H T (causal: each
              token attends to T / 2 before it, for scores and values), at the GPU's bf16 peak x MFU
    update    the forward again, gradient checkpointing's recompute and the backward (2 x the forward): 4 forwards;
              FSDP2's collectives overlap it (docs/scale.md)
    overheads vLLM's preemption (a share of the decoding recomputed when its KV cache is full), the weight push to
              vLLM each step, the held-out evaluation every --eval_every steps and the checkpoint (fp32 weights and
              AdamW's two moments, 12 bytes a parameter) every --save_every steps, each spread over its steps

Every assumption has two ends (ASSUMPTIONS): the low figure takes each optimistic end, the high one each pessimistic
end. Attention has its own efficiency: delta.py's forwards pass an explicit padding mask, so SDPA runs its
memory-efficient or math kernel, not flash attention's, on the 2 L H T context term.

Score and update run only the rows of non-zero advantage (--skip_zero_advantage, delta.py's default): with
--zero_spread Z, the expected share of groups whose rewards are all equal, they forward 1 - Z of the tokens (forking
scores every row).

    python tools/steptime.py --model tools/configs/qwen3-8b-base.json --gpu h100 --world_size 8 \\
        --prompts_per_step 128 --group_size 16 --max_prompt_length 2048 --max_new_tokens 20480 --vllm --fsdp \\
        --gradient_checkpointing --mean_response_tokens 10240 --mean_prompt_tokens 256 --steps 1608
    ... --calibrate runs/gpu_check.md   # MFU from tools/gpu_check.py's ms per token on a lent GPU, not assumed

    ... --assume attention_mfu=0.3,0.2 # either end of any assumption

MFU (model FLOPs utilisation) and HBM efficiency are assumptions until a device check's table calibrates the first
(its slice's FLOPs per token over its measured ms per token, forward and forward + backward apart: both ends).
"""
import argparse
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402
import memory  # noqa: E402

ASSUMPTIONS = {  # name: (optimistic end, pessimistic end), and what it is
    "mfu": ((0.4, 0.3), "the matmuls' share of the bf16 peak in scoring and the update"),
    "attention_mfu": ((0.4, 0.1), "attention's share of the peak under an explicit padding mask (no flash kernel)"),
    "hbm_efficiency": ((0.8, 0.6), "decode's share of the HBM bandwidth"),
    "preemption": ((0.0, 0.2), "share of the decoding redone after vLLM preempts sequences (its KV cache full)"),
    "push_seconds": ((5.0, 60.0), "the weights to vLLM each step: FSDP's gather, reload_weights, sleep and wake"),
    "disk_gb_per_s": ((2.0, 0.5), "a checkpoint's write rate, all ranks together"),
}
GPUS = {"h100": dict(flops=989e12, hbm=3.35e12, gib=79.6),  # SXM, bf16 dense (NVIDIA's data sheets)
        "h200": dict(flops=989e12, hbm=4.8e12, gib=139.8)}


def forward_flops(cfg, tokens, context):
    """FLOPs of one forward over `tokens` tokens whose mean attention context is `context` tokens."""
    s, n = memory.shape(cfg), memory.parameters(cfg)
    return tokens * (2 * n["linear"] + 2 * 2 * s["L"] * s["heads"] * s["hd"] * context)


def calibrated_mfu(path, gpu):
    """(forward MFU, forward + backward MFU) from a tools/gpu_check.py table: its slice's FLOPs a token at each
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
        raise SystemExit(f"{path}: no 'ms per token' rows of tools/gpu_check.py")
    return sum(fwd) / len(fwd), sum(bwd) / len(bwd)


def generate_seconds(cfg, args, world, gpu, seqs, mean_prompt, mean_response, hbm_efficiency):
    """Seconds to decode `seqs` responses of mean_response tokens on one GPU: bandwidth-bound steps at the batch
    vLLM's KV cache holds, then the longest response's tail at a batch of one."""
    s, n = memory.shape(cfg), memory.parameters(cfg)
    context = mean_prompt + mean_response / 2
    _, kv, _ = memory.vllm_kv(cfg, args, world, args.fsdp, gpu["gib"] * memory.GiB)
    per_token_kv = 2 * s["L"] * s["kv"] * s["hd"] * 2  # bf16 K and V
    batch = min(seqs, max(1.0, kv / per_token_kv / context))  # sequences decoded at once
    bandwidth = gpu["hbm"] * hbm_efficiency
    decode_step = (2 * n["total"] + batch * context * per_token_kv) / bandwidth
    tail = (args.max_new_tokens - mean_response) * 2 * n["total"] / bandwidth  # the longest, alone at the end
    return seqs * mean_response / batch * decode_step + max(0.0, tail)


def step_minutes(cfg, args, world, gpu, mean_prompt, mean_response, mfu=(0.4, 0.4), hbm_efficiency=0.8,
                 zero_spread=0.0, attention_mfu=None, preemption=0.0):
    """{phase: minutes} of one step on each GPU (every GPU does its share at once). attention_mfu: attention's
    own efficiency (None: the matmuls' mfu); preemption: a share of the decoding done twice."""
    s, n = memory.shape(cfg), memory.parameters(cfg)
    seqs = args.prompts_per_step * args.group_size / world  # this GPU's responses
    tokens, context = seqs * (mean_prompt + mean_response), mean_prompt + mean_response / 2
    generate = (1 + preemption) * generate_seconds(cfg, args, world, gpu, seqs, mean_prompt, mean_response,
                                                   hbm_efficiency)
    linear = forward_flops(cfg, tokens, 0)
    attention = forward_flops(cfg, tokens, context) - linear
    att = attention_mfu or mfu
    kept = 1 - zero_spread if args.skip_zero_advantage else 1.0  # the rows forwarded
    scored = 1.0 if delta.ALGOS[args.algo]["score_all"] else kept
    pass_seconds = lambda k: (linear / mfu[k] + attention / att[k]) / gpu["flops"]
    return {"generate": generate / 60, "score": scored * pass_seconds(0) / 60,
            "update": kept * 4 * pass_seconds(1) / 60}


def overhead_minutes(cfg, args, world, gpu, mean_prompt, mean_response, hbm_efficiency, push_seconds,
                     disk_gb_per_s):
    """{overhead: minutes a step}: the weight push, the held-out evaluation (greedy, its problems over the GPUs)
    spread over --eval_every steps, a checkpoint (12 bytes a parameter) spread over --save_every steps."""
    n = memory.parameters(cfg)["total"]
    every = lambda k: 1 / k if k else 0.0
    evaluation = generate_seconds(cfg, args, world, gpu, math.ceil(args.eval_size / world), mean_prompt,
                                  mean_response, hbm_efficiency)
    return {"weight push": push_seconds / 60, "evaluation": evaluation * every(args.eval_every) / 60,
            "checkpoint": 12 * n / (disk_gb_per_s * 1e9) * every(args.save_every) / 60}


def step_range(cfg, args, world, gpu, mean_prompt, mean_response, assume, mfu=None, zero_spread=0.0):
    """(low, high): {phase or overhead: minutes a step} at the optimistic and the pessimistic end of every
    assumption (`assume`: ASSUMPTIONS' values); mfu: a calibrated (forward, update) pair for both ends."""
    ends = []
    for i in (0, 1):
        a = {k: v[i] for k, v in assume.items()}
        m = mfu or (a["mfu"], a["mfu"])
        phases = step_minutes(cfg, args, world, gpu, mean_prompt, mean_response, m, a["hbm_efficiency"], zero_spread,
                              (a["attention_mfu"], a["attention_mfu"]), a["preemption"])
        ends.append(dict(phases, **overhead_minutes(cfg, args, world, gpu, mean_prompt, mean_response,
                                                    a["hbm_efficiency"], a["push_seconds"], a["disk_gb_per_s"])))
    return ends


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], add_help=False)
    p.add_argument("--gpu", default="h100", choices=sorted(GPUS))
    p.add_argument("--world_size", type=int, default=8)
    p.add_argument("--mean_response_tokens", type=int, default=0, help="default: half of --max_new_tokens")
    p.add_argument("--mean_prompt_tokens", type=int, default=256)
    p.add_argument("--steps", type=int, default=0, help="steps of the run (the recipe: 2 epochs of 103k / 128)")
    p.add_argument("--assume", action="append", default=[], help="NAME=LOW,HIGH: an assumption's two ends")
    p.add_argument("--calibrate", default="", help="a tools/gpu_check.py table: MFU from its ms per token")
    p.add_argument("--zero_spread", type=float, default=0.0, help="expected share of groups with all rewards equal")
    opts, rest = p.parse_known_args(argv)
    args = delta.parse_args(rest)
    cfg, gpu = memory.read_config(args.model), GPUS[opts.gpu]
    mean = opts.mean_response_tokens or args.max_new_tokens // 2
    assume = {k: v for k, (v, _) in ASSUMPTIONS.items()}
    for item in opts.assume:
        name, _, ends = item.partition("=")
        if name not in assume:
            raise SystemExit(f"--assume {item}: no assumption {name!r}; known: {', '.join(assume)}")
        assume[name] = tuple(float(x) for x in ends.split(","))
    mfu = calibrated_mfu(opts.calibrate, GPUS["h200"]) if opts.calibrate else None
    low, high = step_range(cfg, args, opts.world_size, gpu, opts.mean_prompt_tokens, mean, assume, mfu,
                           opts.zero_spread)
    print(f"{args.model} on {opts.world_size} x {opts.gpu}: {args.prompts_per_step} x {args.group_size} responses, "
          f"mean prompt {opts.mean_prompt_tokens} + response {mean} tokens; zero-spread groups {opts.zero_spread:.0%} "
          f"(skipped: {args.skip_zero_advantage}); evaluation of {args.eval_size} every {args.eval_every} steps, a "
          f"checkpoint every {args.save_every}\n\n| assumption | optimistic | pessimistic | what |\n|---|---|---|---|")
    for k, (lo, hi) in assume.items():
        if mfu and k == "mfu":
            lo = hi = f"{mfu[0]:.2f} / {mfu[1]:.2f} (calibrated)"
        print(f"| {k} | {lo} | {hi} | {ASSUMPTIONS[k][1]} |")
    print("\n| phase | minutes a step, low | high |\n|---|---|---|")
    for k in low:
        print(f"| {k} | {low[k]:.1f} | {high[k]:.1f} |")
    total = sum(low.values()), sum(high.values())
    print(f"| **step** | **{total[0]:.1f}** | **{total[1]:.1f}** |")
    if opts.steps:
        hours = [opts.steps * t / 60 for t in total]
        print(f"\n{opts.steps} steps: {hours[0]:,.0f} to {hours[1]:,.0f} hours, {hours[0] / 168:.1f} to "
              f"{hours[1] / 168:.1f} weeks")
    return low, high


if __name__ == "__main__":
    main(sys.argv[1:])
