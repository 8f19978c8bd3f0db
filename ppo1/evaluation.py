"""Evaluation during training (--eval_interval): every N iterations, and after the last, the current policy plays
--eval_episodes whole games, split over the ranks, and rank 0 records their scores (progress.csv's eval_ columns,
TensorBoard, a console line); the trainer keeps the checkpoint of the best evaluation as best.pt.

Evaluation never touches training. Its envs are its own, made once per rank at set-up (an Atari env takes ~0.4 s
to make, a game of Pong ~1 s to play: made per evaluation they would add a share to every one) and seeded from a
stream apart from the training envs' (EVAL_STREAM, with the iteration the process started from, so a resumed run
plays new games). Its actions are drawn with a generator of its own, never the global torch RNG, and a recurrent
policy's memory starts from zeros at each of its games (evaluate.Player). So a run trains bit-identically with or
without it.

The games are those --mode play plays (ppo1.envs.make_eval_env: Atari's whole games over all lives, unclipped;
Procgen's unseen levels). Where the training envs draw other games than play's (Procgen with --num_levels), as many
games again are played on the training levels: progress.csv's eval_train_ columns, the gap between the two being
what the policy fails to generalise.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import numpy as np
import torch

from ppo1 import runfiles
from ppo1.errors import PPO1Error
from ppo1.config import Config
from ppo1.distributed import Comm
from ppo1.envs import EnvOptions, Episode, make_eval_env
from ppo1.envs.base import EnvRaised
from ppo1.evaluate import fmt_score, games_of_rank, generator_for, play_on
from ppo1.policies import ActorCritic

EVAL_STREAM = 1_000_003  # seed stream of the evaluation envs (play: 1_000_001, videos: 1_000_002)

@dataclasses.dataclass
class Games:
    """One set of evaluation games on this rank: its env, the observation that starts its next game, its actions'
    generator. `prefix`: its columns' (eval, eval_train); `label`: how the console names it."""

    prefix: str
    label: str
    env: object
    obs: Any  # the observation (ppo1.observations.Obs) that starts its next game
    generator: torch.Generator


