"""--mode play end to end: real checkpoints of tiny training runs, real whole games, real mpirun."""
import re
import shutil
import socket

import numpy as np
import pytest
import torch

from conftest import TINY, run_cli
from ppo1 import PPO1Error
from ppo1.cli import _apply_mode_flags, build_parser
from ppo1.config import Config
from ppo1.distributed import Comm
from ppo1.envs import AtariEnv
from ppo1.evaluate import choose_action, generator_for, load_trained

GAME = re.compile(r"^game (\d+)/(\d+): score (-?\d+), (\d+) agent steps(?: \(rank (\d)\))?$", re.M)


def test_play_splits_games_over_two_ranks_and_reports_each_pong_score_and_the_mean(pong_run):
    ck, name, _ = pong_run
    r = run_cli(["--mode", "play", "--episodes", "2", "--checkpoint_dir", str(ck), "--model_name", name], np_=2)
    assert r.returncode == 0, r.stderr
    games = GAME.findall(r.stdout)
    assert sorted(int(g[0]) for g in games) == [1, 2], r.stdout
    assert sorted(g[4] for g in games) == ["0", "1"], "each rank plays one of the two games"
    scores = [int(g[2]) for g in games]
    assert all(-21 <= s <= -19 for s in scores), scores  # a barely trained policy loses whole games
    assert all(int(g[3]) > 500 for g in games)           # whole games of 21 points, not single rallies
    m = re.search(r"ppo1: 2 games: score (-?[\d.]+) ± ([\d.]+)", r.stdout)
    assert m and float(m.group(1)) == pytest.approx(np.mean(scores)) and float(m.group(2)) == pytest.approx(
        np.std(scores), abs=0.01)
    assert r.stdout.count("ppo1: 2 games") == 1, "rank 0 alone prints the summary"


def test_play_takes_the_game_from_the_checkpoint_not_from_flags_or_defaults(breakout_run, tmp_path):
    ck, name, _ = breakout_run
    shutil.copytree(ck / name, tmp_path / name)
    (tmp_path / name / "config.json").unlink()  # only the checkpoint knows the game now
    r = run_cli(["--mode", "play", "--episodes", "1", "--render", "--checkpoint_dir", str(tmp_path),
                 "--model_name", name], env={"DISPLAY": ""})
    assert r.returncode == 0, r.stderr
    assert "1 games of BreakoutNoFrameskip-v4" in r.stdout and "sampled actions" in r.stdout
    assert "no display (DISPLAY is not set); playing headless" in r.stdout
    assert len(GAME.findall(r.stdout)) == 1


def test_a_breakout_game_played_lasts_through_all_five_lives(breakout_run):
    ck, name, _ = breakout_run
    trained = load_trained(Config(checkpoint_dir=str(ck), model_name=name), {}, Comm(None))
    env = AtariEnv(trained.config.env_name, np.random.SeedSequence(3), episode_life=False)
    generator = generator_for(np.random.SeedSequence(4))
    obs, lives, score, episode = env.reset(), [env.ale.lives()], 0.0, None
    while episode is None:
        obs, reward, done, episode = env.step(choose_action(trained.policy, obs, False, generator)[0])
        score += reward
        if episode is None and env.ale.lives() != lives[-1]:
            lives.append(env.ale.lives())
        assert done == (episode is not None), "a lost life does not end a played game"
    assert lives == [5, 4, 3, 2, 1]
    assert episode.ret == score and not episode.truncated


def test_play_refuses_a_flag_that_conflicts_with_the_checkpoint_in_one_line(breakout_run):
    ck, name, _ = breakout_run
    r = run_cli(["--mode", "play", "--env_name", "PongNoFrameskip-v4", "--checkpoint_dir", str(ck),
                 "--model_name", name], timeout=120)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ppo1: error: --env_name='PongNoFrameskip-v4' conflicts "
                                                   "with the checkpoint"), r.stderr
    assert "trained with env_name='BreakoutNoFrameskip-v4'" in lines[0]


@pytest.mark.parametrize("given,allowed", [
    ({"model_type": "large"}, False),
    ({"gamma": 0.5}, False),
    ({"model_type": "small", "env_name": "BreakoutNoFrameskip-v4"}, True),  # the checkpoint's own values
    ({"seed": 7, "num_threads": 1, "asset_dir": "elsewhere"}, True),         # evaluation settings
])
def test_only_evaluation_flags_may_differ_from_the_checkpoint(breakout_run, given, allowed):
    ck, name, _ = breakout_run
    config = Config(checkpoint_dir=str(ck), model_name=name, **given)
    if allowed:
        trained = load_trained(config, given, Comm(None))
        assert trained.config.env_name == "BreakoutNoFrameskip-v4" and trained.iteration == 4
        assert trained.config.seed == given.get("seed", 0)
    else:
        (flag, value), = given.items()
        with pytest.raises(PPO1Error, match=f"--{flag}={value!r} conflicts with the checkpoint"):
            load_trained(config, given, Comm(None))


