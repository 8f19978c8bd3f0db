"""The files of a run directory, written so that a crash, a kill or a full disk never loses the newest checkpoint.

A run directory holds `ckpt-<iteration>.pt` files, `latest.pt` (a hard link to the newest, a stable path for
users), `config.json` and, with --eval_interval, `best.pt` (the checkpoint of the best evaluation so far: the
model and counters play and movie need, with its evaluation's score; never removed by --keep_checkpoints, never
resumed from). Every file is written under a temporary name, fsynced and renamed into place (`atomic_write`), so
an interrupted save never leaves a partial file under a checkpoint's name and never destroys the previous
checkpoint; keep-last-k deletes only older checkpoints this ppo1 reads; loading falls back from latest.pt to the
numbered checkpoints, newest first.

Named for the run's files: this module knows where they lie and how they are written, found and kept, and
nothing of what a checkpoint holds; that is `ppo1.checkpoint` (TrainState, the format, safe loading,
validation), which this module imports and which imports nothing of it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import glob
import io
import json
import os
import re
from typing import Any, Callable

import torch

from ppo1.errors import PPO1Error
from ppo1.checkpoint import NewerCheckpoint, TrainState, config_from_data, load, readable_format
from ppo1.config import Config
from ppo1.safeio import cause

LATEST = "latest.pt"
BEST = "best.pt"
CONFIG = "config.json"


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (disk full, file too large, I/O error); older ones are intact."""


_CKPT_RE = re.compile(r"^ckpt-(\d+)\.pt$")


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, write: Callable[[Any], None]) -> None:
    """Write `path` by calling write(binary file) on a temp file in the same directory, then rename."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(1_000_000)
    except OSError:
        return None


def checkpoint_path(run_dir: str, iteration: int) -> str:
    return os.path.join(run_dir, f"ckpt-{iteration:08d}.pt")


def list_checkpoints(run_dir: str) -> list[str]:
    """The numbered checkpoints of a run directory, newest first."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(run_dir), "ckpt-*.pt")):
        m = _CKPT_RE.match(os.path.basename(path))
        if m:
            found.append((int(m.group(1)), path))
    return [p for _, p in sorted(found, reverse=True)]


def save(run_dir: str, state: TrainState, config: Config, keep: int = 3) -> str:
    """Write config.json, then `state` as ckpt-<iteration>.pt, point latest.pt at it, keep the newest `keep`.

    Returns the checkpoint's path. Raises CheckpointWriteError (naming the file and the cause in
    plain words) if any of these files cannot be written; the previous checkpoint is then still
    the newest, untouched.
    """
    path = checkpoint_path(run_dir, state.iteration)
    target = os.path.join(run_dir, CONFIG)
    try:
        os.makedirs(run_dir, exist_ok=True)
        text = config.to_json().encode() + b"\n"
        if _read_bytes(target) != text:  # unchanged (the usual case): nothing to write
            atomic_write(target, lambda f: f.write(text))
        target = path
        data = _write_state(path, state)
        target = os.path.join(run_dir, LATEST)
        tmp = os.path.join(run_dir, f".{LATEST}.tmp{os.getpid()}")
        try:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.link(path, tmp)
            os.replace(tmp, target)
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EXDEV, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            atomic_write(target, lambda f: f.write(data))  # a file system without hard links: copy
    except OSError as e:
        if target != path and target != os.path.join(run_dir, CONFIG):
            with contextlib.suppress(OSError):  # latest.pt still names the previous one: so must the files
                os.unlink(path)
        raise CheckpointWriteError(f"{target}: {cause(e)}") from e
    _fsync_dir(run_dir)
    for old in list_checkpoints(run_dir)[max(keep, 1):]:
        if _removable(old, state.iteration):
            with contextlib.suppress(OSError):
                os.unlink(old)
    return path


def _removable(path: str, iteration: int) -> bool:
    """Whether keep-last-k may delete the numbered checkpoint `path` after a save of `iteration`: one of an earlier
    iteration that this ppo1 reads (a file of a newer format, or one it cannot read, is left where it is)."""
    m = _CKPT_RE.match(os.path.basename(path))
    if m is None or int(m.group(1)) >= iteration:
        return False
    try:  # mapped, not read: only the few bytes of its dict's plain entries are touched
        data = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:
        return False
    return readable_format(data)


def check_room(run_dir: str, model: torch.nn.Module) -> None:
    """Before a new run's first iteration: PPO1Error where the file system of `run_dir` has less room than one
    checkpoint of `model` takes (its parameters and buffers, Adam's two moments of each parameter, 64 kB for the
    rest), so that a run that could keep nothing stops at its start, not after its last iteration."""
    tensors = list(model.parameters()) + list(model.buffers())
    need = sum(t.numel() * t.element_size() for t in tensors) + 2 * sum(
        p.numel() * 4 for p in model.parameters()) + 65536
    try:
        st = os.statvfs(run_dir)
    except OSError:  # where the file system cannot say, the first save will
        return
    free = st.f_bavail * st.f_frsize
    if free < need:
        raise PPO1Error(f"the file system of {run_dir} has {free / 1e6:.2f} MB free, less than one checkpoint of this "
                        f"run takes (about {need / 1e6:.2f} MB): free some space or train into another "
                        "--checkpoint_dir")


