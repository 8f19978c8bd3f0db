"""Checkpoints: atomic writes (temp file + fsync + rename), keep-last-k, safe loading, validation.

A run directory holds `ckpt-<iteration>.pt` files, `latest.pt` (a hard link to the newest, a stable
path for users) and `config.json`. Every file is written under a temporary name and renamed into
place, so an interrupted save never leaves a partial file under a checkpoint's name and never
destroys the previous checkpoint. Files load with `torch.load(..., weights_only=True)`: no pickled
code from a checkpoint is ever run.
"""
from __future__ import annotations

import glob
import os
import re
from typing import Any, Callable

import torch

from ppo1 import PPO1Error
from ppo1.config import Config

LATEST = "latest.pt"
CONFIG = "config.json"
FORMAT = 1


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


def save(run_dir: str, state: dict, config: Config, keep: int = 3) -> str:
    """Write state as ckpt-<iteration>.pt, point latest.pt at it, write config.json, keep the newest `keep`.

    Returns the checkpoint's path. Raises CheckpointWriteError if the file cannot be written; the
    previous checkpoints are then untouched.
    """
    path = checkpoint_path(run_dir, state["iteration"])
    try:
        os.makedirs(run_dir, exist_ok=True)
        atomic_write(path, lambda f: torch.save(state, f))
    except (OSError, RuntimeError) as e:  # torch.save reports a short write as RuntimeError
        raise CheckpointWriteError(f"{type(e).__name__}: {e}".splitlines()[0]) from e
    latest = os.path.join(run_dir, LATEST)
    tmp = os.path.join(run_dir, f".{LATEST}.tmp{os.getpid()}")
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.link(path, tmp)
        os.replace(tmp, latest)
    except OSError:  # a file system without hard links: copy
        atomic_write(latest, lambda f: torch.save(state, f))
    atomic_write(os.path.join(run_dir, CONFIG), lambda f: f.write(config.to_json().encode() + b"\n"))
    _fsync_dir(run_dir)
    for old in list_checkpoints(run_dir)[max(keep, 1):]:
        try:
            os.unlink(old)
        except OSError:
            pass
    return path


def load(path: str) -> dict:
    """Load one checkpoint safely (weights_only). Raises PPO1Error if missing, truncated or corrupt."""
    if not os.path.exists(path):
        raise PPO1Error(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, bad pickle, forbidden global ...
        raise PPO1Error(f"checkpoint {path} is corrupt or unreadable: {type(e).__name__}: {e}".splitlines()[0]) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT or "model" not in state:
        raise PPO1Error(f"checkpoint {path} is not a ppo1 checkpoint (format {FORMAT})")
    return state


def load_newest(run_dir: str) -> tuple[dict | None, str | None, list[str]]:
    """The newest loadable checkpoint of a run directory.

    Tries latest.pt, then the numbered checkpoints newest first. Returns (state, path, problems):
    state and path are None when the directory holds no checkpoint at all; `problems` lists the
    files that could not be loaded. Raises PPO1Error when checkpoints exist but none loads.
    """
    candidates = [os.path.join(run_dir, LATEST)] + list_checkpoints(run_dir)
    candidates = [p for p in candidates if os.path.exists(p)]
    problems = []
    for path in candidates:
        try:
            return load(path), path, problems
        except PPO1Error as e:
            problems.append(str(e))
    if problems:
        raise PPO1Error(f"no loadable checkpoint in {run_dir}: {problems[0]}")
    return None, None, problems


def load_config(run_dir: str) -> Config:
    """The config.json saved beside a run's checkpoints."""
    path = os.path.join(run_dir, CONFIG)
    if not os.path.exists(path):
        raise PPO1Error(f"no trained run in {run_dir} (missing {CONFIG})")
    with open(path, encoding="utf-8") as f:
        return Config.from_json(f.read())


def validate(state: dict, config: Config, num_actions: int, n_actors: int) -> None:
    """Raise PPO1Error if a checkpoint does not belong to this game, model or number of actors."""
    saved = state["config"]
    path = "checkpoint"
    if saved["env_name"] != config.env_name:
        raise PPO1Error(f"{path} was trained on {saved['env_name']}, not {config.env_name}")
    if saved["model_type"] != config.model_type:
        raise PPO1Error(f"{path} holds a {saved['model_type']!r} model, not --model_type={config.model_type}")
    if state["num_actions"] != num_actions:
        raise PPO1Error(f"{path} has {state['num_actions']} actions, {config.env_name} has {num_actions}")
    if n_actors and state["n_actors"] != n_actors:
        raise PPO1Error(f"{path} was trained with {state['n_actors']} actors (ranks x envs_per_rank), "
                        f"this run has {n_actors}")
