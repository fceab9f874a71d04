"""One command for a lent GPU: seconds per RL step of DAPO and DelTA phase by phase, rollout speed, each phase's
peak memory against bench/memory.py, what a GPU holds beyond PyTorch's tensors (the CUDA context), and the same
DelTA step sampled by vLLM after a weight push, with its log-prob gap. Each row is printed and appended to --out
as it completes, so a run stopped early keeps what it measured.

    python bench/gpu_check.py                       # GPU: a randomly initialised Qwen3 of 0.37 B parameters
    python bench/gpu_check.py --out $OUT/check.md   # where the rows go (default runs/gpu_check.md)
    python bench/gpu_check.py --tiny                # CPU: the tiny default's dimensions (the suite runs this)

No downloads: the model is built from a config (hidden 1024, 24 layers, vocabulary 32,768 over the tiny
default's character tokenizer) with random weights, so rollouts run to --max_new_tokens and the verifier's
rewards are replaced by seeded coin flips (both sides of every group exist, as DelTA's coefficients need).

What it needs and how long it takes: bench/memory.py puts the GPU settings (32 prompts x 8 responses of 256
tokens, bf16, gradient checkpointing, micro-batches of 8,192 tokens) at a peak of 12.0 GiB (generation; score 7.7,
coefficients 6.5, update 10.2), printed first; any GPU of 24 GiB or more. Each algorithm runs 1 + 3 steps from the same weights and the same generators (CPU,
CUDA and Python: the first rollouts are the same draws), in its own model and optimizer loaded from disk, with
everything of the other freed first, so its peaks are measured from a clean baseline (allocated and reserved
above the memory held before its model was loaded). A step's time is mostly HF generation: 256 sequences of
256 tokens in one call, about 256 decode steps of 20-40 ms on one H200, so about 10 s a step and 2 minutes for
the 8 steps. vLLM then runs the DelTA step itself (delta.rl_step with --vllm: the trainer's own scoring pass in
the run's dtypes, no autograd outside the update, micro-batches as in training), so its `rollout/logp_gap` is the
run's own metric; beside it, the gap a failed push would leave (vLLM's dummy weights give near-uniform
log-probs, -log V). vLLM's start (profiling, CUDA graphs) takes 1-3 minutes. --budget_s (default 540) stops the
check at that many seconds, the rows so far kept, so one H200 finishes within 10 minutes.
"""
import argparse
import contextlib
import dataclasses
import gc
import math
import os
import signal
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import delta  # noqa: E402
import engines  # noqa: E402
import tasks  # noqa: E402
import memory  # noqa: E402
from memory_measured import coin_flips, phases  # noqa: E402

DIMS = {"gpu": dict(hidden_size=1024, num_hidden_layers=24, intermediate_size=3072, num_attention_heads=16,
                    num_key_value_heads=8, head_dim=64, vocab_size=32768),
        "tiny": dict(vocab_size=512)}  # the tiny default's shape, a vocabulary beyond its characters
SETTINGS = {"gpu": dict(prompts_per_step=32, group_size=8, mini_batch_prompts=16, max_new_tokens=256,
                        max_tokens_per_micro_batch=8192, gen_max_tokens=1 << 17, gradient_checkpointing=True),
            "tiny": dict(prompts_per_step=8, group_size=4, mini_batch_prompts=4, max_new_tokens=32,
                         max_tokens_per_micro_batch=4096, gen_max_tokens=65536)}
TIMED = 3  # steps timed after one untimed step
PHASE_TIMES = ("generate", "score", "coefficients", "train")


class OverBudget(BaseException):
    """--budget_s ran out (a BaseException, as KeyboardInterrupt: no library's `except Exception` swallows it)."""


class Table:
    """Rows | run | quantity | value | note |, each printed and appended to `path` (flushed) when it is added."""

    def __init__(self, path):
        self.rows, self.path = [], path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.emit("| run | quantity | value | note |\n|---|---|---|---|", mode="w")

    def emit(self, line, mode="a"):
        print(line, flush=True)
        with open(self.path, mode) as f:
            f.write(line + "\n")

    def add(self, run, quantity, value, note=""):
        self.rows.append((run, quantity, value, note))
        self.emit(f"| {run} | {quantity} | {value} | {note} |")


def allocated(device, reserved=False):
    if device.type != "cuda":
        return 0
    return torch.cuda.memory_reserved(device) if reserved else torch.cuda.memory_allocated(device)


