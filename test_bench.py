"""Tests of the benches the suite relies on and of the examples: tools/memory.py against the real step and autograd
(tools/memory_measured.py), tools/gpu_check.py on the CPU, tools/rollouts.py and tools/oracle.py on dumped rollouts,
(DelTA inside TRL, examples/trl_delta.py: test_trl.py, in its own venv). delta.py's own tests are in test_delta.py, its
engines' (vLLM, memory at scale, metrics sinks) in test_engines.py; the shared fixtures (the tiny model, a scored
rollout, the subprocess runner) in conftest.py."""
import copy
import dataclasses
import io
import json
import math
import re
import os
import sys
import types
import zlib

import pytest
import torch

import checkpoints
import delta
import sampling
import engines
import tasks
from conftest import FAST, ROOT, fixed_rollout, lam_of, pack, run_delta
from delta import Args

sys.path.insert(0, os.path.join(ROOT, "tools"))
import direction  # noqa: E402
import oracle  # noqa: E402  (adds ALGOS["oracle"]: an algorithm from outside delta.py)
import rollouts  # noqa: E402

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------- memory (tools/memory.py)
def test_memory_estimator_matches_the_tiny_models_tensors(tiny):
    """tools/memory.py's arithmetic against tensors measured on CPU: weights, AdamW state, packed features,
    the KV cache of a generate call in each precision and the LM-head slice."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
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
    state = sum(t.numel() * t.element_size()
                for st in run.optimizer.state.values() for k, t in st.items() if k != "step")
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
        delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["response_mask"].shape[1],
                                1.0, chunk_tokens=7)
    finally:
        torch.nn.Linear.forward = original
    assert max(s.numel() for s in sizes if s[-1] == cfg["vocab_size"]) == 7 * cfg["vocab_size"]


@pytest.mark.parametrize("mode", ["fp32", "autocast", "bf16"])
def test_what_a_decoder_layer_saves_for_backward_is_memory_pys(mode):
    """tools/memory.py's saved_per_token against autograd's own saved tensors (saved_tensors_hooks) of a Qwen3
    decoder layer, at a shape the formula was not read from: per token, for fp32, fp32 weights under bf16
    autocast (DDP on a GPU) and bf16 weights (FSDP2 on a GPU)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
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
    """tools/memory.py against the live bytes of delta.rl_step itself (tools/memory_measured.py: every storage
    counted until freed) on 2 gloo processes with the GPU's dtypes, phase by phase."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import memory_measured
    measured, estimated, shape = memory_measured.compare("small", fsdp, tmp=str(tmp_path))
    assert shape["mean"] > 50  # the random model's responses run to the limit, as the estimate assumes
    for phase in ("generate", "score", "coefficients", "update"):
        assert estimated[phase] == pytest.approx(measured[phase], rel=0.10), phase


def recipe(name, *flags):
    """A recipe file as delta.py reads it, flags after it overriding it."""
    return delta.parse_args([os.path.join(ROOT, "recipes", name), *flags])


RECIPE = {k: getattr(recipe("qwen3-8b-deepmath.yaml"), k) for k in (
    "vllm", "fsdp", "gradient_checkpointing", "prompts_per_step", "group_size", "mini_batch_prompts",
    "max_prompt_length", "max_new_tokens", "max_tokens_per_micro_batch", "head_chunk_tokens")}  # the paper's run
PAPER = dict(dataset="zwhe99/DeepMath-103K", algo="delta", prompts_per_step=128, group_size=16, mini_batch_prompts=32,
             clip_low=0.2, clip_high=0.28, clip_c=10.0, max_prompt_length=2048, max_new_tokens=20480,
             overlong_buffer=4096, overlong_penalty=1.0, lr=1e-6, weight_decay=0.1, max_grad_norm=1.0,
             temperature=1.0, top_p=1.0, top_k=0, K=1, lam_min=0.8, lam_max=1.2, epochs=2, max_steps=0)  # Sec. 4


def test_each_recipe_is_its_run_and_flags_override_it(tmp_path):
    """recipes/: the paper's Qwen3-8B and 14B runs hold DELTA.md Sec. 4's values; the SmolLM2 recipe is
    tools/real_learning.py's SETTINGS; the code recipe is the README's command; flags after a file override it, and a
    key that is no argument is refused."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import real_learning
    for size in ("8B", "14B"):
        a = recipe(f"qwen3-{size.lower()}-deepmath.yaml")
        assert {k: getattr(a, k) for k in PAPER} == PAPER and a.model == f"Qwen/Qwen3-{size}-Base"
        assert (a.prompt_key, a.answer_key, a.fsdp, a.vllm) == ("question", "final_answer", True, True)
    over = recipe("qwen3-8b-deepmath.yaml", "--algo", "dapo", "--lr", "2e-6")
    assert (over.algo, over.lr, over.group_size) == ("dapo", 2e-6, 16)
    smol, settings = recipe("smollm2-addition.yaml"), delta.parse_args(real_learning.SETTINGS)
    changed = {f.name for f in dataclasses.fields(Args) if getattr(settings, f.name) != getattr(Args(), f.name)}
    assert {k: getattr(smol, k) for k in changed - {"dump_rollouts_every", "progress"}} == {
        k: getattr(settings, k) for k in changed - {"dump_rollouts_every", "progress"}}
    assert smol.model == "HuggingFaceTB/SmolLM2-135M-Instruct" and smol.dataset == "runs/smollm2-rows.jsonl"
    code = recipe("tiny-code.yaml")
    assert (code.task, code.prompts_per_step) == ("code", 16)
    delta.validate_args(code)
    (tmp_path / "bad.yaml").write_text("lr: 1.0e-6\nlearning_rate: 1.0e-6\n")
    with pytest.raises(delta.ArgumentError, match="no such arguments: learning_rate"):
        delta.parse_args([str(tmp_path / "bad.yaml")])


