import copy
import math

import gymnasium
import numpy as np
import pytest
import torch

from ppo1.advantages import standardize
from ppo1.observations import Obs
from ppo1.ppo import clipped_surrogate, explained_variance, linear_alpha, ppo_loss
from ppo1.update_pass import UpdatePass


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
    total, stats = ppo_loss(old, dist.entropy(), values, old, adv, returns, clip=0.1, vf_coef=0.5, ent_coef=0.01)
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
        dist, _, _ = policy.step(obs, None)
    actions = torch.arange(n) % 3
    old_logp = dist.log_prob(actions)
    adv = torch.linspace(-3, 5, n)
    stats = update(policy, opt, Comm(None), Batch(Obs({"image": obs}), actions, old_logp, adv, torch.zeros(n),
                                                  np.random.default_rng(0), values),
                   Hyper(clip=0.1, lr=1e-3, **{"epochs": 1, **kw}, minibatch=8, vf_coef=1.0, ent_coef=0.0),
                   UpdatePass(policy))
    return policy, stats, opt


def test_gradient_norm_is_clipped_before_the_step(monkeypatch):
    seen = []
    real = torch.optim.Adam.step

    def step(self, *a, **k):
        seen.append(torch.sqrt(sum(p.grad.pow(2).sum() for g in self.param_groups for p in g["params"])).item())
        return real(self, *a, **k)
    monkeypatch.setattr(torch.optim.Adam, "step", step)
    _, clipped, _ = _tiny_update(max_grad_norm=0.01)
    assert seen and max(seen) <= 0.01 + 1e-6
    seen.clear()
    _, unclipped, _ = _tiny_update()
    assert max(seen) > 0.01  # unclipped gradients are larger: the clip above did something
    # grad_norm (progress.csv) is the mean norm before clipping: the steps' own norms unclipped, past the clip clipped
    assert unclipped["grad_norm"] == pytest.approx(sum(seen) / len(seen), rel=1e-5)
    assert clipped["grad_norm"] > 0.01


def test_the_kl_warning_is_one_line_where_approx_kl_first_passes_its_bound_naming_the_iteration():
    from ppo1.ppo import KL_WARNING, kl_warning
    assert kl_warning(7, 0.02, 0.01) is None and kl_warning(7, -0.05, None) is None
    line = kl_warning(61, 8.09, 0.01)
    assert line.startswith("ppo1: warning: iteration 61: approx_kl 8.09 is past 0.1 ")
    assert kl_warning(49, -6.97, None).startswith("ppo1: warning: iteration 49: approx_kl -6.97 is past")  # either sign
    assert kl_warning(62, 3.0, 8.09) is None  # still past: said once where it began
    assert kl_warning(63, KL_WARNING, 0.0) is None  # at the bound: not past it


def test_minibatch_standardisation_makes_each_minibatch_zero_mean(monkeypatch):
    import ppo1.ppo as ppo
    seen = []
    real = ppo.ppo_loss

    def spy(logp, entropy, values, old_logp, adv, *a, **k):
        seen.append(adv.clone())
        return real(logp, entropy, values, old_logp, adv, *a, **k)
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
    logp = dist.log_prob(actions)
    args = (logp, dist.entropy(), torch.tensor([3.0, 0.0]), logp, torch.zeros(2), torch.tensor([0.0, 0.0]))
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
                                                    ent_coef=0.0), UpdatePass(policy))
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters())), "a NaN step was taken"
    assert not opt.state, "Adam stepped"


def test_the_first_minibatch_of_an_iteration_has_ratio_one_with_running_frame_statistics(tmp_path, monkeypatch):
    # --frame_norm center: the frame statistics move after the rollout; the update's pi_old must be the policy
    # it starts from (baselines: ob_rms.update, then old = new), so the first minibatch's ratio is exactly 1.
    import importlib
    train_mod = importlib.import_module("ppo1.trainer")
    from ppo1.config import Config
    from ppo1.distributed import Comm
    ratios = []
    real = train_mod.update

    def spy(policy, optimizer, comm, batch, hp, update_pass=None):
        with torch.no_grad():
            dist, _, _ = policy.step(batch.obs, None)
            ratios.append(torch.exp(dist.log_prob(batch.actions) - batch.logp))
        return real(policy, optimizer, comm, batch, hp, update_pass)
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
    _, stats = ppo_loss(dist.log_prob(actions), dist.entropy(), torch.zeros(2), old, torch.ones(2), torch.zeros(2),
                        clip=0.1, vf_coef=0.5, ent_coef=0.01)
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


