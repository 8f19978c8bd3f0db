"""Procgen (`--env_name procgen:<game>`, `--preset procgen`): without the package, one line naming what
to install; with it (procgen-gym, Python 3.13+), real games, a real `mpirun -np 2` run that trains,
resumes, plays on unseen levels and records a video."""
import csv
import importlib.util
import re

import numpy as np
import pytest
import torch

from conftest import run_cli
from ppo1 import PPO1Error, runfiles
from ppo1.cli import build_config, build_parser
from ppo1.config import Config
from ppo1.resolve import preset_values

HAVE_PROCGEN = importlib.util.find_spec("procgen_gym") is not None
needs_procgen = pytest.mark.skipif(not HAVE_PROCGEN, reason="procgen-gym is not installed (it needs Python 3.13+: "
                                   "make venv PYTHON=python3.13 VENV=.venv313, then pip install procgen-gym)")
SHORT = ["--env_steps", "512", "--envs_per_rank", "2", "--timesteps_per_actorbatch", "64", "--num_threads", "1"]


def test_procgen_envs_take_the_procgen_papers_easy_mode_preset_and_no_other():
    values = preset_values({"env_name": "procgen:coinrun"}, defaults=Config)
    assert values["preset"] == "procgen" and values["model_type"] == "impala"
    assert (values["num_levels"], values["start_level"], values["distribution_mode"]) == (200, 0, "easy")
    assert (values["timesteps_per_actorbatch"], values["optim_epochs"], values["optim_batchsize"]) == (256, 3, 32)
    assert (values["optim_stepsize"], values["anneal_lr"], values["epsilon"], values["anneal_clip"]) == (5e-4, False, 0.2, False)
    assert (values["gamma"], values["lam"], values["ent_coef"], values["norm_reward"]) == (0.999, 0.95, 0.01, True)
    assert 256 // values["optim_batchsize"] == 8  # 8 minibatches per epoch, whatever the number of actors
    with pytest.raises(PPO1Error, match=r"--preset=fast is for Atari games and image-observation envs, not for "
                                        r"Procgen games \(procgen:<game>\) like procgen:coinrun: use procgen"):
        preset_values({"env_name": "procgen:coinrun", "preset": "fast"}, defaults=Config)
    with pytest.raises(PPO1Error, match=r"--preset=procgen is for Procgen games \(procgen:<game>\), not for Atari"):
        preset_values({"preset": "procgen"}, defaults=Config)


def test_unseen_levels_start_after_the_training_levels(tmp_path):
    from ppo1.envs import ProcgenLevels
    c = build_config(build_parser().parse_args(["--env_name", "procgen:starpilot", "--start_level", "5",
                                                "--checkpoint_dir", str(tmp_path)]))
    assert ProcgenLevels.training(c) == ProcgenLevels(200, 5, "easy")
    assert ProcgenLevels.unseen(c) == ProcgenLevels(0, 205, "easy")  # every level from 205 on
    assert ProcgenLevels.unseen(c.__class__(num_levels=0)) == ProcgenLevels(0, 0, "easy")


