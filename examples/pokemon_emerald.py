"""Pokemon Emerald on a Game Boy Advance emulator, for ppo1: `--env_name examples.pokemon_emerald:make_env`.

In the shape of the published PPO setups for Pokemon games: each action (an arrow and a button, pygba's 42
combinations) held for `hold` frames (24: 0.4 s of the game), the screen as ppo1's CNNs read it (ppo1 turns
it gray and resizes it: --frame_size, --frame_gray; one frame and an LSTM policy instead of a stack, as the
published RecurrentPPO setup: --rnn lstm --frame_stack 1), episodes of `max_episode_steps`
actions, and the rewards of pygba's `PokemonEmerald` wrapper (badges, cities visited, Pokemon seen and
caught, trainers beaten, experience). Bring your own ROM (this project ships none):

    pip install -e '.[gba]'            # pygba, mgba and pillow; mgba needs Debian's libmgba0.10
    python -m run_atari --np 2 --env_name examples.pokemon_emerald:make_env \\
        --env_kwargs '{"rom": "/path/to/pokemon_emerald.gba"}' --envs_per_rank 12 --frame_size 96 \\
        --rnn lstm --frame_stack 1 --env_steps 20000000 --snapshot_interval 10 --model_name emerald

`game_wrapper: false` plays any GBA ROM with no reward (the emulator path alone, as the tests do).
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
import weakref

import gymnasium
import numpy as np


class Upright(gymnasium.ObservationWrapper):
    """pygba's observations are (width, height, 3) (its render is upright); this gives them (height, width, 3),
    as images are. Its reset takes gymnasium's `options` (pygba's does not)."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        w, h, c = env.observation_space.shape
        self.observation_space = gymnasium.spaces.Box(0, 255, (h, w, c), np.uint8)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        screen, info = self.env.reset(seed=seed)  # pygba's reset takes no options
        return self.observation(screen), info

    def observation(self, screen: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(screen.transpose(1, 0, 2))


def untag_capsule_type() -> None:
    """Let mgba's bindings start on Python < 3.12. The first time the emulator calls into Python (its first
    frame), their cffi embedding takes a spin lock on PyCapsule_Type.tp_version_tag and waits until it is 0.
    Any attribute lookup on a capsule gives that type a version tag (torch makes such lookups when it is
    imported), and the emulator then spins for ever. PyType_Modified, CPython's public call for "this type
    changed", sets the tag back to 0; the next lookup assigns a new one. Python 3.12+ locks another field."""
    if sys.version_info < (3, 12):
        import ctypes
        import datetime
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(type(datetime.datetime_CAPI)))  # the capsule type


class RomCopy(gymnasium.Wrapper):
    """Removes the emulator's private copy of the ROM (and its battery save) when the env is closed, or at the
    latest when the process exits (a run that stops on an error does not close its envs one by one)."""

    def __init__(self, env: gymnasium.Env, folder: str):
        super().__init__(env)
        self.folder = folder
        self._remove = weakref.finalize(self, shutil.rmtree, folder, True)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._remove()


def load_gba(rom: str, save: str | None):
    """(pygba's PyGBA running a private copy of `rom`, from the battery save `save`; the folder of the copy).
    As PyGBA.load, which copies the ROM so mGBA never writes beside the user's files, but in a folder this
    module removes (on close, and here on any failure) and with errors that name the user's ROM."""
    import mgba.core
    from pygba import PyGBA

    folder = tempfile.mkdtemp(prefix="ppo1-gba-")
    try:
        copy = os.path.join(folder, "rom.gba")
        shutil.copyfile(rom, copy)
        if save is not None:
            shutil.copyfile(save, os.path.join(folder, "rom.sav"))
        core = mgba.core.load_path(copy)
        if core is None:
            raise ValueError(f"mGBA cannot load {rom}: is it a GBA ROM?")
        if save is not None:
            core.autoload_save()
        core.reset()
        return PyGBA(core), folder
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


# What to do where pygba or mgba does not import: mgba's wheels exist for Python 3.10 and 3.11 only.
GBA_INSTALL = ("pip install -e '.[gba]' (mgba needs Debian's libmgba0.10)" if sys.version_info < (3, 12) else
               f"mgba has wheels for Python 3.10 and 3.11 only, not {sys.version_info.major}.{sys.version_info.minor}: "
               "run the GBA example from a Python 3.11 venv (make venv)")


def make_env(rom: str = "", save: str | None = None, hold: int = 24, max_episode_steps: int = 65_536,
             game_wrapper: bool = True, render_mode: str | None = None, emulator_log: bool = False) -> gymnasium.Env:
    """The env of one emulator running `rom` (from the battery save `save`, else from power-on). mGBA's own log
    (a game's `GBA DMA: Invalid DMA source address`, thousands of lines a run) is silenced unless `emulator_log`."""
    if not rom:
        raise ValueError("give the path of your Pokemon Emerald ROM: --env_kwargs '{\"rom\": \"/path/to/emerald.gba\"}'")
    if not os.path.isfile(rom):
        raise FileNotFoundError(f"no ROM at {rom}")
    try:
        from pygba import PokemonEmerald, PyGBAEnv
    except ImportError as e:
        raise ImportError(f"{e}: {GBA_INSTALL}") from None
    if not emulator_log:
        import mgba.log
        mgba.log.silence()  # the default logger of every core of this process
    gba, folder = load_gba(rom, save)
    try:
        untag_capsule_type()  # PyGBAEnv runs the emulator's first frame
        with warnings.catch_warnings():  # without a game wrapper pygba warns that there is no reward: as asked
            warnings.simplefilter("ignore")
            env = PyGBAEnv(gba, PokemonEmerald() if game_wrapper else None, obs_type="rgb", frameskip=hold - 1,
                           render_mode=render_mode)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    # gymnasium's TimeLimit, not pygba's own (which lets an episode run one action longer than asked)
    return RomCopy(gymnasium.wrappers.TimeLimit(Upright(env), max_episode_steps), folder)
