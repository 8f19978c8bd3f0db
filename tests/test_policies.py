import gymnasium
import numpy as np
import pytest
import torch

from ppo1 import PPO1Error
from ppo1.policies import build


@pytest.mark.parametrize("model_type,hidden,convs", [("small", 256, 2), ("large", 512, 3)])
def test_policy_maps_uint8_frames_to_logits_and_values(model_type, hidden, convs):
    policy = build(model_type, 6)
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    logits, value = policy.heads(policy.features(obs))
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
    probs = torch.softmax(policy.heads(policy.features(torch.zeros(1, 4, 84, 84, dtype=torch.uint8)))[0], -1)
    assert torch.allclose(probs, torch.full_like(probs, 1 / 6), atol=0.01)


def test_frames_are_scaled_inside_the_model():
    policy = build("small", 3)
    obs = torch.full((1, 4, 84, 84), 255, dtype=torch.uint8)
    manual = policy.pi(policy.torso(torch.ones(1, 4, 84, 84)))
    torch.testing.assert_close(policy.heads(policy.features(obs))[0], manual)


def test_act_samples_valid_actions_and_greedy_takes_argmax():
    policy = build("small", 4)
    obs = torch.randint(0, 256, (64, 4, 84, 84), dtype=torch.uint8)
    a, logp, v, _ = policy.act(obs)
    assert a.min() >= 0 and a.max() < 4 and logp.shape == v.shape == (64,)
    g, _, _, _ = policy.act(obs, greedy=True)
    assert torch.equal(g, policy.heads(policy.features(obs))[0].argmax(-1))


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
    torch.testing.assert_close(policy.heads(policy.features(frames))[0], expected, atol=1e-5, rtol=1e-4)


def test_frame_norm_scale_keeps_the_checkpoint_keys_of_before_and_ignores_observe():
    scale, center = build("small", 3), build("small", 3, frame_norm="center")
    assert not any(k.startswith("frame_rms") for k in scale.state_dict())
    assert {"frame_rms.sum", "frame_rms.count"} <= set(center.state_dict())
    before = [p.clone() for p in scale.state_dict().values()]
    scale.observe(np.zeros((1, 1, 4, 84, 84), np.uint8))
    assert all(torch.equal(a, b) for a, b in zip(before, scale.state_dict().values()))


# IMPALA CNN parameters by hand (conv 3x3: 9 * c_in * c_out weights + c_out biases; each stage is one
# conv c_in -> c and two residual blocks of two convs c -> c; a max-pool 3x3 / 2, padding 1 halves the
# size rounding up, so 84 -> 42 -> 21 -> 11 and 64 -> 32 -> 16 -> 8):
#   stage 1 (-> 16): 9*C*16 + 16, plus 4 * (9*16*16 + 16) = 4 * 2320 = 9280
#                    C = 4: 576 + 16 + 9280 = 9872;  C = 3: 432 + 16 + 9280 = 9728
#   stage 2 (16 -> 32): 9*16*32 + 32 = 4640, plus 4 * (9*32*32 + 32) = 4 * 9248 = 36992: 41632
#   stage 3 (32 -> 32): 9248 + 36992 = 46240
#   fc 256: 84x84: 32*11*11 = 3872 inputs: 3872*256 + 256 = 991488; 64x64: 32*8*8 = 2048: 524544
#   heads: pi 256*A + A, value 256 + 1 = 257
#   84x84x4, A = 6:  9872 + 41632 + 46240 + 991488 + 1542 + 257 = 1091031
#   64x64x3, A = 15: 9728 + 41632 + 46240 + 524544 + 3855 + 257 = 626256
@pytest.mark.parametrize("obs_shape,actions,features,params", [
    ((4, 84, 84), 6, (32, 11, 11), 1_091_031), ((3, 64, 64), 15, (32, 8, 8), 626_256)])
def test_impala_cnn_has_the_hand_counted_shapes_and_parameters(obs_shape, actions, features, params):
    policy = build("impala", actions, obs_shape)
    obs = torch.randint(0, 256, (5, *obs_shape), dtype=torch.uint8)
    logits, value = policy.heads(policy.features(obs))
    assert logits.shape == (5, actions) and value.shape == (5,) and logits.dtype == torch.float32
    stages = policy.torso[:3]
    assert policy.torso(obs.float() / 255).shape == (5, 256)
    assert stages(obs.float()).shape == (5, *features)
    assert [s[0].out_channels for s in stages] == [16, 32, 32]
    assert sum(isinstance(m, torch.nn.Conv2d) for m in policy.modules()) == 15  # 3 x (1 + 2 x 2)
    assert sum(p.numel() for p in policy.parameters()) == params


