import math

import numpy as np
import pytest
import torch

from ppo1.advantages import standardize
from ppo1.observations import Obs
from ppo1.ppo import clipped_surrogate, explained_variance, linear_alpha, ppo_loss


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


def _tiny_update(values=None, **kw):
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
    stats = update(policy, opt, Comm(None), Batch(Obs({"image": obs}), actions, old_logp, adv, torch.zeros(n),
                                                  np.random.default_rng(0), values),
                   Hyper(clip=0.1, lr=1e-3, **{"epochs": 1, **kw}, minibatch=8, vf_coef=1.0, ent_coef=0.0))
    return policy, stats, opt


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


def test_clipped_value_loss_takes_the_pessimistic_error_of_each_sample_by_hand():
    from ppo1.ppo import value_loss
    values = torch.tensor([1.0, 2.0, 0.0, -1.0], requires_grad=True)
    old = torch.tensor([0.5, 2.5, 0.0, 0.0])
    returns = torch.tensor([2.0, 1.0, 0.5, 1.0])
    # clip 0.2: V_clipped = V_old + clip(V - V_old, -0.2, 0.2) = [0.7, 2.3, 0.0, -0.2]
    # unclipped (V - R)^2 = [1, 1, 0.25, 4]; clipped (V_clipped - R)^2 = [1.69, 1.69, 0.25, 1.44]
    # max = [1.69, 1.69, 0.25, 4]: mean 7.63 / 4 = 1.9075 (plain: 6.25 / 4 = 1.5625)
    assert value_loss(values, returns).item() == pytest.approx(1.5625)
    loss = value_loss(values, returns, old, clip=0.2)
    assert loss.item() == pytest.approx(1.9075, rel=1e-6)
    loss.backward()
    # samples 1, 2: the clipped error wins and V moved past the clip: no gradient; sample 3: V = V_old,
    # both errors 2 (V - R) / 4 = -0.25; sample 4: the unclipped error wins: 2 * (-1 - 1) / 4 = -1
    torch.testing.assert_close(values.grad, torch.tensor([0.0, 0.0, -0.25, -1.0]))


def test_clip_vloss_is_off_by_default_and_on_it_clips_the_update_value_loss():
    from ppo1.config import Config
    from ppo1.ppo import Hyper
    assert Hyper.at(Config(), 1.0, 1).clip_vloss is False and Config().clip_vloss is False
    assert Hyper.at(Config(clip_vloss=True, epsilon=0.2, anneal_clip=True), 0.5, 1).clip == pytest.approx(0.1)
    dist = torch.distributions.Categorical(logits=torch.zeros(2, 3))
    actions = torch.tensor([0, 1])
    args = (dist, torch.tensor([3.0, 0.0]), actions, dist.log_prob(actions), torch.zeros(2), torch.tensor([0.0, 0.0]))
    _, plain = ppo_loss(*args, clip=0.1, vf_coef=1.0, ent_coef=0.0)
    _, clipped = ppo_loss(*args, clip=0.1, vf_coef=1.0, ent_coef=0.0, old_values=torch.tensor([0.0, 0.0]))
    # V = 3 from V_old = 0 at R = 0: clipped V 0.1 errs less (0.01), so the max keeps 9: (9 + 0) / 2
    assert plain["vf_loss"].item() == clipped["vf_loss"].item() == pytest.approx(4.5)
    _, clipped = ppo_loss(*args, clip=0.1, vf_coef=1.0, ent_coef=0.0, old_values=torch.tensor([5.0, 1.0]))
    # V_clipped = [4.9, 0.9]: errors max(9, 24.01) and max(0, 0.81): (24.01 + 0.81) / 2
    assert clipped["vf_loss"].item() == pytest.approx(12.41, rel=1e-6)


