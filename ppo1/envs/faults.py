"""A fatal signal raised inside an env's own library while one of its calls runs. ViZDoom's game.init() (the env's
first reset, which starts the engine) dies of a segmentation fault when its engine dies or is killed while it
starts (killed by --env_step_timeout after a hang, or from outside). No Python code can go on from inside that
library, so no restart can mend it: EngineFaults turns it into the rank's one line and exit status 2 (under MPI
the job is aborted, so every rank ends), with the envs' other processes ended and the run directory as it was
before (a new run's folder holding only its lock is removed). A fatal signal outside an env call is left to its
default action: a crash of ppo1 itself stays a crash, with its core and status."""
from __future__ import annotations

import ctypes
import os
import signal
from typing import Callable

from ppo1.envs.calls import Call, describe

FATAL = (signal.SIGSEGV, signal.SIGBUS)
_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    return libc


class EngineFaults:
    """While entered: a SIGSEGV or SIGBUS during an env call (`calling()`: a Call, its VecEnv's CallSlot.current;
    None outside one) writes `ppo1: error on rank r: env i's reset ended in a segmentation fault inside the env's own
    library (...)` and calls `end(2)`, which must not return (Trainer: the lock, the envs' processes, MPI_Abort or
    os._exit)."""

    def __init__(self, calling: Callable[[], Call | None], rank: int, end: Callable[[int], None]):
        self.calling, self.rank, self.end = calling, rank, end
        self._libc = None
        self._handler = _HANDLER(self._on_fatal)  # kept: the C side holds a pointer to it
        self._previous: dict[int, int | None] = {}

    def line(self, signum: int, call: Call) -> str:
        """The rank's one line for the fatal signal `signum` during the env call `call`."""
        what = "a segmentation fault" if signum == signal.SIGSEGV else "a bus error"
        return (f"ppo1: error on rank {self.rank}: {describe(call)} ended in {what} inside the env's own library "
                "(an engine that died or was killed during the call takes its library down with it; no restart can "
                "mend that); nothing of this call was used, the newest checkpoint on disk is as it was")

    def _on_fatal(self, signum: int) -> None:
        call = self.calling()
        if call is None:  # not an env's: the default action, as if never caught (returning re-runs the fault)
            self._libc.signal(signum, signal.SIG_DFL)
            return
        try:
            os.write(2, (self.line(signum, call) + "\n").encode())
        except OSError:
            pass
        self.end(2)
        os._exit(2)  # (end must not return)

    def __enter__(self) -> "EngineFaults":
        self._libc = _libc()
        pointer = ctypes.cast(self._handler, ctypes.c_void_p).value
        for signum in FATAL:
            self._previous[signum] = self._libc.signal(signum, pointer)
        return self

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            self._libc.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()
