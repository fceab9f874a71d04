"""DelTA inside stock verl 0.9.1 (examples/verl_delta.py), proven on CPU in verl's own worker.

Runs in its own environment (verl pins transformers < 5.11 and pulls Ray): `bash .ci/verl.sh` builds it from
requirements-verl.txt and runs `python -m pytest -q test_verl.py`; the main suite (pytest.ini) never collects
this file. Each setting runs in a fresh process group (torchrun, 1 or 2 gloo processes; this file is the worker
script): verl's ActorRolloutRefWorker(role="actor") with FSDP2 on the tiny Qwen3 that tasks.build_tiny saves (and,
where DELTA_REAL_MODEL names its folder, on SmolLM2-135M-Instruct: .ci/real.sh makes it), fed
by verl's own v0 driver code (RayPPOTrainer._compute_old_log_prob / _update_actor, compute_advantage), and
compared with delta.py's own forward (delta.response_logprobs on the model loaded with from_pretrained),
group_advantages, delta_coefficients and policy_loss on the whole batch.

    bash .ci/verl.sh                                            # venv + tests
    python -m pytest -q -s test_verl.py                         # in that venv: also prints the measured figures
    torchrun --nproc_per_node 2 test_verl.py plugin TINY 1 OUT.json   # one setting by hand (use_remove_padding=1)

CPU shims (here only, never in the plugin; on GPUs verl's stock detection applies):
  1. a CPU platform (CPUPlatform below: device "cpu", backend gloo, no-op memory statistics) set with verl's
     set_platform before verl.workers.engine is imported (it caches the device name at import);
  2. VERL_ENGINE_DEVICE=cuda: FSDPEngineWithLMHead is registered for cuda and npu only;
  3. a gloo process group initialised here (torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so verl does
     not build its "cpu:gloo,<device>:<backend>" group;
  4. fastapi, uvicorn and cachetools (verl's verl-core extra; imported by engine_workers and the v0 driver);
  5. actor_rollout_ref.model.override_config.attn_implementation=sdpa (verl defaults to flash_attention_2);
  6. actor_rollout_ref.actor.strategy=fsdp2 (FSDP1 wants parameters on a GPU);
  7. LocalWorkerGroup: stands in for Ray's worker group (verl's BatchData.chunk, a pickle round trip as Ray's
     transport, all_gather_object, BatchData.concat).
For exact comparisons: fp32 parameters, reduction and buffers (mixed_precision overrides), no torch.compile,
lr 0 (the weights stay those of the reference; the gradients are read before the optimizer step).
"""
import contextlib
import copy
import json
import os
import pickle
import subprocess
import sys
import types

import pytest
import torch

ROOT = os.path.dirname(os.path.abspath(__file__))
G, B, P, T, TEMPERATURE = 4, 16, 7, 10, 0.7  # group size, rows, longest prompt and response, rollout temperature
SCORES = [1., 0., 0., 1., 1., 1., 1., 1., 0., 0., 1., 0., 1., 0., 1., 1.]  # group 1: one reward, zero advantage


# ====================================================================== the worker: one setting in one process group
def cpu_shims():
    """Shims 1-3 (module docstring), before verl's engine module is imported."""
    os.environ["VERL_ENGINE_DEVICE"] = "cuda"  # 2.
    import torch.distributed as dist
    from verl.plugin.platform.platform_base import PlatformBase
    from verl.plugin.platform.platform_manager import set_platform

    device = types.ModuleType("verl_cpu_device")  # torch.cpu plus the memory calls verl makes on a device module
    device.__dict__.update({k: getattr(torch.cpu, k) for k in dir(torch.cpu) if not k.startswith("_")})
    for name in ("memory_reserved", "memory_allocated", "max_memory_allocated", "max_memory_reserved"):
        setattr(device, name, lambda *a, **k: 0)
    for name in ("empty_cache", "reset_peak_memory_stats", "ipc_collect", "set_per_process_memory_fraction"):
        setattr(device, name, lambda *a, **k: None)
    device.mem_get_info, device.is_available, device.get_device_name = (lambda *a: (0, 0)), (lambda: True), \
        (lambda *a: "CPU")

    class CPUPlatform(PlatformBase):  # 1.
        device_name, vendor_name, device_module = "cpu", "cpu", device

        def is_available(self): return True
        def current_device(self): return "cpu"
        def device_count(self): return 1
        def set_device(self, index): pass
        def synchronize(self, index=None): pass
        def manual_seed(self, seed): torch.manual_seed(seed)
        def manual_seed_all(self, seed): torch.manual_seed(seed)
        def set_allocator_settings(self, settings): pass
        def empty_cache(self): pass
        def get_device_capability(self, index=0): return None, None
        def communication_backend_name(self): return "gloo"
        def visible_devices_envvar(self): return "CUDA_VISIBLE_DEVICES"
        def nvtx_range(self, msg): return contextlib.nullcontext()
        def profiler_start(self): pass
        def profiler_stop(self): pass
        def ray_resource_name(self): return "CPU"
        def ray_noset_envvars(self): return []
        def is_ipc_supported(self): return False
        def cudart(self): return None

    set_platform(CPUPlatform())
    dist.init_process_group("gloo")  # 3.
    return dist.get_rank(), dist.get_world_size()


