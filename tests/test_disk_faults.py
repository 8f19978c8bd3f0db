"""Full disks, unwritable paths and stale temp files (issue 12): warnings while training can go on, one line
when it cannot. Full and read-only file systems are real tmpfs / bind mounts (root only: skipped otherwise)."""
import contextlib
import os
import re
import subprocess

import pytest

from conftest import FAST, copy_run, digest, one_line_error, run_cli
from ppo1 import runfiles


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


# ---------------------------------------------------------------------------------------------- full disk
def test_full_disk_warns_training_continues_and_the_final_checkpoint_fails_in_one_line(pong_run, tmp_path):
    # on 2 ranks (a single process's final failed save: test_resume's small disk), resuming a copy of the
    # suite's 2-rank Pong run (conftest's pong_run: 4 iterations of 512 steps) on the disk that then fills, with
    # only --env_steps and the run's name: the rerun that resumes without repeating the run's flags
    ck, name, _ = pong_run
    with tmpfs(tmp_path / "disk", "40m") as disk:
        copy_run(ck / name, tmp_path / "disk", "d")
        latest = os.path.join(disk, "d", "latest.pt")
        before = digest(latest)
        fill(disk)
        r = run_cli(["--env_steps", str(6 * 512), "--save_interval", "1", "--checkpoint_dir", disk, "--model_name",
                     "d"], np_=2)   # iterations 5, 6
        assert "resuming from" in r.stdout and "(iteration 4," in r.stdout, r.stdout
        # no flag of the run's repeated: its config is read back (2 envs a rank, 128 steps each), and the
        # iterations go on from the checkpoint's
        assert "2 ranks x 2 envs = 4 actors" in r.stdout and "6 iterations of 512 steps" in r.stdout, r.stdout
        assert [line.split()[:2] for line in r.stdout.splitlines() if re.match(r"\s+\d+\s+\d+\s", line)] == \
            [["5", "2560"], ["6", "3072"]], r.stdout
        assert "disk full (ENOSPC)" in r.stdout and "training continues" in r.stdout, r.stdout
        assert "checkpoint at iteration 5 not written" in r.stdout
        one_line_error(r, "checkpoint at iteration 6 not written", "disk full (ENOSPC)", "the previous one is intact")
        assert "inline_container" not in r.stdout + r.stderr
        assert digest(latest) == before
        assert not [n for n in os.listdir(os.path.join(disk, "d")) if ".tmp" in n]
        state, path, problems = runfiles.load_newest(os.path.join(disk, "d"), resume=True)  # it resumes
        assert (state.iteration, os.path.realpath(path), problems) == (4, os.path.realpath(latest), [])


def test_a_new_run_on_a_full_disk_is_refused_at_its_start_and_leaves_no_empty_file(tmp_path):
    # it trained to its end with warnings before it failed, and left 0-byte logs and lock file behind
    with tmpfs(tmp_path / "disk", "1m") as disk:
        fill(disk)
        r = run_cli(["--env_name", "CartPole-v1", *FAST, "--env_steps", "256", "--checkpoint_dir", disk,
                     "--model_name", "d"])
        one_line_error(r, f"the file system of {disk}/d has 0.00 MB free, less than one checkpoint of this run takes")
        assert "iter" not in r.stdout
        left = [os.path.join(d, n) for d, _, names in os.walk(disk) for n in names]
        assert left == [os.path.join(disk, "filler")], left  # no empty file, nor the run directory


# ---------------------------------------------------------------------------------------------- unwritable paths
def test_a_checkpoint_dir_that_is_a_file_is_refused_before_any_work(tmp_path):
    # rank 0 prepares the run directory; its refusal there reaching every rank of a real mpirun is
    # test_run_lock's (a run in use, refused on 2 ranks at the same stage)
    (tmp_path / "file").write_text("not a directory")
    r = run_cli([*FAST, "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path / "file")])
    one_line_error(r, f"cannot create the run directory {tmp_path / 'file'}", "not a directory (ENOTDIR)")
    assert "iter" not in r.stdout


def test_a_run_under_proc_is_refused():
    r = run_cli([*FAST, "--checkpoint_dir", "/proc/ppo1-test"])
    one_line_error(r, "cannot create the run directory /proc/ppo1-test/")


def test_a_read_only_file_system_is_refused_for_training(tmp_path):
    # (at 2 ranks rank 0's refusal reaches all as test_run_lock's refusal of a run in use does)
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        r = run_cli([*FAST, "--checkpoint_dir", ro, "--model_name", "x"])
        one_line_error(r, f"cannot create the run directory {ro}/x", "read-only file system (EROFS)")


def test_a_read_only_run_can_be_watched_not_trained_and_assets_need_a_writable_dir(small_run, tmp_path):
    with read_only_view(small_run, tmp_path / "ck" / "t") as run:
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


# ---------------------------------------------------------------------------------------------- stale temp files
def test_stale_temp_files_of_an_interrupted_save_are_removed_at_the_next_start(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)
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
