"""Where a rank waits in its envs. A VecEnv's CallSlot holds the env call under way (a Call: which env, "step" |
"reset" | "make", its start on time.monotonic[, for a reset: the processes it has started so far]), None between
calls, and the processes each env started while made or reset (ViZDoom's engine, which starts at the first reset,
an emulator server). The first Ctrl-C's line (ppo1.stops), the watchdog's and a fatal signal's (ppo1.envs.faults)
name the call; a CallTimer ends the processes of an env whose step or reset runs past --env_step_timeout, so the
env's blocking read fails, its step raises and the VecEnv's EnvMaker makes it anew. One long-lived thread reads the
slot and the main thread alone writes it: a step pays for one Call and a clock read only."""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable

from ppo1.envs import children
from ppo1.ticker import Ticker

STUCK = 1.0  # seconds in one env call after which the first Ctrl-C's line says that the rank waits on it


@dataclasses.dataclass(slots=True, eq=False)
class Call:
    """One call into an env, as the main thread entered it; never changed after (a new Call for every call, so a
    reader on another thread knows a call by identity). Not frozen: a frozen dataclass costs the step twice as
    much to make."""

    index: int  # the env's place in its VecEnv
    kind: str  # "step", "reset" or "make"
    start: float  # time.monotonic() when it began
    started: children.Started | None = None  # a reset's: the processes it has started so far (so_far())


def describe(call: Call) -> str:
    """`env 2's step` of a Call."""
    return f"env {call.index}'s {call.kind}"


class CallSlot:
    """The env call a rank is in (`current`: a Call, None between calls) and `started`: env index -> the child
    processes that env started while made (ppo1.envs.base.seeded_envs) or reset (EnvMaker), which a CallTimer
    ends when a call of that env hangs. Written by the main thread only (its VecEnv and EnvMaker); read by the
    CallTimer's thread, the stop and fatal-signal handlers and the watchdog."""

    __slots__ = ("current", "started")

    def __init__(self, started: dict[int, list[int]] | None = None):
        self.current: Call | None = None
        self.started: dict[int, list[int]] = {} if started is None else started

    def enter(self, index: int, kind: str, started: children.Started | None = None) -> None:
        """Env `index`'s call `kind` begins now."""
        self.current = Call(index, kind, time.monotonic(), started)

    def leave(self) -> None:
        """No env call is under way."""
        self.current = None


def _say(line: str) -> None:
    try:
        os.write(2, (line + "\n").encode())
    except OSError:  # a stderr that is gone
        pass


class CallTimer(Ticker):
    """Ends the processes an env started when its step or reset has run `timeout` s (0: never), with one
    warning; an env that started none is said once to be waited on. `watch(calls)` gives it the envs' CallSlot."""

    name = "ppo1-env-calls"

    def __init__(self, timeout: float, rank: int = 0, say: Callable[[str], None] = _say,
                 find: Callable[[list[int]], list[int]] = children.below,
                 end: Callable[[list[int]], None] = children.kill, clock: Callable[[], float] = time.monotonic):
        """find: the live processes (with those below them) of the pids an env started; end: kill them."""
        self.timeout, self.rank = timeout, rank
        self.calls: CallSlot | None = None
        self._say, self._find, self._end, self._clock = say, find, end, clock
        self._handled: Call | None = None  # the call acted on
        super().__init__()

    def enabled(self) -> bool:
        return self.timeout > 0

    def interval(self) -> float:
        return min(1.0, max(self.timeout / 10, 0.05))

    def watch(self, calls: CallSlot) -> None:
        self.calls = calls

    def check(self) -> bool:
        """One look at the envs' call: act on a step or reset past the timeout (once per call). Returns
        whether it acted."""
        calls = self.calls
        call = None if calls is None else calls.current
        if call is None or call is self._handled or call.kind not in ("step", "reset"):
            return False
        ran = self._clock() - call.start
        if self.timeout <= 0 or ran < self.timeout:
            return False
        self._handled = call
        if calls.current is not call:
            return False  # the call returned meanwhile
        ending = self._find([*calls.started.get(call.index, []),
                             *(call.started.so_far() if call.started is not None else [])])
        where = f"ppo1: warning: rank {self.rank}: {describe(call)} ran past --env_step_timeout {self.timeout:g} s"
        if ending:  # said before they are ended: the env's failing call and its restart's line come after this line
            self._say(f"{where}: ending the {len(ending)} process(es) it started (pid {', '.join(map(str, ending))}), "
                      "so that the call fails (the next line says what follows: the env made anew as "
                      "--env_restarts allows, or the run stopped)")
            self._end(ending)
        else:
            self._say(f"{where} and started no process to end: the rank waits on it (a second Ctrl-C exits at "
                      "once; --watchdog_timeout ends the run)")
        return True
