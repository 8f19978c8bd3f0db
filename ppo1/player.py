"""`--mode play`: play whole games with the newest checkpoint of a run and report their real scores.

The game and the model come from the config saved in the checkpoint; a flag that contradicts it is
an error. Games are whole (ppo1.evaluate, which play shares with movie and the training videos).
Under `mpirun -np R` the games are dealt round-robin to the ranks and rank 0 reports all of them.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

import numpy as np

from ppo1.errors import PPO1Error, error_line
from ppo1.config import Config
from ppo1.distributed import Comm, say_line
from ppo1.envs import EnvOptions, Episode, families, make_eval_env
from ppo1.evaluate import fmt_score, games_of_rank, generator_for, load_trained, play_games

# Seed streams of evaluation games, apart from the training envs' (seed, rank, env index) streams.
PLAY_STREAM = 1_000_001


def display_available() -> bool:
    """Whether a window can be opened: a Wayland display, or an X server that answers at $DISPLAY, on
    Linux; assumed elsewhere."""
    if not sys.platform.startswith("linux"):
        return True
    if os.environ.get("WAYLAND_DISPLAY"):
        return True
    return x_server_answers(os.environ.get("DISPLAY", ""))


def x_server_answers(display: str) -> bool:
    """Whether an X server listens at `display` (':0', ':1.0', 'host:10.0', 'unix:0')."""
    import re
    import socket

    m = re.fullmatch(r"(?P<host>[^:]*):(?P<number>\d+)(?:\.\d+)?", display.strip())
    if not m:
        return False
    host, number = m.group("host"), int(m.group("number"))
    try:
        if host in ("", "unix"):
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(1.0)
                try:
                    s.connect(f"/tmp/.X11-unix/X{number}")
                except OSError:
                    s.connect(f"\0/tmp/.X11-unix/X{number}")  # the abstract socket
            return True
        with socket.create_connection((host, 6000 + number), timeout=1.0):
            return True
    except OSError:
        return False


def summary(games: list[Episode]) -> str:
    """One line: number of games, score mean ± std (min, max), length mean ± std."""
    rets = np.array([g.ret for g in games], np.float64)
    lens = np.array([g.length for g in games], np.float64)
    return (f"{len(games)} games: score {rets.mean():.2f} ± {rets.std():.2f} (min {fmt_score(rets.min())}, "
            f"max {fmt_score(rets.max())}), length {lens.mean():.0f} ± {lens.std():.0f} agent steps")


def games_text(cfg: Config) -> str:
    """What the family says of the games play plays (Procgen: which levels), ' (...)'; '' for most."""
    family = families.by_name(cfg.env_name, cfg.env_kwargs)
    note = family.eval_note(cfg) if family is not None and family.eval_note is not None else ""
    return f" ({note})" if note else ""


def _render_mode(out: Callable[[str], None]) -> str | None:
    """--render: "human" where an X server answers (no sound: no audio errors without a sound card), else None
    (headless) with a line saying why."""
    if display_available():
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        return "human"
    if os.environ.get("DISPLAY"):
        out(f"ppo1: --render: no X server answers at DISPLAY={os.environ['DISPLAY']}; playing headless")
    else:
        out("ppo1: --render: no display (DISPLAY is not set); playing headless")
    return None


def play(config: Config, given: dict, comm: Comm, episodes: int, greedy: bool = False,
         render: bool = False, out: Callable[[str], None] = say_line, checkpoint: str = "latest") -> list[Episode] | None:
    """Play `episodes` whole games with the checkpoint `checkpoint` names (the newest, `best` or a .pt file's
    path: ppo1.runfiles.resolve), split over the ranks.

    Every rank prints its games as they end; rank 0 prints the summary of all of them. Returns all
    games in game order on rank 0, None on the other ranks.
    """
    if episodes < 1:
        raise PPO1Error(f"--episodes={episodes} is invalid: must be a whole number >= 1")
    trained = load_trained(config, given, comm, checkpoint)
    cfg = trained.config
    render_mode = None
    if comm.is_root:
        kind = "greedy (argmax)" if greedy else "sampled"
        out(f"ppo1: playing {episodes} games of {cfg.env_name}{games_text(cfg)} on {comm.size} rank(s), {kind} "
            f"actions, checkpoint {trained.describe()}")
        render_mode = _render_mode(out) if render else None
    mine = games_of_rank(episodes, comm.rank, comm.size)
    seed = np.random.SeedSequence([cfg.seed, PLAY_STREAM, comm.rank])
    env_seed, torch_seed = seed.spawn(2)
    error, env = None, None
    try:
        env = make_eval_env(cfg.env_name, env_seed, render_mode=render_mode,
                            options=EnvOptions.of(cfg, evaluation=True))  # Procgen: unseen levels
        trained.check_env(env)
    except PPO1Error as e:
        error = e
    except Exception as e:  # e.g. no window could be opened for --render
        error = PPO1Error(f"cannot start {cfg.env_name}: {error_line(e)}")
    comm.agree(error)

    numbers = iter(mine)

    def report(ep: Episode) -> None:
        number = next(numbers)
        cut = getattr(env, "cut_note", " (cut by the env's time limit)") if ep.truncated else ""
        where = f" (rank {comm.rank})" if comm.size > 1 else ""
        out(f"game {number + 1}/{episodes}: score {fmt_score(ep.ret)}, {ep.length} agent steps{cut}{where}")

    games = play_games(trained.policy, env, len(mine), greedy, generator_for(torch_seed), report,
                       episode_life=cfg.episode_life) if mine else []
    env.close()
    gathered = comm.gather(list(zip(mine, games)))
    if not comm.is_root:
        return None
    ordered = [g for _, g in sorted((pair for rank_games in gathered for pair in rank_games),
                                    key=lambda pair: pair[0])]
    out(f"ppo1: {summary(ordered)}")
    return ordered
