"""Benchmark: rollout tokens per second, Hugging Face `generate` against vLLM, in one process.

    $TMPDIR/delta-vllm-venv/bin/python bench/bench_rollout.py    # needs vLLM (on CPU: .ci/vllm.sh's venv)
    $TMPDIR/delta-vllm-venv/bin/python bench/bench_rollout.py --model /tmp/smollm2    # a real model's rollouts

Two randomly initialised Qwen3 models with the tiny default's character tokenizer: the tiny default's
dimensions (hidden 128, 2 layers, 0.5 M parameters) and a larger one that still runs on 2 cores
(hidden 1024, 8 layers, 100 M parameters). Each samples at temperature 1 with a fixed response
length (min = max new tokens, so both engines produce the same number of tokens), 64 and 1,024 new
tokens, after one warm-up round; HF in calls of delta.py's token budget, vLLM in one call. Prints
tokens per second for each and their ratio. These are CPU figures; GPU figures are not measured here.

With --model (a real model folder, SmolLM2-135M-Instruct from tools/smollm2.py): delta.py's own samplers, HF
`generate` (HFSampler) and vLLM (VLLMSampler, sampling from the folder), on the same rollouts: tools/real_learning.py's
(8 prompts x 8 samples at temperature 0.6, up to 32 new tokens), then longer ones (temperature 1.0, up to 256), each
ending at the stop token; tokens per second counted from the response masks, each engine after a warm-up rollout.
"""
import os
import sys
import tempfile
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import checkpoints  # noqa: E402
import delta  # noqa: E402
import engines  # noqa: E402
import sampling  # noqa: E402
import tasks  # noqa: E402

MODELS = {"tiny (0.5 M)": dict(hidden_size=128, num_hidden_layers=2, intermediate_size=512, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=32),
          "larger (100 M)": dict(hidden_size=1024, num_hidden_layers=8, intermediate_size=3072, num_attention_heads=16,
                                 num_key_value_heads=8, head_dim=64)}
RUNS = [(64, 256), (1024, 32)]  # (new tokens, prompts)


def build(path, dims):
    from transformers import AutoModelForCausalLM, Qwen3Config

    tasks.build_tiny(path)  # the tokenizer; the model is replaced
    _, tok = checkpoints.load_model(path, torch.device("cpu"))
    cfg = Qwen3Config(vocab_size=len(tok), max_position_embeddings=2048, eos_token_id=0, pad_token_id=0,
                      bos_token_id=None, tie_word_embeddings=False, **dims)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    return checkpoints.load_model(path, torch.device("cpu"))


def hf_rate(model, tok, prompts, new):
    from transformers import GenerationConfig

    cfg = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=new, min_new_tokens=new,
                           eos_token_id=0, pad_token_id=0)
    per_call = max(1, 65536 // (16 + new))  # delta.py's default --gen_max_tokens
    t = time.perf_counter()
    for s in range(0, len(prompts), per_call):
        enc = tok(prompts[s:s + per_call], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            model.generate(**enc, generation_config=cfg)
    return len(prompts) * new / (time.perf_counter() - t)


def vllm_rate(engine, tok, prompts, new):
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = SamplingParams(temperature=1.0, max_tokens=new, min_tokens=new, seed=0)
    ids = [TokensPrompt(prompt_token_ids=tok(p, add_special_tokens=False).input_ids) for p in prompts]
    t = time.perf_counter()
    out = engine.generate(ids, params, use_tqdm=False)
    assert all(len(o.outputs[0].token_ids) == new for o in out)
    return len(prompts) * new / (time.perf_counter() - t)


def real_rates(path, repeats=3):
    """delta.py's HF and vLLM samplers on the same rollouts of a real model (see the module docstring)."""
    import random

    import rewards
    from sampling import VLLMSampler

    model, tok = checkpoints.load_model(path, torch.device("cpu"))
    rng = random.Random(0)
    questions = [f"What is {rng.randint(10, 99)} + {rng.randint(10, 99)}?" for _ in range(32)]
    prompts = [delta.prompt_text(tok, q, rewards.ANSWER_FORMATS["last_number"]) for q in questions]
    sharding, eos = engines.DDP(1, torch.device("cpu")), sampling.eos_ids(path, tok)
    print("| rollout | HF generate tok/s | vLLM tok/s | vLLM / HF | mean response tokens (HF, vLLM) |\n"
          "|---|---|---|---|---|")
    for label, n_prompts, group, new, temperature in (("8 x 8, T 0.6, <= 32 tokens", 8, 8, 32, 0.6),
                                                      ("8 x 8, T 1.0, <= 256 tokens", 8, 8, 256, 1.0)):
        args = delta.Args(max_new_tokens=new, max_prompt_length=64, temperature=temperature, seed=0)
        hf = sampling.HFSampler(args, model, tok, eos, sharding)
        vl = VLLMSampler(args, None, tok, eos, sharding, 0, path)
        rates, lengths = {}, {}
        for name, sampler in (("hf", hf), ("vllm", vl)):
            delta.sample(sampler, prompts[:n_prompts], temperature, group, seed=1)  # warm-up
            tokens, seconds = 0, 0.0
            for r in range(repeats):
                t = time.perf_counter()
                batch = delta.sample(sampler, prompts[:n_prompts], temperature, group, seed=2 + r)
                seconds += time.perf_counter() - t
                tokens += int(batch["response_mask"].sum())
            rates[name], lengths[name] = tokens / seconds, tokens / (repeats * n_prompts * group)
        vl.close()
        print(f"| {label} | {rates['hf']:.0f} | {rates['vllm']:.0f} | {rates['vllm'] / rates['hf']:.2f} | "
              f"{lengths['hf']:.1f}, {lengths['vllm']:.1f} |", flush=True)
    print(f"torch threads {torch.get_num_threads()}; 2 CPU cores; the weights are the GGUF's 4-bit values in fp32")


def main():
    if "--model" in sys.argv:
        return real_rates(sys.argv[sys.argv.index("--model") + 1])
    from vllm import LLM

    print(f"{'model':<16}{'new tokens':>11}{'prompts':>9}{'HF tok/s':>11}{'vLLM tok/s':>12}{'vLLM/HF':>9}")
    for name, dims in MODELS.items():
        with tempfile.TemporaryDirectory() as path:
            model, tok = build(path, dims)
            engine = LLM(model=path, dtype="float32", max_model_len=2048, enforce_eager=True, seed=0)
            for new, n in RUNS:
                prompts = [delta.prompt_text(tok, f"{a}+{a + 7}=?") for a in range(n)]
                hf_rate(model, tok, prompts[:8], 8), vllm_rate(engine, tok, prompts[:8], 8)  # warm-up
                hf, vl = hf_rate(model, tok, prompts, new), vllm_rate(engine, tok, prompts, new)
                print(f"{name:<16}{new:>11}{n:>9}{hf:>11.0f}{vl:>12.0f}{vl / hf:>9.2f}", flush=True)
            del engine
    print(f"torch threads {torch.get_num_threads()}; CPU figures, GPU figures are not measured here")


if __name__ == "__main__":
    main()
