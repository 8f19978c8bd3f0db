"""What every env family shares: gymnasium with the ALE registered, the Episode record of a finished game,
VecEnv (the k envs of one rank, stepped together), their seeds, time limits and off-screen rendering."""
from __future__ import annotations

import dataclasses
import math
import os
import time
import traceback

import numpy as np

from ppo1 import PPO1Error, error_line
from ppo1.envs.children import recording, shielded
from ppo1.observations import Obs


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
    made in its place before (by restarts, VecEnv.restart, and resumes without its game, VecEnv.renew): every
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
    `trace` holds the traceback; `restartable`: the env's family makes crashed envs anew (VecEnv.remake)."""

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
class Restart:
    """An env a VecEnv made anew after its step raised: which one, the exception's one line, its traceback."""

    index: int
    error: str
    trace: str


@dataclasses.dataclass
class Stepped:
    """What one VecEnv.step produced for its k envs."""

    obs: Obs                 # (k, ...) each entry: the observation after the step (a new game's first where one ended)
    rewards: np.ndarray      # (k,) float32
    dones: np.ndarray        # (k,) bool: the step ended the env's episode (a game over, a time limit, a crash)
    episodes: list           # [Episode]: the real games the step finished, those of crashed envs as cut
    cut: dict                # {env index: Obs}: the last observation of each episode a time limit cut
    crashed: set             # the envs whose step raised and which were made anew (the step never ran)


@dataclasses.dataclass
class Episode:
    """One finished real game: unclipped score over all lives, length in agent steps, wall time."""

    ret: float
    length: int
    time: float
    truncated: bool = False  # cut by the 108,000-frame limit rather than ended by the game


def game_so_far(env) -> Episode:
    """The game `env` was playing, as far as it went (its score and steps before the step that raised), counted as
    cut (truncated): an env whose step raised ends its game so."""
    return Episode(env.ep_return, env.ep_length, time.time() - env.ep_start, truncated=True)


