"""Where a rank waits in its envs. VecEnv.calling is (env index, "step" | "reset" | "make", its start on
time.monotonic[, for a reset: the processes it has started so far, a children.Started]) while an env's call runs,
None between calls: the first Ctrl-C's line and the watchdog's name it, and a CallTimer ends the processes an env
started while made or reset (VecEnv.started: ViZDoom's engine, which starts at the first reset, an emulator
server), and those of a reset still under way, when its step or reset runs past --env_step_timeout, so the env's
blocking read fails, its step raises and VecEnv.restart makes it anew. One long-lived thread reads the slot: the
step itself pays for a tuple and a clock read only."""
from __future__ import annotations

import os
import time
from typing import Callable

from ppo1.envs import children
from ppo1.ticker import Ticker

STUCK = 1.0  # seconds in one env call after which the first Ctrl-C's line says that the rank waits on it


def describe(slot: tuple[int, str, float]) -> str:
    """`env 2's step` of a VecEnv.calling slot."""
    return f"env {slot[0]}'s {slot[1]}"


def _say(line: str) -> None:
    try:
        os.write(2, (line + "\n").encode())
    except OSError:  # a stderr that is gone
        pass


class CallTimer(Ticker):
    """Ends the processes an env started when its step or reset has run `timeout` s (0: never), with one
    warning; an env that started none is said once to be waited on. `watch(venv)` gives it the envs."""

    name = "ppo1-env-calls"

    def __init__(self, timeout: float, rank: int = 0, say: Callable[[str], None] = _say,
                 find: Callable[[list[int]], list[int]] = children.below,
                 end: Callable[[list[int]], None] = children.kill, clock: Callable[[], float] = time.monotonic):
        """find: the live processes (with those below them) of the pids an env started; end: kill them."""
        self.timeout, self.rank = timeout, rank
        self.venv = None
        self._say, self._find, self._end, self._clock = say, find, end, clock
        self._handled = None  # the slot acted on (each call's slot is a new tuple)
        super().__init__()

    def enabled(self) -> bool:
        return self.timeout > 0

    def interval(self) -> float:
        return min(1.0, max(self.timeout / 10, 0.05))

    def watch(self, venv) -> None:
        self.venv = venv

    def check(self) -> bool:
        """One look at the envs' call: act on a step or reset past the timeout (once per call). Returns
        whether it acted."""
        venv = self.venv
        slot = getattr(venv, "calling", None)
        if slot is None or slot is self._handled or slot[1] not in ("step", "reset"):
            return False
        ran = self._clock() - slot[2]
        if self.timeout <= 0 or ran < self.timeout:
            return False
        self._handled = slot
        if venv.calling is not slot:
            return False  # the call returned meanwhile
        ending = self._find([*venv.started.get(slot[0], []), *(slot[3].so_far() if len(slot) > 3 else [])])
        where = f"ppo1: warning: rank {self.rank}: {describe(slot)} ran past --env_step_timeout {self.timeout:g} s"
        if ending:  # said before they are ended: the env's failing call and its restart's line come after this line
            self._say(f"{where}: ending the {len(ending)} process(es) it started (pid {', '.join(map(str, ending))}), "
                      "so that the call fails and the env is made anew (as --env_restarts allows)")
            self._end(ending)
        else:
            self._say(f"{where} and started no process to end: the rank waits on it (a second Ctrl-C exits at "
                      "once; --watchdog_timeout ends the run)")
        return True
