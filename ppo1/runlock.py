"""The run lock: one training at a time per run directory.

Rank 0 of a training holds an exclusive `fcntl.flock` on `<run_dir>/train.lock` for the life of the
process. The kernel releases it when the process ends in any way (kill -9 included), so a lock is
never stale. A second training on the same directory fails to take it and is refused with the
holder's pid, host and start time, which the holder writes into the file. Play, movie and plot only
read a run and take no lock, so they work on a run that is being trained.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import socket
import time
from typing import Callable

from ppo1.errors import PPO1Error
from ppo1.safeio import cause, ensure_writable_dir

LOCK = "train.lock"

# Temporary files of an interrupted write (atomic_write's `.<name>.tmp<pid>`, a recording, a probe).
_STALE = re.compile(r"^\.(?:(?:ckpt-\d+\.pt|latest\.pt|best\.pt|config\.json)\.tmp\d+|ppo1-write-test-.+"
                    r"|recording-\d+\.(?:mp4|gif))$")


def remove_if_only_lock(run_dir: str) -> None:
    """Remove a run directory that holds nothing but its lock file (a start that was refused or ended before any
    work); any other directory stays as it is."""
    try:
        if os.path.isdir(run_dir) and os.listdir(run_dir) == [LOCK]:
            os.unlink(os.path.join(run_dir, LOCK))
            os.rmdir(run_dir)
    except OSError:
        pass  # another process wrote there meanwhile, or it cannot be removed: it stays


class RunLocked(PPO1Error):
    """Another training holds the run directory."""


class RunLock:
    """An exclusive lock on a run directory, held until release() or the end of the process."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self.path = os.path.join(run_dir, LOCK)
        self.fd: int | None = None
        self.noted = True  # the lock file holds the holder's note (False: it could not be written)

    def acquire(self, warn: Callable[[str], None] = print) -> "RunLock":
        """Take the lock. Raises RunLocked naming the holder, or PPO1Error if the file cannot be opened."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise PPO1Error(f"cannot open the run lock {self.path}: {cause(e)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                holder = _holder(fd)
                os.close(fd)
                raise RunLocked(f"{self.run_dir} is in use by another training ({holder}); wait for it to "
                                f"end, stop it, or use another --model_name") from None
            warn(f"ppo1: warning: cannot lock {self.path} ({cause(e)}, e.g. a network file system); "
                 f"make sure no other training uses {self.run_dir}")
        self.fd = fd
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": time.strftime("%Y-%m-%d %H:%M:%S %z")}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
            self.noted = True
        except OSError:
            self.noted = False  # the lock holds without the note (a full disk): the refusal then names no holder
        return self

    def release(self) -> None:
        """Release the lock; a lock file left empty (its note could not be written: a full disk) is removed."""
        if self.fd is not None:
            if not self.noted and self.intact():
                try:
                    if os.fstat(self.fd).st_size == 0:
                        os.unlink(self.path)
                except OSError:
                    pass
            os.close(self.fd)  # closing the only descriptor releases the flock
            self.fd = None

    def intact(self) -> bool:
        """Whether the lock file this lock holds is still the run directory's (not removed with the directory,
        nor replaced by another). True where the lock could not be taken (no descriptor)."""
        if self.fd is None:
            return True
        try:
            held, there = os.fstat(self.fd), os.stat(self.path)
        except OSError:
            return False
        return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)

    def abandon(self) -> None:
        """Release the lock of a run that was refused before it did any work, or that could write nothing (a
        full disk): a directory holding nothing but the lock file (this start made it, or an earlier refused
        one did) is removed with it."""
        try:
            remove_if_only_lock(self.run_dir)
        finally:
            self.release()

    def __del__(self):
        try:
            self.release()
        except OSError:
            pass


def _holder(fd: int) -> str:
    """'pid 123 on host h since 2024-01-01 10:00:00 +0000', read from the lock file (its holder writes it
    right after locking, so wait a moment for it)."""
    for _ in range(20):
        try:
            info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
            return f"pid {int(info['pid'])} on host {info['host']} since {info['started']}"
        except (OSError, ValueError, KeyError, TypeError):
            time.sleep(0.05)
    return "holder unknown"


def move_aside(run_dir: str) -> str | None:
    """Rename an existing run directory to <run_dir>.old-<time>; returns the new name. A directory
    holding nothing but the lock file (made by this start) is not a previous run: None."""
    if not os.path.lexists(run_dir):
        return None
    try:
        if os.path.isdir(run_dir) and set(os.listdir(run_dir)) <= {LOCK}:
            return None
    except OSError:
        pass  # the rename below reports the problem in plain words
    target = f"{run_dir.rstrip(os.sep)}.old-{time.strftime('%Y%m%d-%H%M%S')}"
    n = 1
    while os.path.lexists(target):
        target = f"{run_dir.rstrip(os.sep)}.old-{time.strftime('%Y%m%d-%H%M%S')}-{n}"
        n += 1
    try:
        os.rename(run_dir, target)
    except OSError as e:
        raise PPO1Error(f"--fresh: cannot move {run_dir} aside to {target}: {cause(e)}") from None
    return target


def remove_stale_temp_files(run_dir: str) -> list[str]:
    """Remove the temp files an interrupted save left in run_dir (and run_dir/videos). Call it holding
    the lock: no other writer is then at work. Returns the removed paths."""
    removed = []
    for directory in (run_dir, os.path.join(run_dir, "videos")):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if _STALE.match(name) and os.path.isfile(path) and not os.path.islink(path):
                try:
                    os.unlink(path)
                    removed.append(path)
                except OSError:
                    pass
    return removed


def prepare_run_dir(run_dir: str, fresh: bool = False, log: Callable[[str], None] = print) -> RunLock:
    """Rank 0, before any work: check the run directory is writable, lock it, move it aside (`fresh`)
    and remove stale temp files. Returns the held lock; raises PPO1Error (one line) otherwise."""
    ensure_writable_dir(run_dir, "run directory")
    lock = RunLock(run_dir).acquire(log)
    if fresh:
        moved = move_aside(run_dir)
        if moved:  # the held lock file went with it: lock the new directory
            log(f"ppo1: --fresh: moved the previous run to {moved}")
            ensure_writable_dir(run_dir, "run directory")
            new = RunLock(run_dir).acquire(log)
            lock.release()
            lock = new
    removed = remove_stale_temp_files(run_dir)
    if removed:
        log(f"ppo1: removed {len(removed)} temp file(s) of an interrupted save: "
            f"{', '.join(os.path.basename(p) for p in removed)}")
    return lock
