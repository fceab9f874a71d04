"""DelTA: Discriminative Token Credit Assignment for RL from verifiable rewards, in one file.

Read it next to the paper; the README's table names the equations tagged here (Eq. A-E, Sec. 3.2).
Top to bottom: arguments, then the method in the paper's order (advantages Eq. A, token features
Eq. D, coefficients Sec. 3.2, surrogate Eq. B/E), then the trainer (rollout, scoring pass,
training step, main loop). The four core functions -- group_advantages, token_features,
delta_coefficients, policy_loss -- are pure torch and can be copied into another trainer.

Run it:
    python delta.py                                   # offline tiny default: CPU, a few minutes
    torchrun --nproc_per_node 2 delta.py              # the same on 2 processes (gloo on CPU)
    python delta.py --algo dapo                       # the DAPO baseline (also: grpo, drgrpo)
    python delta.py config.yaml                       # every argument from a YAML/JSON file
    python delta.py --output_dir runs/x --resume      # continue from the last checkpoint
    torchrun --nproc_per_node 8 delta.py --model Qwen/Qwen3-8B-Base \\
        --dataset zwhe99/DeepMath-103K --prompt_key question --answer_key final_answer \\
        --prompts_per_step 128 --group_size 16 --mini_batch_prompts 32 --micro_batch_size 1 \\
        --max_prompt_length 2048 --max_new_tokens 20480 --overlong_buffer 4096 --lr 1e-6 \\
        --epochs 2 --max_steps 0 --gradient_checkpointing   # the paper's recipe (README: full command, memory)
"""

import contextlib
import dataclasses
import gc
import json
import math
import os
import random
import shutil
import signal
import sys
import time
import warnings
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F


@dataclass
class Args:
    # --- run ---------------------------------------------------------------------------
    algo: str = field(default="delta", metadata={"help": "delta | dapo | grpo | drgrpo (one code path; see ALGOS)"})
    run_name: str = field(default="", metadata={"help": "name of the run; default '<algo>-<model or tiny>-s<seed>'"})
    output_dir: str = field(default="", metadata={"help": "metrics.jsonl, checkpoints, final model; default runs/<run_name>"})
    seed: int = field(default=0, metadata={"help": "seed of data order, init and sampling (each rank adds its rank)"})
    resume: bool = field(default=False, metadata={"help": "continue from the newest checkpoint in output_dir"})
    # --- model and data ----------------------------------------------------------------
    model: str = field(default="", metadata={"help": "hub id or local path; empty: a tiny Qwen3 built in code (offline default)"})
    dataset: str = field(default="", metadata={"help": "hub id or local .json/.jsonl/.parquet; empty: synthetic addition task"})
    dataset_split: str = field(default="train", metadata={"help": "split of a hub dataset"})
    prompt_key: str = field(default="question", metadata={"help": "column holding the problem text"})
    answer_key: str = field(default="final_answer", metadata={"help": "column holding the reference answer"})
    eval_dataset: str = field(default="", metadata={"help": "held-out set (same columns); empty: hold out eval_size training rows"})
    eval_size: int = field(default=256, metadata={"help": "held-out problems evaluated with greedy decoding"})
    instruction: str = field(default="auto", metadata={"help": "appended to each question; auto: ask for \\boxed{}, nothing on the synthetic task"})
    max_prompt_length: int = field(default=64, metadata={"help": "longer prompts are dropped at load time (paper: 2048)"})
    max_new_tokens: int = field(default=64, metadata={"help": "response length limit (paper: 20480)"})
    # --- rollout -----------------------------------------------------------------------
    prompts_per_step: int = field(default=32, metadata={"help": "prompts per rollout batch, all ranks together (paper: 128)"})
    group_size: int = field(default=8, metadata={"help": "G, responses sampled per prompt (paper: 16)"})
    temperature: float = field(default=1.0, metadata={"help": "rollout temperature; log-probs use logits / temperature"})
    top_p: float = field(default=1.0, metadata={"help": "rollout nucleus sampling (paper: 1.0)"})
    top_k: int = field(default=0, metadata={"help": "rollout top-k, 0 = off (paper: off)"})
    gen_batch_size: int = field(default=256, metadata={"help": "responses per model.generate call on one rank"})
    # --- optimisation ------------------------------------------------------------------
    lr: float = field(default=1e-4, metadata={"help": "AdamW learning rate, constant, no warm-up (paper: 1e-6)"})
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW weight decay (paper: 0.1)"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping (paper: 1.0)"})
    mini_batch_prompts: int = field(default=16, metadata={"help": "prompts per optimizer step, all ranks (paper: 32 -> 4 steps)"})
    micro_batch_size: int = field(default=64, metadata={"help": "responses per forward/backward on one rank"})
    epochs: int = field(default=2, metadata={"help": "passes over the training prompts (paper: 2)"})
    max_steps: int = field(default=200, metadata={"help": "rollout steps; 0 = run all epochs"})
    gradient_checkpointing: bool = field(default=False, metadata={"help": "non-reentrant activation checkpointing"})
    bf16: bool = field(default=True, metadata={"help": "bf16 autocast on GPU (ignored on CPU)"})
    # --- surrogate (Eq. B) -------------------------------------------------------------
    clip_low: float = field(default=0.2, metadata={"help": "eps_low of the ratio clip"})
    clip_high: float = field(default=0.28, metadata={"help": "eps_high, clip-higher (grpo/drgrpo use clip_low)"})
    clip_c: float = field(default=10.0, metadata={"help": "dual-clip bound c for negative advantages"})
    overlong_buffer: int = field(default=16, metadata={"help": "DAPO soft overlong buffer in tokens, dapo/delta (paper: 4096)"})
    overlong_penalty: float = field(default=1.0, metadata={"help": "DAPO overlong penalty factor (paper: 1.0)"})
    # --- DelTA (Sec. 3.2) --------------------------------------------------------------
    K: int = field(default=1, metadata={"help": "refinement iterations of the centroids (paper: 1)"})
    lam_min: float = field(default=0.8, metadata={"help": "lower end of the coefficient band (paper: 0.8)"})
    lam_max: float = field(default=1.2, metadata={"help": "upper end of the coefficient band (paper: 1.2)"})
    # --- warm start of the tiny default (no effect with --model) -----------------------
    sft_target_acc: float = field(default=0.12, metadata={"help": "stop the warm start at this held-out accuracy of samples"})
    sft_max_steps: int = field(default=1500, metadata={"help": "upper bound on warm-start steps"})
    sft_lr: float = field(default=1e-3, metadata={"help": "warm-start learning rate"})
    sft_batch_size: int = field(default=64, metadata={"help": "warm-start examples per step, all ranks"})
    # --- logging, evaluation, checkpoints ----------------------------------------------
    eval_every: int = field(default=25, metadata={"help": "greedy held-out evaluation every N steps (0 = start and end only)"})
    save_every: int = field(default=50, metadata={"help": "checkpoint every N steps (0 = only at the end and on Ctrl-C)"})
    keep_checkpoints: int = field(default=2, metadata={"help": "newest checkpoints kept on disk"})
    progress: bool = field(default=True, metadata={"help": "tqdm progress bar on rank 0"})