def verl_config(tiny, rmpad, loss_mode, external_lib=None, lr=0.0):
    """verl's own ppo_trainer config through hydra, with the shims' overrides (5, 6) and the paper's loss."""
    import verl
    from hydra import compose, initialize_config_dir

    dynamic = ["actor_rollout_ref.actor.use_dynamic_bsz=True",
               "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
               "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=40",
               "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=40"]  # reordered micro-batches
    overrides = [
        f"actor_rollout_ref.model.path={tiny}", f"actor_rollout_ref.model.use_remove_padding={rmpad}",
        f"actor_rollout_ref.model.external_lib={external_lib or 'null'}",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa", "actor_rollout_ref.actor.strategy=fsdp2",
        f"actor_rollout_ref.rollout.n={G}", f"actor_rollout_ref.actor.ppo_mini_batch_size={B // G}",  # 1 mini-batch
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        f"actor_rollout_ref.actor.policy_loss.loss_mode={loss_mode}", "actor_rollout_ref.actor.clip_ratio_low=0.2",
        "actor_rollout_ref.actor.clip_ratio_high=0.28", "actor_rollout_ref.actor.clip_ratio_c=10.0",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean", "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.actor.use_kl_loss=False", f"actor_rollout_ref.actor.optim.lr={lr}",
        "actor_rollout_ref.actor.optim.clip_grad=1e9", "actor_rollout_ref.actor.use_torch_compile=False",
        *[f"+actor_rollout_ref.actor.fsdp_config.mixed_precision.{k}=fp32"
          for k in ("param_dtype", "reduce_dtype", "buffer_dtype")],
        f"actor_rollout_ref.rollout.temperature={TEMPERATURE}",
        *(dynamic if rmpad else [])]
    with initialize_config_dir(os.path.join(os.path.dirname(verl.__file__), "trainer", "config"), version_base=None):
        return compose("ppo_trainer", overrides=overrides)


class LocalWorkerGroup:
    """Shim 7: what Ray's worker group does for make_nd_compute_dataproto_dispatch_fn: this rank's chunk of the batch
    (verl's BatchData.chunk), through a pickle round trip (Ray's transport), and every rank's output concatenated."""

    def __init__(self, worker):
        import torch.distributed as dist
        self.worker, self.rank, self.world, self.dist, self.inputs = worker, dist.get_rank(), dist.get_world_size(), \
            dist, {}

    def _call(self, method, data):
        from verl.protocol import BatchData
        chunk = pickle.loads(pickle.dumps(BatchData(data).chunk(chunks=self.world)[self.rank]))
        self.inputs[method] = chunk  # the worker-side batch, as the worker left it
        out = getattr(self.worker, method)(chunk)
        outs = [None] * self.world
        self.dist.all_gather_object(outs, out)
        return BatchData(outs).concat()

    def compute_log_prob(self, data):
        return self._call("compute_log_prob", data)

    def update_actor(self, data):
        return self._call("update_actor", data)


class Driver:
    """verl's v0 driver methods (trainer.use_v1=False) around the local worker group."""

    def __init__(self, config, worker):
        self.config, self.distillation_config, self.actor_rollout_wg = config, None, LocalWorkerGroup(worker)
        self.worker = worker

    def old_log_prob(self, batch):
        from verl.trainer.ppo.ray_trainer import RayPPOTrainer
        return batch.union(RayPPOTrainer._compute_old_log_prob(self, batch)[0])

    def update(self, batch):
        """verl's update_actor on the batch: its metrics, the advantages verl's policy loss received (every row, all
        ranks), the gradients before the last optimizer step, the optimizer steps, and the decoder forwards that ran
        without gradient (own passes)."""
        from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY
        from verl.trainer.ppo.ray_trainer import RayPPOTrainer
        engine, grads, steps, nograd, seen = self.worker.actor.engine, {}, [], [], []
        mode = self.config.actor_rollout_ref.actor.policy_loss.loss_mode
        step, loss_fn = engine.optimizer_step, POLICY_LOSS_REGISTRY.get(mode)  # None: verl will refuse the mode

        def optimizer_step():
            grads.update({n: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).clone()
                          for n, p in engine.module.named_parameters()})
            steps.append(1)
            return step()

        def recorder(**kw):  # what verl's loss receives, micro-batch by micro-batch ([b, T], rows in verl's order)
            seen.append((kw["old_log_prob"].detach().clone(), kw["advantages"].detach().clone()))
            return loss_fn(**kw)
        engine.optimizer_step = optimizer_step
        if loss_fn is not None:
            POLICY_LOSS_REGISTRY[mode] = recorder
        hook = engine.module.get_decoder().register_forward_hook(
            lambda m, i, o: nograd.append(1) if not torch.is_grad_enabled() else None)
        try:
            metrics = RayPPOTrainer._update_actor(self, copy.deepcopy(batch)).meta_info["metrics"]
        finally:
            hook.remove()
            del engine.optimizer_step
            if loss_fn is not None:
                POLICY_LOSS_REGISTRY[mode] = loss_fn
        old = self.actor_rollout_wg.inputs["update_actor"]["old_log_probs"]  # this rank's rows
        adv = torch.full_like(old, float("nan"))
        for seen_old, seen_adv in seen:  # each received row back to its place (its pi_old log-probs identify it)
            for o, a in zip(seen_old, seen_adv):
                (i,) = [i for i in range(len(old)) if torch.equal(old[i], o)]
                adv[i] = a
        advs = [None] * self.actor_rollout_wg.world
        self.actor_rollout_wg.dist.all_gather_object(advs, adv)
        return dict(metrics=metrics, grads=grads, adv=torch.cat(advs), steps=len(steps), nograd_forwards=len(nograd))


def make_worker(config):
    from verl.workers.engine_workers import ActorRolloutRefWorker
    worker = ActorRolloutRefWorker(config.actor_rollout_ref, role="actor")
    worker.init_model()
    return worker


