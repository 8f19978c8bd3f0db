"""Making a rank's k envs (ppo1.envs.base.seeded_envs, which every family's VecEnv goes through): when the j-th
cannot be made, the j made before it are closed, and what the j-th raised goes on."""
import numpy as np
import pytest

from childenv import ChildEnv, engines
from ppo1 import PPO1Error
from ppo1.envs import AtariEnv, GymEnv, VecAtari, env_seed
from ppo1.envs.base import seeded_envs, seeded_vec
from ppo1.envs.vector import VecGym


def test_a_failure_making_the_jth_env_ends_the_engines_of_the_envs_made_before_it():
    tag = "making-envs-engines"
    made = []

    def make_one(seed_seq):
        if len(made) == 2:
            pids = sorted(env.gym_env.unwrapped.engine.pid for env in made)
            assert sorted(engines(tag)) == pids, "the first two envs' engines run"
            raise RuntimeError("the third engine cannot start")
        made.append(GymEnv("childenv", seed_seq, gym_env=ChildEnv(tag=tag)))
        return made[-1]
    with pytest.raises(RuntimeError, match="the third engine cannot start"):
        seeded_vec(VecGym, make_one, 4, seed=0, rank=0)
    assert len(made) == 2 and engines(tag) == [], "ChildEnv.close() killed both engines"


class CountedAtari(AtariEnv):
    """A real AtariEnv that counts its close() calls (ale-py frees its emulator when collected, not at close())."""

    closed = []

    def close(self):
        CountedAtari.closed.append(self)
        super().close()


def test_a_failure_making_the_jth_atari_game_closes_the_games_made_before_it():
    ids = iter(["PongNoFrameskip-v4", "BreakoutNoFrameskip-v4", "NotAnAtariGame-v4"])
    made = []

    def make_one(seed_seq):
        made.append(CountedAtari(next(ids), seed_seq))  # the third: make_ale_env refuses the id
        return made[-1]
    CountedAtari.closed.clear()
    with pytest.raises(PPO1Error, match="NotAnAtariGame-v4"):
        seeded_envs(make_one, 3, seed=0, rank=0)
    assert len(made) == 2 and CountedAtari.closed == made


def test_vec_atari_makes_its_games_through_seeded_envs_with_the_seeds_of_their_places():
    venv = VecAtari("PongNoFrameskip-v4", 2, seed=5, rank=1)
    try:
        assert venv.calls.started == {0: [], 1: []}, "seeded_envs records what each env started (ALE: nothing)"
        renewed = venv.maker.renew([3, 0], venv.obs)  # env 0 made anew with the seed of the 4th env of its place
        again = AtariEnv("PongNoFrameskip-v4", env_seed(5, 1, 0, 4))
        np.testing.assert_array_equal(renewed["image"][0], again.reset()["image"])
        assert venv.maker.made == [4, 1] and venv.calls.started == {0: [], 1: []}
    finally:
        venv.close()
