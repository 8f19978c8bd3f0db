"""A new run's preset and what it sets: which preset (--preset, else the env family's default), the values it gives
every setting not given, the flags the env's family refuses, and the settings of the machine that a resumed run
takes anew. The tables are ppo1.presets'; Config.for_preset and the CLI build a run's Config from what this returns.

The env's family is named without making an env wherever something else tells (ppo1.envs.env_family: an Atari id,
`procgen:<game>`, a name a registered family claims, a registered id whose entry point tells); only where nothing
else tells (a `module:callable` factory, an id of another package) is an env made to learn it, kept in `spares`
for the run's first training env.

This module sits below ppo1.config, whose Config.for_preset calls it: Config's own defaults come in as `defaults`
(the Config class, or any object whose attributes are the settings' defaults). It imports ppo1.envs, which loads
torch, only when called: the --np launcher imports ppo1.config and no env code.
"""
from __future__ import annotations

from ppo1.errors import PPO1Error
from ppo1.presets import (ALL_PRESETS, FRAME_FLAGS, PRESETS, PROCGEN_PRESET, RECURRENT_VECTOR, RECURRENT_VECTOR_ACTORS,
                          VECTOR_DEFAULTS, fast_budget, fast_envs_per_rank, fast_optim_batchsize, recurrent_overlay)

# Settings of the machine, not of the run: a resumed run takes them from its command line (or its preset's
# defaults, machine_defaults), never from the config.json of the checkpoint, so a run moves between GPU and CPU boxes.
MACHINE_FIELDS = ("device", "compile", "precision")


def machine_defaults(preset: str, *, defaults) -> dict:
    """The settings of the machine (MACHINE_FIELDS) a run of `preset` takes when its command line leaves them:
    the preset's (fast: --precision auto), else those of `defaults` (Config). A resumed run resolves them anew."""
    return {name: ALL_PRESETS.get(preset, {}).get(name, getattr(defaults, name)) for name in MACHINE_FIELDS}


