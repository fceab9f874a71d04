"""Tests of delta.py: every formula against an independent computation, then the trainer end to end."""
import contextlib
import dataclasses
import gc
import json
import math
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp
import transformers

import checkpoints
import console
import delta
import engines
import sampling
import rewards
import tasks
from conftest import BACKBONES, FAST, ROOT, fixed_rollout, lam_of, make_run, pack, read_metrics, run_delta
from delta import Args, delta_coefficients, group_advantages, policy_loss, token_features

sys.path.insert(0, os.path.join(ROOT, "tools"))
import oracle  # noqa: E402  (adds ALGOS["oracle"]: an algorithm from outside delta.py)

torch.set_num_threads(1)


def hf_sample(model, tok, prompts, max_new_tokens, temperature, max_tokens=65536):
    """delta.sample with the HF sampler of a lone model (the rollout layout)."""
    args = Args(max_new_tokens=max_new_tokens, gen_max_tokens=max_tokens)
    sampler = sampling.HFSampler(args, model, tok, [tok.eos_token_id], engines.DDP(1, torch.device("cpu")))
    return delta.sample(sampler, prompts, temperature)


# ------------------------------------------------------------------------------------- Eq. A
def test_group_advantages_against_formula():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.5, 0.0])
    adv = group_advantages(rewards, 4)
    for g in range(2):
        r = rewards[4 * g:4 * g + 4].tolist()
        mean = sum(r) / 4
        std = math.sqrt(sum((x - mean) ** 2 for x in r) / 3)  # Bessel-corrected, as verl
        for j in range(4):
            assert adv[4 * g + j].item() == pytest.approx((r[j] - mean) / (std + 1e-6), abs=1e-6)
    dr = group_advantages(rewards, 4, scale="none")
    assert torch.allclose(dr, rewards - rewards.view(2, 4).mean(1).repeat_interleave(4))
    assert torch.all(group_advantages(torch.ones(4), 4) == 0)  # one reward value -> no signal


def test_overlong_penalty_is_dapos_soft_punishment():
    lengths = torch.tensor([10, 16, 17, 20, 24])
    pen = delta.overlong_penalty(lengths, max_len=24, buffer=8, factor=1.0)
    assert pen.tolist() == pytest.approx([0.0, 0.0, -1 / 8, -4 / 8, -1.0])


# ------------------------------------------------------------------------------------- Eq. D
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_token_features_equal_autograd_gradient_of_lm_head_row(tiny, temperature):
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    batch = pack(tok, ["Question: 1+2=?", "Q: 35+41=?"], ["So 3.", "It is \\boxed{76}"], "cpu")
    R = batch["response_mask"].shape[1]
    logp, _, hidden = delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], R, temperature)
    v = token_features(hidden, logp.detach())  # [2, R, H]
    head = model.get_output_embeddings().weight
    targets = batch["input_ids"][:, -R:]
    checked = 0
    for i in range(2):
        for t in range(R):
            if not batch["response_mask"][i, t]:
                continue
            (grad,) = torch.autograd.grad(logp[i, t], head, retain_graph=True)
            row = grad[targets[i, t]]  # d log pi(o_t) / d W[o_t]
            # exact gradient at temperature T is (1 - p) h / T; Eq. D drops the constant 1/T
            assert torch.allclose(row * temperature, v[i, t], atol=1e-5, rtol=1e-4)
            checked += 1
    assert checked == int(batch["response_mask"].sum())


# ------------------------------------------------------------------------------------- Sec. 3.2
def official_coefficients(v, adv, mask, K, lam_min, lam_max, eps=1e-8, lam_w=1.0, fixed_gamma=None, hard=False,
                          normalise=True, lagged=True):
    """A literal transcription of the official compute_log_prob_h (impl "Normal"), pass by pass, one token
    at a time in float64: statistics, initial gamma, K refinements (score with the gamma in force, move
    the centroids, then gamma := std of the margins just used), final weights, normalisation. Its
    hooks give the ablations: lam_w = 0 (within-side only), a fixed gamma, hard scores, no step 6.
    lagged=False is the schedule this project had before: gamma recomputed from the new margins."""
    v = v.double()
    B, T, _ = v.shape
    toks = [(i, t) for i in range(B) for t in range(T) if mask[i, t]]
    side = {(i, t): (1 if adv[i] > 0 else -1 if adv[i] < 0 else 0) for i, t in toks}
    sig = lambda z: (1.0 if z > 0 else 0.0) if hard else 1 / (1 + math.exp(-z))

    def centroids(alpha):
        out = {}
        for s in (1, -1):
            w = {x: alpha[x] * abs(float(adv[x[0]])) for x in toks if side[x] == s}
            out[s] = sum(w[x] * v[x] for x in w) / max(sum(w.values()), eps)
        return out

    def margins(mu):  # own margin: lam_w * opposite distance - own distance
        d = lambda x, s: float(((v[x] - mu[s]) ** 2).sum())
        return {x: lam_w * d(x, -side[x]) - d(x, side[x]) for x in toks if side[x] != 0}

    def gammas(g):  # one-pass population variance, floored at eps
        out = {}
        for s in (1, -1):
            vals = [g[x] for x in g if side[x] == s]
            n = max(len(vals), 1)
            mean = sum(vals) / n
            out[s] = fixed_gamma or math.sqrt(max(sum(a * a for a in vals) / n - mean * mean, eps))
        return out

    mu = centroids({x: 1.0 for x in toks})  # pass 1
    gamma = gammas(margins(mu))  # pass 2
    for _ in range(K):  # passes 3 .. K + 2
        g = margins(mu)
        alpha = {x: sig(g[x] / gamma[side[x]]) for x in g}
        mu = centroids({x: alpha.get(x, 0.0) for x in toks})
        if lagged:
            gamma = gammas(g)
        elif _ < K - 1:
            gamma = gammas(margins(mu))
    g = margins(mu)  # pass K + 3
    lam = torch.zeros(B, T, dtype=torch.float64)
    for x in toks:
        lam[x] = lam_min if side[x] == 0 else lam_min + (lam_max - lam_min) * sig(g[x] / gamma[side[x]])
    return lam * len(toks) / float(lam.sum()) if normalise else lam


def random_batch(seed, B=6, T=7, H=5, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(B, T, H, generator=gen).to(dtype)
    adv = torch.tensor([1.2, -0.7, 0.0, 0.4, -1.5, 0.9])[:B]
    mask = torch.rand(B, T, generator=gen) > 0.3  # holes anywhere, not only a padded tail
    mask[:, 0] = True
    return v, adv, mask


@pytest.mark.parametrize("K", [0, 1, 2, 3])
@pytest.mark.parametrize("band", [(0.8, 1.2), (0.5, 2.0), (1.0, 1.0), (0.0, 1.0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_delta_coefficients_match_a_literal_transcription_of_the_official_code(K, band, dtype):
    v, adv, mask = random_batch(K * 10 + int(band[1] * 10), dtype=dtype)
    lam = delta_coefficients(v, adv, mask, K=K, lam_min=band[0], lam_max=band[1])
    ref = official_coefficients(v, adv, mask, K, *band)
    assert lam.dtype == torch.float32
    assert torch.allclose(lam.double(), ref, rtol=1e-4, atol=1e-5)
    assert torch.all(lam[~mask] == 0)
    assert lam[mask].mean().item() == pytest.approx(1.0, abs=1e-5)


def test_gamma_lags_one_step_inside_the_refinement_too():
    """K >= 2: a step scores with the std of the previous step's margins. Recomputing gamma from the
    current margins (the earlier schedule of this file) gives other coefficients; K = 1 is the same."""
    v, adv, mask = random_batch(21)
    same = official_coefficients(v, adv, mask, 1, 0.8, 1.2, lagged=False)
    assert torch.allclose(same, official_coefficients(v, adv, mask, 1, 0.8, 1.2))
    for K in (2, 3):
        ours = delta_coefficients(v, adv, mask, K=K).double()
        assert torch.allclose(ours, official_coefficients(v, adv, mask, K, 0.8, 1.2), atol=1e-5)
        assert not torch.allclose(ours, official_coefficients(v, adv, mask, K, 0.8, 1.2, lagged=False), atol=1e-4)


@pytest.mark.parametrize("ablation,kwargs,ref_kwargs", [
    ("within-side only", dict(margin="own"), dict(lam_w=0.0)),
    ("fixed gamma", dict(gamma=2.5), dict(fixed_gamma=2.5)),
    ("hard assignment", dict(assign="hard"), dict(hard=True)),
    ("no mass normalisation", dict(normalise=False), dict(normalise=False)),
    ("own side, hard: every score vanishes", dict(margin="own", assign="hard"), dict(lam_w=0.0, hard=True)),
])
@pytest.mark.parametrize("K", [0, 1, 2])
def test_ablations_match_the_official_hooks(ablation, kwargs, ref_kwargs, K):
    v, adv, mask = random_batch(31 + K)
    lam = delta_coefficients(v, adv, mask, K=K, **kwargs)
    ref = official_coefficients(v, adv, mask, K, 0.8, 1.2, **ref_kwargs)
    assert torch.allclose(lam.double(), ref, rtol=1e-4, atol=1e-5), ablation
    assert not torch.allclose(lam, delta_coefficients(v, adv, mask, K=K), atol=1e-4)  # it changes something


def test_no_linear_map_is_the_band_zero_one():
    v, adv, mask = random_batch(41)
    lam = delta_coefficients(v, adv, mask, lam_min=0.0, lam_max=1.0, normalise=False)
    assert torch.all(lam[mask & (adv == 0)[:, None]] == 0) and torch.all((lam[mask] >= 0) & (lam[mask] <= 1))


def test_packed_features_give_the_padded_result():
    """Only tokens of non-zero-advantage responses need features; the rest enter through num_valid."""
    v, adv, mask = random_batch(51)
    stats_pad, stats_packed = {}, {}
    padded = delta_coefficients(v, adv, mask, K=2, stats=stats_pad)
    side = mask & (adv != 0)[:, None]
    packed = delta_coefficients(v[side], adv[:, None].expand_as(mask)[side],
                                torch.ones(int(side.sum()), dtype=torch.bool),
                                K=2, num_valid=mask.sum(), stats=stats_packed)
    assert torch.allclose(packed, padded[side], atol=1e-6)
    assert torch.allclose(padded[mask & (adv == 0)[:, None]], torch.tensor(stats_packed["lam_zero"]), atol=1e-6)
    assert stats_packed == pytest.approx(stats_pad)


def test_chunked_passes_over_offloaded_features_give_the_same_result():
    v, adv, mask = random_batch(61, B=6, T=7)
    whole = delta_coefficients(v, adv, mask, K=3)
    for chunk in (1, 5, 13, 1000):
        assert torch.allclose(delta_coefficients(v.clone(), adv, mask, K=3, chunk_tokens=chunk), whole, atol=1e-6)


def test_delta_coefficients_zero_advantage_tokens_get_lam_min_before_normalisation():
    v, adv, mask = random_batch(3)
    lam = delta_coefficients(v, adv, mask, lam_min=0.8, lam_max=1.2)
    zero = mask & (adv == 0)[:, None]
    scale = lam[zero][0] / 0.8  # the self-normalisation factor
    assert torch.allclose(lam[zero], torch.full_like(lam[zero], 0.8 * scale))
    assert torch.all(lam[mask & (adv != 0)[:, None]] > 0.8 * scale)


@pytest.mark.parametrize("missing", ["plus", "minus"])
def test_delta_coefficients_one_sided_batch_is_plain_dapo(missing):
    v, adv, mask = random_batch(5)
    adv = adv.clamp(max=0) if missing == "plus" else adv.clamp(min=0)
    lam = delta_coefficients(v, adv, mask)
    assert torch.equal(lam, mask.float())


def test_delta_coefficients_stats_report_gamma_and_discriminator_accuracy():
    v, adv, mask = random_batch(7)
    stats = {}
    delta_coefficients(v, adv, mask, K=0, stats=stats)
    vv = v.double()  # recompute disc_acc by hand: share of side tokens with sign(A)(v.W + b) > 0
    sides = [(i, t) for i in range(6) for t in range(7) if mask[i, t] and adv[i] != 0]

    def mean(group):
        w = torch.tensor([abs(float(adv[i])) for i, t in group], dtype=torch.float64)
        return sum(wi * vv[i, t] for wi, (i, t) in zip(w, group)) / w.sum()

    mu_p = mean([x for x in sides if adv[x[0]] > 0])
    mu_n = mean([x for x in sides if adv[x[0]] < 0])
    W, b = mu_p - mu_n, -(mu_p.square().sum() - mu_n.square().sum()) / 2
    right = sum(float(torch.sign(adv[i])) * float(vv[i, t] @ W + b) > 0 for i, t in sides)
    assert stats["disc_acc"] == pytest.approx(right / len(sides))
    assert stats["gamma_pos"] > 0 and stats["gamma_neg"] > 0


def test_shared_tokens_get_lower_lambda_than_side_specific_tokens():
    """Sec. 2: features common to both sides (formatting) are shrunk, side-specific ones amplified."""
    gen = torch.Generator().manual_seed(0)
    B, T, H = 8, 10, 6
    shared = torch.tensor([3.0, 3.0, 0, 0, 0, 0])
    good, bad = torch.tensor([0, 0, 2.0, 0, 0, 0]), torch.tensor([0, 0, 0, 2.0, 0, 0])
    adv = torch.tensor([1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0])
    v = torch.empty(B, T, H)
    for i in range(B):
        for t in range(T):
            base = shared if t < 6 else (good if adv[i] > 0 else bad)  # 6 boilerplate tokens, 4 deciding ones
            v[i, t] = base + 0.1 * torch.randn(H, generator=gen)
    lam = delta_coefficients(v, adv, torch.ones(B, T, dtype=torch.bool))
    for rows in (slice(0, 4), slice(4, 8)):
        assert lam[rows, 6:].min() > lam[rows, :6].max()


# ------------------------------------------------------------------------------------- Eq. B / E
def dapo_reference(logp, old_logp, adv, mask, lam, eps_low, eps_high, c):
    """Eq. B with verl's dual clip, one token at a time."""
    total, n = 0.0, int(mask.sum())
    for i in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            if not mask[i, t]:
                continue
            A = float(adv[i]) * float(lam[i, t])
            r = math.exp(float(logp[i, t] - old_logp[i, t]))
            obj = min(r * A, min(max(r, 1 - eps_low), 1 + eps_high) * A)
            if A < 0:
                obj = max(obj, c * A)  # dual clip: the loss -obj is at most -A c
            total += -obj
    return total / n


def loss_inputs(seed=0, B=6, T=9):
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=gen) * 3
    logp = (old + torch.randn(B, T, generator=gen) * 0.5).requires_grad_()  # ratios well outside the clip range
    adv = torch.randn(B, generator=gen)
    mask = torch.rand(B, T, generator=gen) > 0.2
    lam = 0.8 + 0.4 * torch.rand(B, T, generator=gen)
    return logp, old, adv, mask, lam


def test_policy_loss_equals_clipped_surrogate_loop():
    logp, old, adv, mask, lam = loss_inputs()
    for weights in (None, lam):
        loss, _ = policy_loss(logp, old, adv, mask, weights, 0.2, 0.28, 3.0)
        ref = dapo_reference(logp.detach(), old, adv, mask, torch.ones_like(lam) if weights is None else weights,
                             0.2, 0.28, 3.0)
        assert loss.item() == pytest.approx(ref, rel=1e-5)


def test_policy_loss_with_unit_lambda_is_dapo():
    logp, old, adv, mask, _ = loss_inputs(1)
    a, ma = policy_loss(logp, old, adv, mask)
    b, mb = policy_loss(logp, old, adv, mask, lam=torch.ones_like(old))
    assert torch.equal(a, b) and all(torch.equal(ma[k], mb[k]) for k in ma)


def test_policy_loss_gradient_independent_of_micro_batch_split():
    logp, old, adv, mask, lam = loss_inputs(2, B=8)
    n = mask.sum()
    whole, _ = policy_loss(logp, old, adv, mask, lam)
    (g_whole,) = torch.autograd.grad(whole, logp)
    g_split = torch.zeros_like(logp)
    for s in range(0, 8, 3):  # uneven micro-batches, each normalised by the whole count
        part, _ = policy_loss(logp[s:s + 3], old[s:s + 3], adv[s:s + 3], mask[s:s + 3], lam[s:s + 3], num_tokens=n)
        g_split += torch.autograd.grad(part, logp)[0]
    assert torch.allclose(g_whole, g_split, atol=1e-7)


def test_policy_loss_at_old_policy_gradient_is_lambda_weighted_policy_gradient():
    """Near theta_old, each token contributes -lam A grad log pi / N (Sec. 3.3)."""
    _, old, adv, mask, lam = loss_inputs(3)
    logp = old.clone().requires_grad_()
    loss, met = policy_loss(logp, old, adv, mask, lam)
    (g,) = torch.autograd.grad(loss, logp)
    assert torch.allclose(g, -(adv[:, None] * lam * mask) / mask.sum(), atol=1e-7)
    assert met["clipfrac"] == 0 and met["approx_kl"] == 0


def test_sapo_gate_replaces_the_clip():
    """SAPO: per token -A' (4 / tau) sigmoid(tau (r - 1)), tau_pos for A > 0, tau_neg otherwise; no clip."""
    logp, old, adv, mask, lam = loss_inputs(5)
    loss, _ = policy_loss(logp, old, adv, mask, lam, sapo_tau=(1.0, 1.05))
    total = 0.0
    for i in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            if mask[i, t]:
                tau = 1.0 if adv[i] > 0 else 1.05
                r = math.exp(float(logp[i, t].detach() - old[i, t]))
                total += -float(adv[i] * lam[i, t]) * (4 / tau) / (1 + math.exp(-tau * (r - 1)))
    assert loss.item() == pytest.approx(total / int(mask.sum()), rel=1e-5)
    on_policy = old.clone().requires_grad_()  # at r = 1 the gate's gradient is the plain policy gradient
    (g,) = torch.autograd.grad(policy_loss(on_policy, old, adv, mask, lam, sapo_tau=(1.0, 1.05))[0], on_policy)
    assert torch.allclose(g, -(adv[:, None] * lam * mask) / mask.sum(), atol=1e-7)


def test_grpo_has_no_dual_clip_as_its_references():
    """GRPO and Dr. GRPO (oat, understand-r1-zero): a symmetric clip and no dual clip. A token with A = -1 and
    r = 20 costs 20 with gradient 20 there; under DAPO's dual clip (c = 10) it costs 10 with gradient 0."""
    old = torch.zeros(1, 1)
    for algo, loss_want, grad_want in (("grpo", 20.0, 20.0), ("drgrpo", 20.0, 20.0), ("dapo", 10.0, 0.0)):
        logp = torch.full((1, 1), math.log(20.0), requires_grad=True)
        gate = delta.ALGOS[algo]["gate"](Args())
        loss, met = policy_loss(logp, old, torch.tensor([-1.0]), torch.ones(1, 1, dtype=torch.bool), **gate)
        (g,) = torch.autograd.grad(loss, logp)
        assert loss.item() == pytest.approx(loss_want) and g.item() == pytest.approx(grad_want), algo
        assert met["clipfrac_dual"].item() == (algo == "dapo")


def test_top_share_mask_in_float64_keeps_the_top_tokens():
    """The threshold is taken and compared in the values' own dtype (float32 rounding kept no token here)."""
    values = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.9999999999]], dtype=torch.float64)
    mask = torch.ones_like(values, dtype=torch.bool)
    assert delta.top_share_mask(values, mask, 0.1).tolist() == [[False] * 9 + [True]]
    assert delta.top_share_mask(values, mask, 0.2, largest=False).tolist() == [[True, True] + [False] * 8]
    tied = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.5]])
    assert delta.top_share_mask(tied, torch.ones_like(tied, dtype=torch.bool), 0.2).sum() == 4  # ties are all kept


