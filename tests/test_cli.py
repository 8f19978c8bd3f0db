"""The command line end to end: real games, real `mpirun -np 2`, real files."""
import os

import pytest
import torch

from conftest import SHORT, one_line_error, rows, run_cli
from ppo1 import PPO1Error, runfiles

@pytest.fixture(scope="module")
def trained(pong_run):
    """The suite's 2-rank x 2-env Pong run (conftest's pong_run): 4 iterations of 512 steps."""
    ck, _, r = pong_run
    return ck, r


def test_two_rank_training_logs_iterations_and_writes_progress_csv(trained):
    ck, r = trained
    # what the policy reads and how it was preprocessed, said once at start
    assert r.stdout.count("ppo1: the policy reads image (4, 84, 84): the emulator's screen, each action repeated for "
                          "4 frames and the last 2 maxed, gray, resized to 84x84, 4 frames; up to 30 no-ops at a "
                          "start, then FIRE; a lost life ends the agent's episode\n") == 1
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "ppo1: device cpu on all 2 ranks", r.stdout  # every rank's device, agreed
    assert "2 ranks x 2 envs = 4 actors" in r.stdout
    assert r.stdout.count("ppo1: Pong") == 1, "rank 0 alone prints"
    progress = rows(ck / "pong" / "progress.csv")
    assert [int(p["iteration"]) for p in progress] == [1, 2, 3, 4]
    assert [int(p["timesteps"]) for p in progress] == [512, 1024, 1536, 2048]
    assert float(progress[0]["clip_param"]) == pytest.approx(0.1)
    assert float(progress[-1]["stepsize"]) == pytest.approx(2.5e-4 * (1 - 1536 / 2048))
    assert float(progress[-1]["sps"]) > 0 and float(progress[-1]["entropy"]) > 0
    for rank in (0, 1):
        assert (ck / "pong" / f"episodes.rank{rank}.csv").exists()


def test_training_writes_a_loadable_checkpoint_with_its_config(trained):
    ck, _ = trained
    state = torch.load(ck / "pong" / "latest.pt", weights_only=True)
    assert state["iteration"] == 4 and state["timesteps"] == 2048 and state["n_actors"] == 4
    assert state["config"]["env_name"] == "PongNoFrameskip-v4"
    assert len(state["ranks"]) == 2
    assert sorted(os.listdir(ck / "pong")).count("config.json") == 1
    assert runfiles.load_config(str(ck / "pong")).envs_per_rank == 2


def test_single_process_training_without_mpirun(tmp_path):
    r = run_cli([*SHORT, "--env_steps", "256", "--checkpoint_dir", str(tmp_path), "--model_name", "solo"])
    assert r.returncode == 0, r.stderr
    assert "1 ranks x 2 envs" in r.stdout
    assert len(rows(tmp_path / "solo" / "progress.csv")) == 1


