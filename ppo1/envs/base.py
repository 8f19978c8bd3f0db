"""What every env family shares: gymnasium with the ALE registered, the Episode record of a finished game, the
checks of what an env gives, what an env raised (EnvRaised, env_call) and the crash that stops training (EnvCrash),
the seeds of a rank's envs and their making (seeded_envs), time limits and off-screen rendering."""
from __future__ import annotations

import dataclasses
import math
import os
import traceback

import numpy as np

from ppo1.errors import PPO1Error, error_line
from ppo1.envs.children import recording, shielded


def load_gymnasium():
    """Import gymnasium with the ALE envs registered (ROMs ship inside ale-py)."""
    import ale_py
    import gymnasium

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner on every ROM load
    gymnasium.register_envs(ale_py)
    return gymnasium


def env_spec(env_id: str):
    """The gymnasium EnvSpec of `env_id`; PPO1Error naming the id if it is unknown."""
    gymnasium = load_gymnasium()
    try:
        return gymnasium.spec(env_id)
    except gymnasium.error.Error as e:
        raise PPO1Error(f"--env_name={env_id!r} is not a known environment id ({e}); "
                        "use e.g. PongNoFrameskip-v4, ALE/Pong-v5, CartPole-v1, module:EnvId (a package that "
                        "registers EnvId on import) or package.module:make_env (a factory)") from None


def env_seed(seed: int, rank: int, index: int, made: int = 0) -> np.random.SeedSequence:
    """A distinct seed sequence for env `index` of rank `rank` of a run seeded with `seed`, when `made` envs were
    made in its place before (by restarts, EnvMaker.restart, and resumes without its game, EnvMaker.renew): every
    env of a run gets a seed of its own, the same whether or not the run was stopped and resumed."""
    return np.random.SeedSequence([seed, rank, index, *([made] if made else [])])


class ResetSeeds:
    """The seed of each reset of an env (GymEnv, PixelEnv, ProcgenEnv): the first reset's is the one its seed
    sequence gives, every later reset's (an evaluation game cut at --eval_max_steps) one spawned from it, so that
    no reset starts the game of an earlier one. Training resets each env once, so its games stay those of that
    first seed."""

    def __init__(self, seed: np.random.SeedSequence):
        self.first = int(seed.generate_state(1)[0] % (2**31 - 1))
        self._seed, self._resets = seed, 0

    def next(self) -> int:
        """The seed of the next reset."""
        self._resets += 1
        if self._resets == 1:
            return self.first
        return int(self._seed.spawn(1)[0].generate_state(1)[0] % (2**31 - 1))


class EnvDataError(PPO1Error):
    """An env gave data ppo1 cannot train on: a reward or observation that is not finite, or an observation of
    another shape or dtype than its space declares (its bounds are not checked: many envs exceed them)."""


class EnvRaised(Exception):
    """What the user's env raised in its step or reset (its engine or emulator included), SystemExit too:
    `error`, the original exception, with `trace`, its traceback. Only this is mended by a restart."""

    def __init__(self, error: BaseException, trace: str):
        super().__init__(error_line(error))
        self.error, self.trace = error, trace

    @property
    def where(self) -> str:
        """The innermost line of the env's code that raised, as `file:line in function`."""
        frames = traceback.extract_tb(self.error.__traceback__)
        return f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else "no traceback"


def env_call(fn, *args):
    """fn(*args), a call into the user's env (its step or reset, an engine's): what it raises comes out as
    EnvRaised, so that an exception of ppo1's own code around it is never taken for an env crash."""
    try:
        return fn(*args)
    except (KeyboardInterrupt, GeneratorExit, PPO1Error):  # PPO1Error: ppo1's own words (a wrapper's check)
        raise
    except BaseException as e:  # SystemExit too: an emulator that exits is an env crash
        raise EnvRaised(e, traceback.format_exc()) from None


# gym's old API (gym < 0.26) beside gymnasium's, and the fixes, for the line of an env that speaks the old one
OLD_API_FIX = ("return gymnasium's, or wrap the env in a compatibility wrapper (Shimmy's GymV21CompatibilityV0: "
               "pip install shimmy)")


def _returned(result) -> str:
    return f"{len(result)} values" if isinstance(result, tuple) else f"a {type(result).__name__}"


def step_result(env_name: str, result) -> tuple:
    """What a gymnasium env's step returned, checked to be its 5 values (obs, reward, terminated, truncated, info):
    EnvDataError naming gym's old step API (4 values) and the fix, the env's fault, not ppo1's."""
    if isinstance(result, tuple) and len(result) == 5:
        return result
    old = " (obs, reward, done, info): gym's old step API" if isinstance(result, tuple) and len(result) == 4 else ""
    raise EnvDataError(f"{env_name}'s step returned {_returned(result)}{old}, not gymnasium's (obs, reward, "
                       f"terminated, truncated, info): {OLD_API_FIX}")