def test_the_documented_recipes_fit_80_gb_gpus():
    """recipes/ for Qwen3-8B and 14B with --vllm on 8 GPUs of 80 GB, every item a GPU holds booked
    (the CUDA context, NCCL, the allocator's slack: engines.gpu_margin): every phase at most 75 GiB by the validated
    model, at a mean response of 10,240 tokens and at the limit of 20,480, where 14B's features no longer fit beside
    the scoring pass and go to host memory by themselves (engines.feature_buffer), as memory.py books."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import engines
    import memory
    for size, host_at_limit in (("8b", False), ("14b", True)):
        cfg = memory.read_config(os.path.join(ROOT, "tools", "configs", f"qwen3-{size}-base.json"))
        args = recipe(f"qwen3-{size}-deepmath.yaml")  # the file a run takes
        for mean in (10240, 20480):
            phases, host = memory.estimate(cfg, args, 8, True, "packed", mean)
            assert max(memory.peaks(phases).values()) <= 75 * memory.GiB, (size, mean)
            assert all(phases["always"][k] == x for k, x in engines.gpu_margin(8).items())  # every item booked
            assert bool(host) == (host_at_limit and mean == 20480), (size, mean)  # the fallback, at 14B's limit
            share, kv, sequences = memory.vllm_kv(cfg, args, 8, True, 79.6 * memory.GiB)
            assert sequences > 4, size  # vLLM keeps several full-length sequences in flight


def test_zero_spread_groups_shrink_what_a_step_forwards_and_keeps():
    """--zero_spread Z (the expected share of groups whose rewards are all equal): memory.py's features shrink by Z,
    its peak (a micro-batch's) does not; steptime.py's scoring and update shrink by Z under --skip_zero_advantage
    (forking scores every row), generation not at all."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import memory
    import steptime
    cfg, args = memory.read_config(os.path.join(ROOT, "tools", "configs", "qwen3-8b-base.json")), recipe(
        "qwen3-8b-deepmath.yaml")
    feats = lambda z: memory.estimate(cfg, args, 8, True, "packed", 10240, zero_spread=z)[0]
    key = "DelTA features v (packed)"
    assert feats(0.5)["coefficients"][key] == pytest.approx(feats(0.0)["coefficients"][key] / 2)
    assert max(memory.peaks(feats(0.5)).values()) == max(memory.peaks(feats(0.0)).values())
    minutes = lambda z, **c: steptime.step_minutes(cfg, dataclasses.replace(args, **c), 8, steptime.GPUS["h100"],
                                                   256, 10240, zero_spread=z)
    full, skip = minutes(0.0), minutes(0.4)
    assert skip["generate"] == full["generate"]
    assert skip["score"] == pytest.approx(0.6 * full["score"]) and skip["update"] == pytest.approx(0.6 * full["update"])
    assert minutes(0.4, skip_zero_advantage=False) == full and minutes(0.4, algo="forking")["score"] == full["score"]


def test_parking_the_trainer_while_vllm_samples_grows_vllms_share():
    """--vllm_offload_trainer (14B's rollouts): the trainer's shards and AdamW state wait in host memory while vLLM
    is awake, so vLLM's share takes them: 14B's KV cache holds about twice the full-length sequences, every phase
    still within 75 GiB, the parked bytes booked in host memory."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import memory
    cfg = memory.read_config(os.path.join(ROOT, "tools", "configs", "qwen3-14b-base.json"))
    plain, parked = Args(**RECIPE), Args(**RECIPE, vllm_offload_trainer=True)
    (s0, kv0, seq0), (s1, kv1, seq1) = (memory.vllm_kv(cfg, a, 8, True, 79.6 * memory.GiB) for a in (plain, parked))
    assert s1 > s0 and seq1 > 1.8 * seq0
    phases, host = memory.estimate(cfg, parked, 8, True, "packed", 10240)
    assert max(memory.peaks(phases).values()) <= 75 * memory.GiB
    trainer = 12 * memory.parameters(cfg)["total"] / 8
    assert host["the trainer's state, parked while vLLM is awake (exact-size pinned)"] == trainer


def test_verls_recipe_micro_batch_is_booked():
    """examples/verl_delta.sh runs without Ulysses sequence parallelism (the plugin refuses it): every GPU trains on
    packed micro-batches of the recipe's actor.ppo_max_token_len_per_gpu tokens, booked for verl's own engine
    (memory.verl_update: the LM head whole, with flash-attn's in-place cross-entropy or without it, as verl[vllm]
    installs): at most 75 GiB for 8B and 14B either way; the plugin's features in host memory, exact size."""
    import re
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import memory
    tokens = int(re.search(r"ppo_max_token_len_per_gpu=(\d+)", open(os.path.join(
        ROOT, "examples", "verl_delta.sh")).read()).group(1))
    assert tokens == 24576
    for size in ("8b", "14b"):
        cfg = memory.read_config(os.path.join(ROOT, "tools", "configs", f"qwen3-{size}-base.json"))
        for flash in (False, True):
            held, host = memory.verl_update(cfg, Args(**RECIPE), 8, tokens, flash, 10240)
            assert sum(held.values()) <= 75 * memory.GiB, (size, flash)
            head = [x for k, x in held.items() if k.startswith("the head's backward")]
            assert head == ([] if flash else [3 * tokens * cfg["vocab_size"] * 2]) or flash, (size, flash)
            assert list(host.values()) == [256 * 10240 * cfg["hidden_size"] * 2]


def test_memory_py_books_the_largest_micro_batch_that_delta_packs(tiny):
    """delta.micro_batches packs several rows up to --max_tokens_per_micro_batch padded tokens, so a micro-batch
    holds more than floor(budget / sequence) full rows (what memory.py booked: ~5 GiB low in the 8B update):
    memory.py's bounds (engines.micro_batch_bounds) hold the real micro-batches' tokens, sum of T^2 and response
    tokens at lengths drawn like real rollouts, and are reached."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import engines
    gen = torch.Generator().manual_seed(0)
    P, R, budget, rows = 6, 60, 200, 32
    args = Args(prompts_per_step=rows // 4, group_size=4, mini_batch_prompts=rows // 4, max_new_tokens=R,
                max_prompt_length=P, max_tokens_per_micro_batch=budget)
    run = types.SimpleNamespace(args=args, world=1, group=None)
    tokens, square, response = engines.micro_batch_bounds(args, 1, P + R)
    seen = dict(tokens=0, square=0, response=0)
    for trial in range(20):
        lengths = torch.randint(1, R + 1, (rows,), generator=gen) if trial else torch.full((rows,), R)
        batch = {"prompt_len": P, "attention_mask": torch.ones(rows, P + R, dtype=torch.bool),
                 "response_mask": torch.arange(R)[None] < lengths[:, None], "input_ids": torch.zeros(rows, P + R)}
        batch["attention_mask"][:, P:] = batch["response_mask"]
        for groups in delta.micro_batches(run, batch):
            for g in groups:
                T = P + int(lengths[g].max())
                seen = dict(tokens=max(seen["tokens"], len(g) * T), square=max(seen["square"], len(g) * T * T),
                            response=max(seen["response"], len(g) * (T - P)))
    assert seen["tokens"] <= tokens and seen["square"] <= square and seen["response"] <= response
    assert seen["tokens"] > budget // (P + R) * (P + R)  # what memory.py booked before: too few tokens
    assert seen["tokens"] >= 0.9 * tokens and seen["square"] >= 0.75 * square  # and the bounds are near the truth


def test_value_cache_dtype_follows_the_transformers_version():
    """HF's KV cache under autocast (DDP on a GPU): K is fp32 (k_norm's fp32 weight); V is fp32 too before
    transformers 5.24, which made both caches in K's dtype (requirements-vllm.txt pins 5.16-5.19), bf16 from 5.24."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import memory
    assert memory.value_cache_in_key_dtype("5.19.0") and memory.value_cache_in_key_dtype("5.23.0")
    assert not memory.value_cache_in_key_dtype("5.24.0") and not memory.value_cache_in_key_dtype("6.0.0")
    cfg = memory.read_config(os.path.join(ROOT, "tools", "configs", "qwen3-8b-base.json"))
    a = Args(max_new_tokens=512, gen_max_tokens=1 << 16)
    kv = {v: memory.estimate(cfg, a, 1, False, "none", gpu=True, transformers_version=v)[0]["generate"][
        "KV cache of one generate call"] for v in ("5.19.0", "5.24.0")}
    assert kv["5.19.0"] == kv["5.24.0"] * 8 // 6  # fp32 K and V against fp32 K and bf16 V


