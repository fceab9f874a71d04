"""The engines behind delta.py's seam: the device, the two sharding strategies, GPU memory, and the optional
packages' integrations (the samplers are in sampling.py).

    Accelerator     the device seam: a GPU or not, its backend, its queued work (PRETEND_GPU: CI's test mode)
    DDP             the default: the whole model in every process, gradients all-reduced (one process: the model)
    FSDP2           --fsdp: parameters, gradients and optimizer state sharded over the processes
    gpu_memory, release, pinned  a GPU's free memory, its cache given back, page-locked host blocks (the device seam's)
    gpu_margin      what a GPU holds beyond the trainer's tensors and vLLM's share, item by item
    feature_buffer  where DelTA's features go: the GPU, or host memory (--offload_features, or when the GPU is short)
    vllm_memory_share, Parking  --vllm: the GPU share vLLM takes, the trainer's state parked in host memory
    metrics_sink    --report_to tensorboard | wandb; dump_rollout: --dump_rollouts_every, for tools/rollouts.py
    expandable_segments  the CUDA allocator maps pages, so what a phase frees goes back whole
    connect_collectives  on GPUs: NCCL's communicator and the step's collectives made at start, before vLLM

delta.py imports this file where a run is made (its sharding strategy) and sampling.py's vLLM sampler reads its
memory bookkeeping; this file imports nothing of delta.py (tools/memory.py books its figures with the functions
here). The seam (see delta.py, section 5): a sharding strategy gives wrap, no_sync, gathered, zero_grad and the
state dicts (DDP and FSDP2 give the same full, name-keyed state dicts, which DCP gathers from either); a sampler
turns prompt token ids into response token ids (and their log-probs).
"""
import contextlib
import gc
import os
import sys
import weakref

import torch
import torch.distributed as dist
import torch.distributed.checkpoint.state_dict as dcp


def unwrap(model):
    return model.module if hasattr(model, "module") else model


PRETEND_GPU = "DELTA_PRETEND_GPU"  # the device seam's test mode: the free GiB a CPU process reports as a GPU



class Accelerator:
    """The device seam: the trainer's one way to ask about its device (a GPU or not, the communicator's backend,
    waiting for queued work; engines.py asks its memory: gpu_memory, release, pinned). With DELTA_PRETEND_GPU=<free
    GiB> in the environment a CPU process answers as a GPU of 80 GiB with that much free would, on gloo, so CI runs
    every branch a GPU takes (in a GPU's dtypes: bf16 by default); only the seam's own CUDA calls stay unrun on a CPU
    (docs/scale.md lists them with the rest of what CI never executes)."""

    def __init__(self, device, pretend=None):  # pretend: free GiB (the environment's if None)
        pretend = os.environ.get(PRETEND_GPU) if pretend is None else pretend
        self.device, self.cuda = device, device.type == "cuda"
        self.pretend = float(pretend) * (1 << 30) if pretend not in (None, "") and device.type == "cpu" else None
        self.gpu = self.cuda or self.pretend is not None
        self.backend = "nccl" if self.cuda else "gloo"

    def synchronize(self):  # the device's queued work is done (phase timings, non-blocking copies to host memory)
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def rng_devices(self):  # the devices whose generators torch.random.fork_rng forks
        return [self.device] if self.cuda else []

    def ddp_ids(self):  # DDP's device_ids: the GPU a process drives
        return [self.device.index] if self.cuda else None



class DDP:
    """DDP under torchrun (the model itself in one process). The full, name-keyed state dicts (final/, the tests)
    are the same under DDP and FSDP."""

    sharded = False  # every process holds the whole model (engines.FSDP2: True)

    def __init__(self, world, device, bf16=False):
        self.world, self.device, self.bf16 = world, device, bf16  # bf16: compute in bf16 (autocast; FSDP: gathers)
        self.accel = Accelerator(device)
        self.group = dist.group.WORLD if world > 1 else None  # the process group the trainer passes on

    def wrap(self, model, args):
        if self.world == 1:
            return model
        return torch.nn.parallel.DistributedDataParallel(  # the gradients live in the buckets: no second copy
            model, device_ids=self.accel.ddp_ids(), gradient_as_bucket_view=True)

    def no_sync(self, model, sync):  # gradient communication on the last micro-batch of a mini-batch only
        return contextlib.nullcontext() if sync or self.world == 1 else model.no_sync()

    def gathered(self, model):  # the parameters are whole already
        return contextlib.nullcontext()

    def zero_grad(self, optimizer):  # DDP: the gradients stay views of its buckets, zeroed in place (freed, the
        optimizer.zero_grad(set_to_none=self.world == 1)  # next micro-batch would make a second full copy)

    FULL = dcp.StateDictOptions(full_state_dict=True, cpu_offload=True)  # whole tensors on CPU, keyed by name

    def model_state(self, model):  # the full weights on CPU (a collective under FSDP)
        return dcp.get_model_state_dict(unwrap(model), options=self.FULL)

    def optim_state(self, model, optimizer):  # the full state keyed by parameter name (a collective under FSDP)
        return dcp.get_optimizer_state_dict(unwrap(model), optimizer, options=self.FULL)


class FSDP2:
    """FSDP2's fully_shard on every decoder layer, then on the root (embeddings, final norm and LM head stay
    one unit, so tied embeddings stay tied); with self.bf16 (a GPU by default) the layers gather bf16 copies of
    the fp32 shards and gradients are reduced in fp32. Parameters become DTensors in place, so the optimizer is
    built after wrap(). The full, name-keyed state dicts are the same as DDP's (the tests compare them)."""

    sharded = True  # parameters, gradients and optimizer state split over the processes

    def __init__(self, world, device, bf16, accel):  # accel: Accelerator, the device seam
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
    """(free, total) bytes the GPU behind `accel` (Accelerator, the device seam) can still give: free, plus what
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
    """Bytes of a GPU outside the trainer's tensors and vLLM's share, item by item (tools/memory.py books each,
    tools/gpu_check.py measures the first on a lent GPU); vLLM's share leaves them and KEPT_FREE."""
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
    memory meanwhile), gpu_margin's items and KEPT_FREE. tools/memory.py books the same bytes."""
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
    the per-token vectors (tools/memory.py's score and coefficients phases)."""
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

    def __init__(self, model, optimizer, accel):  # accel: engines.Accelerator, the device seam
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
    feature), in rollout-<step>.pt for tools/rollouts.py."""
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