def reset_result(env_name: str, result) -> tuple:
    """What a gymnasium env's reset returned, checked to be its (obs, info): EnvDataError naming gym's old reset API
    (the observation alone) and the fix."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
        return result
    raise EnvDataError(f"{env_name}'s reset returned {_returned(result)}, not gymnasium's (obs, info) (gym's old "
                       f"reset API returns the observation alone): {OLD_API_FIX}")


class EnvCrash(PPO1Error):
    """Training cannot go on with an env: it raised (`ours` False: its step or reset, past --env_restarts or
    with restarts off) or ppo1's own code around it did (`ours` True: a bug in ppo1, not mended by restarts).
    `trace` holds the traceback; `restartable`: the env's family makes crashed envs anew (EnvMaker.remake)."""

    def __init__(self, error: BaseException, trace: str, index: int | None = None, call: str = "step",
                 ours: bool = False, why: str = "", restartable: bool = False):
        env = "an env" if index is None else f"env {index}"
        what = (f"ppo1's own code raised {error_line(error)} in {env}'s {call} (a bug in ppo1, not in the env)"
                if ours else f"{env} raised {error_line(error)} in its {call}")
        super().__init__(what + why)
        self.trace, self.ours, self.restartable = trace, ours, restartable


def checked_reward(env_name: str, reward) -> float:
    """`reward` as a float; EnvDataError naming the env when it is NaN or infinite."""
    value = float(reward)
    if not math.isfinite(value):
        raise EnvDataError(f"{env_name} gave a reward of {value}")
    return value


def checked_obs(env_name: str, obs, shape: tuple[int, ...], image: bool, what: str = "an observation") -> np.ndarray:
    """`obs` as an array after checking it against its space's `shape`: an image must be uint8, a vector of
    numbers all finite. EnvDataError naming the env, what was wrong and the shapes."""
    a = np.asarray(obs)
    if a.shape != tuple(shape):
        raise EnvDataError(f"{env_name} gave {what} of shape {a.shape}, its observation space declares {tuple(shape)}")
    if image and a.dtype != np.uint8:
        raise EnvDataError(f"{env_name} gave {what} of dtype {a.dtype}, its observation space declares uint8")
    if not image:
        if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
            raise EnvDataError(f"{env_name} gave {what} of dtype {a.dtype}, not numbers")
        if not np.isfinite(a).all():
            bad = "NaN" if np.isnan(a).any() else "inf"
            raise EnvDataError(f"{env_name} gave {what} holding {bad} (shape {a.shape})")
    return a


@dataclasses.dataclass
class Episode:
    """One finished real game: unclipped score over all lives, length in agent steps, wall time."""

    ret: float
    length: int
    time: float
    truncated: bool = False  # cut by the 108,000-frame limit rather than ended by the game


def seeded_envs(make_one, num_envs: int, seed: int, rank: int, started: dict | None = None):
    """num_envs envs make_one(seed sequence), env i with env_seed(seed, rank, i), each made with the stop signals
    blocked (ppo1.envs.children.shielded). Returns (envs, remake, started): remake(i, n) makes env i anew when n
    envs were made in its place before (EnvMaker.restart, EnvMaker.renew), shielded likewise; `started` holds the
    child processes each env started while made (with `started`'s, of an env make_one hands over made already),
    a restart's included. The envs already made are closed when one cannot be, and what it raised goes on."""
    inherited = dict(started or {})
    started = {}

    def make(i: int, made: int = 0):
        with shielded(), recording() as new:  # a restart's engine, like the first, hears no stop signal but
            env = make_one(env_seed(seed, rank, i, made))  # from this process
        started[i] = [*new, *inherited.pop(i, ())]
        return env
    envs: list = []
    try:
        for i in range(num_envs):
            envs.append(make(i))
    except BaseException:
        for env in envs:
            env.close()
        raise
    return envs, make, started


def seeded_vec(vec_cls, make_one, num_envs: int, seed: int, rank: int, started: dict | None = None):
    """vec_cls(envs, remake, started) of seeded_envs (which see); the envs are closed when vec_cls raises."""
    envs, remake, started = seeded_envs(make_one, num_envs, seed, rank, started)
    try:
        return vec_cls(envs, remake, started)
    except BaseException:
        for env in envs:
            env.close()
        raise


def offscreen(render_mode: str | None) -> None:
    """Let envs render rgb_array frames without a display (MuJoCo through EGL, pygame's dummy driver)."""
    if render_mode == "rgb_array":
        os.environ.setdefault("MUJOCO_GL", "egl")  # MuJoCo renders off-screen without a display
        if not os.environ.get("DISPLAY"):
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame (classic control) likewise


def time_limit(length: int, max_episode_steps: int) -> bool:
    """Whether an episode of `length` steps has reached --max_episode_steps (0 = no limit of ppo1's)."""
    return 0 < max_episode_steps <= length
