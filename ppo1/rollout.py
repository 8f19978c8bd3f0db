"""Collecting a segment of T steps from the k envs of one rank, with batched inference; the segment's
samples as one flat batch on the policy's device, in shuffled minibatches for the update."""
from __future__ import annotations

import dataclasses
from typing import Iterator

import numpy as np
import torch

from ppo1.device import batched_act
from ppo1.envs import Episode
from ppo1.metrics import Profile
from ppo1.ppo import standardize


@dataclasses.dataclass
class Batch:
    """A rank's samples of one iteration, flattened (N = T x k), on the policy's device.

    obs (N, 4, 84, 84) uint8 or (N, D) float32; actions (N,) int64 (Discrete), (N, A) float32 (Box) or
    (N, dims) int64 (MultiDiscrete, MultiBinary); logp, adv, returns (N,);
    values (N,): V_old, the rollout's values (for --clip_vloss; None where not kept).
    `rng` is the rank's generator that shuffles them (its state is checkpointed: a resumed run
    draws the same minibatches).
    """

    obs: torch.Tensor
    actions: torch.Tensor
    logp: torch.Tensor
    adv: torch.Tensor
    returns: torch.Tensor
    rng: np.random.Generator
    values: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.obs.shape[0]

    def minibatches(self, size: int) -> Iterator["Batch"]:
        """One epoch: the samples in a fresh random order (one rng.permutation(N) per call), N // size
        minibatches of `size` each (baselines, CleanRL): the N % size left over sit this epoch out, so
        every Adam step weighs as many samples and none averages over one. size <= N."""
        perm = torch.from_numpy(self.rng.permutation(len(self))).to(self.obs.device)
        for start in range(0, len(self) - size + 1, size):
            idx = perm[start:start + size]
            yield Batch(self.obs[idx], self.actions[idx], self.logp[idx], self.adv[idx], self.returns[idx], self.rng,
                        None if self.values is None else self.values[idx])

    @torch.no_grad()
    def relabel(self, policy: torch.nn.Module, chunk: int = 1024) -> None:
        """Set logp and values to those of `policy` as it is now (pi_old of the update), in forward passes
        of `chunk` samples: after its input statistics moved (Trainer.update), so the update's first
        ratio is 1, as baselines assigns old = new after updating its ob_rms."""
        logp, values = [], []  # new tensors: on the CPU, logp and values share the Segment's buffers
        for start in range(0, len(self), chunk):
            dist, v = policy.dist(self.obs[start:start + chunk])
            logp.append(dist.log_prob(self.actions[start:start + chunk]))
            values.append(v)
        self.logp = torch.cat(logp).float()
        if self.values is not None:
            self.values = torch.cat(values).float()


@dataclasses.dataclass
class Segment:
    """T steps of k actors. dones[t] is True when step t ended the agent's episode."""

    obs: np.ndarray         # (T, k, 4, 84, 84) uint8 (Atari) or (T, k, D) float32: observation before step t
    actions: np.ndarray     # (T, k) int64 (Discrete), (T, k, A) float32 (Box) or (T, k, dims) int64 (MultiDiscrete)
    logp: np.ndarray        # (T, k) float32: log pi_old(a_t | s_t)
    values: np.ndarray      # (T, k) float32: V_old(s_t)
    rewards: np.ndarray     # (T, k) float32: the env's own (the trainer then applies --clip_reward, --reward_scale)
    dones: np.ndarray       # (T, k) bool
    last_value: np.ndarray  # (k,) float32: V_old of the observation after the last step
    episodes: list[Episode]  # real games that finished during the segment
    cut_values: np.ndarray | None = None  # (T, k) float32: V_old of the last observation of an episode cut by
    #                                       a time limit at step t, else 0 (see advantages.gae)
    advantages: np.ndarray | None = None  # (T, k) float32: GAE(lambda), set after collection
    returns: np.ndarray | None = None     # (T, k) float32: TD(lambda) value targets, likewise

    def batch(self, device: torch.device, rng: np.random.Generator, standardize_adv: bool) -> Batch:
        """The segment's samples flattened to one Batch on `device` (copied there once per iteration).
        `standardize_adv`: advantages standardised over the whole batch (baselines ppo1)."""
        n = self.rewards.size  # T x k samples on this rank
        adv = self.advantages.reshape(n)

        def flat(x: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(x.reshape(n, *x.shape[2:])).to(device)
        return Batch(flat(self.obs), flat(self.actions), flat(self.logp), flat(standardize(adv) if standardize_adv else adv),
                     flat(self.returns), rng, flat(self.values))


class Collector:
    """Steps k envs for T steps per call, reusing its buffers; times env and inference separately."""

    def __init__(self, venv, policy: torch.nn.Module, horizon: int, obs: np.ndarray,
                 device: torch.device = torch.device("cpu"), profile: Profile | None = None):
        """venv: a VecEnv (VecAtari or VecGym); obs: (k, ...) the envs' current observations (reset or
        restored); device: where `policy` is (one batched transfer each way per step when not the CPU);
        profile: where the seconds stepping envs ("env") and in forward passes ("inference") add up."""
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
            episodes=[],
            cut_values=np.zeros((horizon, k), np.float32))
        self.profile = profile or Profile()
        self.device = device

    @torch.no_grad()
    def value(self, obs: np.ndarray) -> np.ndarray:
        """V of observations (n, ...) (no action drawn: the policy's random stream is left as it is)."""
        return self.policy.dist(torch.from_numpy(obs).to(self.device))[1].float().cpu().numpy()

    def collect(self) -> Segment:
        """Run the policy for T steps in every env. Returns the (reused) Segment buffer."""
        seg, clock = self.seg, self.profile
        seg.episodes, seg.advantages, seg.returns = [], None, None
        seg.cut_values[:] = 0.0
        for t in range(self.T):
            seg.obs[t] = self.obs
            start = clock.now()
            seg.actions[t], seg.logp[t], seg.values[t] = self.act(seg.obs[t])
            mid = clock.now()
            obs, seg.rewards[t], seg.dones[t], episodes = self.venv.step(seg.actions[t])
            self.obs[:] = obs
            seg.episodes.extend(episodes)
            end = clock.now()
            clock.add("inference", mid - start)
            clock.add("env", end - mid)
            if self.venv.cut:  # episodes cut by a time limit: the value of their last observation
                with clock.timer("inference"):
                    envs = sorted(self.venv.cut)
                    seg.cut_values[t, envs] = self.value(np.stack([self.venv.cut[i] for i in envs]))
        with clock.timer("inference"):
            seg.last_value[:] = self.act(self.obs)[2]
        return seg
