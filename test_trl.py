"""DelTA inside TRL's GRPOTrainer (examples/trl_delta.py): h from TRL's own pi_old pass, lam equal to delta.py's, TRL's
loss equal to policy_loss(..., lam), and a short run that learns. TRL and PEFT are not in requirements.txt (they
pull accelerate, which changes how delta.py loads a model on a GPU): `bash .ci/trl.sh` builds their venv
(requirements-trl.txt) and runs this file, on the tiny model and, where DELTA_REAL_MODEL names its folder (the
real-model job makes it), on SmolLM2-135M-Instruct with its own tokenizer and chat template."""
import os
import subprocess
import sys

import peft
import pytest
import torch
import trl  # noqa: F401  (the venv of .ci/trl.sh)

import checkpoints
import delta
import tasks
from conftest import ROOT, pack
from delta import delta_coefficients, policy_loss, token_features

pytestmark = pytest.mark.trl  # .ci/trl.sh, in the TRL venv
torch.set_num_threads(1)
MODELS = ["tiny"] + (["real"] if os.environ.get("DELTA_REAL_MODEL") else [])


@pytest.fixture(params=MODELS)
def model_path(request, tiny):
    """The tiny model, and the real one when the real-model job has made its folder."""
    return tiny if request.param == "tiny" else os.environ["DELTA_REAL_MODEL"]


def trl_trainer(path, tmp_path, prompts=4, **trainer_kw):
    """examples/trl_delta.py's trainer on the model at `path`, generation batches of `prompts` x 4 (4 prompts per
    optimizer step), rewarded by the count of digits (so advantages are not all 0), and one generation batch."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import trl_delta

    model, tok = checkpoints.load_model(path, torch.device("cpu"))
    train, _ = trl_delta.addition_data(16)
    digits = lambda completions, **_: [float(sum(c.isdigit() for c in x[-1]["content"])) for x in completions]  # noqa
    cfg = trl_delta.config(str(tmp_path), 1, prompts=prompts, group=4, mini_batch_prompts=4, max_new_tokens=16)
    trainer = trl_delta.DeltaGRPOTrainer(model=model, reward_funcs=digits, args=cfg, train_dataset=train,
                                         processing_class=tok, **trainer_kw)
    return trainer, model, [train[i] for i in range(prompts) for _ in range(4)]


def trl_generation_batch(path, tmp_path, **trainer_kw):
    """One generation batch as TRL scores it, before any DelTA change (one optimizer step per batch: TRL computes
    no pi_old of its own)."""
    from trl import GRPOTrainer

    trainer, model, batch = trl_trainer(path, tmp_path, **trainer_kw)
    torch.manual_seed(0)
    out = GRPOTrainer._generate_and_score_completions(trainer, batch)
    assert (out["advantages"] != 0).any()
    return trainer, model, out


def test_trl_path_lam_equals_delta_py_on_the_same_batch(model_path, tmp_path):
    """The h TRL's pass yields (a hook on the backbone) and its log-probs are delta.py's LM-head inputs and
    log-probs: the trainer's lam equals delta_coefficients on delta.py's own forward of the same batch."""
    trainer, model, out = trl_generation_batch(model_path, tmp_path)
    lam = trainer.delta_lam(out, *trainer.lm_head_inputs(out))
    ids, T = torch.cat([out["prompt_ids"], out["completion_ids"]], 1), out["completion_ids"].shape[1]
    am, mask = torch.cat([out["prompt_mask"], out["completion_mask"]], 1), out["completion_mask"].bool()
    with torch.no_grad():
        logp, _, h = delta.response_logprobs(model, ids, am, T, trainer.temperature)
    ref = delta_coefficients(token_features(h, logp), out["advantages"], mask)
    assert torch.allclose(lam, ref, atol=1e-5) and lam[mask].std() > 0.01
    assert lam[mask].mean().item() == pytest.approx(1.0, abs=1e-5) and torch.all(lam[~mask] == 0)


def test_trl_path_takes_h_under_peft_too(model_path, tmp_path):
    """With LoRA adapters (PEFT wraps the model, so its `base_model` is not the backbone) the hook still finds the
    decoder: h is the adapted model's final hidden state at the positions that predict each completion token."""
    trainer, model, out = trl_generation_batch(model_path, tmp_path, peft_config=peft.LoraConfig(r=4, target_modules=[
        "q_proj", "v_proj"], init_lora_weights=False))  # random adapters: the adapted model is not the base one
    h, logp = trainer.lm_head_inputs(out)
    ids, T = torch.cat([out["prompt_ids"], out["completion_ids"]], 1), out["completion_ids"].shape[1]
    am, mask = torch.cat([out["prompt_mask"], out["completion_mask"]], 1), out["completion_mask"].bool()
    with torch.no_grad():
        want_logp, _, want_h = delta.response_logprobs(trainer.model, ids, am, T, trainer.temperature)
        with trainer.model.disable_adapter():
            base_h = delta.response_logprobs(trainer.model, ids, am, T, trainer.temperature)[2]
    assert torch.allclose(h[mask], want_h[mask], atol=1e-5) and torch.allclose(logp[mask], want_logp[mask], atol=1e-5)
    assert not torch.allclose(h[mask], base_h[mask], atol=1e-3)  # the adapters act