def test_top_share_mask_keeps_the_top_share_of_valid_tokens():
    gen = torch.Generator().manual_seed(0)
    entropy, mask = torch.rand(6, 9, generator=gen), torch.rand(6, 9, generator=gen) > 0.3
    entropy[~mask] = 10.0  # padding must never be picked, however large its entropy
    top = delta.top_share_mask(entropy, mask, 0.2)  # the forking tokens: the entropy's top 20 %
    ranked = sorted((float(entropy[i, t]), (i, t)) for i in range(6) for t in range(9) if mask[i, t])[::-1]
    k = math.ceil(0.2 * len(ranked))
    assert {x for _, x in ranked[:k]} == {(i, t) for i in range(6) for t in range(9) if top[i, t]}


def test_fipo_weights_against_a_loop():
    """FIPO: f_t = clip(exp(sum_{k>=t} gamma^(k-t) M_k D_k)); capped at 1 for A < 0 with r > safety;
    responses with more than one dual-clipped negative token are dropped."""
    gen = torch.Generator().manual_seed(3)
    B, T = 5, 300  # longer than one block of the chunked discount
    old = -torch.rand(B, T, generator=gen)
    logp = old + 0.05 * torch.randn(B, T, generator=gen)
    logp[1, 10], logp[1, 20], logp[3, 5] = old[1, 10] + 3.0, old[1, 20] + 2.9, old[3, 5] + 1.5  # ratios 20, 18, 4.5
    adv = torch.tensor([0.5, -1.0, 0.0, -0.3, 1.2])
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[4, 250:] = False
    f, keep = delta.fipo_weights(logp, old, adv, mask, decay=32.0, low=0.8, high=1.2, safety=3.0, clip_c=10.0,
                                 chunk=128)
    g = 2 ** (-1 / 32)
    for i in range(B):
        d = [float(logp[i, t] - old[i, t]) * bool(mask[i, t]) for t in range(T)]
        d = [x if x <= math.log(10.0) else 0.0 for x in d]
        acc = 0.0
        for t in reversed(range(T)):
            acc = d[t] + g * acc
            want = min(max(math.exp(acc), 0.8), 1.2)
            if adv[i] < 0 and mask[i, t] and math.exp(float(logp[i, t] - old[i, t])) > 3.0:
                want = min(want, 1.0)
            assert float(f[i, t]) == pytest.approx(want, rel=1e-4), (i, t)
    assert keep.tolist() == [True, False, True, True, True]  # response 1 has two ratios above c = 10
    # the safety rule clips to [0.8, 1] as FIPO's code does (0.8 fixed), also with a band below 0.8
    low, _ = delta.fipo_weights(logp, old, adv, mask, low=0.5, high=1.2, safety=3.0)
    free = delta.fipo_weights(logp, old, adv, mask, low=0.5, high=1.2, safety=1e9)[0]
    safe = (adv[:, None] < 0) & mask & ((logp - old).exp() > 3.0)
    assert torch.equal(low[safe], free[safe].clamp(0.8, 1.0)) and torch.equal(low[~safe], free[~safe])


# ------------------------------------------------------------------------------------- rollout
def test_scoring_logprobs_match_generate_logits_with_left_padding(tiny):
    """The training/scoring forward reproduces the sampler's distribution: same positions, logits / T."""
    from transformers import GenerationConfig

    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    torch.manual_seed(0)
    prompts = ["Q: 1+1=?", "Question: 47+38=?\nAnswer: ", "x"]  # different lengths -> left padding
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    T = 0.7
    out = model.generate(**enc, generation_config=GenerationConfig(
        do_sample=True, temperature=T, top_k=0, top_p=1.0, max_new_tokens=12, eos_token_id=[0], pad_token_id=0),
        output_logits=True, return_dict_in_generate=True)
    P = enc.input_ids.shape[1]
    resp = out.sequences[:, P:]
    R = resp.shape[1]
    is_eos = resp == 0
    rmask = (is_eos.cumsum(1) - is_eos.long()) == 0
    ref = torch.stack(out.logits, 1).float().div(T).log_softmax(-1).gather(-1, resp[..., None]).squeeze(-1)
    am = torch.cat([enc.attention_mask.bool(), rmask], 1)
    logp = delta.response_logprobs(model, out.sequences, am, R, T)[0]
    assert torch.allclose(logp[rmask], ref[rmask], atol=1e-4)


@pytest.mark.parametrize("chunk", [1, 5, 4096])
def test_sliced_lm_head_gives_the_full_logits_values_and_gradients(tiny, chunk):
    """The LM head on slices (checkpointed in training) equals the plain forward over [b, R, V] logits."""
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    batch = pack(tok, ["Q: 1+2=?", "Q: 35+41=?\nA: "], ["So 3.", "It is \\boxed{76}"], "cpu")
    ids, am, R = batch["input_ids"], batch["attention_mask"], batch["response_mask"].shape[1]
    logits = model(input_ids=ids, attention_mask=am.long(), position_ids=(am.long().cumsum(1) - 1).clamp(min=0),
                   output_hidden_states=True, use_cache=False)
    full = logits.logits[:, -R - 1:-1].float() / 0.7  # [b, R, V]
    ref_logp = full.log_softmax(-1).gather(-1, ids[:, -R:, None]).squeeze(-1)
    ref_ent = -(full.softmax(-1) * full.log_softmax(-1)).sum(-1)
    logp, ent, hidden = delta.response_logprobs(model, ids, am, R, 0.7, chunk, checkpoint=True, with_entropy=True)
    assert torch.allclose(logp, ref_logp, atol=1e-5) and torch.allclose(ent, ref_ent, atol=1e-5)
    assert torch.allclose(hidden, logits.hidden_states[-1][:, -R - 1:-1], atol=1e-6)  # post-norm input of the head
    mask = batch["response_mask"]
    ours = torch.autograd.grad((logp * mask).sum(), list(model.parameters()), allow_unused=True)
    ref = torch.autograd.grad((ref_logp * mask).sum(), list(model.parameters()), allow_unused=True)
    for a, b in zip(ours, ref):
        assert (a is None and b is None) or torch.allclose(a, b, atol=1e-5)
    assert "forward" not in vars(model.get_output_embeddings())  # the head is itself again


def test_response_mask_stops_at_first_eos_even_though_pad_is_eos(tiny):
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    assert tok.pad_token_id == tok.eos_token_id
    torch.manual_seed(1)
    batch = hf_sample(model, tok, ["Q: 1+1=?"] * 16, max_new_tokens=20, temperature=1.0)
    resp = batch["input_ids"][:, batch["prompt_len"]:]
    for ids, m, trunc in zip(resp, batch["response_mask"], batch["truncated"]):
        n = int(m.sum())
        assert torch.all(m[:n]) and not torch.any(m[n:])  # a prefix
        eos = (ids == tok.eos_token_id).nonzero().flatten().tolist()
        if eos:
            assert n == eos[0] + 1 and not trunc
        else:
            assert n == ids.shape[0] and trunc


def test_generation_in_token_budgeted_calls_gives_the_same_greedy_responses(tiny):
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    prompts = [delta.prompt_text(tok, f"{a}+{a + 7}=?") for a in range(10, 30)] + ["Q: 5+5=?\nA: "]
    one = hf_sample(model, tok, prompts, 16, temperature=0.0, max_tokens=10**6)
    many = hf_sample(model, tok, prompts, 16, temperature=0.0, max_tokens=3 * 40)  # 3 sequences per call
    assert sampling.decode_responses(tok, one) == sampling.decode_responses(tok, many)


def plain_generate(model, tok, prompt_ids, n, max_new_tokens, temperature):
    """Each prompt repeated n times and forwarded in every row: the sampler's path before prompt_cache."""
    ids = [p for p in prompt_ids for _ in range(n)]
    P, pad = max(map(len, ids)), tok.pad_token_id
    x = torch.tensor([[pad] * (P - len(p)) + p for p in ids])
    am = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in ids])
    kw = dict(do_sample=True, temperature=temperature, top_p=1.0, top_k=0) if temperature > 0 else {}
    out = model.generate(input_ids=x, attention_mask=am, generation_config=transformers.GenerationConfig(
        max_new_tokens=max_new_tokens, eos_token_id=[tok.eos_token_id], pad_token_id=pad, **kw))
    return out[:, P:].tolist()


def sampled_figures(model, tok, prompt_ids, n, responses, T):
    """The mean log-probability of the sampled tokens (scored at T) and the mean length."""
    batch = sampling.rollout_batch([p for p in prompt_ids for _ in range(n)], responses, [tok.eos_token_id],
                                tok.pad_token_id, "cpu")
    mask, R = batch["response_mask"], batch["response_mask"].shape[1]
    with torch.no_grad():
        logp = delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], R, T)[0]
    return float(logp[mask].mean()), float(mask.sum(1).float().mean())


def test_the_sampler_forwards_each_prompt_once_and_samples_as_before(tiny, monkeypatch):
    """A group's G responses come from one forward of their prompt (prompt_cache), within the per-call token
    budget: greedy responses identical to HF generate forwarding the prompt in every row, sampled ones drawn
    from the same distribution (the sampled tokens' mean log-probability and the mean length within 4 standard
    errors of HF generate's, 448 responses each)."""
    model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    prompt_ids = [sampling.encode_prompt(tok, delta.prompt_text(tok, f"{a}+{2 * a + 3}=?")) for a in range(10, 16)]
    prompt_ids.append(sampling.encode_prompt(tok, "Q: 5+5=?\nA: "))  # another length: left padding
    n, new = 8, 24
    budget = 3 * n * (max(map(len, prompt_ids)) + new)  # 3 groups a call
    embedded, calls, decode = [], [], sampling.decode
    hook = model.get_input_embeddings().register_forward_hook(lambda m, i, o: embedded.append(i[0].numel()))
    monkeypatch.setattr(sampling, "decode",
                        lambda model, x, *a, **k: calls.append(x.shape) or decode(model, x, *a, **k))
    args = Args(max_new_tokens=new, gen_max_tokens=budget, top_p=1.0, top_k=0)
    sampler = sampling.HFSampler(args, model, tok, [tok.eos_token_id], engines.DDP(1, torch.device("cpu")))
    greedy = sampler.generate(prompt_ids, 0.0, n)[0]
    hook.remove()
    assert all(rows * (P + new) <= budget for rows, P in calls) and len(calls) == 3
    P = max(len(p) for p in prompt_ids[:3])
    assert embedded[0] + embedded[1] == 3 * (P - 1) + 3 * n  # each prompt's tokens once, then its last in each row
    upto_eos = lambda r: r[:r.index(tok.eos_token_id) + 1] if tok.eos_token_id in r else r
    ref = [r for c in range(3) for r in plain_generate(model, tok, prompt_ids[3 * c:3 * c + 3], n, new, 0.0)]
    assert [upto_eos(r) for r in greedy] == [upto_eos(r) for r in ref]
    figures = {"ours": [], "hf": []}
    for seed in range(8):
        torch.manual_seed(seed)
        ours = [upto_eos(r) for r in sampler.generate(prompt_ids, 1.0, n)[0]]
        hf = [upto_eos(r) for r in plain_generate(model, tok, prompt_ids, n, new, 1.0)]
        for name, rows in (("ours", ours), ("hf", hf)):
            figures[name].append(sampled_figures(model, tok, prompt_ids, n, rows, 1.0))
    for k in range(2):  # the mean log-probability of a sampled token, the mean length
        (a, sa), (b, sb) = (mean_and_se([f[k] for f in figures[name]]) for name in ("ours", "hf"))
        assert abs(a - b) <= 4 * math.hypot(sa, sb), (k, a, b, sa, sb)


def mean_and_se(xs):
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))


def test_next_tokens_draws_from_hfs_warped_distribution():
    """next_tokens' implied distribution (its CDF's steps) is HF's temperature, top-k and top-p warpers' softmax,
    and 40,000 draws land on each token at its probability (within 4 standard errors); greedy is the argmax."""
    from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                        TopPLogitsWarper)
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 12, generator=gen) * 2
    for T, top_k, top_p in [(1.0, 0, 1.0), (0.6, 5, 1.0), (1.3, 0, 0.7), (0.8, 7, 0.9)]:
        warped = TemperatureLogitsWarper(T)(None, logits)
        warped = TopKLogitsWarper(top_k)(None, warped) if top_k else warped
        warped = TopPLogitsWarper(top_p)(None, warped) if top_p < 1 else warped
        want = warped.softmax(-1)  # [3, 12]
        torch.manual_seed(1)
        draws = sampling.next_tokens(logits.repeat_interleave(40_000 // 3 + 1, 0), T, top_p, top_k)
        draws = draws.view(3, -1)
        for row in range(3):
            seen = torch.bincount(draws[row], minlength=12).double() / draws.shape[1]
            se = (want[row].double() * (1 - want[row].double()) / draws.shape[1]).sqrt()
            assert torch.all((seen - want[row]).abs() <= 4 * se + 1e-9), (T, top_k, top_p, seen, want[row])
            assert torch.all(seen[want[row] == 0] == 0)  # a token the warpers remove is never drawn
    assert torch.equal(sampling.next_tokens(logits, 0.0), logits.argmax(-1))


@pytest.mark.parametrize("family", ["qwen3", *BACKBONES])
def test_scoring_forwards_each_prompt_once_with_the_same_values(tiny, backbones, family):
    """The scoring pass's shared prompts (share_prompts) give the log-probs, entropy and Eq. D's h of a forward of
    every row, to fp32 rounding, on every family (sliding windows, an MoE)."""
    model, tok = checkpoints.load_model(tiny if family == "qwen3" else backbones[family], torch.device("cpu"))
    prompts = [delta.prompt_text(tok, "12+3=?")] * 3 + [delta.prompt_text(tok, "101+2=?")] * 2 + ["Q: 4+4?"]
    batch = pack(tok, prompts, ["Let us add. \\boxed{15}", "no", "15", "103", "It is 103, so", "8"], "cpu")
    R = batch["response_mask"].shape[1]
    embedded = []
    hook = model.get_input_embeddings().register_forward_hook(lambda m, i, o: embedded.append(i[0].shape))
    with torch.no_grad():
        plain = delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], R, 0.7, 5,
                                        with_entropy=True)
        shared = delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], R, 0.7, 5,
                                         with_entropy=True, share_prompts=True)
    hook.remove()
    P = batch["prompt_len"]
    assert embedded[1:] == [torch.Size([3, P - 1]), torch.Size([6, R + 1])]  # 3 distinct prompts, once each
    mask = batch["response_mask"]
    for a, b in zip(plain, shared):
        assert torch.allclose(a[mask], b[mask], atol=1e-5)


# ------------------------------------------------------------------------------------- training step
def train(run, batch, adv, weights, plans, lr=0.1):
    run.optimizer = torch.optim.SGD(run.model.parameters(), lr=lr)
    return delta.update(run, batch, adv, weights, plans)


def test_micro_batches_cover_every_row_once_within_the_budget(tiny):
    run, batch, _, _, _ = fixed_rollout(tiny, budget=100)
    args = run.args
    plans = delta.micro_batches(run, batch)
    per = args.mini_batch_prompts * args.group_size
    for m, groups in enumerate(plans):
        rows = sorted(int(i) for g in groups for i in g)
        assert rows == list(range(m * per, (m + 1) * per))  # each mini-batch's rows, once
        for g in groups:
            ids, _, R = delta.micro_batch(batch, g)
            assert len(g) == 1 or ids.numel() <= 100  # padded tokens within the budget
    run.args = dataclasses.replace(args, max_tokens_per_micro_batch=10**6)
    assert len(plans[0]) > 1 and len(delta.micro_batches(run, batch)[0]) == 1


def test_score_packs_the_features_of_side_tokens(tiny):
    run, batch, adv, packed, plans = fixed_rollout(tiny)
    v, adv_tok, where = packed
    mask = batch["response_mask"]
    R = mask.shape[1]
    logp, _, hidden = delta.response_logprobs(run.model, batch["input_ids"], batch["attention_mask"], R, 1.0)
    padded = token_features(hidden, logp)  # [N, R, H] from one untrimmed forward
    side = mask & (adv != 0)[:, None]
    assert v.shape[0] == int(side.sum()) and sorted(where.tolist()) == side.flatten().nonzero().flatten().tolist()
    assert torch.allclose(v, padded.reshape(-1, v.shape[1])[where], atol=1e-5)
    assert torch.equal(adv_tok, adv[:, None].expand_as(mask).reshape(-1)[where])
    assert torch.allclose(batch["old_logp"][mask], logp[mask], atol=1e-5)


