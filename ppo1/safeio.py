"""Writing files so that a failure loses nothing and says why in plain words.

    cause(e)                        # 'disk full (ENOSPC)', 'read-only file system (EROFS)', ...
    ensure_writable_dir(path, what) # before any work: create the directory and write a file into it
    log = AppendFile(path, header, warn)
    log.append(data)                # whole records only; a failure is cut off again and reported once

Every write of ppo1 (checkpoints, config.json, progress.csv, episode CSVs, TensorBoard events,
videos, plots) reports an OSError through `cause`, never as a traceback.
"""
from __future__ import annotations

import errno
import os
import tempfile
from typing import Callable

from ppo1 import PPO1Error

_PLAIN = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is not a directory",
    errno.EISDIR: "it is a directory",
    errno.EEXIST: "it exists and is not a directory",
    errno.ENOENT: "no such file or directory",
    errno.EIO: "input/output error (a failing disk or a lost network mount?)",
    errno.EFBIG: "file too large (a file size limit)",
    errno.ENAMETOOLONG: "file name too long",
    errno.EMFILE: "too many open files",
    errno.ENFILE: "too many open files in the system",
    errno.ELOOP: "too many levels of symbolic links",
    errno.EXDEV: "cross-device link",
    errno.ENODEV: "no such device",
    errno.ENXIO: "no such device or address",
    errno.ESTALE: "stale network file handle",
}


def cause(e: BaseException) -> str:
    """The reason an OSError (or a library error wrapping one) happened, in plain words: 'disk full (ENOSPC)'."""
    n = getattr(e, "errno", None)
    if isinstance(n, int) and n in _PLAIN:
        return f"{_PLAIN[n]} ({errno.errorcode[n]})"
    text = str(e)
    for code, words in _PLAIN.items():  # libraries that re-raise with the message only (moviepy, torch)
        if os.strerror(code) in text:
            return f"{words} ({errno.errorcode[code]})"
    if isinstance(n, int) and n:
        return f"{os.strerror(n)} ({errno.errorcode.get(n, n)})"
    return (f"{type(e).__name__}: {text}".splitlines() or [type(e).__name__])[0][:300]


def ensure_writable_dir(path: str, what: str) -> None:
    """Create directory `path` if needed and check a file can be written into it (before any work).

    Raises PPO1Error naming `what` (e.g. 'run directory'), the path and the cause.
    """
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise PPO1Error(f"cannot create the {what} {path}: {cause(e)}") from None
    if not os.path.isdir(path):
        raise PPO1Error(f"cannot use the {what} {path}: it exists and is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".ppo1-write-test-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise PPO1Error(f"cannot write into the {what} {path}: {cause(e)}") from None


def write_all(fd: int, data: bytes) -> None:
    """os.write until all of `data` is written; raises OSError (a short write goes on until the error)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:  # pragma: no cover - write(2) reports errors by raising
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        view = view[n:]


class AppendFile:
    """A file that grows by whole records: each append is written in full or not at all.

    The file is opened for each append (O_APPEND), so a file removed or replaced meanwhile is
    simply created again, and nothing is buffered across a failure. A write that fails is cut off
    again (ftruncate to the size before it), so a reader never sees half a record; the failure is
    reported once through `warn` (file and cause), and once more when writing works again.
    `header` is written first whenever the file is empty.
    """

    def __init__(self, path: str, header: bytes = b"", warn: Callable[[str], None] | None = None,
                 consequence: str = "training continues"):
        self.path, self.header = path, header
        self.warn = warn or (lambda message: None)
        self.consequence = consequence
        self.failing = False
        self.lost = 0  # records not written since the last failure was reported

    def append(self, data: bytes) -> bool:
        """Append one record. Returns whether it was written."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            return self._failed(e)
        try:
            size = os.fstat(fd).st_size
            try:
                write_all(fd, (self.header if size == 0 else b"") + data)
            except OSError as e:
                try:
                    os.ftruncate(fd, size)
                except OSError:
                    pass
                return self._failed(e)
        finally:
            os.close(fd)
        if self.failing:
            self.failing = False
            self.warn(f"ppo1: {self.path} is written again ({self.lost} record(s) were lost meanwhile)")
            self.lost = 0
        return True

    def _failed(self, e: OSError) -> bool:
        self.lost += 1
        if not self.failing:
            self.failing = True
            self.warn(f"ppo1: warning: cannot write {self.path}: {cause(e)}; {self.consequence} "
                      f"(said once until it can be written again)")
        return False
