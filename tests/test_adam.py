"""ppo1's Adam on the CPU: the paper's update on hand-computed values, bit-identical to torch.optim.Adam,
checkpoints interchangeable with torch's (a training process that never imports torch._dynamo: test_launch_np)."""
import copy

import pytest
import torch

from ppo1.adam import Adam, adam_step
from ppo1.policies import build


def test_each_step_of_a_constant_gradient_moves_by_the_step_size_against_its_sign():
    # m_t / (1 - b1^t) = g and sqrt(v_t / (1 - b2^t)) = |g| for a constant g: with eps 0 every step is lr * sign(g)
    p, g = torch.tensor([1.0, -2.0]), torch.tensor([0.5, -4.0])
    m, v = torch.zeros(2), torch.zeros(2)
    adam_step(p, g, m, v, 1, lr=0.125, betas=(0.9, 0.999), eps=0.0)
    assert p.tolist() == [0.875, -1.875]
    assert torch.allclose(m, torch.tensor([0.05, -0.4])) and torch.allclose(v, torch.tensor([0.00025, 0.016]))
    adam_step(p, g, m, v, 2, lr=0.125, betas=(0.9, 0.999), eps=0.0)
    assert torch.allclose(p, torch.tensor([0.75, -1.75]), rtol=0, atol=1e-6)


def test_epsilon_is_added_after_the_bias_correction():
    # step 1, g = 1e-3: m_hat = 1e-3, sqrt(v_hat) = 1e-3; with eps 1e-3 the step is lr * 1e-3 / 2e-3 = lr / 2
    p = torch.tensor([0.0], dtype=torch.float64)
    adam_step(p, torch.tensor([1e-3], dtype=torch.float64), torch.zeros(1, dtype=torch.float64),
              torch.zeros(1, dtype=torch.float64), 1, lr=0.1, betas=(0.9, 0.999), eps=1e-3)
    assert p.item() == pytest.approx(-0.05, rel=1e-12)


def _twins():
    torch.manual_seed(0)
    a = build("small", 6)
    b = build("small", 6)
    b.load_state_dict(a.state_dict())
    return a, b


def _same_gradients(nets, seed):
    g = torch.Generator().manual_seed(seed)
    for params in zip(*(net.parameters() for net in nets)):
        grad = torch.randn(params[0].shape, generator=g)
        for p in params:
            p.grad = grad.clone()


def test_fused_steps_are_bit_identical_to_torch_fused_adam_on_the_cpu_and_close_to_the_single_tensor_ones():
    ours_net, torch_net = _twins()
    plain_net = copy.deepcopy(ours_net)
    ours = Adam(ours_net.parameters(), lr=1e-3, eps=1e-5, fused=True)
    theirs = torch.optim.Adam(torch_net.parameters(), lr=1e-3, eps=1e-5, fused=True)
    plain = Adam(plain_net.parameters(), lr=1e-3, eps=1e-5)
    for t in range(20):
        lr = 1e-3 * (1 - t / 20)
        for opt in (ours, theirs, plain):
            opt.param_groups[0]["lr"] = lr
        _same_gradients([ours_net, torch_net, plain_net], t)
        for opt in (ours, theirs, plain):
            opt.step()
    for p, q, r in zip(ours_net.parameters(), torch_net.parameters(), plain_net.parameters()):
        assert torch.equal(p, q)
        torch.testing.assert_close(p, r, rtol=0, atol=1e-6)
    assert ours.state_dict()["state"].keys() == plain.state_dict()["state"].keys()


def test_twenty_steps_are_bit_identical_to_torch_adam_on_the_cpu_with_the_step_size_changing():
    ours_net, torch_net = _twins()
    ours = Adam(ours_net.parameters(), lr=1e-3, eps=1e-5)
    theirs = torch.optim.Adam(torch_net.parameters(), lr=1e-3, eps=1e-5)
    for t in range(20):
        lr = 1e-3 * (1 - t / 20)
        ours.param_groups[0]["lr"] = theirs.param_groups[0]["lr"] = lr
        _same_gradients([ours_net, torch_net], t)
        ours.step()
        theirs.step()
    for p, q in zip(ours_net.parameters(), torch_net.parameters()):
        assert torch.equal(p, q)
    for i, s in ours.state_dict()["state"].items():
        for k in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(s[k], theirs.state_dict()["state"][i][k]), (i, k)


@pytest.mark.parametrize("fused", [False, True], ids=["torch default", "torch fused (as on a GPU)"])
def test_a_state_of_torch_adam_loads_into_ours_and_ours_into_torch_and_both_step_on_identically(fused):
    ours_net, torch_net = _twins()
    theirs = torch.optim.Adam(torch_net.parameters(), lr=1e-3, eps=1e-5, fused=fused)
    _same_gradients([torch_net], 0)
    theirs.step()
    ours_net.load_state_dict(torch_net.state_dict())
    ours = Adam(ours_net.parameters(), lr=0.5)
    ours.load_state_dict(theirs.state_dict())
    assert ours.param_groups[0]["lr"] == 1e-3 and ours.param_groups[0]["eps"] == 1e-5
    back = torch.optim.Adam(torch_net.parameters(), lr=0.5)
    back.load_state_dict(copy.deepcopy(ours.state_dict()))  # and ours loads into torch's (its own tensors)
    for opt in (ours, back):
        _same_gradients([ours_net, torch_net], 1)
        opt.step()
    for p, q in zip(ours_net.parameters(), torch_net.parameters()):
        assert torch.equal(p, q)


def test_a_state_for_other_parameters_is_refused_naming_the_shapes():
    net, _ = _twins()
    other = torch.optim.Adam(build("small", 4).parameters())
    for p in other.param_groups[0]["params"]:
        p.grad = torch.ones_like(p)
    other.step()
    with pytest.raises(ValueError, match=r"exp_avg of parameter \d+ has shape"):
        Adam(net.parameters(), lr=1e-3).load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="parameters in 1 groups; this model has"):
        Adam(list(net.parameters())[:-1], lr=1e-3).load_state_dict(other.state_dict())


# a two-rank training on the CPU never imports torch._dynamo (torch's optimizers do at their first call):
# test_launch_np's --np 2 run
