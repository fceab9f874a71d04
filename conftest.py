"""Shared by the test files: the repository's paths, the code-spec constants, a subprocess runner, the tiny
model (and the other backbones) built once, and a scored rollout of known responses.

Kept small: a fixture belongs here only when two test files need it.
"""
import base64
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import zlib

import pytest
import torch

import checkpoints
import delta
import sampling
import tasks

ROOT = os.path.dirname(os.path.abspath(__file__))
for folder in ("experiments", "bench", "cases", "tools"):  # what the tests import: memory, bench_honest, math_cases
    sys.path.insert(0, os.path.join(ROOT, folder))

# ------------------------------------------------------------------------------------- markers
MARKERS = {  # each names the CI job that runs its tests (.ci/run); the main suite deselects all but root (pytest.ini)
    "slow": "long checks (the backbones, RL on code learning, two nodes): python -m pytest -q -m slow",
    "vllm": "a real vLLM engine: .ci/vllm.sh runs them in the vLLM venv (python -m pytest -q -m vllm)",
    "trl": "DelTA inside TRL: .ci/trl.sh runs test_trl.py in the TRL venv",
    "tensorboard": "--report_to tensorboard: .ci/trl.sh runs them in that venv, which installs tensorboard",
    "root": "the sandbox's user namespaces, which need root (CI runs as root): skipped, with the reason, elsewhere",
}


def pytest_configure(config):
    for name, help in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {help}")


