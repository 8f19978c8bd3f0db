"""A training's checkpoints: every rank's state gathered to rank 0, which writes it (ppo1.runfiles.save), every
--save_interval iterations and after the last one; the work of an env stop kept; and which file holds the newest
work, so that no line names a checkpoint that is not on disk. The Trainer says when; the Keeper says what is kept."""
from __future__ import annotations

import dataclasses
import os
from typing import Callable

from ppo1 import runfiles
from ppo1.errors import RanksError
from ppo1 import device as devices
from ppo1.checkpoint import RankParts, TrainState
from ppo1.config import Config
from ppo1.distributed import Comm


class Keeper:
    """The checkpoints of one training on this rank (collective: every rank calls the same methods in turn).
    `kept`: (the iteration, the file) of the newest checkpoint of the run's work."""

    def __init__(self, config: Config, comm: Comm, train_state: TrainState, policy, optimizer, rank_parts: RankParts,
                 reward_norm, lock, kept: tuple[int, str | None], log: Callable[[str], None] = print):
        """reward_norm: --norm_reward's RewardNormalizer (None without); lock: rank 0's RunLock (None elsewhere)."""
        self.config, self.comm, self.train_state = config, comm, train_state
        self.policy, self.optimizer, self.rank_parts, self.reward_norm = policy, optimizer, rank_parts, reward_norm
        self.lock, self.kept, self.log = lock, kept, log

    def save(self, games: bool = True) -> str | None:
        """Rank 0 writes a checkpoint of every rank's state (games False: without the envs' games,
        RankParts.state_dict). Returns the error, if any, on every rank."""
        comm, state = self.comm, self.train_state
        norm = self.reward_norm  # --norm_reward: its statistics, rank 0's = every rank's (the returns: rank_parts)
        ranks = comm.gather(self.rank_parts.state_dict(games))
        problem = None
        if comm.is_root:
            snapshot = dataclasses.replace(state, model=devices.to_cpu(self.policy.state_dict()),
                                           optimizer=devices.to_cpu(self.optimizer.state_dict()),
                                           n_ranks=comm.size, ranks=ranks,
                                           reward_norm=norm.state_dict() if norm is not None else None)
            try:
                runfiles.save(self.config.run_dir, snapshot, self.config, keep=self.config.keep_checkpoints)
            except runfiles.CheckpointWriteError as e:
                problem = f"checkpoint at iteration {state.iteration} not written ({e}); " + (
                    "the previous one is intact" if self.checkpointed() else "no checkpoint of this run exists yet")
        problem = comm.bcast(problem)
        if problem is None:
            self.kept = (state.iteration, os.path.join(self.config.run_dir, runfiles.LATEST))
        return problem

    def save_due(self, final: bool) -> None:
        """A checkpoint the schedule asks for (final: the last one). One that cannot be written is a warning, but
        an error at the end (RanksError), which leaves no run directory of only a lock file."""
        problem = self.save()
        if problem and final:
            if self.lock is not None and not self.checkpointed():  # nothing of the run on disk: no lock file
                self.lock.abandon()  # and no run directory left that hold nothing else
            raise RanksError(problem)
        if problem and self.comm.is_root:
            self.log(f"ppo1: warning: {problem}; training continues")

    def keep_work(self) -> str:
        """An env stop's keeping of the work of the iterations done: a checkpoint of the last complete iteration,
        without its games (an env may have broken mid-rollout), unless one is on disk already. Returns what its
        line says of it."""
        iteration, latest = self.train_state.iteration, os.path.join(self.config.run_dir, runfiles.LATEST)
        if iteration == self.kept[0]:
            return (f"{self.kept[1]} holds its work up to iteration {iteration}" if iteration
                    else "no iteration was complete, so there is no work to keep")
        problem = self.save(games=False)
        return f"{latest} now holds iteration {iteration} (its games start anew on resume)" if problem is None else problem

    def checkpointed(self) -> bool:
        """Rank 0: whether the run directory holds a checkpoint (latest.pt or a numbered one)."""
        run_dir = self.config.run_dir
        return os.path.lexists(os.path.join(run_dir, runfiles.LATEST)) or bool(runfiles.list_checkpoints(run_dir))