def rollout(seed=0):
    """A rollout batch in verl's driver layout (DataProto): left-padded prompts, right-padded eos-terminated
    responses of uneven lengths, GRPO groups of G, token_level_rewards with SCORES on each last token."""
    import numpy as np
    from verl import DataProto
    g = torch.Generator().manual_seed(seed)
    prompt_len, response_len = torch.randint(3, P + 1, (B,), generator=g), torch.randint(3, T, (B,), generator=g)
    prompts, responses = torch.zeros(B, P, dtype=torch.long), torch.zeros(B, T, dtype=torch.long)  # pad = eos = 0
    attention = torch.zeros(B, P + T, dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompt_len.tolist(), response_len.tolist())):
        prompts[i, P - p:] = torch.randint(2, 98, (p,), generator=g)
        responses[i, :r] = torch.randint(2, 98, (r,), generator=g)  # then the eos at position r
        attention[i, P - p:P + r + 1] = 1
    rewards = torch.zeros(B, T)
    rewards[torch.arange(B), response_len] = torch.tensor(SCORES)
    tensors = dict(prompts=prompts, responses=responses, input_ids=torch.cat([prompts, responses], 1),
                   attention_mask=attention, position_ids=(attention.cumsum(1) - 1).clamp(min=0),
                   response_mask=attention[:, P:].clone(), token_level_rewards=rewards)
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": np.array([str(i // G) for i in range(B)], object)},
                               meta_info={"temperature": TEMPERATURE, "global_token_num": attention.sum(1).tolist(),
                                          "images_seqlens": []})


def off_policy(batch):
    """pi_old moved away from pi: ratios far from 1 (the clip binds), and e^3 > c = 10 on the first token of every
    negative-advantage response (the dual clip binds)."""
    old = batch.batch["old_log_probs"].clone()
    old += 0.6 * torch.randn(old.shape, generator=torch.Generator().manual_seed(1))
    old[torch.tensor(SCORES).view(-1, G).mean(1).repeat_interleave(G) > torch.tensor(SCORES), 0] -= 3.0
    out = copy.deepcopy(batch)
    out.batch["old_log_probs"] = old
    return out


def grad_diff(grads, ref):
    """The largest |verl - reference| of any gradient entry, relative to that tensor's largest reference entry."""
    return max(float((grads[n] - g).abs().max() / g.abs().max().clamp(min=1e-12)) for n, g in ref.items())