def test_impala_residual_block_adds_its_input_back():
    from ppo1.torsos import ResidualBlock
    block = ResidualBlock(4)
    for conv in (block.conv0, block.conv1):
        torch.nn.init.zeros_(conv.weight)
        torch.nn.init.zeros_(conv.bias)
    x = torch.randn(2, 4, 5, 5)
    torch.testing.assert_close(block(x), x)  # zero convs: the skip alone
    torch.nn.init.constant_(block.conv1.bias, 1.0)
    torch.testing.assert_close(block(x), x + 1)


@pytest.mark.parametrize("init", ["normc", "orthogonal"])
def test_impala_takes_the_inits_of_the_other_cnns(init):
    torch.manual_seed(0)
    policy = build("impala", 6, (3, 64, 64), init=init)
    torch.testing.assert_close(policy.pi.weight.norm(dim=1), torch.full((6,), 0.01))
    assert all(torch.all(m.bias == 0) for m in policy.modules() if isinstance(m, torch.nn.Conv2d))
    probs = torch.softmax(policy.heads(policy.features(torch.zeros(1, 3, 64, 64, dtype=torch.uint8)))[0], -1)
    assert torch.allclose(probs, torch.full_like(probs, 1 / 6), atol=0.01)  # near-uniform when fresh


def test_the_procgen_presets_impala_cnn_starts_with_features_and_values_near_unit_scale():
    # The defect it pins: orthogonal init (gain sqrt 2 in every layer) compounds through IMPALA's six
    # residual blocks to features ~20x larger and a first value of ~3.7, and coinrun then learned nothing
    # in 2.5M steps; the preset's normc (Glorot-uniform convolutions, as the Procgen paper's TF network)
    # starts near unit scale and follows the paper's curve (docs/procgen.md).
    from ppo1.config import Config
    from ppo1.resolve import preset_values
    frames = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (64, 3, 64, 64), dtype=np.uint8))

    def scale(init: str) -> tuple[float, float]:
        """(std of the torso's features, mean |first value|) of a fresh IMPALA CNN under `init`."""
        torch.manual_seed(0)
        policy = build("impala", 15, (3, 64, 64), init=init)
        with torch.no_grad():
            features = policy.torso(policy.torso_input(frames))
            return features.std().item(), policy.vf(features).abs().mean().item()

    features_std, value = scale(preset_values({"env_name": "procgen:coinrun"}, defaults=Config)["init"])
    assert features_std < 1.0 and value < 1.0, (features_std, value)
    assert scale("orthogonal")[0] > 10 * features_std


def test_centred_frames_enter_the_torso_as_frame_minus_mean_over_255_channels_last():
    policy = build("small", 6, frame_norm="center")
    rng = np.random.default_rng(0)
    policy.observe(rng.integers(0, 256, (3, 2, 4, 84, 84), dtype=np.uint8))
    for obs in (torch.from_numpy(rng.integers(0, 256, (5, 4, 84, 84), dtype=np.uint8)),
                torch.from_numpy(rng.integers(0, 256, (5, 84, 84, 4), dtype=np.uint8)).permute(0, 3, 1, 2)):
        x = policy.torso_input(obs)  # from frames of either layout
        assert torch.equal(x, (obs.float() - policy.frame_rms.mean().float()) / 255.0)  # the same float32 values
        assert x.is_contiguous(memory_format=torch.channels_last) and x.dtype == torch.float32


def test_impala_centres_an_rgb_frame_per_pixel_and_channel_and_atari_stacks_on_the_newest_frame():
    rgb = build("impala", 4, (3, 64, 64), frame_norm="center", stacked=False)  # one RGB frame, as its env says
    assert rgb.frame_rms.sum.shape == (3, 64, 64)
    obs = np.zeros((2, 1, 3, 64, 64), np.uint8)  # (T, k, 3, 64, 64): one frame per observation
    obs[0, 0, 0], obs[1, 0, 0], obs[:, 0, 2] = 100, 200, 60
    rgb.observe(obs)
    mean = rgb.frame_rms.mean()
    assert mean[0, 5, 5].item() == pytest.approx(150, rel=1e-2) and mean[2, 0, 0].item() == pytest.approx(60, rel=1e-2)
    assert mean[1].abs().max().item() == 0
    frames = torch.randint(0, 256, (3, 3, 64, 64), dtype=torch.uint8)
    expected = rgb.pi(rgb.torso((frames.double() - mean).float() / 255))
    torch.testing.assert_close(rgb.heads(rgb.features(frames))[0], expected, atol=1e-5, rtol=1e-4)
    atari = build("impala", 4, (4, 84, 84), frame_norm="center")
    assert atari.frame_rms.sum.shape == (84, 84)  # as small and large: the mean of one frame


@pytest.mark.parametrize("model_type,shape,match", [
    ("impala", (8,), "needs image observations"), ("mlp", (4, 84, 84), "needs vector observations")])
def test_a_network_that_does_not_fit_the_observations_is_refused(model_type, shape, match):
    with pytest.raises(PPO1Error, match=match):
        build(model_type, 4, shape)


