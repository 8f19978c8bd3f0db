"""Writing files so that a failure loses nothing and says why in plain words.

    cause(e)                        # 'disk full (ENOSPC)', 'read-only file system (EROFS)', ...
    ensure_writable_dir(path, what) # before any work: create the directory and write a file into it
    log = AppendFile(path, header, warn)
    log.drop_torn_record()          # CSV: before a run appends again, cut a last record a kill tore
    log.append(data)                # whole records only; a failure is cut off again and reported once

Every write of ppo1 (checkpoints, config.json, progress.csv, episode CSVs, TensorBoard events,
videos, plots) reports an OSError through `cause`, never as a traceback.
"""
from __future__ import annotations

import csv
import errno
import os
import tempfile
from typing import Callable

from ppo1.errors import PPO1Error, error_line

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
    return error_line(e)


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
    except OSError as e:
        raise PPO1Error(f"cannot write into the {what} {path}: {cause(e)}") from None
    try:
        os.unlink(probe)
    except FileNotFoundError:
        pass  # the file was written: a training holding this run's lock removed it as a stale probe meanwhile
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


def csv_width(line: bytes) -> int | None:
    """The number of fields of one CSV line (its line end may be there or not); None when it does not parse."""
    try:
        rows = list(csv.reader([line.decode("utf-8", errors="replace").rstrip("\r\n")]))
    except csv.Error:
        return None
    return len(rows[0]) if rows else 0


def torn_tail(tail: bytes, width: int | None) -> tuple[int, str]:
    """The torn record at the end of a CSV file: (its length in bytes, why it is torn), (0, '') if none.

    `tail`: the file's last bytes, holding its last line whole (from a line start, or from the
    file's start); `width`: the header's number of fields (None: unknown). The last line is torn
    when it has no line end (an append cut short: a kill or a power loss) or, with `width`, when its
    number of fields differs (the next append went onto a torn line)."""
    if not tail:
        return 0, ""
    if not tail.endswith(b"\n"):
        size = len(tail) - (tail.rfind(b"\n") + 1)
        return size, f"a last line of {size} bytes without a line end"
    start = tail.rfind(b"\n", 0, len(tail) - 1) + 1
    fields = csv_width(tail[start:])
    if width is not None and fields != width:
        return len(tail) - start, f"a last line of {fields} fields, not {width}"
    return 0, ""


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
                try:  # cut back to the whole records; a file that held none goes (no empty file is left)
                    os.unlink(self.path) if size == 0 else os.ftruncate(fd, size)
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

    def drop_torn_record(self, chunk: int = 65536) -> bool:
        """A CSV file's torn last record (see torn_tail; the header is the file's first line) is cut
        off, with one warning naming the file; call before a run appends again. Returns whether one was."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:  # none yet; or one that cannot be written, which the first append reports
            return False
        try:
            size = os.fstat(fd).st_size
            head = os.pread(fd, chunk, 0)
            width = csv_width(head[:head.index(b"\n") + 1]) if b"\n" in head else None
            n = min(size, chunk)
            tail = os.pread(fd, n, size - n)
            while n < size and b"\n" not in tail[:-1]:  # the last line is longer than the tail read
                n = min(size, 2 * n)
                tail = os.pread(fd, n, size - n)
            cut, why = torn_tail(tail, width)
            if cut:
                os.ftruncate(fd, size - cut)
        except OSError as e:
            self.warn(f"ppo1: warning: cannot check {self.path} for a torn last record: {cause(e)}")
            return False
        finally:
            os.close(fd)
        if cut:
            self.warn(f"ppo1: warning: dropped the torn last record of {self.path} ({why}; an earlier run "
                      f"ended while writing it)")
        return bool(cut)

    def _failed(self, e: OSError) -> bool:
        self.lost += 1
        if not self.failing:
            self.failing = True
            self.warn(f"ppo1: warning: cannot write {self.path}: {cause(e)}; {self.consequence} "
                      f"(said once until it can be written again)")
        return False