def test_k3_kl_estimate_is_zero_for_the_same_policy_and_matches_by_hand():
    from ppo1.ppo import approx_kl_k3
    old = torch.log(torch.tensor([0.5, 0.5]))
    assert approx_kl_k3(old, old).item() == 0.0
    logp = torch.log(torch.tensor([0.75, 0.25]))  # r = 1.5, 0.5: (0.5 - ln 1.5 + -0.5 - ln 0.5) / 2
    expected = ((0.5 - math.log(1.5)) + (-0.5 - math.log(0.5))) / 2
    assert approx_kl_k3(logp, old).item() == pytest.approx(expected, rel=1e-6)


def test_target_kl_ends_the_epochs_before_the_step_of_the_first_minibatch_past_it():
    from ppo1.ppo import kl_exceeded
    assert not kl_exceeded(1.0, 0.0)            # 0 = off
    assert not kl_exceeded(0.02, 0.02) and kl_exceeded(0.0201, 0.02)
    _, stats, opt = _tiny_update(epochs=3)
    assert stats["epochs"] == 3.0                # off: 3 epochs x 2 minibatches
    assert {int(s["step"]) for s in opt.state.values()} == {6}
    # the first minibatch's KL is ~0 (the rollout's policy); after one step at lr 1e-3 it is far past 1e-9
    _, stats, opt = _tiny_update(epochs=3, target_kl=1e-9)
    assert stats["epochs"] == 0.5                # one step of the 2 minibatches of an epoch
    assert {int(s["step"]) for s in opt.state.values()} == {1}
    _, stats, _ = _tiny_update(epochs=3, target_kl=1e3)
    assert stats["epochs"] == 3.0                # never reached


def test_clip_vloss_gives_the_loss_each_minibatchs_rollout_values(monkeypatch):
    import ppo1.ppo as ppo
    seen = []
    real = ppo.ppo_loss

    def spy(*a, old_values=None, **k):
        seen.append(old_values)
        return real(*a, old_values=old_values, **k)
    monkeypatch.setattr(ppo, "ppo_loss", spy)
    _tiny_update(clip_vloss=True, values=torch.arange(16.0))
    assert len(seen) == 2 and sorted(torch.cat(seen).tolist()) == list(range(16))  # the shuffled rollout values
    seen.clear()
    _tiny_update(values=torch.arange(16.0))
    assert seen == [None, None]                  # off: the plain error


def test_step_size_anneals_with_alpha_unless_anneal_lr_is_off():
    from ppo1.config import Config
    from ppo1.ppo import Hyper
    assert Hyper.at(Config(optim_stepsize=1e-3), 0.25, 1).lr == pytest.approx(2.5e-4)
    assert Hyper.at(Config(optim_stepsize=1e-3, anneal_lr=False), 0.25, 1).lr == pytest.approx(1e-3)
    assert Hyper.at(Config(optim_stepsize=1e-3, anneal_lr=False), 0.25, 1, warmup=0.5).lr == pytest.approx(5e-4)


def test_non_finite_gradients_stop_the_update_before_the_optimizer_step():
    from ppo1.distributed import Comm
    from ppo1.policies import build
    from ppo1.ppo import Hyper, NonFiniteUpdate, update
    from ppo1.rollout import Batch
    torch.manual_seed(0)
    policy = build("small", 3)
    before = [p.detach().clone() for p in policy.parameters()]
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    n = 16
    obs = torch.randint(0, 256, (n, 4, 84, 84), dtype=torch.uint8)
    returns = torch.zeros(n)
    returns[5] = float("nan")  # e.g. an env's NaN reward
    batch = Batch(Obs({"image": obs}), torch.zeros(n, dtype=torch.long), torch.zeros(n), torch.ones(n), returns,
                  np.random.default_rng(0))
    with pytest.raises(NonFiniteUpdate, match="epoch 1, minibatch 1"):
        update(policy, opt, Comm(None), batch, Hyper(clip=0.1, lr=1e-3, epochs=2, minibatch=16, vf_coef=1.0,
                                                    ent_coef=0.0))
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters())), "a NaN step was taken"
    assert not opt.state, "Adam stepped"


