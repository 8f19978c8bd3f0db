"""The run lock (issue 12): one training per run directory, whatever starts a second one; a lock that goes with
its process or its directory. Real processes, real `mpirun -np 2` where the refusal must reach every rank."""
import os
import shutil
import signal
import socket

import pytest
import torch

from conftest import FAST, killed_on_failure, one_line_error, rows, run_cli, start, wait_for_rows


def fcntl_free(path) -> bool:
    """Whether nobody holds the run lock's flock on `path`."""
    import fcntl
    with open(path, "rb") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def test_a_second_training_of_a_run_being_trained_is_refused_on_every_rank_and_the_first_is_unaffected(tmp_path):
    run = tmp_path / "L"
    args = [*FAST, "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path), "--model_name", "L"]
    first = start(args)
    with killed_on_failure(first):
        wait_for_rows(run / "progress.csv", 2, first)
        # 2 ranks x 1 env: the first's 2 actors; a few iterations, were it let in (a lock that did not hold)
        two = [*(a if a != "2" else "1" for a in args), "--env_steps", "2048"]
        second = run_cli(two, np_=2)  # on every rank (test_two_trainings_started_together: one process)
        line = one_line_error(second, f"{run} is in use by another training (pid ",
                              f"on host {socket.gethostname()} since ")
        assert "--model_name" in line
        fresh = run_cli([*args, "--fresh"])  # --fresh may not move a run that is being trained
        one_line_error(fresh, "is in use by another training")
        # reading a run that is being trained works
        movie = run_cli(["--mode", "movie", "--checkpoint_dir", str(tmp_path), "--model_name", "L", "--asset_dir",
                         str(tmp_path / "assets"), "--max_frames", "30"])
        assert movie.returncode == 0, movie.stderr
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=120)
    assert first.returncode == 143, err
    assert "Traceback" not in out + err
    iterations = [int(r["iteration"]) for r in rows(run / "progress.csv")]
    assert iterations == list(range(1, len(iterations) + 1)), "one writer: every iteration logged once"
    assert torch.load(run / "latest.pt", weights_only=True)["iteration"] == iterations[-1]
    assert not [n for n in os.listdir(tmp_path) if n.startswith("L.old-")]
    assert not (run / "train.lock").exists() or fcntl_free(run / "train.lock")  # the lock went with the process


def test_removing_the_run_directory_under_a_training_stops_it_in_one_line_on_every_rank(tmp_path):
    # the lock went with the directory: going on would let a second training of the run in beside this one
    run = tmp_path / "gone"
    args = [*FAST, "--env_steps", "1000000", "--save_interval", "1000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "gone"]
    proc = start(args, np_=2)
    with killed_on_failure(proc):
        wait_for_rows(run / "progress.csv", 1, proc)
        shutil.rmtree(run)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    lines = [line for line in err.splitlines() if line.startswith("ppo1: ")]
    assert len(lines) == 1 and f"the run directory {run} was removed or moved (its lock file with it)" in lines[0], err
    assert "Traceback" not in out + err
    if (run / "progress.csv").exists():  # an iteration under way may have logged once more, no further
        assert len(rows(run / "progress.csv")) <= 1


def test_two_trainings_started_together_one_runs_one_is_refused(tmp_path):
    # two real starts at once, forked together: the race for the lock is the behaviour (that the refusal reaches
    # every rank is test_a_second_training_of_a_run_being_trained_is_refused_on_every_rank's)
    args = [*FAST, "--env_steps", "512", "--checkpoint_dir", str(tmp_path), "--model_name", "T"]
    procs = [start(args), start(args)]
    outputs = [p.communicate(timeout=300) for p in procs]
    results = [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs)]
    assert sorted(code for code, _, _ in results) == [0, 2], results
    _code, out, err = next(r for r in results if r[0] == 2)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "is in use by another training (pid " in lines[0] and "Traceback" not in out + err
    iterations = [int(r["iteration"]) for r in rows(tmp_path / "T" / "progress.csv")]
    assert iterations == list(range(1, len(iterations) + 1))


def test_a_start_whose_write_probe_the_lock_holder_cleans_away_is_still_refused_as_in_use(tmp_path, monkeypatch):
    # CI once saw the refused start of two say "cannot write into the run directory ... (ENOENT)": the holder's
    # clean-up of stale temp files removed the other's `.ppo1-write-test-*` between its write and its unlink.
    import tempfile
    from ppo1 import runlock
    run = str(tmp_path / "R")
    holder = runlock.prepare_run_dir(run, log=lambda _: None)
    real = tempfile.mkstemp

    def probe_then_holder_cleans(*a, **kw):
        fd, path = real(*a, **kw)
        assert runlock.remove_stale_temp_files(run) == [path]  # the holder's start, at that moment
        return fd, path

    monkeypatch.setattr(tempfile, "mkstemp", probe_then_holder_cleans)
    with pytest.raises(runlock.RunLocked, match="is in use by another training"):
        runlock.prepare_run_dir(run, log=lambda _: None)
    holder.release()
