"""Tests of the benches the suite relies on and of the examples: bench/memory.py against the real step and autograd
(bench/memory_measured.py), bench/gpu_check.py on the CPU, bench/rollouts.py and bench/oracle.py on dumped rollouts,
(DelTA inside TRL, examples/trl_delta.py: test_trl.py, in its own venv). delta.py's own tests are in test_delta.py;
the shared fixtures (the tiny model, a scored rollout, the subprocess runner) in conftest.py."""
import copy
import dataclasses
import json
import os
import sys

import pytest
import torch

import delta
from conftest import FAST, ROOT, fixed_rollout, lam_of, run_delta
from delta import Args

sys.path.insert(0, os.path.join(ROOT, "bench"))
import oracle  # noqa: E402  (adds ALGOS["oracle"]: an algorithm from outside delta.py)
import rollouts  # noqa: E402

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------- memory (bench/memory.py)
def test_memory_estimator_matches_the_tiny_models_tensors(tiny):
    """bench/memory.py's arithmetic against tensors measured on CPU: weights, AdamW state, packed features,
    the KV cache of a generate call in each precision and the LM-head slice."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import memory
    from transformers import GenerationConfig

    cfg = json.load(open(os.path.join(tiny, "config.json")))
    run, batch, adv, packed, plans = fixed_rollout(tiny, n_prompts=4, G=4)
    model, args = run.model, run.args
    args.prompts_per_step, args.group_size = 4, 4
    n_side = packed[0].shape[0]
    est, _ = memory.estimate(cfg, args, 1, False, "packed", n_side / 16, gpu=False)
    assert est["always"]["weights (fp32)"] == sum(p.numel() * 4 for p in model.parameters())
    delta.update(run, batch, adv, None, plans)  # AdamW
    state = sum(t.numel() * t.element_size() for st in run.optimizer.state.values() for k, t in st.items() if k != "step")
    assert est["always"]["AdamW state (fp32 exp_avg, exp_avg_sq)"] == state
    assert est["score"]["DelTA features v (packed)"] == packed[0].numel() * packed[0].element_size()  # fp32 on CPU
    # the KV cache of one generate call: every prompt + max_new_tokens positions but the last, in the cache's dtypes:
    # fp32; fp32 weights under bf16 autocast (DDP on a GPU: K fp32 through k_norm's weight, V bf16); bf16 (FSDP)
    P, new = 12, 20
    ids = torch.full((5, P), 7)
    kv_args = dataclasses.replace(args, prompts_per_step=5, group_size=1, max_prompt_length=P, max_new_tokens=new,
                                  gen_max_tokens=5 * (P + new))
    for precision, fsdp, weights, autocast in (("fp32", False, torch.float32, False),
                                               ("bf16", False, torch.float32, True),
                                               ("bf16", True, torch.bfloat16, False)):
        m = copy.deepcopy(model).to(weights)
        with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            out = m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), return_dict_in_generate=True,
                             generation_config=GenerationConfig(do_sample=False, max_new_tokens=new, min_new_tokens=new,
                                                                eos_token_id=0, pad_token_id=0))
        cache = out.past_key_values.layers
        measured = sum(t.numel() * t.element_size() for layer in cache for t in (layer.keys, layer.values))
        a = dataclasses.replace(kv_args, precision=precision)
        assert memory.estimate(cfg, a, 1, fsdp, "none", 1, gpu=False)[0]["generate"][
            "KV cache of one generate call"] == measured, precision
    # the LM head runs on slices of head_chunk_tokens positions: the largest logits tensor is [chunk, V]
    sizes = []
    original = torch.nn.Linear.forward
    try:
        torch.nn.Linear.forward = lambda self, x: sizes.append(original(self, x).shape) or original(self, x)
        delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["response_mask"].shape[1], 1.0,
                                chunk_tokens=7)
    finally:
        torch.nn.Linear.forward = original
    assert max(s.numel() for s in sizes if s[-1] == cfg["vocab_size"]) == 7 * cfg["vocab_size"]


@pytest.mark.parametrize("mode", ["fp32", "autocast", "bf16"])
def test_what_a_decoder_layer_saves_for_backward_is_memory_pys(mode):
    """bench/memory.py's saved_per_token against autograd's own saved tensors (saved_tensors_hooks) of a Qwen3
    decoder layer, at a shape the formula was not read from: per token, for fp32, fp32 weights under bf16
    autocast (DDP on a GPU) and bf16 weights (FSDP2 on a GPU)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import memory
    from torch.distributed._tools.common_utils import get_untyped_storages
    from transformers import AutoModelForCausalLM, Qwen3Config

    dims = dict(hidden_size=96, intermediate_size=224, num_attention_heads=6, num_key_value_heads=3, head_dim=24)

    def saved(layers, T=150):  # bytes autograd saves for one forward, the weights (and their bf16 copies) aside
        torch.manual_seed(0)
        m = AutoModelForCausalLM.from_config(Qwen3Config(vocab_size=64, num_hidden_layers=layers, **dims))
        m = m.to(torch.bfloat16) if mode == "bf16" else m
        weights = {st._cdata for p in m.parameters() for st in get_untyped_storages(p)}
        seen = {}

        def pack(t):  # a 2-d tensor not of T rows is a weight's bf16 copy (autocast)
            for st in get_untyped_storages(t):
                seen[st._cdata] = (st.nbytes(), t.dim() == 2 and t.shape[0] != T)
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                torch.autocast("cpu", torch.bfloat16, enabled=mode == "autocast"):
            m.model(input_ids=torch.randint(0, 64, (1, T)))
        return sum(b for k, (b, weight_copy) in seen.items() if k not in weights and not weight_copy)
    s = memory.shape(dict(dims, num_hidden_layers=1, vocab_size=64))
    assert saved(2) - saved(1) == 150 * memory.saved_per_token(s, mode)


