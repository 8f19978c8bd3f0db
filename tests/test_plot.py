"""--mode plot: learning curves of real runs' progress.csv as PNG files."""
import csv
import shutil

import pytest
from PIL import Image

from conftest import rows, run_cli
from ppo1 import PPO1Error
from ppo1.config import Config
from ppo1.plot import plot, plot_mode, read_curve


def test_plot_mode_writes_a_png_learning_curve_of_the_run(breakout_run, tmp_path):
    ck, name, _ = breakout_run
    r = run_cli(["--mode", "plot", "--checkpoint_dir", str(ck), "--model_name", name, "--asset_dir", str(tmp_path)])
    assert r.returncode == 0, r.stderr
    png = tmp_path / name / "learning_curve.png"
    assert f"-> {png}" in r.stdout
    with Image.open(png) as image:
        assert image.format == "PNG" and image.size == (700, 420)


def test_plot_mode_without_asset_dir_writes_into_the_runs_own_directory(breakout_run, tmp_path):
    ck, name, _ = breakout_run
    shutil.copytree(ck / name, tmp_path / name)
    lines = []
    path = plot_mode(Config(checkpoint_dir=str(tmp_path), model_name=name), None, out=lines.append)
    assert path == str(tmp_path / name / "learning_curve.png") and f"-> {path}" in lines[0]
    with Image.open(path) as image:
        assert image.format == "PNG"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_plot_compares_runs_against_wall_clock_time(breakout_run, tmp_path):
    ck, name, _ = breakout_run
    shutil.copy(ck / name / "progress.csv", tmp_path / "progress.csv")
    out = tmp_path / "compare.png"
    assert plot([str(ck / name), str(tmp_path / "progress.csv")], str(out), str(ck), x="time") == (str(out), [])
    with Image.open(out) as image:
        assert image.format == "PNG"
    with pytest.raises(PPO1Error, match="--runs entry 'nope' has no progress.csv"):
        plot(["nope"], str(out), str(ck))


def test_a_resumed_runs_repeated_iterations_and_restarted_clock_are_merged(breakout_run, tmp_path):
    ck, name, _ = breakout_run
    progress = rows(ck / name / "progress.csv")
    resumed = progress + [dict(p, time_elapsed=str(float(p["time_elapsed"]) / 10)) for p in progress[2:]]
    with open(tmp_path / "progress.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(progress[0]))
        writer.writeheader()
        writer.writerows(resumed)
    steps, hours, _returns = read_curve(str(tmp_path / "progress.csv"))
    assert steps == sorted(set(steps)) and steps[-1] == 1024
    assert hours == sorted(hours)


def test_the_step_axis_counts_four_frames_a_step_only_for_atari_games():
    from ppo1.plot import _steps_label
    assert _steps_label(["PongNoFrameskip-v4", "ALE/Breakout-v5"]) == "agent steps (all actors; 1 step = 4 frames)"
    assert _steps_label(["procgen:coinrun"]) == "agent steps (all actors)"      # one frame a step
    assert _steps_label(["CartPole-v1"]) == "agent steps (all actors)"          # no frames
    assert _steps_label(["PongNoFrameskip-v4", "CartPole-v1"]) == "agent steps (all actors)"
    assert _steps_label([]) == "agent steps (all actors)"                       # no config.json to tell
