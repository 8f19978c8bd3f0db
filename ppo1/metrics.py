"""Training logs: a compact console table, a progress bar (on a terminal), progress.csv and TensorBoard
scalars on rank 0; an episode CSV per rank; the named timers of an iteration.

Each part of an iteration records its own values by name into a Recorder (SB3's record/dump): the
update's statistics, the schedule, the run's counters and last-100-games means, the timers; `dump`
writes the row. The columns of progress.csv are PROGRESS_COLUMNS, whatever the order of recording.
"""
from __future__ import annotations

import contextlib
import csv
import functools
import io
import math
import numbers
import os
import socket
import struct
import sys
import time
from typing import Callable, Iterable, Iterator, TextIO

from ppo1.safeio import AppendFile

# The columns of an evaluation (--eval_interval; ppo1.evaluation), empty in the rows of iterations without one.
# eval_*: the games --mode play plays (Procgen: its unseen levels); eval_train_*: Procgen's training levels.
EVAL_COLUMNS = ("eval_return_mean", "eval_return_std", "eval_length_mean", "eval_games", "eval_steps",
                "eval_seconds", "eval_train_return_mean", "eval_train_return_std")

PROGRESS_COLUMNS = (
    "iteration", "timesteps", "episodes", "ep_return_mean", "ep_length_mean", "pol_loss", "vf_loss",
    "entropy", "approx_kl", "clipfrac", "explained_variance", "clip_param", "stepsize", "sps",
    "time_elapsed", "time_env", "time_inference", "time_update", "time_comm", "epochs", *EVAL_COLUMNS,
    "time_rollout", "time_advantages", "time_statistics", "time_evaluation", "time_logging", "time_checkpoint",
    "grad_norm")

# Profile names (progress.csv's time_<name> columns), each the seconds of one part of the loop summed over the run:
# rollout (the whole collection: env stepping and inference are parts of it), advantages (reward shaping and
# normalisation, GAE), statistics (the observation statistics and their allreduce, where a rank first waits for
# the slower one), update (the PPO epochs; comm, the gradient allreduces, is part of it), evaluation, logging (the
# episode and statistics collectives, the sync check, rank 0's row, video and snapshot), checkpoint (the stop
# decision and the checkpoint). What the loop spends outside them all is time_elapsed less their sum.
TIMERS = ("env", "inference", "update", "comm", "rollout", "advantages", "statistics", "evaluation", "logging",
          "checkpoint")


def cumulative_seconds(elapsed: Iterable[float]) -> list[float]:
    """The time_elapsed column of successive progress.csv rows made cumulative: a resumed run's
    process restarts its clock, so each drop starts a new segment on top of the previous one's end."""
    out, offset, last = [], 0.0, 0.0
    for t in elapsed:
        if t < last:  # a new process: its clock restarted
            offset += last
        last = t
        out.append(offset + t)
    return out