# Sec. 1: what distinguishes the four algorithms. DelTA = DAPO + token coefficients (Eq. E).
ALGOS = {  # adv_scale: Eq. A with or without std; agg: loss normaliser; overlong: DAPO's penalty
    "grpo": dict(adv_scale="group", agg="seq-mean", overlong=False, symmetric_clip=True),
    "drgrpo": dict(adv_scale="none", agg="constant", overlong=False, symmetric_clip=True),
    "dapo": dict(adv_scale="group", agg="token-mean", overlong=True, symmetric_clip=False),
    "delta": dict(adv_scale="group", agg="token-mean", overlong=True, symmetric_clip=False),
}


class ArgumentError(ValueError):
    """Bad input, reported before any work starts."""


def validate_args(a: Args, world_size: int = 1) -> None:
    """Fail before any work, with a message that says what to change."""
    def need(ok, msg):
        if not ok:
            raise ArgumentError(msg)
    need(a.algo in ALGOS, f"--algo {a.algo!r} is unknown; use one of {', '.join(ALGOS)}")
    need(a.group_size >= 2, f"--group_size {a.group_size}: group advantages need at least 2 responses per prompt")
    for name in ("prompts_per_step", "mini_batch_prompts", "micro_batch_size", "max_new_tokens",
                 "max_prompt_length", "gen_batch_size", "eval_size", "sft_batch_size"):
        need(getattr(a, name) > 0, f"--{name} {getattr(a, name)} must be > 0")
    need(a.prompts_per_step % world_size == 0,
         f"--prompts_per_step {a.prompts_per_step} must be divisible by the {world_size} processes")
    need(a.prompts_per_step % a.mini_batch_prompts == 0,
         f"--prompts_per_step {a.prompts_per_step} must be a multiple of --mini_batch_prompts {a.mini_batch_prompts}")
    need(a.mini_batch_prompts % world_size == 0,
         f"--mini_batch_prompts {a.mini_batch_prompts} must be divisible by the {world_size} processes")
    per_rank_mini = a.mini_batch_prompts // world_size * a.group_size
    need(per_rank_mini % a.micro_batch_size == 0,
         f"--micro_batch_size {a.micro_batch_size} must divide the {per_rank_mini} responses of a mini-batch on one "
         f"process (mini_batch_prompts / processes * group_size)")
    need(a.sft_batch_size % world_size == 0, f"--sft_batch_size {a.sft_batch_size} must be divisible by {world_size}")
    need(0 <= a.lam_min <= a.lam_max, f"--lam_min {a.lam_min} / --lam_max {a.lam_max}: need 0 <= lam_min <= lam_max")
    need(a.lam_max > 0, "--lam_max must be > 0 so that some token carries weight")
    need(a.K >= 0, f"--K {a.K}: the number of refinement iterations must be >= 0")
    need(0 <= a.clip_low < 1 and a.clip_high >= 0, f"--clip_low {a.clip_low} must be in [0, 1), --clip_high >= 0")
    need(a.clip_c > 1, f"--clip_c {a.clip_c}: the dual-clip bound must be > 1")
    need(a.temperature > 0, f"--temperature {a.temperature} must be > 0 for sampling")
    need(0 < a.top_p <= 1 and a.top_k >= 0, "--top_p must be in (0, 1] and --top_k >= 0")
    need(a.lr > 0, f"--lr {a.lr} must be > 0")
    need(0 <= a.overlong_buffer < a.max_new_tokens,
         f"--overlong_buffer {a.overlong_buffer} must be in [0, max_new_tokens={a.max_new_tokens})")
    need(a.epochs > 0 or a.max_steps > 0, "give --max_steps > 0 or --epochs > 0")
    need(a.max_steps >= 0 and a.save_every >= 0 and a.eval_every >= 0, "step counts must be >= 0")
    need(a.keep_checkpoints >= 1, "--keep_checkpoints must be >= 1")
    for name in ("dataset", "eval_dataset", "model"):
        path = getattr(a, name)
        if path and (path.startswith((".", "/")) or os.path.splitext(path)[1] in (".json", ".jsonl", ".parquet")):
            need(os.path.exists(path), f"--{name} {path}: no such file or folder")
    if a.resume:
        need(a.output_dir != "", "--resume needs the --output_dir of the run to continue")


# =====================================================================================
# 1. Advantages (Eq. A)
# =====================================================================================
def group_advantages(rewards, group_size, scale="group", eps=1e-6):
    """Eq. A. rewards: [N] with the G responses of each prompt adjacent. Returns adv [N].

    scale="group": (R - mean) / (std + eps), GRPO/DAPO (std with Bessel's correction, as verl).
    scale="none":  R - mean, Dr. GRPO.
    """
    r = rewards.float().view(-1, group_size)  # [N/G, G]
    adv = r - r.mean(dim=1, keepdim=True)
    if scale == "group":
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    elif scale != "none":
        raise ValueError(f"scale must be 'group' or 'none', got {scale!r}")
    return adv.view(-1)  # [N]