def main_plugin(tiny, rmpad, out):
    """All checks of one setting; figures to `out` (JSON, rank 0)."""
    rank, world = cpu_shims()
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "examples"))  # external_lib=verl_delta is imported from here
    import checkpoints
    import delta
    import rewards
    from delta import delta_coefficients, group_advantages, policy_loss, token_features
    from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY
    from verl.trainer.ppo.ray_trainer import compute_advantage

    config = verl_config(tiny, rmpad, "delta", external_lib="verl_delta")
    worker = make_worker(config)
    import verl_delta  # the module verl imported (external_lib)
    driver, res = Driver(config, worker), {"world": world, "rmpad": rmpad}
    batch = compute_advantage(driver.old_log_prob(rollout()), adv_estimator="grpo", num_repeat=G,
                              norm_adv_by_std_in_grpo=True)

    # delta.py on the whole batch: its own forward of the model loaded through from_pretrained (Eq. D's h and
    # log pi_old), group_advantages (Eq. A), delta_coefficients (Sec. 3.2), policy_loss (Eq. B, E)
    model = checkpoints.load_model(tiny, torch.device("cpu"))[0]
    ids, attention = batch.batch["input_ids"], batch.batch["attention_mask"]
    mask, adv_verl = batch.batch["response_mask"].bool(), batch.batch["advantages"]
    with torch.no_grad():
        logp, _, h = delta.response_logprobs(model, ids, attention, T, TEMPERATURE)  # [B, T], [B, T, H]
    adv = group_advantages(torch.tensor(SCORES), G)  # [B]
    res["old_logp_diff"] = float((batch.batch["old_log_probs"] - logp)[mask].abs().max())
    res["adv_diff"] = float((adv_verl - adv[:, None] * mask).abs().max())
    v, stats = token_features(h, logp), {}
    lam = delta_coefficients(v, adv, mask, stats=stats)  # global: the whole batch
    rows = torch.arange(B).chunk(world)  # verl's dispatch gives rank r the r-th contiguous chunk
    lam_rank = torch.cat([delta_coefficients(v[r], adv[r], mask[r]) for r in rows])  # per rank, the fork's scope
    side = mask & (adv != 0)[:, None]  # the tokens whose lam verl's advantages carry

    def lam_seen(run):  # lam from the advantages verl's loss received, A lam / A
        return torch.where(side, run["adv"] / torch.where(side, adv_verl, 1.0), 0.0)

    def reference(old, lam_ref):  # policy_loss (Eq. E) and its gradients, on the whole batch
        model.zero_grad()
        loss, met = policy_loss(delta.response_logprobs(model, ids, attention, T, TEMPERATURE)[0], old, adv, mask,
                                lam_ref, 0.2, 0.28, 10.0, num_tokens=mask.sum())
        loss.backward()
        return float(loss), {n: p.grad.clone() for n, p in model.named_parameters()}, met

    # 1. h from verl's old-log-prob pass (no pass of its own), lam over the global batch, on-policy
    run = driver.update(batch)
    res["lam_diff"] = float((lam_seen(run) - lam)[side].abs().max())
    res["lam_zero_diff"] = abs(run["metrics"]["actor/delta/lam_zero"][0] - float(lam[mask & (adv == 0)[:, None]][0]))
    res["lam_std"], res["nograd_forwards"] = float(lam[mask].std()), run["nograd_forwards"]
    res["metrics"] = {k: x[0] for k, x in run["metrics"].items() if k.startswith("actor/delta/")}
    res["metrics_verl"] = sorted(run["metrics"])
    res["ref_stats"] = stats
    ref_loss, ref_grads, _ = reference(batch.batch["old_log_probs"], lam)
    res["loss_diff_on_policy"] = abs(run["metrics"]["actor/pg_loss"][0] - ref_loss)
    res["grad_diff_on_policy"] = grad_diff(run["grads"], ref_grads)

    # 2. the per-rank option (group=None, the official fork's scope)
    verl_delta.configure(scope="rank")
    run = driver.update(driver.old_log_prob(copy.deepcopy(batch)))
    verl_delta.configure(scope="global")
    res["lam_rank_diff"] = float((lam_seen(run) - lam_rank)[side].abs().max())
    res["rank_vs_global"] = float((lam_seen(run) - lam)[side].abs().max())
    res["rank_nograd_forwards"] = run["nograd_forwards"]

    # 3. off-policy: pi_old moved, so the features held from verl's pass are not this batch's -> one own pass
    driver.old_log_prob(copy.deepcopy(batch))  # holds features whose pi_old the update will not match
    moved = off_policy(batch)
    old = moved.batch["old_log_probs"]
    lam_off = delta_coefficients(token_features(h, old), adv, mask)
    run = driver.update(moved)
    ref_loss, ref_grads, met = reference(old, lam_off)
    res["off_lam_diff"] = float((lam_seen(run) - lam_off)[side].abs().max())
    res["off_nograd_forwards"], res["off_h_from_verl_pass"] = run["nograd_forwards"], \
        run["metrics"]["actor/delta/h_from_verl_pass"][0]
    res["off_loss"], res["off_loss_ref"] = run["metrics"]["actor/pg_loss"][0], ref_loss
    res["off_loss_diff"] = abs(run["metrics"]["actor/pg_loss"][0] - ref_loss)
    res["off_grad_diff"] = grad_diff(run["grads"], ref_grads)
    res["clipfrac"], res["clipfrac_dual"] = float(met["clipfrac"]), float(met["clipfrac_dual"])
    res["verl_clipfrac"], res["verl_clipfrac_dual"] = run["metrics"]["actor/pg_clipfrac"][0], \
        run["metrics"]["actor/pg_clipfrac_lower"][0]

    # 4. lam = 1 (the band [1, 1]): DAPO, policy_loss(lam=None); main_stock saves verl's own vanilla loss
    verl_delta.configure(lam_min=1.0, lam_max=1.0)
    run = driver.update(moved)
    verl_delta.configure(lam_min=0.8, lam_max=1.2)
    ref_loss, ref_grads, _ = reference(old, None)
    res["one_loss"], res["one_loss_diff"] = run["metrics"]["actor/pg_loss"][0], \
        abs(run["metrics"]["actor/pg_loss"][0] - ref_loss)
    res["one_grad_diff"] = grad_diff(run["grads"], ref_grads)
    if rank == 0:
        torch.save(run["grads"], out + ".grads")  # compared with verl's own vanilla loss (main_stock)

    # 5. DELTA_H=pass: nothing held from verl's pass, the own pass gives the same lam
    verl_delta.configure(h="pass")
    run = driver.update(driver.old_log_prob(copy.deepcopy(batch)))
    verl_delta.configure(h="reuse")
    res["pass_lam_diff"] = float((lam_seen(run) - lam)[side].abs().max())
    res["pass_nograd_forwards"] = run["nograd_forwards"]

    # 6. the registered loss refuses to run outside a DelTA update
    res["registered"] = POLICY_LOSS_REGISTRY["delta"] is verl_delta.delta_policy_loss
    try:
        verl_delta.delta_policy_loss(logp, logp, adv_verl, mask, config=worker.actor.loss_fn.keywords["config"])
        res["outside_update"] = "ran"
    except RuntimeError as e:
        res["outside_update"] = str(e)

    # 7. lam at pi_old, before the step's first optimizer update: 2 mini-batches with lr > 0, so the weights move
    # between them, and the advantages both mini-batches' losses receive still carry the lam of pi_old (last: the
    # weights leave the reference's here)
    engine = worker.actor.engine
    for group in engine.optimizer.param_groups:
        group["lr"] = 1e-2  # verl's constant scheduler puts its base lr (0) back at the end of the update
    before = {n: p.full_tensor().clone() for n, p in engine.module.named_parameters()}
    two = copy.deepcopy(config)
    two.actor_rollout_ref.actor.ppo_mini_batch_size = B // G // 2
    run = Driver(two, worker).update(driver.old_log_prob(copy.deepcopy(batch)))
    res["two_steps"], res["two_h_from_verl_pass"] = run["steps"], run["metrics"]["actor/delta/h_from_verl_pass"][0]
    res["two_lam_diff"] = float((lam_seen(run) - lam)[side].abs().max())
    res["two_moved"] = max(float((p.full_tensor() - before[n]).abs().max())
                           for n, p in engine.module.named_parameters())
    if rank == 0:
        json.dump(res, open(out, "w"))