@pytest.mark.parametrize("fsdp", [False, True], ids=["ddp", "fsdp"])
def test_memory_model_is_within_ten_percent_of_the_real_step(fsdp, tmp_path):
    """bench/memory.py against the live bytes of delta.rl_step itself (bench/memory_measured.py: every storage
    counted until freed) on 2 gloo processes with the GPU's dtypes, phase by phase."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import memory_measured
    measured, estimated, shape = memory_measured.compare("small", fsdp, tmp=str(tmp_path))
    assert shape["mean"] > 50  # the random model's responses run to the limit, as the estimate assumes
    for phase in ("generate", "score", "coefficients", "update"):
        assert estimated[phase] == pytest.approx(measured[phase], rel=0.10), phase


def test_the_documented_recipes_fit_80_gb_gpus():
    """docs/scale.md's commands for Qwen3-8B and 14B with --vllm on 8 GPUs of 80 GB: every phase under 75 GiB by
    the validated model, at a mean response of 10,240 tokens and at the limit of 20,480 (14B then offloads its
    features, as docs/scale.md says)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import memory
    for size, offload_at_limit in (("8b", False), ("14b", True)):
        cfg = memory.read_config(os.path.join(ROOT, "bench", "configs", f"qwen3-{size}-base.json"))
        args = Args(vllm=True, fsdp=True, gradient_checkpointing=True, prompts_per_step=128, group_size=16,
                    mini_batch_prompts=32, max_prompt_length=2048, max_new_tokens=20480,
                    max_tokens_per_micro_batch=32768, head_chunk_tokens=2048)
        for mean, offload in ((10240, False), (20480, offload_at_limit)):
            phases, host = memory.estimate(cfg, args, 8, True, "offload" if offload else "packed", mean)
            assert max(memory.peaks(phases).values()) < 75 * memory.GiB, (size, mean)
            share, kv, sequences = memory.vllm_kv(cfg, args, 8, True, 79.6 * memory.GiB)
            assert sequences > 4, size  # vLLM keeps several full-length sequences in flight