def test_bf16_features_change_lambda_by_bf16_rounding_only(tiny):
    """Stored in bf16 (the compute dtype on GPU), the features move lam by at most 0.01 here."""
    _, batch, adv, packed, _ = fixed_rollout(tiny, n_prompts=8)
    v, adv_tok, where = packed
    ones = torch.ones_like(adv_tok, dtype=torch.bool)
    mask = batch["response_mask"]
    fp32 = delta_coefficients(v, adv_tok, ones, num_valid=mask.sum())
    bf16 = delta_coefficients(v.bfloat16(), adv_tok, ones, num_valid=mask.sum())
    assert (fp32 - bf16).abs().max().item() < 1e-2


def test_algo_dapo_and_delta_differ_only_through_lambda(tiny):
    states = []
    for algo in ("dapo", "delta"):
        run, batch, adv, packed, plans = fixed_rollout(tiny, algo=algo)
        weights = torch.ones_like(batch["old_logp"]) if algo == "delta" else None
        train(run, batch, adv, weights, plans)
        states.append(run.model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    run, batch, adv, packed, plans = fixed_rollout(tiny)  # and a real lam changes the update
    train(run, batch, adv, lam_of(run, batch, adv, packed), plans)
    assert any(not torch.equal(states[0][k], run.model.state_dict()[k]) for k in states[0])


def test_training_step_independent_of_micro_batch_budget(tiny):
    finals = []
    for budget in (16384, 60):  # one micro-batch per mini-batch, or one response each
        run, batch, adv, packed, plans = fixed_rollout(tiny, budget=budget)
        assert (max(map(len, plans)) > 1) == (budget == 60)
        train(run, batch, adv, lam_of(run, batch, adv, packed), plans)
        finals.append(run.model.state_dict())
    for k in finals[0]:
        assert torch.allclose(finals[0][k], finals[1][k], atol=1e-6), k


@pytest.mark.parametrize("algo", ["forking", "sapo", "fipo", "oracle", "lam_top", "lam_bottom"])
def test_baselines_train_through_the_same_path(tiny, algo):
    """Each baseline departs from DAPO only where ALGOS says. Forking and SAPO change even a step taken at
    theta_old; FIPO's weights are 1 there (no future KL yet) and change the later steps of a rollout."""
    def run(name, mini_batch_prompts):
        r, batch, adv, packed, _ = fixed_rollout(tiny, algo=name)
        r.args.mini_batch_prompts = mini_batch_prompts
        mask, weights = batch["response_mask"], None
        if r.algo["weights"]:  # the algorithm's own weights, from the scoring pass's entropy and features
            weights = r.algo["weights"](r, dict(batch=batch, adv=adv, features=packed, rows=r.rows, stats={},
                                                entropy=r.entropy))
        if name == "forking":  # the top 20 % of the valid tokens by entropy, counted by hand
            values = r.entropy[mask].sort(descending=True).values
            threshold = values[math.ceil(0.2 * len(values)) - 1]
            assert torch.equal(weights, (mask & (r.entropy >= threshold)).float()) and 0 < weights.sum() < mask.sum()
        out = train(r, batch, adv, weights, delta.micro_batches(r, batch))
        assert math.isfinite(out["grad_norm"])
        return r.model.state_dict()

    same = lambda a, b: all(torch.equal(a[k], b[k]) for k in a)
    if algo == "fipo":  # at theta_old the ratio is 1 to the rounding of scoring's shared prompts (prompt_cache)
        close = lambda a, b: all(torch.allclose(a[k], b[k], rtol=0, atol=1e-6) for k in a)
        assert close(run("fipo", 4), run("dapo", 4)) and not close(run("fipo", 2), run("dapo", 2))
    else:
        assert not same(run(algo, 4), run("dapo", 4))


def test_oracle_and_lam_subsets_weigh_the_tokens_they_name(tiny):
    run, batch, adv, packed, plans = fixed_rollout(tiny, algo="oracle")
    mask, roll = batch["response_mask"], dict(batch=batch, adv=adv, features=packed, rows=run.rows, stats={})
    weights = oracle.oracle_weights(run, roll)
    deciding = oracle.deciding_tokens(run.tok, batch) & (adv != 0)[:, None]
    assert weights[mask].mean().item() == pytest.approx(1.0) and torch.all(weights[~mask] == 0)
    assert torch.allclose(weights[deciding] / weights[mask & ~deciding].min(), torch.tensor(1.2 / 0.8))
    lam = lam_of(run, batch, adv, packed)
    top, bottom = (delta.lam_subset_weights(x)(run, dict(roll, stats={})) for x in (True, False))
    assert torch.all(lam[top.bool()].min() >= lam[mask & ~top.bool()].max())
    assert torch.all(lam[bottom.bool()].max() <= lam[mask & ~bottom.bool()].min())
    assert top.sum() >= mask.sum() / 2 and bottom.sum() >= mask.sum() / 2 and not torch.any((top + bottom)[~mask])


def test_importance_correction_weighs_each_token_by_the_truncated_ratio(tiny):
    """With a sampler's log-probs (vLLM), each token's term is weighted by min(pi_old / pi_sampler, cap)."""
    gen = torch.Generator().manual_seed(0)
    old, sampler = -torch.rand(3, 5, generator=gen), -torch.rand(3, 5, generator=gen)
    got = sampling.is_correction(old, sampler, 2.0)
    for i in range(3):
        for t in range(5):
            assert got[i, t].item() == pytest.approx(min(math.exp(old[i, t] - sampler[i, t]), 2.0))
    states = []
    for shift in (None, 0.0, 0.4):  # no sampler log-probs; equal ones; different ones
        run, batch, adv, packed, plans = fixed_rollout(tiny, algo="dapo", is_cap=1.3)
        w = None
        if shift is not None:
            batch["sampler_logp"] = batch["old_logp"] - shift * torch.rand(batch["old_logp"].shape, generator=gen)
            w = sampling.is_correction(batch["old_logp"], batch["sampler_logp"], 1.3)
        out = train(run, batch, adv, None, plans)
        states.append(run.model.state_dict())
        ref, rb, ra, _, rp = fixed_rollout(tiny, algo="dapo")  # the same update with the weights given as lam
        train(ref, rb, ra, w, rp)
        assert all(torch.allclose(ref.model.state_dict()[k], v, atol=1e-7) for k, v in states[-1].items())
        assert ("rollout/is_mean" in out) == (shift is not None)
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])  # weights of 1 change nothing
    assert any(not torch.equal(states[0][k], states[2][k]) for k in states[0])


def test_non_finite_gradient_skips_the_step(tiny):
    run, batch, adv, packed, plans = fixed_rollout(tiny)
    before = {k: x.clone() for k, x in run.model.state_dict().items()}
    batch["old_logp"] = torch.full_like(batch["old_logp"], float("nan"))
    with pytest.warns(UserWarning, match="non-finite gradient norm"):
        out = train(run, batch, adv, None, plans)
    assert not math.isfinite(out["grad_norm"])
    assert all(torch.equal(before[k], x) for k, x in run.model.state_dict().items())


def test_gradient_checkpointing_gives_the_same_update(tiny):
    finals = []
    for ckpt in (False, True):
        run, batch, adv, packed, plans = fixed_rollout(tiny)
        if ckpt:
            checkpoints.enable_checkpointing(run.model)
            assert getattr(run.model, "is_activation_checkpointing", None) or run.model.is_gradient_checkpointing
        run.model.train()
        train(run, batch, adv, None, plans)
        finals.append(run.model.state_dict())
    assert all(torch.allclose(finals[0][k], finals[1][k], atol=1e-6) for k in finals[0])


@pytest.mark.parametrize("algo", ["grpo", "drgrpo"])
def test_grpo_and_drgrpo_normalisers(tiny, algo):
    """GRPO: mean over each response, then over responses (symmetric clip);
    Dr. GRPO: token sum / (responses x max len)."""
    run, batch, adv, packed, plans = fixed_rollout(tiny, algo=algo)
    model, args = run.model, run.args
    args.mini_batch_prompts = 4  # one mini-batch, one micro-batch
    plans = delta.micro_batches(run, batch)
    mask = batch["response_mask"]
    R = mask.shape[1]
    logp = delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], R, 1.0)[0]
    if algo == "grpo":
        per_seq = [-(adv[i] * logp[i][mask[i]].exp() / batch["old_logp"][i][mask[i]].exp()).mean() for i in range(16)]
        expected = torch.stack(per_seq).mean()
    else:
        ratio = (logp - batch["old_logp"]).exp()
        expected = -(adv[:, None] * ratio * mask).sum() / (16 * args.max_new_tokens)
    (g_expected,) = torch.autograd.grad(expected, model.get_output_embeddings().weight)
    w0 = model.get_output_embeddings().weight.detach().clone()
    out = train(run, batch, adv, None, plans, lr=1.0)
    assert out["loss/policy"] == pytest.approx(expected.item(), rel=1e-5, abs=1e-7)
    norm = g_expected.norm()  # the step is clipped to max_grad_norm over all parameters; compare directions
    step = w0 - model.get_output_embeddings().weight.detach()
    cos = (step * g_expected).sum() / (step.norm() * norm)
    assert cos.item() == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("algo", ["forking", "lam_top"])
def test_a_mini_batch_that_chooses_no_token_adds_nothing(tiny, algo):
    """Forking tokens and the lam subsets divide by the chosen tokens of a mini-batch; one that chooses none (its
    groups of zero spread, say) adds a loss of 0, not 0 / 0: NaN skipped that optimizer step and made the step's
    logged loss NaN (found on 2 processes by test_engines.py::test_gpu_branches_on_two_processes)."""
    import warnings
    run, batch, adv, packed, plans = fixed_rollout(tiny, algo=algo)
    weights = run.algo["weights"](run, dict(batch=batch, adv=adv, entropy=run.entropy, features=packed, stats={}))
    weights[8:] = 0  # the second mini-batch (rows 8-15) chooses no token
    assert len(plans) == 2 and weights[:8].sum() > 0
    before = [p.detach().clone() for p in run.model.parameters()]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "non-finite gradient norm: optimizer step skipped"
        out = delta.update(run, batch, adv, weights, plans)
    assert math.isfinite(out["loss/policy"]) and math.isfinite(out["grad_norm"])
    assert all(torch.isfinite(p).all() for p in run.model.parameters())
    assert not all(torch.equal(p, x) for p, x in zip(run.model.parameters(), before))


def _rank_share(batch, adv, args, rank, world):
    """This rank's rows: an equal share of every mini-batch, as step_prompts hands them out."""
    per = args.mini_batch_prompts * args.group_size
    idx = torch.cat([torch.arange(m + rank * per // world, m + (rank + 1) * per // world)
                     for m in range(0, adv.shape[0], per)])
    part = {k: (x[idx] if torch.is_tensor(x) else x) for k, x in batch.items()}
    return part, adv[idx]


COPYABLE = ("delta_coefficients", "top_share_mask")


def _dist_worker(rank, world, tmp, tiny, engine):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=world)
    try:
        _dist_steps(rank, world, tmp, tiny, engine)
        gc.collect()  # every object of the step gone before the group: FSDP's, held to exit, aborted a rank (1 in 12)
    finally:
        dist.destroy_process_group()


def _dist_steps(rank, world, tmp, tiny, engine):
    import inspect
    import torch.distributed as dist
    if engine == "ddp":
        # the copyable functions pasted into a module holding only torch, as a user would, under an
        # initialised process group: with group=WORLD they see the whole batch; without, this rank's part only
        pasted = {"torch": torch}
        for name in COPYABLE:
            exec(inspect.getsource(getattr(delta, name)), pasted)
        v, adv, mask = uneven_batch()
        rows = slice(0, 2) if rank == 0 else slice(2, 6)
        T = 5 if rank == 0 else 7
        lam = pasted["delta_coefficients"](v[rows, :T], adv[rows], mask[rows, :T], K=2, stats=(stats := {}),
                                           group=dist.group.WORLD)
        alone = pasted["delta_coefficients"](v[rows, :T], adv[rows], mask[rows, :T], K=2)  # no collective
        top = pasted["top_share_mask"](v[rows, :T, 0].double(), mask[rows, :T], 0.3, group=dist.group.WORLD)
        top_alone = pasted["top_share_mask"](v[rows, :T, 0].double(), mask[rows, :T], 0.3)
        torch.save({"lam": lam, "stats": stats, "alone": alone, "top": top, "top_alone": top_alone},
                   f"{tmp}/lam{rank}.pt")
        # packed, with rank 0 holding only zero-advantage responses: no feature at all, yet every sum joins
        mine_rows = [2] if rank == 0 else [0, 1, 3, 4, 5]  # row 2 has advantage 0: rank 0 needs no feature
        mine = torch.zeros_like(mask)
        mine[mine_rows] = mask[mine_rows] & (adv[mine_rows] != 0)[:, None]
        count = mask[mine_rows].sum()
        packed = delta_coefficients(v[mine], adv[:, None].expand_as(mask)[mine],
                                    torch.ones(int(mine.sum()), dtype=torch.bool),
                                    K=2, num_valid=count, stats=(pstats := {}), group=dist.group.WORLD)
        torch.save({"lam": packed, "stats": pstats, "n": int(mine.sum())}, f"{tmp}/packed{rank}.pt")
    # a whole training step: scoring pass, coefficients from packed features, optimizer steps
    run, batch, adv, _, _ = fixed_rollout(tiny, world=world, fsdp=engine == "fsdp")
    greedy_prompts = [delta.prompt_text(run.tok, f"{12 + rank}+{34 + 3 * i}=?") for i in range(3)]
    run.sampler.args = dataclasses.replace(run.args, max_new_tokens=12, gen_max_tokens=2 * 3 * 40)
    greedy = delta.sample(run.sampler, greedy_prompts, 0.0, n=3)  # 2 prompts a call, each forwarded once
    torch.save(sampling.decode_responses(run.tok, greedy), f"{tmp}/greedy{rank}.pt")
    part, part_adv = _rank_share(batch, adv, run.args, rank, world)
    run.rank, run.args.max_tokens_per_micro_batch = rank, 80  # several micro-batches, not one process's split
    if engine == "fsdp":  # FSDP2 keeps the root unsharded after a forward without backward (fixed_rollout's
        run.train_model.reshard()  # scoring pass): an optimizer must see the sharded parameters
    run.optimizer = torch.optim.SGD(run.model.parameters(), lr=0.1, momentum=0.9)  # linear in the gradient
    plans = delta.micro_batches(run, part)
    part["old_logp"], _, packed = delta.score(run, part, part_adv, plans, True)
    lam = lam_of(run, part, part_adv, packed, stats := {})
    held, no_sync = [], run.sharding.no_sync

    @contextlib.contextmanager
    def watched(model, sync):  # after each micro-batch's backward: unsharded gradient bytes still held
        with no_sync(model, sync):
            yield
        held.append(unsharded_gradient_bytes(model) if engine == "fsdp" else 0)
    run.sharding.no_sync = watched
    out = delta.all_mean(run, delta.update(run, part, part_adv, lam, plans))
    delta.sample(run.sampler, [delta.prompt_text(run.tok, "12+34=?")] * 3, 1.0)  # HF generate, gathered
    sharded = fsdp_sharded(run.train_model) if engine == "fsdp" else None
    state = run.sharding.model_state(run.train_model)
    optim = run.sharding.optim_state(run.train_model, run.optimizer)
    if rank == 0:
        torch.save({"model": state, "out": out, "stats": stats, "optim": optim, "held": held, "sharded": sharded},
                   f"{tmp}/{engine}.pt")


def unsharded_gradient_bytes(model):
    """Bytes of FSDP2's unsharded gradients (accumulated without a reduce-scatter, or not yet scattered)."""
    from torch.distributed.fsdp import FSDPModule
    total = 0
    for m in model.modules():
        for group in m._get_fsdp_state()._fsdp_param_groups if isinstance(m, FSDPModule) else ():
            for p in group.fsdp_params:
                unsharded = getattr(p, "_unsharded_param", None)
                for g in (p.unsharded_accumulated_grad, None if unsharded is None else unsharded.grad):
                    total += 0 if g is None else g.numel() * g.element_size()
    return total


def fsdp_sharded(model):
    """Per FSDP module: (every parameter group sharded, reshards after forward)."""
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard._fsdp_param import ShardedState
    return {name or "root": (all(p.sharded_state == ShardedState.SHARDED for g in m._get_fsdp_state()._fsdp_param_groups
                                 for p in g.fsdp_params),
                             all(g.post_forward_mesh_info is not None for g in m._get_fsdp_state()._fsdp_param_groups))
            for name, m in model.named_modules() if isinstance(m, FSDPModule)}


def uneven_batch():
    v, adv, mask = random_batch(11)
    mask[0:2, 5:] = False  # rank 0's responses are shorter: it holds them padded to 5 tokens only
    return v, adv, mask


def one_process_step(tiny):
    run, batch, adv, packed, plans = fixed_rollout(tiny)
    stats = {}
    lam = lam_of(run, batch, adv, packed, stats)
    run.optimizer = torch.optim.SGD(run.model.parameters(), lr=0.1, momentum=0.9)  # linear in the gradient, with state
    out = delta.update(run, batch, adv, lam, plans)
    return run.model, out, stats, run.sharding.optim_state(run.model, run.optimizer)