def test_kv_cache_is_booked_as_the_installed_transformers_makes_it_vllm_venv_too(tiny):
    """tools/memory.py's KV cache of one HF generate call under bf16 autocast, byte for byte, with whichever
    transformers is installed: in the main suite (5.24: V bf16) and in the vLLM venv that .ci/vllm.sh runs this in
    (vllm 0.32's transformers < 5.20: V fp32)."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import memory
    from transformers import GenerationConfig

    cfg = json.load(open(os.path.join(tiny, "config.json")))
    model = checkpoints.load_model(tiny, torch.device("cpu"))[0]
    P, new, rows = 9, 15, 3
    ids = torch.full((rows, P), 7)
    with torch.autocast("cpu", torch.bfloat16):
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), return_dict_in_generate=True,
                             generation_config=GenerationConfig(do_sample=False, max_new_tokens=new,
                                                                min_new_tokens=new, eos_token_id=0, pad_token_id=0))
    measured = sum(t.numel() * t.element_size() for layer in out.past_key_values.layers
                   for t in (layer.keys, layer.values))
    a = Args(precision="bf16", prompts_per_step=rows, group_size=1, max_prompt_length=P, max_new_tokens=new,
             gen_max_tokens=rows * (P + new))
    assert memory.estimate(cfg, a, 1, False, "none", 1, gpu=False)[0]["generate"][
        "KV cache of one generate call"] == measured


def test_host_memory_a_node_is_booked():
    """tools/memory.py's host memory: exact-size pinned features per rank (no power-of-two rounding), the parked
    trainer, a checkpoint's writes one tensor a rank at a time (no rank gathers the whole state), final/'s weights on
    rank 0 once, the start's weights read by rank 0 once; per node."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import memory
    cfg = memory.read_config(os.path.join(ROOT, "tools", "configs", "qwen3-14b-base.json"))
    args = Args(**RECIPE, offload_features=True)
    _, host = memory.estimate(cfg, args, 8, True, "offload", 20480)
    assert host == {"DelTA's features (exact-size pinned)": 256 * 20480 * 5120 * 2}
    node = memory.host_memory(cfg, args, 8, True, host)
    n = memory.parameters(cfg)["total"]
    assert node["final/: the full fp32 weights on rank 0, once at the end"] == 4 * n
    assert node["the start: the full fp32 weights rank 0 reads and broadcasts, once"] == 4 * n  # not 8 copies
    assert node["DelTA's features (exact-size pinned)"] == 8 * 256 * 20480 * 5120 * 2
    assert node["a checkpoint's writes: the largest tensor a rank holds (fp32), each rank"] < 4 * memory.GiB


