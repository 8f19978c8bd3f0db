"""A factory env whose Dict observation holds an entry of a given kind beside (or, `image` False, without) an image
(tests/test_own_env_spaces.py): what ppo1 reads of each entry, or refuses in one line.

    extra "text":   "note" Text(8), which no network reads
    extra "nested": "state" Dict({"pos": Box (2,), "mode": Discrete(3)}): 5 numbers once flattened (one-hot mode)
    extra "none":   no other entry
mask: an "action_mask" MultiBinary(mask) entry (0: none), whatever the 3 actions need; given: the number of
values the entry then holds (0: as its space declares), a mask of another length than it declares."""
from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces


class EntriesEnv(gymnasium.Env):
    def __init__(self, extra: str = "text", image: bool = True, mask: int = 0, given: int = 0):
        self.given = given
        entries = {"screen": spaces.Box(0, 255, (24, 24, 1), np.uint8)} if image else {}
        if extra == "text":
            entries["note"] = spaces.Text(8)
        elif extra == "nested":
            entries["state"] = spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (2,), np.float32),
                                            "mode": spaces.Discrete(3)})
        if mask:
            entries["action_mask"] = spaces.MultiBinary(mask)
        self.observation_space = spaces.Dict(entries)
        self.action_space = spaces.Discrete(3)

    def _obs(self):
        obs = self.observation_space.sample()
        if "state" in obs:
            obs["state"]["pos"] = np.array([0.5, -0.5], np.float32)
            obs["state"]["mode"] = 2
        if "action_mask" in obs:
            obs["action_mask"] = np.ones(self.given or len(obs["action_mask"]), np.int8)
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        return self._obs(), {}

    def step(self, action):
        return self._obs(), 0.0, False, False, {}


def make(**kwargs) -> EntriesEnv:
    return EntriesEnv(**kwargs)
