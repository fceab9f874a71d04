"""One command for a lent GPU: seconds per RL step of DAPO and DelTA phase by phase, rollout speed, each phase's
peak memory against bench/memory.py, and vLLM against HF after a weight push, printed as one table.

    python bench/gpu_check.py            # GPU: a randomly initialised Qwen3 of 0.46 B parameters
    python bench/gpu_check.py --tiny     # CPU: the tiny default's dimensions (the suite runs this)

No downloads: the model is built from a config (hidden 1024, 24 layers, vocabulary 32,768 over the tiny
default's character tokenizer) with random weights, so rollouts run to --max_new_tokens and the verifier's
rewards are replaced by seeded coin flips (both sides of every group exist, as DelTA's coefficients need).

What it needs and how long it takes: bench/memory.py puts the GPU settings (32 prompts x 8 responses of 256
tokens, bf16, gradient checkpointing, micro-batches of 8,192 tokens) at about 10 GiB, printed first; any
GPU of 24 GiB or more. Each algorithm runs 1 + 3 steps from the same weights and the same generators (CPU,
CUDA and Python: the first rollouts are the same draws), in its own model and optimizer loaded from disk, with
everything of the other freed first, so its peaks are measured from a clean baseline (allocated and reserved
above the memory held before its model was loaded). A step's time is mostly HF generation: 256 sequences of
256 tokens in one call, about 256 decode steps of 20-40 ms on one H200, so about 10 s a step and 2 minutes for
the 8 steps; with vLLM's start-up and its checks, 3 to 5 minutes in all (the table's last row: the real time).
"""
import argparse
import dataclasses
import gc
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402
import memory  # noqa: E402
from memory_measured import coin_flips, phases  # noqa: E402

DIMS = {"gpu": dict(hidden_size=1024, num_hidden_layers=24, intermediate_size=3072, num_attention_heads=16,
                    num_key_value_heads=8, head_dim=64, vocab_size=32768),
        "tiny": dict(vocab_size=512)}  # the tiny default's shape, a vocabulary beyond its characters
SETTINGS = {"gpu": dict(prompts_per_step=32, group_size=8, mini_batch_prompts=16, max_new_tokens=256,
                        max_tokens_per_micro_batch=8192, gen_max_tokens=1 << 17, gradient_checkpointing=True),
            "tiny": dict(prompts_per_step=8, group_size=4, mini_batch_prompts=4, max_new_tokens=32,
                         max_tokens_per_micro_batch=4096, gen_max_tokens=65536)}
TIMED = 3  # steps timed after one untimed step (AdamW's state is made in the first)


def allocated(device, reserved=False):
    if device.type != "cuda":
        return 0
    return torch.cuda.memory_reserved(device) if reserved else torch.cuda.memory_allocated(device)


