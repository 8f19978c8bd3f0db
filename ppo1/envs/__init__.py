"""Environments, one module per family behind one interface (ppo1.envs.family.Family):

    atari    ppo1.envs.atari    gymnasium + ale-py games with the DeepMind preprocessing (AtariEnv)
    procgen  ppo1.envs.procgen  `procgen:<game>` (ProcgenEnv)
    pixels   ppo1.envs.pixels   any other env with image observations, named by id, `module:EnvId` or
                                `package.module:callable` (ppo1.envs.ref), preprocessed by PixelEnv
    vector   ppo1.envs.vector   envs with vector or discrete observations, made one vector (GymEnv)

The trainer and the modes ask this module and the family objects, never the id's spelling: `env_family` (the
Family of an env: its presets, flags and rewards), `make_vec_env` (a rank's training envs), `make_eval_env` (one
env that plays whole games), with the run's EnvOptions. `families` is the table; `register` adds a family of
one's own. Every env has the AtariEnv interface: reset() -> obs; step(action) -> (obs, reward, done, finished
Episode or None), auto-resetting; get_state(); rgb(); close().
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ppo1.envs.atari import ATARI_FAMILY, AtariEnv, VecAtari, make_ale_env
from ppo1.envs.children import recording, shielded
from ppo1.envs.base import EnvCrash, EnvDataError, Episode, env_seed, env_spec, load_gymnasium, offscreen, seeded_vec
from ppo1.envs.family import Families, Family
from ppo1.envs.pixels import PIXELS_FAMILY, VecPixels
from ppo1.envs.procgen import PROCGEN_FAMILY, PROCGEN_SHAPE, ProcgenEnv, ProcgenLevels, VecProcgen
from ppo1.envs.ref import resolve
from ppo1.envs.vector import VECTOR_FAMILY, GymEnv, VecGym

# The interface (below) and the names of the family modules that the trainer, the modes and the tools use.
__all__ = ["Family", "families", "register", "env_family", "Spares", "EnvOptions", "make_gym_env", "make_vec_env",
           "make_eval_env", "shielded", "EnvCrash", "EnvDataError", "AtariEnv", "VecAtari", "make_ale_env", "Episode",
           "env_seed", "env_spec", "load_gymnasium", "PROCGEN_SHAPE", "ProcgenEnv", "ProcgenLevels", "VecProcgen",
           "GymEnv", "VecGym"]

families = Families()  # the table of env families: built in, then any a user registers
for _family in (ATARI_FAMILY, PROCGEN_FAMILY, PIXELS_FAMILY, VECTOR_FAMILY):
    families.register(_family)
register = families.register


class Spares:
    """Envs made before a rank's training envs, handed on so that each env is made once: the env env_family
    makes to learn an id's family becomes the rank's first training env (make_vec_env takes it). close()
    closes whatever was not taken (a mode other than train, a refused run)."""

    def __init__(self):
        self._envs: dict = {}

    def put(self, key: tuple, env, started=()) -> None:
        """Keep `env` under `key`, with the child processes it started while made (children.recording)."""
        self.take_and_close(key)
        self._envs[key] = (env, list(started))

    def take(self, key: tuple):
        """The env kept under `key` (now the caller's), or None."""
        return self.take_with_started(key)[0]

    def take_with_started(self, key: tuple) -> tuple:
        """(the env kept under `key`, now the caller's, the processes it started), or (None, [])."""
        return self._envs.pop(key, (None, []))

    def take_and_close(self, key: tuple) -> None:
        env = self.take(key)
        if env is not None:
            env.close()

    def close(self) -> None:
        for key in list(self._envs):
            self.take_and_close(key)


def env_family(env_name: str, env_kwargs: str = "{}", obs_key: str = "", spares: Spares | None = None) -> Family:
    """The Family of an env, which decides its preprocessing, policy and presets, named without making an env
    wherever something else tells: a family that claims the name (Atari ids, `procgen:<game>`, a registered
    family's), else the entry point of a registered id (EnvRef.told_family: gymnasium's own envs, ViZDoom's).
    Only where nothing else tells (a `module:callable` factory, an id of another package) is an env made here, to
    learn the family of its observations (`pixels`: images, `vector`: vectors): kept in `spares` for make_vec_env,
    else closed. Raises PPO1Error for an env ppo1 cannot name, make or train (its spaces)."""
    family = families.by_name(env_name, env_kwargs)
    if family is not None:
        return family
    ref = resolve(env_name, env_kwargs)
    told = ref.told_family()
    if told is not None:
        return families.named(told)
    with shielded(), recording() as started:
        env = ref.make()
    try:
        family = families.by_observations(env.observation_space, env_name)
        if family is PIXELS_FAMILY:
            from ppo1.envs.pixels import check_spaces
            check_spaces(env_name, env.observation_space, env.action_space, obs_key)
    except BaseException:
        env.close()
        raise
    if spares is None:
        env.close()
    else:
        spares.put((env_name, env_kwargs), env, started)
    return family


@dataclasses.dataclass(frozen=True)
class EnvOptions:
    """What makes an env besides its name: --env_kwargs (a JSON object string, for envs other than Atari and
    Procgen), the image preprocessing of the `pixels` family (ppo1.envs.pixels.Frames; None = its defaults),
    --max_episode_steps (other than Atari and Procgen), --episode_life (Atari training) and the levels a
    Procgen env draws (ProcgenLevels: training's, or the unseen ones that play, movie and videos pass)."""

    env_kwargs: str = "{}"
    frames: Any = None
    max_episode_steps: int = 0
    episode_life: bool = True
    levels: ProcgenLevels = ProcgenLevels()

    @property
    def atari_stack(self) -> int:
        """The frames an Atari observation stacks: 4, or --frame_stack (which Atari takes with --rnn)."""
        return self.frames.stack if self.frames is not None else 4

    @classmethod
    def of(cls, config, evaluation: bool = False) -> "EnvOptions":
        """The run's options, from its Config: for training, or with `evaluation` for the games that play,
        movie and videos show (Procgen: the levels after the training ones)."""
        from ppo1.envs.pixels import Frames
        levels = ProcgenLevels.unseen(config) if evaluation else ProcgenLevels.training(config)
        return cls(config.env_kwargs, Frames.of(config), config.max_episode_steps, config.episode_life, levels)


def make_gym_env(env_id: str, seed: np.random.SeedSequence, render_mode: str | None = None,
                 options: EnvOptions = EnvOptions(), gym_env=None):
    """One env other than Atari and Procgen, made once (or `gym_env`, one made already: env_family's) and
    wrapped by its observations: PixelEnv (images, preprocessed by options.frames) or GymEnv (vectors).
    Raises PPO1Error for an env ppo1 cannot make or train."""
    from ppo1.envs.pixels import Frames, PixelEnv

    ref = resolve(env_id, options.env_kwargs)
    offscreen(render_mode)
    if gym_env is None:
        gym_env = ref.make(render_mode)
    try:
        if families.by_observations(gym_env.observation_space, env_id) is PIXELS_FAMILY:
            return PixelEnv(ref, seed, options.frames or Frames(), gym_env=gym_env,
                            max_episode_steps=options.max_episode_steps)
        return GymEnv(env_id, seed, gym_env=gym_env, max_episode_steps=options.max_episode_steps)
    except BaseException:
        gym_env.close()
        raise


def make_vec_env(env_id: str, num_envs: int, seed: int, rank: int, options: EnvOptions = EnvOptions(),
                 spares: Spares | None = None):
    """A rank's training envs, made by their family (VecAtari for Atari ids, VecProcgen for `procgen:<game>`
    on options.levels, VecPixels for other envs with image observations, VecGym for vector observations); its
    `family` attribute is that Family. The env env_family kept in `spares` is the first. What the envs start
    gets no stop signal but from this process (ppo1.envs.children.shielded)."""
    with shielded():
        family = families.by_name(env_id, options.env_kwargs)
        if family is None:
            return make_gym_vec(env_id, num_envs, seed, rank, options, spares)
        venv = family.make_vec(env_id, num_envs, seed, rank, options)
        venv.family = family
        return venv


def make_gym_vec(env_id: str, num_envs: int, seed: int, rank: int, options: EnvOptions = EnvOptions(),
                 spares: Spares | None = None):
    """num_envs envs of make_gym_env (made anew, each with a seed of its own, when one raises: EnvMaker.restart):
    VecPixels for image observations, VecGym for vectors; the first is the env kept in `spares`, if any."""
    spare, spare_started = spares.take_with_started((env_id, options.env_kwargs)) if spares is not None else (None, [])
    first = [spare]

    def make_one(seed_seq):
        return make_gym_env(env_id, seed_seq, options=options, gym_env=first.pop() if first else None)

    def vec_cls(envs: list, remake, started):
        return (VecGym if isinstance(envs[0], GymEnv) else VecPixels)(envs, remake, started)
    return seeded_vec(vec_cls, make_one, num_envs, seed, rank, started={0: spare_started})


def make_eval_env(env_id: str, seed: np.random.SeedSequence, render_mode: str | None = None,
                  options: EnvOptions = EnvOptions()):
    """One env that plays whole games with real scores, made by its family: AtariEnv(episode_life=False),
    ProcgenEnv (on options.levels: evaluation passes the unseen ones), PixelEnv or GymEnv; shielded as make_vec_env's."""
    with shielded():
        family = families.by_name(env_id, options.env_kwargs)
        if family is None:
            return make_gym_env(env_id, seed, render_mode, options)
        return family.make_eval(env_id, seed, render_mode, options)
