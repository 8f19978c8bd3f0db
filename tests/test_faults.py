"""Faults and hostile inputs (issue 12): the run lock, full disks, unwritable paths, bad file contents,
stale temp files and bounds. Real files, real processes, real `mpirun -np 2`; full and read-only
file systems are real tmpfs / bind mounts (root only: skipped otherwise)."""
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch

from conftest import REPO, mpirun_command, run_cli
from ppo1 import checkpoint

# 1 rank x 2 envs x 64 steps = 128 steps per iteration (2 ranks: 256); a checkpoint every iteration
FAST = ["--envs_per_rank", "2", "--timesteps_per_actorbatch", "64", "--optim_batchsize", "16", "--num_threads", "1",
        "--save_interval", "1"]


# ---------------------------------------------------------------------------------------------- helpers
def one_line_error(r, *expected):
    """The run failed with status 2 and exactly one line on stderr (the error), no traceback anywhere."""
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("ppo1: error: "), r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def rows(path):
    import csv
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _mount(*args):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a file system")
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount here: {r.stderr.strip()}")


def _umount(path):
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def tmpfs(path, size="40m", read_only=False):
    """A real tmpfs of `size` at `path` (read-only if asked), unmounted afterwards."""
    os.makedirs(path, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}" + (",ro" if read_only else ""), "tmpfs", str(path))
    try:
        yield str(path)
    finally:
        _umount(path)


@contextlib.contextmanager
def read_only_view(src, path):
    """`src` seen read-only at `path` (a read-only bind mount), unmounted afterwards."""
    os.makedirs(path, exist_ok=True)
    _mount("--bind", str(src), str(path))
    try:
        r = subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot remount read-only: {r.stderr.strip()}")
        yield str(path)
    finally:
        _umount(path)


def fill(directory):
    """Fill the file system of `directory` to the last byte."""
    with open(os.path.join(directory, "filler"), "wb") as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()


def hangup_default():
    """In a started child: SIGHUP at its default, as a terminal starts a program, even when the suite itself
    runs under nohup (whose ignored SIGHUP the child would inherit and, by design, keep ignoring)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start(args, np_):
    env = dict(os.environ, PYTHONPATH=REPO)
    cmd = [sys.executable, "-m", "run_atari", *args]
    if np_ > 1:
        cmd = mpirun_command(np_) + cmd
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
                            start_new_session=True, preexec_fn=hangup_default)


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


def wait_for_rows(path, n, proc, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and len(rows(path)) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError("training did not log in time")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run directory of 2 iterations (ckpt-1, ckpt-2, latest.pt = ckpt-2) to copy from."""
    ck = tmp_path_factory.mktemp("faults_ck")
    r = run_cli([*FAST, "--env_steps", "256", "--checkpoint_dir", str(ck), "--model_name", "t"])
    assert r.returncode == 0, r.stderr
    return ck / "t"


def copy_run(trained, tmp_path, name="r"):
    shutil.copytree(trained, tmp_path / name)
    return tmp_path / name


