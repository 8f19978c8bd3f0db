"""Vector-observation envs and baselines' MLP policies (categorical and diagonal Gaussian)."""
import csv
import json

import gymnasium
import numpy as np
import pytest
import torch

from conftest import passed_on_both_ranks, run_cli
from ppo1 import PPO1Error
from ppo1.envs import EnvOptions, VecGym, make_vec_env
from ppo1.policies import MlpPolicy, RunningMeanStd, build


def test_vec_gym_gives_float32_vectors_and_real_episode_statistics():
    venv = make_vec_env("CartPole-v1", 2, seed=0, rank=0)
    assert isinstance(venv, VecGym)
    obs = venv.reset()
    assert list(obs) == ["vector"] and obs["vector"].shape == (2, 4) and obs["vector"].dtype == np.float32
    episodes, steps = [], 0
    while len(episodes) < 3:
        done = venv.step(np.array([0, 1]))
        rew = done.rewards
        steps += 1
        episodes += done.episodes
        assert rew.dtype == np.float32 and set(rew) == {1.0}
    assert all(e.ret == e.length for e in episodes), "CartPole pays 1 per step"


def test_box_actions_are_clipped_to_the_bounds_before_the_env_sees_them():
    # MountainCarContinuous charges 0.1 x action^2 of the action it is given (its physics clip the force, its
    # reward does not): 0.1 x 100^2 = 1000 unclipped, 0.1 x 1^2 = 0.1 clipped to the bound 1
    venv = make_vec_env("MountainCarContinuous-v0", 1, seed=0, rank=0)
    venv.reset()
    rew = venv.step(np.array([[100.0]], np.float32)).rewards
    assert rew[0] == pytest.approx(-0.1)
    rew = venv.step(np.array([[-0.5]], np.float32)).rewards
    assert rew[0] == pytest.approx(-0.025)  # inside the bounds: as given


def test_discrete_mlp_policy_is_two_separate_tanh_networks_with_normc_heads():
    policy = build("mlp", gymnasium.spaces.Discrete(3), (4,))
    assert isinstance(policy, MlpPolicy) and not policy.continuous
    assert sum(isinstance(m, torch.nn.Tanh) for m in policy.pi) == 2
    assert sum(isinstance(m, torch.nn.Tanh) for m in policy.vf) == 2
    torch.testing.assert_close(policy.pi[-1].weight.norm(dim=1), torch.full((3,), 0.01))
    a, logp, v, _ = policy.act(torch.zeros(5, 4))
    assert a.shape == (5,) and a.dtype == torch.int64 and logp.shape == v.shape == (5,)


def test_multidiscrete_mlp_policy_has_one_head_of_sum_nvec_logits_and_integer_vector_actions():
    policy = build("mlp", gymnasium.spaces.MultiBinary(3), (4,))
    assert not policy.continuous and policy.nvec == (2, 2, 2) and policy.pi[-1].out_features == 6
    torch.testing.assert_close(policy.pi[-1].weight.norm(dim=1), torch.full((6,), 0.01))
    a, logp, v, _ = policy.act(torch.zeros(5, 4))
    assert a.shape == (5, 3) and a.dtype == torch.int64 and logp.shape == v.shape == (5,)
    assert policy.action_shape == (3,) and policy.action_dtype == np.int64


def test_a_vector_env_gives_multibinary_actions_to_its_env_and_refuses_a_tuple_in_one_line():
    class Pressed(gymnasium.ActionWrapper):  # CartPole driven by MultiBinary(2): push right when button 1 is down
        def __init__(self, env):
            super().__init__(env)
            self.action_space, self.seen = gymnasium.spaces.MultiBinary(2), []

        def action(self, action):
            self.seen.append(action)
            return int(action[1])

    from ppo1.envs import GymEnv
    wrapped = Pressed(gymnasium.make("CartPole-v1"))
    env = GymEnv("CartPole-v1", np.random.SeedSequence(0), gym_env=wrapped)
    env.reset()
    env.step(np.array([0, 1]))
    assert env.num_actions == 4 and wrapped.seen[0].dtype == np.int8 and wrapped.seen[0].tolist() == [0, 1]
    tupled = gymnasium.make("CartPole-v1")
    tupled.action_space = gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(2), gymnasium.spaces.Discrete(2)))
    with pytest.raises(PPO1Error, match=r"^--env_name='CartPole-v1' has actions Tuple\(Discrete\(2\), Discrete\(2\)\): "
                                        "ppo1 trains vector observations with Discrete, MultiDiscrete"):
        GymEnv("CartPole-v1", np.random.SeedSequence(0), gym_env=tupled)