def test_play_of_a_missing_run_is_a_one_line_error(tmp_path):
    r = run_cli(["--mode", "play", "--checkpoint_dir", str(tmp_path), "--model_name", "missing"], timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip() == (f"ppo1: error: no run directory {tmp_path}/missing: train one first (--mode train), "
                                "or point --checkpoint_dir/--model_name at an existing run")


def test_a_run_directory_without_a_checkpoint_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PPO1Error, match="no checkpoint in .*empty"):
        load_trained(Config(checkpoint_dir=str(tmp_path), model_name="empty"), {}, Comm(None))


@pytest.mark.parametrize("argv,message", [
    (["--mode", "play", "--gif"], "--gif is for --mode movie, not --mode play"),
    (["--mode", "train", "--episodes", "3"], "--episodes is for --mode play, not --mode train"),
    (["--mode", "play", "--episodes", "0"], "--episodes=0 is invalid: must be a whole number >= 1"),
])
def test_a_mode_flag_given_to_another_mode_or_out_of_range_is_refused(argv, message):
    with pytest.raises(PPO1Error, match=re.escape(message)):
        _apply_mode_flags(build_parser().parse_args(argv))


def test_a_run_with_centred_frames_keeps_its_frame_mean_in_the_checkpoint_and_plays_from_it(tmp_path):
    common = ["--checkpoint_dir", str(tmp_path), "--model_name", "c"]
    r = run_cli([*TINY, *common, "--frame_norm", "center", "--envs_per_rank", "4"])
    assert r.returncode == 0, r.stderr
    model = torch.load(tmp_path / "c" / "latest.pt", weights_only=True)["model"]
    assert model["frame_rms.count"].item() == pytest.approx(512, abs=0.1)  # 4 envs x 128 frames
    assert 0 < model["frame_rms.sum"].mean().item() / 512 < 255
    r = run_cli(["--mode", "play", "--episodes", "1", *common])
    assert r.returncode == 0, r.stderr
    assert len(GAME.findall(r.stdout)) == 1, r.stdout



def test_a_recurrent_policy_plays_with_its_memory_zeroed_after_each_lost_life_as_training_zeroed_it():
    # A whole Breakout game (5 lives) with a small LSTM policy, for a run trained with --episode_life: the state
    # each step starts from is zeros right after each lost life (training's episodes ended there), never otherwise
    from ppo1.envs import make_eval_env
    from ppo1.evaluate import Player, play_games
    from ppo1.policies import build

    torch.manual_seed(0)
    env = make_eval_env("BreakoutNoFrameskip-v4", np.random.SeedSequence(0))
    policy = build("small", env.action_space, env.obs_spec, rnn="lstm", rnn_size=16).eval()
    states, lost = [], []  # the state before each step's action; whether that step lost a life
    real_step, real_env_step = policy.step, env.step

    def step(obs, state):
        states.append(state.clone())
        return real_step(obs, state)

    def env_step(action):
        result = real_env_step(action)
        lost.append(env.life_lost)
        return result
    policy.step, env.step = step, env_step
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # batch-1 forward passes, as play runs them
    try:
        (game,) = play_games(policy, env, 1, False, generator_for(np.random.SeedSequence(1)), episode_life=True)
    finally:
        torch.set_num_threads(threads)
    assert sum(lost) == 4 and len(states) == game.length  # 5 lives: 4 lost before the game's end
    zero = [not s.any() for s in states]
    assert zero[0] and zero[1:] == lost[:-1]
    # a run trained on whole games (--no-episode_life) keeps its memory across a lost life, as its training did
    player = Player(policy, False, generator_for(np.random.SeedSequence(1)), episode_life=False)
    player(env.reset())
    env.life_lost = True
    player.after_step(env, None)
    assert player.memory.any()
    env.close()


def test_render_needs_an_x_server_that_answers_not_just_a_display_variable():
    from ppo1.player import x_server_answers

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port >= 6000
        assert x_server_answers(f"127.0.0.1:{port - 6000}.0")
    assert not x_server_answers(f"127.0.0.1:{port - 6000}")  # closed now
    assert not x_server_answers(":987")
    assert not x_server_answers("") and not x_server_answers("garbage")