def pytest_collection_modifyitems(config, items):
    import sandbox
    if os.geteuid() == 0 and sandbox.mode() != "none":
        return
    why = pytest.mark.skip(reason="needs root and user namespaces (the sandbox's own mode is "
                                  f"{sandbox.mode()!r}; CI runs as root)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(why)

# ------------------------------------------------------------------------------------- code specs
fence = lambda src: f"Here is my solution.\n```python\n{src}\n```\n"
ADD = "def add(a, b):\n    return a + b"
STDIN = {"inputs": ["1 2\n", "10 20\n"], "outputs": ["3\n", "30"]}  # one of each mode, all passed by ADD's idea
CALL = {"fn_name": "add", "inputs": [[1, 2], [10, 20]], "outputs": [3, 30]}
ASSERT = {"assert": "assert add(1, 2) == 3\nassert add(10, 20) == 30"}
STDIN_ADD = "a, b = map(int, input().split())\nprint(a + b)"


# ------------------------------------------------------------------------------------- subprocesses
def under_load(timeout, torchrun=False, load=None, cores=None):
    """(threads a process, wall-clock limit) for a subprocess started now. Idle: two threads in all (the suite runs
    one test at a time on this machine's two cores) and `timeout`. Loaded (CI beside other jobs: the load average
    per core above 1): one thread a process, since two took 1.8 times the wall time and 2.5 times the CPU of one at
    load 8-18, and the limit stretched by the load per core (at most 8 times): a hang guard, never a speed test."""
    load = os.getloadavg()[0] if load is None else load
    per_core = load / (cores or os.cpu_count() or 1)
    threads = 1 if torchrun or per_core > 1 else 2
    return threads, timeout * min(8.0, max(1.0, per_core))


FIRST_LOAD = []  # the load average when the session started its first subprocess


def run_script(args, cwd=ROOT, timeout=600, env=None, torchrun=False, **kwargs):
    """`python ARGS...` (with torchrun: on 2 processes) in a fresh process, its output captured as text, with
    under_load's threads and time limit. The threads follow the load at the session's first subprocess, so that the
    runs a test compares bit for bit (a resumed run against a whole one) sum in the same order: a run on one thread
    and its resume on two differed in the 7th digit (CI, 2026-12-05); the limit follows the load now."""
    load = os.getloadavg()[0]
    FIRST_LOAD[:] = FIRST_LOAD or [load]
    threads, timeout = under_load(timeout, torchrun, load=FIRST_LOAD[0])[0], under_load(timeout, torchrun, load)[1]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore", **(env or {}))
    launcher = ["-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"] if torchrun else []
    return subprocess.run([sys.executable, *launcher, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def run_delta(*argv, env_extra=None, torchrun=False, cwd=ROOT):
    """`python delta.py ARGV...` (or under torchrun on 2 processes)."""
    return run_script(["delta.py", *argv], cwd=cwd, env=env_extra, torchrun=torchrun)


def read_metrics(path):
    with open(os.path.join(path, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


# the flags of a short end-to-end run of the tiny default
FAST = ["--prompts_per_step", "8", "--group_size", "4", "--mini_batch_prompts", "4",
        "--max_tokens_per_micro_batch", "400", "--eval_size", "16", "--sft_max_steps", "20", "--max_new_tokens", "48",
        "--progress", "false"]


# ------------------------------------------------------------------------------------- models and rollouts
@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny Qwen3 + character tokenizer, saved and loaded through from_pretrained like a user's model."""
    path = str(tmp_path_factory.mktemp("tiny"))
    tasks.build_tiny(path, seed=0)
    return path


BACKBONES = {  # tiny configs built in code (tasks.build_tiny), each family's own layers, norms and heads
    "llama": {}, "olmo3": {}, "gemma3_text": dict(tie_word_embeddings=True), "qwen2": {}, "mistral": {},
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64)}


@pytest.fixture(scope="session")
def backbones(tmp_path_factory):
    paths = {}
    for family, config in BACKBONES.items():
        paths[family] = str(tmp_path_factory.mktemp(family))
        tasks.build_tiny(paths[family], model_type=family, **config)
    return paths


def make_run(tiny, world=1, **changes):
    """A step's namespace around the tiny model, as delta.prepare builds it."""
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    return delta.make_run(dataclasses.replace(delta.Args(), **changes), model, tok, tiny, world=world)


def pack(tok, prompts, responses, device):
    """Prompts followed by given responses + eos, in delta.py's rollout layout (as its warm start builds them)."""
    ids = [tok(r, add_special_tokens=False).input_ids + [tok.eos_token_id] for r in responses]
    return sampling.rollout_batch([sampling.encode_prompt(tok, p) for p in prompts], ids, [tok.eos_token_id],
                               tok.pad_token_id, device)


def fixed_rollout(tiny, n_prompts=4, G=4, seed=0, budget=16384, algo="delta", world=1, **changes):
    """A rollout of known responses (half right, lengths varied), scored: (run, batch, adv, packed, plans)."""
    run = make_run(tiny, world=world, prompts_per_step=n_prompts, group_size=G, mini_batch_prompts=2, lr=1e-2,
                   max_tokens_per_micro_batch=budget, algo=algo, **changes)
    gen = torch.Generator().manual_seed(seed)
    rows = tasks.addition_task(0, 8)[0][:n_prompts]
    prompts, responses, correct = [], [], []
    for r in rows:
        for j in range(G):
            ok = bool(torch.rand(1, generator=gen) < 0.5)
            ans = r["answer"] if ok else str(int(r["answer"]) + 1 + j)
            prompts.append(delta.prompt_text(run.tok, r["question"]))
            responses.append("Let us add" + " the two numbers" * (j % 3) + f". \\boxed{{{ans}}}")
            correct.append(float(ok))
    batch = pack(run.tok, prompts, responses, "cpu")
    adv = delta.group_advantages(torch.tensor(correct), G)
    plans = delta.micro_batches(run, batch)
    batch["old_logp"], run.entropy, packed = delta.score(run, batch, adv, plans, True)
    run.rows = rows
    return run, batch, adv, packed, plans


def lam_of(run, batch, adv, packed, stats=None):
    """DelTA's lam [N, R] through the trainer's path (packed features, zero-advantage tokens included)."""
    return delta.delta_weights(run, dict(batch=batch, adv=adv, features=packed, stats={} if stats is None else stats))


# ------------------------------------------------------------------------------------- LiveCodeBench's rows
EVAL_DATA = os.path.join(ROOT, "bench", "data", "eval")


def lcb_encode(tests, protocol=None):
    """Exactly how code_generation_lite stores private tests: json.dumps, pickle.dumps of that str, zlib, base64."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests), protocol=protocol))).decode("ascii")


def lcb_row_1873a():
    """A real code_generation_lite row, private tests in the dataset's own bytes: Codeforces 1873A as quoted in
    github.com/Kaggle/kaggle-benchmarks documentation/examples/code_generation.py (Apache-2.0)."""
    return json.load(open(os.path.join(EVAL_DATA, "lcb_1873_A.json")))
