"""Shared test helpers: running the real CLI, under a real `mpirun -np N` where asked."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=None)
def mpirun_command(np_: int) -> list[str]:
    """The mpirun of the venv's MPI (the mpich wheel) or of the system, with the flags it needs here."""
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    exe = here if os.path.exists(here) else shutil.which("mpirun") or shutil.which("mpiexec")
    if exe is None:
        pytest.skip("no mpirun found")
    cmd = [exe, "-np", str(np_)]
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        cmd[1:1] = ["--oversubscribe", "--allow-run-as-root"]
    return cmd


def run_cli(args: list[str], np_: int = 1, timeout: float = 300, cwd: str | None = None,
            module: str = "run_atari") -> subprocess.CompletedProcess:
    """Run `python -m run_atari ARGS`, under `mpirun -np np_` when np_ > 1."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", module, *args]
    if np_ > 1:
        cmd = mpirun_command(np_) + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or REPO, env=env)


def run_script(path: str, np_: int, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a Python script under `mpirun -np np_` (or plainly for np_ == 1)."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, path, *args]
    if np_ > 1:
        cmd = mpirun_command(np_) + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)