def test_memory_py_reads_every_backbones_config(backbones):
    """tools/memory.py counts each family's parameters from its own config (on the meta device) as the model has
    them, and gives a figure for every phase; OLMo-3-7B's config is in tools/configs/."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import memory
    for family, path in backbones.items():
        cfg, model = memory.read_config(path), checkpoints.load_model(path, torch.device("cpu"))[0]
        assert memory.parameters(cfg)["total"] == sum(p.numel() for p in model.parameters()), family
        phases, _ = memory.estimate(cfg, Args(), 2, True, "packed", 32)
        assert all(v > 0 for v in memory.peaks(phases).values()), family
    olmo = memory.read_config(os.path.join(ROOT, "tools", "configs", "olmo-3-7b-base.json"))
    assert 7.2e9 < memory.parameters(olmo)["total"] < 7.4e9


def test_gpu_check_runs_on_cpu_with_the_tiny_slice(tmp_path, monkeypatch):
    """tools/gpu_check.py's table, as the lent GPU would print it, from the tiny slice on the CPU through the device
    seam's test mode: preflight, the one-rank group with its collectives connected, the trainer under FSDP2 at each
    micro-batch shape (every phase timed, ms per token), the host-feature fallback forced with the same
    coefficients, each row in --out as it completes; a failed section or the time budget costs only the rows not yet
    made. memory.py puts the GPU slice at the recipe's micro-batches well inside the H200's 139 GiB."""
    import gpu_check
    import memory

    before = dict(os.environ)
    out = tmp_path / "check.md"
    rows = {(r[0], r[1]): r[2] for r in gpu_check.main(["--tiny", "--out", str(out)])}
    assert not any(k[1] == "failed" for k in rows), rows
    assert rows[("preflight", "pinned host block of 1 MiB: register / GPU to host")]
    for rows_, tokens in gpu_check.CASES["tiny"]:
        name = f"{rows_} x {tokens:,}"
        for ph in ("score", "coefficients", "update"):
            assert float(rows[(name, f"{ph}: peak allocated / seconds")].split(" / ")[1]) > 0
        ms = rows[(name, "ms per token: forward (scoring) / forward + backward (update)")]
        assert all(float(x) > 0 for x in ms.split(" / "))
    assert rows[("fallback", "the coefficients from host memory equal the device's")] == "True"
    assert dict(os.environ) == before  # the test mode and the process group's variables do not outlive the check
    assert out.read_text().count("\n") == len(rows) + 2  # the header and every row, written
    monkeypatch.setattr(gpu_check, "fallback", lambda *a: (_ for _ in ()).throw(RuntimeError("boom")))
    got = {(r[0], r[1]): r[2:] for r in gpu_check.main(["--tiny", "--out", str(tmp_path / "b.md")])}
    assert got[("fallback", "failed")] == ("RuntimeError", "boom")
    assert ("4 x 32", "update: peak allocated / seconds") in got
    text = {r[1]: r[2] for r in gpu_check.main(["--tiny", "--out", str(tmp_path / "c.md"), "--budget_s", "2"])}
    assert text["stopped"] == "over the time budget of 2 s" and "stopped" in (tmp_path / "c.md").read_text()
    cfg = dict(json.load(open(os.path.join(ROOT, "tools", "configs", "qwen3-8b-base.json"))), **gpu_check.SLICE["gpu"])
    for rows_, tokens in gpu_check.CASES["gpu"]:
        args = Args(fsdp=True, gradient_checkpointing=True, prompts_per_step=1, mini_batch_prompts=1,
                    group_size=2 * rows_, max_prompt_length=2048, max_new_tokens=tokens - 2048, head_chunk_tokens=2048,
                    max_tokens_per_micro_batch=rows_ * tokens)
        shapes = [[(rows_ * tokens, rows_ * tokens ** 2, rows_ * (tokens - 2048))] * 2]
        est = memory.estimate(cfg, args, 1, True, "packed", tokens - 2048, micro_batches=shapes)[0]
        assert max(memory.peaks(est).values()) < 60 * memory.GiB  # about 50: fits with room on 139 GiB


def test_step_time_model(tmp_path):
    """tools/steptime.py: a forward's FLOPs are twice the matmul weights a token with no context; generation is
    bandwidth-bound (twice the bandwidth, half the decode time, the tail included); score and update scale with 1 /
    MFU; a device check's table calibrates MFU back to the figure its ms per token were made from."""
    import gpu_check
    import memory
    import steptime
    cfg = memory.read_config(os.path.join(ROOT, "tools", "configs", "qwen3-8b-base.json"))
    n = memory.parameters(cfg)
    assert steptime.forward_flops(cfg, 3, 0) == 3 * 2 * n["linear"]
    args = Args(**RECIPE)
    h100 = steptime.GPUS["h100"]
    base = steptime.step_minutes(cfg, args, 8, h100, 256, 10240)
    fast = steptime.step_minutes(cfg, args, 8, dict(h100, hbm=2 * h100["hbm"]), 256, 10240)
    assert fast["generate"] == pytest.approx(base["generate"] / 2) and fast["score"] == base["score"]
    assert steptime.step_minutes(cfg, args, 8, h100, 256, 10240, mfu=(0.2, 0.8))["score"] == pytest.approx(
        2 * base["score"])
    assert base["generate"] > base["update"] > base["score"]  # decode dominates at a mean response of 10,240
    slow = steptime.step_minutes(cfg, args, 8, h100, 256, 10240, attention_mfu=(0.1, 0.1), preemption=0.2)
    assert slow["generate"] == pytest.approx(1.2 * base["generate"]) and slow["score"] > base["score"]
    assume = {k: v for k, (v, _) in steptime.ASSUMPTIONS.items()}
    low, high = steptime.step_range(cfg, args, 8, h100, 256, 10240, assume)
    assert {k: low[k] for k in base} == pytest.approx(base)  # the low end: the optimistic model, overheads added
    assert all(high[k] >= low[k] for k in low) and sum(high.values()) > sum(low.values())
    assert low["checkpoint"] == pytest.approx(12 * n["total"] / 2e9 / args.save_every / 60)
    slice_cfg = dict(cfg, **gpu_check.SLICE["gpu"])
    lines = []
    for rows, tokens in gpu_check.CASES["gpu"]:  # ms per token as a GPU at MFU 0.5 / 0.25 would measure them
        per = steptime.forward_flops(slice_cfg, 1, tokens / 2)
        fwd, bwd = per / (0.5 * h100["flops"]) * 1e3, 4 * per / (0.25 * h100["flops"]) * 1e3
        lines.append(f"| {rows} x {tokens:,} | ms per token: forward (scoring) / forward + backward (update) | "
                     f"{fwd:.6f} / {bwd:.6f} | |")
    (tmp_path / "check.md").write_text("\n".join(lines) + "\n")
    mfu = steptime.calibrated_mfu(str(tmp_path / "check.md"), steptime.GPUS["h200"])
    assert mfu == pytest.approx((0.5, 0.25), rel=1e-4)


# ------------------------------------------------------------------ where lam goes (tools/rollouts.py, tools/oracle.py)
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
    _, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    text = "3+5=8 qzt mow, 8+9=18 abc def. \\boxed{18}"
    batch = pack(tok, ["Q: 3+5+9=?"], [text], "cpu")
    got = oracle.deciding_tokens(tok, batch)[0]
    cats = rollouts.token_categories(text, "3+5+9=?") + ["eos"]
    assert got.tolist() == [c in ("result", "first_wrong", "answer") for c in cats]


def dumped_rollout(tiny, tmp_path, algo="delta"):
    run, batch, adv, packed, plans = fixed_rollout(tiny, algo=algo, output_dir=str(tmp_path), run_name="t")
    lam = lam_of(run, batch, adv, packed) if algo == "delta" else None
    run.args.feature_chunk_tokens = 7  # the norms a chunk at a time
    engines.dump_rollout(run, dict(batch=batch, adv=adv, features=packed, rows=run.rows), lam, 3)
    return run, batch, adv, packed, lam, torch.load(tmp_path / "rollout-3.pt", weights_only=False)