class VecEnv:
    """k envs of one rank (AtariEnv or GymEnv), stepped together so the policy runs one batched forward pass.
    Only its own methods change its attributes: what a step produced comes back from `step` (Stepped), its
    per-rank state goes out and in through `state_dict` / `load_state_dict`."""

    family = None  # the Family (ppo1.envs.family) of its envs; set by each family
    with_games = False  # a part of a rank's state (ppo1.checkpoint.RankParts) loaded whether or not games go on

    def __init__(self, envs: list, remake=None):
        """remake(index, n): a new env in place of env `index` when n envs were made there before (its own seed,
        env_seed), or None when the envs cannot be made again. An env whose step raises (EnvRaised) is made
        anew when the restarts given to `mend_with` allow it (else the run stops)."""
        self.envs = envs
        self.num_envs = len(envs)
        self.num_actions = envs[0].num_actions
        self.action_space = envs[0].action_space
        self.obs_spec = envs[0].obs_spec  # the named entries of its observations (ppo1.observations)
        self.stacked = getattr(envs[0], "stacked", None)  # the images are stacks of one-channel frames (the policy's frame mean)
        self.obs = self.obs_spec.zeros(self.num_envs)  # (k, ...) each entry: where reset and restores write
        self.remake = remake
        self._restarts = None  # what decides and records each restart (ppo1.restarts.EnvRestarts), None: none
        self.made = [0] * self.num_envs  # envs made before the current one in each place (restarts, resumes)
        # the env call under way, (env index, "step" | "reset" | "make", time.monotonic() at its start[, a reset's
        # children.Started]), None between calls: read by the first Ctrl-C's line, the watchdog's and
        # ppo1.envs.calls.CallTimer
        self.calling: tuple | None = None
        # env index -> the child processes it started while made (seeded_envs) or reset (_reset): what
        # ppo1.envs.calls.CallTimer ends when a call of that env hangs
        self.started: dict[int, list[int]] = {}

    def mend_with(self, restarts) -> None:
        """Make an env whose step raises anew when `restarts.take(Restart)` says so (it counts and reports each
        one: ppo1.restarts.EnvRestarts); None: never (the crash stops the run)."""
        self._restarts = restarts

    def reads(self) -> str:
        """What the policy reads, for the start line: each entry with its shape and, where the env says
        (`reads()` of PixelEnv and GymEnv), what it holds and where it comes from."""
        said = getattr(self.envs[0], "reads", None)
        return said() if said is not None else self.obs_spec.describe()

    def reset(self, out: Obs | None = None) -> Obs:
        """Reset all envs, their first observations written into `out` (k, ...) (None: a buffer of the VecEnv's,
        reused across calls). Returns `out`. EnvCrash where an env's reset raises."""
        out = self.obs if out is None else out
        try:
            for i in range(self.num_envs):
                out[i] = self._reset(i)
        finally:
            self.calling = None
        return out

    def _reset(self, i: int) -> Obs:
        """Reset env i (EnvCrash where it raises); see _reset_env."""
        try:
            return self._reset_env(i)
        except EnvRaised as e:
            raise EnvCrash(e.error, e.trace, i, "reset") from None

    def _reset_env(self, i: int) -> Obs:
        """Reset env i; what it starts meanwhile (ViZDoom starts its engine at its first reset) joins `started`.
        EnvRaised where its reset raises."""
        with recording() as new:
            self.calling = (i, "reset", time.monotonic(), new)  # new.so_far(): what a hung reset started
            obs = self.envs[i].reset()
        if new:
            self.started.setdefault(i, []).extend(new)
        return obs

    def step(self, actions: np.ndarray, out: Obs | None = None) -> Stepped:
        """Step every env with actions (k, ...), the observations after it written into `out` (k, ...) (None: the
        VecEnv's buffer). Returns what the step produced (Stepped): its `cut` holds the last observation of the
        episodes a time limit cut (envs with `cut_obs`; Atari's 108,000-frame cut stays terminal, as in
        baselines); its `crashed`, the envs whose step raised and were made anew (restart). EnvCrash where an env
        raised and is not made anew, or ppo1's code around it did."""
        k, out = self.num_envs, self.obs if out is None else out
        done = Stepped(out, np.zeros(k, np.float32), np.zeros(k, bool), [], {}, set())
        try:
            for i in range(k):
                self._step(i, actions[i], done)
        finally:
            self.calling = None
        return done

    def _step(self, i: int, action, done: Stepped) -> None:
        """Step env i, its outcome written into `done`'s row i."""
        env = self.envs[i]
        self.calling = (i, "step", time.monotonic())
        try:
            done.obs[i], done.rewards[i], done.dones[i], ep = env.step(action)
        except PPO1Error:  # what ppo1 says of the env's data: no restart mends it
            raise
        except EnvRaised as e:  # the env's own exception: made anew while the restarts allow
            self._take(i, e, "step")
            done.episodes.append(game_so_far(env))  # the game the crash ended, its score so far, as cut
            done.crashed.add(i)
            done.obs[i] = self.restart(i)
            done.dones[i] = True
            return
        except Exception as e:  # ppo1's own code around the env (preprocessing, actions): a bug, never mended
            raise EnvCrash(e, traceback.format_exc(), i, ours=True) from None
        if ep is not None:
            done.episodes.append(ep)
        if getattr(env, "cut_obs", None) is not None:
            done.cut[i] = env.cut_obs

    def _take(self, i: int, raised: EnvRaised, call: str) -> None:
        """Env i raised in its `call` (step; making or reset of an env made anew): go on if the restarts allow one
        more (they count and report it), else EnvCrash naming the call."""
        said = str(raised) if call == "step" else f"{raised} in the {call} of the env made in its place"
        if self.remake is None or self._restarts is None or not self._restarts.take(Restart(i, said, raised.trace)):
            raise EnvCrash(raised.error, raised.trace, i, call, restartable=self.remake is not None) from None

    def restart(self, i: int) -> Obs:
        """Env i raised in its step (an engine that died, an emulator that exited): close what is left of it and
        make it anew (remake, with the seed of the next env made there). Its episode counts as cut by a time
        limit, never as a terminal: the step has reward 0 and never ran, so no loss learns from it (the
        Collector gives its sample weight 0) and the step before bootstraps from the value of the observation
        it acted on; its game is among the step's finished ones, truncated. A new env that raises while it is
        made or in its first reset is one more restart, made anew again while they allow. Returns the new env's
        first observation. EnvCrash where the restarts allow no more."""
        while True:
            try:
                self.envs[i].close()
            except Exception:  # an env whose engine died often fails to close: what is left of it goes with it
                pass
            self.made[i] += 1
            call = "making"
            try:
                self.calling = (i, "make", time.monotonic())
                self.envs[i] = env_call(self.remake, i, self.made[i])
                call = "reset"
                return self._reset_env(i)
            except EnvRaised as e:
                self._take(i, e, call)

    def _make(self, i: int, why: str) -> Obs:
        """Make env i anew (the next seed of its place) and reset it. Returns its first observation."""
        self.made[i] += 1
        self.calling = (i, "make", time.monotonic())
        try:
            self.envs[i] = env_call(self.remake, i, self.made[i])
        except EnvRaised as e:
            raise EnvCrash(e.error, e.trace, i, "making", why=f" ({why})") from None
        return self._reset(i)

    def renew(self, made: list[int]) -> Obs:
        """A resume whose games were not restored: every env made anew with the seed of the next env of its
        place (`made`: how many were made there before, from the checkpoint), so that no resume replays the
        episodes (levels, seeds) the run began with. Returns the observations (k, ...)."""
        try:
            for i in range(self.num_envs):
                self.envs[i].close()
                self.made[i] = made[i]
                self.obs[i] = self._make(i, "made anew for the resumed run")
        finally:
            self.calling = None
        return self.obs

    def get_state(self) -> list[dict] | None:
        """Every env's state, or None when the envs cannot be snapshotted (GymEnv)."""
        states = [env.get_state() for env in self.envs]
        return None if any(st is None for st in states) else states

    def set_state(self, states: list[dict]) -> Obs:
        """Restore every env; returns the current observations (k, ...)."""
        for i, (env, state) in enumerate(zip(self.envs, states, strict=True)):
            self.obs[i] = env.set_state(state)
        return self.obs

    def state_dict(self) -> dict:
        """What a checkpoint keeps of this rank's envs: their games ("envs", None where they cannot be
        snapshotted) and how many envs were made before the current one in each place ("env_made")."""
        return {"envs": self.get_state(), "env_made": list(self.made)}

    def without_games(self) -> dict:
        """state_dict() without the games (None: a resume makes every env anew, renew), touching no env."""
        return {"envs": None, "env_made": list(self.made)}

    def load_state_dict(self, state: dict) -> bool:
        """Restore the games of `state_dict()` when it holds them, else make every env anew with the seed of the
        next env of its place (renew): no resume replays an episode. The observations now are in `obs`.
        Returns whether the games go on (what lives with them is restored only then: RankParts)."""
        made = list(state.get("env_made") or [0] * self.num_envs)
        if state.get("envs") is None:
            self.renew(made)
            return False
        self.set_state(state["envs"])
        self.made = made
        return True

    def close(self) -> None:
        for env in self.envs:
            env.close()


def seeded_envs(make_one, num_envs: int, seed: int, rank: int, started: dict | None = None):
    """num_envs envs make_one(seed sequence), env i with env_seed(seed, rank, i), each made with the stop signals
    blocked (ppo1.envs.children.shielded). Returns (envs, remake, started): remake(i, n) makes env i anew when n
    envs were made in its place before (VecEnv.restart, VecEnv.renew), shielded likewise; `started` holds the
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
    """vec_cls(envs, remake) of the envs of seeded_envs (which see), its `started` set; the envs are closed when
    vec_cls raises."""
    envs, remake, started = seeded_envs(make_one, num_envs, seed, rank, started)
    try:
        vec = vec_cls(envs, remake)
    except BaseException:
        for env in envs:
            env.close()
        raise
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