def outside_torch(device):
    """GiB the GPU has in use beyond PyTorch's own allocator: the CUDA context, NCCL, vLLM's pool (0 off a GPU)."""
    if device.type != "cuda":
        return 0.0
    free, total = torch.cuda.mem_get_info(device)
    return (total - free - torch.cuda.memory_reserved(device)) / memory.GiB


def run_algorithm(algo, path, args, device, start, rows):
    """1 + TIMED rl_steps of one algorithm from a fresh copy of the model and the generators' state `start`:
    per-phase peak allocated and reserved bytes above the baseline, the metrics of each step, the run's last
    sampled batch (with its old log-probs) and vLLM's concurrency when it samples."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    base, base_reserved = allocated(device), allocated(device, True)
    model, tok = delta.load_model(path, device)
    if args.gradient_checkpointing:
        delta.enable_checkpointing(model)
    run = delta.make_run(dataclasses.replace(args, algo=algo), model, tok, path, device=device, train_rows=rows)
    run.coins, run.reward_stats = torch.Generator().manual_seed(0), dict(timeouts=0, errors=0)
    peaks, steps = {}, []

    def enter(phase):  # each phase's peak from its own start
        if run.phase is not None and device.type == "cuda":
            seen = (torch.cuda.max_memory_allocated(device) - base,
                    torch.cuda.max_memory_reserved(device) - base_reserved)
            peaks[run.phase] = tuple(map(max, peaks.get(run.phase, (0, 0)), seen))
        if phase is not None and device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        run.phase = phase
    run.phase = None
    delta.rng_state(start)  # the same draws for both algorithms: CPU, CUDA and Python generators
    try:
        with phases(run, enter):
            for step in range(1 + TIMED):
                if step == 1:
                    peaks.clear()  # the steady state: the first step's allocator warm-up aside
                steps.append(delta.rl_step(run, step))
        batch, concurrency = run.sampled, getattr(run.sampler, "concurrency", None)
    finally:
        if hasattr(run.sampler, "close"):
            run.sampler.close()
        run = model = None  # the model and its optimizer go before the next run loads its own
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return peaks, steps, batch, concurrency


def step_rows(table, name, args, cfg, gpu, peaks, steps):
    """A run's rows: the first rollout's length, seconds per phase and per step, tokens/s, each phase's peaks."""
    mean = {k: sum(m[k] for m in steps[1:]) / TIMED for k in steps[1]}
    table.add(name, "first rollout's mean response length", f"{steps[0]['response/length']:.1f}",
              "equal for dapo and delta: paired generators")
    for k in PHASE_TIMES:
        table.add(name, f"seconds per step: {k}", f"{mean.get(f'time/{k}', 0.0):.3f}", f"mean of {TIMED} steps")
    total = sum(mean.get(f"time/{k}", 0.0) for k in PHASE_TIMES)
    table.add(name, "seconds per step", f"{total:.3f}", "")
    tokens = mean["response/length"] * args.prompts_per_step * args.group_size
    table.add(name, "rollout tokens/s", f"{tokens / mean['time/generate']:,.0f}", "generate phase")
    for ph in memory.PHASES:
        got = peaks.get(ph)
        est = memory.peaks(memory.estimate(cfg, args, 1, False, "packed", mean["response/length"], gpu=gpu)[0])[ph]
        table.add(name, f"peak GiB, {ph}: allocated / reserved",
                  f"{got[0] / memory.GiB:.2f} / {got[1] / memory.GiB:.2f}" if got else "-",
                  f"bench/memory.py: {est / memory.GiB:.2f}" if gpu else "measured on a GPU only")
    return mean