def test_category_stats_against_a_token_loop(tiny, tmp_path):
    run, batch, adv, packed, lam, dump = dumped_rollout(tiny, tmp_path)
    got = rollouts.category_stats(run.tok, dump)
    v = torch.zeros(batch["response_mask"].shape + (packed[0].shape[1],))
    v.view(-1, v.shape[-1])[packed[2]] = packed[0]
    want = {}
    for i in range(len(adv)):
        if adv[i] != 0:
            text = sampling.decode_responses(run.tok,
                                          {k: x[i:i + 1] if torch.is_tensor(x) else x for k, x in batch.items()})[0]
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
    """The lambda page: the sides named by the advantage's sign, every response marked right or wrong with its reward
    (a wrong answer on the positive side shows as one), no response text twice, the question itself, a legend, and
    every token of the responses shown with its weight."""
    run, _, _, _, _, dump = dumped_rollout(tiny, tmp_path)
    b, adv, lam = dump["batch"], dump["adv"], dump["lam"]
    i = int((adv != 0).nonzero()[0])
    j = i ^ 1  # a sibling in the same group of 4 samples the same text: same reward, same advantage
    for x in (b["input_ids"], b["response_mask"], b["attention_mask"], adv, lam):
        x[j] = x[i]
    dump["correct"] = (adv > 0).float()
    dump["correct"][int((adv > 0).nonzero()[0])] = 0.0  # a wrong answer with A > 0 (a sibling's overlong penalty)
    dump["reward"] = dump["correct"] - 0.25
    page = rollouts.lambda_page(run.tok, dump, per_side=20)
    texts, first = sampling.decode_responses(run.tok, b), {}
    for k in (adv != 0).nonzero().flatten().tolist():
        first.setdefault((k // 4, texts[k]), k)
    assert page.count("class='r'") == len(first) < int((adv != 0).sum())  # no response text twice
    assert page.count("lam=") == sum(int(b["response_mask"][k].sum()) for k in first.values())
    assert page.count("&#10007; wrong") == sum(float(dump["correct"][k]) == 0 for k in first.values())
    assert "A &gt; 0: the update raises" in page and "A &lt; 0: the update lowers" in page
    assert "correct side" not in page
    assert f"Q: {run.rows[0]['question']}" in page and "above 1" in page and "reward -0.250" in page
    assert f"lam={float(lam[i, 0]):.4f}" in page and page.startswith("<!doctype html>")
    del dump["correct"], dump["reward"]
    assert "verdict not recorded" in rollouts.lambda_page(run.tok, dump)  # a dump from before the verdicts


def test_filler_task_dumps_rollouts_that_bench_reads(tmp_path):
    out = str(tmp_path / "ms")
    p = run_delta("--task", "filler", "--output_dir", out, "--max_steps", "1", "--dump_rollouts_every", "1",
                  "--sft_max_steps", "40", *FAST[:8], "--max_new_tokens", "120", "--eval_size", "16",
                  "--progress", "false")
    assert p.returncode == 0, p.stderr[-3000:]
    page = tmp_path / "page.html"
    rollouts.main([out, "--html", str(page), "--json", str(tmp_path / "stats.jsonl")])
    stats = [json.loads(line) for line in open(tmp_path / "stats.jsonl")]
    assert stats[0]["step"] == 1 and any(k.startswith("share/filler/") for k in stats[0])
    assert page.read_text().count("lam=") > 10
    train, held_out = tasks.TASKS["filler"]["build"](0, 16)
    assert len(train) + len(held_out) == 9 ** 3 + 9 ** 4 + 9 ** 5
    assert all(rollouts.token_categories(r["solution"], r["question"]).count("first_wrong") == 0 for r in train[:200])
    lengths = [len(r["solution"]) for r in train[:2000]]
    assert min(lengths) >= 35 and sum(lengths) / len(lengths) > 70  # long-ish responses, many shared filler tokens


# ------------------------------------------------------------------------------------- tools/direction.py
def crc_verdicts(run, batch, rows):
    """delta.verify's stand-in: right when the response's checksum is even (no grader: mixed groups on a raw model)."""
    right = torch.tensor([float(zlib.crc32(t.encode()) % 2 == 0) for t in sampling.decode_responses(run.tok, batch)])
    run.reward_stats.update(timeouts=0, errors=0)
    return right, right.clone()


def direction_roll(tiny):
    """A scored rollout of known responses as direction.py's roll: (run, roll)."""
    run, batch, adv, _, _ = fixed_rollout(tiny, algo="dapo", overlong_buffer=0)  # no length penalty: adv as given
    return run, dict(batch=batch, adv=adv, correct=(adv > 0).float(), stats={})  # the same advantages as the verdicts


def test_direction_dots_and_norms_are_torchs_on_an_autograd_gradient(tiny):
    """direction.py's running dot products and norms, read parameter by parameter off .grad, against torch's flat
    computation on DAPO's gradient taken by autograd directly (policy_loss over the whole batch, old = logp
    detached): the bench's surrogate_grad makes that gradient, and read_dots reads it, with and without AdamW's
    preconditioner, and leaves no .grad behind."""
    run, roll = direction_roll(tiny)
    batch, adv, mask = roll["batch"], roll["adv"], roll["batch"]["response_mask"]
    params = direction.trainable(run.model)
    logp = delta.response_logprobs(run.model, batch["input_ids"], batch["attention_mask"], mask.shape[1], 1.0)[0]
    loss, _ = delta.policy_loss(logp, logp.detach(), adv, mask & (adv != 0)[:, None], num_tokens=mask.sum())
    want = -torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])  # [n] the ascent direction
    gen = torch.Generator().manual_seed(0)
    vectors, d = torch.randn(3, want.numel(), generator=gen), torch.rand(want.numel(), generator=gen)
    vectors[0] = want
    direction.surrogate_grad(run, delta.ALGOS["dapo"], [roll], [None])
    got = direction.read_dots(params, vectors, d)
    assert all(p.grad is None for p in params)
    gd = want * d  # D g
    scale = float(want.norm() * vectors.norm(dim=1).max())
    assert got["g2"] == pytest.approx(float(want.dot(want)), rel=1e-4)
    assert got["pg2"] == pytest.approx(float(gd.dot(gd)), rel=1e-4)
    for key, x in (("dots", want), ("pdots", gd), ("ppdots", gd * d)):
        assert got[key] == pytest.approx((vectors @ x).tolist(), abs=1e-5 * scale), key


