"""Action masking (an env's `action_mask` Dict entry or its `action_masks()` method, as sb3-contrib's MaskablePPO)
and Dict observations of any entries, from the env through training, the update's replay, play and movie. The
game is tests/maskenv.py: an invalid action ends it with a penalty, so a masked player plays every game to its
25-step limit."""
import csv
import math

import gymnasium
import numpy as np
import pytest
import torch

from conftest import run_cli
from ppo1 import PPO1Error
from ppo1.actions import choose, distribution, most_probable
from ppo1.envs import EnvDataError, EnvOptions, GymEnv, env_seed, make_vec_env
from ppo1.envs.pixels import Frames
from ppo1.envs.ref import resolve
from ppo1.observations import Obs
from ppo1.policies import build
from ppo1.rollout import make_collector
from ppo1.update_pass import UpdatePass
from tests.maskenv import MaskGame, make

GAME = "tests.maskenv:make"


def test_a_mask_leaves_invalid_actions_probability_zero_and_the_entropy_over_the_valid_ones():
    d = distribution(torch.tensor([[1.0, 3.0, 1.0]]), mask=torch.tensor([[True, False, True]]))
    assert d.probs.tolist() == [[0.5, 0.0, 0.5]]
    assert d.log_prob(torch.tensor([2])).item() == pytest.approx(math.log(0.5))
    assert d.entropy().item() == pytest.approx(math.log(2))  # over the two valid actions, not log 3
    assert most_probable(d).item() == 0, "the greedy action is valid though the invalid one has the largest logit"
    assert 1 not in choose(distribution(torch.zeros(500, 3), mask=torch.tensor([True, False, True]).expand(500, 3)),
                           False).tolist()
    # MultiDiscrete [2, 3]: the mask holds each dimension's choices one after another
    multi = distribution(torch.zeros(1, 5), nvec=(2, 3), mask=torch.tensor([[True, False, False, True, True]]))
    assert multi.entropy().item() == pytest.approx(math.log(2))  # 0 for the first dimension, log 2 for the second
    assert most_probable(multi).tolist() == [[0, 1]]
    assert multi.log_prob(torch.tensor([[0, 2]])).item() == pytest.approx(math.log(0.5))


def test_an_env_masks_by_its_dict_entry_or_its_method_and_the_mask_rides_in_the_observation():
    for mode in ("dict", "method"):
        env = GymEnv(GAME, env_seed(0, 0, 0), gym_env=make(mode))
        assert env.obs_spec.describe() == "vector (5,), action_mask (5,)"
        obs = env.reset()
        np.testing.assert_array_equal(obs["action_mask"], obs["vector"] > 0)  # the game shows its valid actions
        obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        np.testing.assert_array_equal(obs["action_mask"], obs["vector"] > 0)
    assert GymEnv(GAME, env_seed(0, 0, 0), gym_env=make("plain")).obs_spec.describe() == "vector (5,)"
    multi = GymEnv(GAME, env_seed(0, 0, 0), gym_env=make("dict", actions="multidiscrete"))
    assert multi.obs_spec.describe() == "vector (7,), action_mask (7,)"  # nvec (3, 4): 3 + 4 choices


class BadMask(gymnasium.Wrapper):
    """A masked game whose action_masks() gives `mask`."""

    def __init__(self, mask):
        super().__init__(MaskGame("plain"))
        self.mask_given = mask

    def action_masks(self):
        return self.mask_given


@pytest.mark.parametrize("mask,message", [
    ([True, False], r"gave an action mask \(action_masks\(\)\) of shape \(2,\) and dtype bool: ppo1 needs 5 values"),
    ([False] * 5, r"gave an action mask \(action_masks\(\)\) with no valid action$"),
])
def test_a_mask_of_another_size_or_without_a_valid_action_is_one_line(mask, message):
    env = GymEnv("masked", env_seed(0, 0, 0), gym_env=BadMask(np.array(mask)))
    with pytest.raises(EnvDataError, match=message):
        env.reset()


def test_masks_are_for_discrete_actions_and_a_box_action_env_with_one_is_refused_in_one_line():
    game = MaskGame("dict")
    game.action_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
    with pytest.raises(PPO1Error, match=r"has an 'action_mask' entry but actions Box\(.*\): ppo1 masks Discrete, "
                                        r"MultiDiscrete and MultiBinary actions"):
        GymEnv("boxed", env_seed(0, 0, 0), gym_env=game)


