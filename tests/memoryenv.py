"""A factory env that needs memory (tests/test_recurrent.py): it shows a cue, -1 or +1, on an episode's first
step only, then `delay` steps of zeros; the action on the last step pays 1 when it matches the cue (action 0
for -1, action 1 for +1), else 0. Without memory the last step's observation tells nothing: chance is 0.5."""
from __future__ import annotations

import gymnasium
import numpy as np


class CueEnv(gymnasium.Env):
    def __init__(self, delay: int = 8):
        self.delay = delay
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.cue, self.t = 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cue, self.t = int(self.np_random.integers(2)), 0
        return np.array([2.0 * self.cue - 1.0], np.float32), {}

    def step(self, action):
        self.t += 1
        last = self.t > self.delay
        reward = float(last and int(action) == self.cue)
        return np.zeros(1, np.float32), reward, last, False, {}


def make(delay: int = 8) -> CueEnv:
    return CueEnv(delay)
