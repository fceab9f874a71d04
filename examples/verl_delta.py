"""DelTA inside stock verl 0.9.1 (no fork, no change to verl's files), with delta.py's copyable functions.

Loaded through verl's own extension point: every worker imports `actor_rollout_ref.model.external_lib` when it
builds its model config (HFModelConfig.__post_init__), so this module patches two methods of verl's actor and
registers one policy loss before the actor trains. Any trainer touches three places (docs/integrations.md,
"Using DelTA in your trainer"); in verl:

  1. h (Eq. D): in verl's own old-log-prob pass (ActorRolloutRefWorker.compute_log_prob -> TrainingWorker.
     infer_batch) a forward hook on the decoder keeps its output (after the final norm: the LM head's input) at
     the positions that predict the response tokens, and v = (1 - pi_old) h is packed into host memory. When
     that pass cannot be used (its rows or log-probs are not the batch's: rollout-correction bypass mode, a
     driver that reorders rows between the two calls) one no-grad pass through verl's own infer_batch, over the
     same rows, takes h instead, before the step's first optimizer update;
  2. lam (Sec. 3.2): at the start of TrainingWorker.train_mini_batch (this rank's share of the step's batch,
     with verl's per-token advantages), over the global batch through verl's data-parallel group, once per
     rollout batch, for all its mini-batches and epochs (DELTA_SCOPE=rank: per rank, the official fork's scope);
  3. Eq. E: the advantages verl carries per token become A_{i,t} lam_{i,t}; verl's stock `vanilla` loss
     (clip_ratio_low 0.2, clip_ratio_high 0.28, clip_ratio_c 10, token-mean) is then Eq. E. The policy loss
     `delta` this module registers is that loss, unchanged, refusing to run outside a DelTA update: a config
     with `policy_loss.loss_mode=delta` fails at the first update, before any weight moves, when this plugin
     is not configured (verl: "Unsupported loss mode: delta") or did not reweight the batch, and at the
     workers' start when it fails to import.

    PYTHONPATH=$PWD/examples python -m verl.trainer.main_ppo ... trainer.use_v1=False \\
        actor_rollout_ref.model.external_lib=verl_delta actor_rollout_ref.actor.policy_loss.loss_mode=delta
    bash examples/verl_delta.sh          # the paper's recipe (Qwen3-8B-Base, DeepMath-103K) as verl overrides
    bash .ci/verl.sh                     # its own venv (verl pins transformers < 5.11), then test_verl.py on CPU

delta.py: this file imports `token_features` and `delta_coefficients` from the repository's delta.py (the
folder above this one goes on sys.path); copied alone, keep delta.py (or those two functions) beside it.
Settings, from the environment of every worker (defaults: the paper's): DELTA_K=1, DELTA_LAM_MIN=0.8,
DELTA_LAM_MAX=1.2, DELTA_SCOPE=global|rank, DELTA_H=reuse|pass (pass: always the own no-grad pass, no features
held between calls), DELTA_CHUNK_TOKENS=65536 (features streamed from host memory to the GPU in chunks).
Metrics (verl prefixes them `actor/`): delta/lam_mean, lam_std, lam_min, lam_max, lam_zero, disc_acc,
gamma_pos, gamma_neg, scale, h_from_verl_pass (1: h came from verl's old-log-prob pass), seconds.

Refused at the workers' start, with what to change: another verl version (DELTA_VERL_VERSION accepts one the tests
passed on), an engine other than verl's FSDP one (Megatron, torchtitan), Ulysses sequence parallelism,
distillation; a loaded plugin with loss_mode left at vanilla warns (verl's own loss trains).

verl 0.9.1 internals this relies on (docs/verl.md): TrainingWorker.train_mini_batch / infer_batch / set_loss_fn /
loss_fn / engine (FSDPEngineWithLMHead); the engine calls loss_fn(model_output=, data=micro_batch, dp_group=) once
per micro-batch right after `engine.module(...)`; engine.module.get_decoder(); engine.get_data_parallel_group();
no_padding_2_padding; register_policy_loss and compute_policy_loss_vanilla; the dense [B, T] per-token fields of
the v0 trainer (`trainer.use_v1=False`; v1's nested fields are refused, not tested here).
"""
import functools
import os
import sys
import time
import warnings
import weakref

