"""A watchdog on every rank: no rank is left spinning in a collective when a host is lost.

A blocked MPI collective cannot be interrupted from Python (SIGTERM waits for it to return), and a
launcher that lost its host cannot end that host's ranks. So each rank runs a daemon thread, outside
the MPI call path, that ends its own process when no training iteration has finished for `limit`
seconds: one line on stderr naming the rank, the host and the phase (the collective) it was waiting
in, or the env call it is stuck in (an env's step or reset that never returned), then MPI_Abort, then a hard exit (os._exit) if the abort has not ended the process after a short
grace.

    wd = Watchdog(config.watchdog_timeout, rank=comm.rank, abort=comm.abort)
    with wd:                        # starts / stops the thread
        wd.phase = "gradient allreduce"
        ...
        wd.beat()                   # an iteration finished
"""
from __future__ import annotations

import collections
import os
import socket
import statistics
import threading
import time
from typing import TYPE_CHECKING, Callable

from ppo1.ticker import Ticker

if TYPE_CHECKING:  # (not at run time: the watchdog imports no env code)
    from ppo1.envs.calls import Call

AUTO = -1.0            # watchdog_timeout meaning "automatic"
MULTIPLE = 10.0        # automatic limit: MULTIPLE x the median iteration time ...
FLOOR = 300.0          # ... but never less than FLOOR seconds
GRACE = 5.0            # seconds MPI_Abort gets before the hard exit
EXIT_CODE = 3          # exit status of a process the watchdog ended


def limit_for(timeout: float, durations: list[float]) -> float:
    """Seconds without a finished iteration before the watchdog fires (0 = never).

    `timeout` > 0 is used as given, 0 turns the watchdog off, AUTO (-1) gives
    max(MULTIPLE x median of `durations`, FLOOR) (FLOOR while no iteration has finished).
    """
    if timeout == 0:
        return 0.0
    if timeout > 0:
        return float(timeout)
    return max(MULTIPLE * statistics.median(durations), FLOOR) if durations else FLOOR


class Watchdog(Ticker):
    """Ends this process when `beat()` has not been called for `limit_for(timeout, iteration times)` s.

    `abort(code)` is tried first (Comm.abort: MPI_Abort, which also asks the launcher to end the other
    ranks); `exit(code)` (os._exit) follows after `grace` s. Tests replace both.
    """

    name, once = "ppo1-watchdog", True  # it fires once

    def __init__(self, timeout: float, rank: int = 0, abort: Callable[[int], None] | None = None,
                 exit: Callable[[int], None] = os._exit, grace: float = GRACE,
                 clock: Callable[[], float] = time.monotonic, write: Callable[[str], None] | None = None,
                 calling: Callable[[], Call | None] | None = None):
        """calling(): the rank's env call under way (a Call, its VecEnv's CallSlot.current: env index, kind, its
        start on `clock`), or None; the line names it when the rank is stuck there."""
        self.timeout = timeout
        self.rank = rank
        self.host = socket.gethostname()
        self.phase = "set-up"          # what the training loop is doing (the collective it waits in)
        self.fired: str | None = None  # the line printed, once fired
        self._abort, self._exit, self._grace, self._clock = abort, exit, grace, clock
        self._calling = calling or (lambda: None)
        self._write = write or (lambda line: os.write(2, line.encode()))  # no lock the main thread may hold
        self._durations: collections.deque = collections.deque(maxlen=100)
        self._last = clock()
        super().__init__()

    # ------------------------------------------------------------------ the training loop's side
    def beat(self) -> None:
        """An iteration finished."""
        now = self._clock()
        self._durations.append(now - self._last)
        self._last = now

    def limit(self) -> float:
        return limit_for(self.timeout, list(self._durations))

    def start(self) -> "Watchdog":
        """Start the thread (not when the limit is 0 = off)."""
        self._last = self._clock()
        return super().start()

    def enabled(self) -> bool:
        return self.timeout != 0

    def interval(self) -> float:
        return min(1.0, max(self.limit() / 20, 0.05))

    # ------------------------------------------------------------------ the thread
    def check(self) -> bool:
        """Fire if the limit has passed; returns whether it fired."""
        limit = self.limit()
        idle = self._clock() - self._last
        if limit <= 0 or idle < limit or self.fired:
            return False
        self.fire(idle, limit)
        return True

    def fire(self, idle: float, limit: float) -> None:
        """Print the one line, then end the process: abort, and a hard exit after the grace period."""
        call = self._calling()
        if call is not None:  # an env's call that has not returned, not a lost rank
            self.fired = (f"ppo1: watchdog: rank {self.rank} on host {self.host}: stuck in env {call.index}'s "
                          f"{call.kind} for {self._clock() - call.start:.0f} s (no iteration finished for {idle:.0f} "
                          f"s, limit {limit:.0f} s); ending this process (exit status {EXIT_CODE})\n")
        else:
            self.fired = (f"ppo1: watchdog: rank {self.rank} on host {self.host}: no iteration finished for "
                          f"{idle:.0f} s (limit {limit:.0f} s) while waiting in {self.phase}; a rank or host "
                          f"is lost or stuck; ending this process (exit status {EXIT_CODE})\n")
        try:
            self._write(self.fired)
        except OSError:
            pass
        timer = threading.Timer(self._grace, self._exit, (EXIT_CODE,))
        timer.daemon = True
        timer.start()
        if self._abort is not None:
            try:
                self._abort(EXIT_CODE)
            except BaseException:  # Comm.abort ends with sys.exit in one process
                pass
        timer.cancel()  # the abort returned (one process) instead of hanging: exit now
        self._exit(EXIT_CODE)
