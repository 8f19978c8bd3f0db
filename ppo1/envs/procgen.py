"""The `procgen` family: Procgen games (Cobbe et al., 2020), `--env_name procgen:<game>` where the
`procgen-gym` package is installed: (3, 64, 64) uint8 RGB observations (one frame, no stacking, no frame
skip), 15 actions, rewards as the game gives them; training on `num_levels` levels from `start_level`,
evaluation on the levels after them (ProcgenLevels)."""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from ppo1.errors import PPO1Error
from ppo1.envs.base import Episode, ResetSeeds, env_call, load_gymnasium, seeded_envs
from ppo1.envs.family import Family
from ppo1.envs.vecenv import VecEnv
from ppo1.observations import IMAGE, Obs, ObsSpec

PROCGEN_PREFIX = "procgen:"
PROCGEN_GAMES = ("bigfish", "bossfight", "caveflyer", "chaser", "climber", "coinrun", "dodgeball", "fruitbot",
                 "heist", "jumper", "leaper", "maze", "miner", "ninja", "plunder", "starpilot")
PROCGEN_SHAPE = (3, 64, 64)
PROCGEN_SPEC = ObsSpec.of({IMAGE: PROCGEN_SHAPE})
PROCGEN_FPS = 15  # the Procgen games' own frame rate (one frame per agent step)
PROCGEN_INSTALL = "pip install procgen-gym (Python 3.13 or newer: make venv PYTHON=python3.13)"


def is_procgen(env_id: str) -> bool:
    """True for `procgen:<game>` ids."""
    return isinstance(env_id, str) and env_id.startswith(PROCGEN_PREFIX)


def procgen_game(env_id: str) -> str:
    """The game of a `procgen:<game>` id; PPO1Error for a game Procgen does not have."""
    game = env_id[len(PROCGEN_PREFIX):]
    if game not in PROCGEN_GAMES:
        raise PPO1Error(f"--env_name={env_id!r} is not a Procgen game: use procgen:<game> with one of "
                        f"{', '.join(PROCGEN_GAMES)}")
    return game


def load_procgen(env_id: str):
    """gymnasium with the Procgen games registered; PPO1Error naming what to install when they are not."""
    procgen_game(env_id)
    gymnasium = load_gymnasium()
    try:
        import procgen_gym  # noqa: F401  registers procgen_gym/procgen-<game>-v0
    except ImportError:
        raise PPO1Error(f"--env_name={env_id!r} needs the Procgen games, which are not installed: "
                        f"{PROCGEN_INSTALL}") from None
    return gymnasium


@dataclasses.dataclass(frozen=True)
class ProcgenLevels:
    """Which Procgen levels an env draws: `num_levels` from `start_level` (0 = every level), in
    `distribution_mode` (easy, hard, ...)."""

    num_levels: int = 0
    start_level: int = 0
    distribution_mode: str = "easy"

    @classmethod
    def training(cls, config) -> "ProcgenLevels":
        """The run's training levels (--num_levels from --start_level)."""
        return cls(config.num_levels, config.start_level, config.distribution_mode)

    @classmethod
    def unseen(cls, config) -> "ProcgenLevels":
        """Evaluation: every level after the training ones (the Procgen paper's test levels); all
        levels when training used all (--num_levels 0)."""
        if config.num_levels == 0:
            return cls.training(config)
        return cls(0, config.start_level + config.num_levels, config.distribution_mode)


