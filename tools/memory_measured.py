"""Live bytes of delta.py's real RL step, phase by phase, beside tools/memory.py's estimate of the same shape.

    python tools/memory_measured.py                  # every shape, DDP and FSDP2 on 2 gloo processes
    python tools/memory_measured.py --shapes small   # one shape

On the CPU with the GPU's dtypes (--precision bf16: bf16 autocast under DDP, bf16 gathered weights under
FSDP2, bf16 features), each process runs delta.rl_step on a randomly initialised Qwen3 (rewards are seeded coin
flips, so both sides of every group exist), and a dispatch mode (`LiveBytes`) counts every tensor storage
alive: the weights, the optimizer's state and whatever each op creates, until it is freed. The peak of each
phase of the second step (generate, score, coefficients, update; the first step creates AdamW's state) on
rank 0 is printed next to tools/memory.py's figure for the same arguments, shape and mean response length.
"""
import argparse
import contextlib
import gc
import os
import sys
import tempfile
import weakref

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed._tools.common_utils import get_untyped_storages
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import checkpoints  # noqa: E402
import delta  # noqa: E402
import tasks  # noqa: E402
import memory  # noqa: E402

MiB = 1 << 20


class LiveBytes(TorchDispatchMode):
    """Every storage that an op creates while the mode is on, and every storage of the tensors handed to
    `hold`, counted until it is freed (or resized: FSDP frees and refills its gathered weights with resize_);
    `now` the live bytes, `peaks` the largest `now` seen in each phase named by `phase(name)`."""

    def __init__(self):
        super().__init__()
        self.sizes, self.refs, self.now, self.peaks, self.current = {}, {}, 0, {}, None
        self._resize = torch.UntypedStorage.resize_

    def hold(self, *tensors):
        for t in tensors:
            for st in get_untyped_storages(t):
                self._add(st)

    def _add(self, st):
        key = st._cdata
        if key in self.refs and self.refs[key]() is not None:
            return
        self.sizes[key], self.refs[key] = st.nbytes(), weakref.ref(st, lambda _, k=key: self._free(k))
        self.now += self.sizes[key]
        self._peak()

    def _free(self, key):
        self.now -= self.sizes.pop(key, 0)
        self.refs.pop(key, None)

    def _peak(self):
        if self.current is not None:
            self.peaks[self.current] = max(self.peaks.get(self.current, 0), self.now)

    def phase(self, name):
        self.current = name
        self._peak()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                for st in get_untyped_storages(t):
                    self._add(st)
        return out

    def __enter__(self):
        mode = self

        def resize_(st, size):  # FSDP2 frees and refills its all-gather buffers in place
            before = st.nbytes()
            mode._resize(st, size)
            key = st._cdata
            if key in mode.sizes:
                mode.sizes[key] += st.nbytes() - before
                mode.now += st.nbytes() - before
                mode._peak()
            else:
                mode._add(st)
        torch.UntypedStorage.resize_ = resize_
        return super().__enter__()

    def __exit__(self, *exc):
        torch.UntypedStorage.resize_ = self._resize
        return super().__exit__(*exc)


SHAPES = {  # a randomly initialised Qwen3 (config) and delta.py's arguments; responses run to max_new_tokens
    "small": (dict(hidden_size=256, num_hidden_layers=4, intermediate_size=768, num_attention_heads=8,
                   num_key_value_heads=4, head_dim=32, vocab_size=8192),
              dict(prompts_per_step=8, group_size=4, mini_batch_prompts=4, max_new_tokens=64, head_chunk_tokens=256,
                   gen_max_tokens=4096, feature_chunk_tokens=512, max_tokens_per_micro_batch=4 * 83)),
    "checkpointed": (dict(hidden_size=384, num_hidden_layers=6, intermediate_size=1024, num_attention_heads=6,
                          num_key_value_heads=2, head_dim=64, vocab_size=4096),
                     dict(prompts_per_step=8, group_size=4, mini_batch_prompts=4, max_new_tokens=96,
                          head_chunk_tokens=512, gen_max_tokens=2048, feature_chunk_tokens=1024,
                          max_tokens_per_micro_batch=4 * 115, gradient_checkpointing=True)),
    "long": (dict(hidden_size=128, num_hidden_layers=3, intermediate_size=384, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=32, vocab_size=2048),
             dict(prompts_per_step=4, group_size=4, mini_batch_prompts=4, max_new_tokens=320, head_chunk_tokens=1024,
                  gen_max_tokens=8192, feature_chunk_tokens=2048, max_tokens_per_micro_batch=2 * 339)),
    # a real model's folder (compare(..., model=path): SmolLM2-135M-Instruct in test_real.py): its own responses,
    # which end at its stop token, at a rollout temperature where the 135 M model stays coherent
    "real": (None, dict(prompts_per_step=4, group_size=4, mini_batch_prompts=4, max_new_tokens=48,
                        head_chunk_tokens=256, gen_max_tokens=4096, feature_chunk_tokens=512, temperature=0.7,
                        max_tokens_per_micro_batch=4 * 100)),
}
PROMPT = "Q: {}+{}=?\nA: "  # every prompt the same length: 19 characters


def coin_flips(run, batch, rows):
    """In place of the verifier: a seeded coin per response (both sides of every group exist)."""
    correct = torch.randint(0, 2, (batch["input_ids"].shape[0],), generator=run.coins).float()
    return correct, correct.to(run.device)