@pytest.mark.parametrize("model_type,shape,convolved", [
    ("small", (4, 16, 16), 32 * 16 * 16), ("large", (1, 35, 84), 32 * 35 * 84),  # below 20 / 36 px: the layout kept
    ("small", (4, 20, 20), 32 * 1 * 1), ("large", (1, 36, 36), 64 * 1 * 1)])     # from 20 / 36 px: their own CNNs
def test_an_image_smaller_than_small_or_large_take_gets_a_torso_that_keeps_its_layout(model_type, shape, convolved):
    policy = build(model_type, 4, shape)
    frames = torch.randint(0, 256, (2, *shape), dtype=torch.uint8)
    assert policy.torso[:-2](policy.torso_input(frames)).shape == (2, convolved)
    assert policy.heads(policy.features(frames))[0].shape == (2, 4)


def test_multidiscrete_and_multibinary_actions_get_one_categorical_per_dimension_from_one_head():
    torch.manual_seed(0)
    policy = build("small", gymnasium.spaces.MultiDiscrete([3, 2]))
    assert policy.pi.out_features == 5 and policy.nvec == (3, 2) and policy.action_shape == (2,)
    obs = torch.randint(0, 256, (8, 4, 84, 84), dtype=torch.uint8)
    a, logp, v, _ = policy.act(obs)
    assert a.shape == (8, 2) and a.dtype == torch.int64 and logp.shape == v.shape == (8,)
    assert a[:, 0].max() < 3 and a[:, 1].max() < 2 and a.min() >= 0
    logits = policy.heads(policy.features(obs))[0]
    first, second = torch.log_softmax(logits[:, :3], -1), torch.log_softmax(logits[:, 3:], -1)
    expected = first.gather(1, a[:, :1]).squeeze(1) + second.gather(1, a[:, 1:]).squeeze(1)
    torch.testing.assert_close(logp, expected)
    greedy, _, _, _ = policy.act(obs, greedy=True)
    assert torch.equal(greedy, torch.stack([logits[:, :3].argmax(-1), logits[:, 3:].argmax(-1)], -1))
    binary = build("impala", gymnasium.spaces.MultiBinary(12), (4, 64, 64))
    assert binary.pi.out_features == 24 and binary.nvec == (2,) * 12 and binary.action_shape == (12,)
    assert build("small", gymnasium.spaces.Discrete(6)).nvec is None


def test_the_frame_mean_of_centred_frames_is_one_frame_for_a_stack_and_per_channel_for_one_rgba_frame():
    # the env says whether its channels are a stack of frames; 4 channels alone (RGBA) are not one
    assert build("small", 6, (4, 84, 84), frame_norm="center", stacked=True).frame_rms.mean().shape == (84, 84)
    assert build("small", 6, (4, 84, 84), frame_norm="center", stacked=False).frame_rms.mean().shape == (4, 84, 84)
    assert build("small", 6, (4, 84, 84), frame_norm="center").frame_rms.mean().shape == (84, 84)  # as before


def test_the_torsos_frame_mean_follows_every_change_of_the_statistics():
    policy = build("small", 6, frame_norm="center")
    frames = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)

    def centred_as_computed_afresh():
        mean = policy.frame_rms.mean().float()
        return (frames.float() - mean) / 255.0

    policy.observe(frames.numpy())
    torch.testing.assert_close(policy.torso_input(frames), centred_as_computed_afresh(), rtol=0, atol=0)
    policy.observe((255 - frames).numpy())  # an update moves the mean: the torso sees it
    torch.testing.assert_close(policy.torso_input(frames), centred_as_computed_afresh(), rtol=0, atol=0)
    other = build("small", 6, frame_norm="center")
    policy.load_state_dict(other.state_dict())  # so does a loaded checkpoint's
    torch.testing.assert_close(policy.torso_input(frames), frames.float() / 255.0 - 0.0, rtol=0, atol=0)


def test_the_mlps_normalisation_follows_every_change_of_the_statistics():
    policy = build("mlp", gymnasium.spaces.Discrete(2), (3,))
    x = torch.randn(5, 3) * 4 + 1

    def normalised_as_computed_afresh():
        rms = policy.ob_rms
        mean = rms.sum / rms.count
        std = torch.sqrt(torch.clamp(rms.sumsq / rms.count - mean.square(), min=1e-2))
        return torch.clamp((x.double() - mean) / std, -5.0, 5.0).float()

    policy.observe(x.numpy())
    torch.testing.assert_close(policy.features(x), normalised_as_computed_afresh(), rtol=0, atol=0)
    policy.observe((x * 3).numpy())  # an update moves mean and std: the next forward sees them
    torch.testing.assert_close(policy.features(x), normalised_as_computed_afresh(), rtol=0, atol=0)
    policy.load_state_dict(build("mlp", gymnasium.spaces.Discrete(2), (3,)).state_dict())  # so does a checkpoint's
    torch.testing.assert_close(policy.features(x), normalised_as_computed_afresh(), rtol=0, atol=0)