def test_memory_py_reads_every_backbones_config(backbones):
    """bench/memory.py counts each family's parameters from its own config (on the meta device) as the model has
    them, and gives a figure for every phase; OLMo-3-7B's config is in bench/configs/."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import memory
    for family, path in backbones.items():
        cfg, model = memory.read_config(path), delta.load_model(path, torch.device("cpu"))[0]
        assert memory.parameters(cfg)["total"] == sum(p.numel() for p in model.parameters()), family
        phases, _ = memory.estimate(cfg, Args(), 2, True, "packed", 32)
        assert all(v > 0 for v in memory.peaks(phases).values()), family
    olmo = memory.read_config(os.path.join(ROOT, "bench", "configs", "olmo-3-7b-base.json"))
    assert 7.2e9 < memory.parameters(olmo)["total"] < 7.4e9


def test_gpu_check_runs_on_cpu_with_the_tiny_config():
    """bench/gpu_check.py's table, as a lent GPU would print it, from the tiny dimensions on CPU: both algorithms
    from the same draws, every phase timed; its GPU settings fit the GPU memory its docstring names."""
    import gpu_check
    import memory

    rows = {r[0]: r[1:] for r in gpu_check.main(["--tiny"])}
    dapo, delta_ = rows["first rollout the same draws (response length)"][:2]
    assert dapo == delta_  # paired generators: the first rollouts are the same draws
    for key in ("seconds per step: generate", "seconds per step: score", "seconds per step: train", "HF rollout tokens/s"):
        assert all(float(x.replace(",", "")) > 0 for x in rows[key][:2]), key
    assert float(rows["seconds per step: coefficients"][1]) > 0 == float(rows["seconds per step: coefficients"][0])
    assert "vLLM" in rows or "vLLM rollout tokens/s" in rows
    cfg = dict(gpu_check.DIMS["gpu"], model_type="qwen3")
    args = Args(max_prompt_length=32, **gpu_check.SETTINGS["gpu"])
    need = max(memory.peaks(memory.estimate(cfg, args, 1, False, "packed", args.max_new_tokens)[0]).values())
    assert need < 20 * memory.GiB  # "any GPU of 24 GiB or more"


# ------------------------------------------------------------------------------------- where lam goes (bench/rollouts.py, bench/oracle.py)
def test_token_categories_of_the_embedded_tasks():
    text = "3+5=8, 8+9=18, 18+2=20. \\boxed{20}"  # 8 + 9 is 17: the second step is the first wrong one
    cats = rollouts.token_categories(text, "3+5+9+2=?")
    assert cats[:5] == ["restated", "format", "restated", "format", "result"]
    assert cats[text.index("18,"):text.index("18,") + 2] == ["first_wrong", "first_wrong"]
    assert cats[text.index("20."):text.index("20.") + 2] == ["result", "result"]  # only the first wrong step
    assert [cats[i] for i in range(text.index("{") + 1, text.index("}"))] == ["answer", "answer"]
    right = "3+5=8, 8+9=17, 17+2=19. \\boxed{19}"
    assert "first_wrong" not in rollouts.token_categories(right, "3+5+9+2=?")
    addition = "Let us add the two numbers. \\boxed{85}"
    cats = rollouts.token_categories(addition, "47+38=?")
    assert set(cats[:addition.index("{") + 1]) == {"format"} and cats[-3:-1] == ["answer", "answer"]
    filler = "3+5=8 qzt mow, 8+2=10 abc def. \\boxed{10}"
    cats = rollouts.token_categories(filler, "3+5+2=?")
    assert [cats[i] for i, c in enumerate(filler) if c.islower() and i < filler.index("\\")] == ["filler"] * 12
    assert cats[filler.index("10 "):filler.index("10 ") + 2] == ["result", "result"]


def test_token_categories_of_real_text():
    """A real model's response in its own tokens (SmolLM2 writes one digit a token): the operands it restates, its
    other numbers, operators, function words, other words, markup, the graded final answer (the last number, or the
    box) and the stop token, each token labelled by hand."""
    pieces = ["To", " add", " ", "5", "9", " and", " ", "6", "3", ",", " we", " carry", ":", " ", "5", "0", " +", " ",
              "6", "0", " =", " ", "1", "1", "0", ".", " **", "So", "**", " ", "1", "2", "2", ".", "<|im_end|>"]
    want = ["stop word", "word", "format", "restated", "restated", "stop word", "format", "restated", "restated",
            "format", "stop word", "word", "format", "format", "number", "number", "operator", "format", "number",
            "number", "operator", "format", "number", "number", "number", "format", "format", "stop word", "format",
            "format", "answer", "answer", "answer", "format", "template"]
    special = [p == "<|im_end|>" for p in pieces]
    assert rollouts.real_token_categories(pieces, special, "What is 59 + 63?", "last_number") == want
    boxed = ["The", " sum", " is", " \\", "boxed", "{", "1", "2", "2", "}"]
    got = rollouts.real_token_categories(boxed, [False] * 10, "What is 59 + 63?", "boxed")
    assert got[-4:-1] == ["answer"] * 3 and got[:3] == ["stop word", "word", "stop word"]


def test_deciding_tokens_are_the_step_results_and_the_answer(tiny):
    _, tok = delta.load_model(tiny, torch.device("cpu"))
    text = "3+5=8 qzt mow, 8+9=18 abc def. \\boxed{18}"
    batch = delta.pack(tok, ["Q: 3+5+9=?"], [text], "cpu")
    got = oracle.deciding_tokens(tok, batch)[0]
    cats = rollouts.token_categories(text, "3+5+9=?") + ["eos"]
    assert got.tolist() == [c in ("result", "first_wrong", "answer") for c in cats]


def dumped_rollout(tiny, tmp_path, algo="delta"):
    run, batch, adv, packed, plans = fixed_rollout(tiny, algo=algo, output_dir=str(tmp_path), run_name="t")
    lam = lam_of(run, batch, adv, packed) if algo == "delta" else None
    v_norm = delta.feature_norms(packed[0], packed[2], batch["response_mask"], 7)  # a chunk at a time
    delta.dump_rollout(run, dict(batch=batch, adv=adv, v_norm=v_norm, rows=run.rows), lam, 3)
    return run, batch, adv, packed, lam, torch.load(tmp_path / "rollout-3.pt", weights_only=False)


def test_category_stats_against_a_token_loop(tiny, tmp_path):
    run, batch, adv, packed, lam, dump = dumped_rollout(tiny, tmp_path)
    got = rollouts.category_stats(run.tok, dump)
    v = torch.zeros(batch["response_mask"].shape + (packed[0].shape[1],))
    v.view(-1, v.shape[-1])[packed[2]] = packed[0]
    want = {}
    for i in range(len(adv)):
        if adv[i] != 0:
            text = delta.decode_responses(run.tok, {k: x[i:i + 1] if torch.is_tensor(x) else x for k, x in batch.items()})[0]
            cats = rollouts.token_categories(text, run.rows[i // 4]["question"]) + ["eos"]  # one character a token
            for t in range(int(batch["response_mask"][i].sum())):
                size = abs(float(adv[i])) * float(v[i, t].norm())
                want.setdefault((cats[t], "pos" if adv[i] > 0 else "neg"), []).append((float(lam[i, t]), size))
    for (c, side), items in want.items():
        assert got[f"lam/{c}/{side}"] == pytest.approx(sum(x for x, _ in items) / len(items))
        assert got[f"lamw/{c}/{side}"] == pytest.approx(sum(x * w for x, w in items) / sum(w for _, w in items))
        total = sum(x * w for (cc, ss), its in want.items() if ss == side for x, w in its)
        assert got[f"share/{c}/{side}"] == pytest.approx(sum(x * w for x, w in items) / total)
    assert -1 <= got["rho_p/pos"] <= 1 and "rho_p/neg" in got


def test_lambda_page_shows_every_token_with_its_weight(tiny, tmp_path):
    run, batch, adv, packed, lam, dump = dumped_rollout(tiny, tmp_path)
    page = rollouts.lambda_page(run.tok, dump, per_side=2)
    pick = lambda rows: [rows[0], rows[-1]]  # two a side, spread over the batch: the first and the last
    shown = pick((adv > 0).nonzero().flatten().tolist()) + pick((adv < 0).nonzero().flatten().tolist())
    assert page.count("lam=") == sum(int(batch["response_mask"][i].sum()) for i in shown)
    value = float(lam[shown[0], 0])
    assert f"lam={value:.4f}" in page and "A > 0" in page and "A < 0" in page and page.startswith("<!doctype html>")


def test_filler_task_dumps_rollouts_that_bench_reads(tmp_path):
    out = str(tmp_path / "ms")
    p = run_delta("--task", "filler", "--output_dir", out, "--max_steps", "1", "--dump_rollouts_every", "1",
                  "--sft_max_steps", "40", *FAST[:8], "--max_new_tokens", "120", "--eval_size", "16", "--progress", "false")
    assert p.returncode == 0, p.stderr[-3000:]
    page = tmp_path / "page.html"
    rollouts.main([out, "--html", str(page), "--json", str(tmp_path / "stats.jsonl")])
    stats = [json.loads(line) for line in open(tmp_path / "stats.jsonl")]
    assert stats[0]["step"] == 1 and any(k.startswith("share/filler/") for k in stats[0])
    assert page.read_text().count("lam=") > 10
    train, held_out = delta.TASKS["filler"]["build"](0, 16)
    assert len(train) + len(held_out) == 9 ** 3 + 9 ** 4 + 9 ** 5
    assert all(rollouts.token_categories(r["solution"], r["question"]).count("first_wrong") == 0 for r in train[:200])
    lengths = [len(r["solution"]) for r in train[:2000]]
    assert min(lengths) >= 35 and sum(lengths) / len(lengths) > 70  # long-ish responses, many shared filler tokens
