"""What every env family shares: gymnasium with the ALE registered, the Episode record of a finished game,
VecEnv (the k envs of one rank, stepped together), their seeds, time limits and off-screen rendering."""
from __future__ import annotations

import dataclasses
import math
import os
import time
import traceback

import numpy as np

from ppo1 import PPO1Error
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


def env_seed(seed: int, rank: int, index: int, restart: int = 0) -> np.random.SeedSequence:
    """A distinct seed sequence for env `index` of rank `rank` of a run seeded with `seed` (and for the env
    made in its place at the rank's `restart`-th restart, VecEnv.restart)."""
    return np.random.SeedSequence([seed, rank, index, *([restart] if restart else [])])


class EnvDataError(PPO1Error):
    """An env gave data ppo1 cannot train on: a reward or observation that is not finite, or an observation of
    another shape or dtype than its space declares (its bounds are not checked: many envs exceed them)."""


class EnvCrash(PPO1Error):
    """An env's step raised an exception of its own: `trace` holds its traceback."""

    def __init__(self, error: BaseException, trace: str):
        first = (str(error).strip().splitlines() or [""])[0][:300]
        super().__init__(f"an env raised {type(error).__name__}" + (f": {first}" if first else ""))
        self.trace = trace


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
class Restart:
    """An env a VecEnv made anew after its step raised: which one, the exception's one line, its traceback."""

    index: int
    error: str
    trace: str


@dataclasses.dataclass
class Episode:
    """One finished real game: unclipped score over all lives, length in agent steps, wall time."""

    ret: float
    length: int
    time: float
    truncated: bool = False  # cut by the 108,000-frame limit rather than ended by the game