def shape_of(ids, attention_mask, R):
    return ids.numel(), ids.shape[0] * ids.shape[1] ** 2, ids.shape[0] * R


@contextlib.contextmanager
def phases(run, enter):
    """Calls enter(phase) as each of rl_step's phases begins and enter(None) as it ends: generate (delta.sample),
    score, coefficients (the algorithm's token weights) and update; the sampled batch goes to run.sampled, the
    update's micro-batches to run.micro_batches."""
    names = {"sample": "generate", "score": "score", "update": "update"}
    originals, weights = {name: getattr(delta, name) for name in names}, run.algo["weights"]

    def traced(name, f):
        def call(*a, **k):
            enter(name)
            out = f(*a, **k)
            enter(None)
            if name == "generate":
                run.sampled = out
            if name == "update":  # the micro-batches it ran: (padded tokens b T, b T^2, response tokens b R)
                run.micro_batches = [[shape_of(*delta.micro_batch(a[1], rows)) for rows in groups] for groups in a[4]]
            return out
        return call
    try:
        for name, phase in names.items():
            setattr(delta, name, traced(phase, originals[name]))
        if weights:
            run.algo = dict(run.algo, weights=traced("coefficients", weights))
        yield
    finally:
        for name, f in originals.items():
            setattr(delta, name, f)
        run.algo = dict(run.algo, weights=weights)


def measure(path, args, rank, world):
    """Peak live bytes of each phase of the second rl_step on this rank, and the step's shape."""
    model, tok = checkpoints.load_model(path, torch.device("cpu"))
    if args.gradient_checkpointing:
        checkpoints.enable_checkpointing(model)
    tracker = LiveBytes()
    tracker.hold(*model.parameters(), *model.buffers())
    rows = [{"question": f"{a}+{b}=?", "answer": "0"} for a in range(10, 100) for b in range(10, 12)]
    verify, delta.verify = delta.verify, coin_flips
    try:
        with tracker:
            torch.manual_seed(args.seed + rank)  # as delta.prepare: the same responses every run
            run = delta.make_run(args, model, tok, path, rank, world, torch.device("cpu"), train_rows=rows)
            run.coins, run.reward_stats = torch.Generator().manual_seed(rank), dict(timeouts=0, errors=0)
            with phases(run, tracker.phase):
                for step in range(2):  # the first step creates AdamW's state
                    tracker.peaks = {}
                    m = delta.rl_step(run, step)
            shape = dict(prompt=run.sampled["prompt_len"], mean=m["response/length"], micro_batches=run.micro_batches)
            del run
    finally:
        delta.verify = verify
    return dict(tracker.peaks), shape


def worker(rank, world, tmp, path, args, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=world)
    try:
        peaks, shape = measure(path, args, rank, world)
        if rank == 0:
            torch.save((peaks, shape), out)
    finally:
        gc.collect()  # the run's model and optimizer freed first: gloo can abort at exit otherwise
        dist.destroy_process_group()


def compare(name, fsdp, world=2, tmp=None, model=None):
    """Measured and estimated peaks of each phase (bytes, rank 0) for one shape and engine; `model`: a model folder
    in place of the shape's randomly initialised Qwen3."""
    config, settings = SHAPES[name]
    tmp = tmp or tempfile.mkdtemp(prefix="memory_measured-")
    os.makedirs(tmp, exist_ok=True)  # the rendezvous file and the peaks are written here
    path = model or os.path.join(tmp, "model")
    if not model:
        tasks.build_tiny(path, max_position_embeddings=1024, **config)
    args = delta.Args(model=path, output_dir=tmp, precision="bf16", fsdp=fsdp, max_prompt_length=64, **settings)
    out = os.path.join(tmp, "peaks.pt")
    mp.spawn(worker, args=(world, tmp, path, args, out), nprocs=world, join=True)
    measured, shape = torch.load(out)
    phases, _ = memory.estimate(memory.read_config(path), args, world, fsdp, "packed", shape["mean"], gpu=False,
                                prompt_tokens=shape["prompt"], micro_batches=shape["micro_batches"])
    return measured, memory.peaks(phases), shape


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="small,checkpointed,long", help=f"comma-separated, of {', '.join(SHAPES)}")
    p.add_argument("--model", default="", help="the real shape's model folder (tools/smollm2.py)")
    a = p.parse_args(argv)
    names = a.shapes.split(",")
    print("| shape | engine | phase | measured MiB | estimate MiB | estimate / measured |\n|---|---|---|---|---|---|")
    worst = 0.0
    for name in names:
        for fsdp in (False, True):
            measured, estimated, shape = compare(name, fsdp, model=a.model if name == "real" else None)
            for ph in memory.PHASES:
                ratio = estimated[ph] / measured[ph]
                worst = max(worst, abs(ratio - 1))
                print(f"| {name} | {'FSDP2' if fsdp else 'DDP'} | {ph} | {measured[ph] / MiB:.1f} | "
                      f"{estimated[ph] / MiB:.1f} | {ratio:.3f} |", flush=True)
    print(f"\nlargest gap: {100 * worst:.1f} % (2 gloo processes, rank 0, --precision bf16, the second step)")


if __name__ == "__main__":
    main()
