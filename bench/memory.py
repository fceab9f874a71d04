"""Memory per GPU of a delta.py run, phase by phase, by arithmetic from a model's config and delta.py's arguments.

    python bench/memory.py --model bench/configs/qwen3-8b-base.json --world_size 8 --fsdp --vllm \\
        --prompts_per_step 128 --group_size 16 --mini_batch_prompts 32 --max_prompt_length 2048 \\
        --max_new_tokens 20480 --max_tokens_per_micro_batch 32768 --gradient_checkpointing true
    python bench/memory.py --model Qwen/Qwen3-14B-Base ...   # a hub id (needs the hub) or a folder

The arguments are delta.py's (same names, same defaults) plus --world_size, --mean_response_tokens (the
expected response length: the features and the packing scale with it; default half of --max_new_tokens)
and --gpu_gib (the GPU's memory, for vLLM's share; default 79.6, an 80 GB card). It prints each phase of an
RL step (rl_step's generate, score, coefficients and update) with what it holds beyond the state held
throughout, its total and the peak, for the features held on the GPU (delta.py's default), offloaded to
pinned host memory, or not at all (DAPO).

Where the figures come from: the weights, optimizer state, gradients, rollout tensors, features and KV cache
are the sizes of the tensors delta.py makes; what a decoder layer saves for backward is counted from
autograd's saved tensors (`saved_per_token`, checked against saved_tensors_hooks by the tests); everything
else (gathered weights, transients of a phase) is read from delta.py, FSDP2 and transformers. The whole model
is checked against the live bytes of the real rl_step on the CPU with the GPU's dtypes, phase by phase, in
DDP and FSDP2 on 2 processes (bench/memory_measured.py, and a test at one shape).
"""
import json
import math
import os
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
    transformers knows): total, one decoder layer, the root (what is not in a layer: embeddings, final norm, head),
    and the weights that matmuls use (what autocast copies to bf16: all but the input embedding and the norms)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**{k: v for k, v in cfg.items() if k not in ("architectures", "torch_dtype")})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    layers = [m for m in model.modules() if type(m).__name__ in (model._no_split_modules or ())]
    params = dict(model.named_parameters())  # a tied head appears once
    total, layer = sum(p.numel() for p in params.values()), sum(p.numel() for p in layers[0].parameters())
    embed = model.get_input_embeddings().weight
    tied = model.get_output_embeddings() is None or model.get_output_embeddings().weight is embed
    matmul = sum(p.numel() for p in params.values() if p.dim() >= 2) - (0 if tied else embed.numel())
    return dict(total=total, layer=layer, root=total - len(layers) * layer, linear=matmul)


def saved_per_token(s, mode):
    """Bytes a decoder layer saves for backward per token (HF's Qwen3DecoderLayer with SDPA, transformers 5.x),
    counted from autograd's saved tensors: the norms keep their fp32 input, 1/rms and normalised output; q/k
    norms, RoPE and SDPA keep q, k, v (and SDPA its output and log-sum-exp per head); the MLP keeps its input,
    gate, up and act*up. mode: fp32 | autocast (fp32 weights under bf16 autocast: an fp32 residual stream, bf16
    linear inputs) | bf16 (FSDP's bf16 gathered weights). The test re-counts it with saved_tensors_hooks."""
    H, I, q, k, heads, kv = s["H"], s["I"], s["heads"] * s["hd"], s["kv"] * s["hd"], s["heads"], s["kv"]
    per = {"fp32": (24, 16, 16), "autocast": (26, 8, 10), "bf16": (16, 8, 10)}[mode]  # bytes per H, I, q and k
    return per[0] * H + per[1] * I + per[2] * (q + k) + 8 * heads + 4 * kv + 8


