"""Observations of the vector family besides a 1-D Box: Discrete, MultiDiscrete, MultiBinary and Tuples or Dicts of
them reach the MLP as one float32 vector, a Discrete as its one-hot (ppo1.envs.spaces.to_vector)."""
import csv

import gymnasium
import numpy as np
import pytest
import torch

from conftest import TINY, run_cli
from ppo1 import PPO1Error
from ppo1.envs import EnvDataError, GymEnv, env_family, families, make_vec_env
from ppo1.envs.spaces import to_vector, vector_size
from ppo1.policies import build

spaces = gymnasium.spaces


@pytest.mark.parametrize("space,obs,expected", [
    (spaces.Discrete(4), 2, [0, 0, 1, 0]),
    (spaces.Discrete(3, start=-1), np.int64(-1), [1, 0, 0]),
    (spaces.MultiDiscrete([3, 2]), np.array([2, 0]), [0, 0, 1, 1, 0]),
    (spaces.MultiDiscrete([2, 3], start=[1, -1]), np.array([2, 1]), [0, 1, 0, 0, 1]),
    (spaces.MultiBinary(3), np.array([1, 0, 1], np.int8), [1, 0, 1]),
    (spaces.Tuple((spaces.Discrete(32), spaces.Discrete(11), spaces.Discrete(2))), (11, 10, 0),  # Blackjack's
     [*np.eye(32)[11], *np.eye(11)[10], 1, 0]),
    # a Dict's entries in gymnasium's order of its keys (sorted): "key" before "pos"
    (spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "key": spaces.Discrete(2)}),
     {"pos": np.array([0.5, -0.25], np.float32), "key": 1}, [0, 1, 0.5, -0.25]),
    (spaces.Tuple((spaces.Dict({"a": spaces.MultiBinary(2)}), spaces.Discrete(2))), ({"a": np.array([0, 1])}, 0),
     [0, 1, 1, 0]),
])
def test_an_observation_becomes_one_float32_vector_with_a_one_hot_for_each_discrete_value(space, obs, expected):
    vector = to_vector("e", space, obs)
    assert vector.dtype == np.float32 and vector_size(space) == len(expected)
    np.testing.assert_array_equal(vector, np.array(expected, np.float32))


def test_the_vector_holds_what_gymnasiums_flatten_gives_for_any_sample_of_a_nested_space():
    space = spaces.Dict({"cards": spaces.Tuple((spaces.Discrete(5, start=2), spaces.MultiDiscrete([[2, 3], [4, 1]]))),
                         "held": spaces.MultiBinary(4), "hp": spaces.Box(0, 9, (3,), np.float32)}, seed=0)
    for _ in range(50):
        sample = space.sample()
        np.testing.assert_array_equal(to_vector("e", space, sample), spaces.flatten(space, sample).astype(np.float32))
    assert vector_size(space) == spaces.flatdim(space) == 5 + (2 + 3 + 4 + 1) + 4 + 3


@pytest.mark.parametrize("space,obs,message", [
    (spaces.Discrete(16), 16, "e gave an observation 16, outside its space Discrete(16)"),
    (spaces.Discrete(16), 1.0, "e gave an observation 1.0, not an integer of its space Discrete(16)"),
    (spaces.MultiDiscrete([3, 2]), np.array([1, 2]), "e gave an observation array([1, 2]), outside its space"),
    (spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))), (1, -1),
     "e gave entry [1] of an observation -1, outside its space Discrete(3)"),
    (spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))), (1, 2, 0),
     "e gave an observation of 3 entries, its space Tuple(Discrete(2), Discrete(3)) has 2"),
    (spaces.Dict({"a": spaces.Discrete(2)}), {"b": 0}, "e gave an observation {'b': 0}, which lacks entries of its"),
    (spaces.Dict({"a": spaces.Box(0, 1, (2,))}), {"a": np.array([0.0, np.nan])},
     "e gave entry ['a'] of an observation holding NaN"),
])
def test_an_observation_that_does_not_fit_its_space_is_an_env_data_error_naming_the_entry(space, obs, message):
    with pytest.raises(EnvDataError) as raised:
        to_vector("e", space, obs)
    assert str(raised.value).startswith(message), raised.value