def test_gaussian_policy_has_state_independent_log_std_and_sums_log_probs():
    space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
    policy = build("mlp", space, (3,))
    assert policy.continuous and torch.equal(policy.logstd.data, torch.zeros(2))
    obs = torch.randn(4, 3)
    a, logp, _, _ = policy.act(obs)
    assert a.shape == (4, 2) and a.dtype == torch.float32
    dist, _, _ = policy.step(obs, None)
    mean = dist.base_dist.mean
    expected = torch.distributions.Normal(mean, torch.ones_like(mean)).log_prob(a).sum(-1)
    torch.testing.assert_close(logp, expected)
    greedy, _, _, _ = policy.act(obs, greedy=True)
    torch.testing.assert_close(greedy, mean)


def test_running_mean_std_normalizes_and_clips():
    rms = RunningMeanStd((2,))
    x = np.random.default_rng(0).normal([10.0, -5.0], [2.0, 0.5], size=(10000, 2))
    rms.update(x)
    z = rms.normalize(torch.from_numpy(x).float())
    assert torch.allclose(z.mean(0), torch.zeros(2), atol=0.02)
    assert torch.allclose(z.std(0), torch.ones(2), atol=0.02)
    assert rms.normalize(torch.tensor([[1e6, -1e6]])).tolist() == [[5.0, -5.0]]


def test_observation_statistics_are_identical_on_two_ranks_and_equal_the_union(mpi_checks):
    assert passed_on_both_ranks(mpi_checks, "obs_stats"), mpi_checks  # tests/mpi/obs_stats.py


def test_mlp_on_image_observations_and_cnn_on_vectors_are_refused():
    with pytest.raises(PPO1Error, match="mlp needs vector observations"):
        build("mlp", 6, (4, 84, 84))
    with pytest.raises(PPO1Error, match="small needs image observations"):
        build("small", gymnasium.spaces.Discrete(2), (4,))


def test_mlp_on_an_atari_game_names_its_images_not_a_frame_flag_its_preset_set():
    from ppo1.config import Config
    for preset in ("paper", "fast"):  # fast sets --frame_norm center, which mlp does not take
        with pytest.raises(PPO1Error, match="^--model_type=mlp is for vector observations, not the images of "
                                            "PongNoFrameskip-v4 \\(Atari games\\): use small, large or impala$"):
            Config.for_preset(preset, env_name="PongNoFrameskip-v4", model_type="mlp")


def test_vector_env_gets_baselines_mujoco_defaults_and_saves_obs_statistics(cartpole_run):
    ck, _ = cartpole_run
    config = json.loads((ck / "cp" / "config.json").read_text())
    assert (config["model_type"], config["optim_epochs"], config["optim_stepsize"], config["optim_batchsize"],
            config["epsilon"], config["ent_coef"]) == ("mlp", 10, 3e-4, 64, 0.2, 0.0)
    state = torch.load(ck / "cp" / "latest.pt", weights_only=True)
    assert state["model"]["ob_rms.count"] > 500


def test_cartpole_learns_from_its_first_games_to_over_80_within_8k_steps_on_two_ranks(cartpole_run):
    """This run's first 50 games averaged about 21, its last 50 about 105 (seeds 0, 2, 3: 22/115, 20/100, 21/117;
    with the default batches of 2048 steps a rank, 16k steps gave 12/119)."""
    ck, _ = cartpole_run
    episodes = []
    for rank in (0, 1):
        with open(ck / "cp" / f"episodes.rank{rank}.csv") as f:
            episodes += [(int(row["timesteps"]), float(row["return"])) for row in csv.DictReader(f)]
    assert max(t for t, _ in episodes) <= 8192
    first50, last50 = [ret for _, ret in sorted(episodes)[:50]], [ret for _, ret in sorted(episodes)[-50:]]
    assert np.mean(first50) < 40 and np.mean(last50) >= 80, (first50, last50)


