"""Checkpoints and logs that cannot be used (issue 12): one line naming the file and nothing changed, or a fall
back to the newest checkpoint that loads; never a traceback. Real files, real processes; one real
`mpirun -np 2` launch for the refusal of a checkpoint on every rank."""
import os
import shutil
import socket

import pytest
import torch

from conftest import FAST, copy_run, digest, one_line_error, run_cli


def _rewrite(run, change):
    """Apply `change` to the newest checkpoint's dict and write it back as latest.pt and ckpt-2."""
    state = torch.load(run / "latest.pt", weights_only=True)
    change(state)
    torch.save(state, run / "latest.pt")
    shutil.copy(run / "latest.pt", run / "ckpt-00000002.pt")


def test_a_checkpoint_without_a_key_is_one_line_and_nothing_changes(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)
    _rewrite(run, lambda s: s.pop("optimizer"))
    os.unlink(run / "ckpt-00000001.pt")
    before = digest(run / "progress.csv")
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"])
    one_line_error(r, f"no loadable checkpoint in {run}", "is incomplete: it has no 'optimizer'")
    assert digest(run / "progress.csv") == before


@pytest.mark.parametrize("change, expected", [
    (lambda s: s.pop("num_actions"), "is incomplete: it has no 'num_actions'"),
    (lambda s: s.update(iteration="2"), "'iteration' is of type str, not int"),
    (lambda s: s.update(config={"gamma": "high"}), "setting 'gamma' is 'high'"),
    (lambda s: s.update(model=[1, 2]), "'model' is of type list, not dict"),
])
def test_a_checkpoint_with_bad_contents_is_one_line_for_play_and_movie(small_run, tmp_path, change, expected):
    run = copy_run(small_run, tmp_path)
    _rewrite(run, change)
    os.unlink(run / "ckpt-00000001.pt")
    r = run_cli(["--mode", "movie", "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--asset_dir",
                 str(tmp_path / "assets"), "--max_frames", "30"])
    one_line_error(r, str(run / "latest.pt"), expected)


def test_a_checkpoint_that_does_not_fit_the_model_is_one_line_on_every_rank(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)
    _rewrite(run, lambda s: s["model"].update({k: torch.zeros(3) for k in list(s["model"])[:1]}))
    os.unlink(run / "ckpt-00000001.pt")
    # 2 ranks x 1 env: the same 2 actors as the checkpoint's 1 x 2
    args = [a if a != "2" else "1" for a in FAST]
    r = run_cli([*args, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"], np_=2)
    one_line_error(r, f"checkpoint {run / 'latest.pt'} does not fit this run")


def test_a_checkpoint_of_a_newer_ppo1_is_refused_in_one_line_and_no_file_is_touched(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)
    _rewrite(run, lambda s: s.update(format=99))  # latest.pt and ckpt-2, as a later ppo1 writes them
    before = {name: digest(run / name) for name in os.listdir(run) if name != "train.lock"}
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"])
    one_line_error(r, f"checkpoint {run / 'latest.pt'} was written by a newer ppo1 (checkpoint format 99")
    assert "using an older checkpoint" not in r.stdout + r.stderr
    assert {name: digest(run / name) for name in os.listdir(run) if name != "train.lock"} == before


def test_a_checkpoint_holding_code_is_refused_without_torch_advice(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)
    _rewrite(run, lambda s: s.update(evil=socket.AddressFamily.AF_INET))
    os.unlink(run / "ckpt-00000001.pt")
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"])
    line = one_line_error(r, "holds objects other than tensors and plain data, which ppo1 never loads")
    assert "weights_only" not in line and "trusted source" not in line


def test_a_dangling_latest_as_the_only_checkpoint_stops_like_a_corrupt_one(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)
    for name in ("latest.pt", "ckpt-00000001.pt", "ckpt-00000002.pt"):
        os.unlink(run / name)
    os.symlink(run / "ckpt-00000009.pt", run / "latest.pt")
    before = digest(run / "progress.csv")
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"])
    one_line_error(r, f"no loadable checkpoint in {run}", "is a dangling link")
    movie = run_cli(["--mode", "movie", "--checkpoint_dir", str(tmp_path), "--model_name", "r"])
    one_line_error(movie, "is a dangling link")
    assert digest(run / "progress.csv") == before


def test_a_dangling_or_missing_latest_falls_back_to_the_numbered_checkpoints(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)
    os.unlink(run / "latest.pt")
    os.symlink("nowhere.pt", run / "latest.pt")
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "384"])
    assert r.returncode == 0, r.stderr
    assert "is a dangling link" in r.stdout and f"resuming from {run / 'ckpt-00000002.pt'} (iteration 2" in r.stdout
    assert torch.load(run / "latest.pt", weights_only=True)["iteration"] == 3
    os.unlink(run / "latest.pt")
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"])
    assert r.returncode == 0 and f"resuming from {run / 'ckpt-00000003.pt'} (iteration 3" in r.stdout, r.stderr


def test_garbage_in_the_logs_and_the_lock_file_never_gives_a_traceback(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)
    (run / "progress.csv").write_bytes(b"\x00\xff garbage \x00\n" * 3)
    (run / "episodes.rank0.csv").write_bytes(b"\xff\xfe")
    (run / "train.lock").write_bytes(b"\xff not json")
    plot = run_cli(["--mode", "plot", "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--asset_dir",
                    str(tmp_path / "assets")])
    one_line_error(plot, str(run / "progress.csv"))
    r = run_cli([*FAST, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "384"])
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stderr