class VecEnv:
    """k envs of one rank (AtariEnv or GymEnv), stepped together so the policy runs one batched forward pass."""

    family = None  # the Family (ppo1.envs.family) of its envs; set by each family

    def __init__(self, envs: list, obs_dtype, remake=None):
        """remake(index, n): a new env in place of env `index` after the n-th restart (its own seed), or None
        when the envs cannot be made again. An env whose step raises is made anew while `restarts` holds at
        most `max_restarts` entries (the trainer sets it from --env_restarts; 0: the exception goes on)."""
        self.envs = envs
        self.num_envs = len(envs)
        self.num_actions = envs[0].num_actions
        self.action_space = envs[0].action_space
        self.vec_dim = envs[0].vec_dim  # numbers packed into the images' last channel (pixels)
        self.stacked = getattr(envs[0], "stacked", None)  # the images are stacks of one-channel frames (the policy's frame mean)
        self.obs = np.zeros((self.num_envs, *envs[0].obs_shape), obs_dtype)
        self.cut: dict[int, np.ndarray] = {}
        self.remake, self.max_restarts = remake, 0
        self.restarts: list[Restart] = []  # every restart so far, oldest first
        # the env call under way, (env index, "step" | "reset" | "make", time.monotonic() at its start), None
        # between calls: read by the first Ctrl-C's line, the watchdog's and ppo1.envs.calls.CallTimer
        self.calling: tuple[int, str, float] | None = None
        self.started: dict[int, list[int]] = {}  # env index -> the child processes making it started (seeded_vec)

    def reset(self) -> np.ndarray:
        """Reset all envs. Returns obs (k, *obs_shape) (a buffer reused across calls)."""
        for i, env in enumerate(self.envs):
            self.calling = (i, "reset", time.monotonic())
            self.obs[i] = env.reset()
        self.calling = None
        return self.obs

    def step(self, actions: np.ndarray):
        """Step every env with actions (k, ...). Returns (obs (k, *obs_shape), rewards (k,) float32,
        dones (k,) bool, finished episodes [Episode]). `cut` is then {env index: the last observation}
        of the episodes this step cut by a time limit (envs with `cut_obs`; Atari's 108,000-frame cut
        stays terminal, as in baselines), or by the restart of an env whose step raised (see restart)."""
        k = self.num_envs
        rewards = np.zeros(k, np.float32)
        dones = np.zeros(k, bool)
        episodes = []
        self.cut = {}
        for i, env in enumerate(self.envs):
            self.calling = (i, "step", time.monotonic())
            try:
                self.obs[i], rewards[i], dones[i], ep = env.step(actions[i])
            except PPO1Error:  # what ppo1 says of the env's data: no restart mends it
                raise
            except Exception as e:
                if self.remake is None or not self.max_restarts or len(self.restarts) > self.max_restarts:
                    raise
                self.cut[i] = self.obs[i].copy()
                self.obs[i] = self.restart(i, e)
                dones[i] = True
                continue
            if ep is not None:
                episodes.append(ep)
            if getattr(env, "cut_obs", None) is not None:
                self.cut[i] = env.cut_obs
        self.calling = None
        return self.obs, rewards, dones, episodes

    def restart(self, i: int, error: Exception) -> np.ndarray:
        """Env i raised `error` in its step (an engine that died, an emulator that exited): close what is left
        of it and make it anew (remake). Its episode counts as cut by a time limit, never as a terminal: the
        step has reward 0 and bootstraps from the value of the last observation it gave. Returns the new
        env's first observation. An exception while remaking goes on (chained to `error`)."""
        line = (str(error).strip().splitlines() or [""])[0][:300]
        self.restarts.append(Restart(i, f"{type(error).__name__}" + (f": {line}" if line else ""),
                                     traceback.format_exc()))
        try:
            self.envs[i].close()
        except Exception:  # an env whose engine died often fails to close: what is left of it goes with it
            pass
        self.calling = (i, "make", time.monotonic())
        self.envs[i] = self.remake(i, len(self.restarts))
        self.calling = (i, "reset", time.monotonic())
        return self.envs[i].reset()

    def get_state(self) -> list[dict] | None:
        """Every env's state, or None when the envs cannot be snapshotted (GymEnv)."""
        states = [env.get_state() for env in self.envs]
        return None if any(st is None for st in states) else states

    def set_state(self, states: list[dict]) -> np.ndarray:
        """Restore every env; returns the current observations (k, *obs_shape)."""
        for i, (env, state) in enumerate(zip(self.envs, states, strict=True)):
            self.obs[i] = env.set_state(state)
        return self.obs

    def close(self) -> None:
        for env in self.envs:
            env.close()


def seeded_vec(vec_cls, make_one, num_envs: int, seed: int, rank: int, started: dict | None = None):
    """vec_cls(envs, remake) of num_envs envs make_one(seed sequence), env i with env_seed(seed, rank, i), each
    made with the stop signals blocked (ppo1.envs.children.shielded); remake(i, n) makes env i anew at the n-th
    restart (VecEnv.restart). The envs already made are closed when one cannot be. Its `started` holds the child
    processes each env started while made (with `started`'s, of an env make_one hands over made already)."""
    inherited = dict(started or {})
    started = {}

    def make(i: int, restart: int = 0):
        with shielded(), recording() as new:  # a restart's engine, like the first, hears no stop signal but
            env = make_one(env_seed(seed, rank, i, restart))  # from this process
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
    vec = vec_cls(envs, make)
    vec.started = started
    return vec


def offscreen(render_mode: str | None) -> None:
    """Let envs render rgb_array frames without a display (MuJoCo through EGL, pygame's dummy driver)."""
    if render_mode == "rgb_array":
        os.environ.setdefault("MUJOCO_GL", "egl")  # MuJoCo renders off-screen without a display
        if not os.environ.get("DISPLAY"):
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame (classic control) likewise


def time_limit(length: int, max_episode_steps: int) -> bool:
    """Whether an episode of `length` steps has reached --max_episode_steps (0 = no limit of ppo1's)."""
    return 0 < max_episode_steps <= length