def test_direction_of_a_batch_against_itself_has_cosine_one(tiny):
    """E = the batch itself: cosine 1 in both views, gain and margin per unit step |g|, E's split-part signal share 1,
    a paired difference of 0 from an identical arm, the lam subsets' ordering +2 for a direction and its opposite;
    and the t test's tail against known values."""
    run, roll = direction_roll(tiny)
    params = direction.trainable(run.model)
    n = sum(p.numel() for p in params)
    v = torch.zeros(4, n)  # P = 2: both parts of E and both margins are the batch's own direction
    direction.surrogate_grad(run, delta.ALGOS["dapo"], [roll], [None])
    v[:] = -direction.flat_grad(params, v[0])  # the ascent direction, as read_dots reads .grad
    d = torch.rand(n, generator=torch.Generator().manual_seed(1)) + 0.5
    grams = [direction.gram(v[:2]).tolist(), direction.gram(v[2:]).tolist(), direction.gram(v[:2], d).tolist()]
    lines = [dict(kind="settings"), dict(kind="E", prompts=1, group=2, accuracy=0.5, mixed_groups=1.0,
                                         gram=grams[0], margin_gram=grams[1], pre_gram=grams[2])]
    for b in range(2):
        for algo in ("dapo", "delta"):
            direction.surrogate_grad(run, delta.ALGOS["dapo"], [roll], [None])
            lines.append(dict(kind="direction", batch=b, algo=algo, **direction.read_dots(params, v, d)))
        flip = {k: [-x for x in lines[-1][k]] for k in ("dots", "pdots", "ppdots")}  # the opposite direction
        lines += [dict(lines[-1], algo="lam_top"), dict(lines[-1], algo="lam_bottom", **flip),
                  dict(lines[-1], algo="lam_top_signal"), dict(lines[-1], algo="lam_bottom_signal", **flip)]
    # a third batch in which lam_bottom has no direction (its half all of advantage 0): left out of its figures and
    # its differences only, never out of the others'
    third = [dict(x, batch=2) for x in lines if x.get("batch") == 1]
    lines += [x if x["algo"] != "lam_bottom" else dict(x, g2=0.0, pg2=0.0, dots=[0.0] * 4, pdots=[0.0] * 4,
                                                       ppdots=[0.0] * 4) for x in third]
    f = direction.figures(lines)
    assert f["batches"] == [0, 1, 2] and f["without"] == {"lam_bottom": 1}
    assert f["table"][("delta", "raw")]["cosine - dapo"][4] == 3 and f["ordering"][4] == 2
    assert f["ordering"][:2] == pytest.approx((2.0, 0.0), abs=1e-5)  # lam_top - lam_bottom: 1 - (-1)
    assert f["ordering_signal"][:2] == pytest.approx((2.0, 0.0), abs=1e-5) and f["ordering_signal"][4] == 3
    assert f["table"][("lam_bottom", "raw")]["cosine"][0] == pytest.approx(-1.0, abs=1e-5)
    norm = float(v[0].double().norm())
    assert f["signal2"] == pytest.approx(f["gE2"], rel=1e-5)
    for view in ("raw", "AdamW"):
        row = f["table"][("delta", view)]
        assert row["cosine"][0] == pytest.approx(1.0, abs=1e-5), view
        assert row["cosine - dapo"][:2] == pytest.approx((0.0, 0.0), abs=1e-6)
    raw = f["table"][("dapo", "raw")]
    assert raw["gain"][0] == pytest.approx(norm, rel=1e-5) and raw["margin"][0] == pytest.approx(norm, rel=1e-5)
    assert direction.t_sf(0.0, 5) == pytest.approx(0.5)
    assert direction.t_sf(2.0, 10) == pytest.approx(0.036694, abs=1e-5)
    assert direction.t_sf(-1.812461, 10) == pytest.approx(0.95, abs=1e-5)


def test_direction_power_splits_delta_minus_dapo_into_its_batch_and_part_terms():
    """The report's sizing inputs: DelTA - DAPO's between-batch sd and E's parts' term, by a plain loop over the
    [batch, part] cosines, whose squares add up to the paired difference's crossed error (sd^2 / M + term^2)."""
    cos = {"dapo": [[0.30, 0.10], [0.50, 0.20], [0.20, 0.40]], "delta": [[0.32, 0.13], [0.49, 0.26], [0.25, 0.41]]}
    lines = [dict(kind="settings"), dict(kind="E", prompts=2, group=2, accuracy=0.5, mixed_groups=1.0,
                                         gram=[[2.0, 0.0], [0.0, 2.0]], margin_gram=[[1.0, 0.0], [0.0, 1.0]])]
    for algo, rows in cos.items():  # |g_E| = 1 and |g| = 1, so a part's dot is its cosine
        lines += [dict(kind="direction", batch=b, algo=algo, g2=1.0, dots=row + [0.0, 0.0]) for b, row in
                  enumerate(rows)]
    f = direction.figures(lines)
    diff = [[t - d for t, d in zip(*rows)] for rows in zip(cos["delta"], cos["dapo"])]  # [M, P]

    def sd(xs):
        m = sum(xs) / len(xs)
        return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    pair = f["power"]["pair"]
    assert pair["sd_batches"] == pytest.approx(sd([sum(r) / 2 for r in diff]))
    assert pair["se_E"] == pytest.approx(sd([sum(c) / 3 for c in zip(*diff)]) / math.sqrt(2))
    se = f["table"][("delta", "raw")]["cosine - dapo"][1]
    assert se ** 2 == pytest.approx(pair["sd_batches"] ** 2 / 3 + pair["se_E"] ** 2)
    buf = io.StringIO()
    direction.report(lines, out=buf)
    assert f"delta - dapo: a between-batch sd of {pair['sd_batches']:.4g}" in buf.getvalue()


def test_direction_results_file_resumes_and_reports(tiny, tmp_path, monkeypatch):
    """python tools/direction.py on the tiny model (verdicts from a checksum): a line per (batch, algorithm) as it
    goes; an existing file is not overwritten; --resume measures only the batches missing and refuses other
    settings, reading E's vectors back from the file beside it instead of drawing E again; --report prints the same
    tables from the file alone. E's first part is the leave-one-out REINFORCE gradient and its discriminator,
    checked against autograd on E's own rollouts."""
    monkeypatch.setattr(delta, "verify", crc_verdicts)
    drawn, seeds, draw = [], [], direction.rollout
    monkeypatch.setattr(direction, "rollout", lambda *a, **k: seeds.append(k.get("seed", a[-1])) or drawn.append(
        draw(*a, **k)) or drawn[-1])
    out = str(tmp_path / "r.jsonl")
    flags = ["--model", tiny, "--prompts_per_step", "4", "--group_size", "4", "--mini_batch_prompts", "4",
             "--max_new_tokens", "16", "--overlong_buffer", "4", "--eval_size", "16", "--big", "2", "--parts", "2",
             "--algos", "dapo,big,delta", "--precondition_steps", "1", "--out", out]
    f, verdict = direction.main(flags + ["--batches", "2"])
    first = open(out).read().splitlines()
    assert [json.loads(x)["kind"] for x in first] == ["settings", "E"] + ["direction"] * 6
    assert f["batches"] == [0, 1] and ("delta", "AdamW") in f["table"]
    assert verdict.startswith("DelTA's direction is closer to E's gradient than DAPO's: ")
    with pytest.raises(SystemExit):  # a results file is continued with --resume only
        direction.main(flags + ["--batches", "3"])
    with pytest.raises(SystemExit):  # and with its own settings
        direction.main(flags + ["--batches", "3", "--parts", "4", "--resume"])
    direction.main(flags + ["--batches", "3", "--resume"])
    assert seeds.count(seeds[0]) == 1 and os.path.exists(out + ".E.pt")  # E drawn once, by the first run
    after = open(out).read().splitlines()
    assert after[:len(first)] == first and [json.loads(x)["batch"] for x in after[len(first):]] == [2, 2, 2]
    again, _ = direction.main(["--report", out])
    assert again["batches"] == [0, 1, 2]
    other = str(tmp_path / "other.jsonl")  # another file measured by this one's E: not drawn again
    with pytest.raises(SystemExit):  # only with the same settings
        direction.main(flags[:-1] + [other, "--batches", "1", "--e_from", out, "--seed", "5"])
    with pytest.raises(SystemExit):  # the precision too
        direction.main(flags[:-1] + [other, "--batches", "1", "--e_from", out, "--precision", "bf16"])
    direction.main(flags[:-1] + [other, "--batches", "1", "--algos", "dapo", "--e_from", out])
    direction.main(flags[:-1] + [other, "--batches", "2", "--algos", "dapo", "--e_from", out, "--resume"])
    assert seeds.count(seeds[0]) == 1 and open(other).read().splitlines()[:2] == first[:2]
    assert [json.loads(x).get("batch") for x in open(other)][2:] == [0, 1]
    fresh = str(tmp_path / "fresh.jsonl")  # batches after another file's, against its E
    direction.main(flags[:-1] + [fresh, "--batches", "1", "--first_batch", "3", "--algos", "dapo", "--e_from", out])
    assert [json.loads(x).get("batch") for x in open(fresh)][2:] == [3] and seeds.count(seeds[0]) == 1
    # E, as drawn (the first rollout of the first run): part 0's g and m by autograd, against the file's grams
    E, rows = json.loads(first[1]), drawn[0]
    model, _ = checkpoints.load_model(tiny, torch.device("cpu"))
    params, batch, r = direction.trainable(model), rows["batch"], rows["correct"].view(-1, 4)
    mask = batch["response_mask"]
    seq = (delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], mask.shape[1], 1.0)[0]
           * mask).sum(1)  # [N] log pi(y)
    others = (r.sum(1, keepdim=True) - r) / 3  # the mean reward of each response's 3 siblings
    part0 = torch.arange(len(seq)) < len(seq) // 2
    right, wrong = rows["correct"].bool() & part0, ~rows["correct"].bool() & part0
    g0 = torch.autograd.grad(((r - others).view(-1) * part0 * seq).sum() / part0.sum(), params, retain_graph=True)
    m0 = torch.autograd.grad(seq[right].mean() - seq[wrong].mean(), params)
    assert E["gram"][0][0] == pytest.approx(sum(float(g.square().sum()) for g in g0), rel=1e-4)
    assert E["margin_gram"][0][0] == pytest.approx(sum(float(m.square().sum()) for m in m0), rel=1e-4)


