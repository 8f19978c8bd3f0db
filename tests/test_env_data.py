"""Data an env gives that ppo1 cannot train on, and an env that raises: one line naming the env, what was wrong
and the iteration, before anything of that iteration is used; the work of the iterations before it is kept in a
checkpoint (written then when the last was older)."""
import json
import os

import numpy as np
import pytest
import torch

from conftest import run_cli
from ppo1.envs import EnvOptions, make_vec_env
from ppo1.envs.base import EnvDataError

# 1 env of T 16: the fault at the env's 40th step falls in iteration 3; a checkpoint after every iteration
RUN = ["--env_name", "tests.badenv:make", "--envs_per_rank", "1", "--timesteps_per_actorbatch", "16",
       "--optim_batchsize", "16", "--save_interval", "1", "--env_steps", "160", "--num_threads", "1"]


@pytest.mark.parametrize("kwargs, said", [
    ({"fault": "nan_obs"}, "tests.badenv:make gave an observation holding NaN (shape (3,))"),
    ({"fault": "inf_obs"}, "tests.badenv:make gave an observation holding inf (shape (3,))"),
    ({"fault": "nan_reward"}, "tests.badenv:make gave a reward of nan"),
    ({"fault": "inf_reward"}, "tests.badenv:make gave a reward of -inf"),
    ({"fault": "shape"}, "tests.badenv:make gave an observation of shape (4,), its observation space declares (3,)"),
    ({"fault": "shape", "image": True},
     "tests.badenv:make gave an image of shape (20, 24), its observation space declares (24, 24)"),
    ({"fault": "dtype", "image": True}, "tests.badenv:make gave an image of dtype float32, its observation space "
                                        "declares uint8"),
], ids=["nan-obs", "inf-obs", "nan-reward", "inf-reward", "vector-shape", "image-shape", "image-dtype"])
def test_bad_env_data_stops_the_run_in_one_line_naming_it_and_keeps_the_last_good_checkpoint(tmp_path, kwargs, said):
    extra = ["--model_type", "small", "--frame_size", "24"] if kwargs.get("image") else []
    r = run_cli([*RUN, *extra, "--env_kwargs", json.dumps({**kwargs, "at": 40}), "--checkpoint_dir", str(tmp_path),
                 "--model_name", "bad"])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == [f"ppo1: error: training stopped in iteration 3: {said}; nothing of this iteration was used; "
                     f"{tmp_path / 'bad' / 'latest.pt'} holds its work up to iteration 2"], r.stderr
    assert torch.load(tmp_path / "bad" / "latest.pt", weights_only=True)["iteration"] == 2


def test_with_no_restarts_an_env_that_raises_is_one_line_and_a_checkpoint_of_the_iterations_before_it(tmp_path):
    # --save_interval 50: no checkpoint on disk when the env raises in iteration 3; the stop writes iteration 2's
    r = run_cli([*RUN, "--env_kwargs", json.dumps({"fault": "raise", "at": 40}), "--checkpoint_dir", str(tmp_path),
                 "--model_name", "bad", "--env_restarts", "0", "--save_interval", "50"])
    assert r.returncode == 2 and "Traceback" not in r.stderr
    trace = tmp_path / "bad" / "env-error-rank0.txt"
    assert r.stderr.strip().splitlines() == [
        "ppo1: error: training stopped in iteration 3: env 0 raised RuntimeError: the emulator lost its state in its "
        f"step (traceback in {trace}); nothing of this iteration was used; {tmp_path / 'bad' / 'latest.pt'} now "
        "holds iteration 2 (its games start anew on resume)"]
    assert "Traceback" in trace.read_text() and 'raise RuntimeError("the emulator lost its state")' in trace.read_text()
    saved = torch.load(tmp_path / "bad" / "latest.pt", weights_only=False)
    assert saved["iteration"] == 2 and saved["timesteps"] == 32
    assert os.path.exists(tmp_path / "bad" / "ckpt-00000002.pt")
    # the same command resumes from it with the env made anew, whose 40th step falls in iteration 5
    r = run_cli([*RUN, "--env_kwargs", json.dumps({"fault": "raise", "at": 40}), "--checkpoint_dir", str(tmp_path),
                 "--model_name", "bad", "--env_restarts", "0", "--save_interval", "50"])
    assert r.returncode == 2 and "resuming from" in r.stdout and r.stderr.strip().endswith(
        f"{tmp_path / 'bad' / 'latest.pt'} now holds iteration 4 (its games start anew on resume)"), r.stderr
    # play's env raises in its 40th step too (its 5th game): one line naming where, no traceback
    r = run_cli(["--mode", "play", "--episodes", "5", "--checkpoint_dir", str(tmp_path), "--model_name", "bad"])
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(
        "ppo1: error: the env raised RuntimeError: the emulator lost its state (")
    assert "badenv.py" in r.stderr and "Traceback" not in r.stderr


def test_a_factory_that_exits_is_one_line_and_status_2_not_a_silent_0(tmp_path):
    r = run_cli([*RUN, "--env_name", "tests.badenv:exits", "--checkpoint_dir", str(tmp_path)])
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "ppo1: error: --env_name='tests.badenv:exits': tests.badenv:exits() raised SystemExit: 0"], r.stderr


def test_a_run_refused_at_set_up_leaves_no_run_directory_behind(tmp_path):
    r = run_cli(["--env_name", "tests.badenv:make", "--env_kwargs", '{"fault": "nan_first"}', "--env_steps", "4096",
                 "--checkpoint_dir", str(tmp_path), "--model_name", "nan-first"])
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == (
        "ppo1: error: tests.badenv:make gave an observation holding NaN (shape (3,))"), r.stderr
    assert os.listdir(tmp_path) == []  # not a directory holding only train.lock


@pytest.mark.parametrize("image", [False, True], ids=["vector", "image"])
def test_gyms_old_api_is_named_as_the_envs_with_its_fix_not_as_a_bug_in_ppo1(image):
    fix = "return gymnasium's, or wrap the env in a compatibility wrapper (Shimmy's GymV21CompatibilityV0: pip install shimmy)"
    extra = {"image": True} if image else {}
    options = EnvOptions(env_kwargs=json.dumps({"fault": "old_step", **extra}))
    venv = make_vec_env("tests.badenv:make", 1, seed=0, rank=0, options=options)
    try:
        venv.reset()
        with pytest.raises(EnvDataError) as e:
            venv.step(np.array([0]))
        assert str(e.value) == ("tests.badenv:make's step returned 4 values (obs, reward, done, info): gym's old step "
                                f"API, not gymnasium's (obs, reward, terminated, truncated, info): {fix}")
    finally:
        venv.close()
    options = EnvOptions(env_kwargs=json.dumps({"fault": "old_reset", **extra}))
    venv = make_vec_env("tests.badenv:make", 1, seed=0, rank=0, options=options)
    try:
        with pytest.raises(EnvDataError) as e:
            venv.reset()
        assert str(e.value) == ("tests.badenv:make's reset returned a ndarray, not gymnasium's (obs, info) (gym's old "
                                f"reset API returns the observation alone): {fix}")
    finally:
        venv.close()
