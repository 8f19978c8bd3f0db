"""`--mode movie`: a video of the trained agent playing one game of the real game (see ppo1.video)."""
from __future__ import annotations

import os
from typing import Callable

import numpy as np

from ppo1.errors import PPO1Error
from ppo1.config import Config
from ppo1.distributed import Comm
from ppo1.envs import EnvOptions
from ppo1.evaluate import load_trained
from ppo1.safeio import cause, ensure_writable_dir
from ppo1.video import VIDEO_STREAM, Recording, describe, record_game


def movie(config: Config, given: dict, comm: Comm, max_frames: int = 0, gif: bool = False,
          greedy: bool = False, out: Callable[[str], None] = print, checkpoint: str = "latest") -> Recording | None:
    """Record one game of the checkpoint `checkpoint` names (the newest, `best` or a .pt file's path:
    ppo1.runfiles.resolve) into the run's directory, checkpoint_dir/model_name/, or
    asset_dir/model_name/ when asset_dir is given (rank 0 only).

    Returns the Recording on rank 0, None on the other ranks.
    """
    if max_frames < 0:
        raise PPO1Error(f"--max_frames={max_frames} is invalid: must be >= 0 (0 = one whole game)")
    error = None
    if comm.is_root:  # before any work: the video's directory can be written
        try:
            ensure_writable_dir(config.asset_path(config.model_name), "asset directory")
        except PPO1Error as e:
            error = e
    comm.agree(error)
    trained = load_trained(config, given, comm, checkpoint)
    if not comm.is_root:
        return None
    cfg = trained.config
    game = cfg.env_name.replace("/", "-").replace(":", "-")
    stem = os.path.join(cfg.asset_path(cfg.model_name),
                        f"{game}_iter{trained.iteration}_{trained.timesteps}steps{'_best' if trained.best else ''}"
                        f"{'_greedy' if greedy else ''}")
    out(f"ppo1: recording {cfg.env_name} with {trained.describe()}"
        f"{f', at most {max_frames} frames' if max_frames else ', one whole game'}")
    seed = np.random.SeedSequence([cfg.seed, VIDEO_STREAM, trained.iteration])
    try:
        rec = record_game(trained.policy, cfg.env_name, seed, stem, greedy=greedy, max_frames=max_frames, gif=gif,
                          options=EnvOptions.of(cfg, evaluation=True), check=trained.check_env)
    except OSError as e:
        raise PPO1Error(f"cannot write the video {stem}_*.mp4: {cause(e)}") from None
    out(f"ppo1: {describe(rec)}")
    return rec
