"""The DeepMind preprocessing on real ALE games."""
import numpy as np
import pytest

from ppo1 import PPO1Error
from ppo1.advantages import shape_rewards
from ppo1.envs import AtariEnv, VecAtari, env_seed, make_ale_env


def play(env, steps, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        out.append(env.step(int(rng.integers(env.num_actions))))
    return out


def test_observation_is_a_stack_of_four_84x84_uint8_frames():
    env = AtariEnv("PongNoFrameskip-v4", env_seed(0, 0, 0))
    obs = env.reset()["image"]
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    assert all(np.array_equal(obs[0], obs[i]) for i in range(4)), "reset repeats the first frame"
    obs2, reward, done, ep = env.step(0)
    assert obs2["image"].shape == (4, 84, 84) and obs2["image"].dtype == np.uint8 and isinstance(reward, float)


def test_frame_stack_is_oldest_first_newest_last():
    env = AtariEnv("BreakoutNoFrameskip-v4", env_seed(0, 0, 0))
    env.reset()
    frames = []
    for a in [2, 2, 3, 3, 2, 2, 3]:
        obs, _, done, _ = env.step(a)
        assert not done
        frames.append(obs["image"][-1].copy())
    np.testing.assert_array_equal(obs["image"], np.stack(frames[-4:]))
    assert not np.array_equal(frames[-1], frames[-4]), "the paddle moved: frames differ"


def test_frame_is_max_of_last_two_screens_resized():
    import cv2
    env = AtariEnv("PongNoFrameskip-v4", env_seed(1, 0, 0))
    env.reset()
    for _ in range(60):
        obs, *_ = env.step(2)
    expected = cv2.resize(np.maximum(env._raw[0], env._raw[1]), (84, 84), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(obs["image"][-1], expected)
    assert obs["image"][-1].max() > 0


def test_atari_steps_give_the_games_own_rewards_whose_sum_is_the_episode_score():
    env = AtariEnv("SpaceInvadersNoFrameskip-v4", env_seed(0, 0, 0), episode_life=False)
    env.reset()
    rewards, episode = [], None
    rng = np.random.default_rng(0)
    while episode is None:
        _, r, _, episode = env.step(int(rng.integers(env.num_actions)))
        rewards.append(r)
    assert set(rewards) - {0.0} and set(rewards) <= {0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 200.0}
    # Space Invaders pays 5..30 points per alien (the reset's no-ops score nothing)
    assert episode.ret == sum(rewards)
    clipped = shape_rewards(np.array(rewards, np.float32), sign=True, scale=1.0)  # the trainer's --clip_reward
    assert set(clipped.tolist()) <= {0.0, 1.0} and episode.ret >= 5 * clipped.sum()


def test_life_loss_ends_a_training_episode_but_not_the_game():
    env = AtariEnv("BreakoutNoFrameskip-v4", env_seed(0, 0, 0), episode_life=True)
    env.reset()
    dones, games = 0, []
    rng = np.random.default_rng(0)
    while not games:
        _, _, done, ep = env.step(int(rng.integers(env.num_actions)))
        dones += done
        if ep:
            games.append(ep)
    assert dones == 5, "4 lost lives + the game over, each ends the agent's episode"
    assert games[0].length > 0


def test_after_a_lost_life_the_frame_stack_starts_afresh_from_one_frame():
    # baselines ppo2 / CleanRL: a lost life is an episode boundary in training, and the next agent episode's
    # stack holds only its own first frame (repeated), never the previous life's frames.
    env = AtariEnv("BreakoutNoFrameskip-v4", env_seed(0, 0, 0), episode_life=True)
    env.reset()
    rng = np.random.default_rng(0)
    starts = 0
    while starts < 3:
        obs, _, done, ep = env.step(int(rng.integers(env.num_actions)))
        if done and ep is None:  # a lost life, not the game's end
            assert all(np.array_equal(obs["image"][0], obs["image"][i]) for i in range(1, 4)), \
                "the previous life's frames remain"
            starts += 1


def test_evaluation_env_ends_episodes_only_at_game_over():
    env = AtariEnv("BreakoutNoFrameskip-v4", env_seed(0, 0, 0), episode_life=False)
    env.reset()
    rng = np.random.default_rng(0)
    dones, lengths = 0, []
    for _ in range(20000):
        _, _, done, ep = env.step(int(rng.integers(env.num_actions)))
        dones += done
        if ep:
            lengths.append(ep.length)
            break
    assert dones == 1 and lengths


def test_same_seed_same_game_and_distinct_seeds_differ():
    def trace(seed_seq):
        env = AtariEnv("PongNoFrameskip-v4", seed_seq)
        env.reset()
        return np.stack([o["image"].copy() for o, *_ in play(env, 200)])
    a = trace(env_seed(3, 0, 0))
    b = trace(env_seed(3, 0, 0))
    c = trace(env_seed(3, 1, 0))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_vec_env_steps_k_games_with_distinct_seeds():
    venv = VecAtari("PongNoFrameskip-v4", 3, seed=0, rank=0)
    obs = venv.reset()
    assert obs["image"].shape == (3, 4, 84, 84)
    for _ in range(50):
        done = venv.step(np.array([2, 3, 2]))
    assert done.rewards.shape == (3,) and done.dones.dtype == bool
    obs = done.obs["image"]
    assert not np.array_equal(obs[0], obs[2]) or not np.array_equal(obs[1], obs[2])


def test_v5_ids_are_accepted_with_sticky_actions():
    for env_id in ("ALE/Pong-v5", "ale_py:ALE/Pong-v5"):  # also in gymnasium's module:EnvId form
        env = make_ale_env(env_id)
        assert env._frameskip == 1 and env.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)


def test_a_game_is_seeded_before_its_one_rom_load_and_sticky_actions_follow_the_seed(monkeypatch):
    from ppo1.envs.atari import _seeded_atari_class
    cls = _seeded_atari_class()
    loads = []
    real_load = cls.load_game

    def load_game(self):
        loads.append(int(self.ale.getInt("random_seed")))
        real_load(self)
    monkeypatch.setattr(cls, "load_game", load_game)

    def trace(seed):  # sticky actions (v5): what the emulator does depends on its own RNG
        env = make_ale_env("ALE/Pong-v5", seed=seed)
        env.reset()
        return np.stack([env.step(a % 6)[0] for a in range(300)])
    a, b, c = trace(5), trace(5), trace(6)
    assert len(loads) == 3  # one ROM load per game made
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("env_id,match", [("NoSuchGameNoFrameskip-v4", "not a known environment"),
                                          ("CartPole-v1", "not an Atari game")])
def test_bad_env_id_is_a_clear_error(env_id, match):
    with pytest.raises(PPO1Error, match=match):
        make_ale_env(env_id)


def test_first_observation_after_a_fire_reset_is_the_max_of_the_last_two_screens():
    """baselines' FireReset returns the obs of MaxAndSkip's step: the max of its last two screens."""
    import cv2
    env = AtariEnv("BreakoutNoFrameskip-v4", env_seed(0, 0, 0))
    obs = env.reset()["image"]
    assert env.has_fire
    last = np.zeros_like(env._raw[0])
    env.ale.getScreenGrayscale(last)
    np.testing.assert_array_equal(env._raw[1], last)
    assert (env._raw[0] != last).sum() > 0, "the two screens differ here (the ball moved)"
    expected = cv2.resize(np.maximum(env._raw[0], last), (84, 84), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(obs[-1], expected)
    assert not np.array_equal(obs[-1], cv2.resize(last, (84, 84), interpolation=cv2.INTER_AREA))


def test_v5_agent_step_is_4_frames_with_the_minimal_action_set_and_whole_games():
    """ALE/<Game>-v5 skips 4 frames itself; ppo1 asks it for frameskip 1 and skips 4 once: one agent step
    is 4 emulator frames, not 16. The action set is v4's minimal one; play's episodes are whole games."""
    v4, v5 = (AtariEnv(i, env_seed(0, 0, 0), episode_life=False) for i in ("BreakoutNoFrameskip-v4", "ALE/Breakout-v5"))
    assert v5.action_set == v4.action_set and v5.num_actions == 4
    v5.reset()
    before = v5.ale.getEpisodeFrameNumber()
    v5.step(0)
    assert v5.ale.getEpisodeFrameNumber() - before == 4
    seen, episode, steps = {v5.ale.lives()}, None, 0
    while episode is None:
        _obs, _r, done, episode = v5.step(int(np.random.default_rng(steps).integers(4)))
        assert done == (episode is not None), "no episode end at a lost life when playing"
        seen.add(v5.ale.lives())
        steps += 1
    assert {5, 4, 3, 2, 1} <= seen, "the game went on through every life"
    assert episode.length == steps + 1