def test_a_dict_of_images_and_discrete_binary_and_box_entries_gives_an_entry_per_image_and_one_hot_vectors():
    from ppo1.envs.pixels import PixelEnv
    env = PixelEnv(resolve(GAME, '{"mode": "dicts"}'), env_seed(0, 0, 0), Frames(vectors=True))
    # images smaller than --frame_size 84 keep their size and channels: 4 RGB frames, 4 gray ones
    assert env.obs_spec.describe() == "left (12, 24, 24), right (4, 30, 30), vector (12,), action_mask (5,)"
    obs = env.reset()
    assert obs["vector"][:4].tolist() == [1, 0, 0, 0], "the Discrete count (0) as its one-hot"
    assert obs["vector"][4:7].tolist() == obs["action_mask"][:3].tolist(), "the MultiBinary flags as they are"
    policy = build("small", env.action_space, env.obs_spec)
    assert len(policy.more_torsos) == 1 and policy.pi.in_features == 256 + 256 + 12  # a CNN per image, the vector
    batch = Obs.stack([obs, env.step(int(np.flatnonzero(obs["action_mask"])[0]))[0]]).map(torch.from_numpy)
    dist, value, _ = policy.step(batch, None)
    assert value.shape == (2,) and (dist.probs[~batch["action_mask"]] == 0).all()
    centred = build("small", env.action_space, env.obs_spec, frame_norm="center", stacked=env.stacked)  # a mean per image
    assert centred.observe(batch.map(lambda x: x.numpy()))
    assert centred.frame_rms.mean().shape == (12, 24, 24) and centred.more_frame_rms[0].mean().shape == (4, 30, 30)
    assert centred.more_frame_rms[0].count.item() > 2  # the right image's two frames counted (and the prior's 0.01)
    env.close()


@pytest.mark.parametrize("rnn", ["none", "gru"])
def test_the_rollout_never_takes_an_invalid_multidiscrete_action_and_the_replay_gives_its_log_probs(rnn):
    torch.manual_seed(0)
    venv = make_vec_env(GAME, 2, seed=0, rank=0, options=EnvOptions('{"mode": "method", "actions": "multidiscrete"}'))
    policy = build("mlp", venv.action_space, venv.obs_spec, rnn=rnn, rnn_size=16)
    seg = make_collector(venv, policy, 64, venv.reset(), seq_len=8).collect()
    masks, actions = seg.obs["action_mask"], seg.actions  # (64, 2, 7), (64, 2, 2)
    assert masks[..., :3][np.arange(64)[:, None], np.arange(2), actions[..., 0]].all()
    assert masks[..., 3:][np.arange(64)[:, None], np.arange(2), actions[..., 1]].all()
    assert all(ep.length == 25 for ep in seg.episodes) and len(seg.episodes) >= 4  # no game ended by a bad action
    seg.advantages, seg.returns = np.zeros((64, 2), np.float32), np.zeros((64, 2), np.float32)
    batch = seg.batch(torch.device("cpu"), np.random.default_rng(0), standardize_adv=False)
    rollout_logp = batch.logp.clone()
    UpdatePass(policy).set_pi_old(batch, statistics_moved=True)  # the update's pass over the stored masks too
    torch.testing.assert_close(batch.logp, rollout_logp, rtol=0, atol=1e-5)
    venv.close()


def _lengths(run_dir) -> list[int]:
    """The lengths of every game of every rank's episodes file."""
    lengths = []
    for path in sorted(run_dir.glob("episodes.rank*.csv")):
        with open(path) as f:
            lengths += [int(row["length"]) for row in csv.DictReader(f)]
    return lengths


def test_a_masked_dict_game_trains_with_a_memory_and_plays_and_records_only_valid_actions(tmp_path):
    # one process of 4 envs: the mask does not depend on the ranks (a training under mpirun: test_cli, test_mlp)
    common = ["--env_name", GAME, "--env_kwargs", '{"mode": "dicts"}', "--checkpoint_dir", str(tmp_path),
              "--model_name", "masked"]
    r = run_cli([*common, "--env_steps", "1024", "--envs_per_rank", "4", "--timesteps_per_actorbatch", "128",
                 "--optim_batchsize", "64", "--rnn", "lstm", "--rnn_size", "32", "--num_threads", "1"])
    assert r.returncode == 0, r.stderr
    lengths = _lengths(tmp_path / "masked")
    assert len(lengths) >= 30 and set(lengths) == {25}, "with its mask no game ends early"
    saved = torch.load(tmp_path / "masked" / "latest.pt", weights_only=True)
    assert [e[0] for e in saved["obs_spec"]] == ["left", "right", "vector", "action_mask"]
    r = run_cli(["--mode", "play", "--episodes", "4", *common[4:]])
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("25 agent steps (cut by the env's time limit)") == 4, r.stdout
    r = run_cli(["--mode", "movie", "--max_frames", "60", *common[4:], "--asset_dir", str(tmp_path / "assets")])
    assert r.returncode == 0 and list((tmp_path / "assets").rglob("*.mp4")), r.stderr


def test_without_its_mask_the_same_game_ends_early_on_invalid_actions(tmp_path):
    r = run_cli(["--env_name", GAME, "--env_kwargs", '{"mode": "plain"}', "--env_steps", "256", "--envs_per_rank",
                 "2", "--timesteps_per_actorbatch", "128", "--checkpoint_dir", str(tmp_path), "--model_name", "plain"])
    assert r.returncode == 0, r.stderr
    lengths = _lengths(tmp_path / "plain")
    assert min(lengths) < 25 and np.mean(lengths) < 10, "an unmasked player soon takes an invalid action"
