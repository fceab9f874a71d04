"""Benchmark: what else could bring sampling.decode closer to its bound (issue 50, item 2), each option measured.

    python bench/decode_options.py --real /tmp/delta-smollm2 --rows runs/smollm2-rows.jsonl

The recipe's generation (real_learning.py: 8 prompts x 8 samples, 32 new tokens at temperature 0.6, the held-out
prompts with the last_number instruction), every row decoding all 32 tokens (no eos), in one process on 2 threads:
    eager     sampling.decode as it is: HF's forward a token on a DynamicCache, which grows by torch.cat
    in-place  the same with each layer's keys and values written into a buffer made once, the forward reading a
              view of its filled part (no cat)
    compiled  model.forward through torch.compile(dynamic=True): its first decode (compilation included) and the
              decodes after
Eager and in-place alternate (--repeat each, the median); the compiled arm runs last, as compilation cannot be
undone in the process. Then a profile of one eager decode: the share of its time in matmuls, in the cache's cat
and in attention. Greedy outputs of the three are compared token for token (the same arithmetic, reordered).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import checkpoints  # noqa: E402
import delta  # noqa: E402
import sampling  # noqa: E402
import rewards  # noqa: E402


def in_place(layer_class):
    """A DynamicLayer.update that writes a one-token step into a buffer of 64 more positions (made when the cache
    outgrows it) and returns views of the filled part; anything else as HF does. Returns (patch, undo)."""
    original = layer_class.update

    def update(self, keys, values, *args, **kwargs):
        if not self.is_initialized or self.keys.numel() == 0 or keys.shape[-2] != 1:
            return original(self, keys, values, *args, **kwargs)
        L, buffers = self.keys.shape[-2], getattr(self, "buffers", None)
        if buffers is None or buffers[0].shape[-2] <= L or buffers[0].data_ptr() != self.keys.data_ptr():
            buffers = [x.new_empty(*x.shape[:-2], L + 64, x.shape[-1]) for x in (self.keys, self.values)]
            buffers[0][..., :L, :], buffers[1][..., :L, :] = self.keys, self.values
            self.buffers = buffers
        buffers[0][..., L:L + 1, :], buffers[1][..., L:L + 1, :] = keys, values
        self.keys, self.values = buffers[0][..., :L + 1, :], buffers[1][..., :L + 1, :]
        return self.keys, self.values
    return (lambda: setattr(layer_class, "update", update)), (lambda: setattr(layer_class, "update", original))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--real", required=True, help="a model folder (SmolLM2: python tools/smollm2.py --out DIR)")
    p.add_argument("--rows", default=os.path.join(ROOT, "runs", "smollm2-rows.jsonl"),
                   help="the task's rows (python tools/real_learning.py --rows FILE)")
    p.add_argument("--repeat", type=int, default=4, help="timed decodes of each arm")
    p.add_argument("--temperature", type=float, default=0.6)
    opts = p.parse_args(argv)
    from transformers.cache_utils import DynamicLayer
    torch.manual_seed(0)
    model, tok = checkpoints.load_model(opts.real, torch.device("cpu"))
    model.eval()
    with open(opts.rows) as f:
        rows = [json.loads(line) for line in f][:8]
    ask = rewards.ANSWER_FORMATS["last_number"]
    ids = [sampling.encode_prompt(tok, delta.prompt_text(tok, r["question"], ask)) for r in rows]
    P = max(map(len, ids))
    x = torch.tensor([[tok.pad_token_id or 0] * (P - len(i)) + i for i in ids for _ in range(8)])  # [64, P] left pad
    am = torch.tensor([[0] * (P - len(i)) + [1] * len(i) for i in ids for _ in range(8)], dtype=torch.bool)

    def decode(temperature=opts.temperature):
        with torch.no_grad():
            t = time.perf_counter()
            out = sampling.decode(model, x, am, 32, [], tok.pad_token_id or 0, temperature)
            return time.perf_counter() - t, out
    patch, undo = in_place(DynamicLayer)
    print(f"{opts.real}: {x.shape[0]} rows, prompt {P} tokens (padded), 32 new tokens, {torch.get_num_threads()} "
          "threads", flush=True)
    decode()
    greedy = {"eager": decode(0.0)[1]}
    patch()
    greedy["in-place"] = decode(0.0)[1]
    undo()
    times = {"eager": [], "in-place": []}
    for k in range(opts.repeat):  # eager, in-place, then in-place, eager, ...
        for arm in ("eager", "in-place") if k % 2 == 0 else ("in-place", "eager"):
            patch() if arm == "in-place" else undo()
            times[arm].append(decode()[0])
        undo()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        decode()
    ops = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    whole = sum(ops.values())
    share = {name: sum(v for k, v in ops.items() if k in keys) / whole for name, keys in (
        ("matmul", ("aten::mm", "aten::addmm", "aten::bmm")), ("cache cat", ("aten::cat",)),
        ("attention", ("aten::_scaled_dot_product_flash_attention_for_cpu",)))}
    model.forward = torch.compile(model.forward, dynamic=True)
    first = decode()[0]
    times["compiled"] = [decode()[0] for _ in range(opts.repeat)]
    greedy["compiled"] = decode(0.0)[1]
    eager = statistics.median(times["eager"])
    print("\n| decode (64 rows x 32 tokens) | median s | eager / arm |\n|---|---|---|")
    for arm, ts in times.items():
        print(f"| {arm} | {statistics.median(ts):.2f} | {eager / statistics.median(ts):.2f} |")
    print(f"| compiled, its first decode (compilation included) | {first:.1f} | |")
    print(f"\ncompilation costs {first - statistics.median(times['compiled']):.0f} s, paid again at each start "
          "(and at each new shape torch.compile does not cover)")
    print("eager decode's time by op (profile): " + ", ".join(f"{k} {v:.0%}" for k, v in share.items()))
    print("greedy tokens equal to eager's: " + ", ".join(
        f"{arm} {torch.equal(out, greedy['eager'])}" for arm, out in greedy.items() if arm != "eager"))


if __name__ == "__main__":
    main()
