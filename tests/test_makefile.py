"""The Makefile's set-up: an interpreter the user names is used or make stops with one line (never a venv
of another Python made in its place), and `make procgen` refuses a venv whose Python has no Procgen wheel."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


@needs_make
def test_a_python_that_cannot_make_the_venv_stops_make_instead_of_falling_back(tmp_path):
    venv = tmp_path / "venv"
    r = make("venv", "PYTHON=python-that-is-not-here", f"VENV={venv}")
    assert r.returncode != 0
    assert f"make: PYTHON=python-that-is-not-here cannot make {venv}" in r.stderr
    assert not venv.exists()  # no venv of the default python3 made silently in its place


@needs_make
@pytest.mark.skipif(sys.version_info >= (3, 13), reason="this Python has Procgen wheels: make procgen would install them")
def test_make_procgen_refuses_a_venv_older_than_python_3_13(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(sys.executable, venv / "bin" / "python")
    (venv / ".installed").touch()  # newer than setup.py: make takes the venv as set up and installs nothing
    r = make("procgen", f"VENV={venv}")
    assert r.returncode != 0
    assert f"make: Procgen needs Python 3.13 or newer; {venv} has Python 3.{sys.version_info.minor}" in r.stderr
    assert "pip install" not in r.stdout


@needs_make
def test_make_train_leaves_fast_its_own_actors_and_gives_other_presets_8(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").touch()  # newer than setup.py: make -n prints only the training command
    fast = make("-n", "train", f"VENV={venv}").stdout.strip().splitlines()[-1]
    paper = make("-n", "train", f"VENV={venv}", "PRESET=paper").stdout.strip().splitlines()[-1]
    assert "--preset fast" in fast and "--envs_per_rank" not in fast  # the preset's (Pong: 2 ranks x 4 envs)
    assert "--preset paper" in paper and "--envs_per_rank 4" in paper
