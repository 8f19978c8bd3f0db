"""`--mode play`: play whole games with the newest checkpoint of a run and report their real scores.

The game and the model come from the config saved in the checkpoint; a flag that contradicts it is
an error. Games are whole (all lives, unclipped score, no life-loss resets: `AtariEnv(training=False)`);
envs with vector observations play their own episodes (`GymEnv`).
Under `mpirun -np R` the games are dealt round-robin to the ranks and rank 0 reports all of them.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Callable

import numpy as np
import torch

from ppo1 import PPO1Error, checkpoint
from ppo1.config import Config
from ppo1.device import configure, select_device
from ppo1.distributed import Comm
from ppo1.envs import Episode, cpu_count, make_eval_env
from ppo1.policies import ActorCritic, build

# Flags that play and movie take from the command line; every other setting is the checkpoint's.
EVAL_FLAGS = ("checkpoint_dir", "model_name", "asset_dir", "seed", "num_threads", "deterministic", "device",
              "compile")
# Seed streams of evaluation games, apart from the training envs' (seed, rank, env index) streams.
PLAY_STREAM = 1_000_001


@dataclasses.dataclass
class Trained:
    """A policy restored from a checkpoint, with the settings it was trained with."""

    policy: ActorCritic
    config: Config      # the checkpoint's config, with the evaluation flags (EVAL_FLAGS) applied
    path: str
    iteration: int
    timesteps: int

    def describe(self) -> str:
        """e.g. `checkpoints/pong/latest.pt (iteration 40, 40960 steps)`."""
        return f"{self.path} (iteration {self.iteration}, {self.timesteps} steps)"


def _load_on_root(config: Config, given: dict) -> dict:
    """Rank 0's part of load_trained. Returns what every rank needs; raises PPO1Error."""
    run_dir = config.run_dir
    if not os.path.isdir(run_dir):
        raise PPO1Error(f"no run directory {run_dir}: train one first (--mode train), or point "
                        f"--checkpoint_dir/--model_name at an existing run")
    state, path, _problems = checkpoint.load_newest(run_dir)
    if state is None:
        raise PPO1Error(f"no checkpoint in {run_dir} (no latest.pt or ckpt-*.pt): train first (--mode train)")
    saved = Config.from_dict(state["config"])
    for name, value in sorted(given.items()):
        if name not in EVAL_FLAGS and value != getattr(saved, name):
            raise PPO1Error(
                f"--{name}={value!r} conflicts with the checkpoint {path}, trained with {name}="
                f"{getattr(saved, name)!r}: play and movie take the game and model from the checkpoint, "
                f"so leave --{name} out")
    saved = dataclasses.replace(saved, **{n: getattr(config, n) for n in EVAL_FLAGS if hasattr(config, n)})
    return {"model": state["model"], "config": saved.to_dict(), "num_actions": state["num_actions"],
            "path": path, "iteration": state["iteration"], "timesteps": state["timesteps"]}


def load_trained(config: Config, given: dict, comm: Comm) -> Trained:
    """The newest checkpoint of config.run_dir as a policy, on every rank.

    `given` holds the Config flags given on the command line; any of them outside EVAL_FLAGS must
    match the checkpoint's saved value. Raises PPO1Error (on every rank) for a missing run,
    a missing or unreadable checkpoint, or a conflicting flag.
    """
    error, loaded = None, None
    try:
        device = select_device(config.device, comm.local_rank)
        if comm.is_root:
            loaded = _load_on_root(config, given)
    except PPO1Error as e:
        error = e
    comm.agree(error)
    loaded = comm.bcast(loaded)
    saved = Config.from_dict(loaded["config"])
    if saved.model_type == "mlp":  # the MLP's shape comes from the env's spaces
        env = make_eval_env(saved.env_name, np.random.SeedSequence(0))
        policy = build(saved.model_type, env.action_space, env.obs_shape)
        env.close()
    else:
        policy = build(saved.model_type, loaded["num_actions"])
    policy.load_state_dict(loaded["model"])  # CPU tensors (checkpoint.load maps them there)
    configure(device, config.deterministic)
    policy.to(device).eval()
    threads = given.get("num_threads") or 1  # batch-1 forward passes: 1 thread is fastest
    if threads > cpu_count():
        if comm.is_root:
            print(f"ppo1: note: --num_threads={threads} is more than the {cpu_count()} cores this process may "
                  f"use; using {cpu_count()}", flush=True)
        threads = cpu_count()
    torch.set_num_threads(threads)
    return Trained(policy, saved, loaded["path"], loaded["iteration"], loaded["timesteps"])


