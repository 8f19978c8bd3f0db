"""CartPole without its velocities, the task that needs memory: `--env_name bench.cartpole_novel:make_env`.

As rl-zoo's `MaskVelocityWrapper` makes CartPoleNoVel-v1 (sb3-contrib's benchmark of RecurrentPPO): CartPole-v1
(500 steps at most) with the cart's and the pole's velocities zeroed in every observation, so a policy sees
positions only and must infer the velocities from what it saw before."""
from __future__ import annotations

import gymnasium
import numpy as np

VELOCITIES = (1, 3)  # CartPole's observation: x, x_dot, theta, theta_dot


class MaskVelocity(gymnasium.ObservationWrapper):
    """The observation with its velocity entries set to 0."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.mask = np.ones(env.observation_space.shape, np.float32)
        self.mask[list(VELOCITIES)] = 0.0

    def observation(self, obs: np.ndarray) -> np.ndarray:
        return (obs * self.mask).astype(np.float32)


def make_env(render_mode: str | None = None) -> gymnasium.Env:
    return MaskVelocity(gymnasium.make("CartPole-v1", render_mode=render_mode))
