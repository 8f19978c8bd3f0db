import numpy as np
import pytest
import torch

from ppo1 import PPO1Error
from ppo1.policies import build


@pytest.mark.parametrize("model_type,hidden,convs", [("small", 256, 2), ("large", 512, 3)])
def test_policy_maps_uint8_frames_to_logits_and_values(model_type, hidden, convs):
    policy = build(model_type, 6)
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    logits, value = policy(obs)
    assert logits.shape == (5, 6) and value.shape == (5,)
    assert logits.dtype == torch.float32
    assert sum(isinstance(m, torch.nn.Conv2d) for m in policy.modules()) == convs
    assert policy.torso[-2].out_features == hidden


def test_normc_init_gives_unit_rows_and_a_small_policy_head():
    policy = build("small", 6)
    torch.testing.assert_close(policy.pi.weight.norm(dim=1), torch.full((6,), 0.01))
    torch.testing.assert_close(policy.vf.weight.norm(dim=1), torch.ones(1))
    assert torch.all(policy.pi.bias == 0)
    # a fresh policy is near-uniform
    probs = torch.softmax(policy(torch.zeros(1, 4, 84, 84, dtype=torch.uint8))[0], -1)
    assert torch.allclose(probs, torch.full_like(probs, 1 / 6), atol=0.01)


def test_frames_are_scaled_inside_the_model():
    policy = build("small", 3)
    obs = torch.full((1, 4, 84, 84), 255, dtype=torch.uint8)
    manual = policy.pi(policy.torso(torch.ones(1, 4, 84, 84)))
    torch.testing.assert_close(policy(obs)[0], manual)


def test_act_samples_valid_actions_and_greedy_takes_argmax():
    policy = build("small", 4)
    obs = torch.randint(0, 256, (64, 4, 84, 84), dtype=torch.uint8)
    a, logp, v = policy.act(obs)
    assert a.min() >= 0 and a.max() < 4 and logp.shape == v.shape == (64,)
    g, _, _ = policy.act(obs, greedy=True)
    assert torch.equal(g, policy(obs)[0].argmax(-1))


def test_unknown_model_type_is_refused():
    with pytest.raises(PPO1Error, match="model_type='huge'"):
        build("huge", 4)


def test_orthogonal_init_gives_orthogonal_rows_and_larger_features_than_normc():
    torch.manual_seed(0)
    orth, normc = build("small", 6, init="orthogonal"), build("small", 6, init="normc")
    w = orth.pi.weight  # (6, 256): orthogonal rows of norm 0.01
    torch.testing.assert_close(w @ w.T, torch.eye(6) * 1e-4, atol=1e-7, rtol=0)
    assert torch.all(orth.torso[0].bias == 0)
    frames = torch.randint(0, 256, (16, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        f_orth = orth.torso(frames.float() / 255).mean()
        f_normc = normc.torso(frames.float() / 255).mean()
    assert f_orth > 2 * f_normc  # the lead of issue 9: normc + Glorot give ~5x smaller torso features


def test_frame_norm_center_subtracts_the_running_mean_of_each_observations_newest_frame():
    policy = build("small", 3, frame_norm="center")
    obs = np.full((2, 1, 4, 84, 84), 7, dtype=np.uint8)  # (T, k, 4, 84, 84) as a rollout stores them
    obs[0, 0, -1], obs[1, 0, -1] = 100, 200               # newest frames; the older three (7) do not count
    obs[1, 0, -1, 0, 0] = 0                                # one pixel: mean (100 + 0) / 2
    policy.observe(obs)
    mean = policy.frame_rms.mean()  # sum / count, count = 2 frames (+ 0.01 so it starts defined)
    assert mean[0, 0].item() == pytest.approx(50, rel=1e-2) and mean[5, 5].item() == pytest.approx(150, rel=1e-2)
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    expected = policy.pi(policy.torso((frames.double() - mean).float() / 255))
    torch.testing.assert_close(policy(frames)[0], expected, atol=1e-5, rtol=1e-4)


def test_frame_norm_scale_keeps_the_checkpoint_keys_of_before_and_ignores_observe():
    scale, center = build("small", 3), build("small", 3, frame_norm="center")
    assert not any(k.startswith("frame_rms") for k in scale.state_dict())
    assert {"frame_rms.sum", "frame_rms.count"} <= set(center.state_dict())
    before = [p.clone() for p in scale.state_dict().values()]
    scale.observe(np.zeros((1, 1, 4, 84, 84), np.uint8))
    assert all(torch.equal(a, b) for a, b in zip(before, scale.state_dict().values()))
