"""One command for the GPU this project is lent (one H200; its image has python 3.12, torch 2.11, transformers 5.17
and accelerate, no vLLM, datasets or math-verify, and installs nothing): would the paper's recipe survive its first
step here, and what does a step cost? Each row is printed and appended to --out as it completes, within --budget_s.

    python tools/gpu_check.py --out $OUT/check.md    # GPU, about 2 minutes
    python tools/gpu_check.py --tiny                 # CPU (the suite runs this), through the device seam's test mode

Rows, in order:
    preflight  versions, the allocator settings in effect, bf16, NCCL; an exact-size pinned host block (where DelTA's
               features fall back) registered and filled from the GPU, timed; the CUDA context's memory
    group      a one-rank NCCL process group with the step's collectives connected (engines.connect_collectives), and
               the GPU memory that took
    slice      Qwen3-8B's width (hidden 4,096, 32 heads, 8 KV heads, intermediate 12,288, its untied 151,936-token
               head) with 4 of its 36 layers, under FSDP2 (fully_shard on the one-rank mesh, bf16 gathers, fp32
               reductions) with gradient checkpointing, AdamW's state made; as delta.make_run builds a run
    the recipe's micro-batches  1 x 22,528 tokens, 2 x 16,384 (the second row left-padded by 1,024) and 4 x 8,192:
               each a mini-batch of two such micro-batches (advantages +1 and -1), through the trainer's own scoring
               pass (old log-probs, entropy, DelTA's features), Sec. 3.2's coefficients and the update; each phase's
               peak allocated memory beside tools/memory.py's figure for this slice and these micro-batches, and
               milliseconds per token of the forward (scoring) and of the forward + backward (the update: with
               gradient checkpointing's recompute and AdamW's step). Figures are the second of two passes.
    fallback   the scoring pass again with the GPU reported full (the device seam): the features in pinned host
               memory, timed beside the first, and the coefficients from them compared with the first's

No downloads: the slice is built from tools/configs/qwen3-8b-base.json with random weights and random tokens (the
arithmetic and memory of a step do not depend on the values). The tiny mode runs the same code on the CPU with a
slice of hidden 64 (DELTA_PRETEND_GPU: the seam answers as a GPU would, gloo for NCCL); memory is measured on a GPU
only. The vLLM path needs two GPUs and vLLM: tools/vllm_smoke.py, for a lease that has them.
"""
import argparse
import contextlib
import json
import os
import platform
import signal
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import transformers

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import checkpoints  # noqa: E402
import delta  # noqa: E402
import sampling  # noqa: E402
import engines  # noqa: E402
import tasks  # noqa: E402
import memory  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SLICE = {"gpu": dict(num_hidden_layers=4),  # Qwen3-8B's own config, 4 layers
         "tiny": dict(num_hidden_layers=2, hidden_size=64, intermediate_size=192, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=16, vocab_size=1024, bos_token_id=0, eos_token_id=0)}
PROMPT = {"gpu": 2048, "tiny": 16}  # the recipe's --max_prompt_length
CASES = {"gpu": [(1, 22528), (2, 16384), (4, 8192)], "tiny": [(1, 96), (2, 64), (4, 32)]}  # rows x tokens
PINNED = {"gpu": 1 << 30, "tiny": 1 << 20}


class OverBudget(BaseException):
    """--budget_s ran out (a BaseException, as KeyboardInterrupt: no library's `except Exception` swallows it)."""


class Table:
    """Rows | section | quantity | value | note |, each printed and appended to `path` (flushed) when it is added."""

    def __init__(self, path):
        self.rows, self.path = [], path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.emit("| section | quantity | value | note |\n|---|---|---|---|", mode="w")

    def emit(self, line, mode="a"):
        print(line, flush=True)
        with open(self.path, mode) as f:
            f.write(line + "\n")

    def add(self, section, quantity, value, note=""):
        self.rows.append((section, quantity, value, note))
        self.emit(f"| {section} | {quantity} | {value} | {note} |")


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