@pytest.mark.parametrize("engine", ["ddp", "fsdp"])
def test_two_processes_match_one_process(tiny, tmp_path, engine):
    """2 gloo processes under DDP or FSDP2 = 1 process: coefficients, loss, gradient norm, parameters and
    optimizer state, within fp32 rounding. The copyable functions, pasted alone, communicate only when given
    the group: without it each rank gets its own part's result, as the official per-rank code."""
    mp.spawn(_dist_worker, args=(2, str(tmp_path), tiny, engine), nprocs=2, join=True)
    if engine == "ddp":  # coefficients: the two slices together equal the one-process result on the whole batch
        v, adv, mask = uneven_batch()
        stats = {}
        whole = delta_coefficients(v, adv, mask, K=2, stats=stats)
        got0, got1 = torch.load(f"{tmp_path}/lam0.pt"), torch.load(f"{tmp_path}/lam1.pt")
        assert torch.allclose(got0["lam"], whole[0:2, :5], atol=1e-6)
        assert torch.allclose(got1["lam"], whole[2:6, :7], atol=1e-6)
        assert got0["stats"] == pytest.approx(stats) and got1["stats"] == pytest.approx(stats)
        assert torch.equal(got0["alone"], delta_coefficients(v[0:2, :5], adv[0:2], mask[0:2, :5], K=2))
        assert torch.equal(got1["alone"], delta_coefficients(v[2:6, :7], adv[2:6], mask[2:6, :7], K=2))
        assert not torch.allclose(got1["alone"], got1["lam"], atol=1e-3)  # per rank is not the batch statistic
        values = torch.cat([v[0:2, :5, 0][mask[0:2, :5]], v[2:6, :7, 0][mask[2:6, :7]]]).double()
        threshold = values.topk(math.ceil(0.3 * len(values))).values[-1]
        assert torch.equal(got0["top"], mask[0:2, :5] & (v[0:2, :5, 0].double() >= threshold))
        assert torch.equal(got1["top"], mask[2:6, :7] & (v[2:6, :7, 0].double() >= threshold))
        assert torch.equal(got0["top_alone"], delta.top_share_mask(v[0:2, :5, 0].double(), mask[0:2, :5], 0.3))
        p0, p1 = torch.load(f"{tmp_path}/packed0.pt"), torch.load(f"{tmp_path}/packed1.pt")
        side = mask & (adv != 0)[:, None]
        assert p0["n"] == 0 and torch.allclose(p1["lam"], whole[side], atol=1e-6)  # a rank without features
        assert p0["stats"] == pytest.approx(stats) and p1["stats"] == pytest.approx(stats)
    plain, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    for rank in range(2):  # each rank's greedy groups, sampled from shared prompts under DDP or FSDP2's gathers
        prompt_ids = [sampling.encode_prompt(tok, delta.prompt_text(tok, f"{12 + rank}+{34 + 3 * i}=?"))
                      for i in range(3)]
        got = torch.load(f"{tmp_path}/greedy{rank}.pt")
        assert got == sampling.decode_responses(tok, sampling.rollout_batch(
            [p for p in prompt_ids for _ in range(3)], plain_generate(plain, tok, prompt_ids, 3, 12, 0.0),
            [tok.eos_token_id], tok.pad_token_id, "cpu"))
    model, out, stats, optim = one_process_step(tiny)
    two = torch.load(f"{tmp_path}/{engine}.pt")
    assert len(two["held"]) > 2 and not any(two["held"])  # FSDP: every micro-batch reduce-scattered at once
    if engine == "fsdp":  # after generating, every layer and the root sharded; only the root kept after forward
        assert all(sharded for sharded, _ in two["sharded"].values())
        assert {name: after for name, (_, after) in two["sharded"].items()} == dict(
            {name: True for name in two["sharded"] if name != "root"}, root=False)
    assert two["stats"] == pytest.approx(stats, rel=1e-5)
    assert two["out"]["loss/policy"] == pytest.approx(out["loss/policy"], rel=1e-4, abs=1e-7)
    assert two["out"]["grad_norm"] == pytest.approx(out["grad_norm"], rel=1e-4)
    for k, x in model.state_dict().items():
        assert torch.allclose(x, two["model"][k], atol=1e-6), k
    for name, st in optim["state"].items():
        for key in ("momentum_buffer",):
            assert torch.allclose(st[key], two["optim"]["state"][name][key], rtol=1e-4, atol=1e-6), (name, key)


# ------------------------------------------------------------------------------------- rows of advantage 0
PLANTED = [[1] * 4, [0] * 4, [1, 0, 0, 1], [0, 1, 1, 1],  # mini-batch 1: the first two groups of zero spread
           [1] * 4, [0] * 4, [1] * 4, [0] * 4]  # mini-batch 2: every group of zero spread


def planted_rewards(run, batch, rows):
    """In place of the verifier: the rewards of PLANTED by the prompt's place in the step (step_prompts hands rank r
    the r-th share of each mini-batch), so on 2 ranks rank 0 holds only zero-spread groups in the first mini-batch."""
    per = run.args.mini_batch_prompts // run.world
    places = [k // per * run.args.mini_batch_prompts + run.rank * per + k % per for k in range(len(rows))]
    correct = torch.tensor([float(x) for p in places for x in PLANTED[p]])
    return correct, correct.to(run.device)


def skip_runs(tiny, rank=0, world=1, engine="ddp", **changes):
    """One rl_step of every algorithm from the same weights, with and without --skip_zero_advantage (AdamW with its
    weight decay; the second mini-batch's step moves the weights through the first's momentum only). The caller puts
    planted_rewards in delta.verify's place."""
    out = {}
    for algo in delta.ALGOS:
        for skip in (True, False):
            model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
            args = Args(model=tiny, algo=algo, fsdp=engine == "fsdp", prompts_per_step=8, group_size=4,
                        mini_batch_prompts=4, max_new_tokens=12, max_prompt_length=32, lr=1e-2, precision="fp32",
                        max_tokens_per_micro_batch=60, skip_zero_advantage=skip, **changes)
            delta.resolve_defaults(args)
            run = delta.make_run(args, model, tok, tiny, rank, world, train_rows=tasks.addition_task(0, 0)[0])
            run.reward_stats = dict(timeouts=0, errors=0)
            torch.manual_seed(rank)
            m = delta.rl_step(run, 0)
            out[algo, skip] = dict(metrics=m, state=run.sharding.model_state(run.train_model))
            del run, model
    return out


def _skip_worker(rank, world, tmp, tiny, engine):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=world)
    delta.verify = planted_rewards  # this process's own delta
    try:
        out = skip_runs(tiny, rank, world, engine)
        if rank == 0:
            torch.save(out, f"{tmp}/skip.pt")
        gc.collect()  # (as _dist_worker)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world,engine", [(1, "ddp"), (2, "ddp"), (2, "fsdp")])
def test_skipping_the_rows_of_advantage_zero_is_exact(tiny, tmp_path, monkeypatch, world, engine):
    """--skip_zero_advantage forwards only the rows of non-zero advantage in scoring and the update (forking
    scores every row: its entropy ranks them all), yet each algorithm's step is the unskipped one's: the same
    weights (fp32 rounding of other micro-batch sums), loss, gradient norm and token metrics. On 2 processes rank 0
    holds no row to train in the first mini-batch (it runs empty micro-batches for the collectives), and no rank
    holds one in the second (no forward; AdamW steps on the gradient 0 as it would have)."""
    if world == 1:
        monkeypatch.setattr(delta, "verify", planted_rewards)
        got = skip_runs(tiny)
    else:
        mp.spawn(_skip_worker, args=(world, str(tmp_path), tiny, engine), nprocs=world, join=True)
        got = torch.load(f"{tmp_path}/skip.pt", weights_only=False)
    for algo in delta.ALGOS:
        skip, full = got[algo, True], got[algo, False]
        assert skip["metrics"]["rows/trained"] == 0.25 and full["metrics"]["rows/trained"] == 1.0, algo
        assert skip["metrics"]["rows/scored"] == (1.0 if algo == "forking" else 0.25), algo
        for key in ("loss/policy", "grad_norm", "loss/clipfrac", "loss/approx_kl", "entropy/trained", "reward/mean"):
            assert skip["metrics"][key] == pytest.approx(full["metrics"][key], rel=1e-4, abs=1e-7), (algo, key)
        assert ("entropy" in skip["metrics"]) == (algo == "forking") and "entropy" in full["metrics"]
        for k, x in full["state"].items():
            assert torch.allclose(skip["state"][k], x, atol=1e-6), (algo, k)
        # the first mini-batch's step moved the weights (lam_bottom's half here is the zero rows' tokens: lam_zero)
        assert (full["metrics"]["grad_norm"] > 0) == (algo != "lam_bottom"), algo


def _uneven_skip_worker(rank, world, tmp, tiny):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=world)
    PLANTED[4:] = [[1] * 4, [0] * 4, [1, 0, 1, 0], [0, 0, 1, 1]]  # rank 1: every row has an advantage; rank 0: none
    delta.verify = planted_rewards
    try:
        model, tok = checkpoints.load_model(tiny, torch.device("cpu"))
        args = Args(model=tiny, prompts_per_step=8, group_size=4, mini_batch_prompts=4, max_new_tokens=12,
                    max_prompt_length=32, precision="fp32")
        delta.resolve_defaults(args)
        run = delta.make_run(args, model, tok, tiny, rank, world, train_rows=tasks.addition_task(0, 0)[0])
        run.reward_stats = dict(timeouts=0, errors=0)
        m = delta.rl_step(run, 0)
        torch.save(m, f"{tmp}/uneven{rank}.pt")
        del run, model
        gc.collect()  # (as _dist_worker)
    finally:
        dist.destroy_process_group()


def test_ranks_log_the_same_metrics_whatever_rows_they_skip(tiny, tmp_path):
    """Rank 0 skips every row, rank 1 none: both log the same metric names (all_mean reduces them as one tensor;
    a key decided by a rank's own rows made gloo abort on a size mismatch under torchrun --vllm)."""
    mp.spawn(_uneven_skip_worker, args=(2, str(tmp_path), tiny), nprocs=2, join=True)
    m0, m1 = (torch.load(f"{tmp_path}/uneven{r}.pt") for r in (0, 1))
    assert m0 == m1 and "entropy" not in m0 and m0["rows/trained"] == pytest.approx(0.5)


def test_a_batch_of_zero_spread_runs_no_forward_and_moves_no_weight(tiny, monkeypatch):
    """Every group's rewards equal: neither pass forwards a row and the weights stay as they were (AdamW's first
    step on a gradient of 0; weight decay is off here, since it moves every weight on any step, skipped or not)."""
    monkeypatch.setattr(delta, "verify", lambda run, batch, rows: (torch.ones(len(rows) * 4),) * 2)
    for algo in ("delta", "dapo", "forking"):
        run = make_run(tiny, algo=algo, prompts_per_step=8, group_size=4, mini_batch_prompts=4, max_new_tokens=12,
                       max_prompt_length=32, weight_decay=0.0, precision="fp32")
        run.train_rows, run.reward_stats = tasks.addition_task(0, 0)[0], dict(timeouts=0, errors=0)
        before = {k: x.clone() for k, x in run.model.state_dict().items()}
        forwards = []
        run.model.register_forward_hook(lambda module, args, output: forwards.append(module.training))
        m = delta.rl_step(run, 0)
        assert forwards and not any(forwards)  # generation's forwards only (in eval mode): none in the update
        assert m["rows/trained"] == 0 and m["grad_norm"] == 0
        assert m["rows/scored"] == (1.0 if algo == "forking" else 0.0)
        assert all(torch.equal(x, run.model.state_dict()[k]) for k, x in before.items()), algo


# ------------------------------------------------------------------------------------- arguments
def test_subprocess_limits_hold_under_load():
    """conftest's subprocesses on a loaded CI machine: one thread a process and the wall-clock limit stretched by the
    load per core (a test that passes alone must not fail at load 8 from its own limit); idle, as before."""
    from conftest import under_load
    assert under_load(600, load=0.5, cores=2) == (2, 600) and under_load(600, True, load=0.5, cores=2) == (1, 600)
    assert under_load(600, load=8, cores=2) == (1, 2400) and under_load(600, load=100, cores=2) == (1, 4800)


def test_every_subprocess_of_a_session_sums_on_the_same_threads(monkeypatch):
    """A whole run and its resume, compared bit for bit, must sum in the same order: the threads follow the load at
    the session's first subprocess, whatever the load later (CI's qwen2 resume on 2 threads against its whole run on
    1 differed in the 7th digit); the time limit follows the load at each start."""
    import conftest
    loads, seen = iter([0.5, 8.0]), []
    monkeypatch.setattr(conftest, "FIRST_LOAD", [])
    monkeypatch.setattr(conftest.os, "getloadavg", lambda: (next(loads), 0.0, 0.0))
    monkeypatch.setattr(conftest.subprocess, "run", lambda cmd, env, timeout, **k: seen.append(
        (env["OMP_NUM_THREADS"], timeout)))
    conftest.run_script(["a.py"])  # load 0.5 at the first: 2 threads from now on
    conftest.run_script(["b.py"])  # load 8 now: still 2 threads, the limit stretched
    assert seen == [("2", 600), ("2", 2400)]


@pytest.mark.parametrize("change,message", [
    (dict(group_size=1), "--group_size"),
    (dict(algo="ppo"), "--algo"),
    (dict(prompts_per_step=30, mini_batch_prompts=16), "multiple of --mini_batch_prompts"),
    (dict(max_tokens_per_micro_batch=0), "--max_tokens_per_micro_batch"),
    (dict(delta_margin="both"), "--delta_margin"),
    (dict(delta_assign="argmax"), "--delta_assign"),
    (dict(task="sorting"), "--task"),
    (dict(report_to="mlflow"), "--report_to"),
    (dict(feature_dtype="fp8"), "--feature_dtype"),
    (dict(vllm=True, vllm_max_model_len=100, max_prompt_length=64), "below max_prompt_length"),
    (dict(lam_min=1.3, lam_max=1.2), "lam_min <= lam_max"),
    (dict(lam_min=-0.1), "lam_min"),
    (dict(K=-1), "--K"),
    (dict(max_new_tokens=-1), "--max_new_tokens"),
    (dict(dataset="org/rows"), "set --max_new_tokens"),  # a hub id: a missing local file is said first
    (dict(max_prompt_length=-1), "--max_prompt_length"),
    (dict(overlong_buffer=64), "--overlong_buffer"),
    (dict(dataset="/no/such/file.jsonl", max_new_tokens=64), "no such file"),
    (dict(resume=True), "--resume"),
])
def test_invalid_arguments_fail_with_their_message(change, message):
    with pytest.raises(ValueError, match=message.replace("-", r"\-").replace("<", "<")):
        delta.validate_args(Args(**change))


def test_divisibility_by_world_size_is_checked():
    with pytest.raises(ValueError, match="divisible by the 3 processes"):
        delta.validate_args(Args(), world_size=3)


def test_config_file_and_command_line_parse_to_the_same_args(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("algo: dapo\nK: 2\nlr: 0.001\n")
    assert delta.parse_args([str(cfg)]) == delta.parse_args(["--algo", "dapo", "--K", "2", "--lr", "0.001"])


# ------------------------------------------------------------------------------------- end to end
def delta_py_alone(tmp_path):
    """A folder holding delta.py and the companions a run imports (rewards.py, tasks.py, sampling.py, engines.py,
    checkpoints.py, console.py), and nothing else (no sandbox/, eval.py or tools), as users copy them."""
    folder = tmp_path / "alone"
    folder.mkdir()
    for name in ("delta.py", "rewards.py", "checkpoints.py", "tasks.py", "sampling.py", "engines.py", "console.py"):
        shutil.copy(os.path.join(ROOT, name), folder)
    return str(folder)


def test_delta_py_alone_imports_and_runs_the_copyable_api(tmp_path):
    """The copy path: delta.py alone in an empty folder (torch and transformers installed, no rewards.py beside it)
    imports in a fresh interpreter and runs the four functions of the paper; rewards.py is loaded only where a reward
    is computed or a dataset read."""
    (tmp_path / "alone").mkdir()
    shutil.copy(os.path.join(ROOT, "delta.py"), tmp_path / "alone")
    code = ("import sys, torch; sys.path = [p for p in sys.path if p not in ('', %r)]\n"
            "from delta import group_advantages, token_features, delta_coefficients, policy_loss\n"
            "torch.manual_seed(0); adv = group_advantages(torch.tensor([1., 0., 0., 1.]), 2)\n"
            "mask = torch.ones(4, 3, dtype=torch.bool); logp = torch.rand(4, 3).log()\n"
            "v = token_features(torch.randn(4, 3, 5), logp)\n"
            "lam = delta_coefficients(v, adv, mask)\n"
            "loss, _ = policy_loss(logp, logp, adv, mask, lam)\n"
            "print(round(float(lam.mean()), 6), 'rewards' in sys.modules)\n") % ROOT
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path / "alone", capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(tmp_path / "alone")), timeout=300)
    assert p.returncode == 0 and p.stdout.split() == ["1.0", "False"], p.stderr[-2000:]


def source_of(module):
    """A module's source: its file, or a package's files one after the other (sandbox/)."""
    folder = os.path.join(ROOT, module)
    paths = [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".py")] if os.path.isdir(
        folder) else [folder + ".py"]
    return "\n".join(open(p).read() for p in paths)


def test_the_companions_import_nothing_of_delta_py():
    """No import cycle: delta.py imports its companions where it first needs them, and none imports delta.py."""
    import ast

    for name in ("checkpoints", "engines", "rewards", "tasks", "sandbox"):
        tree = ast.parse(source_of(name))
        imported = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                     and node.module}
        assert "delta" not in imported, name