class Evaluation:
    """This rank's evaluation envs and the evaluations of a run (collective: every rank plays its share)."""

    def __init__(self, config: Config, comm: Comm, start_iteration: int):
        """Make the envs (PPO1Error where one cannot be made or does not fit; the caller agrees on it)."""
        self.config, self.comm = config, comm
        self.sets: list[Games] = []
        unseen, training = EnvOptions.of(config, evaluation=True), EnvOptions.of(config)
        kinds = [("eval", "", unseen)]
        if unseen != training:  # the family evaluates on other games than it trains on (Procgen: unseen levels)
            kinds.append(("eval_train", "training levels", training))
        try:
            for number, (prefix, label, options) in enumerate(kinds):
                env_seed, torch_seed = np.random.SeedSequence(
                    [config.seed, EVAL_STREAM, comm.rank, number, start_iteration]).spawn(2)
                env = make_eval_env(config.env_name, env_seed, options=options)
                self.sets.append(Games(prefix, label, env, None, generator_for(torch_seed)))
                self.sets[-1].obs = self._call(env.reset, start_iteration)
        except BaseException:
            self.close()
            raise

    def due(self, iteration: int, last: int) -> bool:
        """Whether iteration `iteration` (of `last`) ends with an evaluation."""
        interval = self.config.eval_interval
        return bool(interval) and (iteration % interval == 0 or iteration == last)

    def _call(self, fn, iteration: int, *args):
        """fn(*args) on an evaluation env; what the env raises is one PPO1Error naming the evaluation."""
        try:
            return fn(*args)
        except EnvRaised as e:
            raise PPO1Error(f"the evaluation after iteration {iteration} stopped: {self.config.env_name} raised "
                            f"{e} in an evaluation game (rank {self.comm.rank}); the newest checkpoint on disk is "
                            "intact") from None

    def run(self, policy: ActorCritic, iteration: int, beat: Callable[[], None] = lambda: None) -> dict | None:
        """Collective: every rank plays its share of --eval_episodes games of each set with `policy` (`beat` after
        each game: a finished game is progress, for the watchdog). Returns on rank 0 the row's values
        (metrics.EVAL_COLUMNS; eval_return_mean decides the best checkpoint), None on the other ranks."""
        cfg, comm = self.config, self.comm
        start = time.time()
        mine = games_of_rank(cfg.eval_episodes, comm.rank, comm.size)
        played = {}
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # batch-1 forward passes: 1 thread is fastest
        try:
            for games in self.sets:
                def on_game(_episode: Episode) -> None:
                    beat()
                episodes, games.obs = self._call(play_on, iteration, policy, games.env, games.obs, len(mine),
                                                 cfg.eval_greedy, games.generator, on_game, cfg.eval_max_steps,
                                                 cfg.episode_life)
                played[games.prefix] = [(n, e.ret, e.length, e.truncated) for n, e in zip(mine, episodes)]
        finally:
            torch.set_num_threads(threads)
        gathered = comm.gather(played)
        if not comm.is_root:
            return None
        row: dict = {"eval_steps": 0, "eval_seconds": time.time() - start}
        self.parts = []
        for games in self.sets:
            results = sorted(g for rank_played in gathered for g in rank_played[games.prefix])
            rets = np.array([r for _, r, _, _ in results], np.float64)
            lengths = np.array([n for _, _, n, _ in results], np.float64)
            row[f"{games.prefix}_return_mean"], row[f"{games.prefix}_return_std"] = rets.mean(), rets.std()
            row["eval_steps"] += int(lengths.sum())
            if games.prefix == "eval":
                row["eval_length_mean"], row["eval_games"] = lengths.mean(), len(results)
            cut = sum(t for _, _, _, t in results)
            self.parts.append(f"{games.label + ': ' if games.label else ''}score {rets.mean():.2f} ± {rets.std():.2f} "
                              f"(min {fmt_score(rets.min())}, max {fmt_score(rets.max())}), length "
                              f"{lengths.mean():.0f}" + (f", {cut} cut at --eval_max_steps" if cut else ""))
        return row

    def line(self, iteration: int, timesteps: int, row: dict) -> str:
        """Rank 0's console line of the evaluation whose values `run` returned."""
        levels = " (unseen levels)" if len(self.sets) > 1 else ""
        kind = "greedy" if self.config.eval_greedy else "sampled"
        return (f"ppo1: evaluation at iteration {iteration} ({timesteps} steps): {row['eval_games']} games{levels}, "
                f"{'; '.join(self.parts)}; {kind} actions, {row['eval_steps']} steps in {row['eval_seconds']:.1f} s")

    def close(self) -> None:
        for games in self.sets:
            games.env.close()
        self.sets = []


class BestSoFar:
    """Rank 0: the run's best evaluation so far, its one owner: `record` (best.pt's: score, iteration, timesteps,
    games, greedy; None before one), read from the run's best.pt at set-up (load) and replaced, with best.pt, by an
    evaluation that beats it (offer)."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self.record: dict | None = None

    def load(self, log: Callable[[str], None], say_score: bool) -> None:
        """Read best.pt's record, so that a resumed run replaces it only with a better one; a best.pt that does not
        load is a warning (the next evaluation replaces it); `say_score`: a line with the score so far."""
        self.record, problem = runfiles.best_record(self.run_dir)
        if problem:
            log(f"ppo1: warning: {problem}; the next evaluation replaces it")
        elif self.record is not None and say_score:
            log(f"ppo1: best evaluation so far: score {self.record['score']:.2f} at iteration "
                f"{self.record['iteration']} ({runfiles.BEST})")

    def offer(self, score: float, state, model: Callable[[], dict], config: Config) -> str:
        """An evaluation of `score` after the iteration of `state` (a TrainState): where it beats the best so far,
        the policy (`model()`, its state dict on the CPU) written as best.pt with its record. Returns what the
        console line adds; a best.pt that cannot be written is a warning there (the previous one is intact, and
        stays the best)."""
        if self.record is not None and not score > self.record["score"]:  # (a NaN score beats none)
            return f"; best {self.record['score']:.2f} (iteration {self.record['iteration']})"
        record = {"score": score, "iteration": state.iteration, "timesteps": state.timesteps,
                  "games": config.eval_episodes, "greedy": config.eval_greedy}
        try:
            path = runfiles.save_best(self.run_dir, dataclasses.replace(state, model=model(), best=record))
        except runfiles.CheckpointWriteError as e:
            return f"; warning: the new best not written ({e}); the previous {runfiles.BEST} is intact"
        self.record = record
        return f"; new best -> {path}"
