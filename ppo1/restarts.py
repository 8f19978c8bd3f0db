"""One rank's env restarts during training: which of them count against --env_restarts (the whole run's, or
those of the last --env_restart_window iterations), the warning each one prints, the error that ends training
when an env fails beyond them, and the env tracebacks kept in the run directory (env-error-rank<r>.txt)."""
from __future__ import annotations

import os

from ppo1.envs import EnvCrash
from ppo1.stops import say


class EnvRestarts:
    """The env restarts of rank `rank` in the iterations of a run (resumes included), the one owner of their count:
    a VecEnv's EnvMaker asks `take` whether an env whose step or reset raised is made anew (mend_with); `iterations`
    is what a checkpoint keeps of them (state_dict)."""

    with_games = False  # a part of a rank's state (ppo1.checkpoint.RankParts) loaded whether or not games go on

    def __init__(self, limit: int, window: int, rank: int, run_dir: str):
        """limit: --env_restarts; window: --env_restart_window (0: the whole run)."""
        self.limit, self.window, self.rank, self.run_dir = limit, window, rank, run_dir
        self.iterations: list[int] = []  # the iteration of each env restart on this rank, resumes included
        self.iteration = 0  # the iteration whose rollout is under way (begin)

    def recent(self, iteration: int) -> list[int]:
        """The iterations of this rank's env restarts that count against --env_restarts in `iteration`: all of the
        run's (resumes included), or those of the last --env_restart_window iterations."""
        return [i for i in self.iterations if not self.window or i > iteration - self.window]

    def begin(self, iteration: int) -> None:
        """The rollout of `iteration` starts: only the restarts that still count in it are kept."""
        self.iteration = iteration
        self.iterations = self.recent(iteration)

    def take(self, restart) -> bool:
        """Whether the env of `restart` (ppo1.envs.maker.Restart) is made anew: while --env_restarts allows one more
        in the current iteration. One taken is counted, with a warning on the rank and its traceback kept."""
        if len(self.recent(self.iteration)) >= self.limit:
            return False
        self.iterations.append(self.iteration)
        kept = f"; traceback in {self.trace_path}" if self.keep_trace(restart.trace) else ""
        when, cut = (f"iteration {self.iteration}", ", its episode counted as cut") if self.iteration else ("at start", "")
        say(f"ppo1: warning: rank {self.rank}, {when}: env {restart.index} raised {restart.error}; made it anew "
            f"({len(self.recent(self.iteration))} of --env_restarts {self.limit} {self.span}){cut}{kept}")
        return True

    def state_dict(self) -> dict:
        """What a checkpoint keeps: the iterations of the restarts that count ("restarts")."""
        return {"restarts": list(self.iterations)}

    def load_state_dict(self, state: dict) -> None:
        """The checkpoint's restarts, then those of this start's set-up (an env whose first reset raised)."""
        self.iterations = list(state.get("restarts") or []) + self.iterations

    @property
    def span(self) -> str:
        """Where --env_restarts counts, in words."""
        return (f"in {self.window} iterations" if self.window else "in the run") + f" on rank {self.rank}"

    @property
    def trace_path(self) -> str:
        return os.path.join(self.run_dir, f"env-error-rank{self.rank}.txt")

    def keep_trace(self, trace: str) -> bool:
        """Append an env's traceback to this rank's env-error-rank<r>.txt. Returns whether it was written."""
        try:
            with open(self.trace_path, "a", encoding="utf-8") as f:
                f.write(trace + "\n")
            return True
        except OSError:
            return False

    def error(self, e: Exception, iteration: int) -> str:
        """Why training stops for `e` (EnvDataError or EnvCrash) in `iteration` (0: at start), naming the restarts it went past
        and where an env's own traceback is kept (Trainer.env_stop adds what became of the work)."""
        where = f"training stopped {f'in iteration {iteration}' if iteration else 'at start'}: {e}"
        if isinstance(e, EnvCrash) and e.restartable and not e.ours and self.limit:
            where += f", one more than --env_restarts {self.limit} allows {self.span}"
        if isinstance(e, EnvCrash) and self.keep_trace(e.trace):
            where += f" (traceback in {self.trace_path})"
        return where