def test_trl_path_takes_h_from_trls_own_pi_old_pass(model_path, tmp_path):
    """With 2 optimizer steps per generation batch TRL computes pi_old itself: the trainer takes h from that pass
    (no pass of its own) and its lam is delta_coefficients on delta.py's forward of the batch."""
    trainer, model, batch = trl_trainer(model_path, tmp_path, prompts=8)
    passes, seen = [], {}
    trainer.lm_head_inputs = lambda out: passes.append("own") or type(trainer).lm_head_inputs(trainer, out)
    delta_lam = trainer.delta_lam
    trainer.delta_lam = lambda out, h, logp: (seen.update(adv=out["advantages"], h=h, logp=logp)
                                              or delta_lam(out, h, logp))
    torch.manual_seed(0)
    out = trainer._generate_and_score_completions(batch)
    assert passes == [] and torch.equal(seen["logp"], out["old_per_token_logps"])
    ids, T = torch.cat([out["prompt_ids"], out["completion_ids"]], 1), out["completion_ids"].shape[1]
    am, mask = torch.cat([out["prompt_mask"], out["completion_mask"]], 1), out["completion_mask"].bool()
    with torch.no_grad():
        logp, _, h = delta.response_logprobs(model, ids, am, T, trainer.temperature)
    assert torch.allclose(seen["h"][mask], h[mask], atol=1e-5)
    assert torch.allclose(seen["logp"][mask], logp[mask], atol=1e-5)
    adv = seen["adv"]  # [B], before the change; out's are now A lam, [B, T]
    lam = delta_coefficients(token_features(h, logp), adv, mask)
    assert (adv != 0).any() and torch.allclose(out["advantages"], adv[:, None] * lam, atol=1e-5)


@pytest.mark.parametrize("band", [(1.0, 1.0), (0.8, 1.2)])
def test_trl_path_loss_is_delta_py_policy_loss(model_path, tmp_path, band):
    """TRL's dapo loss with [B, T] advantages A lam is delta.py's policy_loss(..., lam) in value and gradient,
    off-policy too (clips and TRL's delta = the dual clip bind); with lam = 1 it is TRL's own dapo loss."""
    trainer, model, out = trl_generation_batch(model_path, tmp_path, lam_min=band[0], lam_max=band[1])
    model.eval()  # TRL's eval-mode normaliser: the batch's token count (no accumulation window)
    lam = trainer.delta_lam(out, *trainer.lm_head_inputs(out))
    ids, T = torch.cat([out["prompt_ids"], out["completion_ids"]], 1), out["completion_ids"].shape[1]
    am, mask = torch.cat([out["prompt_mask"], out["completion_mask"]], 1), out["completion_mask"].bool()
    with torch.no_grad():
        logp0 = delta.response_logprobs(model, ids, am, T, trainer.temperature)[0]
    old = logp0 + 0.6 * torch.randn(logp0.shape, generator=torch.Generator().manual_seed(0))  # ratios far from 1
    neg = int((out["advantages"] < 0).nonzero()[0])
    old[neg, 0] = logp0[neg, 0] - 3.0  # a ratio of e^3 > c = 10 where A < 0: the dual clip binds
    inputs = dict(out, old_per_token_logps=old, advantages=out["advantages"][:, None] * lam)

    def grads(loss):
        model.zero_grad()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]
    trl_loss, trl_grads = grads(trainer._compute_loss(model, inputs))
    logp = delta.response_logprobs(model, ids, am, T, trainer.temperature)[0]
    ref, metrics = policy_loss(logp, old, out["advantages"], mask, lam, 0.2, 0.28, 10.0,
                               num_tokens=out["num_items_in_batch"])
    ref_loss, ref_grads = grads(ref)
    assert metrics["clipfrac"] > 0.1 and metrics["clipfrac_dual"] > 0
    assert torch.allclose(trl_loss, ref_loss, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(trl_grads, ref_grads))
    if band == (1.0, 1.0):  # TRL's own loss, [B] advantages
        own, _ = grads(trainer._compute_loss(model, dict(inputs, advantages=out["advantages"])))
        assert torch.allclose(own, trl_loss, atol=1e-6)


def test_a_short_trl_run_with_delta_raises_held_out_accuracy(tiny, tmp_path):
    """examples/trl_delta.py as a user runs it, on the tiny model after a supervised warm start (300 steps of
    delta.py's warm-start loop at batch 64, without its accuracy checks): 16 generation batches of 32 prompts x 8
    raise greedy held-out accuracy (256 problems)."""
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    train_rows, _ = tasks.TASKS["addition"]["build"](0, 256)
    opt, gen = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0), torch.Generator().manual_seed(1)
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # both cores, as the example's own process below
    try:
        for _ in range(300):
            rows = [train_rows[i] for i in torch.randint(len(train_rows), (64,), generator=gen)]
            b = pack(tok, [delta.prompt_text(tok, r["question"]) for r in rows], [r["solution"] for r in rows], "cpu")
            m = b["response_mask"]
            logp = delta.response_logprobs(model, b["input_ids"], b["attention_mask"], m.shape[1], 1.0)[0]
            (-(logp * m).sum() / m.sum()).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(tmp_path / "warm")
    tok.save_pretrained(tmp_path / "warm")
    env = dict(os.environ, OMP_NUM_THREADS="2", PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1")
    p = subprocess.run([sys.executable, "examples/trl_delta.py", "--model", str(tmp_path / "warm"), "--steps", "32",
                        "--output_dir", str(tmp_path / "trl")], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    before, after = map(float, p.stdout.split("held-out greedy accuracy:")[1].split("->"))
    print(f"\nTRL + DelTA, 16 generation batches: held-out greedy accuracy {before:.3f} -> {after:.3f}")
    assert after >= before + 0.05, (before, after)