def test_the_modules_import_in_one_direction():
    """The layout's layers: `import delta` loads no companion (the copyable functions need delta.py alone); each
    companion imports only those below it (tasks -> rewards, sampling -> engines), never delta.py, and no module's
    imports, at its top or inside a function, form a cycle."""
    import ast
    mine = ("delta", "sampling", "engines", "checkpoints", "tasks", "rewards", "sandbox", "console", "eval")
    code = "import sys, delta; print(sorted(m for m in %r if m in sys.modules))" % (mine,)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.split() == ["['delta']"], p.stdout + p.stderr[-2000:]
    edges = {}
    for m in mine:
        tree = ast.parse(source_of(m))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        edges[m] = sorted(names & set(mine) - {m})
    assert edges["tasks"] == ["rewards", "sampling"] and edges["sampling"] == ["engines"], edges
    assert edges["rewards"] == edges["engines"] == edges["checkpoints"] == edges["console"] == [], edges
    assert all("delta" not in edges[m] for m in mine if m != "eval"), edges  # only eval.py, the trainer's user

    def cycle(m, path):
        return m in path or any(cycle(n, path + (m,)) for n in edges[m])
    assert not any(cycle(m, ()) for m in mine), edges
    broken = "import delta; delta.validate_args(delta.Args())"  # the control: the offline default imports tasks.py
    p = subprocess.run([sys.executable, "-c", "import sys; sys.modules['tasks'] = None; " + broken], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode != 0 and "tasks" in p.stderr


def test_end_to_end_runs_changes_weights_and_resumes_exactly(tmp_path):
    from safetensors.torch import load_file

    a = str(tmp_path / "a")
    p = run_delta("--output_dir", a, "--max_steps", "4", "--save_every", "2", "--eval_every", "2", *FAST,
                  cwd=delta_py_alone(tmp_path))  # delta.py copied alone runs
    assert p.returncode == 0, p.stderr[-3000:]
    rows = read_metrics(a)
    steps = [r for r in rows if "reward/mean" in r]
    assert [r["step"] for r in steps] == [1, 2, 3, 4]
    for key in ("reward/mean", "reward/acc", "response/length", "response/truncated", "groups/zero_std",
                "delta/lam_mean", "delta/lam_std", "delta/lam_min", "delta/lam_max", "delta/gamma_pos",
                "delta/gamma_neg", "delta/disc_acc", "loss/policy", "loss/clipfrac", "loss/approx_kl",
                "grad_norm", "entropy/trained", "rows/scored", "rows/trained", "time/generate", "time/score",
                "time/train"):
        assert all(key in r for r in steps), key
    assert any("eval/accuracy" in r for r in rows if r["step"] == 0) and "eval/accuracy" in steps[-1]
    init = load_file(os.path.join(a, "tiny-init", "model.safetensors"))
    final = load_file(os.path.join(a, "final", "model.safetensors"))
    assert any(not torch.equal(init[k], final[k]) for k in init)
    assert sorted(os.listdir(a)) == ["args.json", "checkpoint-2", "checkpoint-4", "final", "held_out.jsonl",
                                     "metrics.jsonl", "tiny-init"]
    held_out = [json.loads(line) for line in open(os.path.join(a, "held_out.jsonl"))]
    assert len(held_out) == 16 and set(held_out[0]) == {"question", "answer", "reward", "answer_format", "instruction"}
    for folder in ("final", "checkpoint-4"):  # the prompt settings travel with every model folder
        assert json.load(open(os.path.join(a, folder, checkpoints.PROMPT_FILE)))["instruction"] == ""

    # resume from step 2 in a copy: steps 3 and 4 must be identical to the uninterrupted run
    b = str(tmp_path / "b")
    os.makedirs(b)
    shutil.copytree(os.path.join(a, "checkpoint-2"), os.path.join(b, "checkpoint-2"))
    with open(os.path.join(b, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)  # includes rows past the checkpoint: dropped on resume
    p = run_delta("--output_dir", b, "--resume", "--max_steps", "4", "--save_every", "2", "--eval_every", "2", *FAST)
    assert p.returncode == 0, p.stderr[-3000:]
    resumed = read_metrics(b)
    strip = lambda r: {k: x for k, x in r.items() if not k.startswith(("time/", "speed/"))}
    assert [strip(r) for r in resumed] == [strip(r) for r in rows]
    final_b = load_file(os.path.join(b, "final", "model.safetensors"))
    assert all(torch.equal(final[k], final_b[k]) for k in final)


def test_resume_with_other_arguments_is_refused_before_work(tmp_path):
    out = str(tmp_path / "r")
    p = run_delta("--output_dir", out, "--max_steps", "1", "--eval_every", "0", "--save_every", "1", *FAST)
    assert p.returncode == 0, p.stderr[-3000:]
    before = open(os.path.join(out, "metrics.jsonl")).read()
    bad = run_delta("--output_dir", out, "--resume", "--max_steps", "2", "--eval_every", "0", *FAST, "--seed", "1",
                    "--group_size", "8")
    assert bad.returncode != 0 and "--seed 0 (now 1)" in bad.stderr and "--group_size 4 (now 8)" in bad.stderr
    assert open(os.path.join(out, "metrics.jsonl")).read() == before  # nothing was touched


def test_command_line_rejects_bad_arguments_before_work(tmp_path):
    p = run_delta("--output_dir", str(tmp_path / "x"), "--group_size", "1")
    assert p.returncode != 0 and "--group_size 1" in p.stderr
    assert not os.path.exists(tmp_path / "x")


@pytest.mark.parametrize("engine", [[], ["--fsdp"]], ids=["ddp", "fsdp"])
def test_torchrun_two_processes_end_to_end_and_resume(tmp_path, engine):
    """2 processes (DDP, FSDP2): a run, its exact resume on 2 processes, its sharded checkpoint, resumed on 1."""
    from safetensors.torch import load_file

    out, cwd = str(tmp_path / "ddp"), (ROOT if engine else delta_py_alone(tmp_path))  # DDP: delta.py copied alone
    p = run_delta("--output_dir", out, "--max_steps", "2", "--eval_every", "0", "--save_every", "1", *FAST, *engine,
                  torchrun=True, cwd=cwd)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = read_metrics(out)
    steps = [r for r in rows if "reward/mean" in r]
    assert [r["step"] for r in steps] == [1, 2] and steps[-1]["delta/lam_mean"] == pytest.approx(1.0, abs=1e-5)
    assert os.path.exists(os.path.join(out, "final", "model.safetensors"))
    # resume step 2 from checkpoint-1 with 2 processes: every rank's RNG comes back
    b = str(tmp_path / "b")
    os.makedirs(b)
    shutil.copytree(os.path.join(out, "checkpoint-1"), os.path.join(b, "checkpoint-1"))
    p = run_delta("--output_dir", b, "--resume", "--max_steps", "2", "--eval_every", "0", "--save_every", "1", *FAST,
                  *engine, torchrun=True)
    assert p.returncode == 0, p.stderr[-3000:]
    strip = lambda r: {k: x for k, x in r.items() if not k.startswith(("time/", "speed/"))}
    assert strip([r for r in read_metrics(b) if r["step"] == 2][0]) == strip(steps[-1])
    final, final_b = (load_file(os.path.join(d, "final", "model.safetensors")) for d in (out, b))
    assert all(torch.equal(final[k], final_b[k]) for k in final)
    # sharded: each rank wrote its own tensors (torch.distributed.checkpoint), none gathered the whole state
    ckpt = os.path.join(out, "checkpoint-1")
    files = os.listdir(os.path.join(ckpt, checkpoints.STATE))
    assert {f.split("_")[2] for f in files if f.endswith(".distcp")} == {"0", "1"}
    assert not any(f.endswith((".safetensors", "optimizer.pt")) for f in os.listdir(ckpt))
    # another process count: one process loads every weight and AdamW state the two wrote, and continues
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    dcp_to_torch_save(os.path.join(ckpt, checkpoints.STATE), str(tmp_path / "whole.pt"))
    whole = torch.load(str(tmp_path / "whole.pt"), weights_only=False)
    run = make_run(ckpt, **{k: v for k, v in json.load(open(os.path.join(out, "args.json"))).items()
                            if k in ("lr", "weight_decay")})
    checkpoints.load_state(ckpt, run.model, run.optimizer)
    assert all(torch.equal(x, whole["model"][k]) for k, x in run.model.state_dict().items() if k in whole["model"])
    optim = run.sharding.optim_state(run.model, run.optimizer)["state"]
    assert optim.keys() == whole["optimizer"]["state"].keys() and all(
        torch.equal(s[k], whole["optimizer"]["state"][name][k]) for name, s in optim.items() for k in s)
    c = str(tmp_path / "c")
    os.makedirs(c)
    shutil.copytree(ckpt, os.path.join(c, "checkpoint-1"))
    p = run_delta("--output_dir", c, "--resume", "--max_steps", "2", "--eval_every", "0", "--save_every", "1", *FAST)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "written by 2 processes, resumed on 1" in p.stderr and [r["step"] for r in read_metrics(c)][-1] == 2


def _meta_start_worker(rank, world, tmp, sources, engine):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous-{engine}", rank=rank, world_size=world)
    reads, read = [], transformers.AutoModelForCausalLM.from_pretrained
    transformers.AutoModelForCausalLM.from_pretrained = lambda source, **k: reads.append(source) or read(source, **k)
    try:
        out = {}
        for name, source in sources.items():
            model, tok = checkpoints.load_model(source, torch.device("cpu"), meta=True)
            assert all(p.is_meta for p in model.parameters()) and not any(b.is_meta for b in model.buffers())
            run = delta.make_run(Args(fsdp=engine == "fsdp"), model, tok, source, rank, world)
            out[name] = dict(state=run.sharding.model_state(run.train_model), tied=(
                model.get_output_embeddings().weight is model.get_input_embeddings().weight),
                buffers={k: b.clone() for k, b in model.named_buffers()})
            del run, model
        torch.save(dict(out, reads=reads), f"{tmp}/meta-{engine}-{rank}.pt")
        gc.collect()  # (as _dist_worker)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("engine", ["ddp", "fsdp"])
def test_several_processes_read_the_weights_once(tiny, tmp_path, engine):
    """On several processes every rank builds the model on the meta device and rank 0 alone reads the weights,
    broadcast into each rank's tensors after sharding (a node holds one copy, not one a rank; tools/memory.py's
    host rows): the same weights, buffers (rotary frequencies, in no file) and tied embeddings as from_pretrained."""
    tied = str(tmp_path / "tied")
    tasks.build_tiny(tied, seed=1, tie_word_embeddings=True)
    sources = {"untied": tiny, "tied": tied}
    mp.spawn(_meta_start_worker, args=(2, str(tmp_path), sources, engine), nprocs=2, join=True)
    got = [torch.load(f"{tmp_path}/meta-{engine}-{r}.pt", weights_only=False) for r in (0, 1)]
    assert got[0]["reads"] == [tiny, tied] and got[1]["reads"] == []  # rank 1 reads no weight
    for name, source in sources.items():
        model, _ = checkpoints.load_model(source, torch.device("cpu"))
        ref = model.state_dict()
        for g in got:
            assert g[name]["tied"] == (name == "tied") and set(g[name]["buffers"]) == set(dict(model.named_buffers()))
            assert all(torch.equal(b, dict(model.named_buffers())[k]) for k, b in g[name]["buffers"].items())
        state = got[0][name]["state"]  # the full weights, gathered on rank 0
        assert set(state) <= set(ref) and all(torch.equal(x, ref[k]) for k, x in state.items())


def free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def two_nodes(*argv):
    """delta.py on two torchrun "nodes" of one process each, rendezvous on localhost (static)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
                               "--node_rank", str(r), "--master_addr", "127.0.0.1", "--master_port", str(port),
                               "delta.py", *argv], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for r in (0, 1)]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs[0][-3000:] + errs[1][-3000:]


@pytest.mark.slow
def test_two_nodes_equal_one_node_of_two_processes(tmp_path):
    """--nnodes 2 (one process a node) runs what --nproc_per_node 2 runs: metrics, weights, checkpoints, and
    a resume on two nodes from the one-node run's checkpoint."""
    from safetensors.torch import load_file

    one, two, back = (str(tmp_path / d) for d in ("one", "two", "back"))
    common = ("--max_steps", "2", "--eval_every", "0", "--save_every", "1", *FAST)
    p = run_delta("--output_dir", one, *common, torchrun=True)
    assert p.returncode == 0, p.stderr[-3000:]
    two_nodes("--output_dir", two, *common)
    strip = lambda rows: [{k: x for k, x in r.items() if not k.startswith(("time/", "speed/"))} for r in rows]
    assert strip(read_metrics(two)) == strip(read_metrics(one))
    weights = lambda d: load_file(os.path.join(d, "final", "model.safetensors"))
    assert all(torch.equal(weights(one)[k], x) for k, x in weights(two).items())
    os.makedirs(back)
    shutil.copytree(os.path.join(one, "checkpoint-1"), os.path.join(back, "checkpoint-1"))
    two_nodes("--output_dir", back, "--resume", *common)
    assert strip(read_metrics(back))[-1] == strip(read_metrics(one))[-1]
    assert all(torch.equal(weights(one)[k], x) for k, x in weights(back).items())


def test_sampled_evaluation_draws_apart_from_training_and_warm_starts_are_shared(tmp_path):
    """--eval_samples adds the accuracy of samples at the temperature without changing the run's trajectory;
    --warm_start_only writes the warmed-up model, which --model then starts from."""
    a, b, warm, c = (str(tmp_path / d) for d in ("a", "b", "warm", "c"))
    common = ("--max_steps", "2", "--eval_every", "1", "--save_every", "0", *FAST)
    assert run_delta("--output_dir", a, *common).returncode == 0
    assert run_delta("--output_dir", b, *common, "--eval_samples", "2").returncode == 0
    ra, rb = read_metrics(a), read_metrics(b)
    assert all("eval/sampled_accuracy" in r for r in rb if "eval/accuracy" in r)
    drop = lambda r: {k: x for k, x in r.items() if not k.startswith(("time/", "speed/", "eval/sampled"))}
    assert [drop(r) for r in ra] == [drop(r) for r in rb]
    p = run_delta("--output_dir", warm, "--warm_start_only", *FAST)
    assert p.returncode == 0, p.stderr[-3000:]
    assert os.path.exists(os.path.join(warm, "final", "model.safetensors")) and not checkpoints.found(warm)
    assert [r["step"] for r in read_metrics(warm)] == [0]  # the warm start's row only
    p = run_delta("--output_dir", c, "--model", os.path.join(warm, "final"), "--task", "addition", *common)
    assert p.returncode == 0, p.stderr[-3000:]
    assert read_metrics(c)[0]["eval/accuracy"] == ra[1]["eval/accuracy"]  # step 0: the same warm-started model


def test_ctrl_c_saves_a_checkpoint_and_resume_continues(tmp_path):
    import signal
    import time

    out = str(tmp_path / "int")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, "delta.py", "--output_dir", out, "--max_steps", "200", "--eval_every", "0",
                             "--save_every", "0", *FAST], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    metrics = os.path.join(out, "metrics.jsonl")
    deadline = time.time() + 300
    while time.time() < deadline and not (os.path.exists(metrics) and '"reward/mean"' in open(metrics).read()):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGINT, err[-3000:]  # 130: what schedulers read as stopped by a signal
    assert "interrupted: checkpoint at step" in err
    ckpts = checkpoints.found(out)
    assert len(ckpts) == 1 and not os.path.exists(os.path.join(out, "final"))
    step = int(ckpts[0].rsplit("-", 1)[1])
    assert 1 <= step < 200
    p = run_delta("--output_dir", out, "--resume", "--max_steps", str(step + 1), "--eval_every", "0", *FAST)
    assert p.returncode == 0, p.stderr[-3000:]
    assert [r["step"] for r in read_metrics(out) if "reward/mean" in r] == list(range(1, step + 2))


def test_local_dataset_and_model_path_like_a_user(tiny, tmp_path):
    """--model PATH and --dataset FILE.jsonl take the same path as a hub model and dataset."""
    data = tmp_path / "train.jsonl"
    with open(data, "w") as f:
        for r in tasks.addition_task(0, 0)[0][:40]:
            f.write(json.dumps({"problem": r["question"], "gold": int(r["answer"])}) + "\n")
    out = str(tmp_path / "user")
    p = run_delta("--model", tiny, "--dataset", str(data), "--prompt_key", "problem", "--answer_key", "gold",
                  "--eval_size", "8", "--max_steps", "1", "--output_dir", out, "--max_prompt_length", "128",
                  *FAST[:8], "--max_new_tokens", "48", "--progress", "false")
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.load(open(os.path.join(out, "args.json")))["instruction"] == rewards.ANSWER_FORMATS["boxed"]
    first = tasks.addition_task(0, 0)[0][8]  # the first training row (8 held out): printed as the model sees it
    said = p.stderr[p.stderr.index("the first prompt as the model sees it:"):]
    assert first["question"] in said and f"its gold answer: {int(first['answer'])!r}" in said
    assert [r["step"] for r in read_metrics(out) if "reward/mean" in r] == [1]
    bad = run_delta("--model", tiny, "--dataset", str(data), "--prompt_key", "question", "--output_dir", out + "2",
                    "--max_new_tokens", "48")
    assert bad.returncode != 0 and "no field 'question'" in bad.stderr
    assert "it has ['gold', 'problem']" in bad.stderr and bad.stderr.count("'problem'") == 1  # listed once
    again = run_delta("--model", tiny, "--dataset", str(data), "--prompt_key", "problem", "--answer_key", "gold",
                      "--output_dir", out, "--max_new_tokens", "48", "--eval_size", "8")  # would overwrite: refused
    assert again.returncode != 0 and "pass --resume" in again.stderr
    assert [r["step"] for r in read_metrics(out) if "reward/mean" in r] == [1]


def test_plain_template_without_chat_template(tiny):
    _, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    tok.chat_template = None
    boxed = rewards.ANSWER_FORMATS["boxed"]
    assert delta.prompt_text(tok, "1+1=?", boxed) == "Question: 1+1=?\n" + boxed + "\nAnswer: "
    assert delta.prompt_text(tok, "1+1=?") == "Question: 1+1=?\nAnswer: "


# ------------------------------------------------------------------------------------- a first real run
def _rows(path, rows):
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return str(path)


def test_a_dataset_without_solutions_needs_a_model_and_is_refused_before_work(tmp_path):
    """The README's `python delta.py --dataset rows.jsonl`: the tiny default warm-starts on worked solutions; rows
    without them are refused at once, naming --model, before anything is built or written."""
    data = _rows(tmp_path / "rows.jsonl", [{"question": f"{a}+{a}=?", "final_answer": str(2 * a)} for a in range(40)])
    out = str(tmp_path / "run")
    p = run_delta("--dataset", data, "--eval_size", "8", "--max_new_tokens", "32", "--output_dir", out)
    assert p.returncode != 0 and "pass --model" in p.stderr and "'solution'" in p.stderr, p.stderr[-2000:]
    assert not os.path.exists(out)
    p = run_delta("--dataset", data, "--output_dir", out)  # and a dataset's response limit is the user's to give
    assert p.returncode != 0 and "set --max_new_tokens" in p.stderr and not os.path.exists(out)


GSM8K_SOLUTION = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
                  "altogether in April and May.\n#### 72")