# =====================================================================================
# 2. Token-gradient features (Eq. D, paper Appendix F)
# =====================================================================================
def token_features(hidden, logprobs):
    """Eq. D: v = (1 - pi_old(o_t)) * h_t, the gradient of log pi(o_t) w.r.t. the LM-head row of o_t.

    hidden: [..., H], the final (post-norm) hidden state entering the LM head at the position that
    predicts o_t; logprobs: [...], log pi_old(o_t) at the rollout temperature. Returns v [..., H].
    (With temperature T the exact gradient carries a factor 1/T; a constant factor leaves the
    coefficients unchanged, since margins and their std scale alike.)
    """
    return (1.0 - logprobs.exp()).unsqueeze(-1).to(hidden.dtype) * hidden


# =====================================================================================
# 3. Coefficient estimation (Sec. 3.2, steps 1-6)
# =====================================================================================
def delta_coefficients(v, adv, mask, K=1, lam_min=0.8, lam_max=1.2, eps=1e-8, stats=None):
    """Sec. 3.2: token coefficients lam [B, T] from features v [B, T, H], advantages adv [B], mask [B, T].

    Semantics of the official code: squared Euclidean distances; gamma of a side is the population
    std of that side's margins and lags one refinement step; tokens of zero-advantage responses get
    lam_min; lam is self-normalised to mean 1 over valid tokens; 0 at masked positions. If one side
    has no valid token, every valid token gets 1 (plain DAPO). Under torch.distributed every sum is
    all-reduced, so N ranks holding slices of the batch get what one rank gets on the whole batch
    (the official code computes per rank instead). Pass a dict as `stats` to receive gamma_pos,
    gamma_neg and disc_acc (share of side tokens the discriminator sign(A)(v.W + b) calls right).
    """
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()

    def allsum(x):  # [k] float64 -> summed over ranks
        if distributed:
            torch.distributed.all_reduce(x)
        return x

    dtype = torch.promote_types(v.dtype, torch.float32)  # internal math in float32 or better
    v = v.to(dtype)  # [B, T, H]
    valid = mask.bool()  # [B, T]
    pos = valid & (adv > 0)[:, None]  # [B, T] "+" tokens
    neg = valid & (adv < 0)[:, None]  # [B, T] "-" tokens
    sides = (pos, neg)
    w_adv = adv.abs().to(dtype)[:, None] * valid  # [B, T] advantage mass |A_i| m_{i,t}
    sign = torch.where(adv > 0, 1.0, -1.0).to(dtype)[:, None]  # [B, 1]
    n_valid, n_pos, n_neg = allsum(torch.stack([valid.sum(), pos.sum(), neg.sum()]).double()).tolist()
    if n_pos == 0 or n_neg == 0:  # no contrast to draw: plain DAPO
        if stats is not None:
            stats.update(gamma_pos=0.0, gamma_neg=0.0, disc_acc=0.0)
        return valid.to(dtype)

    def centroids(alpha, previous=None):  # steps 1 and 4: (score-weighted) advantage-weighted means
        mus = []
        for k, side in enumerate(sides):
            w = w_adv * side if alpha is None else alpha * w_adv * side  # [B, T]
            num_den = allsum(torch.cat([torch.einsum("bt,bth->h", w, v).double(), w.sum().double()[None]]))
            mu = (num_den[:-1] / num_den[-1]).to(dtype)  # [H]
            if num_den[-1] <= 0 and previous is not None:  # every score underflowed: keep the last centroid
                mu = previous[k]
            mus.append(mu)
        return mus

    def margins(mu_pos, mu_neg):  # step 2: opposite-side minus own-side squared distance, own side by sign(A)
        # ||v - mu_-||^2 - ||v - mu_+||^2 = 2 v.(mu_+ - mu_-) - (||mu_+||^2 - ||mu_-||^2), exact and cancellation-free
        g_pos = 2 * (v @ (mu_pos - mu_neg)) - (mu_pos.square().sum() - mu_neg.square().sum())  # [B, T]
        return sign * g_pos  # [B, T]

    def gammas(g):  # step 3: population std of the margins of each side, clamped below at eps
        out = []
        for side, n in zip(sides, (n_pos, n_neg)):
            mean = allsum(g[side].double().sum()[None]) / n
            var = allsum((g[side].double() - mean).square().sum()[None]) / n
            out.append(var.sqrt().clamp(min=eps).to(dtype))
        return out

    def scores(g, gam):  # step 3: alpha = sigmoid(g / gamma_side), closed form of the entropy-regularised choice
        gamma = torch.where(adv > 0, gam[0], gam[1]).to(dtype)[:, None]  # [B, 1]
        return torch.sigmoid(g / gamma)  # [B, T]

    mus = centroids(None)  # step 1
    g = margins(*mus)  # [B, T]
    gam = gammas(g)
    for k in range(K):  # step 4: refinement
        mus = centroids(scores(g, gam), previous=mus)
        g = margins(*mus)
        if k < K - 1:  # gamma lags one step: the final margins are divided by the previous margins' std
            gam = gammas(g)
    # step 5: map into [lam_min, lam_max]; zero-advantage tokens get lam_min
    lam = torch.where(pos | neg, lam_min + (lam_max - lam_min) * scores(g, gam), lam_min) * valid  # [B, T]
    # step 6: self-normalise to mean 1 over the valid tokens of the (global) batch
    lam = lam * (n_valid / allsum(lam.double().sum()[None])).to(dtype)
    if stats is not None:
        right = allsum(torch.stack([((g > 0) & (pos | neg)).sum()]).double())
        stats.update(gamma_pos=float(gam[0]), gamma_neg=float(gam[1]), disc_acc=float(right) / (n_pos + n_neg))
    return lam  # [B, T]


