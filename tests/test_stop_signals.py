"""Ctrl-C, SIGTERM and hang-ups on the emulator families and under --np: what an env starts (ViZDoom's engine)
gets no stop signal but from its rank, so the rank stops after its iteration with a checkpoint, then closes its
envs; a second Ctrl-C exits at once with the documented line and leaves no engine behind. Real processes,
real signals to the process group, as a terminal sends them."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from childenv import engines
from conftest import REPO, mpirun_command, rows, wait_for_rows
from ppo1.envs.calls import Call
from ppo1.launch import descendants
from ppo1.stops import StopRequest

SECOND = "a second Ctrl-C (or SIGTERM) exits at once without a new checkpoint"

DOOM = ["--env_name", "VizdoomBasic-v1", "--envs_per_rank", "2", "--timesteps_per_actorbatch", "64",
        "--optim_batchsize", "32", "--env_steps", "1000000", "--save_interval", "1000", "--num_threads", "1"]
PONG = ["--envs_per_rank", "2", "--timesteps_per_actorbatch", "256", "--optim_batchsize", "64", "--num_threads", "1",
        "--env_steps", "1000000", "--save_interval", "1000"]  # iterations of over a second: a second Ctrl-C lands in one


def launch(args, tmp_path, np_=None, module="run_atari", **env):
    """`python -m MODULE [--np N] ARGS` in a session of its own (its process group: the terminal's job), with
    the environment variables `env` besides the test's."""
    if np_:
        mpirun_command(np_)  # skips where there is no mpirun
    cmd = [sys.executable, "-m", module, *(["--np", str(np_)] if np_ else []), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(tmp_path),
                            env=dict(os.environ, PYTHONPATH=REPO, **env), start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))


def finish(proc, timeout=120):
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_ctrl_c_to_a_vizdoom_run_under_np_stops_every_rank_with_a_checkpoint(tmp_path):
    # the engines used to get the terminal's SIGINT (through mpirun) and die before the ranks' orderly stop
    pytest.importorskip("vizdoom", reason="vizdoom is not installed: pip install 'ppo1[vizdoom]'")
    run = tmp_path / "checkpoints" / "doom"
    temp = tmp_path / "temp"  # the ranks' temporary directory: ViZDoom's settings folders go there
    temp.mkdir()
    proc = launch([*DOOM, "--envs_per_rank", "1", "--model_name", "doom"], tmp_path, np_=2, module="ppo1",
                  TMPDIR=str(temp))  # its ranks run `python -m ppo1` too, and get the launcher's signals
    wait_for_rows(run / "progress.csv", 2, proc)
    assert len([name for name in os.listdir(temp) if name.startswith("ppo1-vizdoom-")]) == 2  # an engine a rank
    os.killpg(proc.pid, signal.SIGINT)
    out, err = finish(proc)
    assert proc.returncode == 130, (out, err)
    # the ranks end with os._exit: their reapers remove the folders (they were left behind)
    deadline = time.time() + 10
    while [name for name in os.listdir(temp) if name.startswith("ppo1-vizdoom-")] and time.time() < deadline:
        time.sleep(0.1)
    assert [name for name in os.listdir(temp) if name.startswith("ppo1-vizdoom-")] == []
    assert "ViZDoomUnexpectedExitException" not in out + err and "Traceback" not in out + err
    assert "stopped by SIGINT" in out
    assert "ppo1: the policy reads image (4, 84, 84): the env's 240x320x3 'screen' resized to 84x84, gray, " \
           "4 frames; vector (1,): 1 number of 'gamevariables'\n" in out, out
    last = int(rows(run / "progress.csv")[-1]["iteration"])
    assert torch.load(run / "latest.pt", weights_only=True)["iteration"] == last >= 2  # the stop's checkpoint


