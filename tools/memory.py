"""Memory per GPU of a delta.py run, phase by phase, by arithmetic from a model's config and delta.py's arguments.

    python tools/memory.py --model tools/configs/qwen3-8b-base.json --world_size 8 --fsdp --vllm \\
        --prompts_per_step 128 --group_size 16 --mini_batch_prompts 32 --max_prompt_length 2048 \\
        --max_new_tokens 20480 --max_tokens_per_micro_batch 32768 --gradient_checkpointing true
    python tools/memory.py --model Qwen/Qwen3-14B-Base ...   # a hub id (needs the hub) or a folder

The arguments are delta.py's (same names, same defaults) plus --world_size, --mean_response_tokens (the
expected response length: the features and the packing scale with it; default half of --max_new_tokens)
and --gpu_gib (the GPU's memory, for vLLM's share; default 79.6, an 80 GB card), --zero_spread (the expected share
of groups whose rewards are all equal: no features, and no forwards under --skip_zero_advantage; default 0, the
bound); --verl_tokens N prints verl's
FSDP2 actor update on a micro-batch of N packed tokens instead (examples/verl_delta.sh, verl_update).
Otherwise it prints each phase of an RL step (rl_step's generate, score, coefficients and update) with what it
holds beyond the state held throughout, its total and the peak, for the features held on the GPU (delta.py's
default, or in host memory when they do not fit: engines.feature_buffer), offloaded to pinned host memory, or not
at all (DAPO); then the host memory a rank and a node hold.

Where the figures come from: the weights, optimizer state, gradients, rollout tensors, features and KV cache
are the sizes of the tensors delta.py makes; what a GPU holds beyond tensors (CUDA context, NCCL, the
allocator's slack) is engines.gpu_margin's, item by item, from the sources named there; what a decoder layer saves
for backward is counted from autograd's saved tensors (`saved_per_token`, checked against saved_tensors_hooks by
the tests); everything else (gathered weights, transients of a phase) is read from delta.py, FSDP2 and
transformers. The whole model
is checked against the live bytes of the real rl_step on the CPU with the GPU's dtypes, phase by phase, in
DDP and FSDP2 on 2 processes (tools/memory_measured.py, and a test at one shape).
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402
import engines  # noqa: E402

GiB = 1 << 30
PHASES = ("generate", "score", "coefficients", "update")


def read_config(source):
    """A config.json, a model folder, or a hub id (through transformers' AutoConfig)."""
    if source.endswith(".json"):
        with open(source) as f:
            return json.load(f)
    if os.path.isdir(source):
        with open(os.path.join(source, "config.json")) as f:
            return json.load(f)
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(source).to_dict()


def shape(cfg):
    """The dimensions the activations and caches scale with (a mixture of experts: the experts a token visits)."""
    heads = cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
    inter = cfg.get("moe_intermediate_size", 0) * cfg.get("num_experts_per_tok", 0) or cfg["intermediate_size"]
    return dict(H=cfg["hidden_size"], L=cfg["num_hidden_layers"], I=inter, V=cfg["vocab_size"], heads=heads,
                kv=cfg.get("num_key_value_heads") or heads, hd=hd, tied=cfg.get("tie_word_embeddings", False))


def parameters(cfg):
    """Parameter counts read off the model itself, built on the meta device from its config (any family that
    transformers knows): engines.param_counts (total, one decoder layer, the root, the weights matmuls use)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**{k: v for k, v in cfg.items() if k not in ("architectures", "torch_dtype")})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return engines.param_counts(model)


def saved_per_token(s, mode):
    """Bytes a decoder layer saves for backward per token (HF's Qwen3DecoderLayer with SDPA, transformers 5.x),
    counted from autograd's saved tensors: the norms keep their fp32 input, 1/rms and normalised output; q/k
    norms, RoPE and SDPA keep q, k, v (and SDPA its output and log-sum-exp per head); the MLP keeps its input,
    gate, up and act*up. mode: fp32 | autocast (fp32 weights under bf16 autocast: an fp32 residual stream, bf16
    linear inputs) | bf16 (FSDP's bf16 gathered weights). The test re-counts it with saved_tensors_hooks."""
    H, I, q, k, heads, kv = s["H"], s["I"], s["heads"] * s["hd"], s["kv"] * s["hd"], s["heads"], s["kv"]
    per = {"fp32": (24, 16, 16), "autocast": (26, 8, 10), "bf16": (16, 8, 10)}[mode]  # bytes per H, I, q and k
    return per[0] * H + per[1] * I + per[2] * (q + k) + 8 * heads + 4 * kv + 8


def value_cache_in_key_dtype(version=None):
    """Whether HF's KV cache keeps V in K's dtype: transformers < 5.24 (requirements-vllm.txt pins 5.16-5.19) makes
    both caches in K's dtype (cache_utils.py, DynamicLayer.lazy_initialization) and torch.cat promotes V's bf16
    into it, so under autocast (K fp32 through k_norm's fp32 weight) V is fp32 too; 5.24 makes V in its own."""
    import transformers

    return tuple(int(x) for x in re.findall(r"\d+", version or transformers.__version__)[:2]) < (5, 24)


def estimate(cfg, args, world_size, fsdp, features="packed", mean_response_tokens=None, gpu=True,
             prompt_tokens=None, gpu_bytes=79.6 * GiB, transformers_version=None, micro_batches=None, zero_spread=0.0):
    """Bytes per GPU: ({phase: {component: bytes}}, {host item: bytes per rank}). Phase "always" is held through a
    step; each of PHASES adds its own. features: packed (on the GPU; on a GPU where they do not fit beside the
    scoring pass, in host memory as engines.feature_buffer decides) | offload | none. gpu: the GPU's dtypes
    (delta.bf16_compute: --precision auto is bf16 there) and what a GPU holds beyond tensors (engines.gpu_margin);
    on the CPU the dtypes follow --precision. prompt_tokens: the longest prompt (default --max_prompt_length).
    transformers_version: the KV cache's V dtype follows it (default: the installed one). micro_batches: the update's
    micro-batches on this rank as delta.micro_batches packed them, a list per mini-batch of (padded tokens b T, the
    sum of T^2 over its rows, response tokens b R); default: each at engines.micro_batch_bounds, two a mini-batch
    unless one holds all its rows at full length. zero_spread: the expected share of groups whose rewards are all
    equal: their rows have no feature and, with --skip_zero_advantage, no micro-batch (0: every group, the bound)."""
    s, n = shape(cfg), parameters(cfg)
    H, L, V, I = s["H"], s["L"], s["V"], s["I"]
    bf16 = args.precision == "bf16" or (args.precision == "auto" and gpu)
    mode = "fp32" if not bf16 else "bf16" if fsdp else "autocast"
    cd = 2 if bf16 else 4  # the compute dtype's bytes: linear outputs, SDPA, gathered weights
    res = 2 if mode == "bf16" else 4  # the residual stream (fp32 under autocast: the fp32 norm weights promote it)
    shard = world_size if fsdp else 1
    N = args.prompts_per_step // world_size * args.group_size  # this rank's responses
    P, R = prompt_tokens or args.max_prompt_length, args.max_new_tokens
    seq = P + R
    mean = R if mean_response_tokens is None else mean_response_tokens
    side = N * mean * (1 - zero_spread)  # tokens with a feature: the responses of non-zero advantage
    always = {"weights (fp32)": 4 * n["total"] / shard,
              "AdamW state (fp32 exp_avg, exp_avg_sq)": 8 * n["total"] / shard}
    if world_size > 1 and not fsdp:  # DDP's buckets hold the gradients (gradient_as_bucket_view) for good
        always["gradients (fp32, DDP's buckets)"] = 4 * n["total"]
    trainer = sum(always.values())
    if gpu:  # not tensors: the CUDA context, NCCL, the allocator's slack (engines.gpu_margin, item by item)
        always.update(engines.gpu_margin(world_size))
    rollout = N * seq * (8 + 1) + N * R * 1  # input_ids int64, attention_mask and response_mask bool
    phases = {"always": always}
    host = {}

    # --- generate: HF generate on the training weights, or vLLM awake beside the trainer
    if args.vllm:
        parked = args.vllm_offload_trainer
        share = args.vllm_gpu_memory or engines.vllm_memory_share(gpu_bytes, n["total"], world_size, fsdp, parked)
        largest = max(V * H, I * H)  # the largest parameter, gathered in fp32 and cast to bf16 for the push
        push = {"vLLM's weights (bf16), awake for the push": 2 * n["total"],
                "the largest parameter gathered (fp32) and cast (bf16) for the push": 6 * largest}
        sampling = {"vLLM (weights, activations, KV cache)": share * gpu_bytes}
        if parked:  # pushed, the trainer's state waits in pinned host memory until vLLM sleeps
            sampling["trainer's weights and AdamW state parked in host memory (--vllm_offload_trainer)"] = -trainer
            host["the trainer's state, parked while vLLM is awake (exact-size pinned)"] = trainer
        phases["generate"] = max(push, sampling, key=lambda d: sum(d.values()))
    else:
        calls = max(1, min(N, args.gen_max_tokens // seq))
        v_bytes = 4 if mode == "fp32" or (mode == "autocast" and value_cache_in_key_dtype(transformers_version)) \
            else 2  # V: bf16 under autocast unless the cache keeps it in K's fp32 (value_cache_in_key_dtype)
        kv_bytes = {"fp32": 4, "autocast": 4, "bf16": 2}[mode] + v_bytes  # K: fp32 under autocast (k_norm's weight)
        gen = {"KV cache of one generate call": calls * (seq - 1) * L * s["kv"] * s["hd"] * kv_bytes,
               "ids, and the larger of the prefill's layer and a token's logits processing": calls * seq * 16 + max(
                   calls * P * (res * H * 3 + cd * 3 * I) + calls * P * P * (1 + cd), calls * V * (cd + 4 * 4))}
        if fsdp:  # every layer stays gathered while generating
            gen["gathered weights"] = cd * n["total"]
        elif bf16:  # autocast's bf16 copies of the linear weights, cached for the whole generate call
            gen["autocast's bf16 weight copies"] = 2 * n["linear"]
        phases["generate"] = gen

    # --- score: one no-grad forward per micro-batch; old log-probs, entropy and (DelTA) the packed features
    tokens, square, response = engines.micro_batch_bounds(args, world_size, seq)
    f_dtype = {"auto": cd, "bf16": 2, "fp32": 4}[args.feature_dtype]
    kept = {"rollout tensors (ids, masks)": rollout, "old log-probs and entropy (fp32)": 8 * N * R}
    chunk = min(args.head_chunk_tokens, response)
    forward = {"a micro-batch's forward: h, and the larger of a layer's working set and a head slice's logits":
               engines.forward_bytes(H, I, V, tokens, square, chunk, res, cd)}
    score = dict(kept, **forward)
    if fsdp:  # the root (embeddings, head) stays gathered from forward to backward; the layers one at a time
        score["gathered weights (root, a layer)"] = cd * (n["root"] + n["layer"])
    elif bf16:
        score["autocast's bf16 weight copies"] = 2 * n["linear"]
    if features == "packed" and gpu:  # engines.feature_buffer: host memory when they do not fit beside scoring
        asleep = GiB if args.vllm else 0
        room = gpu_bytes - engines.KEPT_FREE - sum(always.values()) - asleep - sum(score.values())
        coefficients = min(args.feature_chunk_tokens, side) * H * 4 + side * 40
        features = "packed" if side * H * f_dtype + max(0, coefficients - sum(forward.values())) <= room else "host"
    feat = side * H * f_dtype if features == "packed" else 0
    if features != "none":
        score["DelTA features v (packed)" if features == "packed" else
              "DelTA features v: in host memory (do not fit the GPU)" if features == "host" else
              "DelTA features v: in host memory (--offload_features)"] = feat
        score["their advantages and positions"] = side * 12 * 2  # fp32 + int64, and their concatenation
    if features in ("offload", "host"):  # one exact-size pinned block (engines.feature_buffer)
        host["DelTA's features (exact-size pinned)"] = side * H * f_dtype
    phases["score"] = score

    # --- coefficients (Sec. 3.2): the features in chunks of feature_chunk_tokens, cast to fp32 one at a time
    if features != "none":
        phases["coefficients"] = dict(kept, **{
            "DelTA features v (packed)": feat, "their advantages and positions": side * 12,
            "one chunk of v in fp32": min(args.feature_chunk_tokens, side) * H * 4,
            "per-token vectors (advantage, side, margins, scores, lam)": side * 40, "lam [N, R] (fp32)": N * R * 4})
        if fsdp:  # FSDP keeps the root gathered after a forward (for the backward that a training forward has)
            phases["coefficients"]["gathered root (embeddings, head), kept from the scoring pass"] = cd * n["root"]
    else:
        phases["coefficients"] = {}

    # --- update: forward and backward per micro-batch, one optimizer step per mini-batch; no features held.
    # Gradients freed at each optimizer step (FSDP2, one process) do not exist yet in a mini-batch's first micro-batch
    # (its backward starts at the head, before any layer's gradient); from the second one on they are held.
    upd = dict(kept, **{"token weights [N, R] (fp32)": N * R * 4 * 2})
    if fsdp:
        upd["gathered weights (root, a layer)"] = cd * (n["root"] + n["layer"])
    grads = {"gradients (fp32, sharded)": 4 * n["total"] / shard} if fsdp else \
        {"gradients (fp32)": 4 * n["total"]} if world_size == 1 else {}  # DDP: in its buckets (always)
    copies = 2 * n["linear"] if mode == "autocast" else 0  # autocast's bf16 copies of the linear weights
    layer_grads = (2 * cd + 4) * n["layer"] + cd * V * H * (not s["tied"]) if fsdp else 0  # the next layer gathered,
    # this one's unsharded gradients and their fp32 copy for the reduce-scatter, the head's gradient

    def moments(tokens, square, response):  # what one micro-batch holds at the end of its forward, start of backward
        chunk = min(args.head_chunk_tokens, response)
        # a layer's saved tensors per token, and per row the mask's float bias (T^2) and SDPA's output (T heads hd)
        per_layer = tokens * saved_per_token(s, mode) + cd * (square + tokens * s["heads"] * s["hd"])
        whole = tokens * (8 + 1 + 8) + square + response * H * res  # ids, masks, positions, SDPA's mask, head's h
        head_forward, head_backward = chunk * V * (cd + 2 * 4), chunk * V * (cd + 5 * 4)  # fp32 logits, softmax
        layer_backward = tokens * (2 * res * H + 3 * cd * I) + layer_grads
        if args.gradient_checkpointing:  # each layer keeps its input; in backward one layer at a time is recomputed
            inputs = L * tokens * H * res + whole
            return {"forward": {"checkpointed layers' inputs": inputs, "autocast's bf16 weight copies (cached)": copies,
                                "a head slice's forward (fp32 logits)": head_forward},
                    "backward": {"checkpointed layers' inputs": inputs, "one layer recomputed": per_layer + copies / L,
                                 "the larger of a head slice's backward and a layer's": max(head_backward,
                                                                                             layer_backward)}}
        forward = {"activations saved for backward": L * per_layer + whole, "autocast's bf16 weight copies": copies,
                   "a head slice's forward (fp32 logits)": head_forward}  # every layer's saved tensors
        return {"forward": forward, "backward": dict(forward, **{
            "a head slice's forward (fp32 logits)": 0,
            "the larger of a head slice's backward and a layer's": max(head_backward, layer_backward)})}

    bound = (tokens, square, response)
    rows = args.mini_batch_prompts // world_size * args.group_size  # a mini-batch's rows on this rank, forwarded
    rows *= 1 - zero_spread if args.skip_zero_advantage else 1
    plans = micro_batches or [[bound] * (1 if rows * seq <= args.max_tokens_per_micro_batch else 2)]
    step = {"AdamW's foreach step: a temporary sqrt of exp_avg_sq (GPU)": 4 * n["total"] / shard * gpu}
    candidates = [("optimizer step", dict(grads, **step))]  # after a mini-batch's last backward
    for groups in plans:
        for j, shape_j in enumerate(groups):
            for when, held in moments(*shape_j).items():
                candidates.append((f"{when} of micro-batch {j + 1}", dict(grads if j else {}, **held)))
    when, held = max(candidates, key=lambda c: sum(c[1].values()))  # the largest moment counts
    upd.update({k if k in grads else f"{when}: {k}": x for k, x in held.items() if x})
    phases["update"] = upd
    for ph in ("score", "coefficients", "update") if args.vllm else ():  # level-2 sleep returns weights and KV
        phases[ph]["vLLM asleep (CUDA graphs, buffers; not measured here)"] = 1 * GiB  # cache; the rest stays
    return phases, host


def host_memory(cfg, args, world_size, fsdp, host, per_node=8):
    """Host memory a node holds beyond the processes themselves (Python, CUDA's host side and loaded libraries are
    not booked): each rank's pinned blocks (`host`, from estimate), a checkpoint's writes (torch.distributed.
    checkpoint, one tensor at a time a rank: the largest shard), the full fp32 weights rank 0 gathers once to
    write final/, and the start: on several processes rank 0 alone reads the weights (checkpoints.load_weights; each
    rank read them in fp32 before, per_node copies: tools/host_memory.py measures both). Bytes: {item: per node}."""
    n, s = parameters(cfg), shape(cfg)
    shard = world_size if fsdp else 1
    node = {k: x * per_node for k, x in host.items()}
    node["the start: the full fp32 weights rank 0 reads and broadcasts, once"] = 4 * n["total"]
    node["a checkpoint's writes: the largest tensor a rank holds (fp32), each rank"] = \
        4 * max(s["V"] * s["H"], s["I"] * s["H"]) / shard * per_node
    node["final/: the full fp32 weights on rank 0, once at the end"] = 4 * n["total"]
    return node


def peaks(phases):
    """Each phase's total: what is always held plus what the phase adds."""
    always = sum(phases["always"].values())
    return {ph: always + sum(phases[ph].values()) for ph in PHASES}


def vllm_kv(cfg, args, world_size, fsdp, gpu_bytes):
    """vLLM's share of the GPU, and an estimate of the sequences of max_prompt_length + max_new_tokens its KV cache
    holds at once: the share less its bf16 weights, its profiling peak (a forward of --vllm_max_batched_tokens
    tokens and the sampler's fp32 logits for 1,024 sequences, vLLM's default on 80 GB cards) and about 1 GiB of
    CUDA graphs. vLLM logs the real figure when it starts (delta.py prints it)."""
    s, n = shape(cfg), parameters(cfg)
    share = args.vllm_gpu_memory or engines.vllm_memory_share(gpu_bytes, n["total"], world_size, fsdp,
                                                              args.vllm_offload_trainer)
    tokens = args.vllm_max_batched_tokens
    profile = tokens * (4 * s["H"] + 3 * s["I"]) * 2 + 1024 * s["V"] * 4 * 2
    kv = share * gpu_bytes - 2 * n["total"] - profile - GiB
    per_token = 2 * s["L"] * s["kv"] * s["hd"] * 2
    return share, kv, kv / per_token / (args.max_prompt_length + args.max_new_tokens)


def verl_update(cfg, args, world_size, tokens, flash_attn=False, mean_response_tokens=None):
    """Bytes per GPU of verl 0.9.1's FSDP2 actor update (examples/verl_delta.sh: gradient checkpointing, sequences
    packed without padding, bf16 compute, entropy off) on one micro-batch of `tokens` packed tokens (the recipe's
    actor.ppo_max_token_len_per_gpu), by arithmetic from verl's code, at the larger of two moments: the start of the
    backward (the LM head's) and a decoder layer's recompute and backward. The decoder is delta.py's (the same HF
    layers); the LM head runs whole (verl/workers/engine/fsdp/transformer_impl.py, prepare_model_outputs: [tokens, V]
    logits, no slices), and its log-probs: with flash-attn, its cross-entropy kernel keeps the logits and writes
    their gradient in place (inplace_backward); without it (what verl[vllm] installs), torch_functional.py's
    logprobs_from_logits_v2 keeps every row's log_softmax output, and the backward holds the rows' gradients and
    their stack, each [tokens, V] bf16. SDPA on packed rows builds a [tokens, tokens] mask and its float bias;
    flash-attn's varlen kernel none. Also the plugin's host memory: v of every valid response token of the rank's
    responses, exact-size pinned (examples/verl_delta.py, _host_buffer). ({item: bytes}, {host item: bytes})."""
    s, n = shape(cfg), parameters(cfg)
    H, L, V, I = s["H"], s["L"], s["V"], s["I"]
    shard, cd = world_size, 2
    square = 0 if flash_attn else tokens * tokens
    held = {"weights (fp32, sharded)": 4 * n["total"] / shard, "AdamW state (fp32, sharded)": 8 * n["total"] / shard}
    held.update(engines.gpu_margin(world_size))
    held.update({"vLLM asleep": GiB, "gradients (fp32, sharded)": 4 * n["total"] / shard,
                 "gathered weights (root, a layer)": cd * (n["root"] + n["layer"]),
                 "checkpointed layers' inputs": L * tokens * H * cd})
    logits = tokens * V * cd
    head = {"the head's backward: logits [tokens, V] (bf16), their gradient written in place": logits} if flash_attn \
        else {"the head's backward: every row's log_softmax output, the rows' gradients, their stack": 3 * logits}
    layer = {"a layer's recompute (its saved tensors, the mask and its float bias) and backward":
             tokens * saved_per_token(s, "bf16") + cd * (square + tokens * s["heads"] * s["hd"]) + square
             + tokens * (4 * H + 6 * I) + 8 * n["layer"]}
    held.update(max(head, layer, key=lambda d: sum(d.values())))
    N = args.prompts_per_step // world_size * args.group_size
    mean = args.max_new_tokens if mean_response_tokens is None else mean_response_tokens
    return held, {"the plugin's features (bf16, every valid response token, exact-size pinned)": N * mean * H * 2}


def table(cfg, args, world_size, mean_response_tokens, gpu_bytes, zero_spread=0.0):
    """Markdown: each phase's components and totals for DDP and FSDP2, GiB per GPU."""
    features = "none" if not delta.ALGOS[args.algo]["features"] else "offload" if args.offload_features else "packed"
    results = {f: estimate(cfg, args, world_size, f, features, mean_response_tokens, gpu_bytes=gpu_bytes,
                           zero_spread=zero_spread) for f in (False, True)}
    lines = ["| GiB per GPU | DDP | FSDP2 |", "|---|---|---|"]
    cell = lambda x: f"{x / GiB:.1f}" if x is not None else ""
    for ph in ("always",) + PHASES:
        keys = list(dict.fromkeys(k for f in results for k in results[f][0][ph]))
        for k in keys:
            lines.append(f"| {ph}: {k} | " + " | ".join(cell(results[f][0][ph].get(k)) for f in results) + " |")
        if ph != "always":
            lines.append(f"| **{ph}: total** | " + " | ".join(f"**{cell(peaks(results[f][0])[ph])}**"
                                                             for f in results) + " |")
    lines.append("| **peak** | " + " | ".join(f"**{cell(max(peaks(results[f][0]).values()))}**" for f in results)
                 + " |")
    for k in dict.fromkeys(k for f in results for k in results[f][1]):
        lines.append(f"| host, a rank: {k} | " + " | ".join(cell(results[f][1].get(k, 0)) for f in results) + " |")
    nodes = {f: host_memory(cfg, args, world_size, f, results[f][1], min(world_size, 8)) for f in results}
    for k in dict.fromkeys(k for f in nodes for k in nodes[f]):
        lines.append(f"| host, a node of {min(world_size, 8)}: {k} | "
                     + " | ".join(cell(nodes[f].get(k, 0)) for f in nodes) + " |")
    lines.append("| **host, a node: total** | " + " | ".join(f"**{cell(sum(nodes[f].values()))}**" for f in nodes)
                 + " |")
    if args.vllm:
        kvs = [vllm_kv(cfg, args, world_size, f, gpu_bytes) for f in results]
        lines.append("| vLLM: share of the GPU; KV cache (GiB); sequences at once | " + " | ".join(
            f"{share:.2f}; {kv / GiB:.1f}; {conc:.1f}" for share, kv, conc in kvs) + " |")
    return "\n".join(lines)


def verl_table(cfg, args, world_size, tokens, mean):
    """Markdown: verl's update micro-batch (verl_update) with SDPA and with flash-attn, GiB per GPU."""
    results = {f: verl_update(cfg, args, world_size, tokens, f, mean) for f in (False, True)}
    lines = [f"| GiB per GPU, verl's FSDP2 actor, {tokens:,} packed tokens | SDPA | flash-attn |", "|---|---|---|"]
    for k in dict.fromkeys(k for f in results for k in results[f][0]):
        lines.append(f"| {k} | " + " | ".join(f"{results[f][0].get(k, 0) / GiB:.1f}" for f in results) + " |")
    lines.append("| **update: total** | " + " | ".join(f"**{sum(results[f][0].values()) / GiB:.1f}**" for f in results)
                 + " |")
    for k, x in results[False][1].items():
        lines.append(f"| host, a rank: {k} | {x / GiB:.1f} | {x / GiB:.1f} |")
    return "\n".join(lines)


def main(argv):
    options = {"--world_size": 8, "--mean_response_tokens": 0, "--gpu_gib": 79.6, "--verl_tokens": 0,
               "--zero_spread": 0.0}
    for flag in options:
        if flag in argv:
            i = argv.index(flag)
            options[flag], argv = float(argv[i + 1]), argv[:i] + argv[i + 2:]
    args = delta.parse_args(argv)
    source = args.model or (print("give --model (a config.json, a folder or a hub id)") or sys.exit(2))
    cfg, world = read_config(source), int(options["--world_size"])
    mean = int(options["--mean_response_tokens"]) or args.max_new_tokens // 2
    s, n = shape(cfg), parameters(cfg)
    print(f"{source}: {n['total'] / 1e9:.2f} B parameters, hidden {s['H']}, {s['L']} layers, vocab {s['V']}; "
          f"{world} GPUs of {options['--gpu_gib']} GiB; {args.prompts_per_step} x {args.group_size} responses a "
          f"step; prompt {args.max_prompt_length} + response {args.max_new_tokens} tokens, mean response {mean}; "
          f"--algo {args.algo}, gradient checkpointing {args.gradient_checkpointing}, vLLM {args.vllm}\n")
    if options["--verl_tokens"]:  # verl's engine (examples/verl_delta.sh) instead of delta.py's
        print(verl_table(cfg, args, world, int(options["--verl_tokens"]), mean))
    else:
        print(table(cfg, args, world, mean, options["--gpu_gib"] * GiB, options["--zero_spread"]))


if __name__ == "__main__":
    main(sys.argv[1:])
