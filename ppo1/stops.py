"""Stop requests: SIGINT, SIGTERM and SIGHUP end training after the current iteration, with a checkpoint
(StopRequest, which the training loop holds); a second Ctrl-C or SIGTERM exits at once."""
from __future__ import annotations

import os
import signal
import time

from ppo1 import runfiles
from ppo1.envs.calls import STUCK, Call, describe
from ppo1.launch import kill_descendants


def stop_signals(disposition=signal.getsignal) -> tuple[signal.Signals, ...]:
    """The signals that stop training: SIGINT, SIGTERM and SIGHUP (a hang-up: the terminal or the SSH
    session closed, or `kill -HUP`), less SIGHUP when `disposition` says it is ignored (started under
    `nohup`: it stays ignored). Python's getsignal reports the dispositions the process started with,
    whatever a C library installed since."""
    return tuple(s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
                 if s != signal.SIGHUP or disposition(s) is not signal.SIG_IGN)


def say(line: str) -> None:
    """`line` on stderr in one write, safe in a signal handler; a stderr that is gone (a closed terminal:
    EIO, a closed pipe: EPIPE) is skipped."""
    try:
        os.write(2, (line + "\n").encode())
    except OSError:
        pass


def stop_line(name: str, call: Call | None, now: float, rank: int = 0, quiet: bool = False) -> str | None:
    """The line a first SIGINT or SIGTERM (`name`) prints at once: that the rank waits for an env's call that has
    run for STUCK s or more (`call`: its VecEnv's CallSlot.current; `now` on its clock), else (rank 0 only, not
    `quiet`) that the run stops after this iteration with a checkpoint; and what a second one does. None: nothing
    to say."""
    second = "a second Ctrl-C (or SIGTERM) exits at once without a new checkpoint"
    if call is not None and now - call.start >= STUCK:
        return (f"ppo1: {name}: rank {rank} waits for {describe(call)} (running for {now - call.start:.0f} s); "
                f"it stops after this iteration with a checkpoint once that returns; {second}")
    return None if quiet else f"ppo1: {name}: stopping after this iteration with a checkpoint; {second}"


class StopRequest:
    """SIGINT/SIGTERM/SIGHUP (see stop_signals): finish the current iteration, checkpoint, exit 128 + its
    number. The first SIGINT or SIGTERM says so at once (stop_line), a second exits at once; a SIGHUP never
    does either (a hang-up may come twice, from the shell and from the kernel as the shell exits, and must not
    cut the stop's checkpoint short; its terminal is gone)."""

    def __init__(self, quiet: bool = False, run_dir: str = "", rank: int = 0, calling=None):
        """calling(): the rank's env call under way (a Call: its VecEnv's CallSlot.current) or None, for the first
        signal's line."""
        self.signum = 0
        self.quiet = quiet  # ranks other than 0 exit without a word (unless an env call holds them up)
        self.run_dir = run_dir  # where a checkpoint of an earlier iteration may lie
        self.rank = rank
        self.calling = calling or (lambda: None)
        self.saved = False  # the stop's checkpoint is written (the loop has ended for the signal)
        self._previous: dict = {}

    def __enter__(self) -> "StopRequest":
        for s in stop_signals():
            self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if self.signum and exc_type is None:
            # The loop stopped for the signal and its checkpoint is written. Keep the handler: a second
            # signal while the run winds down must still exit at once, not die of the default action.
            self.saved = True
            return
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _handle(self, signum, frame) -> None:
        if self.signum and signum == signal.SIGHUP:  # a hang-up repeated, or after a stop: the stop goes on
            return
        if self.signum:  # the second: exit now, one line, no traceback (a save cut short leaves only a temp file)
            if not self.quiet:
                what = ("; the checkpoint of this stop is written" if self.saved else
                        " without a checkpoint; the newest one on disk is intact"
                        if os.path.lexists(os.path.join(self.run_dir, runfiles.LATEST)) else
                        " without a checkpoint; none was written yet")
                say(f"ppo1: second {signal.Signals(signum).name}: exiting now{what}")
            kill_descendants()  # the envs are not closed on this path: no engine outlives the rank
            os._exit(128 + signum)
        self.signum = signum
        if signum != signal.SIGHUP:
            line = stop_line(signal.Signals(signum).name, self.calling(), time.monotonic(), self.rank, self.quiet)
            if line:
                say(line)

    def agreed(self, signums: list[int]) -> int:
        """The signal a rank has received (the highest number when several did), 0 if none, from every rank's
        `signum` gathered (Trainer.stop_reason), so all ranks stop after the same iteration. A rank that stops
        for another rank's signal counts it as its own: a signal after this one exits at once."""
        agreed = max(signums)
        if agreed and not self.signum:
            self.signum = agreed
        return agreed