def test_a_second_signal_to_a_vizdoom_process_exits_at_once_and_leaves_no_engine(tmp_path):
    # the exit that skips closing the envs ends what they started (engines were left running with parent 1)
    pytest.importorskip("vizdoom", reason="vizdoom is not installed: pip install 'ppo1[vizdoom]'")
    # T=256: iterations of nearly 3 s here (10 epochs of 16 minibatches), the second SIGINT's 0.3 s lands in one
    proc = launch([*DOOM, "--timesteps_per_actorbatch", "256", "--model_name", "doom"], tmp_path)
    wait_for_rows(tmp_path / "checkpoints" / "doom" / "progress.csv", 1, proc)
    engines = descendants(proc.pid)
    assert engines, "ViZDoom runs its engines as processes of their own"
    proc.send_signal(signal.SIGINT)  # to the process, as `kill -INT`
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = finish(proc)
    assert proc.returncode == 130, (out, err)
    assert [line for line in err.splitlines() if line.strip()] == [
        f"ppo1: SIGINT: stopping after this iteration with a checkpoint; {SECOND}",
        "ppo1: second SIGINT: exiting now without a checkpoint; none was written yet"], err
    time.sleep(0.5)
    assert [pid for pid in engines if alive(pid)] == []


def test_a_second_ctrl_c_under_np_is_one_line_and_exit_130_not_mpiruns_abort(tmp_path):
    proc = launch([*PONG, "--model_name", "p"], tmp_path, np_=2)
    wait_for_rows(tmp_path / "checkpoints" / "p" / "progress.csv", 1, proc)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = finish(proc)
    assert proc.returncode == 130, (out, err)
    # the ranks' one line (none where the stop's checkpoint was written before the second came), never
    # mpirun's abort of the job (exit 255 and its report) that a second Ctrl-C to mpirun means
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("ppo1: SIGINT: stopping")]
    assert lines in ([], ["ppo1: second SIGINT: exiting now without a checkpoint; none was written yet"],
                     ["ppo1: second SIGINT: exiting now; the checkpoint of this stop is written"]), err
    assert "BAD TERMINATION" not in out + err and "=====" not in out + err


def test_a_rank_killed_with_sigkill_leaves_no_process_of_its_envs_behind(tmp_path):
    # what an env starts carries the rank's token; the rank's reaper kills it when the rank dies, however
    tag = f"sigkill-{os.getpid()}-{time.time()}"
    proc = launch(["--env_name", "tests.childenv:make", "--env_kwargs", json.dumps({"tag": tag}), "--envs_per_rank",
                   "2", "--timesteps_per_actorbatch", "64", "--optim_batchsize", "32", "--env_steps", "10000000",
                   "--num_threads", "1", "--model_name", "k"], tmp_path)
    wait_for_rows(tmp_path / "checkpoints" / "k" / "progress.csv", 1, proc)
    assert len(engines(tag)) == 2
    proc.kill()
    proc.wait()
    deadline = time.time() + 10
    while engines(tag) and time.time() < deadline:
        time.sleep(0.1)
    left = engines(tag)
    for pid in left:  # they hold the test's pipes
        os.kill(pid, signal.SIGKILL)
    finish(proc)
    assert left == []


def test_the_first_ctrl_c_says_at_once_which_env_call_holds_the_rank_up_and_what_a_second_does(capfd):
    # the first Ctrl-C printed nothing, while a hung env's step kept the run from its iteration's end
    calls = {0: None, 1: None}
    for rank, quiet in ((0, False), (1, True)):
        stop = StopRequest(quiet=quiet, rank=rank, calling=lambda r=rank: calls[r])
        stop._handle(signal.SIGINT, None)
        assert stop.signum == signal.SIGINT
    assert capfd.readouterr().err.splitlines() == [  # rank 0 alone speaks for a run that is not held up
        f"ppo1: SIGINT: stopping after this iteration with a checkpoint; {SECOND}"]
    calls[1] = Call(2, "step", time.monotonic() - 41)  # rank 1 has been in env 2's step for 41 s
    for rank, quiet in ((0, False), (1, True)):
        StopRequest(quiet=quiet, rank=rank, calling=lambda r=rank: calls[r])._handle(signal.SIGTERM, None)
    assert capfd.readouterr().err.splitlines() == [
        f"ppo1: SIGTERM: stopping after this iteration with a checkpoint; {SECOND}",
        "ppo1: SIGTERM: rank 1 waits for env 2's step (running for 41 s); it stops after this iteration with a "
        f"checkpoint once that returns; {SECOND}"]
