"""An env whose engine dies mid-run (its step raises) is made anew with a seed of its own: a warning on its rank,
its traceback kept in the run directory, its episode counted as cut (bootstrapped from the value the rollout gave
the observation, never a false terminal); --env_restarts N allows N on a rank, across resumes, and one more stops
the run, exit 2. Only what the env raised is mended: an error of ppo1's own code around it stops the run.
tests/childenv.py's env talks to a child process that it kills at a given step, as an engine that crashed."""
import importlib
import json
import os
import time

import numpy as np
import pytest
import torch

from childenv import engines
from conftest import run_cli
from ppo1.advantages import gae
from ppo1.envs import EnvCrash, EnvOptions, make_vec_env
from ppo1.envs.base import env_seed
from ppo1.policies import build
from ppo1.restarts import EnvRestarts
from ppo1.rollout import RecurrentCollector

RUN = ["--env_name", "tests.childenv:make", "--timesteps_per_actorbatch", "16", "--optim_batchsize", "16",
       "--num_threads", "1"]


def test_an_env_that_raises_is_made_anew_and_its_episode_is_cut_not_ended(tmp_path, capfd):
    importlib.import_module("tests.childenv").started = 0
    venv = make_vec_env("tests.childenv:make", 2, seed=0, rank=0,
                        options=EnvOptions(env_kwargs=json.dumps({"die_at": 3, "tag": "unit-restart"})))
    try:
        restarts = EnvRestarts(1, 0, 0, str(tmp_path))
        restarts.begin(1)
        venv.maker.mend_with(restarts)
        venv.reset()
        for _ in range(2):
            venv.step(np.array([1, 1]))
        dead = venv.maker.envs[0].gym_env.unwrapped.engine
        done = venv.step(np.array([1, 1]))  # env 0's engine dies in this step
        assert done.dones.tolist() == [True, False] and done.rewards[0] == 0.0
        # the crashed game as far as it went (two steps of action 1, reward 1 each), counted as cut
        assert [(e.ret, e.length, e.truncated) for e in done.episodes] == [(2.0, 2, True)]
        assert done.cut == {} and done.crashed == {0}  # no time limit cut it: its step never ran
        assert done.obs["vector"][0].tolist() == [0.0, 0.0, 1.0]  # the new env's first observation
        assert "env 0 raised RuntimeError: the engine exited unexpectedly; made it anew" in capfd.readouterr().err
        # the seed of the second env made in place 0, a function of (seed, rank, env, envs made there before)
        assert venv.maker.made == [1, 0] and restarts.iterations == [1] and not restarts.take(restarts)
        assert venv.maker.envs[0].seeds.first == int(env_seed(0, 0, 0, 1).generate_state(1)[0] % (2**31 - 1)) != \
            venv.maker.envs[1].seeds.first
        assert "Traceback" in open(restarts.trace_path).read()
        engine = venv.maker.envs[0].gym_env.unwrapped.engine
        assert dead.poll() is not None and engine is not dead and engine.poll() is None
        venv.step(np.array([1, 1]))
        assert len(engines("unit-restart")) == 2
    finally:
        venv.close()
    assert engines("unit-restart") == []


def test_with_no_restart_left_the_env_crash_names_the_env_and_keeps_its_traceback():
    importlib.import_module("tests.childenv").started = 0
    venv = make_vec_env("tests.childenv:make", 2, seed=0, rank=0, options=EnvOptions(env_kwargs='{"die_at": 1}'))
    try:
        venv.reset()
        with pytest.raises(EnvCrash, match="^env 0 raised RuntimeError: the engine exited unexpectedly in its step$") as e:
            venv.step(np.array([0, 0]))
        assert not e.value.ours and e.value.restartable and "_ask" in e.value.trace
    finally:
        venv.close()


