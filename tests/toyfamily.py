"""A family of one's own, registered from outside ppo1 when this module is imported (`--env_name
tests.toyfamily:coin`): Coin, a one-step guess of a coin shown in the observation, with vector observations,
made through ppo1's GymEnv and VecGym, trained with the `mujoco` preset (the MLP)."""
import gymnasium
import numpy as np

from ppo1.envs import Family, GymEnv, VecGym, env_seed, register


class Coin(gymnasium.Env):
    """The coin (0 or 1) in the observation; reward 1 for the action that names it; 8 guesses a game."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, render_mode=None):
        self.render_mode, self.t = render_mode, 0
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)

    def _obs(self):
        self.coin = int(self.np_random.integers(2))
        return np.array([self.coin, 1.0], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward, self.t = float(action == self.coin), self.t + 1
        return self._obs(), reward, self.t >= 8, False, {}

    def render(self):
        return np.full((32, 32, 3), 255 * self.coin, np.uint8)


def make_vec(env_id, num_envs, seed, rank, options):
    return VecGym([GymEnv(env_id, env_seed(seed, rank, i), gym_env=Coin()) for i in range(num_envs)])


def make_eval(env_id, seed, render_mode, options):
    return GymEnv(env_id, seed, render_mode, gym_env=Coin(render_mode))


TOY = register(Family("toy", "toy games", presets=("mujoco",), make_vec=make_vec, make_eval=make_eval,
                      claims=lambda env_name, env_kwargs: env_name.startswith("tests.toyfamily:")))