def test_play_reports_vector_env_episodes_with_the_checkpoints_mlp(cartpole_run):
    ck, _ = cartpole_run
    r = run_cli(["--mode", "play", "--episodes", "3", "--checkpoint_dir", str(ck), "--model_name", "cp"])
    assert r.returncode == 0, r.stderr
    games = [line for line in r.stdout.splitlines() if line.startswith("game ")]
    assert len(games) == 3
    for line in games:   # CartPole pays 1 per step: score == length
        score, steps = line.split("score ")[1].split(", ")
        assert int(score) == int(steps.split()[0]) > 0
    assert "ppo1: 3 games: score" in r.stdout


def test_movie_of_a_vector_env_records_its_rendered_frames(cartpole_run, tmp_path):
    ck, _ = cartpole_run
    from moviepy import VideoFileClip
    r = run_cli(["--mode", "movie", "--checkpoint_dir", str(ck), "--model_name", "cp",
                 "--asset_dir", str(tmp_path)])
    assert r.returncode == 0, r.stderr
    [mp4] = list((tmp_path / "cp").glob("CartPole-v1_iter*_score*.mp4"))
    score = int(mp4.stem.split("score")[1])
    clip = VideoFileClip(str(mp4))
    frames = list(clip.iter_frames())
    clip.close()
    assert frames[0].shape == (400, 600, 3)
    assert clip.fps == 50 and abs(len(frames) - score) <= 1   # one frame per step (the last one skipped)


def test_a_time_limit_cut_is_reported_with_the_last_observation_and_a_termination_is_not():
    venv = make_vec_env("Pendulum-v1", 2, seed=0, rank=0)  # 200 steps, then truncated; it never terminates
    venv.reset()
    for step in range(200):
        done = venv.step(np.zeros((2, 1), np.float32))
        assert bool(done.cut) == (step == 199) and done.dones.all() == (step == 199)
    assert sorted(done.cut) == [0, 1] and all(e.truncated for e in done.episodes)
    assert all(not np.array_equal(done.cut[i]["vector"], done.obs["vector"][i]) for i in (0, 1)), \
        "obs is already the next episode's"
    cart = make_vec_env("CartPole-v1", 1, seed=0, rank=0)
    cart.reset()
    done = False
    while not done:  # falls over long before its 500-step limit
        stepped = cart.step(np.array([0]))
        done = stepped.dones[0]
        assert not stepped.cut


def test_max_episode_steps_cuts_episodes_as_a_time_limit_with_their_last_observation():
    venv = make_vec_env("CartPole-v1", 1, seed=0, rank=0, options=EnvOptions(max_episode_steps=5))
    venv.reset()
    for step in range(10):  # pushed left, the pole falls after about 9 steps: the limit comes first
        done = venv.step(np.array([0]))
        assert bool(done.dones[0]) == (step % 5 == 4) and bool(done.cut) == (step % 5 == 4)
        assert [e.length for e in done.episodes] == ([5] if step % 5 == 4 else [])
        assert all(e.truncated for e in done.episodes)


def test_a_run_with_a_step_limit_and_scaled_rewards_trains_and_plays_episodes_cut_there(tmp_path):
    r = run_cli(["--env_name", "CartPole-v1", "--timesteps_per_actorbatch", "256", "--env_steps", "512",
                 "--max_episode_steps", "8", "--reward_scale", "0.001", "--clip_reward", "none",
                 "--checkpoint_dir", str(tmp_path), "--model_name", "cp"])
    assert r.returncode == 0, r.stderr
    config = json.loads((tmp_path / "cp" / "config.json").read_text())
    assert (config["gym"]["max_episode_steps"], config["reward_scale"], config["clip_reward"]) == (8, 0.001, "none")
    with open(tmp_path / "cp" / "episodes.rank0.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and max(int(row["length"]) for row in rows) == 8 and {float(row["return"]) for row in rows} <= set(
        range(1, 9)), "the episode scores are the env's own (1 per step), not the scaled rewards"
    with open(tmp_path / "cp" / "progress.csv") as f:
        # value targets of 1e-3 per step (at most 8e-3) instead of 1 per step (up to 8: a value loss of about 18)
        assert max(float(row["vf_loss"]) for row in csv.DictReader(f)) < 1
    r = run_cli(["--mode", "play", "--episodes", "2", "--checkpoint_dir", str(tmp_path), "--model_name", "cp"])
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stdout.splitlines() if line.startswith("game ")] and all(
        int(line.split("score ")[1].split(",")[0]) <= 8 for line in r.stdout.splitlines() if line.startswith("game "))