# ------------------------------------------------------------------------------------- experiments/long_task.py
def test_long_task_rows_are_distinct_fixed_and_right(tmp_path, monkeypatch):
    """Issue 51's long-reasoning rows: the same rows at every call (the first 128 are delta.py's held-out set),
    distinct questions, each gold answer the arithmetic its question states (recomputed here from the question's
    numbers), and a file delta.py reads as a math dataset."""
    import re

    import long_task
    import rewards
    for name in long_task.CANDIDATES:
        rows = long_task.make_rows(name, 300)
        assert rows == long_task.make_rows(name, 300) and len({r["question"] for r in rows}) == len(rows)
    recompute = {"one_step_story": lambda n: n[0] + n[1], "small_story": lambda n: n[0] + n[1] - n[2],
                 "boxes": lambda n: n[0] * n[1], "four_sums": sum, "three_small_sums": sum,
                 "shopping": lambda n: n[0] * n[1] + n[2], "marbles": lambda n: n[0] + n[1] * n[2] - n[3],
                 "change": lambda n: n[2] - n[0] - n[1]}
    assert set(recompute) == set(long_task.CANDIDATES)
    for name, f in recompute.items():
        for r in long_task.make_rows(name, 50):
            numbers = [int(x) for x in re.findall(r"\d+", r["question"])]
            numbers = [numbers[1], numbers[0], numbers[2]] if name == "shopping" else numbers  # count, then price
            assert r["final_answer"] == str(f(numbers)), (name, r)
    out = str(tmp_path / "rows.jsonl")
    monkeypatch.setattr(sys, "argv", ["long_task.py", "--task", "one_step_story", "--rows", out, "--count", "200"])
    long_task.main()
    kind, rows = tasks.dataset_rows(tasks.read_table(out), Args.prompt_key, Args.answer_key, "math")
    assert kind == "math" and len(rows) == 200


def test_signal_subsets_rank_only_the_tokens_with_a_gradient(tiny):
    """Issue 51, item 3: lam_top_signal and lam_bottom_signal take the top (bottom) half by DelTA's lam of the tokens
    of non-zero-advantage responses only; where every response has a signal, they are delta.py's lam_top and
    lam_bottom."""
    run, batch, adv, packed, _ = fixed_rollout(tiny)
    assert (adv != 0).all()  # every group mixed: the two rankings see the same tokens
    mask, roll = batch["response_mask"], dict(batch=batch, adv=adv, features=packed, rows=run.rows)
    lam = delta.delta_weights(run, dict(roll, stats={}))
    planted = torch.where(torch.arange(len(adv)) < 4, 0.0, adv)  # group 0 carries no gradient
    signal = mask & (planted != 0)[:, None]
    for largest, name in ((True, "lam_top_signal"), (False, "lam_bottom_signal")):
        weights = direction.algorithm(name)["weights"]
        chosen = weights(run, dict(roll, adv=planted, stats={})).bool()
        assert not chosen[~signal].any() and signal.sum() / 2 <= chosen.sum() < signal.sum()
        inside, outside = lam[chosen], lam[signal & ~chosen]
        assert bool(inside.min() >= outside.max()) if largest else bool(inside.max() <= outside.min())
        assert torch.equal(weights(run, dict(roll, stats={})), delta.lam_subset_weights(largest)(run, dict(roll,
                                                                                                     stats={})))
    with pytest.raises(SystemExit):  # an unknown name is refused with the list
        direction.options(["--algos", "dapo,lam_top_sig"])