NATALIA = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many?"
BOXED_ASK = "Please reason step by step, and put your final answer within \\boxed{}."
VERL_GSM8K_ASK = 'Let\'s think step by step and output the final answer after "####".'
DAPO_ASK = ("Solve the following math problem step by step. The last line of your response should be of the form "
            "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n{}\n\nRemember to put "
            "your answer on its own line after \"Answer:\"")
# Public layouts, one row each, written from the datasets' cards: (name, row, --prompt_key, --answer_key, the gold as
# stored, the answer format resolved, whether the instruction is added, a right response, a wrong response).
LAYOUTS = [
    ("gsm8k", {"question": NATALIA, "answer": GSM8K_SOLUTION}, "question", "answer", "72", "boxed", True,
     "48 + 24 = 72. \\boxed{72}", "\\boxed{80}"),
    ("gsm8k, thousands", {"question": "How many?", "answer": "10 * 108 = <<10*108=1080>>1080\n#### 1,080"},
     "question", "answer", "1080", "boxed", True, "\\boxed{1080}", "\\boxed{108}"),
    ("competition_math", {"problem": "Compute $1/2 \\cdot 1$.", "level": "Level 1", "type": "Algebra",
                          "solution": "We have $1/2 \\cdot 1 = \\boxed{\\frac{1}{2}}$."},
     "problem", "solution", "\\frac{1}{2}", "boxed", True, "so \\boxed{0.5}", "\\boxed{2}"),
    ("math-500", {"problem": "Compute $2+3$.", "solution": "$2+3=\\boxed{5}$", "answer": "5", "subject": "Algebra",
                  "level": 1, "unique_id": "test/algebra/1.json"}, "problem", "answer", "5", "boxed", True,
     "\\boxed{5}", "\\boxed{6}"),
    ("deepmath-103k", {"question": "Evaluate $\\lim_{x\\to 0} \\sin x / x$.", "final_answer": "1",
                       "difficulty": 4.0, "topic": "Calculus", "r1_solution_1": "... \\boxed{1}"},
     "question", "final_answer", "1", "boxed", True, "\\boxed{1}", "\\boxed{0}"),
    ("dapo-math-17k", {"data_source": "math_dapo", "prompt": [{"content": DAPO_ASK.format("What is 33 + 1?"),
                                                                "role": "user"}], "ability": "MATH",
                       "reward_model": {"ground_truth": "34", "style": "rule-lighteval/MATH_v2"},
                       "extra_info": {"index": "9a9b6eb4"}},
     "prompt", "reward_model.ground_truth", "34", "answer_line", False, "33 + 1 = 34\nAnswer: 34", "Answer: 35"),
    ("numinamath-cot", {"source": "olympiads", "problem": "Find x if x + 1 = 3.", "solution": "x = \\boxed{2}",
                        "messages": [{"content": "Find x if x + 1 = 3.", "role": "user"},
                                     {"content": "Subtract 1: x = \\boxed{2}", "role": "assistant"}]},
     "messages", "solution", "2", "boxed", True, "\\boxed{2}", "\\boxed{3}"),
    ("openr1-math-220k", {"problem": "Find y if 2y = 8.", "solution": "y = 4", "answer": "4",
                          "problem_type": "Algebra", "question_type": "math-word-problem", "source": "olympiads",
                          "uuid": "0a1b", "is_reasoning_complete": [True], "generations": ["... \\boxed{4}"],
                          "correctness_math_verify": [True], "finish_reasons": None, "correctness_count": 1,
                          "messages": [{"content": "Find y if 2y = 8.", "role": "user"},
                                       {"content": "<think>y = 4</think> \\boxed{4}", "role": "assistant"}]},
     "messages", "answer", "4", "boxed", True, "\\boxed{4}", "\\boxed{2}"),
    ("big-math-rl", {"problem": "What is 7 * 6?", "answer": "42", "source": "orca_math", "domain": ["Arithmetic"],
                     "llama8b_solve_rate": 0.9}, "problem", "answer", "42", "boxed", True, "\\boxed{42}",
     "\\boxed{48}"),
    ("skywork-or1", {"data_source": "train-math-deepscaler", "prompt": [{"content": "Solve x^2 = 4. " + BOXED_ASK,
                                                                          "role": "user"}], "ability": "math",
                     "reward_model": {"ground_truth": '["2", "-2"]', "style": "rule"},
                     "extra_info": {"index": 0, "model_difficulty": {"DeepSeek-R1-Distill-Qwen-7B": 3}}},
     "prompt", "reward_model.ground_truth", ["2", "-2"], "boxed", False, "x = \\boxed{-2}", "\\boxed{4}"),
    ("verl gsm8k parquet", {"data_source": "openai/gsm8k", "prompt": [{"role": "user",
                                                                      "content": NATALIA + " " + VERL_GSM8K_ASK}],
                            "ability": "math", "reward_model": {"style": "rule", "ground_truth": "72"},
                            "extra_info": {"split": "train", "index": 0, "answer": GSM8K_SOLUTION,
                                           "question": NATALIA}},
     "prompt", "reward_model.ground_truth", "72", "hashes", False, "48 + 24 = 72\n#### 72", "\\boxed{72}"),
]


def write_rows(path, rows):
    """rows as the dataset's own file: jsonl, or parquet (nested columns as structs and lists) through datasets."""
    if str(path).endswith(".parquet"):
        import datasets
        datasets.Dataset.from_list(rows).to_parquet(str(path))
        return str(path)
    return _rows(path, rows)


@pytest.mark.parametrize("ext", ["jsonl", "parquet"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=[x[0] for x in LAYOUTS])
def test_each_public_math_layout_is_read_right(tiny, tmp_path, capsys, layout, ext):
    """Ten public layouts, as jsonl and as parquet: the prompt as rendered for the model (the dataset's own request
    for a format kept, or the instruction added; never the assistant's solution), the gold as stored (GSM8K's
    `####` line, MATH's final box, Skywork-OR1's JSON list of acceptable answers), and a right and a wrong
    response's reward under the format resolved."""
    name, row, prompt_key, answer_key, gold, fmt, instructed, right, wrong = layout
    data = write_rows(tmp_path / f"rows.{ext}", [row] * 12)
    args = Args(dataset=data, model=tiny, prompt_key=prompt_key, answer_key=answer_key, eval_size=2,
                max_new_tokens=32)
    kind, train_rows, _ = tasks.load_task(args)
    delta.resolve_defaults(args, kind, train_rows)
    first = train_rows[0]
    assert kind == "math" and first["answer"] == gold, name
    assert args.answer_format == fmt and bool(args.instruction) == instructed, name
    prompt = delta.prompt_text(checkpoints.load_tokenizer(tiny), first["question"], args.instruction)
    question = row.get(prompt_key) if isinstance(row.get(prompt_key), str) else row[prompt_key][0]["content"]
    assert question in prompt and prompt.count(question) == 1, name
    assert "assistant" not in str(first["question"]) and "Subtract 1" not in prompt and "</think>" not in prompt
    assert (rewards.ANSWER_FORMATS[fmt] in prompt) == instructed, name
    assert rewards.score_batch([right, wrong], [gold, gold], answer_format=fmt) == [1.0, 0.0], name
    if name.startswith(("numinamath", "openr1")):  # said, once, when the chat prompts are cut
        assert "cut before them" in capsys.readouterr().err


def test_public_layouts_misnamed_are_refused_naming_the_flag(tiny, tmp_path):
    """A struct, a list of non-answers or an empty gold as the answer column, a struct as the prompt column, chat
    messages without a user turn, and prompts that ask for a format no rule grades (`<answer>` tags): each refused
    before any work, naming the flag to set (the struct's dotted field among them)."""
    dapo = LAYOUTS[5][1]
    cases = [
        (dapo, dict(prompt_key="prompt", answer_key="reward_model"), "--answer_key reward_model.ground_truth"),
        (dapo, dict(prompt_key="reward_model", answer_key="reward_model.ground_truth"),
         "--prompt_key reward_model holds dict"),
        (LAYOUTS[7][1], dict(prompt_key="problem", answer_key="is_reasoning_complete"),
         "--answer_key is_reasoning_complete holds a list"),
        (LAYOUTS[7][1], dict(prompt_key="problem", answer_key="messages"), "--answer_key messages holds a list"),
        (dict(LAYOUTS[3][1], answer=""), dict(prompt_key="problem", answer_key="answer"),
         "--answer_key answer is empty"),
        ({"prompt": [{"role": "system", "content": "Be brief."}], "answer": "1"}, dict(prompt_key="prompt",
                                                                                         answer_key="answer"),
         "--prompt_key prompt holds chat messages without a user turn"),
    ]
    for row, keys, message in cases:
        with pytest.raises(rewards.DataError, match=re.escape(message)):
            tasks.load_task(Args(dataset=write_rows(tmp_path / "rows.jsonl", [row] * 12), model=tiny, eval_size=2,
                                 max_new_tokens=32, **keys))
    tags = write_rows(tmp_path / "tags.jsonl", [{"question": "What is 2+2? Put the answer in <answer></answer>.",
                                                 "final_answer": "4"}] * 12)
    args = Args(dataset=tags, model=tiny, eval_size=2, max_new_tokens=32)
    kind, rows, _ = tasks.load_task(args)
    with pytest.raises(delta.ArgumentError, match="<answer></answer> tags.*--answer_format.*--instruction"):
        delta.resolve_defaults(args, kind, rows)
    args = Args(dataset=tags, model=tiny, eval_size=2, max_new_tokens=32, answer_format="last_number", instruction="")
    delta.resolve_defaults(args, kind, rows)  # both given: the user's choice
    assert args.answer_format == "last_number" and args.instruction == ""


def test_chat_message_prompts_and_their_own_answer_format(tiny, tmp_path):
    """DAPO-Math-17k's layout: the prompt column is a list of chat messages, read as messages (never their Python
    text), and its own text asks for an `Answer:` line: the answer format becomes answer_line, no instruction is
    added that contradicts it, and `Answer: 34` scores 1."""
    ask = ("Solve the following math problem step by step. The last line of your response should be of the form "
           "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n{}\n\nRemember to put "
           "your answer on its own line after \"Answer:\"")
    rows = [{"data_source": "math_dapo", "prompt": [{"content": ask.format(f"What is {a} + 1?"), "role": "user"}],
             "ability": "MATH", "reward_model": {"ground_truth": str(a + 1), "style": "rule-lighteval/MATH_v2"},
             "extra_info": {"index": str(a)}} for a in range(40)]
    data = _rows(tmp_path / "dapo.jsonl", rows)
    args = Args(dataset=data, model=tiny, prompt_key="prompt", answer_key="reward_model.ground_truth",
                max_new_tokens=16, eval_size=8)
    kind, train_rows, eval_rows = tasks.load_task(args)
    assert kind == "math" and train_rows[0]["question"] == [{"role": "user",
                                                             "content": rows[8]["prompt"][0]["content"]}]
    delta.resolve_defaults(args, kind, train_rows)
    assert (args.answer_format, args.instruction, args.reward) == ("answer_line", "", "math")
    _, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    text = delta.prompt_text(tok, train_rows[0]["question"], args.instruction)
    assert text == tok.apply_chat_template(rows[8]["prompt"], tokenize=False, add_generation_prompt=True)
    assert "{'content'" not in text and "[{" not in text
    assert rewards.score_batch(["Step 1: ...\nAnswer: 9", "Answer: 8", "\\boxed{9}"], ["9"] * 3,
                               answer_format=args.answer_format) == [1.0, 0.0, 0.0]
    out = str(tmp_path / "run")  # end to end: the run records the format, eval.py will grade as trained
    p = run_delta("--model", tiny, "--dataset", data, "--prompt_key", "prompt", "--answer_key",
                  "reward_model.ground_truth", "--max_new_tokens", "16", "--overlong_buffer", "4", "--eval_size", "8",
                  "--max_steps", "1", "--output_dir", out, *FAST[:8], "--progress", "false")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "answers: answer_line" in p.stderr
    held = [json.loads(line) for line in open(os.path.join(out, "held_out.jsonl"))]
    assert held[0]["question"] == rows[0]["prompt"] and held[0]["answer_format"] == "answer_line"


def test_a_code_datasets_prompt_limit_is_derived_from_its_prompts(tiny, tmp_path):
    """Code prompts in LiveCodeBench's convention run to hundreds of tokens: --max_prompt_length 0 (the default)
    becomes the longest prompt, so none is dropped; a limit given that leaves too few is refused naming the flag."""
    from conftest import lcb_row_1873a
    data = _rows(tmp_path / "lcb.jsonl", [dict(lcb_row_1873a(), question_id=f"q{i}") for i in range(12)])
    common = ["--model", tiny, "--dataset", data, "--eval_size", "4", "--prompts_per_step", "4", "--group_size", "2",
              "--mini_batch_prompts", "4", "--max_new_tokens", "8", "--overlong_buffer", "2", "--max_steps", "1",
              "--eval_every", "0", "--progress", "false"]
    p = run_delta(*common, "--output_dir", str(tmp_path / "run"))
    assert p.returncode == 0, p.stderr[-3000:]
    saved = json.load(open(tmp_path / "run" / "args.json"))
    _, tok = checkpoints.load_model(tiny, torch.device("cpu"))
    longest = len(sampling.encode_prompt(tok, delta.prompt_text(tok, tasks.load_rows(data, "train", Args())[1][0][
        "question"])))
    assert saved["max_prompt_length"] == longest > 64 and saved["reward"] == "code"
    p = run_delta(*common, "--output_dir", str(tmp_path / "short"), "--max_prompt_length", "64")
    assert p.returncode != 0 and "raise --max_prompt_length" in p.stderr and f"{longest} tokens" in p.stderr


def _bos_tokenizer(chat_template=None):
    """A character tokenizer with a BOS that its post-processor adds (as Llama's and Gemma's do)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    vocab = {t: i for i, t in enumerate(["<|endoftext|>", "<unk>", "<s>", *tasks.TINY_CHARS])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 2)])
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="<|endoftext|>",
                                  pad_token="<|endoftext|>", unk_token="<unk>", padding_side="left")
    tok.chat_template = chat_template
    return tok, 2


def test_bos_is_added_where_the_tokenizer_or_its_template_asks(tiny):
    """A base model without a chat template is prompted with the BOS its tokenizer adds; a template that writes its
    own BOS gets it once; a tokenizer without BOS (Qwen, the tiny default) gets none. The warm start's packed
    prompts and the sampler's use the same rule (sampling.encode_prompt)."""
    tok, bos = _bos_tokenizer()
    plain = delta.prompt_text(tok, "1+1=?")
    assert tok(plain).input_ids[0] == bos  # the tokenizer's own rule
    ids = pack(tok, [plain], ["2"], "cpu")["input_ids"][0].tolist()
    assert ids[0] == bos and ids[1:len(plain) + 1] == tok(plain, add_special_tokens=False).input_ids
    templ, bos = _bos_tokenizer("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}")
    ids = pack(templ, [delta.prompt_text(templ, "1+1=?")], ["2"], "cpu")["input_ids"][0].tolist()
    assert ids.count(bos) == 1 and ids[0] == bos
    _, qwen_like = checkpoints.load_model(tiny, torch.device("cpu"))  # no BOS token at all
    text = delta.prompt_text(qwen_like, "1+1=?")
    assert sampling.encode_prompt(qwen_like, text) == qwen_like(text, add_special_tokens=False).input_ids
    assert sampling.encode_prompt(tok, plain)[0] == bos


def test_a_model_that_never_states_an_answer_is_told_so(tiny, capsys):
    """A real instruct model asked for \\boxed{} that never boxes gets 0 reward everywhere: the step-0 evaluation
    says so, naming the flags, and logs the share of responses that state an answer (eval/answered)."""
    run = make_run(tiny, eval_size=8)
    run.eval_rows = tasks.addition_task(0, 8)[1]
    out = delta.evaluation(run, 0)  # the untrained tiny model writes no box
    assert out["eval/answered"] == 0.0 and out["eval/accuracy"] == 0.0
    err = capsys.readouterr().err
    assert "states an answer" in err and "--answer_format" in err
    run.answer_format = "last_number"  # whatever it writes, digits are likely somewhere in 64 characters
    assert "eval/answered" in delta.evaluation(run, 1)


def test_core_functions_are_copyable_pure_torch():
    """Pasted alone into a namespace that holds only torch, each core function still runs and agrees."""
    import inspect

    v, adv, mask = random_batch(4)
    logp, old, a2, m2, lam = loss_inputs(4)
    for fn, call in [
        (group_advantages, lambda f: f(torch.tensor([1.0, 0.0, 1.0, 1.0]), 2)),
        (token_features, lambda f: f(v, -torch.rand(6, 7))),
        (delta_coefficients, lambda f: f(v, adv, mask, K=2)),
        (policy_loss, lambda f: f(logp, old, a2, m2, lam)[0]),
        (policy_loss, lambda f: f(logp, old, a2, m2, lam, sapo_tau=(1.0, 1.05))[0]),
        (delta.top_share_mask, lambda f: f(-logp.detach(), m2)),
        (delta.fipo_weights, lambda f: f(logp.detach(), old, a2, m2)[0]),
        (delta_coefficients, lambda f: f(v.reshape(-1, 5), adv[:, None].expand(6, 7).reshape(-1), mask.reshape(-1),
                                         K=2, chunk_tokens=4, margin="own", assign="hard")),
    ]:
        namespace = {"torch": torch}
        exec(inspect.getsource(fn), namespace)
        torch.manual_seed(0)
        mine = call(fn)
        torch.manual_seed(0)
        assert torch.equal(call(namespace[fn.__name__]), mine), fn.__name__


def test_core_signatures_as_documented():
    """The README's API block, read from README.md: every call there names the function's own parameters, in
    order, with the defaults it states; and the full signatures, pinned."""
    import ast
    import inspect

    readme = open(os.path.join(ROOT, "README.md")).read()
    block = readme.split("## 3. Copy the loss", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    funcs = dict(group_advantages=group_advantages, token_features=token_features,
                 delta_coefficients=delta_coefficients, policy_loss=policy_loss)
    calls = [n for n in ast.walk(ast.parse(block)) if isinstance(n, ast.Call) and getattr(n.func, "id", "") in funcs]
    assert sorted(c.func.id for c in calls) == sorted(funcs)  # each documented once
    for call in calls:
        params = list(inspect.signature(funcs[call.func.id]).parameters.values())
        for arg, p in zip(call.args, params, strict=False):  # positionals: the parameters' names, in order
            assert len(call.args) <= len(params) and arg.id.endswith(p.name), (call.func.id, arg.id, p.name)
        for kw in call.keywords:  # keywords: real parameters; a literal shown is the default
            p = inspect.signature(funcs[call.func.id]).parameters[kw.arg]
            if isinstance(kw.value, ast.Constant):
                assert p.default == kw.value.value, (call.func.id, kw.arg, p.default)
    sig = lambda f: [(p.name, p.default) for p in inspect.signature(f).parameters.values()]
    E = inspect.Parameter.empty
    assert sig(group_advantages) == [("rewards", E), ("group_size", E), ("scale", "group"), ("eps", 1e-6)]
    assert sig(token_features) == [("hidden", E), ("logprobs", E)]
    assert sig(delta_coefficients)[:7] == [("v", E), ("adv", E), ("mask", E), ("K", 1), ("lam_min", 0.8),
                                           ("lam_max", 1.2), ("eps", 1e-8)]
    assert sig(policy_loss) == [("logp", E), ("old_logp", E), ("adv", E), ("mask", E), ("lam", None), ("clip_low", 0.2),
                                ("clip_high", 0.28), ("clip_c", 10.0), ("num_tokens", None), ("sapo_tau", None)]


# ------------------------------------------------------------------------------------- RL on code
def test_code_rows_are_graded_by_their_tests_in_the_sandbox(tiny, monkeypatch):
    """--reward auto reads a task whose rows carry test specs as code: each response's fenced program is run on the
    row's tests (call mode: f on the shown points and two unseen ones); the grading's time is time/reward."""
    rows = tasks.code_task(0, 0)[0][:2]
    run = make_run(tiny, prompts_per_step=2, group_size=4, mini_batch_prompts=2)
    run.train_rows, run.reward_stats = rows, dict(timeouts=0, errors=0)
    assert run.reward == "math" and delta.make_run(run.args, run.model, run.tok, tiny, train_rows=rows).reward == "code"
    run.reward = "code"
    a, b = rows[0]["answer"]["outputs"][1] - rows[0]["answer"]["outputs"][0], rows[0]["answer"]["outputs"][0]
    responses = [rows[0]["solution"], f"```\ndef f(x): return {a}*x+{b}\n```",  # the same function, another way
                 f"```\ndef f(x): return x*{a}+{b + 1}\n```", rows[0]["solution"].replace("```", ""),  # wrong; unfenced
                 rows[1]["solution"], "", "```\ndef g(x): return 0\n```", rows[0]["solution"]]
    batch = pack(run.tok, [delta.prompt_text(run.tok, r["question"]) for r in rows for _ in range(4)],
                 responses, "cpu")
    correct, reward = delta.verify(run, batch, rows)
    assert correct.tolist() == [1, 1, 0, 0, 1, 0, 0, 0] and run.reward_seconds > 0


def test_a_batch_of_timeouts_does_not_stall_the_step(tiny):
    """Programs that never return are cut at --reward_timeout each, on the pool's workers at once: the batch takes
    about its share of timeouts and scores 0."""
    rows = tasks.code_task(0, 0)[0][:2]
    run = make_run(tiny, prompts_per_step=2, group_size=4, mini_batch_prompts=2, reward_timeout=1.0)
    run.reward, run.reward_stats = "code", dict(timeouts=0, errors=0)
    batch = pack(run.tok, [delta.prompt_text(run.tok, r["question"]) for r in rows for _ in range(4)],
                 ["```\ndef f(x):\n    while True: pass\n```"] * 8, "cpu")
    rewards.score_batch(["```\ndef f(x): return x\n```"], [rows[0]["answer"]], "code")  # the pool started
    correct, _ = delta.verify(run, batch, rows)
    workers = len(rewards._POOL) or 2
    assert correct.sum() == 0
    assert 1.0 <= run.reward_seconds < 8 / workers * 1.0 * 2 + 5  # each ran to its limit; generous: 2 shared cores


def test_datasets_of_code_and_nested_math_columns_load_as_rows(tmp_path):
    """--dataset with a code layout (LiveCodeBench's, one real row with its encoded private tests) becomes rows of
    the benchmark's prompt and rewards.py's spec, and --reward auto reads them as code; a row whose tests cannot be
    graded is refused naming it, before any work; a math answer in a nested column is read with a dotted key."""
    from conftest import lcb_row_1873a
    code = tmp_path / "lcb.jsonl"
    code.write_text(json.dumps(lcb_row_1873a()) + "\n" + json.dumps(dict(lcb_row_1873a(), question_id="x2")) + "\n")
    kind, rows = tasks.load_rows(str(code), "train", Args())
    args = Args(dataset=str(code), max_new_tokens=64)
    delta.resolve_defaults(args, kind, rows)  # --reward auto, as delta.prepare resolves it
    assert len(rows) == 2 and kind == "code" and args.reward == "code"
    assert rows[0]["answer"]["inputs"] and "Read the inputs from stdin" in rows[0]["question"]
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(lcb_row_1873a()) + "\n" + json.dumps(dict(lcb_row_1873a(), question_id="bad",
                                                                            public_test_cases="[]",
                                                                            private_test_cases="")) + "\n")
    with pytest.raises(rewards.DataError, match=r"row 1 \(bad\)"):
        tasks.load_rows(str(broken), "train", Args())
    p = run_delta("--dataset", str(broken), "--output_dir", str(tmp_path / "run"), "--max_steps", "1",
                  "--max_new_tokens", "32")
    assert p.returncode != 0 and "row 1 (bad)" in p.stderr and not os.path.exists(tmp_path / "run")
    nested = tmp_path / "dapo.jsonl"  # DAPO-Math-17k's and verl's layout
    nested.write_text(json.dumps({"prompt": [{"role": "user", "content": "1+1?"}],
                                  "reward_model": {"ground_truth": "2", "style": "rule"}}) + "\n")
    kind, rows = tasks.load_rows(str(nested), "train", Args(prompt_key="prompt.0.content",
                                                           answer_key="reward_model.ground_truth"))
    assert rows == [{"question": "1+1?", "answer": "2"}] and kind == "math"


@pytest.mark.slow
@pytest.mark.parametrize("engine", [[], ["--fsdp"]], ids=["ddp", "fsdp"])
def test_the_code_task_runs_under_torchrun(tmp_path, engine):
    """--task code on 2 processes, DDP and FSDP2: the sandbox's verdicts in the loop, their time logged."""
    out = str(tmp_path / "code")
    p = run_delta("--task", "code", "--max_steps", "2", "--output_dir", out, *FAST, *engine, torchrun=True)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = [r for r in read_metrics(out) if "reward/acc" in r]
    assert [r["step"] for r in rows] == [1, 2] and all(r["time/reward"] > 0 for r in rows)
    assert "reward: code (inferred" in p.stderr


@pytest.mark.slow
def test_rl_raises_the_held_out_pass_rate_on_the_code_task(tmp_path):
    """`python delta.py --task code`: the warm start, then 60 RL steps with the sandbox in the loop raise the
    greedy pass rate on 256 held-out functions (asserts +4 points; the bar from three seeds' 200-step runs: seed 0,
    the one this runs, gained +5.9 to +6.7 points at steps 25 to 75; seed 1 +7.0 to +11.3; seed 2 +0.4 to +3.9)."""
    out = str(tmp_path / "code")
    p = run_delta("--task", "code", "--prompts_per_step", "16", "--max_steps", "60", "--eval_every", "0",
                  "--output_dir", out, "--progress", "false")
    assert p.returncode == 0, p.stderr[-3000:]
    evals = [r["eval/accuracy"] for r in read_metrics(out) if "eval/accuracy" in r]
    assert evals[-1] - evals[0] >= 0.04, evals


# ------------------------------------------------------------------------------------- other backbones
@pytest.mark.parametrize("family", list(BACKBONES))
def test_each_backbone_gives_the_lm_heads_input_and_a_plain_forwards_logprobs(backbones, family):
    """Through from_pretrained: Eq. D's h is what the family's own LM head receives, old log-probs are those of a
    plain forward at the temperature, in slices of the head or not."""
    model, tok = checkpoints.load_model(backbones[family], torch.device("cpu"))
    batch = pack(tok, [delta.prompt_text(tok, "12+3=?"), delta.prompt_text(tok, "1+2=?")],
                 ["Let us add. \\boxed{15}", "no"], "cpu")
    R, mask, seen = batch["response_mask"].shape[1], batch["response_mask"], []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, i, o: seen.append(i[0]))
    with torch.no_grad():
        position = (batch["attention_mask"].long().cumsum(1) - 1).clamp(min=0)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"].long(),
                       position_ids=position).logits.float()
        hook.remove()
        logp, _, h = delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], R, 0.7, chunk_tokens=5)
    want = torch.log_softmax(logits[:, -R - 1:-1] / 0.7, -1).gather(-1, batch["input_ids"][:, -R:, None])[..., 0]
    assert torch.equal(h[mask], seen[0][:, -R - 1:-1][mask])
    assert torch.allclose(logp[mask], want[mask], atol=1e-5)