# =====================================================================================
# 4. Reweighted clipped surrogate (Eq. B; DelTA: Eq. E)
# =====================================================================================
def policy_loss(logp, old_logp, adv, mask, lam=None, clip_low=0.2, clip_high=0.28, clip_c=10.0, num_tokens=None):
    """Eq. B / Eq. E as a loss to minimise: -sum_{i,t} min(r A', clip(r) A') / num_tokens, A' = A_i lam_{i,t}.

    logp, old_logp, mask: [B, T]; adv: [B]; lam: [B, T] or None (= 1, DAPO). Asymmetric clip
    [1 - clip_low, 1 + clip_high]; dual clip caps the loss of a negative-advantage token at -A' c.
    num_tokens: the normaliser, default this call's valid tokens; a trainer passes the count of the
    whole mini-batch (all micro-batches, all ranks) so the gradient is independent of the split.
    Since lam > 0, weighting the advantage equals weighting the token's term. Returns (loss, metrics).
    """
    valid = mask.bool()
    a = adv[:, None].to(logp.dtype) * (1.0 if lam is None else lam)  # [B, T]  DelTA departs from DAPO here: A * lam
    log_ratio = torch.where(valid, logp - old_logp, 0.0)  # [B, T]
    ratio = log_ratio.exp()  # [B, T]
    loss_unclipped = -a * ratio
    loss_clipped = -a * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss_ppo = torch.maximum(loss_unclipped, loss_clipped)  # -min(r A, clip(r) A)
    loss_dual = torch.minimum(loss_ppo, -a * clip_c)  # dual clip: at most -A c when A < 0
    per_token = torch.where(a < 0, loss_dual, loss_ppo)  # [B, T]
    n_here = valid.sum()
    denom = n_here if num_tokens is None else num_tokens
    loss = torch.where(valid, per_token, 0.0).sum() / denom
    with torch.no_grad():
        count = n_here.clamp(min=1)
        metrics = {
            "clipfrac": ((loss_clipped > loss_unclipped) & valid).sum() / count,
            "clipfrac_dual": ((loss_ppo > -a * clip_c) & (a < 0) & valid).sum() / count,
            "approx_kl": torch.where(valid, ratio - 1 - log_ratio, 0.0).sum() / count,  # k3 estimator of KL(old||new)
        }
    return loss, metrics


# =====================================================================================
# Model, tokenizer and data
# =====================================================================================
PROMPT_INSTRUCTION = "Put the final answer in \\boxed{}."
TINY_CHARS = "0123456789+-*/=?.,:;!()[]{}\\$^_ abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n'\"<>|&%#@~`"