def test_an_env_whose_first_reset_raises_is_made_anew_as_the_restarts_allow(tmp_path, capfd):
    # the first 2 resets raise (an engine that dies while it starts): 2 restarts at start, the third env plays
    badenv = importlib.import_module("tests.badenv")
    for limit in (2, 1):
        badenv.MADE[0], badenv.FAILED_RESETS[0] = 0, 0
        venv = make_vec_env("tests.badenv:make", 1, seed=0, rank=0,
                            options=EnvOptions(env_kwargs=json.dumps({"fault": "none", "first_resets": 2})))
        restarts = EnvRestarts(limit, 0, 0, str(tmp_path))
        try:
            venv.maker.mend_with(restarts)
            if limit == 2:
                venv.reset()
                assert venv.maker.made == [2] and restarts.iterations == [0, 0]
                assert [w.split("; made it anew")[0] for w in capfd.readouterr().err.strip().splitlines()] == [
                    "ppo1: warning: rank 0, at start: env 0 raised RuntimeError: the engine failed to start in its reset",
                    "ppo1: warning: rank 0, at start: env 0 raised RuntimeError: the engine failed to start in the reset of "
                    "the env made in its place"]
            else:  # one restart allowed: the second failure stops the run, its line naming the reset and the count
                with pytest.raises(EnvCrash) as e:
                    venv.reset()
                assert restarts.error(e.value, 0).startswith(
                    "training stopped at start: env 0 raised RuntimeError: the engine failed to start in its reset, one "
                    "more than --env_restarts 1 allows in the run on rank 0")
        finally:
            venv.close()


@pytest.mark.parametrize("limit", [4, 2])
def test_a_new_env_whose_reset_raises_again_is_one_more_restart_and_the_stop_names_the_reset(limit, tmp_path, capfd):
    # the env's step raises in its 3rd step; the first 2 envs made in its place raise in their reset: 3 restarts
    badenv = importlib.import_module("tests.badenv")
    badenv.MADE[0], badenv.FAILED_RESETS[0] = 0, 0
    venv = make_vec_env("tests.badenv:make", 1, seed=0, rank=0,
                        options=EnvOptions(env_kwargs=json.dumps({"fault": "raise", "at": 3, "bad_resets": 2})))
    try:
        restarts = EnvRestarts(limit, 0, 0, str(tmp_path))
        restarts.begin(1)
        venv.maker.mend_with(restarts)
        venv.reset()
        venv.step(np.array([0]))
        venv.step(np.array([0]))
        if limit == 4:  # 3 restarts, the third env starts: the step ends its game as a crash, the run goes on
            done = venv.step(np.array([0]))
            assert done.crashed == {0} and venv.maker.made == [3] and restarts.iterations == [1, 1, 1]
            warnings = capfd.readouterr().err.strip().splitlines()
            assert [w.split("; made it anew")[0] for w in warnings] == [
                "ppo1: warning: rank 0, iteration 1: env 0 raised RuntimeError: the emulator lost its state"] + [
                "ppo1: warning: rank 0, iteration 1: env 0 raised RuntimeError: the engine failed to start in the "
                "reset of the env made in its place"] * 2
            assert [w.split("made it anew (")[1][:6] for w in warnings] == ["1 of -", "2 of -", "3 of -"]
        else:  # the step's raise and the first failed reset take both restarts: the second failed reset stops it
            with pytest.raises(EnvCrash, match="^env 0 raised RuntimeError: the engine failed to start in its "
                                               "reset$") as e:
                venv.step(np.array([0]))
            assert e.value.restartable and not e.value.ours and restarts.iterations == [1, 1]
            assert restarts.error(e.value, 1).startswith(
                "training stopped in iteration 1: env 0 raised RuntimeError: the engine failed to start in its reset, "
                "one more than --env_restarts 2 allows in the run on rank 0")
    finally:
        venv.close()