def _backbone_worker(rank, world, tmp, paths, engine):
    """One RL step of every backbone on this rank's share, under DDP or FSDP2 (gloo)."""
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=world)
    try:
        for family, path in paths.items():
            run, batch, adv, _, _ = fixed_rollout(path, world=world, fsdp=engine == "fsdp")
            part, part_adv = _rank_share(batch, adv, run.args, rank, world)
            run.rank, run.args.max_tokens_per_micro_batch = rank, 80
            if engine == "fsdp":
                run.train_model.reshard()
            run.optimizer = torch.optim.SGD(run.model.parameters(), lr=0.1, momentum=0.9)
            plans = delta.micro_batches(run, part)
            part["old_logp"], _, packed = delta.score(run, part, part_adv, plans, True)
            lam = lam_of(run, part, part_adv, packed, stats := {})
            out = delta.all_mean(run, delta.update(run, part, part_adv, lam, plans))
            state = run.sharding.model_state(run.train_model)
            if rank == 0:
                torch.save({"model": state, "out": out, "stats": stats}, f"{tmp}/{family}-{engine}.pt")
            del run
        gc.collect()  # (as _dist_worker)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["ddp", "fsdp"])
def test_each_backbone_trains_the_same_on_two_processes_as_on_one(backbones, tmp_path, engine):
    """One RL step (scoring, DelTA's coefficients, an update of several micro-batches) of every family on 2 gloo
    processes under DDP or FSDP2 (decoder layers found from the family's own _no_split_modules) equals one
    process's: coefficients' statistics, loss, gradient norm, parameters."""
    mp.spawn(_backbone_worker, args=(2, str(tmp_path), backbones, engine), nprocs=2, join=True)
    for family, path in backbones.items():
        model, out, stats, _ = one_process_step(path)
        two = torch.load(f"{tmp_path}/{family}-{engine}.pt")
        assert two["stats"] == pytest.approx(stats, rel=1e-5), family
        assert two["out"]["loss/policy"] == pytest.approx(out["loss/policy"], rel=1e-4, abs=1e-7), family
        assert two["out"]["grad_norm"] == pytest.approx(out["grad_norm"], rel=1e-4), family
        for k, x in model.state_dict().items():
            assert torch.allclose(x, two["model"][k], atol=1e-6), (family, k)


@pytest.mark.slow
@pytest.mark.parametrize("family", list(BACKBONES))
def test_each_backbone_runs_delta_py_and_resumes_exactly(backbones, family, tmp_path):
    """`delta.py --model <family>` for 2 steps with a checkpoint at the first, then `--resume` from it: the second
    step's metrics and the final weights are the uninterrupted run's."""
    common = ["--model", backbones[family], "--max_steps", "2", "--eval_every", "0", "--eval_size", "8",
              "--prompts_per_step", "4", "--group_size", "4", "--mini_batch_prompts", "2", "--max_new_tokens", "12",
              "--overlong_buffer", "4", "--progress", "false"]
    whole, cut = str(tmp_path / "whole"), str(tmp_path / "cut")
    assert run_delta(*common, "--output_dir", whole, "--save_every", "0").returncode == 0
    p = run_delta(*common, "--output_dir", cut, "--save_every", "1", "--max_steps", "1")
    assert p.returncode == 0, p.stderr[-2000:]
    assert run_delta(*common, "--output_dir", cut, "--save_every", "1", "--resume").returncode == 0
    strip = lambda rows: [{k: v for k, v in r.items() if not k.startswith(("time/", "speed/"))} for r in rows
                          if r["step"] == 2]
    assert strip(read_metrics(cut)) == strip(read_metrics(whole))
    a = checkpoints.load_model(os.path.join(whole, "final"), torch.device("cpu"))[0].state_dict()
    b = checkpoints.load_model(os.path.join(cut, "final"), torch.device("cpu"))[0].state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("router_logits", [True, False])
def test_an_moes_load_balancing_loss_is_added_when_its_config_asks(tmp_path, router_logits):
    """A Qwen3-MoE config with output_router_logits: the update minimises the policy loss plus the config's
    router_aux_loss_coef times HF's own load-balancing loss (model(...).aux_loss over the micro-batch's tokens); a
    config that does not ask for router logits trains on the policy loss alone. One SGD step against autograd."""
    path = str(tmp_path / "moe")
    tasks.build_tiny(path, model_type="qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                     output_router_logits=router_logits, router_aux_loss_coef=0.5)
    run, batch, adv, packed, plans = fixed_rollout(path, n_prompts=2, max_grad_norm=1e9)
    assert len(plans) == 1 and len(plans[0]) == 1  # one optimizer step of one micro-batch
    lam = lam_of(run, batch, adv, packed)
    planted = torch.where(torch.arange(len(adv)) < 4, 0.0, adv)  # a group of zero spread: scored never, trained
    train_plan, score_plan = delta.forward_plans(run, batch, planted)  # all trained only where the router loss
    trained, scored = ({int(i) for groups in p for rows in groups for i in rows} for p in (train_plan, score_plan))
    assert (trained == set(range(len(adv)))) == router_logits and scored == set(range(4, len(adv)))  # has a gradient
    reference = __import__("copy").deepcopy(run.model)
    run.optimizer = torch.optim.SGD(run.model.parameters(), lr=0.1)
    out = delta.update(run, batch, adv, lam, plans)
    rows = plans[0][0]  # the micro-batch's rows, longest last
    ids, am, R = delta.micro_batch(batch, rows)
    reference.train()
    logp = delta.response_logprobs(reference, ids, am, R, run.args.temperature)[0]
    mask = batch["response_mask"][rows, :R]
    loss = policy_loss(logp, batch["old_logp"][rows, :R], adv[rows], mask, lam[rows, :R], num_tokens=mask.sum())[0]
    position = (am.long().cumsum(1) - 1).clamp(min=0)
    aux = reference(input_ids=ids, attention_mask=am.long(), position_ids=position, output_router_logits=True).aux_loss
    (loss + (0.5 * aux if router_logits else 0.0)).backward()
    for (name, p), q in zip(reference.named_parameters(), run.model.parameters()):
        assert torch.allclose(p - 0.1 * p.grad, q, atol=1e-6), name
    assert ("loss/router" in out) == router_logits and out.get("loss/router", 0.5 * aux.item()) == pytest.approx(
        0.5 * aux.item(), rel=1e-5)


def test_a_family_with_logit_soft_capping_is_refused_before_work(tmp_path):
    """Gemma-2 soft-caps its logits after the LM head, which the sliced head does not: refused with the reason."""
    tasks.build_tiny(str(tmp_path), model_type="gemma2")
    model, tok = checkpoints.load_model(str(tmp_path), torch.device("cpu"))
    with pytest.raises(delta.ArgumentError, match="soft-capping"):  # a run made outside prepare (a bench) too
        delta.make_run(Args(model=str(tmp_path)), model, tok, str(tmp_path))
    p = run_delta("--model", str(tmp_path), "--output_dir", str(tmp_path / "run"), "--max_steps", "1")
    assert p.returncode != 0 and "soft-capping" in p.stderr and not os.path.exists(tmp_path / "run" / "metrics.jsonl")


def test_eval_dataset_and_its_refusals(tmp_path):
    """--eval_dataset holds the evaluation out of another file (its first --eval_size rows); rows of another kind
    than the training rows, or a --dataset no larger than --eval_size without one, are refused before any work."""
    from conftest import lcb_row_1873a
    train, held, code = tmp_path / "train.jsonl", tmp_path / "held.jsonl", tmp_path / "code.jsonl"
    train.write_text("".join(json.dumps({"question": f"{i}+1?", "final_answer": str(i + 1)}) + "\n" for i in range(6)))
    held.write_text("".join(json.dumps({"question": f"{i}+2?", "final_answer": str(i + 2)}) + "\n" for i in range(5)))
    code.write_text(json.dumps(lcb_row_1873a()) + "\n")
    kind, rows, evals = tasks.load_task(Args(dataset=str(train), eval_dataset=str(held), eval_size=3))
    assert kind == "math" and len(rows) == 6 and [r["answer"] for r in evals] == ["2", "3", "4"]
    with pytest.raises(rewards.DataError, match="holds code rows, --dataset math rows"):
        tasks.load_task(Args(dataset=str(train), eval_dataset=str(code)))
    with pytest.raises(rewards.DataError, match="has 6 rows, and --eval_size 6 of them are held out"):
        tasks.load_task(Args(dataset=str(train), eval_size=6))


def test_small_refusals_and_edges(tiny, tmp_path, monkeypatch):
    """Branches no other test takes (bench/coverage.sh found them): a bad advantage scale, an empty top-share mask, no
    overlong buffer, an MoE config without a router coefficient, templates that name no turn end, a --reward that
    contradicts the rows, prompts asking for another answer format, --resume with no checkpoint, dropout modules
    switched off at load, and a refusal under torchrun that leaves the process group cleanly."""
    import types as pytypes
    import warnings
    with pytest.raises(ValueError, match="scale must be 'group' or 'none'"):
        group_advantages(torch.ones(4), 2, scale="batch")
    assert not delta.top_share_mask(torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.bool)).any()
    assert torch.equal(delta.overlong_penalty(torch.tensor([5, 50]), 40, 0, 1.0), torch.zeros(2))
    with pytest.raises(delta.ArgumentError, match="names no router_aux_loss_coef"):
        delta.router_loss_coef(pytypes.SimpleNamespace(output_router_logits=True, router_aux_loss_coef=None))
    tok = checkpoints.load_tokenizer(tiny)
    tok.chat_template = None
    assert sampling.turn_end(tok) is None
    tok.chat_template = "{{ raise_exception('no assistant turns') }}"
    assert sampling.turn_end(tok) is None
    with pytest.raises(delta.ArgumentError, match="use --reward auto"):
        delta.resolve_defaults(Args(reward="code"), "math")
    with pytest.warns(UserWarning, match="the prompts ask for boxed answers, graded as --answer_format last_number"):
        delta.resolve_defaults(Args(dataset="d.jsonl", answer_format="last_number"), "math",
                               [{"question": "1+1? Put it in \\boxed{}.", "answer": "2"}])
    assert checkpoints.resume_state(Args(resume=True, output_dir=str(tmp_path)), [], 1) == (
        None, f"--resume: no checkpoint in {tmp_path}")
    read = transformers.AutoModelForCausalLM.from_pretrained

    def with_dropout(*a, **k):
        model = read(*a, **k)
        model.model.dropout = torch.nn.Dropout(0.1)
        return model
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", with_dropout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, _ = checkpoints.load_model(tiny, torch.device("cpu"))
    assert model.model.dropout.p == 0.0
    bad = tmp_path / "bad.jsonl"  # refused by load_task, after the process group is up: it is left cleanly
    bad.write_text(json.dumps({"problem": "1+1?", "final_answer": "2"}) + "\n")
    p = run_delta("--dataset", str(bad), "--max_new_tokens", "32", "--output_dir", str(tmp_path / "run"), torchrun=True)
    assert p.returncode != 0 and "no field 'question'" in p.stderr and not os.path.exists(tmp_path / "run")
    run = make_run(tiny, output_dir=str(tmp_path / "ckpt"), keep_checkpoints=1)  # older checkpoints removed
    os.makedirs(run.args.output_dir)
    for step in (1, 2):
        checkpoints.save(run, step)
    assert checkpoints.found(run.args.output_dir) == [os.path.join(run.args.output_dir, "checkpoint-2")]