def _weighted_loss_and_grads(logits, values, actions, old_logp, adv, returns, weights=None):
    """ppo_loss (clipped value loss) of a categorical over `logits` and `values`, both leaves: (loss, their grads)."""
    logits, values = logits.clone().requires_grad_(), values.clone().requires_grad_()
    dist = torch.distributions.Categorical(logits=logits)
    loss, stats = ppo_loss(dist.log_prob(actions), dist.entropy(), values, old_logp, adv, returns, 0.2, 0.5, 0.01,
                           old_values=returns - 1.0, weights=weights)
    loss.backward()
    return loss, stats, logits.grad, values.grad


def test_a_crashed_steps_sample_adds_nothing_to_the_losses_or_their_gradients():
    torch.manual_seed(0)
    logits, values = torch.randn(3, 4), torch.randn(3)
    actions, old_logp = torch.tensor([0, 2, 1]), torch.log(torch.tensor([0.2, 0.3, 0.4]))
    adv, returns = torch.tensor([1.0, -2.0, 9.0]), torch.tensor([0.5, 1.5, -7.0])
    weights = torch.tensor([1.0, 1.0, 0.0])  # sample 2: a step whose env crashed
    loss, stats, g_logits, g_values = _weighted_loss_and_grads(logits, values, actions, old_logp, adv, returns, weights)
    alone = _weighted_loss_and_grads(logits[:2], values[:2], actions[:2], old_logp[:2], adv[:2], returns[:2])
    torch.testing.assert_close(loss, alone[0], rtol=1e-6, atol=1e-7)
    for key in ("pol_loss", "vf_loss", "entropy", "approx_kl", "clipfrac", "kl_k3"):
        torch.testing.assert_close(stats[key], alone[1][key], rtol=1e-6, atol=1e-7)
    assert g_logits[2].abs().sum() == 0 and g_values[2] == 0
    torch.testing.assert_close(g_logits[:2], alone[2], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(g_values[:2], alone[3], rtol=1e-6, atol=1e-7)


def test_a_minibatchs_advantage_normalisation_leaves_out_a_crashed_steps_sample():
    from ppo1.ppo import normalized
    adv = torch.tensor([1.0, 2.0, 100.0, 3.0, 6.0])
    out = normalized(adv, torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0]))
    # mean 3, std sqrt(14 / 3) (Bessel) of 1, 2, 3, 6 alone; the crashed sample's 0
    torch.testing.assert_close(out, torch.tensor([-2.0, -1.0, 0.0, 0.0, 3.0]) / math.sqrt(14 / 3), rtol=1e-6, atol=1e-7)
    assert torch.equal(normalized(adv[[0, 1, 3, 4]]), out[[0, 1, 3, 4]])


class _TwoRanks:
    """The Comm of rank 0 of two whose rank 1 adds `other` to every sum (one allreduce each, as MPI's)."""

    size = 2

    def __init__(self, other):
        self.other, self.sums = np.asarray(other, np.float64), 0

    def sum(self, x):
        self.sums += 1
        return np.asarray(x, np.float64) + self.other

    def mean(self, x):
        return self.sum(x) / self.size


