"""Collecting a segment of T steps from the k envs of one rank, with batched inference."""
from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from ppo1.device import batched_act
from ppo1.envs import Episode


@dataclasses.dataclass
class Segment:
    """T steps of k actors. dones[t] is True when step t ended the agent's episode."""

    obs: np.ndarray         # (T, k, 4, 84, 84) uint8 (Atari) or (T, k, D) float32: observation before step t
    actions: np.ndarray     # (T, k) int64 (discrete) or (T, k, A) float32 (Box)
    logp: np.ndarray        # (T, k) float32: log pi_old(a_t | s_t)
    values: np.ndarray      # (T, k) float32: V_old(s_t)
    rewards: np.ndarray     # (T, k) float32 (clipped when training)
    dones: np.ndarray       # (T, k) bool
    last_value: np.ndarray  # (k,) float32: V_old of the observation after the last step
    episodes: list[Episode]  # real games that finished during the segment


class Collector:
    """Steps k envs for T steps per call, reusing its buffers; times env and inference separately."""

    def __init__(self, venv, policy: torch.nn.Module, horizon: int, obs: np.ndarray,
                 device: torch.device = torch.device("cpu")):
        """venv: a VecEnv (VecAtari or VecGym); obs: (k, ...) the envs' current observations (reset or
        restored); device: where `policy` is (one batched transfer each way per step when not the CPU)."""
        self.venv, self.policy, self.T = venv, policy, horizon
        k = venv.num_envs
        self.obs = obs.copy()  # (k, ...): the next observation
        self.act = batched_act(policy, device, self.obs)  # (k, ...) -> numpy (actions, logp, values)
        self.seg = Segment(
            obs=np.zeros((horizon, *self.obs.shape), self.obs.dtype),
            actions=np.zeros((horizon, k, *policy.action_shape), policy.action_dtype),
            logp=np.zeros((horizon, k), np.float32),
            values=np.zeros((horizon, k), np.float32),
            rewards=np.zeros((horizon, k), np.float32),
            dones=np.zeros((horizon, k), bool),
            last_value=np.zeros(k, np.float32),
            episodes=[])
        self.env_seconds = 0.0
        self.inference_seconds = 0.0

    def collect(self) -> Segment:
        """Run the policy for T steps in every env. Returns the (reused) Segment buffer."""
        seg = self.seg
        seg.episodes = []
        for t in range(self.T):
            seg.obs[t] = self.obs
            start = time.perf_counter()
            seg.actions[t], seg.logp[t], seg.values[t] = self.act(seg.obs[t])
            mid = time.perf_counter()
            obs, seg.rewards[t], seg.dones[t], episodes = self.venv.step(seg.actions[t])
            self.obs[:] = obs
            seg.episodes.extend(episodes)
            end = time.perf_counter()
            self.inference_seconds += mid - start
            self.env_seconds += end - mid
        start = time.perf_counter()
        seg.last_value[:] = self.act(self.obs)[2]
        self.inference_seconds += time.perf_counter() - start
        return seg