def test_the_first_minibatch_of_an_iteration_has_ratio_one_with_running_frame_statistics(tmp_path, monkeypatch):
    # --frame_norm center: the frame statistics move after the rollout; the update's pi_old must be the policy
    # it starts from (baselines: ob_rms.update, then old = new), so the first minibatch's ratio is exactly 1.
    import importlib
    train_mod = importlib.import_module("ppo1.train")  # (ppo1.train is also the API's train function)
    from ppo1.config import Config
    from ppo1.distributed import Comm
    ratios = []
    real = train_mod.update

    def spy(policy, optimizer, comm, batch, hp, dist_fn=None):
        with torch.no_grad():
            dist, _ = policy.dist(batch.obs)
            ratios.append(torch.exp(dist.log_prob(batch.actions) - batch.logp))
        return real(policy, optimizer, comm, batch, hp, dist_fn)
    monkeypatch.setattr(train_mod, "update", spy)
    cfg = Config.for_preset("paper", env_steps=512, envs_per_rank=2, timesteps_per_actorbatch=128,
                            num_threads=1, checkpoint_dir=str(tmp_path), model_name="r")
    assert cfg.frame_norm == "center"
    train_mod.train(cfg, Comm(None), log=lambda *a, **k: None)
    assert len(ratios) == 2
    for r in ratios:  # fp32: equal up to the rounding of batched convolutions
        torch.testing.assert_close(r, torch.ones_like(r), rtol=0, atol=1e-5)


def test_the_loss_of_multidiscrete_actions_takes_the_summed_log_probability_and_entropy():
    from ppo1.actions import MultiCategorical
    # nvec [2, 2]: the first state's dimensions have probabilities (1/2, 1/2) and (1/4, 3/4)
    logits = torch.tensor([[0.0, 0.0, 0.0, math.log(3)], [0.0, 0.0, 0.0, 0.0]])
    dist, actions = MultiCategorical(logits, (2, 2)), torch.tensor([[0, 1], [1, 0]])
    old = torch.log(torch.tensor([1 / 2 * 3 / 4, 1 / 4]))
    _, stats = ppo_loss(dist, torch.zeros(2), actions, old, torch.ones(2), torch.zeros(2), clip=0.1, vf_coef=0.5,
                        ent_coef=0.01)
    assert stats["pol_loss"].item() == pytest.approx(-1.0) and stats["approx_kl"].item() == pytest.approx(0, abs=1e-7)
    h = -(1 / 4 * math.log(1 / 4) + 3 / 4 * math.log(3 / 4))
    assert stats["entropy"].item() == pytest.approx(((math.log(2) + h) + 2 * math.log(2)) / 2, rel=1e-6)


def test_the_first_minibatch_has_ratio_one_in_bf16_too_and_pi_old_stays_fixed(tmp_path, monkeypatch):
    # --precision bf16: the update's torso runs in bfloat16, so pi_old is taken in bfloat16 as well (a
    # float32 pi_old differs from it by the rounding, which can exceed the annealed clip late in a run).
    # Frames scaled, not centred: no statistics move, so only the precision asks for pi_old to be taken anew;
    # a larger step size grows the logits, where a float32 pi_old is off by 3e-4 by the 4th iteration.
    from conftest import first_ratios
    from ppo1.config import Config
    cfg = Config.for_preset("paper", env_steps=1024, envs_per_rank=2, timesteps_per_actorbatch=128, num_threads=1,
                            precision="bf16", frame_norm="scale", optim_stepsize=1e-3, checkpoint_dir=str(tmp_path),
                            model_name="r")
    first, fixed = first_ratios(monkeypatch, cfg)
    assert len(first) == 4 and all(fixed)
    for r in first:
        torch.testing.assert_close(r, torch.ones_like(r), rtol=0, atol=1e-6)
