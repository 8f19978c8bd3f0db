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


def _tiny_update(**kw):
    import numpy as np
    from ppo1.distributed import Comm
    from ppo1.policies import build
    from ppo1.ppo import Hyper, update
    from ppo1.rollout import Batch
    torch.manual_seed(0)
    policy = build("small", 3)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    n = 16
    obs = torch.randint(0, 256, (n, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        dist, _ = policy.dist(obs)
    actions = torch.arange(n) % 3
    old_logp = dist.log_prob(actions)
    adv = torch.linspace(-3, 5, n)
    stats = update(policy, opt, Comm(None), Batch(obs, actions, old_logp, adv, torch.zeros(n), np.random.default_rng(0)),
                   Hyper(clip=0.1, lr=1e-3, epochs=1, minibatch=8, vf_coef=1.0, ent_coef=0.0, **kw))
    return policy, stats


def test_gradient_norm_is_clipped_before_the_step(monkeypatch):
    seen = []
    real = torch.optim.Adam.step

    def step(self, *a, **k):
        seen.append(torch.sqrt(sum(p.grad.pow(2).sum() for g in self.param_groups for p in g["params"])).item())
        return real(self, *a, **k)
    monkeypatch.setattr(torch.optim.Adam, "step", step)
    _tiny_update(max_grad_norm=0.01)
    assert seen and max(seen) <= 0.01 + 1e-6
    seen.clear()
    _tiny_update()
    assert max(seen) > 0.01  # unclipped gradients are larger: the clip above did something


def test_minibatch_standardisation_makes_each_minibatch_zero_mean(monkeypatch):
    import ppo1.ppo as ppo
    seen = []
    real = ppo.ppo_loss

    def spy(dist, values, actions, old_logp, adv, *a, **k):
        seen.append(adv.clone())
        return real(dist, values, actions, old_logp, adv, *a, **k)
    monkeypatch.setattr(ppo, "ppo_loss", spy)
    _tiny_update(adv_norm="minibatch")
    assert len(seen) == 2
    for a in seen:
        assert abs(a.mean().item()) < 1e-5 and a.std().item() == pytest.approx(1.0, abs=1e-4)
