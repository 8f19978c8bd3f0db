"""Shared test helpers: running the real CLI, under a real `mpirun -np N` where asked."""
from __future__ import annotations

import contextlib
import csv
import functools
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    process per single-process run (it then pays no interpreter start and no torch import): to its end (run) or
    in the background (start: a ForkedRun the test signals and waits on). Only runs of one
    process without MPI are forked, where what a test pins does not depend on how the process started: every
    `mpirun` run starts real ranks (`python -m run_atari`), each with its own interpreter, imports, signal
    dispositions and exit, as users start them."""

    def __init__(self):
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tests", "forkserver.py")], cwd=REPO,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.streams: list[str] = []  # the background runs' output directories, removed at close

    def ask(self, request: dict) -> dict:
        """Send one request, return the server's reply (see tests/forkserver.py's protocol)."""
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the fork server died"
        return json.loads(line)

    def run(self, cmd: list[str], args: list[str], timeout: float, cwd: str,
            env: dict | None = None) -> subprocess.CompletedProcess:
        r = self.ask({"argv": args, "cwd": cwd, "timeout": timeout, "env": env or {}})
        if r["timed_out"]:
            raise subprocess.TimeoutExpired(cmd, timeout, r["stdout"], r["stderr"])
        return subprocess.CompletedProcess(cmd, r["returncode"], r["stdout"], r["stderr"])

    def start(self, args: list[str], cwd: str) -> "ForkedRun":
        """A run of `python -m run_atari ARGS` in the background: the server forks it and answers its pid at
        once, so other runs (and the tests' signals) can come while it trains."""
        streams = tempfile.mkdtemp(prefix="ppo1-forked-")
        self.streams.append(streams)
        out, err = os.path.join(streams, "stdout"), os.path.join(streams, "stderr")
        r = self.ask({"start": True, "argv": args, "cwd": cwd, "stdout": out, "stderr": err})
        return ForkedRun(self, r["pid"], out, err)

    def close(self) -> None:
        """End the server; remove the output of every background run, also of one no test read to its end."""
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        for streams in self.streams:
            shutil.rmtree(streams, ignore_errors=True)


class ForkedRun:
    """A background run the ForkServer forked, with what tests use of a Popen: pid (its session's and process
    group's id too), poll, wait, communicate (its whole stdout and stderr, read from the files it wrote) and
    send_signal. The child is the server's, not this process's, so the server reports its exit status."""

    def __init__(self, server: ForkServer, pid: int, out: str, err: str):
        self.server, self.pid, self.out, self.err = server, pid, out, err
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit status, None while it runs."""
        if self.returncode is None:
            self.returncode = self.server.ask({"wait": self.pid, "timeout": 0})["returncode"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for its end (TimeoutExpired past `timeout` s); returns its exit status."""
        if self.returncode is None:
            self.returncode = self.server.ask({"wait": self.pid, "timeout": 3600 if timeout is None else timeout})[
                "returncode"]
        if self.returncode is None:
            raise subprocess.TimeoutExpired(["run_atari"], timeout)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Wait for its end; returns (stdout, stderr)."""
        self.wait(timeout)
        texts = []
        for path in (self.out, self.err):
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
        shutil.rmtree(os.path.dirname(self.out), ignore_errors=True)
        return texts[0], texts[1]

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)


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


# variables a run reads when it uses them, never at an import the fork server has made: a forked child may take
# them (tests/forkserver.py). The compiler's (CC, CXX) and Inductor's cache are read where --compile first compiles,
# in the child: the fork server never imports torch._dynamo or torch._inductor
FORKABLE_ENV = {"TMPDIR", "DISPLAY", "CC", "CXX", "TORCHINDUCTOR_CACHE_DIR"}


def run_cli(args: list[str], np_: int = 1, timeout: float = 300, cwd: str | None = None,
            module: str = "run_atari", env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m run_atari ARGS`, under a real `mpirun -np np_ python -m run_atari ARGS` when np_ > 1, with
    `env` added to the environment. A single process (no --np) whose `env` holds only FORKABLE_ENV variables is a
    child forked by the ForkServer; any other `env` (one read at an import or an interpreter's start) gets a
    fresh interpreter."""
    if np_ == 1 and module == "run_atari" and set(env or {}) <= FORKABLE_ENV and \
            not any(a.startswith("--np") for a in args):
        return fork_server().run([sys.executable, "-m", module, *args], list(args), timeout, cwd or REPO, env)
    env = dict(os.environ, **(env or {}), PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", module, *args]
    if np_ > 1:
        cmd = mpirun_command(np_) + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or REPO, env=env)


TINY = ["--env_steps", "512", "--envs_per_rank", "2", "--timesteps_per_actorbatch", "128",
        "--optim_batchsize", "32", "--num_threads", "1"]


# 1 rank x 2 envs x 64 steps = 128 steps per iteration (2 ranks: 256); a checkpoint every iteration
FAST = ["--envs_per_rank", "2", "--timesteps_per_actorbatch", "64", "--optim_batchsize", "16", "--num_threads",
        "1", "--save_interval", "1"]


@pytest.fixture(scope="session")
def small_run(tmp_path_factory):
    """A run directory of 2 iterations of FAST (ckpt-1, ckpt-2, latest.pt = ckpt-2) to copy from (copy_run)."""
    ck, _ = shared_run(tmp_path_factory, "small_run", lambda ck: run_cli(
        [*FAST, "--env_steps", "256", "--checkpoint_dir", str(ck), "--model_name", "t"]))
    return ck / "t"


def shared_run(tmp_path_factory, key: str, train) -> tuple:
    """(checkpoint_dir, CompletedProcess) of train(checkpoint_dir), a training that must succeed, run once in a
    session: under pytest-xdist the first worker to need it trains it under a lock in the session's common
    directory (basetemp's parent, this session's own), and the others wait for it and read it, with its output.
    The runs are read or copied (copy_run), never changed."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # not under xdist: basetemp's parent is shared with other sessions
        ck = tmp_path_factory.mktemp(key)
        r = train(ck)
        assert r.returncode == 0, r.stderr
        return ck, r
    import fcntl
    shared = tmp_path_factory.getbasetemp().parent / key
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        result = shared / "result.json"
        if not result.exists():  # written last, only after a successful training: it marks the run complete
            ck = shared / "ck"
            shutil.rmtree(ck, ignore_errors=True)  # what a worker that failed before the end left
            ck.mkdir()
            r = train(ck)
            assert r.returncode == 0, r.stderr
            result.write_text(json.dumps(dict(args=r.args, returncode=r.returncode, stdout=r.stdout,
                                              stderr=r.stderr)))
        r = subprocess.CompletedProcess(**json.loads(result.read_text()))
    return shared / "ck", r


def copy_run(run, tmp_path, name="r"):
    """A copy of the run directory `run` as tmp_path/name (tests change their copy, never the original)."""
    shutil.copytree(run, tmp_path / name)
    return tmp_path / name


# 2 envs x 128 steps a rank (2 ranks: 512 steps an iteration), a checkpoint every 2 iterations
SHORT = ["--env_steps", "1024", "--envs_per_rank", "2", "--timesteps_per_actorbatch", "128", "--optim_batchsize",
         "32", "--save_interval", "2", "--num_threads", "1"]


@pytest.fixture(scope="session")
def pong_run(tmp_path_factory):
    """(checkpoint_dir, model_name, CompletedProcess) of a short Pong run under a real `mpirun -np 2`: SHORT with
    --device cpu, 4 iterations (2048 steps). The suite's one 2-rank Pong training that tests read or copy
    (copy_run) rather than train their own; none changes it. One for the session (shared_run)."""
    ck, r = shared_run(tmp_path_factory, "pong_run", lambda ck: run_cli(
        [*SHORT, "--env_steps", "2048", "--checkpoint_dir", str(ck), "--model_name", "pong", "--device", "cpu"],
        np_=2))
    return ck, "pong", r


@pytest.fixture(scope="session")
def cartpole_run(tmp_path_factory):
    """(checkpoint_dir, CompletedProcess) of CartPole with its defaults (baselines' run_mujoco: the network, epochs,
    step size, minibatch, clip range) under mpirun -np 2 x 1 env but with batches of 512 steps a rank, 8 iterations
    of 1024 steps, evaluated after each (3 games: 2 on rank 0, 1 on rank 1; evaluation leaves training bit-identical),
    a checkpoint each iteration of which the newest is kept, and best.pt: the learning check, the evaluation's
    end-to-end run, and the checkpoint that play and movie use. One for the session (shared_run)."""
    ck, r = shared_run(tmp_path_factory, "cartpole_run", lambda ck: run_cli(
        ["--env_name", "CartPole-v1", "--timesteps_per_actorbatch", "512", "--env_steps", "8192", "--seed", "1",
         "--eval_interval", "1", "--eval_episodes", "3", "--keep_checkpoints", "1", "--save_interval", "1",
         "--checkpoint_dir", str(ck), "--model_name", "cp"], np_=2, timeout=400))
    return ck, r


@pytest.fixture(scope="session")
def breakout_run(tmp_path_factory):
    """(checkpoint_dir, model_name, CompletedProcess) of a tiny Breakout run (4 iterations, a few
    finished games) that records a 120-frame video every 2 iterations. One for the session (shared_run)."""
    ck, r = shared_run(tmp_path_factory, "breakout_run", lambda ck: run_cli(
        [*TINY, "--env_steps", "1024", "--env_name", "BreakoutNoFrameskip-v4", "--checkpoint_dir", str(ck),
         "--model_name", "breakout", "--video_interval", "2", "--video_max_frames", "120"]))
    return ck, "breakout", r


# the MPI layer's checks (tests/mpi/NAME.py): local ranks, observation statistics, the gradient average, target_kl
# (last: it makes torch's algorithms deterministic for the rest of its process)
MPI_CHECKS = ("local_rank", "obs_stats", "grad_average", "kl_stop")


@pytest.fixture(scope="session")
def mpi_checks(tmp_path_factory) -> str:
    """The output of MPI_CHECKS run in one real `mpirun -np 2` launch (tests/mpi/checks.py), each ending with
    `rank R NAME: OK` on every rank. One for the session (shared_run); a check that fails fails every test that
    reads this, with its traceback."""
    _, r = shared_run(tmp_path_factory, "mpi_checks", lambda _ck: run_script(
        os.path.join(REPO, "tests", "mpi", "checks.py"), 2, *MPI_CHECKS, timeout=240))
    return r.stdout


def passed_on_both_ranks(output: str, name: str) -> bool:
    return f"rank 0 {name}: OK" in output and f"rank 1 {name}: OK" in output


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

    def update(policy, optimizer, comm, batch, hp, update_pass=None):
        first.append(None)
        old = batch.logp.clone()
        stats = real_update(policy, optimizer, comm, batch, hp, update_pass)
        fixed.append(torch.equal(old, batch.logp))
        return stats

    def loss(logp, entropy, values, old_logp, *a, **k):
        if first[-1] is None:  # the first minibatch of the first epoch of this update
            first[-1] = torch.exp(logp - old_logp).detach()
        return real_loss(logp, entropy, values, old_logp, *a, **k)
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


def _hangup_default():
    """In a started child: SIGHUP at its default, as a terminal starts a program, even when the suite itself
    runs under nohup (whose ignored SIGHUP the child would inherit and, by design, keep ignoring)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start(args: list[str], np_: int = 1, fresh: bool = False, cwd: str | None = None, env: dict | None = None):
    """`python -m run_atari ARGS` in the background, in a session of its own (its process group: a terminal's
    job) with SIGHUP at its default. Under a real `mpirun -np np_` when np_ > 1, and a fresh interpreter with
    `env` added where `fresh` or `env` is given (what the test pins depends on how the process started: its
    streams, an interpreter's start); else a child the ForkServer forks. Returns a Popen or a ForkedRun."""
    if np_ == 1 and not fresh and not env:
        return fork_server().start(list(args), cwd or REPO)
    cmd = [sys.executable, "-m", "run_atari", *args]
    if np_ > 1:
        cmd = mpirun_command(np_) + cmd
    env = dict(os.environ, **(env or {}), PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=cwd or REPO, start_new_session=True, preexec_fn=_hangup_default)


@contextlib.contextmanager
def killed_on_failure(proc):
    """Kill `proc`'s process group if it is still running when the block ends (a failed assertion)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def signalled(args: list[str], progress, sig: int, np_: int = 1, after: int = 2, twice: bool = False,
              check=None, timeout: float = 120, **how) -> tuple[int, str, str]:
    """Start `args` in the background (start(args, np_, **how)), wait for `after` complete rows of the CSV file
    `progress`, call check(proc) (what holds while it runs), send `sig` to its first process (twice, 0.2 s apart,
    if asked) and wait for its end. Returns (exit status, stdout, stderr)."""
    proc = start(args, np_, **how)
    with killed_on_failure(proc):
        wait_for_rows(progress, after, proc)
        if check:
            check(proc)
        proc.send_signal(sig)
        if twice:
            time.sleep(0.2)
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def rows(path) -> list[dict]:
    """The complete records of a CSV file, by its header's columns: a last line without its line end (being
    written at this moment) is not one yet."""
    with open(path, "rb") as f:
        data = f.read()
    text = data[:data.rfind(b"\n") + 1].decode("utf-8", errors="replace")
    return list(csv.DictReader(io.StringIO(text, newline="")))


def wait_for_rows(path, n: int, proc, timeout: float = 180) -> list[dict]:
    """Wait until the CSV file `path` (progress.csv) holds n complete rows while `proc` runs; returns them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            found = rows(path)
            if len(found) >= n:
                return found
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError(f"{path}: not {n} rows in {timeout} s")


def digest(path) -> str:
    """The SHA-256 of a file's bytes."""
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def one_line_error(r, *expected) -> str:
    """The run failed with status 2 and exactly one line on stderr (the error, holding each of `expected`), no
    traceback anywhere. Returns the line."""
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("ppo1: error: "), r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]