def test_the_losses_of_ranks_with_crashed_samples_average_to_the_mean_over_all_their_samples_by_hand():
    from ppo1.ppo import ranks_share
    # rank 0: 3 samples trained on of 4, KL 0.5; rank 1: 4 of 4, KL 0.25 -> 7 in all:
    # rank 0's loss x 2 * 3 / 7, the ranks' KL (3 * 0.5 + 4 * 0.25) / 7, in one allreduce
    comm = _TwoRanks([4.0, 4 * 0.25])
    share, kl = ranks_share(comm, torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.tensor(0.5), target_kl=0.01)
    assert share == pytest.approx(6 / 7) and kl == pytest.approx(2.5 / 7) and comm.sums == 1
    # the averaged gradients are those of the mean over the 7: (share_0 * mean_0 + share_1 * mean_1) / 2
    x = torch.tensor([1.0, 50.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    w0, w1 = torch.tensor([1.0, 0.0, 1.0, 1.0]), torch.ones(4)
    from ppo1.ppo import mean
    share1, _ = ranks_share(_TwoRanks([3.0, 0.0]), w1, torch.tensor(0.0), target_kl=0.0)
    total = (share * mean(x[:4], w0) + share1 * mean(x[4:], w1)) / 2
    assert total.item() == pytest.approx((1 + 2 + 3 + 4 + 5 + 6 + 7) / 7)
    # no crashed sample on any rank: factor 1, the KL the plain mean of the ranks' (as before)
    assert ranks_share(_TwoRanks([0.25]), None, torch.tensor(0.5), target_kl=0.01) == (1.0, 0.375)


def test_a_rank_without_crashed_samples_weighs_its_own_by_one_when_another_rank_has_some():
    from ppo1.ppo import agreed_weights
    from ppo1.rollout import Batch
    z = torch.zeros(4)
    batch = Batch(Obs({"vector": z[:, None]}), z, z, z, z, np.random.default_rng(0))
    assert agreed_weights(_TwoRanks([0.0]), batch) is None and batch.weights is None
    assert agreed_weights(_TwoRanks([1.0]), batch).tolist() == [1.0] * 4


@pytest.mark.parametrize("rnn", ["none", "lstm"])
def test_an_update_learns_nothing_from_a_crashed_steps_sample_whatever_it_holds(rnn):
    # feed-forward and recurrent (chunks replayed whole): the same parameters whatever the crashed sample's
    # advantage, return, pi_old and V_old, with minibatch advantage normalisation and the clipped value loss
    from ppo1.distributed import Comm
    from ppo1.policies import build
    from ppo1.ppo import Hyper, update
    from ppo1.rollout import Batch, RecurrentBatch
    n, length = 16, 4
    torch.manual_seed(0)
    start = build("mlp", gymnasium.spaces.Discrete(3), (5,), rnn=rnn, rnn_size=8)
    obs = Obs({"vector": torch.randn(n, 5)})
    actions, weights = torch.arange(n) % 3, torch.ones(n)
    weights[5] = 0.0

    def trained(junk: float):
        policy = copy.deepcopy(start)
        adv, returns = torch.linspace(-3, 5, n), torch.linspace(1, 2, n)
        logp, values = torch.full((n,), -1.1), torch.ones(n)
        adv[5], returns[5], logp[5], values[5] = junk, -junk, -1.1 - junk / 1000, junk
        fields = (obs, actions, logp, adv, returns, np.random.default_rng(0), values, weights)
        batch = Batch(*fields) if rnn == "none" else RecurrentBatch(
            *fields, starts=(torch.arange(n) == 6), memory0=torch.zeros(n // length, policy.memory_size),
            seq_len=length)
        update(policy, torch.optim.Adam(policy.parameters(), lr=1e-2), Comm(None), batch,
               Hyper(clip=0.2, lr=1e-2, epochs=2, minibatch=8, vf_coef=0.5, ent_coef=0.01, adv_norm="minibatch",
                     clip_vloss=True), UpdatePass(policy))
        return torch.cat([p.detach().reshape(-1) for p in policy.parameters()])
    first = trained(0.0)
    assert torch.equal(first, trained(1000.0))
    assert not torch.equal(first, torch.cat([p.reshape(-1) for p in start.parameters()]))


def test_advantages_of_pure_noise_are_not_blown_up_to_unit_size_but_a_real_spread_is_standardised_as_before():
    from ppo1.advantages import standardize
    from ppo1.ppo import normalized
    # a solved task: returns 1 and 0 (std with Bessel's correction 0.5774), advantages +-0.001 of value noise
    returns = torch.tensor([1.0, 0.0, 1.0, 0.0])
    noise = torch.tensor([0.001, -0.001, 0.001, -0.001])
    # plain standardisation: +-0.001 / 0.0011547 = +-0.866, full-size updates on noise; the floor divides by
    # 0.1 x 0.5774 = 0.05774 instead: +-0.0173
    torch.testing.assert_close(normalized(noise), torch.tensor([0.866, -0.866, 0.866, -0.866]), atol=1e-3, rtol=0)
    torch.testing.assert_close(normalized(noise, returns=returns), noise / 0.057735, atol=1e-6, rtol=0)
    # a spread above the floor: exactly the plain standardisation
    signal = torch.tensor([0.5, -0.5, 0.2, -0.2])
    assert torch.equal(normalized(signal, returns=returns), normalized(signal))
    # the same over the rank's batch (numpy: std without Bessel's correction, 0.5 for these returns)
    np.testing.assert_allclose(standardize(noise.numpy(), returns=returns.numpy()), noise.numpy() / 0.05, atol=1e-6)
    np.testing.assert_array_equal(standardize(signal.numpy(), returns=returns.numpy()), standardize(signal.numpy()))
    # a crashed step's sample (weight 0) is left out of both stds and set to 0
    weights = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0])
    out = normalized(torch.cat([noise, torch.tensor([9.0])]), weights, torch.cat([returns, torch.tensor([50.0])]))
    torch.testing.assert_close(out, torch.cat([noise / 0.057735, torch.zeros(1)]), atol=1e-6, rtol=0)
