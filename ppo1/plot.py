"""`--mode plot`: learning curves (mean return of the last 100 games) of one or more runs as a PNG, each with its
evaluation curve beside it where the run evaluated (--eval_interval; Procgen: its unseen and training levels).

A run is named by `--runs a,b`: each entry is a run name under --checkpoint_dir, a run directory or a
progress.csv. Without --runs the run is --model_name. The x axis is agent steps (`--plot_x timesteps`)
or wall-clock hours (`--plot_x time`).
"""
from __future__ import annotations

import contextlib
import csv
import math
import os
from typing import Callable

from ppo1.errors import PPO1Error
from ppo1.runfiles import load_config
from ppo1.config import Config
from ppo1.metrics import cumulative_seconds
from ppo1.safeio import cause, ensure_writable_dir

X_AXES = ("timesteps", "time")


def find_progress(entry: str, checkpoint_dir: str) -> tuple[str, str]:
    """(label, path of progress.csv) for a --runs entry. Raises PPO1Error if there is none."""
    candidates = [entry, os.path.join(entry, "progress.csv"), os.path.join(checkpoint_dir, entry, "progress.csv")]
    for path in candidates:
        if os.path.isfile(path):
            directory = os.path.dirname(os.path.abspath(path))
            return os.path.basename(directory), path
    raise PPO1Error(f"--runs entry {entry!r} has no progress.csv (looked for {', '.join(candidates[1:])})")


