"""Training logs: a compact console table, a progress bar (on a terminal), progress.csv and TensorBoard
scalars on rank 0; an episode CSV per rank."""
from __future__ import annotations

import csv
import math
import numbers
import os
import sys
from typing import Iterable, TextIO

PROGRESS_COLUMNS = (
    "iteration", "timesteps", "episodes", "ep_return_mean", "ep_length_mean", "pol_loss", "vf_loss",
    "entropy", "approx_kl", "clipfrac", "explained_variance", "clip_param", "stepsize", "sps",
    "time_elapsed", "time_env", "time_inference", "time_update", "time_comm")

# (column, header, width, format) for the console
_CONSOLE = (
    ("iteration", "iter", 7, "d"), ("timesteps", "steps", 10, "d"), ("episodes", "games", 6, "d"),
    ("ep_return_mean", "ret100", 8, ".2f"), ("ep_length_mean", "len100", 7, ".0f"),
    ("pol_loss", "pi_loss", 8, ".4f"), ("vf_loss", "vf_loss", 8, ".4f"), ("entropy", "entropy", 7, ".3f"),
    ("approx_kl", "kl", 8, ".5f"), ("clipfrac", "clipfr", 6, ".3f"), ("explained_variance", "ev", 6, ".3f"),
    ("clip_param", "eps", 6, ".4f"), ("stepsize", "lr", 8, ".2e"), ("sps", "sps", 6, ".0f"),
    ("time_elapsed", "time", 7, ".0f"))


def _fmt(value, spec: str, width: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-".rjust(width)
    return format(int(value) if spec == "d" else value, spec).rjust(width)


def _steps(n: float) -> str:
    """1234567 -> '1.23M'."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{n:.0f}"


def _clock(seconds: float) -> str:
    """Seconds as H:MM:SS ('-' when unknown)."""
    if not math.isfinite(seconds) or seconds < 0:
        return "-"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def progress_bar(row: dict, total_steps: int, width: int = 24) -> str:
    """One line: bar, percent, timesteps, SPS, latest mean return (last 100 games) and ETA."""
    steps, sps = row.get("timesteps", 0), row.get("sps") or 0.0
    frac = min(max(steps / total_steps, 0.0), 1.0) if total_steps else 0.0
    filled = int(round(frac * width))
    ret = row.get("ep_return_mean")
    ret_text = "-" if ret is None or (isinstance(ret, float) and math.isnan(ret)) else f"{ret:.2f}"
    eta = (total_steps - steps) / sps if sps > 0 and total_steps else float("nan")
    return (f"[{'#' * filled}{'.' * (width - filled)}] {100 * frac:5.1f}% {_steps(steps)}/{_steps(total_steps)} "
            f"steps | {sps:.0f} sps | ret100 {ret_text} | ETA {_clock(eta)}")


class ProgressLog:
    """Rank 0's per-iteration log: console table (header every 20 rows), progress.csv, TensorBoard.

    On a terminal the table is followed by a progress bar that is redrawn after every row; in a
    log file (not a TTY) there is no bar. TensorBoard event files go into the run directory (every
    progress.csv column as `progress/<column>` and every finished game as `episodes/return` and
    `episodes/length`, all at step = timesteps); `start_step` (a resumed run's timesteps) hides the
    events an earlier process logged past the checkpoint it resumes from.
    """

    def __init__(self, run_dir: str, out: TextIO | None = None, total_steps: int = 0, start_step: int = 0,
                 tensorboard: bool = True):
        os.makedirs(run_dir, exist_ok=True)
        self.path = os.path.join(run_dir, "progress.csv")
        new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        self._file = open(self.path, "a", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._file, fieldnames=PROGRESS_COLUMNS, extrasaction="ignore")
        if new:
            self._csv.writeheader()
        self.out = out or sys.stdout
        self.total_steps = total_steps
        self.tty = _isatty(self.out)
        self._bar_shown = False
        self._rows = 0
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter
            self._tb = SummaryWriter(log_dir=run_dir, purge_step=start_step or None, flush_secs=30)

    def _clear_bar(self) -> None:
        if self._bar_shown:
            print("\r\033[K", end="", file=self.out)
            self._bar_shown = False

    def note(self, message: str) -> None:
        """Print a line of its own (above the progress bar on a terminal)."""
        self._clear_bar()
        print(message, file=self.out, flush=True)

    def write(self, row: dict, episodes: Iterable[tuple[float, int]] = ()) -> None:
        """Log one iteration's row; `episodes` are the (return, length) of the games finished in it."""
        self._csv.writerow({k: row.get(k, "") for k in PROGRESS_COLUMNS})
        self._file.flush()
        self._clear_bar()
        if self._rows % 20 == 0:
            print(" ".join(h.rjust(w) for _, h, w, _ in _CONSOLE), file=self.out)
        print(" ".join(_fmt(row.get(k), f, w) for k, _, w, f in _CONSOLE), file=self.out, flush=True)
        if self.tty:
            print(progress_bar(row, self.total_steps), end="", file=self.out, flush=True)
            self._bar_shown = True
        self._rows += 1
        if self._tb is not None:
            step = int(row["timesteps"])
            for k in PROGRESS_COLUMNS:
                value = row.get(k)
                if k != "timesteps" and isinstance(value, numbers.Real) and math.isfinite(value):
                    self._tb.add_scalar(f"progress/{k}", value, step)
            for ret, length in episodes:
                self._tb.add_scalar("episodes/return", ret, step)
                self._tb.add_scalar("episodes/length", length, step)

    def close(self) -> None:
        if self._bar_shown:
            print(file=self.out, flush=True)
            self._bar_shown = False
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class EpisodeLog:
    """One rank's finished real games: episodes.rank<r>.csv with return, length, time, timesteps."""

    def __init__(self, run_dir: str, rank: int):
        os.makedirs(run_dir, exist_ok=True)
        path = os.path.join(run_dir, f"episodes.rank{rank}.csv")
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        self._file = open(path, "a", newline="", encoding="utf-8")
        self._csv = csv.writer(self._file)
        if new:
            self._csv.writerow(["return", "length", "time", "timesteps"])

    def write(self, episodes, timesteps: int) -> None:
        for ep in episodes:
            self._csv.writerow([ep.ret, ep.length, round(ep.time, 3), timesteps])
        if episodes:
            self._file.flush()

    def close(self) -> None:
        self._file.close()
