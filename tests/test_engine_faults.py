"""An env's own library that dies of a fatal signal during one of its calls (ViZDoom's game.init() when its engine
dies or is killed while it starts): one line naming the env and its call, status 2 on every rank, no run directory
of only a lock and no engine left behind; a fatal signal outside an env call keeps its default action."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, TINY, run_cli
from ppo1.launch import descendants

LINE = ("env 0's reset ended in a segmentation fault inside the env's own library (an engine that died or was killed "
        "during the call takes its library down with it; no restart can mend that); nothing of this call was used, "
        "the newest checkpoint on disk is as it was")


@pytest.mark.parametrize("np_", [1, 2])
def test_an_env_library_that_segfaults_in_its_reset_ends_the_run_in_one_line_and_leaves_nothing(tmp_path, np_):
    # under 2 ranks the fault is rank 1's: rank 0 waits in a collective and ends with the job
    kwargs = {"fault": "segfault", **({"rank": 1} if np_ == 2 else {})}
    r = run_cli([*TINY, "--env_name", "tests.badenv:make", "--env_kwargs", json.dumps(kwargs), "--checkpoint_dir",
                 str(tmp_path), "--model_name", "s"], np_=np_)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert [line for line in r.stderr.splitlines() if line.startswith("ppo1:")] == [
        f"ppo1: error on rank {np_ - 1}: {LINE}"], r.stderr
    assert "Traceback" not in r.stderr and "Segmentation" not in r.stderr
    assert not (tmp_path / "s").exists()  # a new run's folder of only its lock is gone


def test_a_fatal_signal_outside_an_env_call_keeps_its_default_action():
    code = ("import ctypes; from ppo1.envs.faults import EngineFaults\n"
            "with EngineFaults(lambda: None, 0, lambda code: None):\n    ctypes.string_at(0)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == -signal.SIGSEGV and "ppo1" not in r.stderr


def test_a_real_vizdoom_engine_that_hangs_while_it_starts_ends_the_run_in_one_line(tmp_path):
    # the engine stopped the moment it starts (the env's first reset): --env_step_timeout kills it after 1 s and
    # ViZDoom's game.init() dies of a segmentation fault (rc 139 and no line before)
    pytest.importorskip("vizdoom", reason="vizdoom is not installed: pip install 'ppo1[vizdoom]'")
    cmd = [sys.executable, "-m", "run_atari", *TINY, "--env_name", "VizdoomBasic-v1", "--envs_per_rank", "1",
           "--env_step_timeout", "1", "--checkpoint_dir", str(tmp_path), "--model_name", "v"]
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped, start = [], time.monotonic()
    while not stopped and p.poll() is None and time.monotonic() - start < 120:
        for pid in descendants(p.pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    program = f.read().split(b"\0")[0]
            except OSError:
                continue
            if os.path.basename(program) == b"vizdoom":
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
                break
        time.sleep(0.001)
    out, err = p.communicate(timeout=120)
    assert stopped and p.returncode == 2, (p.returncode, out, err)
    assert err.strip().splitlines()[-1] == f"ppo1: error on rank 0: {LINE}", err
    assert not (tmp_path / "v").exists() and not os.path.exists(f"/proc/{stopped[0]}")
