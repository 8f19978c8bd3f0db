"""VecEnv, the k envs of one rank stepped together so the policy runs one batched forward pass, and Stepped, what one
step of them produced. Each family subclasses VecEnv for its envs (ppo1.envs.atari.VecAtari, ...)."""
from __future__ import annotations

import dataclasses
import time
import traceback
from typing import Callable

import numpy as np

from ppo1.errors import PPO1Error
from ppo1.envs.base import EnvCrash, EnvRaised, Episode
from ppo1.envs.calls import CallSlot
from ppo1.envs.maker import EnvMaker
from ppo1.observations import Obs


@dataclasses.dataclass
class Stepped:
    """What one VecEnv.step produced for its k envs."""

    obs: Obs                 # (k, ...) each entry: the observation after the step (a new game's first where one ended)
    rewards: np.ndarray      # (k,) float32
    dones: np.ndarray        # (k,) bool: the step ended the env's episode (a game over, a time limit, a crash)
    episodes: list           # [Episode]: the real games the step finished, those of crashed envs as cut
    cut: dict                # {env index: Obs}: the last observation of each episode a time limit cut
    crashed: set             # the envs whose step raised and which were made anew (the step never ran)


def game_so_far(env) -> Episode:
    """The game `env` was playing, as far as it went (its score and steps before the step that raised), counted as
    cut (truncated): an env whose step raised ends its game so."""
    return Episode(env.ep_return, env.ep_length, time.time() - env.ep_start, truncated=True)