def main_stock(tiny, out):
    """verl without the plugin: its own vanilla (DAPO) loss on the off-policy batch, then the two ways the plugin can
    be missing from a DelTA config: it fails to load (a bad setting), or it is not configured at all."""
    cpu_shims()
    from verl.trainer.ppo.ray_trainer import compute_advantage
    res = {}
    for rmpad in (False, True):  # lr > 0: the control for "no weight moved" below
        config = verl_config(tiny, rmpad, "vanilla", lr=1e-2)
        worker = make_worker(config)
        driver = Driver(config, worker)
        batch = compute_advantage(driver.old_log_prob(rollout()), adv_estimator="grpo", num_repeat=G,
                                  norm_adv_by_std_in_grpo=True)
        before = {n: p.full_tensor().clone() for n, p in worker.actor.engine.module.named_parameters()}
        run = driver.update(off_policy(batch))
        res[f"vanilla_moved_{rmpad}"] = any(not torch.equal(before[n], p.full_tensor())
                                            for n, p in worker.actor.engine.module.named_parameters())
        res[f"vanilla_loss_{rmpad}"] = run["metrics"]["actor/pg_loss"][0]
        torch.save(run["grads"], f"{out}.grads{int(rmpad)}")
    os.environ["DELTA_SCOPE"] = "sideways"  # the plugin raises while loading
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        make_worker(verl_config(tiny, True, "delta", external_lib="verl_delta"))
        res["bad_load"] = "loaded"
    except Exception as e:  # noqa: BLE001
        res["bad_load"] = f"{type(e).__name__}: {e}"
    del os.environ["DELTA_SCOPE"]
    config = verl_config(tiny, True, "delta", lr=1e-2)  # no external_lib: a DelTA config without the plugin
    worker = make_worker(config)
    driver = Driver(config, worker)
    batch = compute_advantage(driver.old_log_prob(rollout()), adv_estimator="grpo", num_repeat=G,
                              norm_adv_by_std_in_grpo=True)
    before = {n: p.full_tensor().clone() for n, p in worker.actor.engine.module.named_parameters()}
    try:
        driver.update(batch)
        res["missing_plugin"] = "trained"
    except Exception as e:  # noqa: BLE001
        res["missing_plugin"] = f"{type(e).__name__}: {e}"
    after = {n: p.full_tensor() for n, p in worker.actor.engine.module.named_parameters()}
    res["weights_moved"] = any(not torch.equal(before[n], after[n]) for n in before)
    res["plugin_imported"] = "verl_delta" in sys.modules
    json.dump(res, open(out, "w"))


# ================================================================================================ the tests (pytest)
REAL = os.environ.get("DELTA_REAL_MODEL")  # SmolLM2-135M-Instruct's folder, where the real-model job made it
SETTINGS = [(1, False, "tiny"), (1, True, "tiny"), (2, False, "tiny"), (2, True, "tiny")] + (
    [(1, True, "real"), (2, True, "real")] if REAL else [])  # processes, use_remove_padding, model
IDS = [f"{w}proc-{'rmpad' if r else 'padded'}" + ("-real" if m == "real" else "") for w, r, m in SETTINGS]
# fp32 tolerances of the forward: the real model's 30 layers take verl's unpadded pass and delta.py's padded one
# up to 3.1e-5 apart in log pi_old and 1e-4 in a gradient (relative to its tensor's largest entry), measured with
# `DELTA_REAL_MODEL=... python -m pytest -s test_verl.py -k real`; on 1 process the plugin at lam = 1 and stock verl
# are equal to the bit, so the gap is the forward's, not DelTA's. What DelTA adds (lam, the loss) keeps the tiny
# model's tolerances.
TOL = {"tiny": dict(logp=1e-5, grad=1e-5), "real": dict(logp=1e-4, grad=3e-4)}


def torchrun(nproc, *args):
    """This file as the worker script of `nproc` gloo processes; DelTA's settings at their defaults."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DELTA_")}
    env.update(OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_port",
                        str(port), os.path.abspath(__file__), *map(str, args)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny Qwen3 + character tokenizer of delta.py, saved with save_pretrained (verl loads it with
    from_pretrained)."""
    pytest.importorskip("verl")
    sys.path.insert(0, ROOT)
    import tasks
    path = str(tmp_path_factory.mktemp("tiny"))
    tasks.build_tiny(path, seed=0)
    return path


@pytest.fixture(scope="session")
def runs(tiny, tmp_path_factory):
    """Figures of each setting (main_plugin), each run once; model: "tiny", or "real" (DELTA_REAL_MODEL)."""
    done, folder = {}, tmp_path_factory.mktemp("runs")

    def get(world, rmpad, model="tiny"):
        if (world, rmpad, model) not in done:
            out = str(folder / f"{world}-{int(rmpad)}-{model}.json")
            torchrun(world, "plugin", tiny if model == "tiny" else REAL, int(rmpad), out)
            done[world, rmpad, model] = dict(json.load(open(out)), grads=out + ".grads")
        return done[world, rmpad, model]
    return get


@pytest.fixture(scope="session")
def stock(tiny, tmp_path_factory):
    """verl without the plugin (main_stock), on each model, each run once."""
    done, folder = {}, tmp_path_factory.mktemp("stock")

    def get(model="tiny"):
        if model not in done:
            out = str(folder / f"stock-{model}.json")
            torchrun(1, "stock", tiny if model == "tiny" else REAL, out)
            done[model] = dict(json.load(open(out)), grads=out + ".grads")
        return done[model]
    return get


