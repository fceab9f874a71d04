"""What a delta.py run reads and writes besides its step: models, checkpoints, its files. delta.py imports this file
to run (never to copy its loss), and this file imports nothing of delta.py: a run is the namespace delta.make_run
builds.

    found, resume_state   the checkpoints of an output folder; the newest one's state for --resume and what stops it
    source_problem        what stops a --model (a folder or a hub id) from giving a model, in one line
    load_model            a hub id, a Hugging Face folder or a checkpoint, dropout off, with load_tokenizer's
                          tokenizer; on several processes every rank builds it on the meta device
                          (parameters_on_meta) and rank 0 alone reads the weights (load_weights)
    enable_checkpointing  --gradient_checkpointing's activation checkpointing, non-reentrant
    load_state, restore   a checkpoint's weights, or AdamW's state and every rank's generators (rng_state; --resume)
    save_run_files, metrics_log   a new run's args.json and held_out.jsonl; metrics.jsonl (on resume, truncated)
    save, save_model      a checkpoint (each rank its shards, atomically); a Hugging Face folder (final/), each with
                          the prompt settings in PROMPT_FILE
"""
import collections
import contextlib
import dataclasses
import importlib.util
import json
import os
import random
import re
import shutil
import sys
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dist_cp
import torch.distributed.checkpoint.state_dict as dcp
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

PROMPT_FILE = "delta_prompt.json"  # saved with every model folder: the prompt settings it was trained with
SAMPLING = ("temperature", "top_p", "top_k", "max_new_tokens")  # and the rollouts' sampling settings
STATE = "state"  # a checkpoint's weights and AdamW state, as torch.distributed.checkpoint writes them


def found(output_dir):
    """Complete checkpoints, oldest first (a crash mid-save leaves only a .tmp folder, ignored here)."""
    names = os.listdir(output_dir) if os.path.isdir(output_dir) else []
    names = [d for d in names if re.fullmatch(r"checkpoint-\d+", d)]
    return [os.path.join(output_dir, d) for d in sorted(names, key=lambda d: int(d.split("-")[1]))]


RESUME_FIXED = ("algo", "task", "dataset", "dataset_split", "prompt_key", "answer_key", "code_schema",
                "eval_dataset", "eval_size", "instruction", "answer_format", "seed", "prompts_per_step", "group_size",
                "mini_batch_prompts", "max_prompt_length", "max_new_tokens", "temperature", "K", "lam_min", "lam_max",
                "delta_margin", "delta_gamma", "delta_assign", "delta_normalise")  # the data order and the method


def resume_state(args, ckpts, world):
    """(state, problem): the newest of `ckpts` when resuming (None for a new run), and what stops the run (None:
    nothing): a folder with checkpoints is never overwritten without --resume, and a resume keeps RESUME_FIXED."""
    if not args.resume:
        return None, (f"{args.output_dir} holds checkpoints of an earlier run: pass --resume to continue it, or "
                      "choose another --output_dir") if found(args.output_dir) else None
    if not ckpts:
        return None, f"--resume: no checkpoint in {args.output_dir}"
    state = torch.load(os.path.join(ckpts[-1], "trainer_state.pt"), weights_only=False)
    if state["world_size"] != world:
        print(f"{ckpts[-1]} was written by {state['world_size']} processes, resumed on {world}: weights and AdamW "
              "state resharded, the sampling generators seeded afresh (the same count resumes exactly)",
              file=sys.stderr)
    changed = [f"--{k} {state['args'][k]!r} (now {getattr(args, k)!r})" for k in RESUME_FIXED
               if state["args"].get(k) != getattr(args, k)]
    return state, (f"--resume: {ckpts[-1]} was trained with {', '.join(changed)}; the data order and the method "
                   "depend on them: pass the same values") if changed else None


def source_problem(name):
    """What stops `name`, a local model folder or a hub id, from giving a model, in one line; None: nothing. Reads
    the config only (a hub id: from the hub or its cache), before any work."""
    if os.path.isfile(name):
        return f"{name} is a file: give the model's folder (its config.json, weights and tokenizer) or a hub id"
    if os.path.isdir(name):
        if not os.path.isfile(os.path.join(name, "config.json")):
            return f"{name} holds no config.json, so it is not a model folder (save_pretrained writes one)"
    elif name.startswith((".", "/", "~")) or name.count("/") > 1:
        return f"{name}: no such folder (a hub id reads owner/name)"
    try:  # a folder's config, or a hub id's in the local cache
        transformers.AutoConfig.from_pretrained(name, local_files_only=True)
        return None
    except (OSError, ValueError) as e:
        if os.path.isdir(name):
            return f"{name}/config.json cannot be read: {str(e).splitlines()[0]}"
    if not hub_reachable():
        return (f"{name} is no local folder and not in the hub's cache, and the hub cannot be reached: point it at "
                "a local folder (tools/smollm2.py makes SmolLM2's offline)")
    try:
        transformers.AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as e:
        return f"{name}: the hub gives no model config ({' '.join(str(e).split())[:200]})"
    return None