def run_algorithm(algo, path, args, device, start, rows):
    """1 + TIMED rl_steps of one algorithm from a fresh copy of the model and the generators' state `start`:
    per-phase seconds, peak allocated and reserved bytes above the baseline, and the metrics of each step."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    base, base_reserved = allocated(device), allocated(device, True)
    model, tok = delta.load_model(path, device)
    if args.gradient_checkpointing:
        delta.enable_checkpointing(model)
    run = delta.make_run(dataclasses.replace(args, algo=algo), model, tok, path, device=device, train_rows=rows)
    run.coins, run.reward_stats = torch.Generator().manual_seed(0), dict(timeouts=0, errors=0)
    peaks, steps = {}, []

    def enter(phase):  # each phase's peak from its own start
        if run.phase is not None and device.type == "cuda":
            seen = (torch.cuda.max_memory_allocated(device) - base, torch.cuda.max_memory_reserved(device) - base_reserved)
            peaks[run.phase] = tuple(map(max, peaks.get(run.phase, (0, 0)), seen))
        if phase is not None and device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        run.phase = phase
    run.phase = None
    delta.rng_state(start)  # the same draws for both algorithms: CPU, CUDA and Python generators
    with phases(run, enter):
        for step in range(1 + TIMED):
            if step == 1:
                peaks.clear()  # the first step made AdamW's state; the timed steps are the steady state
            steps.append(delta.rl_step(run, step))
    del run, model
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return peaks, steps


def vllm_rows(args, path, device, prompts):
    """vLLM's tokens/s on the same prompts, and its greedy tokens against HF's after a weight push."""
    try:
        import vllm  # noqa: F401
    except ImportError:
        return [("vLLM", "not installed", "", "requirements-vllm.txt")]
    bf16 = delta.bf16_compute(args, device)
    model, tok = delta.load_model(path, device)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)  # weights that only a push can give vLLM
    sampler = delta.make_sampler(dataclasses.replace(args, vllm=True), model, tok, path, delta.DDP(1, device, bf16))
    hf = delta.make_sampler(args, model, tok, path, delta.DDP(1, device, bf16))
    try:
        delta.sample(sampler, prompts[:2], 1.0, 2)  # warm-up
        t = time.perf_counter()
        batch = delta.sample(sampler, prompts, 1.0, args.group_size, seed=1)
        rate = float(batch["response_mask"].sum()) / (time.perf_counter() - t)
        a, b = delta.sample(hf, prompts[:16], 0.0), delta.sample(sampler, prompts[:16], 0.0)
        same = (a["input_ids"] == b["input_ids"]).float().mean().item()
        logp = delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"],
                                       batch["response_mask"].shape[1], 1.0)[0].float()
        gap = ((logp - batch["sampler_logp"]).abs() * batch["response_mask"]).sum() / batch["response_mask"].sum()
    finally:
        sampler.close()
        del sampler, hf, model
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return [("vLLM rollout tokens/s", f"{rate:,.0f}", "", "after a weight push, temperature 1"),
            ("vLLM greedy tokens equal to HF's", f"{100 * same:.1f} %", "", "16 prompts, after the push (bf16 kernels "
                                                                             "may part late)"),
            ("vLLM log-prob gap (rollout/logp_gap)", f"{float(gap):.2e}", "", "mean |log pi_vLLM - log pi_old|")]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="the tiny dimensions and settings (CPU, a test)")
    kind = "tiny" if p.parse_args(argv).tiny else "gpu"
    t0 = time.perf_counter()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    path = tempfile.mkdtemp(prefix="gpu_check-")
    delta.build_tiny(path, max_position_embeddings=1024, **DIMS[kind])
    cfg = memory.read_config(path)
    args = delta.Args(model=path, output_dir=path, max_prompt_length=32, lr=1e-6, **SETTINGS[kind])
    delta.resolve_defaults(args)
    gpu = device.type == "cuda"
    estimate, _ = memory.estimate(cfg, args, 1, False, "packed", args.max_new_tokens, gpu=gpu)
    expected = memory.peaks(estimate)
    n_params = memory.parameters(cfg)["total"]
    rows = [("device", torch.cuda.get_device_name(0) if gpu else "cpu", "",
             f"{n_params / 1e6:,.0f} M parameters; {args.prompts_per_step} x {args.group_size} responses of "
             f"{args.max_new_tokens} tokens; bf16 {delta.bf16_compute(args, device)}"),
            ("bench/memory.py's peak for these settings, GiB", f"{max(expected.values()) / memory.GiB:.1f}", "",
             "DDP on one GPU, features packed, every response at the limit")]
    if gpu and max(expected.values()) > torch.cuda.mem_get_info()[0]:
        print(f"warning: bench/memory.py expects {max(expected.values()) / memory.GiB:.1f} GiB, more than is free",
              file=sys.stderr)
    torch.manual_seed(0)
    start = delta.rng_state()
    train_rows = delta.addition_task(0, 0)[0]
    verify, delta.verify = delta.verify, coin_flips
    try:
        results = {algo: run_algorithm(algo, path, args, device, start, train_rows) for algo in ("dapo", "delta")}
    finally:
        delta.verify = verify
    mean = {a: {k: sum(m[k] for m in steps[1:]) / TIMED for k in steps[1]} for a, (_, steps) in results.items()}
    rows.append(("first rollout the same draws (response length)", *(f"{results[a][1][0]['response/length']:.1f}"
                                                                      for a in ("dapo", "delta")), "paired generators"))
    for k in ("generate", "score", "coefficients", "train"):
        rows.append((f"seconds per step: {k}", *(f"{mean[a].get(f'time/{k}', 0.0):.3f}" for a in ("dapo", "delta")),
                     f"mean of {TIMED} steps"))
    total = {a: sum(mean[a].get(f"time/{k}", 0.0) for k in ("generate", "score", "coefficients", "train"))
             for a in mean}
    rows.append(("seconds per step", f"{total['dapo']:.3f}", f"{total['delta']:.3f}",
                 f"delta / dapo = {total['delta'] / total['dapo']:.3f}"))
    tokens = {a: mean[a]["response/length"] * args.prompts_per_step * args.group_size / mean[a]["time/generate"]
              for a in mean}
    rows.append(("HF rollout tokens/s", f"{tokens['dapo']:,.0f}", f"{tokens['delta']:,.0f}", "generate phase"))
    for ph in memory.PHASES:
        cells = []
        for a in ("dapo", "delta"):
            got = results[a][0].get(ph)
            cells.append(f"{got[0] / memory.GiB:.2f} / {got[1] / memory.GiB:.2f}" if got else "-")
        est = memory.peaks(memory.estimate(cfg, args, 1, False, "packed", mean["delta"]["response/length"],
                                           gpu=gpu)[0])[ph]
        rows.append((f"peak GiB, {ph}: allocated / reserved", *cells, f"bench/memory.py (delta): {est / memory.GiB:.2f}"
                     if gpu else "measured on a GPU only"))
    prompts = [delta.prompt_text(delta.load_tokenizer(path), f"{a}+{a + 7}=?") for a in range(args.prompts_per_step)]
    rows += vllm_rows(args, path, device, prompts)
    rows.append(("wall time of this check, s", f"{time.perf_counter() - t0:.0f}", "", ""))
    print("| quantity | dapo | delta | note |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return rows


if __name__ == "__main__":
    main()