class Profile:
    """Named wall-clock timers that add up over a run, one per part of the training loop (TIMERS): `env`
    (stepping games), `inference` (the rollout's forward passes), `update` (the PPO epochs), `comm` (inside
    gradient allreduces), ..."""

    now = staticmethod(time.perf_counter)

    def __init__(self):
        self.seconds = dict.fromkeys(TIMERS, 0.0)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    @contextlib.contextmanager
    def timer(self, name: str) -> Iterator[None]:
        """Time the body of a `with` into `name`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def record(self, log: "Recorder") -> None:
        log.record(**{f"time_{name}": s for name, s in self.seconds.items()})


def timed(name: str) -> Callable:
    """A method decorator: the method's seconds into its object's `profile` (a Profile) under `name`."""
    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def timed_method(self, *args, **kwargs):
            with self.profile.timer(name):
                return method(self, *args, **kwargs)
        return timed_method
    return wrap


class Recorder:
    """One iteration's row, recorded by name by whoever knows each value; `dump` hands it to the
    ProgressLog (rank 0) and to each other sink (`sinks`: objects with ProgressLog's `write(row, episodes)`,
    such as wandb_log.WandbLog), then starts the next row. Without a ProgressLog (other ranks) it keeps nothing."""

    def __init__(self, progress: "ProgressLog | None" = None, sinks: Iterable = ()):
        self.progress = progress
        self.sinks = list(sinks)
        self.row: dict = {}

    def record(self, **values) -> None:
        if self.progress is not None:
            self.row.update(values)

    def dump(self, episodes: Iterable[tuple[float, int]] = ()) -> None:
        """Write the row (and the games finished in the iteration, for TensorBoard)."""
        if self.progress is not None:
            episodes = list(episodes)  # read by each sink
            for sink in (self.progress, *self.sinks):
                sink.write(self.row, episodes)
        self.row = {}


# (column, header, width, format) for the console
_CONSOLE = (
    ("iteration", "iter", 7, "d"), ("timesteps", "steps", 10, "d"), ("episodes", "games", 6, "d"),
    ("ep_return_mean", "ret100", 8, ".2f"), ("ep_length_mean", "len100", 7, ".0f"),
    ("pol_loss", "pi_loss", 8, ".4f"), ("vf_loss", "vf_loss", 8, ".4f"), ("entropy", "entropy", 7, ".3f"),
    ("approx_kl", "kl", 8, ".5f"), ("clipfrac", "clipfr", 6, ".3f"), ("epochs", "epochs", 6, ".2f"),
    ("explained_variance", "ev", 6, ".3f"),
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
        self.out = out or sys.stdout
        self._bar_shown = False
        with contextlib.suppress(OSError):  # checked writable before; a failure shows at the first write
            os.makedirs(run_dir, exist_ok=True)
        self.path = os.path.join(run_dir, "progress.csv")
        self.total_steps = total_steps
        self.tty = _isatty(self.out)
        self._bar_shown = False
        self._rows = 0
        self._csv = AppendFile(self.path, _csv_line(PROGRESS_COLUMNS), warn=self.note)
        self._csv.drop_torn_record()  # a kill or power loss in an earlier run's append
        upgrade_header(self.path, PROGRESS_COLUMNS, warn=self.note)  # columns added since (epochs, eval_)
        self._csv.append(b"")  # the header, now
        # TensorBoard: this log's scalars, and the images of other writers (snapshots)
        self.events = EventFile(run_dir, start_step, warn=self.note) if tensorboard else None
        if self.events is not None:
            self.events.write(start_step, [])

    def _clear_bar(self) -> None:
        if self._bar_shown:
            self._print("\r\033[K", end="")
            self._bar_shown = False

    def note(self, message: str) -> None:
        """Print a line of its own (above the progress bar on a terminal)."""
        self._clear_bar()
        self._print(message, flush=True)

    def _print(self, *args, **kwargs) -> None:
        """Print to the console; a console that cannot be written (a full disk, a closed pipe) is skipped."""
        try:
            print(*args, file=self.out, **kwargs)
        except (OSError, ValueError):
            pass

    def write(self, row: dict, episodes: Iterable[tuple[float, int]] = ()) -> None:
        """Log one iteration's row; `episodes` are the (return, length) of the games finished in it."""
        self._csv.append(_csv_line([row.get(k, "") for k in PROGRESS_COLUMNS]))
        self._clear_bar()
        if self._rows % 20 == 0:
            self._print(" ".join(h.rjust(w) for _, h, w, _ in _CONSOLE))
        self._print(" ".join(_fmt(row.get(k), f, w) for k, _, w, f in _CONSOLE), flush=True)
        if self.tty:
            self._print(progress_bar(row, self.total_steps), end="", flush=True)
            self._bar_shown = True
        self._rows += 1
        if self.events is not None:
            scalars = [(f"progress/{k}", row.get(k)) for k in PROGRESS_COLUMNS if k != "timesteps"]
            for ret, length in episodes:
                scalars += [("episodes/return", ret), ("episodes/length", length)]
            self.events.write(int(row["timesteps"]),
                           [(tag, v) for tag, v in scalars if isinstance(v, numbers.Real) and math.isfinite(v)])

    def close(self) -> None:
        if self._bar_shown:
            self._print(flush=True)
            self._bar_shown = False