@pytest.mark.parametrize("raised", [SystemExit(3), ValueError("bad")], ids=["system-exit", "value-error"])
def test_what_the_env_raises_is_mended_and_what_ppo1s_own_code_raises_is_not(raised, tmp_path):
    venv = make_vec_env("CartPole-v1", 2, seed=0, rank=0)
    try:
        venv.reset()
        restarts = EnvRestarts(5, 0, 0, str(tmp_path))
        venv.maker.mend_with(restarts)
        inner = venv.maker.envs[1].gym_env  # the user's env raises in its step (an emulator's sys.exit: SystemExit)
        inner.step = lambda action: (_ for _ in ()).throw(raised)
        done = venv.step(np.array([0, 0]))
        assert done.dones.tolist() == [False, True] and done.crashed == {1} and venv.maker.made == [0, 1]
        venv.maker.envs[0]._checked = lambda obs: obs.undefined  # ppo1's own code around the env raises: a bug
        with pytest.raises(EnvCrash, match=r"^ppo1's own code raised AttributeError: .* in env 0's step \(a bug in "
                                           r"ppo1, not in the env\)$") as e:
            venv.step(np.array([0, 0]))
        assert e.value.ours and venv.maker.made == [0, 1] and restarts.iterations == [0]
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
        f"(1 of --env_restarts 5 in the run on rank 0), its episode counted as cut; traceback in {trace}"]
    assert "Traceback" in trace.read_text() and "the engine exited unexpectedly" in trace.read_text()
    assert torch.load(tmp_path / "child" / "latest.pt", weights_only=True)["iteration"] == 3  # it trained on
    assert engines(tag) == []  # every engine, the dead one's successor included, ended with the run


def test_the_restart_budget_and_the_envs_seeds_carry_across_a_resume_and_one_restart_too_many_stops(tmp_path):
    # every env's engine dies at step 20 of its life (T 16): a restart in iteration 2 on each rank, which
    # --env_restarts 1 allows; the run stops there and resumes with envs made anew (the next seed of their
    # place), whose engines die in iteration 4: one restart more than the run allows, so every rank stops
    common = [*RUN, "--envs_per_rank", "1", "--env_steps", "160", "--env_restarts", "1", "--save_interval", "1",
              "--checkpoint_dir", str(tmp_path), "--model_name", "child",
              "--env_kwargs", json.dumps({"die_at": 20, "dying": 99})]
    r = run_cli([*common, "--stop_after_iterations", "2"], np_=2)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert sorted(line.split("; traceback")[0] for line in r.stderr.strip().splitlines()) == [
        f"ppo1: warning: rank {rank}, iteration 2: env 0 raised RuntimeError: the engine exited unexpectedly; made it "
        f"anew (1 of --env_restarts 1 in the run on rank {rank}), its episode counted as cut" for rank in (0, 1)]
    latest = tmp_path / "child" / "latest.pt"
    ranks = torch.load(latest, weights_only=True)["ranks"]
    assert [(st["restarts"], st["env_made"]) for st in ranks] == [([2], [1]), ([2], [1])]
    # the resume checkpoints every 50 iterations: the stop in iteration 4 writes iteration 3's on both ranks
    r = run_cli([*common, "--save_interval", "50"], np_=2)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "resuming from" in r.stdout and "Traceback" not in r.stdout + r.stderr
    assert [line for line in r.stderr.splitlines() if "error" in line] == [
        "ppo1: error: training stopped in iteration 4: env 0 raised RuntimeError: the engine exited unexpectedly in "
        "its step, one more than --env_restarts 1 allows in the run on rank 0 (traceback in "
        f"{tmp_path / 'child'}/env-error-rank0.txt); nothing of this iteration was used; {latest} now holds "
        "iteration 3 (its games start anew on resume)"], r.stderr
    saved = torch.load(latest, weights_only=True)
    assert saved["iteration"] == 3 and [(st["envs"], st["env_made"]) for st in saved["ranks"]] == [(None, [2])] * 2


