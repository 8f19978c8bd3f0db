"""Flickering Atari (Hausknecht & Stone 2015, DRQN): each screen is blanked with probability `p`, so a policy that
sees one frame must remember where the ball was (`--env_name bench.flicker:pong`).

The game is gymnasium's `PongNoFrameskip-v4` under its AtariPreprocessing (the DeepMind settings: up to 30 no-ops
at a start, each action repeated for 4 frames and the last 2 maxed, gray, 84x84), then the flicker; ppo1 reads the
84x84 gray screen at its size (the `pixels` family) and stacks `--frame_stack` of them.

    pong(p=0.5)   Pong, each agent step's screen black with probability p (seeded at every reset)
"""
from __future__ import annotations

import gymnasium
import numpy as np


class Flicker(gymnasium.ObservationWrapper):
    """Each observation all zeros with probability `p`, drawn from a generator seeded at every reset."""

    def __init__(self, env: gymnasium.Env, p: float):
        if not 0.0 <= p < 1.0:
            raise ValueError(f"p must be in [0, 1), not {p}")
        super().__init__(env)
        self.p, self.rng = p, np.random.default_rng(0)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        return super().reset(seed=seed, options=options)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        return np.zeros_like(obs) if self.rng.random() < self.p else obs


def pong(p: float = 0.5, render_mode: str | None = None) -> gymnasium.Env:
    """Pong with flickering screens (see the module docstring)."""
    import ale_py

    gymnasium.register_envs(ale_py)
    env = gymnasium.make("PongNoFrameskip-v4", render_mode=render_mode)
    env = gymnasium.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True,
                                                grayscale_newaxis=True)
    return Flicker(env, p)