def _read_rows(path: str) -> list[dict]:
    """The rows of a progress.csv, one per iteration, each with `hours` (cumulative wall-clock time) and its
    columns as read. An iteration logged twice (a resumed run that repeated the iterations after its last
    checkpoint) keeps its last row; elapsed time, which restarts at each resume, is made cumulative."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise PPO1Error(f"cannot read {path}: {cause(e)}") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise PPO1Error(f"{path} is not a ppo1 progress.csv: {e}") from None
    if rows and not {"iteration", "timesteps", "ep_return_mean", "time_elapsed"} <= set(rows[0]):
        raise PPO1Error(f"{path} is not a ppo1 progress.csv (columns {sorted(rows[0])})")
    parsed = []
    for row in rows:
        try:
            parsed.append((int(row["iteration"]), float(row["time_elapsed"]), float(row["timesteps"]), row))
        except (TypeError, ValueError):
            continue
    kept: list[dict] = []
    for (iteration, _, steps, row), seconds in zip(parsed, cumulative_seconds(p[1] for p in parsed)):
        while kept and kept[-1]["iteration"] >= iteration:
            kept.pop()
        kept.append({**row, "iteration": iteration, "timesteps": steps, "hours": seconds / 3600.0})
    return kept


def _column(rows: list[dict], column: str) -> tuple[list[float], list[float], list[float]]:
    """(timesteps, hours, values) of the rows where `column` holds a number."""
    points = [(r["timesteps"], r["hours"], _float(r.get(column))) for r in rows]
    points = [p for p in points if not math.isnan(p[2])]
    return [p[0] for p in points], [p[1] for p in points], [p[2] for p in points]


def read_curve(path: str) -> tuple[list[float], list[float], list[float]]:
    """(timesteps, wall-clock hours, ep_return_mean) of a progress.csv, one point per iteration (see
    _read_rows). Rows without a finished game yet (no return) are left out."""
    return _column(_read_rows(path), "ep_return_mean")


# The evaluation curves of a progress.csv (--eval_interval): column -> what the legend calls it where the run
# evaluates on two sets of games (Procgen's unseen and training levels) and where it evaluates on one.
EVAL_CURVES = {"eval_train_return_mean": ("evaluation, training levels", None),
               "eval_return_mean": ("evaluation, unseen levels", "evaluation")}


def read_eval(path: str) -> list[tuple[str, tuple[list[float], list[float], list[float]]]]:
    """The evaluation curves of a progress.csv: [(what the legend calls it, (timesteps, hours, mean return of
    the evaluation's games))], none for a run without --eval_interval."""
    rows = _read_rows(path)
    curves = [(column, _column(rows, column)) for column in EVAL_CURVES]
    curves = [(column, curve) for column, curve in curves if curve[2]]
    both = len(curves) > 1
    return [(EVAL_CURVES[column][0 if both else 1] or EVAL_CURVES[column][0], curve) for column, curve in curves]


def _float(text: str | None) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def _games(paths: list[str]) -> list[str]:
    """The game(s) of the runs, from their config.json where there is one."""
    games = []
    for path in paths:
        try:
            games.append(load_config(os.path.dirname(path)).env_name)
        except PPO1Error:
            continue
    return list(dict.fromkeys(games))


def _steps_label(games: list[str]) -> str:
    """The x label of agent steps, with the frames of one step where every run's family steps several (Atari:
    4; Procgen and vector envs step one frame or none)."""
    from ppo1.envs import families

    def frames(game):
        try:
            family = families.by_name(game)
        except PPO1Error:
            return 1
        return family.frames_per_step if family is not None else 1
    n = {frames(g) for g in games}
    if len(n) == 1 and min(n) > 1:
        return f"agent steps (all actors; 1 step = {min(n)} frames)"
    return "agent steps (all actors)"


def plot(entries: list[str], out_path: str, checkpoint_dir: str = "checkpoints",
         x: str = "timesteps") -> tuple[str, list[str]]:
    """Draw the learning curves of the runs in `entries` into the PNG `out_path`.

    Returns (out_path, labels of the runs left out because none of their games has finished yet).
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    if x not in X_AXES:
        raise PPO1Error(f"--plot_x={x!r} is invalid: must be one of {', '.join(X_AXES)}")
    if not entries:
        raise PPO1Error("--runs is empty: name at least one run")
    runs = [find_progress(e, checkpoint_dir) for e in entries]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    left_out, curves, evaluated = [], 0, False
    for label, path in runs:
        steps, hours, rets = read_curve(path)
        evaluations = read_eval(path)
        evaluated = evaluated or bool(evaluations)
        color = None
        if rets:
            line, = ax.plot(steps if x == "timesteps" else hours, rets, label=label, linewidth=1.5)
            color, curves = line.get_color(), curves + 1
        for (what, (e_steps, e_hours, e_rets)), style in zip(evaluations, ("--", ":")):
            line, = ax.plot(e_steps if x == "timesteps" else e_hours, e_rets, style, marker="o", markersize=3,
                            color=color, label=f"{label}: {what}", linewidth=1.2)
            color, curves = line.get_color(), curves + 1
        if not rets and not evaluations:
            left_out.append(label)
    if len(left_out) == len(runs):
        plt.close(fig)
        raise PPO1Error(f"no finished game in {', '.join(p for _, p in runs)} yet: nothing to plot")
    games = _games([p for _, p in runs])
    ax.set_xlabel(_steps_label(games) if x == "timesteps" else "wall-clock hours")
    ax.set_ylabel("mean return, last 100 games" + ("; evaluations: their games" if evaluated else ""))
    ax.set_title(f"PPO (ppo1) on {', '.join(games) or 'ppo1'}")
    ax.grid(alpha=0.3)
    if curves > 1:
        ax.legend()
    fig.tight_layout()
    try:
        _save(fig, out_path)
    finally:
        plt.close(fig)
    return out_path, left_out


def _save(fig, out_path: str) -> None:
    """Write the figure to the PNG `out_path` under a temporary name renamed into place (no partial file under its
    name). PPO1Error naming the file and the cause where it cannot be written."""
    tmp = os.path.join(os.path.dirname(os.path.abspath(out_path)), f".plot-{os.getpid()}.png")
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        fig.savefig(tmp)
        os.replace(tmp, out_path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise PPO1Error(f"cannot write the plot {out_path}: {cause(e)}") from None


def plot_mode(config: Config, runs: str | None, x: str = "timesteps", model_name_given: bool = False,
              out: Callable[[str], None] = print) -> str:
    """`--mode plot`: the curves of `--runs` (default: --model_name) into <dir>/<name>/learning_curve[_time].png,
    <dir> being asset_dir or, when that is empty (the default), checkpoint_dir: one run's plot lies in its
    own run directory. Returns the PNG's path."""
    entries = [e.strip() for e in runs.split(",") if e.strip()] if runs else [config.model_name]
    labels = [find_progress(e, config.checkpoint_dir)[0] for e in entries]
    name = config.model_name if model_name_given or not runs else "_vs_".join(dict.fromkeys(labels))
    path = os.path.join(config.asset_path(name), "learning_curve" + ("_time" if x == "time" else "") + ".png")
    ensure_writable_dir(os.path.dirname(path), "asset directory")
    _path, left_out = plot(entries, path, config.checkpoint_dir, x)
    drawn = [label for label in labels if label not in left_out]
    out(f"ppo1: learning curve of {', '.join(drawn)} -> {path}"
        + (f" (left out, no finished game yet: {', '.join(left_out)})" if left_out else ""))
    return path
