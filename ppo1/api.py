"""The Python API, for notebooks and scripts: the CLI's train and play as functions.

    from ppo1 import Config, train, play

    result = train(Config.for_preset("fast", env_steps=200_000, model_name="nb-pong"))
    print(result.ep_return_mean, result.run_dir)
    scores = play(model_name="nb-pong", episodes=3)

The same checks, files and resume as `python -m run_atari`: a run directory that exists is resumed
(fresh=True moves it aside), config.json and checkpoints are written beside it, and whatever the
CLI prints as `ppo1: error: ...` is raised here as PPO1Error. One process (no mpirun): a script
started under `mpirun -np N` trains with N ranks, as the CLI does.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from ppo1.errors import PPO1Error
from ppo1.config import Config


@dataclasses.dataclass
class TrainResult:
    """How a train() call ended."""

    run_dir: str            # checkpoints, config.json, progress.csv
    iteration: int          # iterations done (over every resume)
    timesteps: int          # agent steps done
    episodes: int           # real games finished
    ep_return_mean: float   # mean score of the last 100 real games (nan before the first)
    exit_code: int          # 0, or 128 + the signal that stopped it (its checkpoint is written)


def _comm():
    from ppo1.distributed import Comm
    from ppo1.envs import load_gymnasium

    load_gymnasium()
    return Comm.create()


def train(config: Config | None = None, *, fresh: bool = False, stop_after_iterations: int = 0,
          log: Callable[[str], None] | None = print, **settings) -> TrainResult:
    """Train `config` (or `Config.for_preset(**settings)`) until its env_steps, a stop signal (Ctrl-C:
    the iteration ends and is checkpointed) or `stop_after_iterations`. Resumes the run directory when
    it exists, unless `fresh`. log=None trains silently. Returns a TrainResult; raises PPO1Error."""
    if config is not None and settings:
        raise PPO1Error(f"give train() a Config or settings, not both (got {sorted(settings)})")
    from ppo1.envs import Spares
    from ppo1.trainer import Trainer

    comm = _comm()
    spares = Spares()  # the env made to learn the family of a new run's env: its first training env
    try:
        config = (config if config is not None else
                  Config.for_preset(n_ranks=comm.size, spares=spares, **settings)).validate()
        trainer = Trainer(config, comm, log if (log and comm.is_root) else (lambda *a, **k: None), fresh,
                          stop_after_iterations, spares)
        out = trainer.run()
    finally:
        spares.close()  # what the run did not take (it was refused)
    recent = [r for r, _ in trainer.train_state.recent]
    return TrainResult(config.run_dir, out["iteration"], out["timesteps"], out["episodes"],
                       sum(recent) / len(recent) if recent else math.nan, out["exit_code"])


def play(model_name: str = Config.model_name, checkpoint_dir: str = Config.checkpoint_dir, episodes: int = 10,
         greedy: bool = False, log: Callable[[str], None] | None = print, checkpoint: str = "latest") -> list[float]:
    """Play `episodes` whole games with a checkpoint of checkpoint_dir/model_name: `checkpoint` is latest (the
    newest), best (best.pt, the best evaluation of --eval_interval) or the path of a .pt file (sampled actions,
    or the most probable with greedy=True). Returns their real scores (all lives, unclipped); raises PPO1Error."""
    from argparse import Namespace

    from ppo1.cli import build_config
    from ppo1.player import play as play_games

    given = {"model_name": model_name, "checkpoint_dir": checkpoint_dir}
    config = build_config(Namespace(**given))  # the run's config.json, as --mode play reads it
    games = play_games(config, given, _comm(), episodes, greedy=greedy, out=log or (lambda *a, **k: None),
                       checkpoint=checkpoint)
    return [g.ret for g in games or []]