def show(name, figures):
    print(f"\n{name}: " + ", ".join(f"{k} {v:.2g}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()))


@pytest.mark.parametrize("world,rmpad,model", SETTINGS, ids=IDS)
def test_lam_from_verls_old_log_prob_pass_equals_delta_py(runs, world, rmpad, model):
    """Inside verl's worker, h is the decoder's output in verl's own old-log-prob pass (no forward of the plugin's
    during the update), and the lam verl's loss receives (as A lam) is delta_coefficients on delta.py's own forward
    of the whole batch, over every rank's rows; DELTA_H=pass (one no-grad pass of its own) gives the same lam."""
    r = runs(world, rmpad, model)
    show(f"lam, {world} proc, rmpad={rmpad}, {model}", {k: r[k] for k in (
        "old_logp_diff", "adv_diff", "lam_diff", "lam_zero_diff", "lam_std", "nograd_forwards", "pass_lam_diff",
        "pass_nograd_forwards")})
    assert r["old_logp_diff"] < TOL[model]["logp"] and r["adv_diff"] < 1e-6  # verl's pi_old, GRPO advantages
    assert r["lam_diff"] < 1e-5 and r["lam_zero_diff"] < 1e-5 and r["lam_std"] > 0.05  # lam is not ~1 everywhere
    assert r["nograd_forwards"] == 0 and r["metrics"]["actor/delta/h_from_verl_pass"] == 1.0
    assert r["pass_lam_diff"] < 1e-5 and r["pass_nograd_forwards"] > 0


@pytest.mark.parametrize("world,rmpad,model", SETTINGS, ids=IDS)
def test_per_rank_option_is_the_forks_scope(runs, world, rmpad, model):
    """DELTA_SCOPE=rank (group=None): lam of each rank's rows alone, as the official fork; on 2 processes it differs
    from the global lam, on 1 it is the same."""
    r = runs(world, rmpad, model)
    show(f"per rank, {world} proc, rmpad={rmpad}, {model}", {k: r[k] for k in ("lam_rank_diff", "rank_vs_global")})
    assert r["lam_rank_diff"] < 1e-5 and r["rank_nograd_forwards"] == 0
    assert r["rank_vs_global"] > 0.05 if world > 1 else r["rank_vs_global"] < 1e-5


@pytest.mark.parametrize("world,rmpad,model", SETTINGS, ids=IDS)
def test_verls_loss_is_policy_loss_with_lam(runs, world, rmpad, model):
    """verl's loss (actor/pg_loss) and gradients with the plugin are policy_loss(..., lam) on the whole batch:
    off-policy, with the clip and the dual clip binding (pi_old moved, so the held features are refused and the
    plugin's own pass at the batch's pi_old gives lam), and on-policy."""
    r = runs(world, rmpad, model)
    show(f"loss, {world} proc, rmpad={rmpad}, {model}", {k: r[k] for k in (
        "off_lam_diff", "off_loss_diff", "off_grad_diff", "clipfrac", "clipfrac_dual", "verl_clipfrac",
        "verl_clipfrac_dual", "loss_diff_on_policy", "grad_diff_on_policy")})
    assert r["clipfrac"] > 0.1 and r["clipfrac_dual"] > 0.01  # both clips bind (delta.py's count) ...
    assert r["verl_clipfrac"] > 0.1 and r["verl_clipfrac_dual"] > 0.01  # ... and verl's
    assert r["off_h_from_verl_pass"] == 0.0 and r["off_nograd_forwards"] > 0 and r["off_lam_diff"] < 1e-5
    assert r["off_loss_diff"] < 1e-6 and r["off_grad_diff"] < TOL[model]["grad"]
    assert r["loss_diff_on_policy"] < 1e-6 and r["grad_diff_on_policy"] < TOL[model]["grad"]


@pytest.mark.parametrize("world,rmpad,model", SETTINGS, ids=IDS)
def test_lam_one_is_verls_own_dapo(runs, stock, world, rmpad, model):
    """With lam = 1 (the band [1, 1]) verl's loss with the plugin is verl's own vanilla loss without it (a process
    that never imported the plugin) and policy_loss without lam, in value and gradient, off-policy."""
    r, stock = runs(world, rmpad, model), stock(model)
    mine, own = torch.load(r["grads"]), torch.load(f"{stock['grads']}{int(rmpad)}")
    figures = {"loss_vs_verl": abs(r["one_loss"] - stock[f"vanilla_loss_{rmpad}"]),
               "grad_vs_verl": max(float((mine[n] - g).abs().max() / g.abs().max()) for n, g in own.items()),
               "loss_vs_policy_loss": r["one_loss_diff"], "grad_vs_policy_loss": r["one_grad_diff"]}
    show(f"lam = 1, {world} proc, rmpad={rmpad}, {model}", figures)
    assert figures["loss_vs_verl"] < 1e-6 and figures["grad_vs_verl"] < TOL[model]["grad"]
    assert r["one_loss_diff"] < 1e-6 and r["one_grad_diff"] < TOL[model]["grad"]


@pytest.mark.parametrize("world,rmpad,model", SETTINGS, ids=IDS)
def test_lam_is_taken_at_pi_old_before_the_first_update(runs, world, rmpad, model):
    """Two mini-batches with lr > 0: the weights move after the first, yet both losses receive the lam of pi_old
    (h from the old-log-prob pass, lam once per rollout batch)."""
    r = runs(world, rmpad, model)
    show(f"two mini-batches, {world} proc, rmpad={rmpad}, {model}",
         {k: r[k] for k in ("two_steps", "two_moved", "two_lam_diff")})
    assert r["two_steps"] == 2 and r["two_moved"] > 1e-3 and r["two_h_from_verl_pass"] == 1.0
    assert r["two_lam_diff"] < 1e-5


@pytest.mark.parametrize("world,rmpad,model", SETTINGS, ids=IDS)
def test_delta_statistics_are_in_verls_metrics(runs, world, rmpad, model):
    """actor/delta/* in the metrics verl's driver returns: lam's mean 1 and its range, and the coefficients'
    statistics equal delta_coefficients' on the whole batch."""
    r = runs(world, rmpad, model)
    m, ref = r["metrics"], r["ref_stats"]
    show(f"metrics, {world} proc, rmpad={rmpad}, {model}", {k.split("/")[-1]: v for k, v in m.items()})
    for k in ("lam_mean", "lam_std", "lam_min", "lam_max", "lam_zero", "disc_acc", "gamma_pos", "gamma_neg", "scale",
              "h_from_verl_pass", "seconds"):
        assert f"actor/delta/{k}" in r["metrics_verl"]
    assert m["actor/delta/lam_mean"] == pytest.approx(1.0, abs=1e-6) and m["actor/delta/lam_std"] > 0.05
    assert 0.8 * ref["scale"] - 1e-6 <= m["actor/delta/lam_min"] < m["actor/delta/lam_max"] <= 1.2 * ref["scale"] + 1e-6
    for k in ("disc_acc", "gamma_pos", "gamma_neg", "scale", "lam_zero"):
        assert m[f"actor/delta/{k}"] == pytest.approx(ref[k], rel=1e-5), k


def test_the_delta_loss_is_registered_and_refuses_outside_an_update(runs):
    """policy_loss.loss_mode=delta is the plugin's registered loss; called outside a DelTA update it raises."""
    r = runs(1, True)
    assert r["registered"] and "outside a DelTA update" in r["outside_update"]


def test_a_delta_config_without_the_plugin_fails_before_any_update(stock):
    """A DelTA config whose plugin is missing fails at the first update, before any weight moves (a vanilla update
    with the same lr moves them), and a plugin that fails to load fails the worker's start."""
    stock = stock()
    show("stock verl", {k: stock[k] for k in ("missing_plugin", "weights_moved", "vanilla_moved_True", "bad_load")})
    assert "Unsupported loss mode: delta" in stock["missing_plugin"] and not stock["plugin_imported"]
    assert not stock["weights_moved"] and stock["vanilla_moved_True"] and stock["vanilla_moved_False"]
    assert "DELTA_SCOPE must be global or rank" in stock["bad_load"]


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_recipe_config_is_the_papers_in_verls_hydra():
    """examples/verl_delta.sh's overrides compose and validate in verl's own hydra config, with the values of
    docs/scale.md's delta.py command for the same recipe."""
    import re

    verl = pytest.importorskip("verl")
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    overrides = subprocess.run(["bash", os.path.join(ROOT, "examples", "verl_delta.sh"), "--print"],
                               capture_output=True, text=True, check=True).stdout.splitlines()
    with initialize_config_dir(os.path.join(os.path.dirname(verl.__file__), "trainer", "config"), version_base=None):
        cfg = compose("ppo_trainer", overrides=overrides)
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    actor, rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor), cfg.actor_rollout_ref.rollout
    command = open(os.path.join(ROOT, "docs", "scale.md")).read().split("```bash")[1].split("```")[0]
    flags = dict(re.findall(r"--(\w+)\s+(?!--)(\S+)", command))
    env, overlong = cfg.ray_kwargs.ray_init.runtime_env.env_vars, cfg.reward.reward_kwargs.overlong_buffer_cfg
    verl_values = {
        "prompts_per_step": cfg.data.train_batch_size, "group_size": rollout.n,
        "mini_batch_prompts": actor.ppo_mini_batch_size, "max_prompt_length": cfg.data.max_prompt_length,
        "max_new_tokens": cfg.data.max_response_length, "overlong_buffer": overlong.len,
        "overlong_penalty": overlong.penalty_factor, "lr": actor.optim.lr,
        "weight_decay": actor.optim.weight_decay, "max_grad_norm": actor.optim.clip_grad,
        "temperature": rollout.temperature, "top_p": rollout.top_p, "clip_low": actor.clip_ratio_low,
        "clip_high": actor.clip_ratio_high, "clip_c": actor.clip_ratio_c, "K": env.DELTA_K,
        "lam_min": env.DELTA_LAM_MIN, "lam_max": env.DELTA_LAM_MAX, "epochs": cfg.trainer.total_epochs,
        "nproc_per_node": cfg.trainer.n_gpus_per_node}
    for flag, value in verl_values.items():
        assert float(value) == float(flags[flag]), (flag, value, flags[flag])
    assert cfg.actor_rollout_ref.model.external_lib == "verl_delta" and actor.policy_loss.loss_mode == "delta"
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.algorithm.norm_adv_by_std_in_grpo
    assert not cfg.algorithm.use_kl_in_reward and not actor.use_kl_loss and actor.entropy_coeff == 0
    assert actor.loss_agg_mode == "token-mean" and actor.ppo_epochs == 1 and rollout.top_k == -1
    assert cfg.reward.reward_manager.name == "dapo" and cfg.reward.reward_kwargs.overlong_buffer_cfg.enable
    assert actor.optim.lr_warmup_steps == 0 and not cfg.trainer.use_v1 and env.DELTA_SCOPE == "global"
    assert all(isinstance(v, str) for v in env.values())  # Ray's env_vars are strings
    assert cfg.data.max_prompt_length + cfg.data.max_response_length <= actor.ppo_max_token_len_per_gpu
    assert cfg.data.filter_overlong_prompts and list(cfg.trainer.logger) == ["console"]  # no wandb login needed


def recipe_config(**changes):
    """examples/verl_delta.sh's overrides composed in verl's hydra config, with `changes` (key=value) appended."""
    verl = pytest.importorskip("verl")
    from hydra import compose, initialize_config_dir
    overrides = subprocess.run(["bash", os.path.join(ROOT, "examples", "verl_delta.sh"), "--print"],
                               capture_output=True, text=True, check=True).stdout.splitlines()
    with initialize_config_dir(os.path.join(os.path.dirname(verl.__file__), "trainer", "config"), version_base=None):
        return compose("ppo_trainer", overrides=overrides + [f"{k}={v}" for k, v in changes.items()])


def test_the_recipe_starts_with_what_verl_installs(tiny):
    """verl[vllm]==0.9.1 installs no flash-attn, and verl's actor loads its model with flash_attention_2 unless the
    config names another (verl/workers/config/model.py, HFModelConfig): the recipe's setting loads the model as
    verl's engine does, where the default fails."""
    from transformers import AutoModelForCausalLM
    cfg = recipe_config(**{"actor_rollout_ref.model.path": tiny})
    attn = cfg.actor_rollout_ref.model.override_config.get("attn_implementation", "flash_attention_2")  # verl's read
    assert AutoModelForCausalLM.from_pretrained(tiny, attn_implementation=attn).config._attn_implementation == attn
    try:
        import flash_attn  # noqa: F401
    except ImportError:  # this venv, as verl[vllm] installs it: verl's default would not start
        with pytest.raises(ImportError, match="FlashAttention2"):
            AutoModelForCausalLM.from_pretrained(tiny, attn_implementation="flash_attention_2")


REFUSALS = r"""
import functools, os, sys, types, warnings
sys.path.insert(0, sys.argv[1])
import verl
verl.__version__ = "0.9.2"
try:
    import verl_delta
    print("imported")
except ImportError as e:
    print("refused:", e)
os.environ["DELTA_VERL_VERSION"] = "0.9.2"  # a version the tests passed on, accepted
import verl_delta
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead
from verl.workers.engine_workers import TrainingWorker
from verl.workers.utils.losses import ppo_loss

def start(engine, mode="delta", sp=1):  # what ActorRolloutRefWorker.init_model does with its actor
    worker = types.SimpleNamespace(engine=engine, loss_fn=None)
    engine.ulysses_sequence_parallel_size = sp
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            TrainingWorker.set_loss_fn(worker, functools.partial(ppo_loss, config={"policy_loss": {"loss_mode": mode}}))
            print("started", [str(w.message) for w in seen])
        except NotImplementedError as e:
            print("refused:", e)

class MegatronEngineWithLMHead: pass
start(MegatronEngineWithLMHead())
start(object.__new__(FSDPEngineWithLMHead), sp=4)
start(object.__new__(FSDPEngineWithLMHead))
start(object.__new__(FSDPEngineWithLMHead), mode="vanilla")
"""


def test_the_plugin_refuses_at_the_workers_start_what_it_cannot_run():
    """At load (the import verl's worker makes, then the actor's set_loss_fn in init_model, before any rollout):
    another verl version is refused unless DELTA_VERL_VERSION names it; an actor on another engine (Megatron's
    module is a list: the first log-prob pass would die on get_decoder) or with Ulysses sequence parallelism is
    refused with what to set; loss_mode left at vanilla with the plugin loaded warns that verl's own loss trains."""
    p = subprocess.run([sys.executable, "-c", REFUSALS, os.path.join(ROOT, "examples")], capture_output=True,
                       text=True, cwd=ROOT, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout.splitlines()
    assert out[0].startswith("refused: verl_delta relies on verl 0.9.1") and "DELTA_VERL_VERSION=0.9.2" in out[0]
    assert out[1].startswith("refused: DelTA in verl needs its FSDP engine (actor.strategy=fsdp or fsdp2)")
    assert "MegatronEngineWithLMHead" in out[1]
    assert out[2].startswith("refused: DelTA with Ulysses") and "ulysses_sequence_parallel_size=1" in out[2]
    assert out[3] == "started []"
    assert out[4].startswith("started [") and "loss_mode is 'vanilla'" in out[4] and "loss_mode=delta" in out[4]


def test_deepmath_is_written_as_verls_parquet_with_delta_pys_split(tiny, tmp_path):
    """examples/deepmath_to_verl.py: DeepMath-103K's columns (question, final_answer) as verl's parquet: test holds
    the rows delta.py holds out (the first --eval_size), the prompt is delta.py's (question, newline, the boxed
    instruction), verl's RLHFDataset reads it and drops a prompt longer than data.max_prompt_length when the
    recipe's filter_overlong_prompts is on, and verl's scorer for its data_source grades a boxed answer 1 / 0."""
    import datasets
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.utils.reward_score import default_compute_score
    sys.path.insert(0, ROOT)
    import rewards

    source = tmp_path / "deepmath.parquet"
    questions = [f"What is {a} + {a}?" for a in range(5)] + ["Add " + "1 + " * 200 + "1."]
    datasets.Dataset.from_list([{"question": q, "final_answer": str(i), "difficulty": 1.0, "topic": "arithmetic",
                                 "r1_solution_1": "..."} for i, q in enumerate(questions)]).to_parquet(str(source))
    out = tmp_path / "verl"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "deepmath_to_verl.py"), "--source", str(source),
                        "--out", str(out), "--eval_size", "2"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    test = datasets.load_dataset("parquet", data_files=str(out / "test.parquet"), split="train")
    assert [r["reward_model"]["ground_truth"] for r in test] == ["0", "1"]  # delta.py's held-out rows
    assert test[0]["prompt"] == [{"role": "user", "content": f"{questions[0]}\n{rewards.ANSWER_FORMATS['boxed']}"}]
    tok = AutoTokenizer.from_pretrained(tiny)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    config = OmegaConf.create(dict(recipe_config().data, cache_dir=str(tmp_path / "cache"), max_prompt_length=64))
    train = RLHFDataset(str(out / "train.parquet"), tok, config)
    assert len(train) == 3 and train[0]["data_source"] == "lighteval/MATH"  # the over-long prompt dropped
    assert default_compute_score("lighteval/MATH", "so it is \\boxed{4}", "4") == 1.0
    assert default_compute_score("lighteval/MATH", "so it is \\boxed{5}", "4") == 0.0


if __name__ == "__main__":
    torch.set_num_threads(1)
    if sys.argv[1] == "plugin":
        main_plugin(sys.argv[2], sys.argv[3] == "1", sys.argv[4])
    else:
        main_stock(sys.argv[2], sys.argv[3])
    sys.exit(0)