import torch
import torch.distributed as dist

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_REPO, "delta.py")) and _REPO not in sys.path:
    sys.path.append(_REPO)  # last: the repository's other files never shadow a worker's own modules
from delta import delta_coefficients, token_features  # noqa: E402  the copyable functions

import verl  # noqa: E402

TESTED_VERL = "0.9.1"
LOSS_MODE = "delta"
if verl.__version__ not in (TESTED_VERL, os.environ.get("DELTA_VERL_VERSION")):  # before any of verl's internals
    raise ImportError(f"verl_delta relies on verl {TESTED_VERL}'s internals (docs/verl.md) and this is verl "
                      f"{verl.__version__}: pip install verl=={TESTED_VERL}, or run test_verl.py against this version "
                      f"and set DELTA_VERL_VERSION={verl.__version__}")

from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, register_policy_loss  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.device import get_device_id, get_device_name  # noqa: E402
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead  # noqa: E402
from verl.workers.engine_workers import TrainingWorker  # noqa: E402
from verl.workers.utils.losses import ppo_loss  # noqa: E402
from verl.workers.utils.padding import no_padding_2_padding  # noqa: E402


def _settings_from_env():
    env = os.environ.get
    return dict(K=int(env("DELTA_K", "1")), lam_min=float(env("DELTA_LAM_MIN", "0.8")),
                lam_max=float(env("DELTA_LAM_MAX", "1.2")), scope=env("DELTA_SCOPE", "global"),
                h=env("DELTA_H", "reuse"), chunk_tokens=int(env("DELTA_CHUNK_TOKENS", "65536")))


SETTINGS = {}


def configure(**settings):
    """Override settings in this process (the environment sets them in every worker)."""
    new = dict(SETTINGS, **settings)
    if new["scope"] not in ("global", "rank") or new["h"] not in ("reuse", "pass"):
        raise ValueError(f"DELTA_SCOPE must be global or rank and DELTA_H reuse or pass, got {new}")
    if not 0 <= new["lam_min"] <= new["lam_max"] or new["K"] < 0:
        raise ValueError(f"need 0 <= lam_min <= lam_max and K >= 0, got {new}")
    SETTINGS.update(new)


configure(**_settings_from_env())
_IN_UPDATE = [0]  # > 0 while a DelTA update runs in this process


# ---- 3. Eq. E: verl's own vanilla loss on A lam, refusing to run outside a DelTA update ------------------------
@register_policy_loss(LOSS_MODE)
def delta_policy_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None,
                      rollout_is_weights=None):
    """Eq. E: for lam > 0 every branch of the clipped surrogate with dual clip is positively homogeneous in A, so
    verl's vanilla loss on the advantages A_{i,t} lam_{i,t} (put there by train_mini_batch below) is Eq. E."""
    if not _IN_UPDATE[0]:
        raise RuntimeError("policy_loss.loss_mode=delta outside a DelTA update: the advantages were not multiplied "
                           "by lam (verl_delta's TrainingWorker.train_mini_batch did not run)")
    return compute_policy_loss_vanilla(old_log_prob=old_log_prob, log_prob=log_prob, advantages=advantages,
                                       response_mask=response_mask, loss_agg_mode=loss_agg_mode, config=config,
                                       rollout_is_weights=rollout_is_weights)


def _loss_mode(worker):
    """The actor's policy_loss.loss_mode (None for a worker whose loss is not verl's PPO family: ref, critic)."""
    fn = worker.loss_fn
    config = fn.keywords.get("config") if isinstance(fn, functools.partial) else None
    return None if config is None else config.get("policy_loss", {}).get("loss_mode")


def _delta_actor(worker):
    """True for the actor's TrainingWorker when its policy loss is `delta`; refuses what is not supported."""
    if _loss_mode(worker) != LOSS_MODE:
        return False
    fn, engine = worker.loss_fn, worker.engine
    if fn.func is not ppo_loss:
        raise NotImplementedError(f"DelTA with {fn.func.__name__} (distillation) is not supported")
    if not isinstance(engine, FSDPEngineWithLMHead):  # Megatron's module is a list, torchtitan's its own model
        raise NotImplementedError(f"DelTA in verl needs its FSDP engine (actor.strategy=fsdp or fsdp2); this actor "
                                  f"runs {type(engine).__name__} (the plugin hooks the HF decoder of "
                                  "FSDPEngineWithLMHead.module)")
    if getattr(engine, "ulysses_sequence_parallel_size", 1) > 1:
        raise NotImplementedError("DelTA with Ulysses sequence parallelism is not supported (h would need verl's SP "
                                  "gather): set actor.ulysses_sequence_parallel_size=1 (docs/verl.md books the memory "
                                  "of the recipe's 24,576-token micro-batches without it)")
    return True