def preset_values(given: dict, n_ranks: int = 1, spares=None, *, defaults) -> dict:
    """The values of the preset (--preset, else the env family's default) for a new run on n_ranks ranks: `given`
    holds the settings given, `defaults` (Config) the value of every other.

    Atari and other image-observation envs: `paper` unless --preset names another; vector observations:
    `mujoco` (VECTOR_DEFAULTS); `procgen:<game>`: `procgen` (PROCGEN_PRESET), the only preset for Procgen and
    only for it. `fast` also sets env_steps and envs_per_rank by the game (FAST_GAMES), and optim_batchsize by
    the actors, so that its minibatch is FAST_MINIBATCH samples. Raises PPO1Error for a preset or a
    preprocessing flag the env's family does not take (and for an env ppo1 cannot name, make or train).
    spares (ppo1.envs.Spares): where an env made to learn the family is kept for the run to take.
    """
    env_name = given.get("env_name", defaults.env_name)
    family, package = _family_and_package(given, defaults, spares)
    recurrent = given.get("rnn", defaults.rnn) != "none"
    name = _preset_name(given, family, package, env_name, recurrent)
    _check_family_flags(given, family, env_name, recurrent)
    if name == "procgen":
        return {"preset": name, **PROCGEN_PRESET}
    if name == "ppo_lstm":
        return {"preset": name, **RECURRENT_VECTOR,
                "envs_per_rank": -(-RECURRENT_VECTOR_ACTORS // max(1, n_ranks))}
    if name == "mujoco":
        return {"preset": name, **VECTOR_DEFAULTS}
    if name not in PRESETS:  # a registered family's preset that ppo1 does not have
        raise PPO1Error(f"--preset={name!r} is not a preset: choose from {', '.join(PRESETS)}")
    return _image_values(name, given, family, package, recurrent, n_ranks, defaults)


def _family_and_package(given: dict, defaults, spares) -> tuple:
    """(the env's Family, the known package (ppo1.envs.ref.Package) whose preset and settings it takes, or None:
    ViZDoom's preset and its 4 tics per action)."""
    from ppo1.envs import env_family
    from ppo1.envs.ref import resolve

    env_name = given.get("env_name", defaults.env_name)
    env_kwargs = given.get("env_kwargs", defaults.env_kwargs)
    family = env_family(env_name, env_kwargs, given.get("obs_key", defaults.obs_key), spares)
    package = resolve(env_name, env_kwargs).package if family.known_packages else None
    return family, package


def _preset_name(given: dict, family, package, env_name: str, recurrent: bool) -> str:
    """The run's preset: --preset, else the known package's, else the family's default (with --rnn, its recurrent
    one). Raises PPO1Error for a preset that is not the family's, naming the families it is for."""
    from ppo1.envs import families

    default = family.recurrent_preset if recurrent and family.recurrent_preset else family.presets[0]
    name = given.get("preset", package.preset if package and package.preset else default)
    if name not in family.presets:
        owners = [f.label for f in families if name in f.presets]
        if not owners:
            raise PPO1Error(f"--preset={name!r} is not a preset: choose from {', '.join(family.presets)} for "
                            f"{env_name}")
        raise PPO1Error(f"--preset={name} is for {' and '.join(owners)}, not for {family.label} like {env_name}: "
                        f"use {' or '.join(family.presets)}")
    return name


def _image_values(name: str, given: dict, family, package, recurrent: bool, n_ranks: int, defaults) -> dict:
    """The values of `name`, a preset of PRESETS (the families of images), for this family, known package, --rnn
    and n_ranks ranks."""
    values = {"preset": name, **PRESETS[name]}
    if family.obs_vectors:  # a Dict's vector entries reach the network (off: a saved config.json without the field)
        values["obs_vectors"] = True
    if family.frame_flags:  # images of codes read as codes (off: a saved config.json without the field)
        values["frame_codes"] = "auto"
    values.update(package.defaults if package else {})  # as if its preset's
    if recurrent:  # --rnn's own settings over the image preset's (presets.RECURRENT_IMAGE)
        values.update(recurrent_overlay({**PRESETS[name], **(package.defaults if package else {})}, n_ranks))
    horizon = given.get("timesteps_per_actorbatch", values.get("timesteps_per_actorbatch",
                                                               defaults.timesteps_per_actorbatch))
    if name == "fast":
        values.update(_fast_values(given, n_ranks, horizon, defaults))
    if values.get("bptt_len") and horizon % values["bptt_len"]:  # a preset's sequence length needs a T it
        values["bptt_len"] = 0                                     # divides; else each env's rollout is one
    return values


def _fast_values(given: dict, n_ranks: int, horizon: int, defaults) -> dict:
    """What `fast` sets by the game and the actors for a rollout of `horizon` steps: env_steps and envs_per_rank
    (FAST_GAMES) and optim_batchsize (a minibatch of FAST_MINIBATCH samples)."""
    env_name = given.get("env_name", defaults.env_name)
    out = {"env_steps": fast_budget(env_name), "envs_per_rank": fast_envs_per_rank(n_ranks, env_name)}
    envs = given.get("envs_per_rank", out["envs_per_rank"])
    out["optim_batchsize"] = fast_optim_batchsize(n_ranks * envs, horizon, envs)
    return out


def _check_family_flags(given: dict, family, env_name: str, recurrent: bool) -> None:
    """Raise PPO1Error for a flag given (`given`) that the env's family (ppo1.envs.Family) does not take."""
    if given.get("model_type") == "mlp" and family.images:  # before the flags its presets set for images
        raise PPO1Error(f"--model_type=mlp is for vector observations, not the images of {env_name} "
                        f"({family.label}): use small, large or impala")
    stack_with_rnn = family.frame_stack_with_rnn and recurrent  # memory instead of a stack: --frame_stack 1
    frame_flags = [f for f in FRAME_FLAGS if f in given and not (stack_with_rnn and f == "frame_stack")]
    if frame_flags and not family.frame_flags:
        why = family.frame_flags_why or family.name
        if family.frame_stack_with_rnn and frame_flags[0] == "frame_stack":
            why += "; with --rnn lstm or gru it takes --frame_stack"
        raise PPO1Error(f"--{frame_flags[0]} is for image-observation envs other than Atari and Procgen, not "
                        f"{env_name} ({why})")
    if given.get("rnn_critic") == "separate" and not recurrent:
        raise PPO1Error("--rnn_critic separate gives the value head a recurrent core of its own: give --rnn lstm or "
                        "gru with it")
    if "episode_life" in given and not family.episode_life:
        raise PPO1Error(f"--episode_life is for Atari games (a lost life), not {env_name}")
    if given.get("max_episode_steps") and family.time_limit_why:
        raise PPO1Error(f"--max_episode_steps is for envs other than Atari and Procgen games, not {env_name} "
                        f"({family.time_limit_why})")