def size(x):
    return f"{x / memory.GiB:.2f} GiB" if x >= memory.GiB / 8 else f"{x / (1 << 20):.1f} MiB"


def preflight(table, accel, kind):
    device = accel.device
    table.add("preflight", "python / torch / transformers",
              f"{platform.python_version()} / {torch.__version__} / {transformers.__version__}")
    name = torch.cuda.get_device_name(device) if accel.cuda else "cpu (DELTA_PRETEND_GPU: the seam's test mode)"
    table.add("preflight", "device, GiB", f"{name}, {engines.gpu_memory(accel)[1] / memory.GiB:.0f}")
    conf = os.environ.get("PYTORCH_ALLOC_CONF") or os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    table.add("preflight", "allocator settings in effect", conf or "-", "engines.expandable_segments sets them")
    table.add("preflight", "bf16 / NCCL", (f"{torch.cuda.is_bf16_supported()} / "
                                           f"{'.'.join(map(str, torch.cuda.nccl.version()))}") if accel.cuda
              else "autocast on the CPU / gloo")
    n = PINNED[kind]
    t = time.perf_counter()
    host = engines.pinned(accel, torch.empty(n, dtype=torch.uint8))  # as engines.feature_buffer makes its block
    registered = time.perf_counter() - t
    src = torch.ones(n, dtype=torch.uint8, device=device)
    accel.synchronize()
    t = time.perf_counter()
    host.copy_(src, non_blocking=True)
    accel.synchronize()
    copied = time.perf_counter() - t
    ok = bool(host.all()) and (host.is_pinned() or not accel.cuda)
    table.add("preflight", f"pinned host block of {n >> 20} MiB: register / GPU to host",
              f"{registered * 1e3:.1f} ms / {n / copied / 1e9:.1f} GB/s", f"exact size, page-locked, filled: {ok}")
    if accel.cuda:  # the CUDA context exists from the first operation on
        free, total = torch.cuda.mem_get_info(device)
        table.add("preflight", "GPU memory outside torch's allocator (the CUDA context)",
                  size(total - free - torch.cuda.memory_reserved(device)),
                  f"engines.gpu_margin books {size(engines.gpu_margin(1)['CUDA context and loaded kernels'])}")


def process_group(table, accel):
    """A one-rank process group (NCCL on a GPU, gloo in the test mode) with the step's collectives connected."""
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    before = engines.gpu_memory(accel)[0]
    dist.init_process_group(accel.backend)
    engines.connect_collectives(accel.device, 1)
    accel.synchronize()
    table.add("group", f"one-rank {accel.backend} group, collectives connected: GPU memory taken",
              size(before - engines.gpu_memory(accel)[0]) if accel.cuda else "-",
              "engines.gpu_margin books 1.5 on several GPUs (one rank needs no peer buffers)")


def build_slice(kind, device):
    """The slice's config, a run around it (FSDP2, checkpointing, AdamW's state made) and its parameter count."""
    with open(os.path.join(HERE, "configs", "qwen3-8b-base.json")) as f:
        cfg = dict(json.load(f), **SLICE[kind])
    config = transformers.AutoConfig.for_model(**{k: v for k, v in cfg.items() if k not in ("architectures",
                                                                                            "torch_dtype")})
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.eval()
    checkpoints.enable_checkpointing(model)
    P = PROMPT[kind]
    folder = tempfile.mkdtemp(prefix="gpu_check-")  # no generation config there: the sampler is never used
    args = delta.Args(algo="delta", fsdp=True, gradient_checkpointing=True, prompts_per_step=1, mini_batch_prompts=1,
                      group_size=2, max_prompt_length=P, max_new_tokens=CASES[kind][0][1] - P,
                      head_chunk_tokens=2048 if kind == "gpu" else 32, lr=1e-6)
    run = delta.make_run(args, model, tasks.tiny_tokenizer(), folder, device=device)
    engines.optimizer_state_now(run.optimizer)  # the steady state: AdamW's moments exist before the first step
    return cfg, run


