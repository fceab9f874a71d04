"""What one held-out part of tools/direction.py's E costs: its responses drawn, then the gradient of some of them,
with the time and the peak resident memory of each (docs/direction.md, "A task with long reasoning, probed before
any run").

    python tools/direction_probe.py --prompts 18 --graded 8 -- --model /tmp/delta-smollm2 \\
        --dataset runs/one-step-story.jsonl --max_new_tokens 160 --temperature 0.2 [--precision bf16] \\
        [--max_tokens_per_micro_batch 2048] ...

Everything after `--` is delta.py's flags, as tools/direction.py reads them (the held-out rows are delta.py's).
"""
import argparse
import os
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import torch  # noqa: E402

import direction  # noqa: E402


def resident_gb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 2 ** 20


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=int, default=18, help="held-out prompts drawn")
    p.add_argument("--group", type=int, default=16, help="responses a prompt")
    p.add_argument("--graded", type=int, default=8, help="prompts whose responses' gradient is taken")
    opts, rest = p.parse_known_args(argv)
    rest = [x for x in rest if x != "--"]
    peak = [0.0]

    def watch():  # the peak resident memory, sampled every 0.2 s
        while True:
            peak[0] = max(peak[0], resident_gb())
            time.sleep(0.2)
    threading.Thread(target=watch, daemon=True).start()
    with tempfile.TemporaryDirectory() as workdir:
        run = direction.boot(rest, workdir)
        step = run.args.mini_batch_prompts * run.args.group_size  # the rows of a mini-batch, as E's are cut
        if opts.prompts * opts.group % step:
            sys.exit(f"--prompts x --group ({opts.prompts * opts.group}) must be a multiple of --mini_batch_prompts x "
                     f"--group_size ({step})")
        t, peak[0] = time.perf_counter(), resident_gb()
        roll = direction.rollout(run, run.eval_rows[:opts.prompts], opts.group, seed=5)
        tokens = float(roll["batch"]["response_mask"].sum(1).float().mean())
        print(f"drawn: {opts.prompts * opts.group} responses (mean {tokens:.0f} tokens) in "
              f"{time.perf_counter() - t:.0f} s, peak {peak[0]:.1f} GB", flush=True)
        direction.trainable(run.model)
        coef = torch.zeros(opts.prompts * opts.group, device=run.device)
        coef[:opts.graded * opts.group] = 1e-3
        t, peak[0] = time.perf_counter(), resident_gb()
        direction.logp_grad(run, roll["batch"], coef)
        print(f"gradient: {opts.graded * opts.group} responses in {time.perf_counter() - t:.0f} s, peak "
              f"{peak[0]:.1f} GB", flush=True)


if __name__ == "__main__":
    main()
