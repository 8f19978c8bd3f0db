"""`python -m run_atari --np N`: the command runs again as N ranks under this environment's mpirun."""
import csv
import os
import shlex
import subprocess
import sys

import pytest

from conftest import REPO, TINY, mpirun_command, run_cli
from ppo1 import runfiles
from ppo1.launch import without_np


def test_without_np_drops_both_spellings_and_keeps_every_other_flag():
    assert without_np(["--np", "2", "--seed", "3", "--np=4", "--npx"]) == ["--seed", "3", "--npx"]


def test_np_2_trains_on_two_ranks_like_mpirun_leaves_the_callers_stdin_and_no_rank_imports_torch_dynamo(tmp_path):
    # mpirun read the caller's stdin ahead (forwarding it to rank 0): `while read x; do ... --np 2 ...; done`
    # ran its first line only; the lines after the training are still the caller's
    mpirun_command(2)  # skips where there is no mpirun
    train = [sys.executable, "-m", "run_atari", "--np", "2", *TINY, "--checkpoint_dir", str(tmp_path), "--model_name",
             "np2"]
    script = f"printf 'a\\nb\\n' | ({shlex.join(train)}; echo status $?; cat)"
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                       env=dict(os.environ, PYTHONPATH=REPO, PYTHONPROFILEIMPORTTIME="1"))  # imports on stderr
    assert r.stdout.splitlines()[-3:] == ["status 0", "a", "b"], (r.stdout, r.stderr[-2000:])
    # torch's optimizers import torch._dynamo at their first call: over a second of CPU per rank per launch
    imported = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")]
    assert imported.count("torch.nn") == imported.count("mpi4py.MPI") == 2  # both ranks' imports are listed
    assert not [m for m in imported if m.startswith("torch._dynamo")]
    assert "2 ranks x 2 envs = 4 actors" in r.stdout
    assert r.stdout.count("ppo1: done") == 1, "rank 0 alone reports, as under mpirun"
    state, _path, _problems = runfiles.load_newest(str(tmp_path / "np2"), resume=True)
    assert state.n_ranks == 2 and state.timesteps == 512
    with open(tmp_path / "np2" / "progress.csv", newline="") as f:
        assert [int(row["timesteps"]) for row in csv.DictReader(f)] == [512]


def test_np_under_mpirun_is_refused_with_one_line_on_every_rank(tmp_path):
    r = run_cli(["--np", "2", *TINY, "--checkpoint_dir", str(tmp_path)], np_=2)
    assert r.returncode == 2
    errors = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "already runs under mpirun" in errors[0], r.stderr
    assert not any(tmp_path.iterdir()), "nothing was written"


@pytest.mark.parametrize("value", ["0.5", "-1"])
def test_np_below_one_is_one_line(value, tmp_path):
    r = run_cli([f"--np={value}", *TINY, "--checkpoint_dir", str(tmp_path)])
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "--np" in r.stderr, r.stderr
