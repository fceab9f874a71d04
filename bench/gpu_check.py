"""One command for a lent GPU: rollout tokens/s, seconds per RL step of DelTA and DAPO, and peak memory
against bench/memory.py's estimate, printed as one table.

    python bench/gpu_check.py            # GPU: a randomly initialised Qwen3 of about 0.6 B parameters
    python bench/gpu_check.py --tiny     # CPU: the tiny default's dimensions (the suite runs this)

No downloads: the model is built from a config (hidden 1024, 38 layers, the character tokenizer of the
tiny default) with random weights, so the verifier's rewards are replaced by seeded coin flips (both
sides of every group exist, as DelTA's coefficients need). Rollouts are sampled at temperature 1 until
eos or --max_new_tokens. vLLM is measured where it is installed. Steps of the two algorithms alternate
from the same weights, each with its own model and optimizer; the first two of each are not timed.
"""
import argparse
import copy
import dataclasses
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402
import memory  # noqa: E402

DIMS = {"gpu": dict(hidden_size=1024, num_hidden_layers=38, intermediate_size=3072, num_attention_heads=16,
                    num_key_value_heads=8, head_dim=128),
        "tiny": dict(hidden_size=128, num_hidden_layers=2, intermediate_size=512, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=32)}
SETTINGS = {"gpu": dict(prompts_per_step=64, group_size=8, mini_batch_prompts=32, max_new_tokens=512,
                        max_tokens_per_micro_batch=32768, gen_max_tokens=1 << 19, steps=3),
            "tiny": dict(prompts_per_step=8, group_size=4, mini_batch_prompts=4, max_new_tokens=32,
                         max_tokens_per_micro_batch=4096, gen_max_tokens=65536, steps=1)}


def build(path, dims):
    """The tiny default's tokenizer with a randomly initialised Qwen3 of the given dimensions, saved."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    delta.build_tiny(path)
    tok = delta.load_tokenizer(path)
    cfg = Qwen3Config(vocab_size=len(tok), max_position_embeddings=4096, eos_token_id=0, pad_token_id=0,
                      bos_token_id=None, tie_word_embeddings=False, **dims)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    return cfg.to_dict()


def coin_flips(run, batch, rows):
    """In place of the verifier: a seeded coin per response (the random model answers nothing right)."""
    correct = torch.randint(0, 2, (batch["input_ids"].shape[0],), generator=run.coins).float()
    return correct, correct.to(run.device)


def rollout_rate(sampler, tok, n_prompts, group):
    prompts = [delta.prompt_text(tok, f"{a}+{a + 7}=?") for a in range(n_prompts)]
    delta.sample(sampler, prompts[:2], 1.0, group)  # warm-up
    sync()
    t = time.perf_counter()
    batch = delta.sample(sampler, prompts, 1.0, group)
    sync()
    return int(batch["response_mask"].sum()) / (time.perf_counter() - t)


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="the tiny dimensions and settings (CPU, a test)")
    kind = "tiny" if p.parse_args(argv).tiny else "gpu"
    settings = dict(SETTINGS[kind])
    steps = settings.pop("steps")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    path = tempfile.mkdtemp(prefix="gpu_check-")
    cfg = build(path, DIMS[kind])
    model, tok = delta.load_model(path, device)
    args = delta.Args(model=path, output_dir=path, max_prompt_length=32, lr=1e-6, **settings)
    n_params = sum(x.numel() for x in model.parameters())
    rows = [("parameters", f"{n_params / 1e9:.3f} B", f"hidden {cfg['hidden_size']}, {cfg['num_hidden_layers']} layers"),
            ("device", str(torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"),
             f"{args.prompts_per_step} prompts x {args.group_size}, up to {args.max_new_tokens} new tokens")]

    runs = {}
    for algo in ("dapo", "delta"):
        m = copy.deepcopy(model)
        run = delta.make_run(dataclasses.replace(args, algo=algo), m, tok, path, device=device,
                             train_rows=delta.addition_task(0, 0)[0])
        run.coins, run.times, run.rng = torch.Generator().manual_seed(0), [], torch.get_rng_state()
        run.reward_stats = dict(timeouts=0, errors=0)
        runs[algo] = run
    rate = rollout_rate(runs["dapo"].sampler, tok, args.prompts_per_step, args.group_size)
    rows.append(("rollout tokens/s, HF generate", f"{rate:,.0f}", "temperature 1, until eos or the limit"))
    try:
        import vllm  # noqa: F401
        vl = delta.make_sampler(dataclasses.replace(args, vllm=True), None, tok, path, delta.DDP(1, device), 0, 1,
                                device)
        vrate = rollout_rate(vl, tok, args.prompts_per_step, args.group_size)
        rows.append(("rollout tokens/s, vLLM", f"{vrate:,.0f}", f"vLLM / HF = {vrate / rate:.2f}"))
        del vl
    except ImportError:
        rows.append(("rollout tokens/s, vLLM", "not installed", "requirements-vllm.txt"))

    verify, delta.verify = delta.verify, coin_flips
    try:
        for step in range(2 + steps):
            for algo in (("dapo", "delta") if step % 2 == 0 else ("delta", "dapo")):
                run = runs[algo]
                torch.set_rng_state(run.rng)
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                sync()
                t = time.perf_counter()
                m = delta.rl_step(run, step)
                sync()
                run.rng = torch.get_rng_state()
                if step >= 2:
                    peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else float("nan")
                    run.times.append((time.perf_counter() - t, m["response/length"], peak))
    finally:
        delta.verify = verify
    mean = {a: [sum(x[i] for x in r.times) / len(r.times) for i in range(3)] for a, r in runs.items()}
    for a in ("dapo", "delta"):
        rows.append((f"seconds per RL step, {a}", f"{mean[a][0]:.3f}", f"mean response {mean[a][1]:.0f} tokens"))
    rows.append(("delta / dapo, seconds per step", f"{mean['delta'][0] / mean['dapo'][0]:.3f}", f"{steps} timed steps each"))
    est = max(memory.peaks(memory.estimate(cfg, runs["delta"].args, 1, False, "packed", mean["delta"][1],
                                           gpu=device.type == "cuda")[0]).values())
    measured = max(r.times[-1][2] for r in runs.values())
    rows.append(("peak memory, GiB: measured / estimate", f"{measured / memory.GiB:.2f} / {est / memory.GiB:.2f}",
                 "torch.cuda.max_memory_allocated over a step; bench/memory.py, DDP, packed features"
                 if device.type == "cuda" else "measured on GPU only"))
    print("| quantity | value | note |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    return rows


if __name__ == "__main__":
    main()
