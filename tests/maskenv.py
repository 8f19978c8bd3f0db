"""A game with invalid actions, for action masking (`--env_name tests.maskenv:make`).

Each step some of the actions are valid (each with probability 1/2, at least one), drawn anew. Taking the
lowest valid action scores 1, another valid one 0.1, an invalid one ends the game with a penalty of -1. A game
lasts at most `max_steps` steps (then truncated), so a player that never takes an invalid action plays every
game to its full length, and one that does ends some earlier.

    mode "dict":   observations Dict({"features": Box (n,), "action_mask": MultiBinary(n)}): the mask an entry
    mode "method": observations Box (n,) and the env's `action_masks()` (sb3-contrib's convention)
    mode "image":  Dict({"screen": Box uint8 (24, 24, 1), "features": Box (n,), "action_mask": MultiBinary(n)})
    mode "plain":  observations Box (n,), no mask at all
    mode "dicts":  Dict of every kind of entry: two images of other sizes ("left" (24, 24, 3) RGB, "right" (30, 30)
                   gray), "count" Discrete(4) (the step modulo 4), "flags" MultiBinary(3), "features" and "action_mask"

features: the valid actions as 0s and 1s (so a policy can learn them without a mask, slowly). actions
"discrete": Discrete(n); "multidiscrete": MultiDiscrete(nvec) with a mask of sum(nvec) values, each dimension's
valid choices drawn alike (the action is invalid when any of its choices is; it scores by its first choice).
"""
from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces

MODES = ("dict", "method", "image", "plain", "dicts")


class MaskGame(gymnasium.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, mode: str = "dict", actions: str = "discrete", n: int = 5, nvec=(3, 4), max_steps: int = 25,
                 render_mode: str | None = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.mode, self.max_steps, self.render_mode = mode, max_steps, render_mode
        self.nvec = (n,) if actions == "discrete" else tuple(int(k) for k in nvec)
        self.action_space = spaces.Discrete(n) if actions == "discrete" else spaces.MultiDiscrete(self.nvec)
        size = sum(self.nvec)
        features = spaces.Box(0.0, 1.0, (size,), np.float32)
        if mode == "dict":
            self.observation_space = spaces.Dict({"features": features, "action_mask": spaces.MultiBinary(size)})
        elif mode == "image":
            self.observation_space = spaces.Dict({"screen": spaces.Box(0, 255, (24, 24, 1), np.uint8),
                                                  "features": features, "action_mask": spaces.MultiBinary(size)})
        elif mode == "dicts":
            self.observation_space = spaces.Dict({
                "left": spaces.Box(0, 255, (24, 24, 3), np.uint8), "count": spaces.Discrete(4),
                "right": spaces.Box(0, 255, (30, 30), np.uint8), "flags": spaces.MultiBinary(3),
                "features": features, "action_mask": spaces.MultiBinary(size)})
        else:
            self.observation_space = features
        self.mask = np.ones(size, np.int8)
        self.steps = 0

    def _draw(self) -> None:
        """A new set of valid choices: each with probability 1/2, at least one per dimension."""
        start = 0
        for k in self.nvec:
            part = (self.np_random.random(k) < 0.5).astype(np.int8)
            part[self.np_random.integers(k)] = 1
            self.mask[start:start + k] = part
            start += k

    def _obs(self):
        features = self.mask.astype(np.float32)
        if self.mode == "dict":
            return {"features": features, "action_mask": self.mask.copy()}
        columns = 255 * self.mask.astype(np.uint8)[None, :, None]  # the valid choices as bright columns
        if self.mode == "image":
            screen = np.zeros((24, 24, 1), np.uint8)
            screen[:, :len(self.mask)] = columns
            return {"screen": screen, "features": features, "action_mask": self.mask.copy()}
        if self.mode == "dicts":
            left, right = np.zeros((24, 24, 3), np.uint8), np.zeros((30, 30), np.uint8)
            left[:, :len(self.mask)] = columns
            right[:len(self.mask)] = columns[0]
            return {"left": left, "count": self.steps % 4, "right": right, "flags": self.mask[:3].copy(),
                    "features": features, "action_mask": self.mask.copy()}
        return features

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        self._draw()
        return self._obs(), {}

    def step(self, action):
        choices = np.atleast_1d(np.asarray(action, np.int64))
        offsets = np.cumsum((0,) + self.nvec[:-1])
        valid = bool(all(self.mask[o + a] for o, a in zip(offsets, choices)))
        self.steps += 1
        if not valid:
            return self._obs(), -1.0, True, False, {"invalid": True}
        lowest = int(np.flatnonzero(self.mask[:self.nvec[0]])[0])
        reward = 1.0 if int(choices[0]) == lowest else 0.1
        self._draw()
        return self._obs(), reward, False, self.steps >= self.max_steps, {}

    def render(self):
        frame = np.zeros((24, 24, 3), np.uint8)
        frame[:, :len(self.mask)] = 255 * self.mask.astype(np.uint8)[None, :, None]
        return frame


class MaskGameWithMethod(MaskGame):
    """Mode "method": the mask from `action_masks()`."""

    def action_masks(self) -> np.ndarray:
        """The valid choices now, as sb3-contrib's MaskablePPO reads them (one bool per choice)."""
        return self.mask.astype(bool)


def make(mode: str = "dict", actions: str = "discrete", n: int = 5, nvec=(3, 4), max_steps: int = 25,
         render_mode: str | None = None) -> MaskGame:
    """The factory `--env_name tests.maskenv:make --env_kwargs '{"mode": "method"}'` calls."""
    return (MaskGameWithMethod if mode == "method" else MaskGame)(mode, actions, n, nvec, max_steps, render_mode)
