"""Shared test helpers: running the real CLI, under a real `mpirun -np N` where asked."""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The files that take longest (about 20-115 s each on 2 cores), started first: `make test` hands whole files
# to its 2 workers in collection order, so the short files left for the end let both workers finish together.
SLOWEST_FIRST = ["test_faults.py", "test_resume.py", "test_cli.py", "test_device.py", "test_stop_signals.py",
                 "test_recurrent.py", "test_gba.py", "test_mlp.py", "test_own_env.py", "test_multihost.py",
                 "test_wandb.py", "test_bench.py", "test_play.py", "test_evaluation.py", "test_env_restarts.py"]


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOWEST_FIRST)))  # stable: each file's own order


@functools.lru_cache(maxsize=None)
def _mpirun(np_: int) -> list[str] | None:
    from ppo1.distributed import mpirun_command as find
    return find(np_)


def mpirun_command(np_: int) -> list[str]:
    """ppo1's mpirun command for np_ ranks; the test is skipped where there is no mpirun."""
    cmd = _mpirun(np_)
    if cmd is None:
        pytest.skip("no mpirun found")
    return list(cmd)


class ForkServer:
    """tests/forkserver.py: one process that has imported torch, gymnasium and ppo1, forking a real child
    process per single-process run (it then pays no interpreter start and no torch import). Only runs of one
    process without MPI are forked, where what a test pins does not depend on how the process started: every
    `mpirun` run starts real ranks (`python -m run_atari`), each with its own interpreter, imports, signal
    dispositions and exit, as users start them."""

    def __init__(self):
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tests", "forkserver.py")], cwd=REPO,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, cmd: list[str], args: list[str], timeout: float, cwd: str) -> subprocess.CompletedProcess:
        self.proc.stdin.write(json.dumps({"argv": args, "cwd": cwd, "timeout": timeout}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the fork server died"
        r = json.loads(line)
        if r["timed_out"]:
            raise subprocess.TimeoutExpired(cmd, timeout, r["stdout"], r["stderr"])
        return subprocess.CompletedProcess(cmd, r["returncode"], r["stdout"], r["stderr"])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


_fork_server: ForkServer | None = None


def fork_server() -> ForkServer:
    global _fork_server
    if _fork_server is None:
        _fork_server = ForkServer()
    return _fork_server


@pytest.fixture(scope="session", autouse=True)
def _close_fork_server():
    yield
    if _fork_server is not None:
        _fork_server.close()


def run_cli(args: list[str], np_: int = 1, timeout: float = 300, cwd: str | None = None,
            module: str = "run_atari", env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m run_atari ARGS`, under a real `mpirun -np np_ python -m run_atari ARGS` when np_ > 1, with
    `env` added to the environment. A single process with the suite's environment (no --np, no `env`) is a
    child forked by the ForkServer."""
    if np_ == 1 and module == "run_atari" and not env and not any(a.startswith("--np") for a in args):
        return fork_server().run([sys.executable, "-m", module, *args], list(args), timeout, cwd or REPO)
    env = dict(os.environ, **(env or {}), PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", module, *args]
    if np_ > 1:
        cmd = mpirun_command(np_) + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or REPO, env=env)


TINY = ["--env_steps", "512", "--envs_per_rank", "2", "--timesteps_per_actorbatch", "128",
        "--optim_batchsize", "32", "--num_threads", "1"]


@pytest.fixture(scope="session")
def pong_run(tmp_path_factory):
    """(checkpoint_dir, model_name) of a tiny trained Pong run: 2 iterations of 2 envs x 128 steps."""
    ck = tmp_path_factory.mktemp("pong_ck")
    r = run_cli([*TINY, "--checkpoint_dir", str(ck), "--model_name", "pong"])
    assert r.returncode == 0, r.stderr
    return ck, "pong"


@pytest.fixture(scope="session")
def breakout_run(tmp_path_factory):
    """(checkpoint_dir, model_name, CompletedProcess) of a tiny Breakout run (4 iterations, a few
    finished games) that records a 120-frame video every 2 iterations."""
    ck = tmp_path_factory.mktemp("breakout_ck")
    r = run_cli([*TINY, "--env_steps", "1024", "--env_name", "BreakoutNoFrameskip-v4", "--checkpoint_dir",
                 str(ck), "--model_name", "breakout", "--video_interval", "2", "--video_max_frames", "120"])
    assert r.returncode == 0, r.stderr
    return ck, "breakout", r


def first_ratios(monkeypatch, config) -> tuple[list, list[bool]]:
    """Train `config` in this process. Returns, per update, the ratio pi / pi_old of its first minibatch of
    its first epoch, and whether the batch's pi_old (its log-probabilities) stayed the same through it."""
    import importlib

    import torch

    from ppo1.distributed import Comm
    train_mod = importlib.import_module("ppo1.trainer")
    ppo_mod = importlib.import_module("ppo1.ppo")
    first, fixed = [], []
    real_update, real_loss = train_mod.update, ppo_mod.ppo_loss

    def update(policy, optimizer, comm, batch, hp, dist_fn=None):
        first.append(None)
        old = batch.logp.clone()
        stats = real_update(policy, optimizer, comm, batch, hp, dist_fn)
        fixed.append(torch.equal(old, batch.logp))
        return stats

    def loss(dist, values, actions, old_logp, *a, **k):
        if first[-1] is None:  # the first minibatch of the first epoch of this update
            first[-1] = torch.exp(dist.log_prob(actions) - old_logp).detach()
        return real_loss(dist, values, actions, old_logp, *a, **k)
    monkeypatch.setattr(train_mod, "update", update)
    monkeypatch.setattr(ppo_mod, "ppo_loss", loss)
    train_mod.train(config, Comm(None), log=lambda *a, **k: None)
    return first, fixed


def decode(path: str) -> tuple[tuple[int, int], float, list]:
    """(width, height), fps and every frame ((height, width, 3) uint8 arrays) of a video file."""
    from moviepy import VideoFileClip

    clip = VideoFileClip(path)
    try:
        return tuple(clip.size), clip.fps, list(clip.iter_frames())
    finally:
        clip.close()


def run_script(path: str, np_: int, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a Python script under `mpirun -np np_` (or plainly for np_ == 1)."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, path, *args]
    if np_ > 1:
        cmd = mpirun_command(np_) + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)