class VecEnv:
    """k envs of one rank (AtariEnv or GymEnv), stepped together. What a step produced comes back from `step`
    (Stepped); its per-rank state goes out and in through `state_dict` / `load_state_dict`. Its two parts:
    `maker` (EnvMaker: the envs in their places, made anew after a crash or on a resume) and `calls` (CallSlot:
    the env call under way, which the CallTimer, the stop and fatal-signal lines and the watchdog read)."""

    family = None  # the Family (ppo1.envs.family) of its envs; set by each family
    with_games = False  # a part of a rank's state (ppo1.checkpoint.RankParts) loaded whether or not games go on

    def __init__(self, envs: list, remake: Callable | None = None, started: dict[int, list[int]] | None = None):
        """remake(index, n): a new env in place of env `index` when n envs were made there before (its own seed,
        env_seed), or None when the envs cannot be made again; started: env index -> the child processes it
        started while made (seeded_envs), which remake adds to. An env whose step raises (EnvRaised) is made anew
        when the restarts given to `maker.mend_with` allow it (else the run stops)."""
        self.num_envs = len(envs)
        self.num_actions = envs[0].num_actions
        self.action_space = envs[0].action_space
        self.obs_spec = envs[0].obs_spec  # the named entries of its observations (ppo1.observations)
        self.stacked = bool(getattr(envs[0], "stacked", False))  # the images are stacks of one-channel frames (the policy's frame mean)
        self.obs = self.obs_spec.zeros(self.num_envs)  # (k, ...) each entry: where reset and restores write
        self.calls = CallSlot(started)
        self.maker = EnvMaker(envs, remake, self.calls)

    def reads(self) -> str:
        """What the policy reads, for the start line: each entry with its shape and, where the env says
        (`reads()` of PixelEnv and GymEnv), what it holds and where it comes from."""
        said = getattr(self.maker.envs[0], "reads", None)
        return said() if said is not None else self.obs_spec.describe()

    def rgb(self, i: int) -> np.ndarray:
        """What env i shows now, (H, W, 3) uint8 (its `rgb()`: the emulator screen, its render or its last image)."""
        return self.maker.envs[i].rgb()

    def reset(self, out: Obs | None = None) -> Obs:
        """Reset all envs, their first observations written into `out` (k, ...) (None: a buffer of the VecEnv's,
        reused across calls). Returns `out`. EnvCrash where an env's reset raises."""
        out = self.obs if out is None else out
        try:
            for i in range(self.num_envs):
                out[i] = self.maker.reset(i)
        finally:
            self.calls.leave()
        return out

    def step(self, actions: np.ndarray, out: Obs | None = None) -> Stepped:
        """Step every env with actions (k, ...), the observations after it written into `out` (k, ...) (None: the
        VecEnv's buffer). Returns what the step produced (Stepped): its `cut` holds the last observation of the
        episodes a time limit cut (envs with `cut_obs`; Atari's 108,000-frame cut stays terminal, as in
        baselines); its `crashed`, the envs whose step raised and were made anew (see _step). EnvCrash where an env
        raised and is not made anew, or ppo1's code around it did."""
        k, out = self.num_envs, self.obs if out is None else out
        done = Stepped(out, np.zeros(k, np.float32), np.zeros(k, bool), [], {}, set())
        try:
            for i in range(k):
                self._step(i, actions[i], done)
        finally:
            self.calls.leave()
        return done

    def _step(self, i: int, action, done: Stepped) -> None:
        """Step env i, its outcome written into `done`'s row i. An env whose step raised (an engine that died, an
        emulator that exited) is made anew (EnvMaker.restart): its episode counts as cut by a time limit, never as
        a terminal, since the step has reward 0 and never ran, so no loss learns from it (the Collector gives its
        sample weight 0) and the step before bootstraps from the value of the observation it acted on; its game is
        among the step's finished ones, truncated, and its row holds the new env's first observation."""
        env = self.maker.envs[i]
        self.calls.enter(i, "step")
        try:
            done.obs[i], done.rewards[i], done.dones[i], ep = env.step(action)
        except PPO1Error:  # what ppo1 says of the env's data: no restart mends it
            raise
        except EnvRaised as e:  # the env's own exception: made anew while the restarts allow
            self.maker.take(i, e, "step")
            done.episodes.append(game_so_far(env))  # the game the crash ended, its score so far, as cut
            done.crashed.add(i)
            done.obs[i] = self.maker.restart(i)
            done.dones[i] = True
            return
        except Exception as e:  # ppo1's own code around the env (preprocessing, actions): a bug, never mended
            raise EnvCrash(e, traceback.format_exc(), i, ours=True) from None
        if ep is not None:
            done.episodes.append(ep)
        if getattr(env, "cut_obs", None) is not None:
            done.cut[i] = env.cut_obs

    def _games(self) -> list[dict] | None:
        """Every env's game (its get_state()), or None when the envs cannot be snapshotted (GymEnv)."""
        states = [env.get_state() for env in self.maker.envs]
        return None if any(st is None for st in states) else states

    def _restore_games(self, states: list[dict]) -> None:
        """Restore every env's game; their current observations are written into `obs`."""
        for i, (env, state) in enumerate(zip(self.maker.envs, states, strict=True)):
            self.obs[i] = env.set_state(state)

    def state_dict(self) -> dict:
        """What a checkpoint keeps of this rank's envs: their games ("envs", None where they cannot be
        snapshotted) and how many envs were made before the current one in each place ("env_made")."""
        return {"envs": self._games(), "env_made": list(self.maker.made)}

    def without_games(self) -> dict:
        """state_dict() without the games (None: a resume makes every env anew, EnvMaker.renew), touching no env."""
        return {"envs": None, "env_made": list(self.maker.made)}

    def load_state_dict(self, state: dict) -> bool:
        """Restore the games of `state_dict()` when it holds them, else make every env anew with the seed of the
        next env of its place (EnvMaker.renew): no resume replays an episode. The observations now are in `obs`.
        Returns whether the games go on (what lives with them is restored only then: RankParts)."""
        made = list(state.get("env_made") or [0] * self.num_envs)
        if state.get("envs") is None:
            self.maker.renew(made, self.obs)
            return False
        self._restore_games(state["envs"])
        self.maker.made = made
        return True

    def close(self) -> None:
        for env in self.maker.envs:
            env.close()