@contextlib.contextmanager
def budget(seconds):
    """Raises OverBudget in the main thread once `seconds` have passed (SIGALRM; no limit where it is missing)."""
    if not hasattr(signal, "SIGALRM") or seconds <= 0:
        yield
        return

    def stop(*_):
        raise OverBudget(f"over the time budget of {seconds:.0f} s")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def vllm_section(table, path, args, cfg, device, start, rows):
    """The DelTA step with vLLM sampling after a weight push (its own run from the weights on disk): rl_step's
    rollout/logp_gap, beside the gap a failed push would leave (vLLM's dummy weights: log-probs -log V)."""
    try:
        import vllm  # noqa: F401
    except ImportError:
        table.add("vllm", "vLLM", "not installed", "requirements-vllm.txt")
        return
    a = dataclasses.replace(args, vllm=True)
    peaks, steps, batch, concurrency = run_algorithm("delta", path, a, device, start, rows)
    mean = step_rows(table, "delta, vLLM", a, cfg, device.type == "cuda", peaks, steps)
    mask = batch["response_mask"]
    uniform = ((batch["old_logp"] + math.log(cfg["vocab_size"])).abs() * mask).sum() / mask.sum()
    table.add("delta, vLLM", "rollout/logp_gap (the run's metric)", f"{mean['rollout/logp_gap']:.2e}",
              "mean |log pi_vLLM - log pi_old| after the push, trainer in the run's dtypes")
    table.add("delta, vLLM", "the gap without the push (vLLM's dummy weights)", f"{float(uniform):.2e}",
              "mean |log pi_old + log V|: the push works if the gap above is far below this")
    table.add("delta, vLLM", "KV cache, sequences of prompt + max_new_tokens at once",
              "-" if concurrency is None else f"{concurrency:.1f}", "vLLM's own figure")
    table.add("delta, vLLM", "GPU memory beyond PyTorch's allocator, GiB", f"{outside_torch(device):.2f}",
              "after vLLM: the CUDA context with its kernels, vLLM's pool asleep")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="the tiny dimensions and settings (CPU, a test)")
    p.add_argument("--out", default=os.path.join("runs", "gpu_check.md"), help="the rows, appended as they complete")
    p.add_argument("--budget_s", type=float, default=540, help="stop after this many seconds, keeping the rows")
    opts = p.parse_args(argv)
    kind = "tiny" if opts.tiny else "gpu"
    t0 = time.perf_counter()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.type == "cuda"
    if gpu:
        engines.expandable_segments()  # as delta.py runs
    table = Table(opts.out)
    path = tempfile.mkdtemp(prefix="gpu_check-")
    tasks.build_tiny(path, max_position_embeddings=1024, **DIMS[kind])
    cfg = memory.read_config(path)
    args = delta.Args(model=path, output_dir=path, max_prompt_length=32, lr=1e-6, **SETTINGS[kind])
    delta.resolve_defaults(args)
    expected = memory.peaks(memory.estimate(cfg, args, 1, False, "packed", args.max_new_tokens, gpu=gpu)[0])
    n_params = memory.parameters(cfg)["total"]
    table.add("-", "device", torch.cuda.get_device_name(0) if gpu else "cpu",
              f"{n_params / 1e6:,.0f} M parameters; {args.prompts_per_step} x {args.group_size} responses of "
              f"{args.max_new_tokens} tokens; bf16 {delta.bf16_compute(args, device)}")
    table.add("-", "bench/memory.py's peak for these settings, GiB", f"{max(expected.values()) / memory.GiB:.1f}",
              "DDP on one GPU, features packed, every response at the limit")
    if gpu:
        torch.ones(1, device=device)  # the CUDA context exists from here
        booked = engines.gpu_margin(1)["CUDA context and loaded kernels"] / memory.GiB
        table.add("-", "CUDA context and other memory outside PyTorch's allocator, GiB", f"{outside_torch(device):.2f}",
                  f"at start; engines.gpu_margin books {booked:.1f}")
    torch.manual_seed(0)
    start = delta.rng_state()
    train_rows = tasks.addition_task(0, 0)[0]
    verify, delta.verify = delta.verify, coin_flips
    sections = [(algo, lambda algo=algo: step_rows(table, algo, args, cfg, gpu, *run_algorithm(
        algo, path, args, device, start, train_rows)[:2])) for algo in ("dapo", "delta")]
    sections.append(("vllm", lambda: vllm_section(table, path, args, cfg, device, start, train_rows)))
    results = {}
    try:
        with budget(opts.budget_s - (time.perf_counter() - t0)):
            for name, section in sections:
                try:
                    results[name] = section()
                except OverBudget:
                    raise
                except Exception as e:  # a failed section costs its own rows only
                    table.add(name, "failed", type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
    except OverBudget as e:
        table.add("-", "stopped", str(e), "the rows above are complete")
    finally:
        delta.verify = verify
    if results.get("dapo") and results.get("delta"):
        total = {a: sum(results[a].get(f"time/{k}", 0.0) for k in PHASE_TIMES) for a in ("dapo", "delta")}
        table.add("delta / dapo", "seconds per step", f"{total['delta'] / total['dapo']:.3f}", f"mean of {TIMED} steps")
    table.add("-", "wall time of this check, s", f"{time.perf_counter() - t0:.0f}", "")
    return table.rows


if __name__ == "__main__":
    main()