@pytest.mark.skipif(HAVE_PROCGEN, reason="procgen-gym is installed here")
def test_procgen_without_the_package_is_one_line_naming_what_to_install(tmp_path):
    # one process: a set-up refusal reaches every rank in test_cli
    r = run_cli(["--env_name", "procgen:coinrun", *SHORT, "--checkpoint_dir", str(tmp_path)], timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stdout + r.stderr, r.stderr
    assert lines[0].startswith("ppo1: error: --env_name='procgen:coinrun' needs the Procgen games")
    assert "pip install procgen-gym" in lines[0] and "Python 3.13" in lines[0]


def test_a_game_procgen_does_not_have_is_one_line_naming_the_games(tmp_path):
    r = run_cli(["--env_name", "procgen:pong", *SHORT, "--checkpoint_dir", str(tmp_path)], timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "ppo1: error: --env_name='procgen:pong' is not a Procgen game: use procgen:<game> with one of bigfish, "
        "bossfight, caveflyer, chaser, climber, coinrun, dodgeball, fruitbot, heist, jumper, leaper, maze, miner, "
        "ninja, plunder, starpilot"]


@needs_procgen
def test_a_missing_system_library_is_one_line_naming_it_on_every_rank(tmp_path):
    # Procgen's C++ library links the system's libGL (through its Qt), as does opencv-python, which
    # procgen-gym pulls in: a GPU image without libGL failed with a traceback per rank. A libGL.so.1 that
    # is no library, first on the loader's path, fails them the same way.
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libGL.so.1").write_bytes(b"")
    r = run_cli(["--env_name", "procgen:coinrun", *SHORT, "--checkpoint_dir", str(tmp_path / "ck")], np_=2,
                timeout=120, env={"LD_LIBRARY_PATH": str(tmp_path / "lib")})
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stdout + r.stderr, r.stderr
    assert lines[0].startswith("ppo1: error: ") and "libGL.so.1" in lines[0], lines[0]


@needs_procgen
def test_procgen_env_gives_chw_rgb_frames_and_draws_its_levels():
    from ppo1.envs import ProcgenEnv, ProcgenLevels, VecProcgen
    env = ProcgenEnv("procgen:coinrun", np.random.SeedSequence(0), ProcgenLevels(200, 0, "easy"))
    obs = env.reset()["image"]
    assert obs.shape == (3, 64, 64) and obs.dtype == np.uint8 and env.num_actions == 15
    np.testing.assert_array_equal(env.rgb(), obs.transpose(1, 2, 0))  # the video frame is what the agent sees
    train_levels, episodes = {env.level_seed}, []
    while len(episodes) < 3:
        obs, reward, done, ep = env.step(np.random.randint(15))
        if done:
            episodes.append(ep)
            train_levels.add(env.level_seed)
    assert all(0 <= s < 200 for s in train_levels)
    assert all(ep.ret in (0.0, 10.0) and 0 < ep.length <= 1000 for ep in episodes)  # coinrun: the coin or not
    unseen = ProcgenEnv("procgen:coinrun", np.random.SeedSequence(0), ProcgenLevels(0, 200, "easy"))
    unseen.reset()
    assert unseen.level_seed >= 200
    venv = VecProcgen("procgen:coinrun", 3, 0, 1, ProcgenLevels(200, 0, "easy"))
    assert venv.reset()["image"].shape == (3, 3, 64, 64) and venv.state_dict()["envs"] is None


@needs_procgen
def test_two_rank_procgen_run_trains_resumes_plays_unseen_levels_and_records_a_video(tmp_path):
    # with memory (--rnn lstm): its state in the checkpoint, reset per game in play and movie
    flags = ["--checkpoint_dir", str(tmp_path), "--model_name", "cr"]
    r = run_cli(["--env_name", "procgen:coinrun", *SHORT, *flags, "--rnn", "lstm", "--video_interval", "2",
                 "--video_max_frames", "50"], np_=2, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "procgen:coinrun, 2 ranks x 2 envs = 4 actors" in r.stdout
    saved = runfiles.load_config(str(tmp_path / "cr"))
    assert (saved.preset, saved.model_type, saved.num_levels, saved.norm_reward) == ("procgen", "impala", 200, True)
    state = torch.load(tmp_path / "cr" / "latest.pt", weights_only=True)
    assert state["model"]["torso.5.weight"].shape == (256, 32 * 8 * 8)  # the IMPALA CNN's fc on 64x64 frames
    assert state["reward_norm"]["stats"][2] > 512  # the returns of every rank's steps (and the prior's 1e-4)
    assert len(state["ranks"]) == 2 and state["ranks"][1]["reward_ret"].shape == (2,)
    assert state["ranks"][1]["rnn_state"].shape == (2, 2 * 256)  # each env's LSTM state (h, c)
    assert list((tmp_path / "cr" / "videos").glob("iter000002_512steps_score*_partial.mp4"))
    # the resume evaluates each iteration: games on the unseen levels and as many on the training levels
    r = run_cli([*flags, "--env_steps", "1024", "--eval_interval", "1", "--eval_episodes", "2", "--eval_max_steps",
                 "60"], np_=2, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stdout
    with open(tmp_path / "cr" / "progress.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(row["iteration"]) for row in rows] == [1, 2, 3, 4]
    for row in rows[2:]:
        assert row["eval_games"] == "2" and float(row["eval_return_mean"]) in (0.0, 5.0, 10.0), row
        assert float(row["eval_train_return_mean"]) in (0.0, 5.0, 10.0), row
    assert (tmp_path / "cr" / "best.pt").exists()
    # Procgen's games cannot be saved: the resume made every env anew with the next seed of its place (no level
    # stream of the run's start again), and each env's memory started from zeros with its new game
    assert [st["env_made"] for st in torch.load(tmp_path / "cr" / "latest.pt", weights_only=True)["ranks"]] == [[1, 1]] * 2
    r = run_cli(["--mode", "play", "--episodes", "2", *flags], np_=2, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "2 games of procgen:coinrun (easy mode, unseen levels: from 200 on; trained on 0..199)" in r.stdout
    assert len(re.findall(r"^game \d/2: score (0|10), \d+ agent steps", r.stdout, re.M)) == 2
    r = run_cli(["--mode", "movie", "--max_frames", "40", "--asset_dir", str(tmp_path / "assets"), *flags], timeout=300)
    assert r.returncode == 0, r.stderr
    from conftest import decode
    videos = list((tmp_path / "assets" / "cr").glob("procgen-coinrun_iter4_1024steps_score*.mp4"))
    assert len(videos) == 1
    size, fps, frames = decode(str(videos[0]))
    assert size == (64, 64) and fps == 15 and 1 <= len(frames) <= 40