# ------------------------------------------------------------------------------------- a run's first hour (issue 52)
def test_a_run_says_what_it_is_doing_and_what_is_going_wrong(tiny, tmp_path, capsys):
    """Progress inside each long phase (rate and time left), the step-0 evaluation's size before it, most responses
    cut at --max_new_tokens told which flag to change, and a second run into the folder refused, naming --resume."""
    data = tmp_path / "train.jsonl"
    with open(data, "w") as f:
        for r in tasks.addition_task(0, 0)[0][:40]:
            f.write(json.dumps({"question": r["question"], "final_answer": r["answer"]}) + "\n")
    out = str(tmp_path / "run")
    flags = ["--model", tiny, "--dataset", str(data), "--eval_size", "8", "--max_steps", "1", "--output_dir", out,
             *FAST[:8], "--max_new_tokens", "6", "--overlong_buffer", "2", "--temperature", "0.9", "--top_p", "0.95"]
    p = run_delta(*flags, "--progress_seconds", "0")
    assert p.returncode == 0, p.stderr[-3000:]
    err = p.stderr
    assert "evaluation at step 0: 8 held-out problems greedy, up to 6 new tokens a response (48 tokens" in err
    assert err.index("evaluation at step 0") < err.index("evaluate (step 0):")  # said before it runs
    for phase in ("evaluate (step 0):", "  generate:", "score:", "update:"):
        line = next((x for x in err.splitlines() if phase in x), None)
        assert line is not None, (phase, err[-3000:])
        assert re.search(r" of \d+ [a-z ]+ in \d+ s, [\d,.]+ tokens/s, (about|at most) \d+ s left", line), line
    step = read_metrics(out)[1]
    assert all(step[f"speed/{k}_tokens_per_s"] > 0 for k in ("generate", "score", "train")), step
    truncated = step["response/truncated"]
    assert truncated > 0.5 and f"{100 * truncated:.0f} % of the responses reached --max_new_tokens 6" in err
    assert "DAPO's overlong penalty starts at 4 (--overlong_buffer 2)" in err and "raise --max_new_tokens" in err
    again = run_delta(*flags)
    assert again.returncode != 0 and "Traceback" not in again.stderr
    assert f"{out} holds checkpoints of an earlier run: pass --resume to continue it, or choose another" in again.stderr
    assert [r["step"] for r in read_metrics(out) if "reward/mean" in r] == [1]  # the first run's file untouched
    quiet = run_delta(*flags, "--output_dir", out + "-quiet", "--progress", "false")  # a later flag wins
    assert quiet.returncode == 0 and " left" not in quiet.stderr, quiet.stderr[-2000:]
    # eval.py samples as the run did, and says so; a flag still overrides
    import eval as evaluation
    args = evaluation.parse_args(["--model", os.path.join(out, "final"), "--data", "x.jsonl", "--top_p", "0.5"])
    assert (args.temperature, args.top_p, args.top_k, args.max_new_tokens) == (0.9, 0.5, 0, 6)
    assert "sampling: temperature 0.9, top_p 0.5 (a flag), top_k 0, max_new_tokens 6; as " in capsys.readouterr().err


def test_sigterm_in_the_warm_start_ends_cleanly_and_says_so(tmp_path):
    import signal
    import time

    out = str(tmp_path / "warm")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, "delta.py", "--output_dir", out, *FAST[:-2], "--sft_max_steps", "1500",
                             "--sft_target_acc", "0.99", "--progress_seconds", "0"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen, deadline = "", time.time() + 300
    while time.time() < deadline and "warm start: 3 of 1,500 steps" not in seen:  # progress lines as it warms up
        seen += proc.stderr.readline()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, (seen + err)[-3000:]  # 143: preempted, not finished
    assert re.search(r"warm start: 3 of 1,500 steps in \d+ s, [\d.]+ steps/s, at most .* left, sample accuracy", seen)
    assert "interrupted before RL's first step (the warm start at step " in err and "Traceback" not in err
    assert "of at most 1500, sample accuracy" in err and "starts the run over" in err
    assert checkpoints.found(out) == [] and not os.path.exists(os.path.join(out, "final"))
    assert not os.path.exists(os.path.join(out, "metrics.jsonl")) or "reward/mean" not in open(
        os.path.join(out, "metrics.jsonl")).read()


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_second_signal_ends_the_process_at_once(name):
    """The first signal is only noted (the test above: the step finishes, then the run ends); a second one ends the
    process where it is, as an uncaught one would. delta.catch_stop in a process of its own, signalled by itself:
    a signal from outside races the graceful end that the first one starts."""
    import signal

    script = (f"import signal, sys, types; sys.path.insert(0, {ROOT!r}); import delta\n"
              "run = types.SimpleNamespace(stop=[]); delta.catch_stop(run)\n"
              f"signal.raise_signal(signal.{name}); print('noted', run.stop == [signal.{name}], flush=True)\n"
              f"signal.raise_signal(signal.{name}); print('went on after the second', flush=True)\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.stdout == "noted True\n", (p.stdout, p.stderr[-2000:])
    assert p.returncode == -getattr(signal, name), p.stderr[-2000:]  # Python ends a KeyboardInterrupt by SIGINT
    assert ("KeyboardInterrupt" in p.stderr) == (name == "SIGINT"), p.stderr[-2000:]


def mistakes(tiny, d):
    """(program, argv, the word that names the mistake): every kind of input a user gives, each wrong in one way."""
    (d / "bad.jsonl").write_text('{"question": "1+1?", "final_answer": "2"}\n{"question": "2+2?", "final_answer": \n')
    (d / "good.jsonl").write_text("".join(json.dumps({"question": f"{i}+1?", "final_answer": str(i + 1)}) + "\n"
                                          for i in range(40)))
    (d / "empty.jsonl").write_text("")
    (d / "broken.yaml").write_text("lr: [1e-5\n")
    (d / "list.yaml").write_text("- lr\n")
    (d / "unknown.yaml").write_text("bogus: 3\n")
    (d / "broken.json").write_text('{"lr": 1e-5,}')
    (d / "nocol.csv").write_text("q,a\n1+1?,2\n")
    (d / "bad.parquet").write_text("not parquet")
    (d / "afile.txt").write_text("hi")
    (d / "emptydir").mkdir()
    data = ["--model", tiny, "--max_new_tokens", "32", "--dataset"]
    return [
        ("delta", [str(d / "nope.yaml")], "no such recipe file"),
        ("delta", [str(d / "broken.yaml")], "not valid YAML"),
        ("delta", [str(d / "broken.json")], "not valid JSON"),
        ("delta", [str(d / "list.yaml")], "maps argument names to values"),
        ("delta", [str(d / "unknown.yaml")], "no such arguments: bogus"),
        ("delta", ["--seed", "1", str(d / "unknown.yaml")], "a recipe comes first"),
        ("delta", ["--lerning_rate", "1e-5"], "did you mean --lr?"),
        ("delta", ["--learning_rate", "1e-5"], "did you mean --lr?"),
        ("delta", ["--num_generations", "4"], "did you mean --group_size?"),
        ("delta", ["--grup_size", "4"], "did you mean --group_size?"),
        ("delta", ["--lr", "abc"], "--lr abc: not a float"),
        ("delta", ["--max_steps", "1.5"], "--max_steps 1.5: not a int"),
        ("delta", ["--resume", "maybe"], "--resume"),
        ("delta", ["--algo", "ppo"], "--algo 'ppo' is unknown"),
        ("delta", ["--group_size", "1"], "--group_size 1"),
        ("delta", ["--resume"], "--resume needs the --output_dir"),
        ("delta", ["--dataset", str(d / "missing.jsonl")], "missing.jsonl: no such file"),  # before --max_new_tokens
        ("delta", data + [str(d / "bad.jsonl")], "line 2 is not JSON"),
        ("delta", data + [str(d / "empty.jsonl")], "the file is empty"),
        ("delta", data + [str(d / "bad.parquet")], "cannot be read: Parquet"),
        ("delta", data + [str(d / "nocol.csv")], "no field 'question'"),
        ("delta", data + [str(d / "good.jsonl"), "--eval_dataset", str(d / "held.jsonl")],
         "--eval_dataset " + str(d / "held.jsonl") + ": no such file"),
        ("delta", ["--model", str(d / "emptydir")], "holds no config.json"),
        ("delta", ["--model", str(d / "afile.txt")], "is a file"),
        ("delta", ["--model", str(d / "nomodel")], "nomodel: no such file or folder"),
        ("delta", ["--model", "nobody-here/no-model"], "the hub cannot be reached"),
        ("delta", ["--output_dir", str(d / "afile.txt")], "--output_dir " + str(d / "afile.txt") + " is a file"),
        ("eval", ["--model", str(d / "nomodel"), "--data", str(d / "good.jsonl")], "nomodel: no such"),
        ("eval", ["--model", str(d / "nomodel")], "nomodel: no such"),  # before "give --data"
        ("eval", ["--model", tiny, "--data", str(d / "missing.jsonl")], "missing.jsonl: no such file"),
        ("eval", ["--model", tiny, "--data", str(d / "bad.jsonl")], "line 2 is not JSON"),
        ("eval", ["--model", tiny, "--benchmarks", "nope"], "--benchmarks: unknown nope"),
        ("eval", ["--model", tiny, "--n_sampels", "4"], "did you mean --n_samples?"),
        ("eval", ["--model", tiny, "--data", str(d / "good.jsonl"), "--output_dir", str(d / "afile.txt")], "is a file"),
    ]


def test_every_mistake_is_one_line_naming_it_before_any_work(tiny, tmp_path, monkeypatch, capsys):
    """Each input a user gives, wrong in one way: exit status 2, one line on stderr that names the mistake (the
    first thing written wrong where two are), no traceback, nothing on disk made or changed. In process (the
    command's own main), the hub offline; one case again as a process below."""
    import huggingface_hub.constants

    import eval as evaluation
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    cases = mistakes(tiny, tmp_path)
    before = sorted(os.walk(tmp_path))
    for program, argv, word in cases:
        code = (delta.main if program == "delta" else evaluation.command)(argv)
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"{program}.py: error: "), (argv, err, out)
        assert word in lines[0] and "Traceback" not in err, (argv, word, lines[0])
    assert sorted(os.walk(tmp_path)) == before  # no runs/, eval_out/ or output folder made


def test_a_mistake_ends_the_process_with_one_line(tmp_path):
    p = run_delta("--lerning_rate", "1e-5")
    assert p.returncode == 2 and p.stderr.strip() == ("delta.py: error: --lerning_rate: no such argument (did you mean "
                                                      "--lr?); python delta.py --help lists them"), p.stderr[-2000:]


def test_the_heartbeat_speaks_while_one_unit_outlasts_the_interval(capsys):
    """A phase whose one unit takes five intervals still gets a line every interval (a timer, not a tick); the
    heartbeat stops once the phase has counted its total; other ranks and --progress false print nothing."""
    import time
    report = console.progress(Args(progress_seconds=0.2), 0)
    tick = report("update", 2, "rows")
    time.sleep(1.1)  # the first unit
    tick(1, tokens=50)
    time.sleep(0.7)  # the second
    tick(1, tokens=50)
    lines = capsys.readouterr().err.splitlines()
    waiting = [x for x in lines if x.startswith("  update: 0 of 2 rows in ")]
    assert len(waiting) >= 3, lines  # about 5; a loaded machine may delay a beat
    assert sum(x.startswith("  update: 1 of 2 rows in ") and "tokens/s, about" in x for x in lines) >= 2, lines
    time.sleep(0.6)  # the phase is complete: silence
    assert capsys.readouterr().err == ""
    done = report("model: m")  # a phase with no count: a line at its start, heartbeats, its time at the end
    time.sleep(0.5)
    done()
    said = capsys.readouterr().err.splitlines()
    assert said[0] == "model: m ..." and said[-1].startswith("model: m: done in ") and any(
        x.startswith("  model: m: running for ") for x in said), said
    for quiet in (console.progress(Args(progress_seconds=0.2), 1), console.progress(Args(progress_seconds=0.2,
                                                                                     progress=False), 0)):
        quiet("score", 2, "rows")(0)
        time.sleep(0.5)
    assert capsys.readouterr().err == ""


def test_a_run_says_how_it_ended(tmp_path):
    """Finished: a summary naming its steps, held-out accuracy first and last, its wall time and files, exit 0.
    Resumed once finished: one line saying so, exit 0, nothing rewritten."""
    out = str(tmp_path / "run")
    p = run_delta("--output_dir", out, "--max_steps", "1", "--eval_every", "0", *FAST)
    assert p.returncode == 0, p.stderr[-3000:]
    last = p.stderr.strip().splitlines()[-1]
    acc = [r["eval/accuracy"] for r in read_metrics(out) if "eval/accuracy" in r]
    assert re.fullmatch(rf"finished: 1 steps in \d+ s \(this process\); held-out accuracy {100 * acc[0]:.1f} % at "
                        rf"step 0, {100 * acc[-1]:.1f} % at step 1; the model is in {out}/final, the metrics in "
                        rf"{out}/metrics.jsonl", last), last
    stamp = os.path.getmtime(os.path.join(out, "final", "config.json"))
    again = run_delta("--output_dir", out, "--max_steps", "1", "--eval_every", "0", *FAST, "--resume")
    assert again.returncode == 0 and again.stderr.strip() == (f"{out} finished at step 1 already: the model is in "
                                                              f"{out}/final; nothing is left to do"), again.stderr
    assert os.path.getmtime(os.path.join(out, "final", "config.json")) == stamp


def test_help_fits_a_screen_in_groups_with_the_readme_paths(capsys):
    """--help: the README's three paths and the recipe first, the options in groups (every argument in one), each
    --no_X saying what it turns off, the exit statuses last."""
    with pytest.raises(SystemExit):
        delta.parse_args(["--help"])
    text = capsys.readouterr().out
    head = text.splitlines()[:40]
    assert head[0] == "usage: python delta.py [RECIPE] [--flag VALUE ...]" and any("RECIPE:" in x for x in head)
    assert all(any(path in x for x in head) for path in ("python delta.py ", "recipes/smollm2-addition.yaml",
                                                         "from delta import"))
    assert "the run:" in head and "the model and data:" in head
    grouped = [n for names in delta.GROUPS.values() for n in names.split()]
    assert sorted(grouped) == sorted(f.name for f in dataclasses.fields(Args))  # each argument in one group, once
    assert "  --no_progress" in text and "turn --progress off" in text and "(default: False)" not in text.split(
        "--no_progress")[1].splitlines()[0]
    assert text.strip().splitlines()[-2].startswith("exit status: 0 finished")


def test_help_lists_every_answer_format():
    import io
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        delta.parse_args(["--help"])
    text = " ".join(help_text.getvalue().split())
    start = text.index("--answer_format TEXT")  # the options' list, after the usage line
    block = text[start:text.index("--instruction", start)]
    assert all(fmt in block for fmt in rewards.ANSWER_FORMATS), block


def test_the_readme_snippet_runs_as_written(tmp_path):
    """README section 3's block, as written, in a fresh interpreter in a folder holding only delta.py."""
    text = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"```python\n(.*?)```", text[text.index("## 3. Copy the loss"):], re.S).group(1)
    shutil.copy(os.path.join(ROOT, "delta.py"), tmp_path)
    (tmp_path / "snippet.py").write_text(block)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-s", "snippet.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert re.fullmatch(r"loss -?[\d.]+, lam [\d.]+ to [\d.]+, mean 1\.000\n", p.stdout), p.stdout
