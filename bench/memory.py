"""Memory per GPU of a delta.py run, by arithmetic from a model's config and delta.py's arguments.

    python bench/memory.py --model bench/configs/qwen3-8b-base.json --world_size 8 \\
        --prompts_per_step 128 --group_size 16 --max_prompt_length 2048 --max_new_tokens 20480 \\
        --gen_max_tokens 262144 --max_tokens_per_micro_batch 32768 --gradient_checkpointing true
    python bench/memory.py --model Qwen/Qwen3-14B-Base --world_size 8 ...   # a hub id (needs the hub) or a folder

The arguments are delta.py's (same names, same defaults), plus --world_size and --mean_response_tokens
(the expected response length; the features scale with it). It prints one table of bytes per GPU for
DDP and for FSDP2, and for each way of holding DelTA's features: none (DAPO), packed in the compute dtype
on the GPU (delta.py's default), offloaded to pinned host memory, and the padded fp32 layout delta.py
used before. Every row is arithmetic, stated next to it; the test suite checks the rows it can against
tensors of the tiny model on CPU (bench/memory.py's estimate()).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402

GiB = 1 << 30


def read_config(source):
    """A config.json, a model folder, or a hub id (through transformers' AutoConfig)."""
    if source.endswith(".json"):
        return json.load(open(source))
    if os.path.isdir(source):
        return json.load(open(os.path.join(source, "config.json")))
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(source).to_dict()


def shape(cfg):
    heads = cfg["num_attention_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
    return dict(H=cfg["hidden_size"], L=cfg["num_hidden_layers"], I=cfg["intermediate_size"], V=cfg["vocab_size"],
                heads=heads, kv=cfg.get("num_key_value_heads", heads), hd=hd, tied=cfg.get("tie_word_embeddings", False))


def parameters(s):
    """Qwen3/Llama-style decoder: embeddings, L x (attention, q/k norms, SwiGLU MLP, 2 norms), final norm, head."""
    H, hd = s["H"], s["hd"]
    layer = H * hd * (2 * s["heads"] + 2 * s["kv"]) + 3 * H * s["I"] + 2 * H + 2 * hd
    embed = s["V"] * H
    return dict(total=embed * (1 if s["tied"] else 2) + s["L"] * layer + H, layer=layer, root=embed * (1 if s["tied"] else 2) + H)


def estimate(cfg, args, world_size, fsdp, features, mean_response_tokens, gpu=True):
    """Bytes per GPU: {component: (phase, bytes)} and the pinned host bytes. Phases: always (held through a
    step), generate, score (the no-grad pass that also yields the features), train. features: none |
    packed | offload | padded-fp32."""
    s, n = shape(cfg), parameters(shape(cfg))
    bf16 = gpu and args.bf16
    shard = world_size if fsdp else 1
    act = 2 if (bf16 and fsdp) else 4  # FSDP computes in bf16; DDP under autocast keeps an fp32 residual stream
    responses = args.prompts_per_step // world_size * args.group_size  # this rank's share of the rollout
    seq = args.max_prompt_length + args.max_new_tokens
    out = {"weights (fp32)": ("always", 4 * n["total"] / shard),
           "AdamW state (fp32 exp_avg, exp_avg_sq)": ("always", 8 * n["total"] / shard),
           # DDP's gradient buckets live as long as the model; FSDP's sharded gradients only through the step
           "gradients (fp32)": ("always" if not fsdp else "train", 4 * n["total"] / shard),
           "rollout tensors (ids, masks, log-probs)": ("always", responses * seq * 9 + responses * args.max_new_tokens * 13)}
    if fsdp:  # bf16 copies gathered for compute: root (embeddings, head) and two layers (one prefetched)
        out["gathered parameters (training, scoring)"] = ("score,train", (2 if bf16 else 4) * (n["root"] + 2 * n["layer"]))
        out["gathered weights while generating"] = ("generate", (2 if bf16 else 4) * n["total"])  # no reshard per token
    elif bf16:
        out["autocast's bf16 weight copies"] = ("score,train", 2 * n["total"])
    per_call = max(1, min(responses, args.gen_max_tokens // seq))
    out["KV cache of one generate call"] = ("generate", per_call * seq * 2 * s["L"] * s["kv"] * s["hd"] * (2 if bf16 else 4))
    tokens = responses * mean_response_tokens
    out["DelTA features v"] = ("score", {"none": 0, "packed": tokens * s["H"] * (2 if bf16 else 4), "offload": 0,
                                         "padded-fp32": responses * args.max_new_tokens * s["H"] * 4}[features])
    mb = max(min(args.max_tokens_per_micro_batch, responses * seq), seq)  # a longer sequence goes alone
    layer_act = mb * (4 * s["H"] + 2 * s["heads"] * s["hd"] + 2 * s["kv"] * s["hd"] + 4 * s["I"]) * act
    saved = mb * s["H"] * act * s["L"] if args.gradient_checkpointing else layer_act * s["L"]
    out["activations of a micro-batch"] = ("train", saved + (layer_act if args.gradient_checkpointing else 0))
    chunk = min(args.head_chunk_tokens, mb)
    out["logits of one head slice (fp32, softmax, grads)"] = ("train", 2 * chunk * s["V"] * (4 + 4 + (2 if bf16 else 0)))
    host = tokens * s["H"] * (2 if bf16 else 4) if features == "offload" else 0
    return out, host


def peaks(components):
    """The largest total over the phases of a step; each phase adds to what is always held."""
    always = sum(b for p, b in components.values() if p == "always")
    by_phase = {ph: always + sum(b for p, b in components.values() if ph in p.split(",")) for ph in ("generate", "score", "train")}
    score_pass = components["activations of a micro-batch"][1] / 4  # no-grad scoring: about one layer at a time
    by_phase["score"] += score_pass + components["logits of one head slice (fp32, softmax, grads)"][1] / 2
    return by_phase


def table(cfg, args, world_size, mean_response_tokens):
    modes = [(fsdp, f) for fsdp in (False, True) for f in ("none", "packed", "offload", "padded-fp32")]
    results = {m: estimate(cfg, args, world_size, m[0], m[1], mean_response_tokens) for m in modes}
    keys = list(dict.fromkeys(k for m in modes for k in results[m][0]))
    head = "| GiB per GPU | phase | " + " | ".join(f"{'FSDP' if fsdp else 'DDP'}, {f}" for fsdp, f in modes) + " |"
    lines = [head, "|---" * (len(modes) + 2) + "|"]
    for k in keys:
        phase = next(results[m][0][k][0] for m in modes if k in results[m][0])
        lines.append(f"| {k} | {phase} | " + " | ".join(f"{results[m][0].get(k, ('', 0))[1] / GiB:.1f}" for m in modes) + " |")
    all_peaks = {m: peaks(results[m][0]) for m in modes}
    for ph in ("generate", "score", "train"):
        lines.append(f"| total while {'generating' if ph == 'generate' else ph + 'ing' if ph == 'train' else 'scoring'} | | "
                     + " | ".join(f"{all_peaks[m][ph] / GiB:.1f}" for m in modes) + " |")
    lines.append("| **peak** | | " + " | ".join(f"**{max(all_peaks[m].values()) / GiB:.1f}**" for m in modes) + " |")
    lines.append("| pinned host memory per rank | | " + " | ".join(f"{results[m][1] / GiB:.1f}" for m in modes) + " |")
    return "\n".join(lines)


def main(argv):
    world_size, mean = 8, 0
    for flag in ("--world_size", "--mean_response_tokens"):
        if flag in argv:
            i = argv.index(flag)
            value, argv = int(argv[i + 1]), argv[:i] + argv[i + 2:]
            world_size, mean = (value, mean) if flag == "--world_size" else (world_size, value)
    args = delta.parse_args(argv)
    source = args.model or (print("give --model (a config.json, a folder or a hub id)") or sys.exit(2))
    cfg = read_config(source)
    mean = mean or args.max_new_tokens // 2
    s, n = shape(cfg), parameters(shape(cfg))
    print(f"{source}: {n['total'] / 1e9:.2f} B parameters, hidden {s['H']}, {s['L']} layers, vocab {s['V']}; "
          f"{world_size} GPUs; {args.prompts_per_step} x {args.group_size} responses per step; prompt {args.max_prompt_length} "
          f"+ response {args.max_new_tokens} tokens, mean response {mean}; bf16 {args.bf16}; gradient checkpointing "
          f"{args.gradient_checkpointing}\n")
    print(table(cfg, args, world_size, mean))


if __name__ == "__main__":
    main(sys.argv[1:])
