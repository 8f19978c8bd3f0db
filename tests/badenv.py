"""A factory env that goes wrong at step `at` of its life (tests/test_env_data.py): `fault` is nan_obs, inf_obs,
nan_reward, inf_reward, shape (an observation of another shape than its space), dtype (a float image) or raise
(its step raises), old_step / old_reset (gym's old API: a step of 4 values, a reset of the observation alone), segfault (its
reset dies of a segmentation fault, as an engine's library whose engine was killed while it started). `image`: (24, 24) uint8 images, else vectors (3,) float32. `bad_resets`: the first that many
resets of the envs made after the first one in the process raise (an engine that fails again when made anew);
`first_resets`: the first that many resets in the process raise, the first env's included."""
from __future__ import annotations

import os

import gymnasium
import numpy as np


MADE = [0]  # envs made in this process
FAILED_RESETS = [0]  # resets that raised in this process


class BadEnv(gymnasium.Env):
    def __init__(self, fault: str = "nan_obs", at: int = 40, image: bool = False, bad_resets: int = 0,
                 rank: int | None = None, first_resets: int = 0):
        """rank: the fault on that MPI rank only (its launcher's PMI_RANK), the others' envs sound."""
        if rank is not None and int(os.environ.get("PMI_RANK", "0")) != rank:
            fault = "none"
        self.fault, self.at, self.image, self.steps, self.bad_resets = fault, at, image, 0, bad_resets
        self.first_resets = first_resets
        MADE[0] += 1
        self.remade = MADE[0] > 1
        self.observation_space = (gymnasium.spaces.Box(0, 255, (24, 24), np.uint8) if image else
                                  gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32))
        self.action_space = gymnasium.spaces.Discrete(2)

    def _obs(self):
        return np.zeros((24, 24), np.uint8) if self.image else np.zeros(3, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if FAILED_RESETS[0] < self.first_resets or (self.remade and FAILED_RESETS[0] < self.bad_resets):
            FAILED_RESETS[0] += 1
            raise RuntimeError("the engine failed to start")
        if self.fault == "segfault":
            import ctypes
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        if self.fault == "old_reset":
            return self._obs()
        if self.fault == "nan_first":  # the first observation already holds NaN
            return np.full(3, np.nan, np.float32), {}
        return self._obs(), {}

    def step(self, action):
        self.steps += 1
        obs, reward = self._obs(), 1.0
        if self.steps >= self.at:
            if self.fault == "raise":
                raise RuntimeError("the emulator lost its state")
            if self.fault in ("nan_obs", "inf_obs"):
                obs = np.full_like(obs, np.nan if self.fault == "nan_obs" else np.inf, dtype=np.float32)
            elif self.fault in ("nan_reward", "inf_reward"):
                reward = float("nan") if self.fault == "nan_reward" else float("-inf")
            elif self.fault == "shape":
                obs = np.zeros((20, 24), np.uint8) if self.image else np.zeros(4, np.float32)
            elif self.fault == "dtype":
                obs = obs.astype(np.float32)
        if self.fault == "old_step":
            return obs, reward, self.steps % 10 == 0, {}
        return obs, reward, self.steps % 10 == 0, False, {}


def make(**kwargs) -> BadEnv:
    return BadEnv(**kwargs)


def exits(**kwargs):
    """A factory that calls sys.exit(0) instead of returning an env."""
    raise SystemExit(0)