def test_direction_stops_after_the_batch_a_signal_came_in(tiny, tmp_path, monkeypatch):
    """SIGTERM during a batch (delta.catch_stop's handler, as `kill` would): that batch is finished and written, the
    run stops without tables, and --resume measures the rest."""
    import signal

    monkeypatch.setattr(delta, "verify", crc_verdicts)
    measured, handlers = direction.measure_batch, {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def signalled(*a, **k):
        signal.raise_signal(signal.SIGTERM)  # caught: the batch goes on
        return measured(*a, **k)
    monkeypatch.setattr(direction, "measure_batch", signalled)
    out = str(tmp_path / "r.jsonl")
    flags = ["--model", tiny, "--prompts_per_step", "4", "--group_size", "4", "--mini_batch_prompts", "4",
             "--max_new_tokens", "16", "--overlong_buffer", "4", "--eval_size", "16", "--parts", "2",
             "--e_prompts", "4", "--algos", "dapo,delta", "--batches", "3", "--out", out]
    try:
        assert direction.main(flags) is None
        assert [json.loads(x).get("batch") for x in open(out)] == [None, None, 0, 0]
        monkeypatch.setattr(direction, "measure_batch", measured)
        f, _ = direction.main(flags + ["--resume"])
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    assert f["batches"] == [0, 1, 2]


def test_direction_E_stopped_between_parts_goes_on_from_its_next_part(tiny, tmp_path, monkeypatch):
    """SIGTERM while E is made: the part under way is finished and kept with E's rollouts, the run ends (status 0),
    and --resume makes only the parts left, from the same rollouts: E equals one made without a stop."""
    import signal

    monkeypatch.setattr(delta, "verify", crc_verdicts)
    seeds, draw, made, flat = [], direction.rollout, [], direction.flat_grad
    monkeypatch.setattr(direction, "rollout", lambda *a, **k: seeds.append(k.get("seed", a[-1])) or draw(*a, **k))

    def counted(params, out):
        made.append(1)
        if len(made) == 1:
            signal.raise_signal(signal.SIGTERM)  # in part 1 of 3: caught, the part goes on
        return flat(params, out)
    monkeypatch.setattr(direction, "flat_grad", counted)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    flags = ["--model", tiny, "--prompts_per_step", "4", "--group_size", "4", "--mini_batch_prompts", "4",
             "--max_new_tokens", "16", "--overlong_buffer", "4", "--eval_size", "12", "--parts", "3",
             "--algos", "dapo", "--batches", "1"]
    stopped, whole = str(tmp_path / "stopped.jsonl"), str(tmp_path / "whole.jsonl")
    try:
        with pytest.raises(SystemExit) as e:
            direction.main(flags + ["--out", stopped])
        assert e.value.code == 0 and sorted(os.listdir(stopped + ".E.parts")) == [
            "part-0.pt", "rollout.pt", "settings.jsonl"]
        parts_before = len(made)
        kept = torch.load(os.path.join(stopped + ".E.parts", "part-0.pt"))
        assert all(kept[k].untyped_storage().nbytes() == kept[k].numel() * 4 for k in "gm")  # its rows, not all E
        direction.main(flags + ["--out", stopped, "--resume"])
        assert len(seeds) == 2 and not os.path.exists(stopped + ".E.parts")  # E's rollouts, then the batch's
        assert parts_before == 2 and len(made) - parts_before == 2 * 2  # part 1's g and m; then parts 2 and 3's
        direction.main(flags + ["--out", whole])
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    E1, E2 = (next(json.loads(x) for x in open(f) if '"kind": "E"' in x) for f in (stopped, whole))
    assert torch.allclose(torch.tensor(E1["gram"]), torch.tensor(E2["gram"]), rtol=1e-5, atol=1e-9)
    assert E1["sides"] == E2["sides"] and E1["margin_gram"] != [[0.0] * 3] * 3


def test_direction_probe_prints_the_cost_of_a_part_of_E(tiny, capsys):
    """tools/direction_probe.py: the responses drawn and the gradient of some, with their time and peak memory."""
    import direction_probe

    direction_probe.main(["--prompts", "3", "--group", "4", "--graded", "2", "--", "--model", tiny, "--eval_size", "8",
                          "--max_new_tokens", "8", "--overlong_buffer", "4", "--max_tokens_per_micro_batch", "64",
                          "--mini_batch_prompts", "1", "--group_size", "4"])
    out = capsys.readouterr().out
    assert re.search(r"drawn: 12 responses \(mean \d+ tokens\) in \d+ s, peak [\d.]+ GB", out), out
    assert re.search(r"gradient: 8 responses in \d+ s, peak [\d.]+ GB", out), out


def test_direction_categories_give_lam_by_token_category(tiny, tmp_path, monkeypatch):
    """--categories: DelTA's line carries lam by token category and side on its batch's own rollouts (claim (b));
    per side the categories' shares of the update add up to 1, DelTA's and DAPO's alike, and DAPO's line has none."""
    monkeypatch.setattr(delta, "verify", crc_verdicts)
    out = str(tmp_path / "c.jsonl")
    direction.main(["--model", tiny, "--prompts_per_step", "4", "--group_size", "4", "--mini_batch_prompts", "4",
                    "--max_new_tokens", "16", "--overlong_buffer", "4", "--eval_size", "16", "--parts", "2",
                    "--algos", "dapo,delta", "--batches", "1", "--categories", "--out", out])
    lines = {x["algo"]: x for x in map(json.loads, open(out)) if x.get("kind") == "direction"}
    got = lines["delta"]["categories"]
    assert "categories" not in lines["dapo"] and any(k.startswith("lam/") for k in got)
    for side in ("pos", "neg"):
        for share in ("share", "share_uniform"):
            parts = [v for k, v in got.items() if k.startswith(share + "/") and k.endswith("/" + side)]
            assert parts and sum(parts) == pytest.approx(1.0, abs=1e-6), (share, side)
    buf = io.StringIO()  # the report's claim (b) table: each figure of the line, as a mean over its one batch
    f, _ = direction.report(direction.read_lines(out), out=buf)
    assert {k: v[0] for k, v in f["categories"].items()} == pytest.approx(got)
    lam = got[next(k for k in got if k.startswith("lam/") and k.endswith("/pos"))]
    assert "claim (b), DelTA's lam by token category and side" in buf.getvalue() and f"| {lam:.3f} ± nan |" in \
        buf.getvalue()


# ------------------------------------------------------------------------------------- experiments/
def test_experiments_use_only_the_documented_names():
    """experiments/README.md's table: the names experiment code may use of the trainer's modules, and no others."""
    import ast
    import re
    readme = open(os.path.join(ROOT, "experiments", "README.md")).read()
    allowed = {m: set(re.findall(r"`(\w+)`", names)) for m, names in
               re.findall(r"^\| (\w+)\.py \| (.*) \|$", readme, re.M)}
    assert set(allowed) == {"delta", "sampling", "engines", "checkpoints", "rewards", "tasks"}, allowed
    used = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "experiments"))):
        if name.endswith(".py"):
            tree = ast.parse(open(os.path.join(ROOT, "experiments", name)).read())
            modules = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                       for a in node.names if a.name in allowed}
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                    used.setdefault(node.value.id, set()).add(node.attr)
                if isinstance(node, ast.ImportFrom) and node.module in allowed:
                    used.setdefault(node.module, set()).update(a.name for a in node.names)
    assert used, "no experiment imports the trainer's modules: the test reads nothing"
    assert {m: names - allowed[m] for m, names in used.items() if names - allowed[m]} == {}