class ProcgenEnv:
    """One Procgen game with the AtariEnv interface: obs "image" (3, 64, 64) uint8 (CHW), raw rewards, an
    episode ends when the game does (the level is won or lost, or its time runs out) and a new level
    starts at once. Episode statistics are the game's returns and lengths."""

    stacked = False  # one RGB frame, not a stack

    def __init__(self, env_id: str, seed: np.random.SeedSequence, levels: ProcgenLevels | None = None):
        gymnasium = load_procgen(env_id)
        levels = levels or ProcgenLevels()
        self.env_id = env_id
        self.levels = levels
        self.seeds = ResetSeeds(seed)
        try:
            self.gym_env = gymnasium.make(f"procgen_gym/procgen-{procgen_game(env_id)}-v0", num_levels=levels.num_levels,
                                          start_level=levels.start_level, distribution_mode=levels.distribution_mode,
                                          rand_seed=self.seeds.first)
        except OSError as e:  # its C++ library loads with ctypes: a system library it links is missing
            raise PPO1Error(f"--env_name={env_id!r}: Procgen's game library cannot load ({e}); it needs the "
                            f"system's libGL and glib (Debian/Ubuntu: apt-get install libgl1 libglib2.0-0)") from None
        self.action_space = self.gym_env.action_space
        self.num_actions = int(self.action_space.n)
        self.obs_spec = PROCGEN_SPEC
        self.fps = PROCGEN_FPS
        self._frame = np.zeros(PROCGEN_SHAPE[1:] + PROCGEN_SHAPE[:1], np.uint8)  # (64, 64, 3): the last frame
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        self.level_seed = -1

    def _obs(self, frame) -> Obs:
        """(64, 64, 3) RGB -> "image" (3, 64, 64); keeps the frame for rgb()."""
        self._frame[:] = frame
        return Obs({IMAGE: np.ascontiguousarray(self._frame.transpose(2, 0, 1))})

    def reset(self) -> Obs:
        """Start a new level. Returns obs: "image" (3, 64, 64) uint8."""
        seed = self.seeds.next()  # a new level sequence at every reset after the first
        obs, info = env_call(lambda: self.gym_env.reset(seed=seed))
        self.level_seed = int(info.get("level_seed", -1))  # the level being played (its seed)
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        return self._obs(obs)

    def step(self, action) -> tuple[Obs, float, bool, Episode | None]:
        """(obs, reward, done, episode) as AtariEnv.step; after done, obs starts the next level."""
        obs, reward, terminated, truncated, info = env_call(self.gym_env.step, int(action))
        self.ep_return += float(reward)
        self.ep_length += 1
        episode = None
        if terminated or truncated:  # the game has moved on to its next level by itself
            episode = Episode(self.ep_return, self.ep_length, time.time() - self.ep_start,
                              bool(truncated and not terminated))
            self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        self.level_seed = int(info.get("level_seed", -1))
        return self._obs(obs), float(reward), episode is not None, episode

    def get_state(self) -> None:
        """Procgen games are not snapshotted: a resumed run starts new levels."""
        return None

    def rgb(self) -> np.ndarray:
        """The frame the agent sees, (64, 64, 3) uint8, for videos."""
        return self._frame.copy()

    def close(self) -> None:
        self.gym_env.close()


class VecProcgen(VecEnv):
    """k ProcgenEnvs of one rank: obs (k, 3, 64, 64) uint8, made by seeded_envs (those made are closed when one
    cannot be)."""

    def __init__(self, env_id: str, num_envs: int, seed: int, rank: int, levels: ProcgenLevels | None = None):
        envs, remake, started = seeded_envs(lambda seed_seq: ProcgenEnv(env_id, seed_seq, levels), num_envs, seed, rank)
        super().__init__(envs, remake, started)


def _eval_note(config) -> str:
    """Which levels play, movie and videos show: those after the training levels."""
    levels = ProcgenLevels.unseen(config)
    if config.num_levels == 0:
        return f"{levels.distribution_mode} mode, every level, as trained"
    return (f"{levels.distribution_mode} mode, unseen levels: from {levels.start_level} on; trained on "
            f"{config.start_level}..{config.start_level + config.num_levels - 1}")


def _open_game(env_id: str, seed: np.random.SeedSequence, options):
    """What movie records: the 64x64 frames the agent sees, at the games' own 15 fps."""
    env = ProcgenEnv(env_id, seed, options.levels)
    obs = env.reset()
    return env, obs, env.rgb().shape[:2], env.fps


PROCGEN_FAMILY = Family(
    "procgen", "Procgen games (procgen:<game>)", presets=("procgen",),
    claims=lambda env_id, env_kwargs: is_procgen(env_id),
    make_vec=lambda env_id, num_envs, seed, rank, options: VecProcgen(env_id, num_envs, seed, rank, options.levels),
    make_eval=lambda env_id, seed, render_mode, options: ProcgenEnv(env_id, seed, options.levels),
    open_game=_open_game, frame_flags_why="procgen", time_limit_why="its games end by themselves",
    env_kwargs=False, eval_note=_eval_note)
VecProcgen.family = PROCGEN_FAMILY