def test_a_recurrent_rollout_values_a_crashed_steps_observation_with_the_state_it_had_before_it(tmp_path):
    # env 0's engine dies in step 5: that step never ran (weight 0, no advantage), its episode ends at s_5, the
    # observation it acted on, so step 4 bootstraps from V(s_5 | h_5), the rollout's own value, not V(s_5 | h_6) of
    # the state that has already seen s_5
    importlib.import_module("tests.childenv").started = 0
    torch.manual_seed(0)
    venv = make_vec_env("tests.childenv:make", 2, seed=0, rank=0, options=EnvOptions(env_kwargs='{"die_at": 6}'))
    try:
        venv.maker.mend_with(EnvRestarts(1, 0, 0, str(tmp_path)))
        policy = build("mlp", venv.action_space, venv.obs_spec, rnn="lstm", rnn_size=8)
        seg = RecurrentCollector(venv, policy, 8, venv.reset(), seq_len=8).collect()
        assert seg.dones[:, 0].tolist() == [False] * 5 + [True, False, False] and seg.rewards[5, 0] == 0.0
        assert seg.weights[:, 0].tolist() == [1] * 5 + [0, 1, 1] and seg.weights[:, 1].all()
        assert not seg.cut_values.any()
        adv, _ = gae(seg.rewards, seg.values, seg.dones, seg.last_value, 0.9, 1.0, seg.cut_values, seg.weights > 0)
        assert adv[5, 0] == 0.0
        assert adv[4, 0] == pytest.approx(seg.rewards[4, 0] + 0.9 * seg.values[5, 0] - seg.values[4, 0])
        with torch.no_grad():  # what the value of the state after s_5 would have been: another number
            state = policy.initial_memory(1)
            for t in range(6):
                _, _, state = policy.step(seg.obs[t, :1].map(torch.from_numpy), state)
            assert policy.step(seg.obs[5, :1].map(torch.from_numpy), state)[1].item() != pytest.approx(seg.values[5, 0])
    finally:
        venv.close()


def test_an_engine_that_hangs_is_killed_after_env_step_timeout_and_the_run_goes_on(tmp_path):
    # the hung step used to wait for the watchdog (300 s or more), which then ended the whole run
    tag = f"hang-{os.getpid()}-{time.time()}"
    r = run_cli([*RUN, "--envs_per_rank", "2", "--env_steps", "96", "--env_step_timeout", "2", "--checkpoint_dir",
                 str(tmp_path), "--model_name", "hang", "--env_kwargs", json.dumps({"hang_at": 30, "tag": tag})])
    assert r.returncode == 0, r.stderr
    killed, restarted = r.stderr.strip().splitlines()
    assert killed.startswith("ppo1: warning: rank 0: env 0's step ran past --env_step_timeout 2 s: ending the 1 "
                             "process(es) it started (pid "), killed
    assert restarted.startswith("ppo1: warning: rank 0, iteration 2: env 0 raised RuntimeError: the engine exited "
                                "unexpectedly; made it anew (1 of --env_restarts 5 in the run on rank 0)"), restarted
    assert torch.load(tmp_path / "hang" / "latest.pt", weights_only=True)["iteration"] == 3  # it trained on
    assert engines(tag) == []


def test_a_hung_call_of_an_env_that_started_no_process_is_said_once_and_left_to_the_watchdog():
    from ppo1.envs.calls import Call, CallSlot, CallTimer

    calls = CallSlot()  # a VecEnv's, in env 1's reset for 10 s, which started nothing
    calls.current = Call(1, "reset", 100.0)
    said, looked = [], []
    timer = CallTimer(5, rank=3, say=said.append, find=lambda pids: looked.append(pids) or [], clock=lambda: 110.0)
    timer.watch(calls)
    assert timer.check() and not timer.check()  # once per call
    assert looked == [[]] and said == [
        "ppo1: warning: rank 3: env 1's reset ran past --env_step_timeout 5 s and started no process to end: the rank "
        "waits on it (a second Ctrl-C exits at once; --watchdog_timeout ends the run)"]
    calls.current = Call(1, "make", 90.0)  # making an env is not timed
    assert not timer.check()


