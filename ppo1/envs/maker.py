"""The k envs of a rank in their places, and their making anew: an env whose step raised is made again in its place
(a restart, while the restarts given to `mend_with` allow), and a resume without its games makes every env again
(renew), each with the seed of the next env of its place (ppo1.envs.base.env_seed of the envs made there before),
so no env of a run replays another's games. Each making and reset enters the rank's CallSlot, so a hang there is
named, and a reset's new processes join the slot's `started` for the CallTimer to end."""
from __future__ import annotations

import dataclasses
from typing import Callable

from ppo1.envs.base import EnvCrash, EnvRaised, env_call
from ppo1.envs.calls import CallSlot
from ppo1.envs.children import recording
from ppo1.observations import Obs


@dataclasses.dataclass
class Restart:
    """An env made anew after its step or reset raised: which one, the exception's one line, its traceback."""

    index: int
    error: str
    trace: str


class EnvMaker:
    """A VecEnv's envs (`envs`, one per place: this list is the one the VecEnv steps, its places filled anew here and
    never rebound), how many were made before the current one in each place (`made`, saved in checkpoints) and
    `remake(index, n)`, a new env in place `index` when n were made there before (None: the envs cannot be made
    again, and an env that raises stops the run)."""

    def __init__(self, envs: list, remake: Callable | None, calls: CallSlot):
        self.envs = envs
        self.remake = remake
        self.made = [0] * len(envs)
        self.calls = calls
        self._restarts = None  # what decides and records each restart (ppo1.restarts.EnvRestarts), None: none

    def mend_with(self, restarts) -> None:
        """Make an env whose step raises anew when `restarts.take(Restart)` says so (it counts and reports each
        one: ppo1.restarts.EnvRestarts); None: never (the crash stops the run)."""
        self._restarts = restarts

    def reset(self, i: int) -> Obs:
        """Reset env i; returns its first observation. An env whose reset raises (an engine that dies while it
        starts) is made anew as one whose step raised, while the restarts allow (take, restart); EnvCrash where they
        allow no more, or none were given (mend_with)."""
        try:
            return self._reset(i)
        except EnvRaised as e:
            self.take(i, e, "reset", anew=False)
            return self.restart(i)

    def _reset(self, i: int) -> Obs:
        """Reset env i; what it starts meanwhile (ViZDoom starts its engine at its first reset) joins the slot's
        `started`. EnvRaised where its reset raises."""
        with recording() as new:
            self.calls.enter(i, "reset", new)  # new.so_far(): what a hung reset started
            obs = self.envs[i].reset()
        if new:
            self.calls.started.setdefault(i, []).extend(new)
        return obs

    def take(self, i: int, raised: EnvRaised, call: str, anew: bool = True) -> None:
        """Env i raised in its `call` (step, reset; `anew`: the making or reset of an env made anew in its place): go
        on if the restarts allow one more (they count and report it), else EnvCrash naming the call."""
        said = (str(raised) if call == "step" else f"{raised} in the {call} of the env made in its place" if anew
                else f"{raised} in its {call}")
        if self.remake is None or self._restarts is None or not self._restarts.take(Restart(i, said, raised.trace)):
            raise EnvCrash(raised.error, raised.trace, i, call, restartable=self.remake is not None) from None

    def restart(self, i: int) -> Obs:
        """Env i raised in its step (an engine that died, an emulator that exited) and `take` allowed it: close what
        is left of it and make it anew (remake, with the seed of the next env made there). A new env that raises
        while it is made or in its first reset is one more restart, made anew again while they allow. Returns the
        new env's first observation. EnvCrash where the restarts allow no more."""
        while True:
            try:
                self.envs[i].close()
            except Exception:  # an env whose engine died often fails to close: what is left of it goes with it
                pass
            call = "making"
            try:
                self._new_env(i)
                call = "reset"
                return self._reset(i)
            except EnvRaised as e:
                self.take(i, e, call)

    def renew(self, made: list[int], out: Obs) -> Obs:
        """A resume whose games were not restored: every env made anew with the seed of the next env of its
        place (`made`: how many were made there before, from the checkpoint), so that no resume replays the
        episodes (levels, seeds) the run began with. Their first observations are written into `out` (k, ...),
        which it returns."""
        try:
            for i in range(len(self.envs)):
                self.envs[i].close()
                self.made[i] = made[i]
                out[i] = self._make(i, "made anew for the resumed run")
        finally:
            self.calls.leave()
        return out

    def _new_env(self, i: int) -> None:
        """A new env in place i, with the seed of the next env made there. EnvRaised where making it raises."""
        self.made[i] += 1
        self.calls.enter(i, "make")
        self.envs[i] = env_call(self.remake, i, self.made[i])

    def _make(self, i: int, why: str) -> Obs:
        """Make env i anew (the next seed of its place) and reset it. Returns its first observation."""
        try:
            self._new_env(i)
        except EnvRaised as e:
            raise EnvCrash(e.error, e.trace, i, "making", why=f" ({why})") from None
        return self.reset(i)
