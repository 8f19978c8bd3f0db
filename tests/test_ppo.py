import math

import numpy as np
import pytest
import torch

from ppo1.ppo import clipped_surrogate, explained_variance, linear_alpha, ppo_loss, standardize


def test_linear_alpha_anneals_from_one_to_zero_and_never_below():
    assert linear_alpha(0, 1000) == 1.0
    assert linear_alpha(250, 1000) == 0.75
    assert linear_alpha(1000, 1000) == 0.0
    assert linear_alpha(2000, 1000) == 0.0


def test_surrogate_unclipped_inside_the_trust_region():
    old = torch.log(torch.tensor([0.5, 0.5]))
    logp = torch.log(torch.tensor([0.525, 0.475])).requires_grad_()   # ratios 1.05, 0.95
    adv = torch.tensor([1.0, -2.0])
    loss, clipfrac = clipped_surrogate(logp, old, adv, clip=0.1)
    assert loss.item() == pytest.approx(-(1.05 * 1.0 + 0.95 * -2.0) / 2, rel=1e-5)
    assert clipfrac.item() == 0.0
    loss.backward()
    assert torch.all(logp.grad != 0)


def test_surrogate_clipped_outside_gives_no_gradient():
    old = torch.log(torch.tensor([0.5, 0.5]))
    logp = torch.log(torch.tensor([0.75, 0.25])).requires_grad_()     # ratios 1.5 (A>0), 0.5 (A<0)
    adv = torch.tensor([2.0, -1.0])
    loss, clipfrac = clipped_surrogate(logp, old, adv, clip=0.2)
    assert loss.item() == pytest.approx(-(1.2 * 2.0 + 0.8 * -1.0) / 2, rel=1e-5)
    assert clipfrac.item() == 1.0
    loss.backward()
    assert torch.all(logp.grad == 0)


def test_surrogate_keeps_the_pessimistic_unclipped_term():
    # ratio 0.5 with A>0: min(0.5A, 0.8A) = 0.5A, unclipped, so the gradient pushes the ratio up
    old = torch.log(torch.tensor([0.5]))
    logp = torch.log(torch.tensor([0.25])).requires_grad_()
    loss, _ = clipped_surrogate(logp, old, torch.tensor([1.0]), clip=0.2)
    assert loss.item() == pytest.approx(-0.5, rel=1e-5)
    loss.backward()
    assert logp.grad.item() < 0


def test_total_loss_is_surrogate_plus_c1_value_minus_c2_entropy():
    logits = torch.tensor([[0.0, 0.0], [1.0, -1.0]])
    actions = torch.tensor([0, 1])
    dist = torch.distributions.Categorical(logits=logits)
    old = dist.log_prob(actions)
    values, returns = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 4.0])
    adv = torch.tensor([1.0, 1.0])
    total, stats = ppo_loss(dist, values, actions, old, adv, returns, clip=0.1, vf_coef=0.5, ent_coef=0.01)
    entropy = dist.entropy().mean().item()
    assert stats["pol_loss"].item() == pytest.approx(-1.0)
    assert stats["vf_loss"].item() == pytest.approx((1 + 4) / 2)
    assert total.item() == pytest.approx(-1.0 + 0.5 * 2.5 - 0.01 * entropy, rel=1e-6)
    assert stats["approx_kl"].item() == pytest.approx(0.0, abs=1e-7)


def test_standardize_gives_zero_mean_unit_std():
    x = standardize(np.array([1.0, 2.0, 3.0, 10.0]))
    assert x.dtype == np.float32
    assert abs(x.mean()) < 1e-6 and x.std() == pytest.approx(1.0, rel=1e-5)


def test_explained_variance():
    y = np.array([1.0, 2.0, 3.0])
    assert explained_variance(y, y) == 1.0
    assert explained_variance(np.full(3, 2.0), y) == pytest.approx(0.0)
    assert math.isnan(explained_variance(y, np.ones(3)))
