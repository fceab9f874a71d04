"""Peak host memory (RSS) of each rank and of the node while 2 processes start a run: the model loaded, wrapped
(DDP or FSDP2) and its optimizer made, as delta.prepare does it. Two starts side by side in one run:

    every rank reads   load_model(meta=False) on every rank: each reads the whole model in fp32 (before issue 37)
    rank 0 reads       load_model(meta=True): every rank builds on the meta device, rank 0 alone reads the weights
                       and broadcasts them into each rank's tensors after sharding (checkpoints.load_weights)

    python tools/host_memory.py                      # a synthetic Qwen3 of 0.27 B parameters (1.1 GB in fp32)
    python tools/host_memory.py --layers 4           # smaller, faster
    python tools/host_memory.py --model /tmp/delta-smollm2   # a real model (SmolLM2-135M-Instruct, tools/smollm2.py)

On a CPU the device is the host: the weights each rank trains (a whole copy under DDP, a shard under FSDP2) are
host memory here, where on a GPU node they would be on the GPUs; what the start changes is the copy each rank reads
on its way there. The node's peak is the largest sum of the ranks' RSS seen by sampling /proc every 10 ms.
No downloads: the model is built from a config with random weights (tasks.build_tiny), stored in bf16.
"""
import argparse
import os
import sys
import tempfile
import threading
import time

import torch
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import checkpoints  # noqa: E402
import delta  # noqa: E402
import tasks  # noqa: E402

MiB = 1 << 20


def status(field, pid="self"):
    """A byte count of /proc/PID/status (VmRSS: resident now, VmHWM: the peak), 0 once the process has ended."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))
    except (OSError, StopIteration):
        return 0


def worker(rank, world, tmp, source, engine, meta, out):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous-{engine}-{meta}", rank=rank, world_size=world)
    try:
        model, tok = checkpoints.load_model(source, torch.device("cpu"), meta=meta)
        run = delta.make_run(delta.Args(fsdp=engine == "fsdp"), model, tok, source, rank, world)
        dist.barrier()
        peak = status("VmHWM")  # this process's peak (ru_maxrss would carry the parent's over spawn's exec)
        with open(f"{out}-{rank}", "w") as f:
            f.write(str(peak))
        del run, model
    finally:
        dist.destroy_process_group()


def measure(source, engine, meta, tmp):
    """(peak RSS of rank 0, of rank 1, largest sum seen) in bytes, for one start."""
    out, node, done = os.path.join(tmp, f"peak-{engine}-{meta}"), [0], threading.Event()
    ctx = mp.start_processes(worker, args=(2, tmp, source, engine, meta, out), nprocs=2, join=False,
                             start_method="spawn")
    pids = [p.pid for p in ctx.processes]

    def sample():
        while not done.is_set():
            node[0] = max(node[0], sum(status("VmRSS", p) for p in pids))
            time.sleep(0.01)
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        while not ctx.join():
            pass
    finally:
        done.set()
        sampler.join()
    return [int(open(f"{out}-{r}").read()) for r in (0, 1)] + [node[0]]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=16, help="decoder layers of the synthetic model")
    p.add_argument("--hidden", type=int, default=1024, help="its hidden size (intermediate 3x, vocabulary 32,768)")
    p.add_argument("--model", default="", help="a model folder instead (SmolLM2: tools/smollm2.py makes one)")
    opts = p.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="host_memory-")
    source = opts.model or os.path.join(tmp, "model")
    if not opts.model:
        tasks.build_tiny(source, hidden_size=opts.hidden, num_hidden_layers=opts.layers, num_attention_heads=16,
                         intermediate_size=3 * opts.hidden, num_key_value_heads=8, head_dim=opts.hidden // 16,
                         vocab_size=32768)
    model, _ = checkpoints.load_model(source, torch.device("cpu"))
    n = sum(p.numel() for p in model.parameters())
    if not opts.model:
        model.to(torch.bfloat16).save_pretrained(source)  # in bf16, as hub models are: an fp32 read makes a copy
    del model
    print(f"{opts.model or 'synthetic Qwen3, stored in bf16'}: {n / 1e6:,.0f} M parameters, {4 * n / MiB:,.0f} MiB in "
          "fp32; 2 processes (gloo)\n")
    print("| engine | start | rank 0 peak RSS, MiB | rank 1 peak RSS, MiB | node peak (sum sampled), MiB |")
    print("|---|---|---|---|---|")
    for engine in ("ddp", "fsdp"):
        for meta, name in ((False, "every rank reads"), (True, "rank 0 reads")):
            r0, r1, node = measure(source, engine, meta, tmp)
            print(f"| {engine} | {name} | {r0 / MiB:,.0f} | {r1 / MiB:,.0f} | {node / MiB:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
