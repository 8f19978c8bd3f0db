"""An env whose engine dies mid-run (its step raises) is made anew: a warning on its rank, its traceback kept in
the run directory, its episode counted as cut (bootstrapped, never a false terminal); past --env_restarts the run
stops after that iteration with a checkpoint, exit 2 on every rank. tests/childenv.py's env talks to a child
process that it kills at a given step, as an engine that crashed."""
import importlib
import json
import os
import time

import numpy as np
import pytest
import torch

from childenv import engines
from conftest import run_cli
from ppo1.envs import EnvOptions, make_vec_env

RUN = ["--env_name", "tests.childenv:make", "--timesteps_per_actorbatch", "16", "--optim_batchsize", "16",
       "--num_threads", "1"]


def test_an_env_that_raises_is_made_anew_and_its_episode_is_cut_not_ended():
    importlib.import_module("tests.childenv").started = 0
    venv = make_vec_env("tests.childenv:make", 2, seed=0, rank=0,
                        options=EnvOptions(env_kwargs=json.dumps({"die_at": 3, "tag": "unit-restart"})))
    try:
        venv.max_restarts = 1
        obs = venv.reset().copy()
        for _ in range(2):
            obs, rewards, dones, _ = venv.step(np.array([1, 1]))
            obs = obs.copy()
        dead = venv.envs[0].gym_env.unwrapped.engine
        new_obs, rewards, dones, episodes = venv.step(np.array([1, 1]))  # env 0's engine dies in this step
        assert dones.tolist() == [True, False] and rewards[0] == 0.0 and episodes == []
        assert list(venv.cut) == [0] and np.array_equal(venv.cut[0], obs[0])  # bootstraps from its last observation
        assert new_obs[0].tolist() == [0.0, 0.0, 1.0]  # the new env's first observation
        assert [(r.index, r.error) for r in venv.restarts] == [(0, "RuntimeError: the engine exited unexpectedly")]
        assert "Traceback" in venv.restarts[0].trace
        assert dead.poll() is not None and venv.envs[0].gym_env.unwrapped.engine is not dead and venv.envs[0].gym_env.unwrapped.engine.poll() is None
        venv.step(np.array([1, 1]))
        assert len(engines("unit-restart")) == 2
    finally:
        venv.close()
    assert engines("unit-restart") == []


def test_with_env_restarts_0_the_first_exception_goes_on():
    importlib.import_module("tests.childenv").started = 0
    venv = make_vec_env("tests.childenv:make", 1, seed=0, rank=0, options=EnvOptions(env_kwargs='{"die_at": 1}'))
    try:
        venv.reset()
        with pytest.raises(RuntimeError, match="the engine exited unexpectedly"):
            venv.step(np.array([0]))
    finally:
        venv.close()


def test_a_run_whose_engine_dies_goes_on_with_one_warning_and_the_traceback_kept(tmp_path):
    tag = f"restart-{os.getpid()}-{time.time()}"
    r = run_cli([*RUN, "--envs_per_rank", "2", "--env_steps", "96", "--checkpoint_dir", str(tmp_path),
                 "--model_name", "child", "--env_kwargs", json.dumps({"die_at": 30, "tag": tag})])
    trace = tmp_path / "child" / "env-error-rank0.txt"
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines() == [
        "ppo1: warning: rank 0, iteration 2: env 0 raised RuntimeError: the engine exited unexpectedly; made it anew "
        f"(1 of --env_restarts 5), its episode counted as cut; traceback in {trace}"]
    assert "Traceback" in trace.read_text() and "the engine exited unexpectedly" in trace.read_text()
    assert torch.load(tmp_path / "child" / "latest.pt", weights_only=True)["iteration"] == 3  # it trained on
    assert engines(tag) == []  # every engine, the dead one's successor included, ended with the run


def test_past_env_restarts_every_rank_stops_after_the_iteration_with_a_checkpoint_and_exit_2(tmp_path):
    # every env's engine dies at step 20 of its life: restarts in iterations 2 and 3 on each rank, the second
    # over --env_restarts 1, so both ranks stop after iteration 3 with its checkpoint
    r = run_cli([*RUN, "--envs_per_rank", "1", "--env_steps", "160", "--env_restarts", "1", "--save_interval", "100",
                 "--checkpoint_dir", str(tmp_path), "--model_name", "child",
                 "--env_kwargs", json.dumps({"die_at": 20, "dying": 99})], np_=2)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = sorted(r.stderr.strip().splitlines())
    latest = tmp_path / "child" / "latest.pt"
    assert lines[0] == (f"ppo1: error: an env raised 2 times on one rank, more than --env_restarts 1 allows: stopped "
                        f"at iteration 3 (96 of 160 steps) with a checkpoint, {latest}; the tracebacks are in "
                        "env-error-rank<r>.txt there")
    assert [line.split(": env")[0] for line in lines[1:]] == [
        f"ppo1: warning: rank {rank}, iteration {it}" for rank in (0, 1) for it in (2, 3)]
    assert torch.load(latest, weights_only=True)["iteration"] == 3
    assert "Traceback" not in r.stdout + r.stderr


def test_an_engine_that_hangs_is_killed_after_env_step_timeout_and_the_run_goes_on(tmp_path):
    # the hung step used to wait for the watchdog (300 s or more), which then ended the whole run
    tag = f"hang-{os.getpid()}-{time.time()}"
    r = run_cli([*RUN, "--envs_per_rank", "2", "--env_steps", "96", "--env_step_timeout", "2", "--checkpoint_dir",
                 str(tmp_path), "--model_name", "hang", "--env_kwargs", json.dumps({"hang_at": 30, "tag": tag})])
    assert r.returncode == 0, r.stderr
    killed, restarted = r.stderr.strip().splitlines()
    assert killed.startswith("ppo1: warning: rank 0: env 0's step ran past --env_step_timeout 2 s: ended the 1 "
                             "process(es) it started (pid "), killed
    assert restarted.startswith("ppo1: warning: rank 0, iteration 2: env 0 raised RuntimeError: the engine exited "
                                "unexpectedly; made it anew (1 of --env_restarts 5)"), restarted
    assert torch.load(tmp_path / "hang" / "latest.pt", weights_only=True)["iteration"] == 3  # it trained on
    assert engines(tag) == []


def test_a_hung_call_of_an_env_that_started_no_process_is_said_once_and_left_to_the_watchdog():
    from ppo1.envs.calls import CallTimer

    class Envs:  # a VecEnv in env 1's reset for 10 s, which started nothing
        calling, started = (1, "reset", 100.0), {}
    said, ended = [], []
    timer = CallTimer(5, rank=3, say=said.append, end=lambda pids: ended.append(pids) or [], clock=lambda: 110.0)
    timer.watch(Envs)
    assert timer.check() and not timer.check()  # once per call
    assert ended == [[]] and said == [
        "ppo1: warning: rank 3: env 1's reset ran past --env_step_timeout 5 s and started no process to end: the rank "
        "waits on it (a second Ctrl-C exits at once; --watchdog_timeout ends the run)"]
    Envs.calling = (1, "make", 90.0)  # making an env is not timed
    assert not timer.check()


def test_env_step_timeout_is_120_s_by_default_0_turns_it_off_and_a_negative_one_is_refused():
    from ppo1 import PPO1Error
    from ppo1.config import Config
    assert Config().env_step_timeout == 120.0 and Config(env_step_timeout=0).validate().env_step_timeout == 0
    with pytest.raises(PPO1Error, match="--env_step_timeout=-1"):
        Config(env_step_timeout=-1).validate()
