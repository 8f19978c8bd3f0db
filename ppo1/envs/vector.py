"""The `vector` family: gymnasium envs with vector observations (classic control, MuJoCo, any id or factory of
ppo1.envs.ref), trained with the MLP policy.

An observation reaches the MLP as one float32 vector (D,) (to_vector): a 1-D Box as it is, a Discrete as its
one-hot (n values), a MultiDiscrete as the one-hots of its entries one after another (sum(nvec) values), a
MultiBinary as its 0s and 1s, and a Tuple or Dict of those (nested too) as its entries' vectors one after
another, in the space's order (a Dict's keys as gymnasium orders them). So gymnasium's FrozenLake (Discrete(16)),
Taxi (Discrete(500)) and Blackjack (Tuple of three Discretes: 32 + 11 + 2 values) train without a wrapper. The
MLP then normalises every value by its running mean and std, one-hots included (see docs/own-env.md). The
observation is the Obs entry "vector" (ppo1.observations); a Dict's `action_mask` entry (or the env's
`action_masks()`) is not part of it but the entry "action_mask" (ppo1.envs.masks)."""
from __future__ import annotations

import time

import numpy as np

from ppo1.errors import PPO1Error, error_line
from ppo1.actions import check_action_space, env_action, head_size
from ppo1.envs.base import (Episode, ResetSeeds, checked_reward, env_call, load_gymnasium, offscreen, reset_result,
                            step_result, time_limit)
from ppo1.envs.family import Family
from ppo1.envs.masks import ActionMasks, mask_words, numbers, without_mask
from ppo1.envs.ref import resolve
from ppo1.envs.spaces import VECTORS, has_images, has_vectors, to_vector, vector_size
from ppo1.envs.vecenv import VecEnv
from ppo1.observations import ACTION_MASK, VECTOR, Obs, ObsSpec


class GymEnv:
    """One gymnasium env with vector or discrete observations (classic control, MuJoCo, FrozenLake, Blackjack; any
    id or factory of ppo1.envs.ref, made with --env_kwargs), the AtariEnv interface.

    No preprocessing besides observations made one float32 vector (to_vector: a Discrete's one-hot...) and Box
    actions clipped to their bounds (MultiDiscrete and MultiBinary actions: integer vectors,
    ppo1.actions.env_action); rewards are not clipped; an episode ends when the env terminates or is truncated, and the env is reset at
    once (or after --max_episode_steps steps). An episode cut by a time limit (truncated, not terminated) leaves its last observation in
    `cut_obs` for that step, so training bootstraps from its value. The episode statistics are the
    env's own returns and lengths.
    """

    stacked = False

    def __init__(self, env_id: str, seed: np.random.SeedSequence, render_mode: str | None = None,
                 env_kwargs: str = "{}", gym_env=None, max_episode_steps: int = 0):
        """gym_env: the env already made (by make_gym_env), else it is made from env_id and env_kwargs;
        max_episode_steps: a time limit in steps (0 = the env's own)."""
        gymnasium = load_gymnasium()
        self.env_id = env_id
        if gym_env is None:
            offscreen(render_mode)
            gym_env = resolve(env_id, env_kwargs).make(render_mode)
        self.gym_env = gym_env
        self.observation_space = self.gym_env.observation_space
        self.action_space = self.gym_env.action_space
        self.features_space = without_mask(self.observation_space)  # what the vector holds: all but a mask
        size = vector_size(self.features_space)
        if size is None:
            self.gym_env.close()
            kind = "image" if has_images(self.observation_space) else str(self.observation_space)
            raise PPO1Error(f"--env_name={env_id!r} has {kind} observations, not vectors ({VECTORS}; make_vec_env "
                            "gives an image env a PixelEnv)")
        try:
            check_action_space(env_id, self.action_space, box=True)
            self.masks = ActionMasks.of(env_id, self.gym_env)  # None: every action always valid
        except PPO1Error:
            self.gym_env.close()
            raise
        self.num_actions = head_size(self.action_space)
        self.obs_spec = ObsSpec.of(vector=size, mask=self.masks.size if self.masks else 0)
        self._box = isinstance(self.action_space, gymnasium.spaces.Box)
        self.seeds = ResetSeeds(seed)
        self.max_episode_steps = max_episode_steps
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        self.cut_obs: Obs | None = None  # the last observation of an episode the last step cut

    def reset(self) -> Obs:
        """Start a new episode, seeded anew at every reset (ResetSeeds). Returns obs: "vector" (D,) float32 (and
        "action_mask" (A,) bool)."""
        seed = self.seeds.next()
        obs, _ = reset_result(self.env_id, env_call(lambda: self.gym_env.reset(seed=seed)))
        self.action_space.seed(seed)
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        return self._checked(obs)

    def reads(self) -> str:
        """What the policy reads, in words (VecEnv.reads): the vector and the mask."""
        size = self.obs_spec.vector_size
        return "; ".join([f"{VECTOR} ({size},): the observation as {numbers(size)}", *mask_words(self.masks)])

    def _checked(self, obs) -> Obs:
        """The env's observation as the float32 vector (D,) of to_vector, checked against its space (EnvDataError),
        and its action mask where it masks actions."""
        entries = {VECTOR: to_vector(self.env_id, self.features_space, obs)}
        if self.masks is not None:
            entries[ACTION_MASK] = self.masks.read(obs)
        return Obs(entries)

    def step(self, action) -> tuple[Obs, float, bool, Episode | None]:
        """(obs, reward, done, episode) as AtariEnv.step; after done, obs starts the next episode."""
        a = np.clip(action, self.action_space.low, self.action_space.high) if self._box else env_action(
            self.action_space, action)
        obs, reward, terminated, truncated, _ = step_result(self.env_id, env_call(self.gym_env.step, a))
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
            obs = self._checked(reset_result(self.env_id, env_call(self.gym_env.reset))[0])
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
            raise PPO1Error(f"{self.gym_env.spec.id} cannot render frames: {error_line(e)}")
        return np.asarray(frame, np.uint8)

    def close(self) -> None:
        self.gym_env.close()


class VecGym(VecEnv):
    """k GymEnvs of one rank: obs "vector" (k, D) float32 (and "action_mask" (k, A) bool)."""

    def __init__(self, envs: list[GymEnv], remake=None, started=None):
        super().__init__(envs, remake, started)
        self.observation_space = envs[0].observation_space


VECTOR_FAMILY = Family(
    "vector", "vector-observation envs", presets=("mujoco", "ppo_lstm"), recurrent_preset="ppo_lstm",
    observations=has_vectors, frame_flags_why="vector", images=False)
VecGym.family = VECTOR_FAMILY
