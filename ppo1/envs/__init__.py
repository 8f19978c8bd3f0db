"""Environments, one module per family behind one interface:

    atari    ppo1.envs.atari    gymnasium + ale-py games with the DeepMind preprocessing (AtariEnv)
    procgen  ppo1.envs.procgen  `procgen:<game>` (ProcgenEnv)
    pixels   ppo1.envs.pixels   any other env with image observations, named by id, `module:EnvId` or
                                `package.module:callable` (ppo1.envref), preprocessed by PixelEnv
    vector   ppo1.envs.vector   envs with vector observations (GymEnv)

The trainer and the modes ask this module, never the id's spelling: `env_family` (which family, for the
presets), `make_vec_env` (a rank's training envs), `make_eval_env` (one env that plays whole games), with the
run's EnvOptions. Every env has the AtariEnv interface: reset() -> obs; step(action) -> (obs, reward, done,
finished Episode or None), auto-resetting; get_state(); rgb(); close().
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ppo1 import PPO1Error
from ppo1.envs.atari import AtariEnv, VecAtari, is_atari, make_ale_env
from ppo1.envs.children import shielded
from ppo1.envs.base import EnvCrash, EnvDataError, Episode, env_seed, env_spec, load_gymnasium, offscreen
from ppo1.envs.pixels import VecPixels
from ppo1.envs.procgen import PROCGEN_SHAPE, ProcgenEnv, ProcgenLevels, VecProcgen, is_procgen
from ppo1.envs.vector import GymEnv, VecGym

# The interface (below) and the names of the family modules that the trainer, the modes and the tools use.
__all__ = ["env_family", "named_family", "observation_family", "EnvOptions", "make_gym_env", "make_vec_env",
           "make_eval_env", "shielded", "EnvCrash", "EnvDataError", "AtariEnv", "VecAtari", "make_ale_env", "Episode", "env_seed", "env_spec",
           "load_gymnasium", "PROCGEN_SHAPE", "ProcgenEnv", "ProcgenLevels", "VecProcgen", "GymEnv",
           "VecGym"]


def env_family(env_name: str, env_kwargs: str = "{}", obs_key: str = "") -> str:
    """The family of an env, which decides its preprocessing, policy and presets: `atari` (DeepMind
    preprocessing), `procgen`, `pixels` (any other env with image observations, ppo1.envs.pixels) or `vector`
    (GymEnv). The last two are told apart by the env's observation space, so such an env is made (and
    closed) here. Raises PPO1Error for an env ppo1 cannot name, make or train (its spaces)."""
    family = named_family(env_name, env_kwargs)
    if family is not None:
        return family
    from ppo1.envref import resolve
    with shielded():
        env = resolve(env_name, env_kwargs).make()
    try:
        family = observation_family(env.observation_space, env_name)
        if family == "pixels":
            from ppo1.envs.pixels import check_spaces
            check_spaces(env_name, env.observation_space, env.action_space, obs_key)
        return family
    finally:
        env.close()


def named_family(env_name: str, env_kwargs: str = "{}") -> str | None:
    """`atari` or `procgen` where the name says so (no env is made), else None. Raises PPO1Error for
    --env_kwargs given to them (their envs take none)."""
    if not (is_procgen(env_name) or is_atari(env_name)):
        return None
    from ppo1.envref import parse_env_kwargs
    if parse_env_kwargs(env_kwargs):
        raise PPO1Error(f"--env_kwargs is for envs other than Atari and Procgen games, not {env_name}")
    return "procgen" if is_procgen(env_name) else "atari"


def observation_family(space, env_name: str) -> str:
    """`pixels` for image observations, `vector` for vector observations; PPO1Error naming any other space."""
    import gymnasium
    from ppo1.envs.pixels import is_image_space

    if is_image_space(space) or (isinstance(space, gymnasium.spaces.Dict)
                                 and any(is_image_space(s) for s in space.spaces.values())):
        return "pixels"
    if isinstance(space, gymnasium.spaces.Box) and len(space.shape) == 1:
        return "vector"
    raise PPO1Error(f"--env_name={env_name!r} has observations {space}: ppo1 trains image observations (a Box of "
                    "uint8, (H, W) or (H, W, C), or a Dict holding one) and vector observations (a 1-D Box)")


@dataclasses.dataclass(frozen=True)
class EnvOptions:
    """What makes an env besides its name: --env_kwargs (a JSON object string, for envs other than Atari and
    Procgen), the image preprocessing of the `pixels` family (ppo1.envs.pixels.Frames; None = its defaults),
    --max_episode_steps (other than Atari and Procgen) and --episode_life (Atari training)."""

    env_kwargs: str = "{}"
    frames: Any = None
    max_episode_steps: int = 0
    episode_life: bool = True

    @property
    def atari_stack(self) -> int:
        """The frames an Atari observation stacks: 4, or --frame_stack (which Atari takes with --rnn)."""
        return self.frames.stack if self.frames is not None else 4

    @classmethod
    def of(cls, config) -> "EnvOptions":
        """The run's options, from its Config."""
        from ppo1.envs.pixels import Frames
        return cls(config.env_kwargs, Frames.of(config), config.max_episode_steps, config.episode_life)