# ---------------------------------------------------------------------------------------------- the run lock
def test_a_second_training_of_a_run_being_trained_is_refused_and_the_first_is_unaffected(tmp_path):
    run = tmp_path / "L"
    args = [*FAST, "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path), "--model_name", "L"]
    first = start(args, np_=2)
    with killed_on_failure(first):
        wait_for_rows(run / "progress.csv", 2, first)
        second = run_cli(args, np_=2)  # on every rank (test_two_trainings_started_together: one process)
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
    args = [*FAST, "--env_steps", "512", "--checkpoint_dir", str(tmp_path), "--model_name", "T"]
    procs = [start(args, np_=2), start(args, np_=1)]
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


def test_a_killed_training_leaves_no_stale_lock(tmp_path):
    args = [*FAST, "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path), "--model_name", "k"]
    proc = start(args, np_=1)
    wait_for_rows(tmp_path / "k" / "progress.csv", 1, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    r = run_cli([*args, "--stop_after_iterations", "1"])
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------------------------- full disk
def test_full_disk_warns_training_continues_and_the_final_checkpoint_fails_in_one_line(tmp_path):
    # on 2 ranks (a single process's final failed save: test_resume's small disk)
    np_ = 2
    step = 128 * np_  # steps per iteration
    with tmpfs(tmp_path / "disk", "40m") as disk:
        args = [*FAST, "--checkpoint_dir", disk, "--model_name", "d"]
        assert run_cli([*args, "--env_steps", str(2 * step)], np_=np_).returncode == 0
        latest = os.path.join(disk, "d", "latest.pt")
        before = digest(latest)
        fill(disk)
        r = run_cli([*args, "--env_steps", str(4 * step)], np_=np_)   # iterations 3, 4
        assert "disk full (ENOSPC)" in r.stdout and "training continues" in r.stdout, r.stdout
        assert "checkpoint at iteration 3 not written" in r.stdout
        one_line_error(r, "checkpoint at iteration 4 not written", "disk full (ENOSPC)", "the previous one is intact")
        assert "inline_container" not in r.stdout + r.stderr
        assert digest(latest) == before
        assert not [n for n in os.listdir(os.path.join(disk, "d")) if ".tmp" in n]
        state, path, problems = checkpoint.load_newest(os.path.join(disk, "d"), resume=True)  # it resumes
        assert (state.iteration, os.path.realpath(path), problems) == (2, os.path.realpath(latest), [])


# ---------------------------------------------------------------------------------------------- unwritable paths
@pytest.mark.parametrize("np_", [1, 2])
def test_a_checkpoint_dir_that_is_a_file_is_refused_before_any_work(tmp_path, np_):
    (tmp_path / "file").write_text("not a directory")
    r = run_cli([*FAST, "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path / "file")], np_=np_)
    one_line_error(r, f"cannot create the run directory {tmp_path / 'file'}", "not a directory (ENOTDIR)")
    assert "iter" not in r.stdout


def test_a_run_under_proc_is_refused():
    r = run_cli([*FAST, "--checkpoint_dir", "/proc/ppo1-test"])
    one_line_error(r, "cannot create the run directory /proc/ppo1-test/")


@pytest.mark.parametrize("np_", [1])  # at 2 ranks rank 0's refusal reaches all as a directory that is a file's
def test_a_read_only_file_system_is_refused_for_training(tmp_path, np_):
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        r = run_cli([*FAST, "--checkpoint_dir", ro, "--model_name", "x"], np_=np_)
        one_line_error(r, f"cannot create the run directory {ro}/x", "read-only file system (EROFS)")


def test_a_read_only_run_can_be_watched_not_trained_and_assets_need_a_writable_dir(trained, tmp_path):
    with read_only_view(trained, tmp_path / "ck" / "t") as run:
        ck = os.path.dirname(run)
        r = run_cli([*FAST, "--checkpoint_dir", ck, "--model_name", "t", "--env_steps", "512"])
        one_line_error(r, f"cannot write into the run directory {run}", "read-only file system (EROFS)")
        movie = run_cli(["--mode", "movie", "--checkpoint_dir", ck, "--model_name", "t", "--asset_dir",
                         str(tmp_path / "assets"), "--max_frames", "30"])
        assert movie.returncode == 0, movie.stderr
        with tmpfs(tmp_path / "ro_assets", "1m", read_only=True) as assets:
            for np_ in (1, 2):
                movie = run_cli(["--mode", "movie", "--checkpoint_dir", ck, "--model_name", "t", "--asset_dir",
                                 assets, "--max_frames", "30"], np_=np_)
                one_line_error(movie, f"cannot create the asset directory {assets}/t", "read-only file system")
            plot = run_cli(["--mode", "plot", "--checkpoint_dir", ck, "--model_name", "t", "--asset_dir", assets])
            one_line_error(plot, "read-only file system")


# ---------------------------------------------------------------------------------------------- file contents
BAD_CONFIGS = {
    "not UTF-8": (b"\xff\xfe{\x00", "is not UTF-8 text"),
    "not JSON": (b"{gamma: 0.9", "is not valid JSON"),
    "nested too deeply": (b"[" * 100_000, "is not valid JSON"),
    "a list": (b"[1, 2]", "does not hold a JSON object"),
    "a string for a bool": (b'{"deterministic": "yes"}', "setting 'deterministic' is 'yes', must be of type bool"),
    "a string for a float": (b'{"gamma": "high"}', "setting 'gamma' is 'high', must be of type float"),
    "a bool for an int": (b'{"seed": true}', "setting 'seed' is True, must be of type int"),
    "out of range": (b'{"gamma": 7}', "setting gamma=7.0 is invalid: must be in (0, 1]"),
    "an unknown key": (b'{"bogus": 1}', "unknown settings ['bogus']"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_a_bad_config_json_is_one_line_naming_the_file(tmp_path, case):
    content, expected = BAD_CONFIGS[case]
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "config.json").write_bytes(content)
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r"])
    line = one_line_error(r, str(tmp_path / "r" / "config.json"), expected)
    assert "--gamma" not in line and "--deterministic" not in line


def test_a_config_json_that_is_a_directory_is_one_line_on_every_rank(tmp_path):
    (tmp_path / "r" / "config.json").mkdir(parents=True)
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r"], np_=2)
    one_line_error(r, f"cannot read {tmp_path / 'r' / 'config.json'}: it is a directory (EISDIR)")


def _rewrite(run, change):
    """Apply `change` to the newest checkpoint's dict and write it back as latest.pt and ckpt-2."""
    state = torch.load(run / "latest.pt", weights_only=True)
    change(state)
    torch.save(state, run / "latest.pt")
    shutil.copy(run / "latest.pt", run / "ckpt-00000002.pt")


@pytest.mark.parametrize("np_", [1, 2])
def test_a_checkpoint_without_a_key_is_one_line_and_nothing_changes(trained, tmp_path, np_):
    run = copy_run(trained, tmp_path)
    _rewrite(run, lambda s: s.pop("optimizer"))
    os.unlink(run / "ckpt-00000001.pt")
    before = digest(run / "progress.csv")
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"], np_=np_)
    one_line_error(r, f"no loadable checkpoint in {run}", "is incomplete: it has no 'optimizer'")
    assert digest(run / "progress.csv") == before


@pytest.mark.parametrize("change, expected", [
    (lambda s: s.pop("num_actions"), "is incomplete: it has no 'num_actions'"),
    (lambda s: s.update(iteration="2"), "'iteration' is of type str, not int"),
    (lambda s: s.update(config={"gamma": "high"}), "setting 'gamma' is 'high'"),
    (lambda s: s.update(model=[1, 2]), "'model' is of type list, not dict"),
])
def test_a_checkpoint_with_bad_contents_is_one_line_for_play_and_movie(trained, tmp_path, change, expected):
    run = copy_run(trained, tmp_path)
    _rewrite(run, change)
    os.unlink(run / "ckpt-00000001.pt")
    r = run_cli(["--mode", "movie", "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--asset_dir",
                 str(tmp_path / "assets"), "--max_frames", "30"])
    one_line_error(r, str(run / "latest.pt"), expected)


def test_a_checkpoint_that_does_not_fit_the_model_is_one_line_on_every_rank(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    _rewrite(run, lambda s: s["model"].update({k: torch.zeros(3) for k in list(s["model"])[:1]}))
    os.unlink(run / "ckpt-00000001.pt")
    # 2 ranks x 1 env: the same 2 actors as the checkpoint's 1 x 2
    args = [a if a != "2" else "1" for a in FAST]
    r = run_cli([*args, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"], np_=2)
    one_line_error(r, f"checkpoint {run / 'latest.pt'} does not fit this run")


def test_a_checkpoint_holding_code_is_refused_without_torch_advice(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    _rewrite(run, lambda s: s.update(evil=socket.AddressFamily.AF_INET))
    os.unlink(run / "ckpt-00000001.pt")
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"])
    line = one_line_error(r, "holds objects other than tensors and plain data, which ppo1 never loads")
    assert "weights_only" not in line and "trusted source" not in line


def test_a_dangling_latest_as_the_only_checkpoint_stops_like_a_corrupt_one(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    for name in ("latest.pt", "ckpt-00000001.pt", "ckpt-00000002.pt"):
        os.unlink(run / name)
    os.symlink(run / "ckpt-00000009.pt", run / "latest.pt")
    before = digest(run / "progress.csv")
    for np_ in (1, 2):
        r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"], np_=np_)
        one_line_error(r, f"no loadable checkpoint in {run}", "is a dangling link")
    movie = run_cli(["--mode", "movie", "--checkpoint_dir", str(tmp_path), "--model_name", "r"])
    one_line_error(movie, "is a dangling link")
    assert digest(run / "progress.csv") == before


def test_a_dangling_or_missing_latest_falls_back_to_the_numbered_checkpoints(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    os.unlink(run / "latest.pt")
    os.symlink("nowhere.pt", run / "latest.pt")
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "384"])
    assert r.returncode == 0, r.stderr
    assert "is a dangling link" in r.stdout and f"resuming from {run / 'ckpt-00000002.pt'} (iteration 2" in r.stdout
    assert torch.load(run / "latest.pt", weights_only=True)["iteration"] == 3
    os.unlink(run / "latest.pt")
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"])
    assert r.returncode == 0 and f"resuming from {run / 'ckpt-00000003.pt'} (iteration 3" in r.stdout, r.stderr


def test_garbage_in_the_logs_and_the_lock_file_never_gives_a_traceback(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    (run / "progress.csv").write_bytes(b"\x00\xff garbage \x00\n" * 3)
    (run / "episodes.rank0.csv").write_bytes(b"\xff\xfe")
    (run / "train.lock").write_bytes(b"\xff not json")
    plot = run_cli(["--mode", "plot", "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--asset_dir",
                    str(tmp_path / "assets")])
    one_line_error(plot, str(run / "progress.csv"))
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "384"])
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stderr


# ---------------------------------------------------------------------------------------------- stale temp files
def test_stale_temp_files_of_an_interrupted_save_are_removed_at_the_next_start(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    stale = [".ckpt-00000003.pt.tmp4242", ".latest.pt.tmp4242", ".config.json.tmp77", ".ppo1-write-test-abc"]
    kept = [".mine.tmp1", "notes.txt", "ckpt-00000003.pt.tmp4242"]
    for name in stale + kept:
        (run / name).write_bytes(b"x" * 1000)
    (run / "videos").mkdir()
    (run / "videos" / ".recording-4242.mp4").write_bytes(b"x")
    # --num_threads above the cores: clamped with a note
    args = [a if a != "1" else "9999" for a in FAST]
    r = run_cli([*args, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--stop_after_iterations", "1"])
    assert r.returncode == 0, r.stderr
    assert "removed 5 temp file(s) of an interrupted save" in r.stdout
    assert "--num_threads=9999 is more than the" in r.stdout
    left = set(os.listdir(run))
    assert not left & set(stale) and set(kept) <= left
    assert os.listdir(run / "videos") == []


# ---------------------------------------------------------------------------------------------- bounds
BOUNDS = {
    "negative count": (["--stop_after_iterations", "-1"], "--stop_after_iterations: '-1' is invalid: must be a whole "
                                                          "number >= 0 (0 = off)"),
    "envs_per_rank": (["--envs_per_rank", "100000"], "--envs_per_rank=100000 is invalid: must be at most 256"),
    "video_max_frames": (["--video_max_frames", "1e9"], "--video_max_frames=1000000000 is invalid"),
    "episodes": (["--mode", "play", "--episodes", "1e9"], "--episodes=1000000000 is invalid: must be a whole "
                                                          "number >= 1 and <= 10000"),
    "max_frames": (["--mode", "movie", "--max_frames", "1e9"], "--max_frames=1000000000 is invalid"),
    "memory": (["--timesteps_per_actorbatch", "1e8", "--env_steps", "1e9", "--envs_per_rank", "1"],
               "one iteration's batch needs"),
}


@pytest.mark.parametrize("case", sorted(BOUNDS))
def test_out_of_bounds_values_are_refused_in_one_line(tmp_path, case):
    args, expected = BOUNDS[case]
    r = run_cli([*args, "--checkpoint_dir", str(tmp_path)])
    one_line_error(r, expected)


def test_a_negative_count_is_refused_on_every_rank(tmp_path):
    r = run_cli(["--stop_after_iterations", "-1", "--checkpoint_dir", str(tmp_path)], np_=2)
    one_line_error(r, "must be a whole number >= 0")


# ---------------------------------------------------------------------------------------------- minor
def test_render_needs_an_x_server_that_answers_not_just_a_display_variable():
    from ppo1.player import x_server_answers

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port >= 6000
        assert x_server_answers(f"127.0.0.1:{port - 6000}.0")
    assert not x_server_answers(f"127.0.0.1:{port - 6000}")  # closed now
    assert not x_server_answers(":987")
    assert not x_server_answers("") and not x_server_answers("garbage")


def test_a_second_sigterm_exits_at_once_with_one_line(tmp_path):
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "s"]
    proc = start(args, np_=2)
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "s" / "progress.csv", 1, proc)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    # the second signal lands during the iteration (no checkpoint yet), after the stop's checkpoint
    # (when the first came near an iteration's end: it must not die of the default action, exit 15),
    # after rank 0 has already ended the stop, or first on rank 1, whose exit ends the job before rank 0
    # says anything (a loaded machine): at once, at most one line, no traceback. --save_interval 1000: there is
    # no checkpoint on disk yet, and the line does not claim one
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("ppo1: SIGTERM: stopping")]
    assert lines in ([], ["ppo1: second SIGTERM: exiting now without a checkpoint; none was written yet"],
                     ["ppo1: second SIGTERM: exiting now; the checkpoint of this stop is written"]), (out, err)
    assert "Traceback" not in out + err


@pytest.mark.parametrize("delay", [0.5, 1.5])
def test_ctrl_c_while_starting_is_one_line(tmp_path, delay):
    # 0.4-1.0 s after the start the ranks are importing torch and ale_py: an interrupt there crashed
    # the interpreter's clean-up (SIGSEGV, exit 11) or ended in std::terminate from pybind11
    # (SIGABRT, exit 6); later (1.3-1.6 s here) a rank that left before MPI_Init left the other
    # waiting in it for ever. Now the interrupt is held until every rank is past MPI_Init.
    proc = start([*FAST, "--checkpoint_dir", str(tmp_path)], np_=2)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    with killed_on_failure(proc):
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "terminate" not in err, err
    assert "Segmentation fault" not in out + err, out


def test_a_held_interrupt_is_recorded_not_raised_and_a_second_one_exits_130(tmp_path):
    from ppo1.launch import HeldInterrupt

    previous = signal.getsignal(signal.SIGINT)
    held = HeldInterrupt().hold()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs at the next bytecode: no KeyboardInterrupt here
        assert held.pending
    finally:
        held.release()
    assert signal.getsignal(signal.SIGINT) is previous
    script = ("import os, signal, time\nfrom ppo1.launch import HeldInterrupt\nHeldInterrupt().hold()\n"
              "os.kill(os.getpid(), signal.SIGINT); time.sleep(0.05)\nos.kill(os.getpid(), signal.SIGINT)\n"
              "time.sleep(5)\nprint('not reached')\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, PYTHONPATH=REPO))
    assert r.returncode == 130 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr == "ppo1: interrupted while starting; nothing was written\n"


# ---------------------------------------------------------------------------------------------- hang-up (SIGHUP)
def _children(pid):
    """The pids of every descendant of `pid`."""
    kids = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat") as f:
                    kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    stack, found = [pid], []
    while stack:
        for child in kids.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def launched_ranks(pid):
    """{rank: pid} of the MPI processes an mpirun (`pid`) started, from their launcher's environment (the
    processes that run run_atari: what a rank starts, as its envs' reaper, inherits that environment)."""
    ranks = {}
    for child in _children(pid):
        with contextlib.suppress(OSError):
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"run_atari" not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{child}/environ", "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
            for var in (b"PMI_RANK", b"OMPI_COMM_WORLD_RANK", b"PMIX_RANK"):
                if var in env:
                    ranks[int(env[var])] = child
    return ranks


def signal_mask(pid, field):
    """The signals in /proc/PID/status's `field` (SigCgt: caught, SigIgn: ignored)."""
    with open(f"/proc/{pid}/status") as f:
        mask = int(next(line for line in f if line.startswith(field + ":")).split()[1], 16)
    return {signal.Signals(n) for n in range(1, 32) if mask >> (n - 1) & 1 and n in signal.Signals._value2member_map_}


def stopped_by_hangup(run, out, err, code):
    """The run stopped for SIGHUP after an iteration, checkpointed it, said so in one line, exit 129."""
    assert code == 129, (code, out, err)
    assert "UCX" not in out + err and "Traceback" not in out + err, (out, err)
    done = len(rows(run / "progress.csv"))
    assert torch.load(run / "latest.pt", weights_only=True)["iteration"] == done
    return done


def resumes_from(args, run, done, np_=1):
    again = run_cli([*args, "--stop_after_iterations", "1"], np_=np_)
    assert again.returncode == 0, again.stderr
    assert f"resuming from {run / 'latest.pt'} (iteration {done}," in again.stdout, again.stdout
    assert torch.load(run / "latest.pt", weights_only=True)["iteration"] == done + 1


@contextlib.contextmanager
def killed_on_failure(proc):
    """Kill `proc`'s process group if it is still running when the block ends (a failed assertion)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_sighup_stops_a_single_process_after_the_iteration_with_a_checkpoint_and_no_ucx_output(tmp_path):
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "h"]
    proc = start(args, np_=1)
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "h" / "progress.csv", 2, proc)
        assert signal.SIGHUP in signal_mask(proc.pid, "SigCgt")
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.2)
        proc.send_signal(signal.SIGHUP)  # a hang-up may come twice (shell, kernel): not "exit at once"
        out, err = proc.communicate(timeout=120)
    done = stopped_by_hangup(tmp_path / "h", out, err, proc.returncode)
    assert f"ppo1: stopped by SIGHUP (a hang-up) at iteration {done} " in out and "second" not in err, (out, err)
    resumes_from(args, tmp_path / "h", done)


def test_sighup_to_one_rank_under_mpirun_stops_every_rank_after_the_same_iteration_with_a_checkpoint(tmp_path):
    # what a launcher or a batch system that passes a hang-up on to the ranks delivers (MPICH's mpirun does not:
    # it dies of SIGHUP and its proxy SIGKILLs the ranks)
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "m"]
    proc = start(args, np_=2)
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "m" / "progress.csv", 2, proc)
        ranks = launched_ranks(proc.pid)
        assert sorted(ranks) == [0, 1], ranks
        for pid in ranks.values():
            assert signal.SIGHUP in signal_mask(pid, "SigCgt")
        os.kill(ranks[1], signal.SIGHUP)
        out, err = proc.communicate(timeout=120)
    done = stopped_by_hangup(tmp_path / "m", out, err, proc.returncode)
    assert out.count("stopped by SIGHUP") == 1, (out, err)
    resumes_from(args, tmp_path / "m", done, np_=2)


def test_a_run_started_under_nohup_keeps_ignoring_sighup(tmp_path):
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "n"]
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.Popen(["nohup", sys.executable, "-m", "run_atari", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO, start_new_session=True)
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "n" / "progress.csv", 1, proc)
        assert signal.SIGHUP in signal_mask(proc.pid, "SigIgn")   # MPI's UCX did not take it over
        assert signal.SIGHUP not in signal_mask(proc.pid, "SigCgt")
        for _ in range(3):
            proc.send_signal(signal.SIGHUP)
            time.sleep(0.2)
        before = len(rows(tmp_path / "n" / "progress.csv"))
        wait_for_rows(tmp_path / "n" / "progress.csv", before + 2, proc)  # training goes on
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "stopped by SIGTERM" in out, (out, err)
    assert "UCX" not in out + err and "SIGHUP" not in out + err


def test_a_hang_up_with_stdout_and_stderr_gone_still_checkpoints(tmp_path):
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "p"]
    proc = start(args, np_=1)
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "p" / "progress.csv", 2, proc)
        proc.stdout.close()  # every later write: EPIPE
        proc.stderr.close()
        n = len(rows(tmp_path / "p" / "progress.csv"))
        wait_for_rows(tmp_path / "p" / "progress.csv", n + 1, proc)  # a row printed into the closed pipe
        proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=120)
    stopped_by_hangup(tmp_path / "p", "", "", proc.returncode)


@pytest.mark.parametrize("np_", [1, 2], ids=["single process", "--np 2"])
def test_closing_the_terminal_stops_training_with_a_checkpoint(tmp_path, np_):
    """A real terminal (a pty whose master is closed): the kernel sends SIGHUP and SIGCONT to the
    session leader (the process, or --np's launcher), and every later write to the terminal fails (EIO)."""
    import fcntl
    import pty
    import select
    import termios
    import threading

    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "t"]
    if np_ > 1:
        mpirun_command(np_)
    master, slave = pty.openpty()
    launch = ["--np", str(np_)] if np_ > 1 else []
    proc = subprocess.Popen([sys.executable, "-m", "run_atari", *launch, *args], stdin=slave, stdout=slave, stderr=slave,
                            env=dict(os.environ, PYTHONPATH=REPO), cwd=REPO, start_new_session=True,
                            preexec_fn=lambda: (hangup_default(), fcntl.ioctl(0, termios.TIOCSCTTY, 0)))
    os.close(slave)
    output, done_reading = [], threading.Event()

    def drain():  # a terminal that is not read fills up and blocks the writer
        while not done_reading.is_set():
            if select.select([master], [], [], 0.1)[0]:
                try:
                    output.append(os.read(master, 65536))
                except OSError:
                    return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "t" / "progress.csv", 2, proc)
        done_reading.set()
        reader.join()
        os.close(master)  # the terminal closes
        proc.wait(timeout=120)
    text = b"".join(output).decode(errors="replace")
    done = stopped_by_hangup(tmp_path / "t", text, "", proc.returncode)
    if np_ == 1:  # the resume after a hang-up's checkpoint (--np 2: test_sighup_to_one_rank_under_mpirun_...)
        resumes_from(args, tmp_path / "t", done, np_=np_)


# ---------------------------------------------------------------------------------------------- torn records
def widths(path):
    """The set of row widths of a CSV file (one width: it parses as one table)."""
    import csv
    with open(path, newline="") as f:
        return {len(row) for row in csv.reader(f)}


def tear(path, cut):
    """Cut the last `cut` bytes of `path` (a kill or a power loss in the middle of an append)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - cut)


EPISODES = b"return,length,time,timesteps\r\n-21.0,812,3.512,128\r\n-20.0,905,4.01,256\r\n-21.0,790,3.3,256\r\n"


def test_a_csv_file_cut_at_any_byte_keeps_exactly_its_whole_records():
    from ppo1.safeio import csv_width, torn_tail

    width = csv_width(EPISODES.split(b"\n")[0])
    for end in range(len(EPISODES) + 1):
        data = EPISODES[:end]
        cut, why = torn_tail(data, width)
        whole = data[:data.rfind(b"\n") + 1]
        assert data[:len(data) - cut] == whole, (end, cut)
        assert bool(cut) == bool(why) == (data != whole)
    merged = b"-21.0,790,3.3," + b"-20.0,905,4.01,256\r\n"  # a record appended onto a torn one
    assert torn_tail(EPISODES + merged, width) == (len(merged), "a last line of 7 fields, not 4")


@pytest.mark.parametrize("cut", [1, 2, 7, "all but 1 byte of the last line", "into the line before"])
def test_a_torn_last_record_of_the_logs_is_dropped_with_one_warning_before_the_run_appends(trained, tmp_path, cut):
    run = copy_run(trained, tmp_path)
    (run / "episodes.rank0.csv").write_bytes(EPISODES)
    kept = {}  # the whole lines left after the tear, and the torn line's length
    for name in ("progress.csv", "episodes.rank0.csv"):
        data = (run / name).read_bytes()
        last = len(data) - (data.rfind(b"\n", 0, len(data) - 1) + 1)  # the last line, with its \r\n
        n = {"all but 1 byte of the last line": last - 1, "into the line before": last + 2}.get(cut, cut)
        torn = data[:-n]
        kept[name] = (torn[:torn.rfind(b"\n") + 1], len(torn) - (torn.rfind(b"\n") + 1))
        tear(run / name, n)
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "384"])
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stderr
    for name, (whole, torn) in kept.items():
        warnings = [line for line in r.stdout.splitlines() if "dropped the torn last record" in line]
        assert f"ppo1: warning: dropped the torn last record of {run / name} (a last line of {torn} bytes without a " \
               f"line end; an earlier run ended while writing it)" in warnings, r.stdout
        assert (run / name).read_bytes().startswith(whole)
        assert len(widths(run / name)) == 1, (run / name).read_bytes()
    assert len(warnings) == 2, r.stdout
    # progress.csv: the torn row is gone, the resumed iteration 3 follows on a line of its own
    whole_rows = kept["progress.csv"][0].count(b"\n") - 1
    assert [int(row["iteration"]) for row in rows(run / "progress.csv")] == [*range(1, whole_rows + 1), 3]


def test_a_log_cut_at_a_record_boundary_is_left_as_it_is(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    (run / "episodes.rank0.csv").write_bytes(EPISODES)
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "384"])
    assert r.returncode == 0 and "dropped the torn" not in r.stdout + r.stderr, r.stdout
    assert [int(row["iteration"]) for row in rows(run / "progress.csv")] == [1, 2, 3]
    assert (run / "episodes.rank0.csv").read_bytes().startswith(EPISODES)


def test_a_last_line_of_another_width_is_dropped_on_every_rank(trained, tmp_path):
    # what an earlier version left: the next run's first row appended onto a torn one (about twice the header's fields)
    args = [a if a != "2" else "1" for a in FAST]  # 2 ranks x 1 env: the checkpoint's 2 actors
    run = copy_run(trained, tmp_path)
    progress = (run / "progress.csv").read_bytes()
    row2 = progress.rstrip(b"\r\n").rsplit(b"\n", 1)[1]
    merged = progress[:-9] + row2 + b"\r\n"
    (run / "progress.csv").write_bytes(merged)
    header = len(progress.split(b"\n", 1)[0].split(b","))  # 20 columns since `epochs` came
    fields = max(widths(run / "progress.csv"))
    assert fields > header
    for rank in (0, 1):
        (run / f"episodes.rank{rank}.csv").write_bytes(EPISODES[:-5])
    r = run_cli([*args, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"], np_=2)
    assert r.returncode == 0, r.stderr
    assert f"dropped the torn last record of {run / 'progress.csv'} (a last line of {fields} fields, not {header};" in r.stdout
    assert f"dropped the torn last record of {run / 'episodes.rank0.csv'} (a last line of " in r.stdout
    assert f"dropped the torn last record of {run / 'episodes.rank1.csv'} (a last line of " in r.stderr
    assert r.stderr.strip().endswith("(rank 1)") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for name in ("progress.csv", "episodes.rank0.csv", "episodes.rank1.csv"):
        assert len(widths(run / name)) == 1, name
    assert [int(row["iteration"]) for row in rows(run / "progress.csv")] == [1, 3, 4]


def test_sighup_to_the_np_launcher_stops_every_rank_with_a_checkpoint_and_exit_129(tmp_path):
    # `python -m run_atari --np 2` stays as mpirun's parent: mpirun runs with SIGHUP ignored (MPICH's would
    # die and its proxy SIGKILL the ranks), and a hang-up here reaches the ranks as mpirun's SIGTERM
    mpirun_command(2)
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "w"]
    proc = start(["--np", "2", *args], np_=1)
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "w" / "progress.csv", 2, proc)
        launcher = _children(proc.pid)
        assert launcher and all(signal.SIGHUP in signal_mask(pid, "SigIgn") for pid in launcher)
        proc.send_signal(signal.SIGHUP)
        proc.send_signal(signal.SIGHUP)  # a hang-up often comes twice
        out, err = proc.communicate(timeout=120)
    stopped_by_hangup(tmp_path / "w", out, err, proc.returncode)  # its resume: test_sighup_to_one_rank_...
    assert err.count("ppo1: hang-up: every rank stops") == 1 and "stopped by SIGTERM" in out, (out, err)


def test_a_new_run_on_a_full_disk_says_no_checkpoint_exists_and_leaves_no_empty_file(tmp_path):
    # it said "the previous one is intact" when there was none, and left 0-byte logs and lock file behind
    with tmpfs(tmp_path / "disk", "1m") as disk:
        fill(disk)
        r = run_cli(["--env_name", "CartPole-v1", *FAST, "--env_steps", "256", "--checkpoint_dir", disk,
                     "--model_name", "d"])
        assert "checkpoint at iteration 1 not written" in r.stdout and "no checkpoint of this run exists yet; " \
            "training continues" in r.stdout, r.stdout
        one_line_error(r, "checkpoint at iteration 2 not written", "disk full (ENOSPC)",
                       "no checkpoint of this run exists yet")
        assert "intact" not in r.stdout + r.stderr
        left = [os.path.join(d, n) for d, _, names in os.walk(disk) for n in names]
        assert left == [os.path.join(disk, "filler")], left  # no empty file, nor the run directory
