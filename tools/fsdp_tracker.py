"""torch's own FSDP2 memory tracker on a real config, beside tools/memory.py: the update's peak per GPU of one
training micro-batch with delta.py's own forward (response_logprobs: the sliced, checkpointed LM head) and loss
(policy_loss), FSDP2 over --world_size processes with bf16 gathers and fp32 reduction, gradient checkpointing and
foreach AdamW, all under fake tensors in one process (no memory, no GPU: a fake process group of the world size).

    python tools/fsdp_tracker.py --model tools/configs/qwen3-8b-base.json --rows 1 --tokens 22528
    python tools/fsdp_tracker.py --model tools/configs/qwen3-14b-base.json --rows 4 --tokens 8192

torch 2.13's FSDPMemTracker (torch/distributed/_tools/fsdp2_mem_tracker.py) counts parameters, gradients,
optimizer state, activations and temporaries by module; it runs on the CPU wheel with fake tensors on the device
"cpu" (FSDP asks for a CUDA device under "cuda"). Two iterations run and the second is tracked (in the first,
DTensor's sharding propagation holds unsharded fake tensors), once the sharded gradients and AdamW's state exist:
the root module's peak (forward and backward) and the whole step's (AdamW's foreach step too). Printed as a
markdown row: config, micro-batch, the two peaks, tools/memory.py's update phase, seconds.
Not counted by the tracker: the CUDA context, NCCL, the allocator's slack, the rollout tensors; tools/memory.py's
figure printed beside it is its update phase for the same micro-batch without them (GPU dtypes).
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import checkpoints  # noqa: E402
import delta  # noqa: E402
import memory  # noqa: E402


def tracked_peak(cfg, world, rows, tokens, response):
    """The tracker's peak bytes (rank 0) in the second of two training micro-batches of rows x tokens: the root
    module's (its forward and backward) and the whole step's (AdamW's foreach step too)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from transformers import AutoConfig, AutoModelForCausalLM

    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
    try:
        mesh = init_device_mesh("cpu", (world,))  # before fake mode: the mesh reads real rank tensors
        config = AutoConfig.for_model(**{k: v for k, v in cfg.items() if k not in ("architectures", "torch_dtype")})
        with FakeTensorMode(allow_non_fake_inputs=True):
            model = AutoModelForCausalLM.from_config(config)  # fp32 master weights
            checkpoints.enable_checkpointing(model)
            model.train()
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for layer in model.model.layers:
                fully_shard(layer, mesh=mesh, mp_policy=policy)
            fully_shard(model, mesh=mesh, mp_policy=policy)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, foreach=True)
            tracker = FSDPMemTracker(model, optimizer)

            def step():
                ids = torch.randint(0, cfg["vocab_size"], (rows, tokens))
                mask = torch.ones(rows, tokens, dtype=torch.bool)
                logp = delta.response_logprobs(model, ids, mask, response, 1.0, 2048, checkpoint=True)[0]
                m = torch.ones(rows, response, dtype=torch.bool)
                loss, _ = delta.policy_loss(logp.float(), logp.detach().float(), torch.ones(rows), m,
                                            num_tokens=m.sum())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            step()  # untracked: AdamW's state and the sharded gradients' first allocation (and fake mode's artefact)
            with tracker:
                step()
            peak = max(s.get("Total", 0) for s in tracker.get_tracker_snapshot("peak").values())
            return max(tracker.memory_tracking[model].local_peak.values()), peak
    finally:
        dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=os.path.join("tools", "configs", "qwen3-8b-base.json"), help="a config.json")
    p.add_argument("--world_size", type=int, default=8)
    p.add_argument("--rows", type=int, default=1, help="rows of the micro-batch")
    p.add_argument("--tokens", type=int, default=22528, help="tokens a row (prompt + response)")
    p.add_argument("--prompt", type=int, default=2048, help="prompt tokens a row")
    a = p.parse_args(argv)
    torch.set_num_threads(os.cpu_count() or 1)
    cfg = memory.read_config(a.model)
    t = time.perf_counter()
    module, whole = tracked_peak(cfg, a.world_size, a.rows, a.tokens, a.tokens - a.prompt)
    args = delta.Args(fsdp=True, gradient_checkpointing=True, prompts_per_step=a.world_size, group_size=a.rows,
                      mini_batch_prompts=a.world_size, max_prompt_length=a.prompt,
                      max_new_tokens=a.tokens - a.prompt, max_tokens_per_micro_batch=a.rows * a.tokens,
                      head_chunk_tokens=2048)
    phases, _ = memory.estimate(cfg, args, a.world_size, True, "none", gpu=True)
    booked = memory.peaks(phases)["update"] - sum(phases["always"][k] for k in memory.engines.gpu_margin(a.world_size))
    booked -= phases["update"]["rollout tensors (ids, masks)"] + phases["update"]["old log-probs and entropy (fp32)"]
    booked -= phases["update"]["token weights [N, R] (fp32)"]
    print(f"| {os.path.basename(a.model)} | {a.rows} x {a.tokens:,} | {module / memory.GiB:.1f} | "
          f"{whole / memory.GiB:.1f} | {booked / memory.GiB:.1f} | {time.perf_counter() - t:.0f} s |")


if __name__ == "__main__":
    main()