def make_gym_env(env_id: str, seed: np.random.SeedSequence, render_mode: str | None = None,
                 options: EnvOptions = EnvOptions()):
    """One env other than Atari and Procgen, made once and wrapped by its observations: PixelEnv (images,
    preprocessed by options.frames) or GymEnv (vectors). Raises PPO1Error for an env ppo1 cannot make or
    train."""
    from ppo1.envref import resolve
    from ppo1.envs.pixels import Frames, PixelEnv

    ref = resolve(env_id, options.env_kwargs)
    offscreen(render_mode)
    gym_env = ref.make(render_mode)
    try:
        if observation_family(gym_env.observation_space, env_id) == "pixels":
            return PixelEnv(ref, seed, options.frames or Frames(), gym_env=gym_env,
                            max_episode_steps=options.max_episode_steps)
        return GymEnv(env_id, seed, gym_env=gym_env, max_episode_steps=options.max_episode_steps)
    except BaseException:
        gym_env.close()
        raise


def make_vec_env(env_id: str, num_envs: int, seed: int, rank: int, levels: ProcgenLevels | None = None,
                 options: EnvOptions = EnvOptions()):
    """VecAtari (DeepMind preprocessing) for Atari ids, VecProcgen for `procgen:<game>` (on `levels`),
    VecPixels for other envs with image observations, VecGym for envs with vector observations. What the envs
    start gets no stop signal but from this process (ppo1.envs.children.shielded)."""
    with shielded():
        return _make_vec_env(env_id, num_envs, seed, rank, levels, options)


def _make_vec_env(env_id: str, num_envs: int, seed: int, rank: int, levels: ProcgenLevels | None,
                  options: EnvOptions):
    family = named_family(env_id, options.env_kwargs)
    if family == "procgen":
        return VecProcgen(env_id, num_envs, seed, rank, levels)
    if family == "atari":
        return VecAtari(env_id, num_envs, seed, rank, options.episode_life, options.atari_stack)
    def make(i: int, restart: int = 0):
        with shielded():  # a restart's engine, like the first, hears no stop signal but from this process
            return make_gym_env(env_id, env_seed(seed, rank, i, restart), options=options)
    envs: list = []
    try:
        for i in range(num_envs):
            envs.append(make(i))
    except BaseException:
        for env in envs:
            env.close()
        raise
    return VecGym(envs, make) if isinstance(envs[0], GymEnv) else VecPixels(envs, make)


def make_eval_env(env_id: str, seed: np.random.SeedSequence, render_mode: str | None = None,
                  levels: ProcgenLevels | None = None, options: EnvOptions = EnvOptions()):
    """One env that plays whole games with real scores: AtariEnv(episode_life=False), ProcgenEnv (on
    `levels`: evaluation passes the unseen ones), PixelEnv or GymEnv; shielded as make_vec_env's."""
    with shielded():
        return _make_eval_env(env_id, seed, render_mode, levels, options)


def _make_eval_env(env_id: str, seed: np.random.SeedSequence, render_mode: str | None, levels: ProcgenLevels | None,
                   options: EnvOptions):
    family = named_family(env_id, options.env_kwargs)
    if family == "procgen":
        return ProcgenEnv(env_id, seed, levels)
    if family == "atari":
        return AtariEnv(env_id, seed, episode_life=False, render_mode=render_mode, stack=options.atari_stack)
    return make_gym_env(env_id, seed, render_mode, options)