def _field(data, key):
    t = data[key]
    if t.is_nested:
        raise NotImplementedError(f"'{key}' is nested (verl's v1 trainer): set trainer.use_v1=False")
    return t


# ---- 1. h and Eq. D's v, from a pass of verl's engine ------------------------------------------------------------
class _Features:
    """Collects v = (1 - pi_old) h (Eq. D) of the tokens `keep` [B, T] of a batch while verl's engine runs one
    forward per micro-batch: a hook on the decoder keeps its output (after the final norm: the LM head's input),
    and `loss` (which the engine calls right after each forward, with the micro-batch) maps it to the response
    positions with verl's own no_padding_2_padding and packs the kept tokens, row after row, into one buffer
    [n, H] in the compute dtype, in host memory. pi_old: this pass's log-probs (verl's old-log-prob pass) or the
    batch's old_log_probs (the own pass)."""

    def __init__(self, worker, data, keep, batch_old):
        self.worker, self.keep, self.batch_old = worker, keep, batch_old
        counts = keep.sum(1)  # [B]
        self.start = (counts.cumsum(0) - counts).tolist()
        self.n, self.v, self.logp, self.hidden = int(counts.sum()), None, torch.zeros(int(counts.sum())), []

    def hook(self, module, args, output):
        self.hidden.append(output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0])

    def loss(self, model_output, data, dp_group=None):
        h = self.hidden.pop()  # rmpad: [1, nnz (+ static pad), H]; padded: [b, S, H], right-padded
        assert not self.hidden, "one decoder forward per micro-batch"
        lens = data["input_ids"].offsets().diff().to(h.device)  # [b] prompt + response lengths
        if tu.get_non_tensor_data(data, "use_remove_padding", True):
            flat, where = h[0], torch.arange(int(lens.sum()), device=h.device)  # [nnz] row of `flat` per token
        else:
            flat = h.reshape(-1, h.shape[-1])  # [b S, H]
            where = (torch.arange(h.shape[1], device=h.device)[None] < lens[:, None]).view(-1).nonzero().squeeze(1)
        index = no_padding_2_padding(where, data)  # [b, T]: the state that predicts response token t (verl's map)
        logp = (_field(data, "old_log_probs") if self.batch_old
                else no_padding_2_padding(model_output["log_probs"], data)).float().to(h.device)  # [b, T]
        rows = data["delta_row"].tolist()
        keep = self.keep[rows].to(h.device)  # [b, T]
        v = token_features(flat[index[keep]], logp[keep])  # Eq. D, [n_mb, H]
        if self.v is None:
            self.v = _host_buffer(self.worker, self.n, h.shape[-1], v.dtype)
        s, lp = 0, logp[keep].cpu()
        for r, c in zip(rows, keep.sum(1).tolist()):  # each row's tokens to its place in the buffer
            self.v[self.start[r]:self.start[r] + c].copy_(v[s:s + c], non_blocking=True)
            self.logp[self.start[r]:self.start[r] + c] = lp[s:s + c]
            s += c
        return torch.zeros((), device=h.device), {}

    def run(self, original_infer, data):
        """Runs verl's infer_batch on `data` with this object as the loss function; returns its output."""
        worker, saved = self.worker, self.worker.loss_fn
        handle = worker.engine.module.get_decoder().register_forward_hook(self.hook)
        compute_loss = tu.get(data, "compute_loss", default=True)
        data["delta_row"] = torch.arange(len(data))  # travels with each row through verl's micro-batching
        tu.assign_non_tensor(data, compute_loss=True)  # so the engine calls self.loss after each forward
        worker.loss_fn = self.loss
        try:
            out = original_infer(worker, data)
        finally:
            worker.loss_fn = saved
            handle.remove()
            tu.assign_non_tensor(data, compute_loss=compute_loss)
            data.pop("delta_row")
        if self.v is not None and self.v.is_pinned():
            torch.cuda.synchronize()  # the non-blocking copies into pinned memory are complete
        return out


