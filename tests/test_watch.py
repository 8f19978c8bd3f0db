"""Watching training: TensorBoard scalars, the terminal progress bar and videos, on a real run."""
import csv
import os
import re

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import decode, rows
from ppo1.metrics import EVAL_COLUMNS, PROGRESS_COLUMNS, ProgressLog


def test_tensorboard_holds_every_progress_column_and_every_game_at_its_timesteps(breakout_run):
    ck, name, _ = breakout_run
    run = ck / name
    events = EventAccumulator(str(run), size_guidance={"scalars": 0})
    events.Reload()
    progress = rows(run / "progress.csv")
    steps = [int(p["timesteps"]) for p in progress]
    assert set(events.Tags()["scalars"]) >= {f"progress/{c}" for c in PROGRESS_COLUMNS
                                             if c != "timesteps" and c not in EVAL_COLUMNS}  # no --eval_interval
    assert [e.step for e in events.Scalars("progress/iteration")] == steps == [256, 512, 768, 1024]
    for column in ("clip_param", "entropy", "sps"):
        assert [e.value for e in events.Scalars(f"progress/{column}")] == pytest.approx(
            [float(p[column]) for p in progress], rel=1e-5)
    games = rows(run / "episodes.rank0.csv")
    assert games, "Breakout games end within a few hundred steps"
    returns = events.Scalars("episodes/return")
    assert [(e.step, e.value) for e in returns] == [(int(g["timesteps"]), float(g["return"])) for g in games]
    assert len(events.Scalars("episodes/length")) == len(games)


def test_progress_bar_on_a_terminal_and_plain_lines_in_a_file(tmp_path):
    row = {c: 0.5 for c in PROGRESS_COLUMNS}
    row.update(iteration=3, timesteps=768, episodes=2, ep_return_mean=1.5, sps=128.0)
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        log = ProgressLog(str(tmp_path / "tty"), out=tty, total_steps=1024, tensorboard=False)
        assert log.tty
        log.write(row)
        log.note("ppo1: a message")
        log.close()
    shown = b""
    while True:  # the terminal's side: everything written, then EIO once the writer is closed
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    shown = shown.decode()
    bar = "[##################......]  75.0% 768/1.02k steps | 128 sps | ret100 1.50 | ETA 0:00:02"
    assert bar in shown and "\r\x1b[K" + "ppo1: a message" in shown
    with open(tmp_path / "log.txt", "w") as f:
        log = ProgressLog(str(tmp_path / "file"), out=f, total_steps=1024, tensorboard=False)
        log.write(row)
        log.close()
    text = (tmp_path / "log.txt").read_text()
    assert "ETA" not in text and "\r" not in text and len(text.splitlines()) == 2  # header + row


def test_training_with_video_interval_writes_bounded_videos_into_the_run(breakout_run):
    ck, name, r = breakout_run
    videos = sorted((ck / name / "videos").glob("*.mp4"))
    assert [v.name.split("_score")[0] for v in videos] == ["iter000002_512steps", "iter000004_1024steps"]
    for video in videos:
        assert video.name.endswith("_partial.mp4")  # a Breakout game is longer than 120 frames
        size, _fps, decoded = decode(str(video))
        assert size == (160, 210) and len(decoded) == 120
    assert len(re.findall(r"ppo1: video at iteration (2|4) \([\d.]+ s, other ranks waited\)", r.stdout)) == 2


def test_a_progress_csv_of_before_the_epochs_and_eval_columns_gets_them_when_the_run_resumes(tmp_path):
    old_columns = PROGRESS_COLUMNS[:PROGRESS_COLUMNS.index("epochs")]
    old_rows = [[str(i)] + ["0.5"] * (len(old_columns) - 1) for i in (1, 2)]
    with open(tmp_path / "progress.csv", "w", newline="") as f:
        csv.writer(f).writerows([old_columns, *old_rows])
    log = ProgressLog(str(tmp_path), out=open(os.devnull, "w"), tensorboard=False)
    log.write({**{c: 0.25 for c in PROGRESS_COLUMNS}, "iteration": 3, "timesteps": 768, "epochs": 2.5})
    log.close()
    with open(tmp_path / "progress.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == list(PROGRESS_COLUMNS)
    new = len(PROGRESS_COLUMNS) - len(old_columns)
    assert table[1:3] == [r + [""] * new for r in old_rows]  # the old rows, their epochs and evaluations unknown
    assert len(table) == 4 and table[3][PROGRESS_COLUMNS.index("epochs")] == "2.5"
    assert [r["iteration"] for r in rows(tmp_path / "progress.csv")] == ["1", "2", "3"]
    ProgressLog(str(tmp_path), out=open(os.devnull, "w"), tensorboard=False)  # already current: untouched
    with open(tmp_path / "progress.csv", newline="") as f:
        assert list(csv.reader(f)) == table
