"""The `vector` family: gymnasium envs with vector observations (classic control, MuJoCo, any id or factory of
ppo1.envref), trained with the MLP policy."""
from __future__ import annotations

import time

import numpy as np

from ppo1 import PPO1Error
from ppo1.actions import check_action_space, env_action, head_size
from ppo1.envs.base import Episode, VecEnv, checked_obs, env_call, checked_reward, load_gymnasium, offscreen, time_limit
from ppo1.envs.family import Family


class GymEnv:
    """One gymnasium env with vector observations (classic control, MuJoCo; any id or factory of
    ppo1.envref, made with --env_kwargs), the AtariEnv interface.

    No preprocessing besides float32 observations and Box actions clipped to their bounds (MultiDiscrete and
    MultiBinary actions: integer vectors, ppo1.actions.env_action); rewards
    are not clipped; an episode ends when the env terminates or is truncated, and the env is reset at
    once (or after --max_episode_steps steps). An episode cut by a time limit (truncated, not terminated) leaves its last observation in
    `cut_obs` for that step, so training bootstraps from its value. The episode statistics are the
    env's own returns and lengths.
    """

    vec_dim = 0  # no vector entries packed beside the image (PixelEnv's Dict observations)
    stacked = False

    def __init__(self, env_id: str, seed: np.random.SeedSequence, render_mode: str | None = None,
                 env_kwargs: str = "{}", gym_env=None, max_episode_steps: int = 0):
        """gym_env: the env already made (by make_gym_env), else it is made from env_id and env_kwargs;
        max_episode_steps: a time limit in steps (0 = the env's own)."""
        from ppo1.envref import resolve
        gymnasium = load_gymnasium()
        self.env_id = env_id
        if gym_env is None:
            offscreen(render_mode)
            gym_env = resolve(env_id, env_kwargs).make(render_mode)
        self.gym_env = gym_env
        self.observation_space = self.gym_env.observation_space
        self.action_space = self.gym_env.action_space
        if not isinstance(self.observation_space, gymnasium.spaces.Box) or len(self.observation_space.shape) != 1:
            self.gym_env.close()
            from ppo1.envs.pixels import has_images
            kind = "image" if has_images(self.observation_space) else str(self.observation_space)
            raise PPO1Error(f"--env_name={env_id!r} has {kind} observations, not vectors (make_vec_env gives an "
                            "image env a PixelEnv)")
        try:
            check_action_space(env_id, self.action_space, box=True)
        except PPO1Error:
            self.gym_env.close()
            raise
        self.num_actions = head_size(self.action_space)
        self.obs_shape = tuple(self.observation_space.shape)
        self._box = isinstance(self.action_space, gymnasium.spaces.Box)
        self._seed = int(seed.generate_state(1)[0] % (2**31 - 1))
        self.max_episode_steps = max_episode_steps
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        self.cut_obs: np.ndarray | None = None  # the last observation of an episode the last step cut

    def reset(self) -> np.ndarray:
        """Start a new (seeded) episode. Returns obs (D,) float32."""
        obs, _ = env_call(lambda: self.gym_env.reset(seed=self._seed))
        self.action_space.seed(self._seed)
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        return self._checked(obs)

    def _checked(self, obs) -> np.ndarray:
        """The env's observation as float32, checked against its space (EnvDataError)."""
        return checked_obs(self.env_id, obs, self.obs_shape, image=False).astype(np.float32, copy=False)

    def step(self, action) -> tuple[np.ndarray, float, bool, Episode | None]:
        """(obs, reward, done, episode) as AtariEnv.step; after done, obs starts the next episode."""
        a = np.clip(action, self.action_space.low, self.action_space.high) if self._box else env_action(
            self.action_space, action)
        obs, reward, terminated, truncated, _ = env_call(self.gym_env.step, a)
        reward = checked_reward(self.env_id, reward)
        obs = self._checked(obs)
        self.ep_return += reward
        self.ep_length += 1
        truncated = truncated or time_limit(self.ep_length, self.max_episode_steps)
        episode = None
        self.cut_obs = obs if truncated and not terminated else None
        if terminated or truncated:
            episode = Episode(self.ep_return, self.ep_length, time.time() - self.ep_start,
                              bool(truncated and not terminated))
            obs = self._checked(env_call(self.gym_env.reset)[0])
            self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        return obs, reward, episode is not None, episode

    def get_state(self) -> None:
        """General gymnasium envs cannot be snapshotted: a resumed run starts new episodes."""
        return None

    @property
    def fps(self) -> int:
        """Frames per second of the env's own rendering (one frame per step)."""
        return int(self.gym_env.metadata.get("render_fps") or 30)

    def rgb(self) -> np.ndarray:
        """The env's rendered frame (H, W, 3) uint8 (needs render_mode='rgb_array')."""
        try:
            frame = self.gym_env.render()
        except Exception as e:  # a missing renderer (pygame, OpenGL) surfaces only here
            raise PPO1Error(f"{self.gym_env.spec.id} cannot render frames: {type(e).__name__}: {e}".splitlines()[0])
        return np.asarray(frame, np.uint8)

    def close(self) -> None:
        self.gym_env.close()


class VecGym(VecEnv):
    """k GymEnvs of one rank: obs (k, D) float32."""

    def __init__(self, envs: list[GymEnv], remake=None):
        super().__init__(envs, np.float32, remake)
        self.observation_space = self.envs[0].observation_space


def has_vectors(space) -> bool:
    """Vector observations: a 1-D Box."""
    import gymnasium
    return isinstance(space, gymnasium.spaces.Box) and len(space.shape) == 1


VECTOR = Family(
    "vector", "vector-observation envs", presets=("mujoco", "ppo_lstm"), recurrent_preset="ppo_lstm",
    observations=has_vectors, frame_flags_why="vector")
VecGym.family = VECTOR
