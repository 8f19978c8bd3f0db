"""Training logs: a compact console table and progress.csv on rank 0; an episode CSV per rank."""
from __future__ import annotations

import csv
import math
import os
import sys
from typing import TextIO

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


class ProgressLog:
    """Rank 0's per-iteration log: console table (header every 20 rows) and progress.csv."""

    def __init__(self, run_dir: str, out: TextIO | None = None):
        os.makedirs(run_dir, exist_ok=True)
        self.path = os.path.join(run_dir, "progress.csv")
        new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        self._file = open(self.path, "a", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._file, fieldnames=PROGRESS_COLUMNS, extrasaction="ignore")
        if new:
            self._csv.writeheader()
        self.out = out or sys.stdout
        self._rows = 0

    def write(self, row: dict) -> None:
        self._csv.writerow({k: row.get(k, "") for k in PROGRESS_COLUMNS})
        self._file.flush()
        if self._rows % 20 == 0:
            print(" ".join(h.rjust(w) for _, h, w, _ in _CONSOLE), file=self.out)
        print(" ".join(_fmt(row.get(k), f, w) for k, _, w, f in _CONSOLE), file=self.out, flush=True)
        self._rows += 1

    def close(self) -> None:
        self._file.close()


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