# 2 ranks where the error comes at a stage of its own (flags, the config, the run's set-up); 1 elsewhere
@pytest.mark.parametrize("args,message,np_", [
    (["--env_name", "NoSuchGameNoFrameskip-v4"], "--env_name='NoSuchGameNoFrameskip-v4' is not a known environment", 2),
    (["--env_name", "CarRacing-v3"], "needs a package that is not installed", 1),
    (["--gamma", "1.5"], "--gamma=1.5 is invalid", 1),
    (["--optim_epochs", "0"], "--optim_epochs=0 is invalid", 1),
    (["--optim_batchsize", "256"], "--optim_batchsize=256 is invalid", 1),
    (["--env_steps", "100"], "--env_steps=100 is invalid", 1),  # the config's stage: NoSuchGame's
    (["--gamma", "abc"], "invalid float value", 2),
    (["--model_type", "huge"], "invalid choice", 1),
])
def test_bad_input_ends_all_ranks_with_one_line_and_status_2(tmp_path, args, message, np_):
    r = run_cli([*SHORT, "--checkpoint_dir", str(tmp_path), *args], np_=np_, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ppo1: error:"), r.stderr
    assert message in lines[0]
    assert "Traceback" not in r.stdout + r.stderr


def test_checkpoint_of_another_game_is_refused_and_kept(trained, tmp_path):
    ck, _ = trained
    import shutil
    shutil.copytree(ck / "pong", tmp_path / "pong")
    before = (tmp_path / "pong" / "latest.pt").read_bytes()
    r = run_cli(["--env_name", "BreakoutNoFrameskip-v4", "--checkpoint_dir", str(tmp_path),
                 "--model_name", "pong"], np_=2, timeout=60)
    one_line_error(r, "trained on PongNoFrameskip-v4, not BreakoutNoFrameskip-v4")  # rank 0's, on every rank
    assert (tmp_path / "pong" / "latest.pt").read_bytes() == before


def test_corrupt_checkpoint_is_an_error_and_is_not_overwritten(tmp_path):
    # one process: the set-up's refusal on every rank is test_checkpoint_of_another_game_is_refused_and_kept's
    run = tmp_path / "bad"
    run.mkdir()
    (run / "latest.pt").write_bytes(b"not a checkpoint")
    r = run_cli([*SHORT, "--checkpoint_dir", str(tmp_path), "--model_name", "bad"], timeout=60)
    assert r.returncode == 2 and "no loadable checkpoint" in r.stderr
    assert (run / "latest.pt").read_bytes() == b"not a checkpoint"


def test_help_explains_every_flag():
    r = run_cli(["--help"])
    assert r.returncode == 0
    for flag in ("--env_name", "--mode", "--env_steps", "--timesteps_per_actorbatch", "--gamma", "--lam",
                 "--epsilon", "--ent_coef", "--optim_epochs", "--optim_stepsize", "--optim_batchsize", "--seed",
                 "--model_type", "--model_name", "--checkpoint_dir", "--asset_dir", "--envs_per_rank",
                 "--save_interval"):
        assert flag in r.stdout


def test_preset_fills_the_flags_not_given_is_recorded_and_cannot_change_on_resume(tmp_path):
    from ppo1.cli import build_config, build_parser
    where = ["--checkpoint_dir", str(tmp_path), "--model_name", "pre"]
    config = build_config(build_parser().parse_args([*SHORT, "--preset", "baselines", "--optim_epochs", "1", *where]))
    assert (config.preset, config.model_type, config.optim_stepsize, config.epsilon) == ("baselines", "large", 1e-3, 0.2)
    assert config.optim_epochs == 1 and config.timesteps_per_actorbatch == 128  # flags given win over the preset
    (tmp_path / "pre").mkdir()
    (tmp_path / "pre" / "config.json").write_text(config.to_json())  # as its training saves it
    assert build_config(build_parser().parse_args(where)) == config  # a rerun takes it, flags and preset
    with pytest.raises(PPO1Error, match="--preset=fast differs from the run's preset 'baselines'"):
        build_config(build_parser().parse_args(["--preset", "fast", *where]))


def test_impala_cnn_trains_resumes_plays_and_records_like_every_network(tmp_path):
    # 1 env x 64 steps an iteration (the IMPALA CNN costs ~20 small CNNs on 84 x 84 frames)
    flags = ["--env_name", "BreakoutNoFrameskip-v4", "--checkpoint_dir", str(tmp_path), "--model_name", "imp"]
    r = run_cli(["--env_steps", "128", "--envs_per_rank", "1", "--timesteps_per_actorbatch", "64",
                 "--optim_batchsize", "32", "--num_threads", "1", *flags, "--model_type", "impala", "--init",
                 "orthogonal", "--frame_norm", "center"])
    assert r.returncode == 0, r.stderr
    saved = runfiles.load_config(str(tmp_path / "imp"))
    assert (saved.model_type, saved.init, saved.frame_norm) == ("impala", "orthogonal", "center")
    state = torch.load(tmp_path / "imp" / "latest.pt", weights_only=True)
    assert state["model"]["torso.0.2.conv1.weight"].shape == (16, 16, 3, 3)  # stage 1, 2nd residual block
    assert state["model"]["frame_rms.sum"].shape == (84, 84)
    r = run_cli([*flags, "--env_steps", "256"])  # resumes with the saved model type
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stdout
    assert [int(p["iteration"]) for p in rows(tmp_path / "imp" / "progress.csv")] == [1, 2, 3, 4]
    r = run_cli(["--mode", "play", "--episodes", "1", *flags[2:]])
    assert r.returncode == 0, r.stderr
    assert "1 games of BreakoutNoFrameskip-v4" in r.stdout
    r = run_cli(["--mode", "movie", "--max_frames", "60", "--asset_dir", str(tmp_path / "assets"), *flags[2:]])
    assert r.returncode == 0, r.stderr
    assert list((tmp_path / "assets" / "imp").glob("*_partial.mp4"))


def test_a_run_with_target_kl_logs_the_epochs_it_ran_and_saves_both_settings(trained, tmp_path):
    # one process: both ranks stopping at the same minibatch is test_distributed's. A step size 40 x the paper's
    # and a small target: the iterations stop early, after a step or more
    r = run_cli([*SHORT, "--env_steps", "512", "--optim_stepsize", "1e-2", "--target_kl", "1e-4", "--clip_vloss",
                 "--frame_norm", "scale", "--checkpoint_dir", str(tmp_path), "--model_name", "kl"])
    assert r.returncode == 0, r.stderr
    progress = rows(tmp_path / "kl" / "progress.csv")
    # 2 envs x 128 steps = 256 samples in minibatches of 2 x 32 = 4 per epoch: 1 step = 0.25 epochs
    epochs = [float(p["epochs"]) for p in progress]
    assert len(epochs) == 2 and all(0.25 <= e < 3 and (4 * e).is_integer() for e in epochs), epochs
    saved = runfiles.load_config(str(tmp_path / "kl"))
    assert (saved.target_kl, saved.clip_vloss) == (1e-4, True)
    assert any(line.split()[:1] == ["iter"] and "epochs" in line.split() for line in r.stdout.splitlines())
    ck, _ = trained  # without a target: every epoch
    assert [float(p["epochs"]) for p in rows(ck / "pong" / "progress.csv")] == [3.0] * 4


def test_a_minibatch_size_that_does_not_divide_the_batch_trains_on_with_finite_parameters(tmp_path):
    # 32 samples in minibatches of 31: once a last minibatch of 1 sample, whose advantage std was NaN
    r = run_cli(["--preset", "cleanrl", "--model_type", "small", "--optim_epochs", "1", "--envs_per_rank", "1",
                 "--timesteps_per_actorbatch", "32", "--optim_batchsize", "31", "--env_steps", "96",
                 "--checkpoint_dir", str(tmp_path), "--model_name", "m"])
    assert r.returncode == 0, r.stderr
    assert "degrees of freedom" not in r.stderr and "Traceback" not in r.stderr
    state = torch.load(tmp_path / "m" / "latest.pt", weights_only=True)
    assert state["iteration"] == 3 and all(torch.isfinite(v).all() for v in state["model"].values())


def test_python_m_ppo1_is_the_command_line_and_its_np_runs_its_ranks_as_python_m_ppo1():
    import sys

    from ppo1.launch import mpi_fork_command
    r = run_cli(["--help"], module="ppo1")
    assert r.returncode == 0 and "--env_name" in r.stdout and r.stderr == "", r.stderr
    try:
        cmd = mpi_fork_command(2, ["--np", "2", "--env_name", "CartPole-v1"], "ppo1")
    except PPO1Error:
        pytest.skip("no mpirun found")
    assert cmd[-5:] == [sys.executable, "-m", "ppo1", "--env_name", "CartPole-v1"]