def case_batch(run, rows, tokens, P, V):
    """A mini-batch of two micro-batches of `rows` rows of `tokens` tokens (every response full: no eos), one row's
    prompt shorter by P / 2 (left-padded in its micro-batch when rows > 1); advantages +1 for half the rows."""
    g = torch.Generator().manual_seed(rows)
    prompts = [torch.randint(5, V, (P - (P // 2 if i == 1 else 0),), generator=g).tolist() for i in range(2 * rows)]
    responses = [torch.randint(5, V, (tokens - P,), generator=g).tolist() for _ in range(2 * rows)]
    batch = sampling.rollout_batch(prompts, responses, [0], 0, run.device)
    run.args.group_size, run.args.max_tokens_per_micro_batch = 2 * rows, rows * tokens
    adv = torch.tensor([1.0] * rows + [-1.0] * rows, device=run.device)
    return batch, adv, delta.micro_batches(run, batch)


def step_phases(run, batch, adv, plans):
    """The scoring pass, the coefficients and the update: {phase: (seconds, peak allocated bytes)}, lam."""
    out, accel, lam = {}, run.accel, None
    for phase in ("score", "coefficients", "update"):
        engines.release(accel)
        if accel.cuda:
            torch.cuda.reset_peak_memory_stats(accel.device)
        t = delta.clock(run)
        if phase == "score":
            batch["old_logp"], _, features = delta.score(run, batch, adv, plans, True)
        elif phase == "coefficients":
            lam = delta.delta_weights(run, dict(batch=batch, adv=adv, features=features, stats={}))
            features = None  # freed before the update, as rl_step does
        else:
            delta.update(run, batch, adv, lam, plans)
        out[phase] = (delta.clock(run) - t, torch.cuda.max_memory_allocated(accel.device) if accel.cuda else None)
    return out, lam


def micro_batch_rows(table, cfg, run, kind):
    """Each of the recipe's micro-batches: peaks against tools/memory.py, ms per token of forward and backward."""
    P, V = PROMPT[kind], cfg["vocab_size"]
    for rows, tokens in CASES[kind]:
        batch, adv, plans = case_batch(run, rows, tokens, P, V)
        shapes = [[memory_shape(batch, mb) for mb in groups] for groups in plans]
        for _ in range(2):  # the second of two passes: kernels loaded, the allocator warm
            measured, _ = step_phases(run, batch, adv, plans)
        args = run.args
        est = memory.estimate(cfg, args, 1, True, "packed", tokens - P, gpu=True, micro_batches=shapes)[0]
        booked = {ph: x - sum(engines.gpu_margin(1).values()) for ph, x in memory.peaks(est).items()}
        name = f"{rows} x {tokens:,}"
        padded = sum(s[0] for groups in shapes for s in groups)
        for ph in ("score", "coefficients", "update"):
            seconds, peak = measured[ph]
            table.add(name, f"{ph}: peak allocated / seconds", f"{size(peak) if peak else '-'} / {seconds:.3f}",
                      f"tools/memory.py: {size(booked[ph])} (its margin items aside)")
        table.add(name, "ms per token: forward (scoring) / forward + backward (update)",
                  f"{measured['score'][0] / padded * 1e3:.4f} / {measured['update'][0] / padded * 1e3:.4f}",
                  f"{padded:,} padded tokens in {sum(map(len, plans))} micro-batches")


def memory_shape(batch, rows):
    """(b T, sum of T^2, b R) of a micro-batch as delta.micro_batch trims it (memory.estimate's micro_batches)."""
    ids, _, R = delta.micro_batch(batch, rows)
    return ids.numel(), ids.shape[0] * ids.shape[1] ** 2, ids.shape[0] * R  # as tools/memory_measured.py counts


def fallback(table, cfg, run, kind):
    """The features forced to host memory (the GPU reported full), timed beside the scoring pass on the GPU."""
    rows, tokens = CASES[kind][-1]
    batch, adv, plans = case_batch(run, rows, tokens, PROMPT[kind], cfg["vocab_size"])
    times, lams, memory_of = [], [], engines.gpu_memory
    try:
        for full in (False, True, True):  # the forced pass twice: the host block is made once, then reused
            engines.gpu_memory = (lambda accel: (0, 80 << 30)) if full else memory_of  # full: no free memory
            t = delta.clock(run)
            batch["old_logp"], _, features = delta.score(run, batch, adv, plans, True)
            times.append(delta.clock(run) - t)
            lams.append(delta.delta_weights(run, dict(batch=batch, adv=adv, features=features, stats={})))
    finally:  # the seam answers truly again, whatever stopped the section (its budget)
        engines.gpu_memory = memory_of
    host = features[0].device.type == "cpu" and getattr(run, "host_features", None) is not None
    table.add("fallback", "scoring: features on the device / in host memory, seconds",
              f"{times[0]:.3f} / {times[2]:.3f}", f"{rows} x {tokens:,}; the features in the host block: {host}")
    table.add("fallback", "the coefficients from host memory equal the device's",
              str(torch.allclose(lams[0], lams[2], atol=1e-6)), "")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="the tiny slice on the CPU, as a GPU would run it (a test)")
    p.add_argument("--out", default=os.path.join("runs", "gpu_check.md"), help="the rows, appended as they complete")
    p.add_argument("--budget_s", type=float, default=300, help="stop after this many seconds, keeping the rows")
    opts = p.parse_args(argv)
    kind, t0, environ = "tiny" if opts.tiny else "gpu", time.perf_counter(), dict(os.environ)
    if opts.tiny:
        os.environ[engines.PRETEND_GPU] = "80"
    device = torch.device("cuda", 0) if torch.cuda.is_available() and not opts.tiny else torch.device("cpu")
    accel = engines.Accelerator(device)
    if accel.gpu:
        engines.expandable_segments()  # as delta.setup_distributed does, before the first allocation
    if accel.cuda:
        torch.cuda.set_device(device)
    table, run = Table(opts.out), None
    try:
        with budget(opts.budget_s - (time.perf_counter() - t0)):
            for name, section in [("preflight", lambda: preflight(table, accel, kind)),
                                  ("group", lambda: process_group(table, accel))]:
                try:
                    section()
                except OverBudget:
                    raise
                except Exception as e:  # a failed section costs its own rows only
                    table.add(name, "failed", type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
            if dist.is_initialized():
                cfg, run = build_slice(kind, device)
                n = memory.parameters(cfg)["total"]
                table.add("slice", "parameters / GPU memory allocated",
                          f"{n / 1e6:,.1f} M / {size(torch.cuda.memory_allocated(device)) if accel.cuda else '-'}",
                          f"{cfg['num_hidden_layers']} layers of hidden {cfg['hidden_size']}, vocabulary "
                          f"{cfg['vocab_size']:,}; FSDP2, bf16 {run.sharding.bf16}, AdamW's state made")
                for name, section in [("micro-batches", lambda: micro_batch_rows(table, cfg, run, kind)),
                                      ("fallback", lambda: fallback(table, cfg, run, kind))]:
                    try:
                        section()
                    except OverBudget:
                        raise
                    except Exception as e:
                        table.add(name, "failed", type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
    except OverBudget as e:
        table.add("-", "stopped", str(e), "the rows above are complete")
    finally:
        run = None
        if dist.is_initialized():
            dist.destroy_process_group()
        os.environ.clear()  # the process group's and the test mode's variables gone: a caller's process as it was
        os.environ.update(environ)
    table.add("-", "wall time of this check, s", f"{time.perf_counter() - t0:.0f}", "")
    return table.rows


if __name__ == "__main__":
    main()