def upgrade_header(path: str, columns: tuple[str, ...], warn: Callable[[str], None] | None = None) -> bool:
    """A progress.csv of an older ppo1, whose header is a strict prefix of `columns` (a column added
    since at the end: `epochs`), gets the current header, its old rows an empty value in each new
    column, so a resumed run appends rows that match the header. Written to a temp file and renamed
    into place; a file that cannot be read or rewritten is left as it is (`warn` says so). Returns
    whether the file was rewritten."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error):
        return False  # none yet (the usual case), or not ours to fix: it stays as it is and appends go on
    if not rows or not (len(rows[0]) < len(columns) and tuple(rows[0]) == columns[:len(rows[0])]):
        return False
    pad = [""] * (len(columns) - len(rows[0]))
    tmp = f"{path}.upgrade-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(_csv_line(columns) + b"".join(_csv_line(row + pad) for row in rows[1:]))
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if warn:
            from ppo1.safeio import cause
            warn(f"ppo1: warning: cannot add the new columns to {path}: {cause(e)}; its new rows have "
                 f"{len(pad)} more field(s) than its header")
        return False
    return True


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _csv_line(values) -> bytes:
    """One CSV record (with its line end) as UTF-8 bytes."""
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)
    return buffer.getvalue().encode("utf-8")


class EventFile:
    """TensorBoard scalars written synchronously into one event file of the run directory.

    Replaces torch's SummaryWriter, whose writer thread dies with a traceback when the disk is full:
    here each iteration's events are one append (AppendFile), so a failure is a warning and the
    file keeps whole records only. `start_step` (a resumed run's timesteps) writes the session-start
    event that makes TensorBoard hide events an earlier process logged at or past it, as
    SummaryWriter(purge_step=...) does.
    """

    def __init__(self, run_dir: str, start_step: int = 0, warn: Callable[[str], None] | None = None):
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._Event, self._Summary = Event, Summary
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.0"
        self.path = os.path.join(run_dir, name)
        header = self._record(Event(wall_time=time.time(), step=start_step, file_version="brain.Event:2"))
        if start_step:
            header += self._record(Event(wall_time=time.time(), step=start_step,
                                         session_log=SessionLog(status=SessionLog.START)))
        self._file = AppendFile(self.path, header, warn=warn)

    @staticmethod
    def _record(event) -> bytes:
        """One TFRecord: length, its masked CRC, the serialized event, its masked CRC."""
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))

    def write(self, step: int, scalars: list[tuple[str, float]]) -> bool:
        """Append one Event per scalar (tag, value) at `step`. Returns whether they were written."""
        now = time.time()
        data = b"".join(self._record(self._Event(
            wall_time=now, step=step, summary=self._Summary(value=[self._Summary.Value(tag=tag, simple_value=value)])))
            for tag, value in scalars)
        return self._file.append(data)

    def write_image(self, step: int, tag: str, png: bytes, height: int, width: int) -> bool:
        """Append one Event holding an RGB image (PNG bytes) at `step`. Returns whether it was written."""
        image = self._Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=png)
        event = self._Event(wall_time=time.time(), step=step,
                            summary=self._Summary(value=[self._Summary.Value(tag=tag, image=image)]))
        return self._file.append(self._record(event))


class EpisodeLog:
    """One rank's finished real games: episodes.rank<r>.csv with return, length, time, timesteps.

    A write that fails (disk full ...) is reported once through `warn` and training goes on.
    """

    def __init__(self, run_dir: str, rank: int, warn: Callable[[str], None] | None = None):
        path = os.path.join(run_dir, f"episodes.rank{rank}.csv")
        if warn is None:
            def warn(message: str) -> None:
                with contextlib.suppress(OSError, ValueError):  # a stderr that is gone (a hang-up)
                    print(f"{message} (rank {rank})", file=sys.stderr, flush=True)
        try:  # rank 0 made the run directory, but a rank on another host (no shared disk) makes its own
            os.makedirs(run_dir, exist_ok=True)
        except OSError:
            pass  # the append below reports the problem in plain words
        self._file = AppendFile(path, _csv_line(["return", "length", "time", "timesteps"]), warn=warn)
        self._file.drop_torn_record()  # a kill or power loss in an earlier run's append
        self._file.append(b"")  # the header, now

    def write(self, episodes, timesteps: int) -> None:
        if episodes:
            self._file.append(b"".join(_csv_line([ep.ret, ep.length, round(ep.time, 3), timesteps])
                                       for ep in episodes))

    def close(self) -> None:
        pass
