"""Memory tasks: a cue seen once, needed `delay` steps later (`--env_name bench.cue:screen` or `bench.cue:vector`).

An episode's first observation shows a cue, left or right; every later observation is blank; the action of the
episode's last step (step `delay` + 1) pays 1 when it matches the cue (action 0 for left, 1 for right), every other
step pays 0, and the episode ends there. Without memory the last observation tells nothing: chance is 0.5, and the
mean return is the fraction of cues recalled.

    screen(delay=16, size=24)  a size x size RGB image: the cue lights the left or the right half white
    grid(delay=16, size=7)     a size x size x 1 grid of codes (its space's high bound 2: ppo1 reads codes): the
                               middle cell holds 1 (left) or 2 (right), every other cell and every later view 0
    vector(delay=16)           2 numbers: (1, 0) left, (0, 1) right, then (0, 0)
"""
from __future__ import annotations

import gymnasium
import numpy as np


class Cue(gymnasium.Env):
    """A cue on the first step, blanks after, the answer at the end (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, delay: int = 16, size: int = 0, render_mode: str | None = None, codes: bool = False):
        if delay < 1:
            raise ValueError(f"delay must be at least 1, not {delay}")
        self.delay, self.size, self.render_mode, self.codes = delay, size, render_mode, codes
        if codes:
            self.observation_space = gymnasium.spaces.Box(0, 2, (size, size, 1), np.uint8)
        elif size:
            self.observation_space = gymnasium.spaces.Box(0, 255, (size, size, 3), np.uint8)
        else:
            self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.cue, self.t = 0, 0

    def _obs(self, show: bool) -> np.ndarray:
        if not self.size:
            obs = np.zeros(2, np.float32)
            if show:
                obs[self.cue] = 1.0
            return obs
        if self.codes:
            grid = np.zeros((self.size, self.size, 1), np.uint8)
            if show:
                grid[self.size // 2, self.size // 2] = 1 + self.cue
            return grid
        image = np.zeros((self.size, self.size, 3), np.uint8)
        if show:
            half = self.size // 2
            image[:, half * self.cue:half * (self.cue + 1)] = 255
        return image

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cue, self.t = int(self.np_random.integers(2)), 0
        return self._obs(True), {}

    def step(self, action):
        self.t += 1
        last = self.t > self.delay
        reward = float(last and int(action) == self.cue)
        return self._obs(False), reward, last, False, {}

    def render(self):
        if self.render_mode == "rgb_array":
            return self._obs(self.t == 0) if self.size else None
        return None


def screen(delay: int = 16, size: int = 24, render_mode: str | None = None) -> Cue:
    """The cue on a size x size RGB screen (`--env_name bench.cue:screen --env_kwargs '{"delay": 16}'`)."""
    return Cue(delay, size, render_mode)


def grid(delay: int = 16, size: int = 7) -> Cue:
    """The cue as a code on a size x size grid (`--env_name bench.cue:grid`)."""
    return Cue(delay, size, codes=True)


def vector(delay: int = 16) -> Cue:
    """The cue as 2 numbers (`--env_name bench.cue:vector --env_kwargs '{"delay": 16}'`)."""
    return Cue(delay, 0)