def _write_state(path: str, state: TrainState) -> memoryview:
    """Write `state` to `path` atomically (serialised in memory first: a failed write then raises OSError with
    its errno). Returns the bytes written."""
    buffer = io.BytesIO()
    torch.save(state.to_checkpoint(), buffer)
    data = buffer.getbuffer()
    atomic_write(path, lambda f: f.write(data))
    return data


def save_best(run_dir: str, state: TrainState) -> str:
    """Write `state` (its `best` record set: the evaluation that made it the best) as run_dir/best.pt, atomically
    as every checkpoint, without the optimizer and the ranks' games (play and movie do not need them; a run never
    resumes from best.pt). Returns its path. Raises CheckpointWriteError; the previous best.pt is then intact."""
    path = os.path.join(run_dir, BEST)
    try:
        _write_state(path, dataclasses.replace(state, optimizer=None, n_ranks=None, ranks=None))
    except OSError as e:
        raise CheckpointWriteError(f"{path}: {cause(e)}") from e
    _fsync_dir(run_dir)
    return path


def best_record(run_dir: str) -> tuple[dict | None, str | None]:
    """(the `best` record of run_dir/best.pt: the score and iteration of the best evaluation so far, or None
    where there is no best.pt, and a problem in words where one exists but does not load)."""
    path = os.path.join(run_dir, BEST)
    if not os.path.lexists(path):
        return None, None
    try:
        state = load(path)
    except PPO1Error as e:
        return None, str(e)
    if state.best is None:
        return None, f"{path} holds no evaluation score"
    return state.best, None


def load_newest(run_dir: str, resume: bool = False) -> tuple[TrainState | None, str | None, list[str]]:
    """The newest loadable checkpoint of a run directory.

    Tries latest.pt, then the numbered checkpoints newest first. Returns (state, path, problems):
    state and path are None when the directory holds no checkpoint at all; `problems` lists the
    files that could not be loaded. Raises PPO1Error when checkpoints exist but none loads (a
    dangling latest.pt counts as a checkpoint that does not load). With `resume`, a checkpoint that
    lacks what a training resumes from does not load either.
    """
    candidates = [os.path.join(run_dir, LATEST)] + list_checkpoints(run_dir)
    candidates = [p for p in candidates if os.path.lexists(p)]
    problems = []
    for path in candidates:
        try:
            return load(path, resume), path, problems
        except NewerCheckpoint:  # the run went on with a later ppo1: resuming from behind it would lose that
            raise
        except PPO1Error as e:
            problems.append(str(e))
    if problems:
        raise PPO1Error(f"no loadable checkpoint in {run_dir}: {problems[0]}")
    return None, None, problems


def resolve(run_dir: str, which: str) -> tuple[TrainState, str]:
    """The checkpoint --checkpoint names, loaded: `latest` (the newest of run_dir, as load_newest), `best`
    (run_dir/best.pt) or the path of a .pt file. Returns (state, path); raises PPO1Error in one line."""
    if which in ("", "latest"):
        if not os.path.isdir(run_dir):
            raise PPO1Error(f"no run directory {run_dir}: train one first (--mode train), or point "
                            f"--checkpoint_dir/--model_name at an existing run")
        state, path, _problems = load_newest(run_dir)
        if state is None:
            raise PPO1Error(f"no checkpoint in {run_dir} (no latest.pt or ckpt-*.pt): train first (--mode train)")
        return state, path
    if which == "best":
        path = os.path.join(run_dir, BEST)
        if not os.path.lexists(path):
            raise PPO1Error(f"--checkpoint best: no {BEST} in {run_dir}; training writes it with --eval_interval N "
                            "(the checkpoint of the best evaluation so far)")
        return load(path), path
    if not os.path.isfile(which):
        raise PPO1Error(f"--checkpoint={which!r}: no such file; give latest (the newest, the default), best, or the "
                        "path of a ppo1 .pt checkpoint")
    return load(which), which


def load_config(run_dir: str) -> Config:
    """The config.json saved beside a run's checkpoints. Raises PPO1Error naming the file for any
    content or read error."""
    path = os.path.join(run_dir, CONFIG)
    if not os.path.lexists(path):
        raise PPO1Error(f"no trained run in {run_dir} (missing {CONFIG})")
    try:
        with open(path, "rb") as f:
            raw = f.read(10_000_000)
    except OSError as e:
        raise PPO1Error(f"cannot read {path}: {cause(e)}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PPO1Error(f"{path} is not UTF-8 text (byte {e.start}): is it a ppo1 config.json?") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise PPO1Error(f"{path} is not valid JSON: {e}") from None
    except RecursionError:
        raise PPO1Error(f"{path} is not valid JSON: nested too deeply") from None
    return config_from_data(data, path)