def hub_reachable(timeout=5.0):
    """Whether the hub's host answers a connection (not when HF_HUB_OFFLINE is set): asked once, in a few seconds,
    instead of huggingface_hub's retries, which take half a minute to fail offline."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT)
    if constants.HF_HUB_OFFLINE or not host.hostname:
        return False
    try:
        socket.create_connection((host.hostname, host.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_model(name_or_path, device, dtype=torch.float32, meta=False):
    """Model and tokenizer through from_pretrained, in eval mode with every dropout off: the ratio pi / pi_old
    compares two passes of one deterministic network (the update switches to training mode for checkpointing).
    meta (several processes): built from the config with its parameters on the meta device (no memory) and its
    buffers computed; delta.make_run makes the tensors and loads the weights once sharded (load_weights)."""
    straight = device.type == "cuda" and importlib.util.find_spec("accelerate")  # onto the GPU, no host copy per rank
    checkpoint = os.path.isdir(os.path.join(name_or_path, STATE))  # delta.py's: config, then its weights
    if meta or checkpoint:
        config = transformers.AutoConfig.from_pretrained(name_or_path)
        with parameters_on_meta() if meta else torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        with contextlib.suppress(OSError):  # the folder's own, as from_pretrained reads it (Qwen's lists two eos)
            model.generation_config = GenerationConfig.from_pretrained(name_or_path)
        if not meta:  # every weight from torch.distributed.checkpoint's files
            load_state(name_or_path, model)
    else:
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype, device_map=device if straight else None)
    if not meta:
        model = model.to(device)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if isinstance(getattr(m, "attention_dropout", None), float):
            m.attention_dropout = 0.0
    return model.eval(), load_tokenizer(name_or_path)


def load_tokenizer(name_or_path):
    """Left padding; pad = eos where the tokenizer has no pad token."""
    tok = AutoTokenizer.from_pretrained(name_or_path, padding_side="left")
    tok.pad_token = tok.pad_token or tok.eos_token
    return tok


def enable_checkpointing(model):  # non-reentrant, which works under DDP and FSDP (renamed in transformers 5)
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable({"use_reentrant": False})


@contextlib.contextmanager
def parameters_on_meta():
    """Modules built inside keep their parameters on the meta device and their buffers real: the non-persistent
    ones (rotary frequencies) are computed from the config and in no file (accelerate's init_empty_weights)."""
    register = torch.nn.Module.register_parameter

    def on_meta(module, name, param):
        register(module, name, param)
        if param is not None and not param.is_meta:  # a meta one is kept as it is: tied weights stay one object
            module._parameters[name] = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
    torch.nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def load_weights(model, source, device, rank):
    """The tensors of a model built on the meta device made on `device` (after fully_shard: this rank's shards
    only) and filled: from delta.py's checkpoint each rank reads its own shards; otherwise rank 0 alone reads
    `source` into host memory and broadcasts it tensor by tensor, so a node holds one copy of the weights, not one
    a rank (torch's set_model_state_dict, broadcast_from_rank0). The buffers computed at build time are kept."""
    buffers, tied = {name: b.detach().clone() for name, b in model.named_buffers()}, collections.defaultdict(list)
    for name, p in model.named_parameters(remove_duplicate=False):
        tied[id(p)].append(name)
    model.to_empty(device=device)  # on a plain module it gives tied names a tensor each: tied again below
    for first, *rest in tied.values():
        for name in rest:
            owner, _, attr = name.rpartition(".")
            if model.get_parameter(name) is not model.get_parameter(first):
                setattr(model.get_submodule(owner), attr, model.get_parameter(first))
    with torch.no_grad():
        for name, b in model.named_buffers():
            b.copy_(buffers[name])
    if os.path.isdir(os.path.join(source, STATE)):
        load_state(source, model, no_dist=False)
        return
    dtype = next(model.parameters()).dtype
    full = AutoModelForCausalLM.from_pretrained(source, dtype=dtype).state_dict() if rank == 0 else {}
    dcp.set_model_state_dict(model, full, options=dcp.StateDictOptions(full_state_dict=True,
                                                                        broadcast_from_rank0=True))


@contextlib.contextmanager
def one_process_quiet():
    """torch.distributed.checkpoint warns at every save and load in one process (no process group) that it
    assumes one process: that is the intent here, so that one warning is silenced, nothing else."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is (disabled, )?unavailable or uninitialized")
        yield


def load_state(path, model, optimizer=None, no_dist=True):
    """From a checkpoint: the whole `model` before sharding (every process reads every weight), or given the
    `optimizer`, AdamW's state after sharding (each process its own shards, for any process count)."""
    key, state = ("model", dcp.get_model_state_dict(model)) if optimizer is None else (
        "optimizer", dcp.get_optimizer_state_dict(model, optimizer))
    with one_process_quiet():
        dist_cp.load({key: state}, checkpoint_id=os.path.join(path, STATE), no_dist=no_dist)
    if optimizer is None:
        dcp.set_model_state_dict(model, state)
    else:
        dcp.set_optimizer_state_dict(model, optimizer, state)


def restore(run, state, path):
    """--resume from the checkpoint at `path` (its trainer `state`): AdamW's state resharded onto this run's
    processes and every rank's generators; another process count draws other samples: fresh generators per rank,
    seeded by the step (the same count resumes exactly)."""
    load_state(path, run.model, run.optimizer, no_dist=run.world == 1)
    if state["world_size"] == run.world:
        rng_state(state["rng"][run.rank])
    else:
        torch.manual_seed(seed := (run.args.seed + 1) * 1_000_003 + run.step * 101 + run.rank)
        random.seed(seed)


def rng_state(s=None):
    """The state of this rank's generators (torch's, Python's, CUDA's where there is one), or, given one, set them."""
    if s is None:
        cuda = {"cuda": torch.cuda.get_rng_state_all()} if torch.cuda.is_available() else {}
        return dict(torch=torch.get_rng_state(), python=random.getstate(), **cuda)
    for k, x in s.items():
        dict(torch=torch.set_rng_state, python=random.setstate, cuda=torch.cuda.set_rng_state_all)[k](x)


def save_run_files(run):
    """A new run's args.json (every argument, "auto" resolved) and held_out.jsonl (eval.py --data grades it as the
    run did), on rank 0."""
    a = run.args
    if run.rank == 0:
        with open(os.path.join(a.output_dir, "args.json"), "w") as f:
            json.dump(dataclasses.asdict(a), f, indent=1)
        with open(os.path.join(a.output_dir, "held_out.jsonl"), "w") as f:
            f.writelines(json.dumps({"question": r["question"], "answer": r["answer"], "reward": a.reward,
                                     "answer_format": a.answer_format, "instruction": a.instruction}) + "\n"
                         for r in run.eval_rows)


def metrics_log(output_dir, rank, resumed_step=None, sink=None):
    """log(row): a row of metrics.jsonl on rank 0 (on resume, the rows after the checkpoint dropped first), and to
    `sink` (TensorBoard's or W&B's writer) where given."""
    path = os.path.join(output_dir, "metrics.jsonl")
    if rank == 0:
        kept = open(path).readlines() if resumed_step is not None and os.path.exists(path) else []
        with open(path, "w") as f:
            f.writelines(line for line in kept if json.loads(line)["step"] <= resumed_step)

    def log(row):
        if rank == 0:
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")
            if sink:
                sink.log({k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}, row["step"])
    return log


def save(run, step):
    """The weights and AdamW state as each rank holds them (torch.distributed.checkpoint: each rank writes its own
    shards, one file a tensor, so none gathers the whole state; any process count loads them), the config and
    tokenizer, every rank's RNG and the step (it fixes the data order); to a temporary folder, then renamed."""
    path = os.path.join(run.args.output_dir, f"checkpoint-{step}")
    tmp, rngs, model = path + ".tmp", [rng_state()], run.model  # run.model: the module DDP or FSDP wraps
    if run.rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    if run.world > 1:  # also orders the removal before every rank's writes
        rngs = [None] * run.world
        dist.all_gather_object(rngs, rng_state())
    state = {"model": dcp.get_model_state_dict(model), "optimizer": dcp.get_optimizer_state_dict(model, run.optimizer)}
    with one_process_quiet():
        dist_cp.save(state, storage_writer=dist_cp.FileSystemWriter(os.path.join(tmp, STATE),
                                                                    single_file_per_rank=False))
    if run.rank == 0:  # dist_cp.save returns on rank 0 once every rank's files and the metadata are written
        model.config.save_pretrained(tmp)
        if model.generation_config is not None:
            model.generation_config.save_pretrained(tmp)
        save_folder_files(run, tmp)
        torch.save({"step": step, "rng": rngs, "world_size": run.world, "args": dataclasses.asdict(run.args)},
                   os.path.join(tmp, "trainer_state.pt"))
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
        for old in found(run.args.output_dir)[:-run.args.keep_checkpoints]:
            shutil.rmtree(old)
    if run.world > 1:
        dist.barrier()


def save_model(run, path):
    """A Hugging Face folder with the prompt settings (eval.py reads them): the full weights gathered to rank 0 (a
    collective under FSDP), written to a temporary folder, then renamed."""
    weights = run.sharding.model_state(run.train_model)
    if run.rank == 0:
        tmp = path + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        run.model.save_pretrained(tmp, state_dict=dict(weights))
        save_folder_files(run, tmp)
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)


def save_folder_files(run, folder):  # the tokenizer and the prompt settings, beside a model's config
    run.tok.save_pretrained(folder)
    with open(os.path.join(folder, PROMPT_FILE), "w") as f:
        json.dump({"instruction": run.args.instruction, "answer_format": run.answer_format,
                   "chat_template": bool(run.tok.chat_template),  # and how the run sampled (eval.py's defaults)
                   "sampling": {k: getattr(run.args, k) for k in SAMPLING}}, f)