def test_env_step_timeout_is_120_s_by_default_0_turns_it_off_and_a_negative_one_is_refused():
    from ppo1 import PPO1Error
    from ppo1.config import Config
    assert Config().env_step_timeout == 120.0 and Config(env_step_timeout=0).validate().env_step_timeout == 0
    with pytest.raises(PPO1Error, match="--env_step_timeout=-1"):
        Config(env_step_timeout=-1).validate()


def test_env_restart_window_counts_only_the_restarts_of_its_last_iterations():
    from ppo1 import PPO1Error
    from ppo1.config import Config
    from ppo1.distributed import Comm
    from ppo1.trainer import Trainer
    whole = Trainer(Config.for_preset(env_name="CartPole-v1", env_restarts=2), Comm())
    window = Trainer(Config.for_preset(env_name="CartPole-v1", env_restarts=2, env_restart_window=100), Comm())
    for trainer in (whole, window):
        trainer.restarts.iterations = [5, 150, 240]
    whole, window = whole.restarts, window.restarts
    assert whole.recent(300) == [5, 150, 240] and whole.span == "in the run on rank 0"
    assert window.recent(300) == [240] and window.span == "in 100 iterations on rank 0"
    assert window.recent(249) == [150, 240]  # iterations 150..249, the current one's included
    with pytest.raises(PPO1Error, match="^--env_restart_window=-1 is invalid: must be a whole number of iterations"):
        Config.for_preset(env_name="CartPole-v1", env_restart_window=-1)


def test_a_real_vizdoom_engine_that_hangs_is_killed_after_env_step_timeout_and_made_anew(tmp_path, monkeypatch):
    # ViZDoom starts its engine at the env's first reset, not when the env is made: the timeout used to find no
    # process of the env to end ("started no process to end") and the rank waited for the watchdog
    import signal
    import threading

    pytest.importorskip("vizdoom", reason="vizdoom is not installed: pip install 'ppo1[vizdoom]'")
    from ppo1.envs.calls import CallTimer
    from ppo1.launch import descendants
    monkeypatch.chdir(tmp_path)  # ViZDoom makes ./_vizdoom
    venv = make_vec_env("VizdoomBasic-v1", 1, seed=0, rank=0)
    guard = threading.Timer(20, lambda: [os.kill(p, signal.SIGKILL) for p in hung])  # never a hung test
    try:
        before = set(descendants())
        venv.reset()
        [engine] = set(descendants()) - before  # started by the reset
        hung = [engine]
        os.kill(engine, signal.SIGSTOP)  # an engine that hangs: alive, answering nothing
        said = []
        venv.maker.mend_with(EnvRestarts(1, 0, 0, str(tmp_path)))
        guard.start()
        # the hung step alone is timed: the new engine's start in the restart may take longer than 1 s on a
        # loaded machine, which is no hang
        timer = CallTimer(1.0, say=lambda line: (said.append(line), setattr(timer, "timeout", 0)))
        timer.watch(venv.calls)
        with timer:
            done = venv.step(np.zeros((1,), np.int64))
        assert guard.is_alive(), "the engine was not ended by --env_step_timeout"
        assert done.crashed == {0} and venv.maker.made == [1] and len(said) == 1, said
        assert said[0].startswith("ppo1: warning: rank 0: env 0's step ran past --env_step_timeout 1 s: ending the "
                                  f"1 process(es) it started (pid {engine})"), said
        [new] = venv.calls.started[0]
        assert new != engine and new in descendants() and engine not in descendants()
        venv.step(np.zeros((1,), np.int64))  # the new engine plays
    finally:
        guard.cancel()
        venv.close()