def micro_batch(args, world_size, seq):
    """The largest micro-batch delta.micro_batches makes: rows of a mini-batch on this rank that fit
    --max_tokens_per_micro_batch padded tokens (a longer sequence goes alone), and its padded length."""
    per_mini = args.mini_batch_prompts // world_size * args.group_size
    return max(1, min(per_mini, args.max_tokens_per_micro_batch // seq)), seq


def estimate(cfg, args, world_size, fsdp, features="packed", mean_response_tokens=None, gpu=True,
             prompt_tokens=None, gpu_bytes=79.6 * GiB):
    """Bytes per GPU: ({phase: {component: bytes}}, pinned host bytes). Phase "always" is held through a step;
    each of PHASES adds its own. features: packed (on the GPU) | offload | none. gpu: the GPU's dtypes
    (delta.bf16_compute: --precision auto is bf16 there); on the CPU they follow --precision.
    prompt_tokens: the longest prompt (default --max_prompt_length)."""
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
    side = N * mean  # tokens with a feature (responses of non-zero advantage; all, as an upper bound)
    always = {"weights (fp32)": 4 * n["total"] / shard,
              "AdamW state (fp32 exp_avg, exp_avg_sq)": 8 * n["total"] / shard}
    if world_size > 1 and not fsdp:  # DDP's buckets hold the gradients (gradient_as_bucket_view) for good
        always["gradients (fp32, DDP's buckets)"] = 4 * n["total"]
    rollout = N * seq * (8 + 1) + N * R * 1  # input_ids int64, attention_mask and response_mask bool
    phases = {"always": always}

    # --- generate: HF generate on the training weights, or vLLM awake beside the trainer
    if args.vllm:
        share = args.vllm_gpu_memory or engines.vllm_memory_share(gpu_bytes, n["total"], world_size, fsdp)
        phases["generate"] = {"vLLM (weights, activations, KV cache)": share * gpu_bytes}
    else:
        calls = max(1, min(N, args.gen_max_tokens // seq))
        kv_bytes = {"fp32": 8, "autocast": 6, "bf16": 4}[mode]  # K and V: under autocast K is fp32 (k_norm's weight)
        gen = {"KV cache of one generate call": calls * (seq - 1) * L * s["kv"] * s["hd"] * kv_bytes,
               "ids, and the larger of the prefill's layer and a token's logits processing": calls * seq * 16 + max(
                   calls * P * (res * H * 3 + cd * 3 * I) + calls * P * P * (1 + cd), calls * V * (cd + 4 * 4))}
        if fsdp:  # every layer stays gathered while generating
            gen["gathered weights"] = cd * n["total"]
        elif bf16:  # autocast's bf16 copies of the linear weights, cached for the whole generate call
            gen["autocast's bf16 weight copies"] = 2 * n["linear"]
        phases["generate"] = gen

    # --- score: one no-grad forward per micro-batch; old log-probs, entropy and (DelTA) the packed features
    b, T = micro_batch(args, world_size, seq)
    f_dtype = {"auto": cd, "bf16": 2, "fp32": 4}[args.feature_dtype]
    feat = side * H * f_dtype if features == "packed" else 0
    kept = {"rollout tensors (ids, masks)": rollout, "old log-probs and entropy (fp32)": 8 * N * R}
    chunk = min(args.head_chunk_tokens, b * R)
    layer_forward = b * T * (res * H + cd * 3 * I) + b * T * T * (1 + cd)  # MLP, the mask and its float bias
    head_scores = chunk * V * 3 * 4  # fp32 logits / T, softmax, their product (the entropy)
    forward = {"a micro-batch's forward: h, and the larger of a layer's working set and a head slice's logits":
               b * T * res * H + max(layer_forward, head_scores)}
    score = dict(kept, **forward)
    if fsdp:  # the root (embeddings, head) stays gathered from forward to backward; the layers one at a time
        score["gathered weights (root, a layer)"] = cd * (n["root"] + n["layer"])
    elif bf16:
        score["autocast's bf16 weight copies"] = 2 * n["linear"]
    if features != "none":
        score["DelTA features v (packed)"] = feat
        score["their advantages and positions"] = side * 12 * 2  # fp32 + int64, and their concatenation
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

    # --- update: forward and backward per micro-batch, one optimizer step per mini-batch; no features held
    upd = dict(kept, **{"token weights [N, R] (fp32)": N * R * 4 * 2})
    if fsdp:
        upd["gradients (fp32, sharded)"] = 4 * n["total"] / shard
        upd["gathered weights (root, a layer)"] = cd * (n["root"] + n["layer"])
    elif world_size == 1:
        upd["gradients (fp32)"] = 4 * n["total"]
    copies = 2 * n["linear"] if mode == "autocast" else 0  # autocast's bf16 copies of the linear weights
    per_layer = b * T * saved_per_token(s, mode) + b * cd * (T * T + T * s["heads"] * s["hd"])  # + the mask's bias
    whole = b * T * (8 + 1 + 8) + b * T * T + b * R * H * res  # ids, masks, positions, SDPA's bool mask, the head's h
    layer_grads = (2 * cd + 4) * n["layer"] + cd * V * H * (not s["tied"]) if fsdp else 0  # the next layer gathered,
    # this one's unsharded gradients and their fp32 copy for the reduce-scatter, the head's gradient
    head_forward, head_backward = chunk * V * (cd + 2 * 4), chunk * V * (cd + 5 * 4)  # fp32 logits, softmax, grads
    layer_backward = b * T * (2 * res * H + 3 * cd * I) + layer_grads
    if args.gradient_checkpointing:  # each layer keeps its input; in backward one layer at a time is recomputed
        inputs = L * b * T * H * res + whole
        forward = {"checkpointed layers' inputs": inputs, "autocast's bf16 weight copies (cached)": copies,
                   "a head slice's forward (fp32 logits)": head_forward}
        backward = {"checkpointed layers' inputs": inputs, "one layer recomputed": per_layer + copies / L,
                    "the larger of a head slice's backward and a layer's": max(head_backward, layer_backward)}
    else:  # every layer's saved tensors, and the weight copies they hold
        forward = {"activations saved for backward": L * per_layer + whole, "autocast's bf16 weight copies": copies,
                   "a head slice's forward (fp32 logits)": head_forward}
        backward = dict(forward, **{"a head slice's forward (fp32 logits)": 0,
                                    "the larger of a head slice's backward and a layer's": max(head_backward,
                                                                                                 layer_backward)})
    step = {"AdamW's foreach step: a temporary sqrt of exp_avg_sq (GPU)": 4 * n["total"] / shard * gpu}
    moments = {"forward": forward, "backward": backward, "optimizer step": step}  # the end of a forward, the start
    when = max(moments, key=lambda k: sum(moments[k].values()))  # of a backward, AdamW's step: the largest counts
    upd.update({f"{when}: {k}": x for k, x in moments[when].items() if x})
    phases["update"] = upd
    for ph in ("score", "coefficients", "update") if args.vllm else ():  # level-2 sleep returns weights and KV
        phases[ph]["vLLM asleep (CUDA graphs, buffers; not measured here)"] = 1 * GiB  # cache; the rest stays
    host = 0
    if features == "offload":  # pinned, grown by powers of two (delta.feature_buffer)
        host = 2 ** math.ceil(math.log2(max(1, side * H))) * f_dtype
    return phases, host


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
    share = args.vllm_gpu_memory or engines.vllm_memory_share(gpu_bytes, n["total"], world_size, fsdp)
    tokens = args.vllm_max_batched_tokens
    profile = tokens * (4 * s["H"] + 3 * s["I"]) * 2 + 1024 * s["V"] * 4 * 2
    kv = share * gpu_bytes - 2 * n["total"] - profile - GiB
    per_token = 2 * s["L"] * s["kv"] * s["hd"] * 2
    return share, kv, kv / per_token / (args.max_prompt_length + args.max_new_tokens)


def table(cfg, args, world_size, mean_response_tokens, gpu_bytes):
    """Markdown: each phase's components and totals for DDP and FSDP2, GiB per GPU."""
    features = "none" if not delta.ALGOS[args.algo]["features"] else "offload" if args.offload_features else "packed"
    results = {f: estimate(cfg, args, world_size, f, features, mean_response_tokens, gpu_bytes=gpu_bytes)
               for f in (False, True)}
    lines = ["| GiB per GPU | DDP | FSDP2 |", "|---|---|---|"]
    cell = lambda x: f"{x / GiB:.1f}" if x is not None else ""
    for ph in ("always",) + PHASES:
        keys = list(dict.fromkeys(k for f in results for k in results[f][0][ph]))
        for k in keys:
            lines.append(f"| {ph}: {k} | " + " | ".join(cell(results[f][0][ph].get(k)) for f in results) + " |")
        if ph != "always":
            lines.append(f"| **{ph}: total** | " + " | ".join(f"**{cell(peaks(results[f][0])[ph])}**"
                                                             for f in results) + " |")
    lines.append("| **peak** | " + " | ".join(f"**{cell(max(peaks(results[f][0]).values()))}**" for f in results) + " |")
    lines.append("| pinned host memory | " + " | ".join(cell(results[f][1]) for f in results) + " |")
    if args.vllm:
        kvs = [vllm_kv(cfg, args, world_size, f, gpu_bytes) for f in results]
        lines.append("| vLLM: share of the GPU; KV cache (GiB); sequences at once | " + " | ".join(
            f"{share:.2f}; {kv / GiB:.1f}; {conc:.1f}" for share, kv, conc in kvs) + " |")
    return "\n".join(lines)


def main(argv):
    options = {"--world_size": 8, "--mean_response_tokens": 0, "--gpu_gib": 79.6}
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
    print(table(cfg, args, world, mean, options["--gpu_gib"] * GiB))


if __name__ == "__main__":
    main(sys.argv[1:])
