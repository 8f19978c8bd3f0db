"""A game that never ends, whose score depends on its reset (tests/test_evaluation.py): each reset draws a value
from the seed it is given, and every step pays that value. So evaluation games cut at --eval_max_steps score alike
only when their resets start the same game. `image`: observations a small uint8 image (the pixels family)
rather than a vector."""
from __future__ import annotations

import gymnasium
import numpy as np


class EndlessEnv(gymnasium.Env):
    def __init__(self, image: bool = False):
        self.image = image
        self.observation_space = (gymnasium.spaces.Box(0, 255, (5, 5, 1), np.uint8) if image
                                  else gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32))
        self.action_space = gymnasium.spaces.Discrete(2)
        self.value = 0.0

    def _obs(self):
        if self.image:
            return np.full((5, 5, 1), int(self.value * 255), np.uint8)
        return np.array([self.value], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.value = float(self.np_random.uniform())
        return self._obs(), {}

    def step(self, action):
        return self._obs(), self.value, False, False, {}


def make(image: bool = False) -> EndlessEnv:
    return EndlessEnv(image)