@torch.no_grad()
def choose_action(policy: ActorCritic, obs: np.ndarray, greedy: bool, generator: torch.Generator):
    """The action for one observation: the most probable (greedy) or one sampled from pi.

    Returns an int (discrete actions) or a float32 array (Box actions). Samples with its own
    generator, so evaluation never moves the global torch RNG that training uses. A policy on a GPU
    computes the distribution there; the action is drawn on the CPU with the same generator.
    """
    device = next(policy.parameters()).device
    dist, _value = policy.dist(torch.from_numpy(obs).unsqueeze(0).to(device))
    if getattr(policy, "continuous", False):
        base = dist.base_dist
        mean, std = base.mean.cpu(), base.stddev.cpu()
        noise = 0.0 if greedy else std * torch.randn(mean.shape, generator=generator)
        return (mean + noise)[0].numpy()
    if greedy:
        return int(dist.logits.argmax(-1))
    return int(torch.multinomial(dist.probs.cpu(), 1, generator=generator))


def generator_for(seed: np.random.SeedSequence) -> torch.Generator:
    """A torch generator seeded from a SeedSequence."""
    return torch.Generator().manual_seed(int(seed.generate_state(1, np.uint64)[0] >> 1))


def play_games(policy: ActorCritic, env, n: int, greedy: bool, generator: torch.Generator,
               on_game: Callable[[Episode], None] = lambda ep: None) -> list[Episode]:
    """Play n whole games in `env` (from make_eval_env). Returns their Episodes."""
    games: list[Episode] = []
    obs = env.reset()
    while len(games) < n:
        obs, _reward, _done, episode = env.step(choose_action(policy, obs, greedy, generator))
        if episode is not None:
            games.append(episode)
            on_game(episode)
    return games


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


def fmt_score(score: float) -> str:
    """A game score as text: whole numbers without a decimal point or exponent (1234567, -21)."""
    return str(int(score)) if float(score).is_integer() else f"{score:.2f}"


def games_of_rank(n: int, rank: int, size: int) -> list[int]:
    """The (0-based) game numbers rank `rank` of `size` plays: round-robin."""
    return list(range(rank, n, size))


def summary(games: list[Episode]) -> str:
    """One line: number of games, score mean ± std (min, max), length mean ± std."""
    rets = np.array([g.ret for g in games], np.float64)
    lens = np.array([g.length for g in games], np.float64)
    return (f"{len(games)} games: score {rets.mean():.2f} ± {rets.std():.2f} (min {fmt_score(rets.min())}, "
            f"max {fmt_score(rets.max())}), length {lens.mean():.0f} ± {lens.std():.0f} agent steps")


def play(config: Config, given: dict, comm: Comm, episodes: int, greedy: bool = False,
         render: bool = False, out: Callable[[str], None] = print) -> list[Episode] | None:
    """Play `episodes` whole games with the newest checkpoint, split over the ranks.

    Every rank prints its games as they end; rank 0 prints the summary of all of them. Returns all
    games in game order on rank 0, None on the other ranks.
    """
    if episodes < 1:
        raise PPO1Error(f"--episodes={episodes} is invalid: must be a whole number >= 1")
    trained = load_trained(config, given, comm)
    cfg = trained.config
    render_mode = None
    if comm.is_root:
        kind = "greedy (argmax)" if greedy else "sampled"
        out(f"ppo1: playing {episodes} games of {cfg.env_name} on {comm.size} rank(s), {kind} actions, "
            f"checkpoint {trained.describe()}")
        if render and display_available():
            render_mode = "human"
            os.environ.setdefault("SDL_AUDIODRIVER", "dummy")  # no sound: no audio errors without a sound card
        elif render and os.environ.get("DISPLAY"):
            out(f"ppo1: --render: no X server answers at DISPLAY={os.environ['DISPLAY']}; playing headless")
        elif render:
            out("ppo1: --render: no display (DISPLAY is not set); playing headless")
    mine = games_of_rank(episodes, comm.rank, comm.size)
    seed = np.random.SeedSequence([cfg.seed, PLAY_STREAM, comm.rank])
    env_seed, torch_seed = seed.spawn(2)
    error, env = None, None
    try:
        env = make_eval_env(cfg.env_name, env_seed, render_mode=render_mode)
        if env.num_actions != trained.policy.num_actions:
            raise PPO1Error(f"checkpoint {trained.path} has {trained.policy.num_actions} actions, "
                            f"{cfg.env_name} has {env.num_actions}")
    except PPO1Error as e:
        error = e
    except Exception as e:  # e.g. no window could be opened for --render
        error = PPO1Error(f"cannot start {cfg.env_name}: {type(e).__name__}: {e}".splitlines()[0])
    comm.agree(error)

    numbers = iter(mine)

    def report(ep: Episode) -> None:
        number = next(numbers)
        cut = " (cut at the 108,000-frame limit)" if ep.truncated else ""
        where = f" (rank {comm.rank})" if comm.size > 1 else ""
        out(f"game {number + 1}/{episodes}: score {fmt_score(ep.ret)}, {ep.length} agent steps{cut}{where}")

    games = play_games(trained.policy, env, len(mine), greedy, generator_for(torch_seed), report) if mine else []
    env.close()
    gathered = comm.gather(list(zip(mine, games)))
    if not comm.is_root:
        return None
    ordered = [g for _, g in sorted((pair for rank_games in gathered for pair in rank_games),
                                    key=lambda pair: pair[0])]
    out(f"ppo1: {summary(ordered)}")
    return ordered