def build_tiny(path, seed=0):
    """The offline default: a character tokenizer and a ~0.5M-parameter Qwen3, saved to `path`."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3Config

    vocab = {"<|endoftext|>": 0, "<unk>": 1}
    for c in TINY_CHARS:
        vocab.setdefault(c, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # one token per character
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                  unk_token="<unk>", padding_side="left")  # pad = eos, as in Qwen
    tok.chat_template = ("{% for m in messages %}{{ 'Q: ' + m['content'] + '\\n' }}{% endfor %}"
                         "{% if add_generation_prompt %}A: {% endif %}")  # short prompts keep the default fast
    cfg = Qwen3Config(vocab_size=len(vocab), hidden_size=128, num_hidden_layers=2, intermediate_size=512,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
                      eos_token_id=0, pad_token_id=0, bos_token_id=None, tie_word_embeddings=False)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg)
    tok.save_pretrained(path)
    model.save_pretrained(path)


def addition_task(seed=0, n_eval=256):
    """Two-digit addition. Every response shares the boilerplate; only the boxed digits decide the reward."""
    rng = random.Random(seed)
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    rng.shuffle(pairs)
    rows = [{"question": f"{a}+{b}=?", "answer": str(a + b),
             "solution": f"Let us add the two numbers. \\boxed{{{a + b}}}"} for a, b in pairs]
    return rows[n_eval:], rows[:n_eval]


def load_rows(source, split, prompt_key, answer_key):
    """A local json/jsonl/parquet file or a hub dataset -> [{"question", "answer"}]."""
    import datasets

    ext = os.path.splitext(source)[1]
    if ext in (".json", ".jsonl"):
        ds = datasets.load_dataset("json", data_files=source, split="train")
    elif ext == ".parquet":
        ds = datasets.load_dataset("parquet", data_files=source, split="train")
    else:
        ds = datasets.load_dataset(source, split=split)
    for key in (prompt_key, answer_key):
        if key not in ds.column_names:
            raise ArgumentError(f"{source}: no column {key!r}; columns are {ds.column_names} (set --prompt_key/--answer_key)")
    return [{"question": str(r[prompt_key]), "answer": r[answer_key]} for r in ds]


def format_prompt(tok, question, instruction=PROMPT_INSTRUCTION):
    """Chat template when the tokenizer has one, a plain template otherwise; the instruction asks for \\boxed{}."""
    content = f"{question}\n{instruction}" if instruction else question
    if getattr(tok, "chat_template", None):
        return tok.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    return f"Question: {content}\nAnswer: "


def load_model(name_or_path, device):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name_or_path, padding_side="left")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch.float32).to(device)
    return model, tok


def enable_checkpointing(model):
    """Non-reentrant activation checkpointing, which works under DDP (renamed in recent transformers)."""
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def eos_ids(model, tok):
    """Every token id that ends a response (Qwen's generation config lists two)."""
    ids = model.generation_config.eos_token_id
    ids = set([ids] if isinstance(ids, int) else (ids or []))
    ids.add(tok.eos_token_id)
    return sorted(i for i in ids if i is not None)


# =====================================================================================
# 5. Rollout: sampling, rewards, the one scoring pass
# =====================================================================================
def autocast(device, enabled):
    if device.type == "cuda" and enabled:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


@torch.no_grad()
def generate(model, tok, prompts, max_new_tokens, temperature, top_p=1.0, top_k=0, batch_size=256, bf16=True):
    """Sample (temperature > 0) or decode greedily (temperature == 0) one response per prompt.

    Returns input_ids [N, P + R] (prompts left-padded to P), attention_mask [N, P + R],
    response_mask [N, R] (tokens up to and including the first eos), truncated [N] (no eos).
    """
    from transformers import GenerationConfig

    ends = eos_ids(model, tok)
    sample = temperature > 0
    cfg = GenerationConfig(do_sample=sample, temperature=temperature if sample else None,
                           top_p=top_p if sample else None, top_k=top_k if sample else None,
                           max_new_tokens=max_new_tokens, eos_token_id=ends, pad_token_id=tok.pad_token_id)
    device = next(model.parameters()).device
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    P = enc.input_ids.shape[1]
    was_training = model.training
    model.eval()
    chunks = []
    for s in range(0, len(prompts), batch_size):
        with autocast(device, bf16):
            out = model.generate(input_ids=enc.input_ids[s:s + batch_size],
                                 attention_mask=enc.attention_mask[s:s + batch_size], generation_config=cfg)
        chunks.append(out[:, P:])  # [n, R_chunk]
    model.train(was_training)
    R = max(c.shape[1] for c in chunks)
    resp = torch.cat([F.pad(c, (0, R - c.shape[1]), value=tok.pad_token_id) for c in chunks])  # [N, R]
    is_eos = torch.isin(resp, torch.tensor(ends, device=device))  # [N, R]
    response_mask = (is_eos.cumsum(1) - is_eos.long()) == 0  # [N, R] through the first eos; never from pad ids
    truncated = ~is_eos.any(1)  # [N]
    return {"input_ids": torch.cat([enc.input_ids, resp], 1),  # [N, P + R]
            "attention_mask": torch.cat([enc.attention_mask.bool(), response_mask], 1),  # [N, P + R]
            "response_mask": response_mask, "truncated": truncated, "prompt_len": P}


def decode_responses(tok, batch):
    P = batch["prompt_len"]
    return [tok.decode(ids[m], skip_special_tokens=True)
            for ids, m in zip(batch["input_ids"][:, P:], batch["response_mask"])]


def overlong_penalty(lengths, max_len, buffer, factor):
    """DAPO's soft overlong punishment: 0 up to max_len - buffer, then linear down to -factor at max_len."""
    if buffer <= 0:
        return torch.zeros_like(lengths, dtype=torch.float32)
    over = (lengths.float() - (max_len - buffer)).clamp(min=0)
    return -(over / buffer).clamp(max=1.0) * factor


def response_logprobs(model, input_ids, attention_mask, R, temperature, capture_hidden=False, with_entropy=False):
    """log pi(o_t) at temperature T for the last R tokens, from one forward of `model` (DDP-wrapped or not).

    Returns logp [b, R] and, on request, the LM-head input h [b, R, H] and the entropy [b, R].
    """
    head = (model.module if hasattr(model, "module") else model).get_output_embeddings()
    captured = {}
    hook = head.register_forward_hook(lambda m, inp, out: captured.update(h=inp[0])) if capture_hidden else None
    position_ids = (attention_mask.long().cumsum(1) - 1).clamp(min=0)  # [b, P + R] as generate sets them for left padding
    try:
        out = model(input_ids=input_ids, attention_mask=attention_mask.long(), position_ids=position_ids,
                    logits_to_keep=R + 1, use_cache=False)
    finally:
        if hook is not None:
            hook.remove()
    logits = out.logits[:, :-1].float() / temperature  # [b, R, V] position P-1+t predicts response token t
    targets = input_ids[:, -R:]  # [b, R]
    lse = logits.logsumexp(-1)  # [b, R]
    logp = logits.gather(-1, targets[..., None]).squeeze(-1) - lse  # [b, R]
    extra = {}
    if capture_hidden:
        extra["hidden"] = captured["h"][:, :-1]  # [b, R, H] post-final-norm states entering the LM head
    if with_entropy:
        extra["entropy"] = lse - (logits.softmax(-1) * logits).sum(-1)  # [b, R]
    return logp, extra


@torch.no_grad()
def score(model, batch, args, features):
    """The single no-grad pass over the rollout: old log-probs, entropy and (DelTA) features v (Eq. D)."""
    R = batch["response_mask"].shape[1]
    device = batch["input_ids"].device
    logps, ents, feats = [], [], []
    for s in range(0, batch["input_ids"].shape[0], args.micro_batch_size):
        sl = slice(s, s + args.micro_batch_size)
        with autocast(device, args.bf16):
            logp, extra = response_logprobs(model, batch["input_ids"][sl], batch["attention_mask"][sl], R,
                                            args.temperature, capture_hidden=features, with_entropy=True)
        logps.append(logp)
        ents.append(extra["entropy"])
        if features:  # DelTA departs from DAPO here: the same forward also yields v
            feats.append(token_features(extra["hidden"], logp) * batch["response_mask"][sl, :, None])
    return torch.cat(logps), torch.cat(ents), (torch.cat(feats) if features else None)


# =====================================================================================
# 6. Training step: mini-batches, micro-batches, global normalisation
# =====================================================================================
def train_on_rollout(ddp_model, optimizer, batch, adv, lam, args, world_size):
    """Several optimizer steps over the rollout batch (Eq. B/E); lam stays fixed for all of them.

    Every loss term is divided by the global normaliser of its mini-batch (all micro-batches, all ranks)
    and multiplied by world_size to undo DDP's gradient averaging: the update is independent of the split.
    """
    algo = ALGOS[args.algo]
    mask = batch["response_mask"]  # [N, R]
    N = mask.shape[0]
    clip_high = args.clip_low if algo["symmetric_clip"] else args.clip_high
    weight = torch.ones_like(mask, dtype=torch.float32) if lam is None else lam  # [N, R]
    if algo["agg"] == "seq-mean":  # GRPO: mean over each response, then over responses
        weight = weight / mask.sum(1, keepdim=True).clamp(min=1)
    per_rank = args.mini_batch_prompts // world_size * args.group_size
    sums = {"loss/policy": 0.0, "loss/clipfrac": 0.0, "loss/clipfrac_dual": 0.0, "loss/approx_kl": 0.0}
    norms, n_micro = [], 0
    R = mask.shape[1]
    for m0 in range(0, N, per_rank):  # one optimizer step per mini-batch
        mb = slice(m0, m0 + per_rank)
        if algo["agg"] == "token-mean":
            count = mask[mb].sum().double()
        elif algo["agg"] == "seq-mean":
            count = torch.tensor(float(per_rank), dtype=torch.float64)
        else:  # Dr. GRPO: token sum over a constant, responses x max length
            count = torch.tensor(float(per_rank * args.max_new_tokens), dtype=torch.float64)
        count = count.to(mask.device)
        if world_size > 1:
            dist.all_reduce(count)
        micro = list(range(m0, m0 + per_rank, args.micro_batch_size))
        for j, s in enumerate(micro):
            sl = slice(s, s + args.micro_batch_size)
            sync = j == len(micro) - 1 or world_size == 1
            with (contextlib.nullcontext() if sync else ddp_model.no_sync()):
                with autocast(mask.device, args.bf16):
                    logp, _ = response_logprobs(ddp_model, batch["input_ids"][sl], batch["attention_mask"][sl], R,
                                                args.temperature)
                loss, met = policy_loss(logp, batch["old_logp"][sl], adv[sl], mask[sl], weight[sl], args.clip_low,
                                        clip_high, args.clip_c, num_tokens=count)
                (loss * world_size).backward()
            sums["loss/policy"] += loss.detach()  # this rank's share of the mini-batch loss
            for k in ("clipfrac", "clipfrac_dual", "approx_kl"):
                sums[f"loss/{k}"] += met[k]
            n_micro += 1
        norm = torch.nn.utils.clip_grad_norm_(ddp_model.parameters(), args.max_grad_norm).item()
        if math.isfinite(norm):
            optimizer.step()
        else:
            warnings.warn(f"non-finite gradient norm {norm}: optimizer step skipped")
        optimizer.zero_grad(set_to_none=True)
        norms.append(norm)
    sums = {k: float(v) for k, v in sums.items()}  # one device sync per rollout, not per micro-batch
    out = {k: v / n_micro for k, v in sums.items()}
    out["loss/policy"] = sums["loss/policy"] * world_size / len(norms)  # summed over ranks by the caller's mean
    out["grad_norm"] = sum(norms) / len(norms)
    return out


def rl_step(step, model, ddp_model, optimizer, tok, train_rows, args, rank, world):
    """One rollout batch: sample, reward (Eq. A), one scoring pass (+ Eq. D and Sec. 3.2 for DelTA), then
    several optimizer steps (Eq. B/E). Returns the step's metrics, reduced over ranks."""
    import rewards

    algo = ALGOS[args.algo]
    device = next(model.parameters()).device
    t0 = time.perf_counter()
    ids, epoch = prompt_indices(step, len(train_rows), args, rank, world)
    rows = [train_rows[i] for i in ids]
    prompts = [format_prompt(tok, r["question"], args.instruction) for r in rows for _ in range(args.group_size)]
    batch = generate(model, tok, prompts, args.max_new_tokens, args.temperature, args.top_p, args.top_k,
                     args.gen_batch_size, args.bf16)
    mask = batch["response_mask"]  # [N, R]
    lengths = mask.sum(1)  # [N]
    correct = torch.tensor(rewards.score_batch(decode_responses(tok, batch),
                                               [r["answer"] for r in rows for _ in range(args.group_size)]))
    reward = correct.to(device)  # [N]
    if algo["overlong"]:
        reward = reward + overlong_penalty(lengths, args.max_new_tokens, args.overlong_buffer, args.overlong_penalty)
    adv = group_advantages(reward, args.group_size, algo["adv_scale"])  # [N] Eq. A
    t1 = time.perf_counter()

    batch["old_logp"], entropy, v = score(model, batch, args, features=args.algo == "delta")
    stats, lam = {}, None
    t_coef = time.perf_counter()
    if args.algo == "delta":  # DelTA departs from DAPO here: token coefficients, Sec. 3.2
        lam = delta_coefficients(v, adv, mask, args.K, args.lam_min, args.lam_max, stats=stats)  # [N, R]
        del v
    t2 = time.perf_counter()

    m = train_on_rollout(ddp_model, optimizer, batch, adv, lam, args, world)
    t3 = time.perf_counter()

    groups = reward.view(-1, args.group_size)
    m.update({"reward/mean": reward.mean().item(), "reward/acc": correct.float().mean().item(),
              "response/length": lengths.float().mean().item(),
              "response/truncated": batch["truncated"].float().mean().item(),
              "groups/zero_std": (groups.max(1).values == groups.min(1).values).float().mean().item(),
              "entropy": (entropy * mask).sum().item() / mask.sum().item(),
              "time/generate": t1 - t0, "time/score": t2 - t1, "time/train": t3 - t2, "time/coefficients": t2 - t_coef})
    m = all_mean(m, world, device)
    m["epoch"] = epoch
    if lam is not None:  # global statistics of lam over valid tokens
        lv = lam[mask].double()
        moments = torch.stack([lv.sum(), lv.square().sum(), torch.tensor(float(lv.numel()), device=lv.device)])
        lo, hi = lv.min().clone(), lv.max().clone()
        if world > 1:
            dist.all_reduce(moments)
            dist.all_reduce(lo, op=dist.ReduceOp.MIN)
            dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        mean = moments[0] / moments[2]
        m.update({"delta/lam_mean": mean.item(), "delta/lam_std": (moments[1] / moments[2] - mean ** 2).clamp(min=0).sqrt().item(),
                  "delta/lam_min": lo.item(), "delta/lam_max": hi.item()})
        m.update({f"delta/{k}": x for k, x in stats.items()})
    return m


# =====================================================================================
# 7. Main loop: setup, warm start, evaluation, checkpoints
# =====================================================================================
def setup_distributed():
    """DDP from torchrun's environment variables; plain `python delta.py` runs without torch.distributed."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        if world > 1 and "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", world))))
    if world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return rank, world, device


def all_mean(values: dict, world, device):
    """Mean of each metric over ranks (every rank holds an equal share of the batch)."""
    if world == 1 or not values:
        return values
    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return {k: x / world for k, x in zip(keys, t.tolist())}


def pack(tok, prompts, responses, device):
    """Prompts (left-padded) followed by given responses + eos (right-padded): the layout `generate` returns."""
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    ids = [tok(r, add_special_tokens=False).input_ids + [tok.eos_token_id] for r in responses]
    R = max(map(len, ids))
    resp = torch.tensor([x + [tok.pad_token_id] * (R - len(x)) for x in ids])  # [N, R]
    response_mask = torch.tensor([[1] * len(x) + [0] * (R - len(x)) for x in ids], dtype=torch.bool)
    return {"input_ids": torch.cat([enc.input_ids, resp], 1).to(device),
            "attention_mask": torch.cat([enc.attention_mask.bool(), response_mask], 1).to(device),
            "response_mask": response_mask.to(device), "prompt_len": enc.input_ids.shape[1]}


def evaluate_accuracy(model, tok, rows, args, temperature=0.0):
    """Held-out accuracy (avg@1), greedy by default, through eval.py's functions; sharded over ranks."""
    import eval as evaluation

    records = evaluation.sample_benchmark(model, tok, rows, "math", 1, args.max_new_tokens, temperature, args.top_p,
                                          args.top_k, args.gen_batch_size, args.instruction, args.bf16)
    return evaluation.summarize(records, 1)["avg@1"]


def warm_start(ddp_model, tok, train_rows, eval_rows, args, rank, world, log):
    """Supervised warm start of the tiny default until the accuracy of samples at the rollout temperature
    reaches sft_target_acc, so that RL starts with correct samples in many groups (../shared/notes)."""
    model = ddp_model.module if world > 1 else ddp_model
    device = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=args.sft_lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed + 1)
    per_rank = args.sft_batch_size // world
    sampled = lambda: evaluate_accuracy(model, tok, eval_rows, args, args.temperature)
    acc, step = sampled(), 0
    while acc < args.sft_target_acc and step < args.sft_max_steps:
        idx = torch.randint(len(train_rows), (args.sft_batch_size,), generator=gen)[rank * per_rank:(rank + 1) * per_rank]
        rows = [train_rows[i] for i in idx.tolist()]
        batch = pack(tok, [format_prompt(tok, r["question"], args.instruction) for r in rows], [r["solution"] for r in rows], device)
        R = batch["response_mask"].shape[1]
        logp, _ = response_logprobs(ddp_model, batch["input_ids"], batch["attention_mask"], R, 1.0)
        loss = -(logp * batch["response_mask"]).sum() / batch["response_mask"].sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % 10 == 0:
            acc = sampled()
    log({"step": 0, "sft/steps": step, "sft/sample_accuracy": acc})
    del opt