@pytest.mark.parametrize("space", [
    spaces.Text(5), spaces.Box(0, 1, (2, 3), np.float32), spaces.Tuple(()),
    spaces.Tuple((spaces.Discrete(2), spaces.Box(0, 255, (8, 8, 3), np.uint8))),  # an image in a Tuple
    spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Graph(spaces.Discrete(2), None)}),
])
def test_any_other_space_is_one_line_naming_it_and_what_ppo1_trains(space):
    with pytest.raises(PPO1Error) as raised:
        families.by_observations(space, "e")
    assert str(raised.value) == (
        f"--env_name='e' has observations {space}: ppo1 trains image observations (a Box of uint8, (H, W) or (H, W, "
        "C), or a Dict holding one) and vector observations (a 1-D Box, Discrete, MultiDiscrete, MultiBinary, or a "
        "Tuple or Dict of those)")
    assert "\n" not in str(raised.value)


def test_frozen_lake_gives_the_one_hot_of_its_cell_and_taxi_of_its_state_to_an_mlp_of_that_many_inputs():
    for env_id, n in (("FrozenLake-v1", 16), ("Taxi-v4", 500)):
        assert env_family(env_id).name == "vector"
        venv = make_vec_env(env_id, 2, seed=0, rank=0)
        try:
            obs = venv.reset()
            for _ in range(5):
                states = [env.gym_env.unwrapped.s for env in venv.maker.envs]
                np.testing.assert_array_equal(obs["vector"], np.eye(n, dtype=np.float32)[states])
                obs = venv.step(np.array([1, 2])).obs
            policy = build("mlp", venv.action_space, venv.obs_spec)
            actions, *_ = policy.act(obs.map(torch.from_numpy))
            assert policy.pi[0].in_features == n and actions.shape == (2,)
        finally:
            venv.close()


def test_a_gym_env_refuses_observations_it_cannot_make_a_vector_of_in_one_line():
    env = gymnasium.make("CartPole-v1")
    env.observation_space = spaces.Sequence(spaces.Discrete(2))
    with pytest.raises(PPO1Error, match=r"^--env_name='CartPole-v1' has Sequence\(Discrete\(2\), stack=False\) "
                                        r"observations, not vectors \(a 1-D Box, Discrete, .*\)$"):
        GymEnv("CartPole-v1", np.random.SeedSequence(0), gym_env=env)


def test_blackjack_trains_on_the_one_hots_of_its_cards_and_plays_its_real_scores(tmp_path):
    common = ["--checkpoint_dir", str(tmp_path), "--model_name", "bj"]
    r = run_cli([*TINY, "--env_steps", "1024", "--env_name", "Blackjack-v1", *common, "--envs_per_rank", "4"])
    assert r.returncode == 0, r.stderr  # one process: the spaces do not depend on the ranks
    assert "1 ranks x 4 envs = 4 actors" in r.stdout and "ppo1: done: 1024 steps in 2 iterations" in r.stdout
    state = torch.load(tmp_path / "bj" / "latest.pt", weights_only=True)
    assert state["obs_spec"] == [["vector", "vector", [32 + 11 + 2]]] and state["model"]["pi.0.weight"].shape == (64, 45)
    # every observation is one 1 in each of its three one-hots: each block sums to the count
    seen, total = state["model"]["ob_rms.sum"], round(float(state["model"]["ob_rms.count"]))  # (+ its epsilon 1e-2)
    assert total >= 1024 and [float(seen[a:b].sum()) for a, b in ((0, 32), (32, 43), (43, 45))] == [total] * 3
    for rank in (0,):
        with open(tmp_path / "bj" / f"episodes.rank{rank}.csv") as f:
            returns = {float(row["return"]) for row in csv.DictReader(f)}
        assert returns and returns <= {-1.0, 0.0, 1.0}, "Blackjack's own scores: lose, draw, win"
    r = run_cli(["--mode", "play", "--episodes", "3", "--greedy", *common])
    assert r.returncode == 0, r.stderr
    games = [line for line in r.stdout.splitlines() if line.startswith("game ")]
    assert len(games) == 3 and all(line.split("score ")[1].split(",")[0] in ("-1", "0", "1") for line in games)