def _host_buffer(worker, n, H, dtype):
    """[n, H] in host memory, one exact-size block per worker, kept and grown to a step's need, page-locked on a GPU
    machine by registering plain memory (torch's pinned allocator would round each request up to a power of two and
    keep every size; torch's own checkpoint stager registers memory the same way: torch/cuda/_pin_memory_utils.py)."""
    held = getattr(worker, "_delta_host", None)
    if held is None or held.numel() < n * H or held.dtype != dtype:
        worker._delta_host = held = None  # the smaller block goes back before the larger one is taken
        held = torch.empty(n * H, dtype=dtype)
        if torch.cuda.is_available() and n * H:
            from torch.cuda import _pin_memory_utils as pins
            pins.pin_memory(held.data_ptr(), held.numel() * held.element_size())
            weakref.finalize(held.untyped_storage(), pins.unpin_memory, held.data_ptr())
        worker._delta_host = held
    return held[:n * H].view(n, H)


_original_infer_batch = TrainingWorker.infer_batch
_original_train_mini_batch = TrainingWorker.train_mini_batch
_original_set_loss_fn = TrainingWorker.set_loss_fn


@functools.wraps(_original_set_loss_fn)
def set_loss_fn(self, loss_fn):
    """verl's set_loss_fn, at the worker's start (ActorRolloutRefWorker.init_model): an actor that DelTA cannot run
    is refused here, before any rollout; a loaded plugin whose loss mode is not `delta` says it trains verl's own
    loss (the plugin inert: intended for a baseline, a silent DAPO run otherwise)."""
    _original_set_loss_fn(self, loss_fn)
    mode = _loss_mode(self)
    if mode is not None and mode != LOSS_MODE and not getattr(TrainingWorker, "_delta_warned", False):
        TrainingWorker._delta_warned = True
        warnings.warn(f"verl_delta is loaded (actor_rollout_ref.model.external_lib) but the actor's "
                      f"policy_loss.loss_mode is {mode!r}: this run trains verl's {mode} loss, not DelTA; set "
                      f"actor_rollout_ref.actor.policy_loss.loss_mode={LOSS_MODE}", stacklevel=2)
    _delta_actor(self)  # refuses an engine, distillation or sequence parallelism DelTA cannot run


@functools.wraps(_original_infer_batch)  # keeps verl's dispatch metadata (@register) on the method
def infer_batch(self, data):
    """verl's infer_batch; in the actor's old-log-prob pass it also keeps v of every valid response token (the
    advantages do not exist yet), with the batch's token ids and the pass's log-probs to recognise the batch."""
    if (not _delta_actor(self) or SETTINGS["h"] != "reuse" or tu.get(data, "compute_loss", default=True)
            or tu.get(data, "no_lora_adapter", default=False)):  # not the old-log-prob pass (the reference's)
        return _original_infer_batch(self, data)
    self._delta_held = None
    mask = _field(data, "response_mask").bool()  # [B, T]
    feats = _Features(self, data, mask, batch_old=False)
    out = feats.run(_original_infer_batch, data)
    ids = data["input_ids"]
    self._delta_held = dict(v=feats.v, logp=feats.logp, mask=mask.cpu(), ids=ids.values().cpu(),
                            offsets=ids.offsets().cpu())
    return out


def _held_for(held, data, mask, old):
    """Whether the features held from the old-log-prob pass are this batch's: same rows, tokens, mask and pi_old."""
    ids = data["input_ids"]
    return (held is not None and held["mask"].shape == mask.shape and torch.equal(held["mask"], mask.cpu())
            and torch.equal(held["offsets"], ids.offsets().cpu()) and torch.equal(held["ids"], ids.values().cpu())
            and torch.equal(held["logp"], old[mask].float().cpu()))