def rng_state():
    return {"torch": torch.get_rng_state(), "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(s):
    torch.set_rng_state(s["torch"])
    random.setstate(s["python"])
    if s["cuda"] is not None:
        torch.cuda.set_rng_state_all(s["cuda"])


def checkpoints(output_dir):
    """Complete checkpoints, oldest first (a crash mid-save leaves only a .tmp folder, ignored here)."""
    if not os.path.isdir(output_dir):
        return []
    found = [d for d in os.listdir(output_dir) if d.startswith("checkpoint-") and d.split("-")[1].isdigit()]
    return [os.path.join(output_dir, d) for d in sorted(found, key=lambda d: int(d.split("-")[1]))]


def save_atomically(path, write):
    """write(tmp_folder), then rename: a crash never leaves a half-written `path`."""
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    write(tmp)
    if os.path.exists(path):
        shutil.rmtree(path)
    os.replace(tmp, path)


def save_checkpoint(args, step, model, tok, optimizer, rank, world):
    """HF model + optimizer + every rank's RNG + step (the data position is a function of the step)."""
    rngs = [None] * world
    if world > 1:
        dist.all_gather_object(rngs, rng_state())
    else:
        rngs = [rng_state()]
    if rank == 0:
        def write(tmp):
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            torch.save({"step": step, "optimizer": optimizer.state_dict(), "rng": rngs, "world_size": world,
                        "args": dataclasses.asdict(args)}, os.path.join(tmp, "trainer_state.pt"))
        save_atomically(os.path.join(args.output_dir, f"checkpoint-{step}"), write)
        for old in checkpoints(args.output_dir)[:-args.keep_checkpoints]:
            shutil.rmtree(old)
    if world > 1:
        dist.barrier()


def prompt_indices(step, n_rows, args, rank, world):
    """Prompts of rollout step `step` for this rank: a fixed permutation per epoch (resume-exact); each
    rank holds an equal share of every mini-batch, so mini-batches do not depend on the world size."""
    per_epoch = n_rows // args.prompts_per_step
    epoch, i = divmod(step, per_epoch)
    perm = torch.randperm(n_rows, generator=torch.Generator().manual_seed(args.seed * 1000 + epoch))
    ids = perm[i * args.prompts_per_step:(i + 1) * args.prompts_per_step]  # [prompts_per_step]
    return ids.view(-1, world, args.mini_batch_prompts // world)[:, rank].flatten().tolist(), epoch


def resolve_defaults(args):
    args.run_name = args.run_name or f"{args.algo}-{os.path.basename(args.model.rstrip('/')) or 'tiny'}-s{args.seed}"
    args.output_dir = args.output_dir or os.path.join("runs", args.run_name)
    if args.instruction == "auto":
        args.instruction = PROMPT_INSTRUCTION if args.dataset else ""


def load_task(args):
    """Training and held-out rows: the synthetic task, or a local file / hub dataset."""
    if not args.dataset:
        return addition_task(args.seed, args.eval_size)
    train_rows = load_rows(args.dataset, args.dataset_split, args.prompt_key, args.answer_key)
    if args.eval_dataset:
        return train_rows, load_rows(args.eval_dataset, "test", args.prompt_key, args.answer_key)[:args.eval_size]
    return train_rows[args.eval_size:], train_rows[:args.eval_size]


def drop_long_prompts(tok, rows, args):
    fits = lambda r: len(tok(format_prompt(tok, r["question"], args.instruction), add_special_tokens=False).input_ids)
    return [r for r in rows if fits(r) <= args.max_prompt_length]


def main(args: Args):
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    rank, world, device = setup_distributed()
    try:
        validate_args(args, world)
    except ArgumentError:
        if world > 1:
            dist.destroy_process_group()
        raise
    resolve_defaults(args)
    if not args.resume and checkpoints(args.output_dir):
        raise ArgumentError(f"{args.output_dir} holds checkpoints of an earlier run: pass --resume to continue "
                            "it, or choose another --output_dir")
    os.makedirs(args.output_dir, exist_ok=True)
    metrics_path = os.path.join(args.output_dir, "metrics.jsonl")

    train_rows, eval_rows = load_task(args)

    # model: a hub id / local path, the newest checkpoint, or the tiny default built in code
    ckpts = checkpoints(args.output_dir) if args.resume else []
    if args.resume and not ckpts:
        raise ArgumentError(f"--resume: no checkpoint in {args.output_dir}")
    source = ckpts[-1] if ckpts else args.model
    if not source:
        source = os.path.join(args.output_dir, "tiny-init")
        if rank == 0:
            build_tiny(source, args.seed)
        if world > 1:
            dist.barrier()
    model, tok = load_model(source, device)
    train_rows, eval_rows = drop_long_prompts(tok, train_rows, args), drop_long_prompts(tok, eval_rows, args)
    if len(train_rows) < args.prompts_per_step:
        raise ArgumentError(f"only {len(train_rows)} training prompts fit --max_prompt_length {args.max_prompt_length}; "
                            f"need at least --prompts_per_step {args.prompts_per_step}")
    if args.gradient_checkpointing:
        enable_checkpointing(model)
    ddp_model = model
    if world > 1:
        ddp_model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    def log(row):
        if rank == 0:
            with open(metrics_path, "a") as f:
                f.write(json.dumps(row) + "\n")

    per_epoch = len(train_rows) // args.prompts_per_step
    total_steps = args.max_steps or args.epochs * per_epoch
    start = 0
    if ckpts:
        state = torch.load(os.path.join(ckpts[-1], "trainer_state.pt"), weights_only=False)
        if state["world_size"] != world:
            raise ArgumentError(f"{ckpts[-1]} was written by {state['world_size']} processes; resume with as many")
        optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"][rank])
        start = state["step"]
        if rank == 0 and os.path.exists(metrics_path):  # drop rows logged after the checkpoint
            rows = [json.loads(line) for line in open(metrics_path)]
            with open(metrics_path, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows if r["step"] <= start)
    else:
        torch.manual_seed(args.seed + rank)  # sampling differs per rank
        random.seed(args.seed + rank)
        if rank == 0:
            open(metrics_path, "w").close()
            with open(os.path.join(args.output_dir, "args.json"), "w") as f:
                json.dump(dataclasses.asdict(args), f, indent=1)
        if not args.model:
            warm_start(ddp_model, tok, train_rows, eval_rows, args, rank, world, log)
        log({"step": 0, "eval/accuracy": evaluate_accuracy(model, tok, eval_rows, args)})

    stop = {"flag": False}
    for sig in (signal.SIGINT, signal.SIGTERM):  # finish the step, save, exit
        signal.signal(sig, lambda *_: stop.update(flag=True))
    bar = None
    if rank == 0 and args.progress:
        from tqdm import tqdm
        bar = tqdm(total=total_steps, initial=start, desc=args.run_name, dynamic_ncols=True)
    step = start
    while step < total_steps:
        m = rl_step(step, model, ddp_model, optimizer, tok, train_rows, args, rank, world)
        step += 1
        m["step"] = step
        if args.eval_every and step % args.eval_every == 0 or step == total_steps:
            m["eval/accuracy"] = evaluate_accuracy(model, tok, eval_rows, args)
        log(m)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(acc=f"{m['reward/acc']:.2f}", **({"eval": f"{m['eval/accuracy']:.3f}"} if "eval/accuracy" in m else {}))

        flag = torch.tensor([float(stop["flag"])], device=device)
        if world > 1:
            dist.all_reduce(flag)
        if flag.item() > 0 or (args.save_every and step % args.save_every == 0):
            save_checkpoint(args, step, model, tok, optimizer, rank, world)
        if flag.item() > 0:
            if rank == 0:
                print(f"\ninterrupted: checkpoint at step {step} in {args.output_dir}; continue with --resume", file=sys.stderr)
            break
    if bar is not None:
        bar.close()
    if step == total_steps:
        if rank == 0:
            save_atomically(os.path.join(args.output_dir, "final"), lambda tmp, m=model: (m.save_pretrained(tmp), tok.save_pretrained(tmp)))
        if args.save_every == 0 or step % args.save_every:
            save_checkpoint(args, step, model, tok, optimizer, rank, world)
    del ddp_model, model, optimizer  # gloo + DDP can hang at exit otherwise
    gc.collect()
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def parse_args(argv=None) -> Args:
    """Command-line flags, or a single .json / .yaml file holding them."""
    from transformers import HfArgumentParser

    parser = HfArgumentParser(Args)
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and argv[0].endswith(".json"):
        return parser.parse_json_file(argv[0])[0]
    if len(argv) == 1 and argv[0].endswith((".yaml", ".yml")):
        return parser.parse_yaml_file(argv[0])[0]
    return parser.parse_args_into_dataclasses(argv)[0]


if __name__ == "__main__":
    try:
        main(parse_args())
    except ArgumentError as e:
        sys.exit(f"delta.py: error: {e}")
