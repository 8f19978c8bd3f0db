"""An env family: one object that says everything the trainer, the presets and the modes need to know of a kind
of env, so that code outside ppo1.envs asks the family and never compares names or env classes. The families
live in a table, tried in order: those that claim an --env_name by its spelling (Atari ids, `procgen:<game>`,
any a user registers with `register`), then those told apart by observations (`pixels`: images, `vector`:
vectors, discrete values and Tuples or Dicts of them), which a registered id's entry point may tell
(ppo1.envs.ref.ENTRY_POINT_FAMILIES), else an env made once. A module named as
`--env_name module:name` may register a family when it is imported (tests/toyfamily.py):

    from ppo1.envs import Family, register
    register(Family("toy", "toy games", presets=("paper",), make_vec=..., make_eval=...,
                    claims=lambda name, kwargs: name.startswith("toy:")))
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

from ppo1.errors import PPO1Error
from ppo1.envs.ref import parse_env_kwargs


@dataclasses.dataclass(frozen=True)
class Family:
    """What a family is.

    name: its name (config.json and messages); presets: the presets it takes, its default first;
    recurrent_preset: its default preset with --rnn (None: the first of presets);
    claims(env_name, env_kwargs) -> bool: whether it takes the env by its name alone, without making it
    (None: a family told apart by observations, `observations(space)`);
    make_vec(env_name, num_envs, seed, rank, options) -> VecEnv: a rank's training envs;
    make_eval(env_name, seed, render_mode, options) -> one env that plays whole games (both for a family that
    claims names; a family told apart by observations has its envs made by ppo1.envs.make_gym_env from the env
    made to tell it, and gives neither);
    open_game(env_name, seed, options) -> (env, first observation or None, (height, width), fps):
    the env that --mode movie and training videos record (None: make_eval's with rgb_array rendering).
    """

    name: str
    label: str  # what its envs are, in messages: "Atari games"
    presets: tuple[str, ...]
    make_vec: Callable[..., Any] | None = None
    make_eval: Callable[..., Any] | None = None
    claims: Callable[[str, str], bool] | None = None
    observations: Callable[[Any], bool] | None = None
    recurrent_preset: str | None = None
    open_game: Callable[..., Any] | None = None
    sign_rewards: bool = False  # --clip_reward auto clips its rewards to their sign (Atari)
    frame_flags: bool = False  # takes the image preprocessing flags (FRAME_FLAGS of ppo1.presets)
    frame_stack_with_rnn: bool = False  # takes --frame_stack, but only with --rnn (Atari)
    frame_flags_why: str = ""  # why it takes no frame flags, for the refusal
    episode_life: bool = False  # takes --episode_life (a lost life ends a training episode)
    time_limit_why: str = ""  # non-empty: refuses --max_episode_steps, for this reason
    env_kwargs: bool = True  # takes --env_kwargs
    images: bool = True  # its observations are images, for the CNNs (False: vectors, for --model_type mlp)
    obs_vectors: bool = False  # its presets set obs_vectors (a Dict's vector entries reach the network)
    frames_per_step: int = 1  # emulator frames per agent step (plots label Atari's 4)
    eval_note: Callable[[Any], str] | None = None  # what play says of the games it plays, from the Config (Procgen: which levels)
    known_packages: bool = False  # a package ppo1.envs.ref knows (ViZDoom, stable-retro) brings its preset

    def refuse_kwargs(self, env_name: str, env_kwargs: str) -> None:
        """PPO1Error for --env_kwargs given to a family whose envs take none."""
        if not self.env_kwargs and parse_env_kwargs(env_kwargs):
            raise PPO1Error(f"--env_kwargs is for envs made by gymnasium or a factory, not {self.label} "
                            f"like {env_name}")


class Families:
    """The table of families, tried in order (see the module's docstring)."""

    def __init__(self):
        self._families: list[Family] = []

    def register(self, family: Family) -> Family:
        """Add `family`: one that claims names is tried before the built-in ones, so a user's family can take
        names from them; one told apart by observations goes last. Its name must be new."""
        if any(f.name == family.name for f in self._families):
            raise PPO1Error(f"an env family named {family.name!r} is registered already")
        if (family.claims is None) == (family.observations is None):
            raise PPO1Error(f"env family {family.name!r}: give it either claims (names) or observations (spaces)")
        if family.claims is not None and (family.make_vec is None or family.make_eval is None):
            raise PPO1Error(f"env family {family.name!r}: a family that claims names makes its envs: give it "
                            "make_vec and make_eval")
        if family.claims is not None:
            self._families.insert(0, family)
        else:
            self._families.append(family)
        return family

    def __iter__(self):
        return iter(self._families)

    def named(self, name: str) -> Family:
        """The family called `name` (config.json's or a message's)."""
        for family in self._families:
            if family.name == name:
                return family
        raise PPO1Error(f"no env family is named {name!r}")

    def by_name(self, env_name: str, env_kwargs: str = "{}") -> Family | None:
        """The family that claims `env_name` by its spelling (no env is made), else None. The module of a
        `module:name` is imported first, so that a module registering a family of its own on import claims its
        names (an import error is left to ppo1.envs.ref.resolve to report). A claim never raises: a name no family
        knows is for resolve to refuse. Raises PPO1Error for --env_kwargs given to a family that takes none."""
        module, colon, _ = env_name.partition(":")
        if colon and module:
            try:
                importlib.import_module(module)
            except (Exception, SystemExit):
                pass
        family = next((f for f in self._families if f.claims is not None and f.claims(env_name, env_kwargs)), None)
        if family is not None:
            family.refuse_kwargs(env_name, env_kwargs)
        return family

    def by_observations(self, space, env_name: str) -> Family:
        """The family of an env with observation space `space`; PPO1Error naming any space none takes."""
        for family in self._families:
            if family.observations is not None and family.observations(space):
                return family
        from ppo1.envs.spaces import VECTORS
        raise PPO1Error(f"--env_name={env_name!r} has observations {space}: ppo1 trains image observations (a Box "
                        f"of uint8, (H, W) or (H, W, C), or a Dict holding one) and vector observations ({VECTORS})")