# ---- 2. lam over the global batch, and A lam ----------------------------------------------------------------------
@functools.wraps(_original_train_mini_batch)
def train_mini_batch(self, data):
    """verl's train_mini_batch on advantages A lam (Eq. E), lam computed once over this rollout batch (Sec. 3.2)
    before the first optimizer step; DelTA's statistics join verl's metrics."""
    if not _delta_actor(self):
        return _original_train_mini_batch(self, data)
    t0, s = time.perf_counter(), SETTINGS
    adv = _field(data, "advantages")  # [B, T] per token (GRPO: A_i on every token of response i)
    mask, old = _field(data, "response_mask").bool(), _field(data, "old_log_probs")  # [B, T]
    dp = self.engine.get_data_parallel_group()
    held, self._delta_held = getattr(self, "_delta_held", None), None
    reuse = torch.tensor([int(s["h"] == "reuse" and _held_for(held, data, mask, old))])
    dist.all_reduce(reuse, op=dist.ReduceOp.MIN, group=dp)  # every rank runs the own pass, or none (FSDP)
    if reuse.item():  # 1. h from verl's old-log-prob pass: v of every valid token, zero-advantage ones included
        v, side, num_valid = held["v"], mask, None
    else:  # 1. one no-grad pass over this rank's rows (the same micro-batches on every rank), before any update
        held = None
        side = mask & (adv != 0)  # [B, T] only tokens of non-zero advantage need a feature
        feats = _Features(self, data, side, batch_old=True)
        infer = data.copy()
        tu.assign_non_tensor(infer, calculate_entropy=False, compute_loss=False)
        feats.run(_original_infer_batch, infer)
        v, num_valid = feats.v, int(mask.sum())
    device = torch.device("cpu") if get_device_name() == "cpu" else torch.device(get_device_name(), get_device_id())
    stats = {}
    lam_side = delta_coefficients(v, adv[side].to(device, torch.float32), torch.ones(int(side.sum()), dtype=torch.bool,
                                  device=device), s["K"], s["lam_min"], s["lam_max"], stats=stats, num_valid=num_valid,
                                  chunk_tokens=s["chunk_tokens"], group=dp if s["scope"] == "global" else None)  # [n]
    lam = torch.where(mask, stats["lam_zero"], 0.0)  # [B, T]; tokens of zero-advantage responses: lam_min * scale
    lam[side] = lam_side.float().cpu()
    del v, held
    data["advantages"] = (adv.float() * lam).to(adv.dtype)  # 3. Eq. E: A_{i,t} lam_{i,t}
    metrics = _metrics(lam, mask, stats, dp, bool(reuse.item()), time.perf_counter() - t0)
    _IN_UPDATE[0] += 1
    try:
        out = _original_train_mini_batch(self, data)
    finally:
        _IN_UPDATE[0] -= 1
    if out is not None:
        tu.assign_non_tensor(out, metrics=dict(tu.get(out, "metrics"), **metrics))
    return out


def _metrics(lam, mask, stats, group, reused, seconds):
    """lam's mean, std, min and max over the global batch; the coefficients' statistics (averaged over ranks, which
    hold the same values unless the scope is per rank)."""
    lv = lam[mask].double()
    moments = torch.stack([lv.sum(), lv.square().sum(), torch.tensor(float(lv.numel()), dtype=torch.float64)])
    keys = ("disc_acc", "gamma_pos", "gamma_neg", "scale", "lam_zero")
    mean_stats = torch.tensor([stats[k] for k in keys], dtype=torch.float64) / dist.get_world_size(group)
    lo, hi = lv.min() if lv.numel() else lv.new_tensor(1.0), lv.max() if lv.numel() else lv.new_tensor(1.0)
    for t, op in ((moments, dist.ReduceOp.SUM), (mean_stats, dist.ReduceOp.SUM), (lo, dist.ReduceOp.MIN),
                  (hi, dist.ReduceOp.MAX)):
        dist.all_reduce(t, op=op, group=group)
    mean = moments[0] / moments[2]
    out = {"delta/lam_mean": mean, "delta/lam_std": (moments[1] / moments[2] - mean ** 2).clamp(min=0).sqrt(),
           "delta/lam_min": lo, "delta/lam_max": hi, "delta/h_from_verl_pass": float(reused), "delta/seconds": seconds}
    out.update({f"delta/{k}": x for k, x in zip(keys, mean_stats)})
    return {k: [float(x)] for k, x in out.items()}  # lists: verl's reduce_metrics averages them


_installed = getattr(TrainingWorker.train_mini_batch, "_delta_state", None)
if _installed is None:  # patch once per process, whatever name this module is imported under
    infer_batch._delta_state = train_mini_batch._delta_state = (SETTINGS, _IN_UPDATE)
    TrainingWorker.infer_batch = infer_batch
    TrainingWorker.train_mini_batch = train_mini_batch
    TrainingWorker.set_loss_fn = set_loss_fn
else:  # a copy of this module already patched verl: share its settings and update counter
    SETTINGS, _IN_UPDATE = _installed
