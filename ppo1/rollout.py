"""Collecting a segment of T steps from the k envs of one rank, with batched inference; the segment's
samples as one flat batch on the policy's device, in shuffled minibatches for the update."""
from __future__ import annotations

import dataclasses
import traceback
from typing import Callable, Iterator

import numpy as np
import torch

from ppo1.device import batched_act
from ppo1 import PPO1Error
from ppo1.config import rnn_minibatches
from ppo1.envs import EnvCrash, Episode
from ppo1.metrics import Profile
from ppo1.policies import frame_layout
from ppo1.advantages import standardize


def rows(x: torch.Tensor, idx: torch.Tensor | slice) -> torch.Tensor:
    """x[idx]: a slice's view, or for a 1-D index tensor the rows of x in that order as index_select copies
    them (on the CPU about 8x faster than advanced indexing for a minibatch of frames); frames kept
    channels-last stay so (gathered as the (N, H, W, C) rows they are in memory)."""
    if isinstance(idx, slice):
        return x[idx]
    if x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
        return torch.index_select(x.permute(0, 2, 3, 1), 0, idx).permute(0, 3, 1, 2)
    return torch.index_select(x, 0, idx)


@dataclasses.dataclass
class Batch:
    """A rank's samples of one iteration, flattened (N = T x k), on the policy's device.

    obs (N, 4, 84, 84) uint8 (in frame_layout: channels-last on the CPU) or (N, D) float32; actions (N,) int64
    (Discrete), (N, A) float32 (Box) or (N, dims) int64 (MultiDiscrete, MultiBinary); logp, adv, returns (N,);
    values (N,): V_old, the rollout's values (for --clip_vloss; None where not kept).
    `rng` is the rank's generator that shuffles them (its state is checkpointed: a resumed run
    draws the same minibatches).
    With --rnn the samples are chunks of `seq_len` consecutive steps of one env, chunk after chunk:
    starts (N,) bool (the step begins an episode), state0 (N / seq_len, state_size) the policy's state
    before each chunk's first step.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    logp: torch.Tensor
    adv: torch.Tensor
    returns: torch.Tensor
    rng: np.random.Generator
    values: torch.Tensor | None = None
    starts: torch.Tensor | None = None
    state0: torch.Tensor | None = None
    seq_len: int = 1

    def __len__(self) -> int:
        return self.obs.shape[0]

    def _take(self, idx: torch.Tensor | slice, chunks: torch.Tensor | slice | None = None) -> "Batch":
        pick = (lambda x: None if x is None else rows(x, idx))
        return Batch(rows(self.obs, idx), rows(self.actions, idx), rows(self.logp, idx), rows(self.adv, idx),
                     rows(self.returns, idx), self.rng, pick(self.values), pick(self.starts),
                     None if chunks is None else rows(self.state0, chunks), self.seq_len)

    def chunks_per_minibatch(self, size: int) -> int:
        """--rnn: the whole chunks in each minibatch for minibatches of `size` samples (config.rnn_minibatches)."""
        return rnn_minibatches(len(self), size, self.seq_len)[0]

    def minibatch_count(self, size: int) -> int:
        """The minibatches of one epoch (see minibatches): len // size, with --rnn at most one per chunk."""
        if self.state0 is None:
            return len(self) // size
        return rnn_minibatches(len(self), size, self.seq_len)[1]

    def minibatches(self, size: int) -> Iterator["Batch"]:
        """One epoch: the samples in a fresh random order (one rng.permutation(N) per call), N // size
        minibatches of `size` each (baselines, CleanRL): the N % size left over sit this epoch out, so
        every Adam step weighs as many samples and none averages over one. size <= N.
        With --rnn whole chunks are shuffled instead (one rng.permutation(chunks)): as many minibatches as
        without (N // size, at most one per chunk), each of chunks_per_minibatch(size) chunks, the chunks
        left over sitting the epoch out; the same count on every rank (each has the same T and k)."""
        if self.state0 is None:
            perm = torch.from_numpy(self.rng.permutation(len(self))).to(self.obs.device)
            for start in range(0, len(self) - size + 1, size):
                yield self._take(perm[start:start + size])
            return
        per, count = rnn_minibatches(len(self), size, self.seq_len)
        steps = torch.arange(self.seq_len, device=self.obs.device)
        perm = torch.from_numpy(self.rng.permutation(len(self.state0))).to(self.obs.device)
        for start in range(0, count * per, per):
            chunks = perm[start:start + per]
            yield self._take((chunks[:, None] * self.seq_len + steps).reshape(-1), chunks)

    def forward(self, policy: torch.nn.Module, dist_fn: Callable | None = None):
        """(distribution, values (N,)) of `policy` on these samples in the update's pass (its precision): a
        feed-forward pass (through `dist_fn` when given: the --compile'd one), or with --rnn a replay of the
        chunks from their saved states."""
        if self.state0 is None:
            return dist_fn(self.obs) if dist_fn is not None else policy.dist(self.obs, update=True)
        return policy.replay(self.obs, self.starts.view(-1, self.seq_len), self.state0, update=True)

    @torch.no_grad()
    def relabel(self, policy: torch.nn.Module, chunk: int = 1024) -> None:
        """Set logp and values to those of `policy` as it is now (pi_old of the update), in forward passes
        of about `chunk` samples (whole --rnn chunks), in the update's precision: after its input statistics
        moved, or with --precision bf16 (Trainer.update), so the update's first ratio is 1, as baselines
        assigns old = new after updating its ob_rms."""
        logp, values = [], []  # new tensors: on the CPU, logp and values share the Segment's buffers
        chunk = max(chunk // self.seq_len, 1) * self.seq_len
        for start in range(0, len(self), chunk):
            end = min(start + chunk, len(self))  # slices: views of the batch, as before --rnn, not copies
            part = self._take(slice(start, end),
                              None if self.state0 is None else slice(start // self.seq_len, end // self.seq_len))
            dist, v = part.forward(policy)  # the update's pass, in its precision (--precision bf16)
            logp.append(dist.log_prob(part.actions))
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
    states0: np.ndarray | None = None     # --rnn: (T / L, k, state_size) float32, the policy's state before
    #                                       steps 0, L, 2L, ... (L = seq_len): where the update's chunks start
    seq_len: int = 1                      # --rnn: L

    def batch(self, device: torch.device, rng: np.random.Generator, standardize_adv: bool) -> Batch:
        """The segment's samples flattened to one Batch on `device` (copied there once per iteration).
        `standardize_adv`: advantages standardised over the whole batch (baselines ppo1). With --rnn the
        samples are laid out env after env, each env's T steps as T / L chunks of L."""
        n = self.rewards.size  # T x k samples on this rank
        adv = self.advantages.reshape(n)
        adv = (standardize(adv) if standardize_adv else adv).reshape(self.rewards.shape)
        def frames(obs: torch.Tensor) -> torch.Tensor:  # laid out once here, not in each minibatch's forward
            return frame_layout(obs) if obs.dim() == 4 else obs
        if self.states0 is None:
            def flat(x: np.ndarray) -> torch.Tensor:
                return torch.from_numpy(x.reshape(n, *x.shape[2:])).to(device)
            return Batch(frames(flat(self.obs)), flat(self.actions), flat(self.logp), flat(adv), flat(self.returns),
                         rng, flat(self.values))

        def flat(x: np.ndarray) -> torch.Tensor:  # (T, k, ...) -> (k, T, ...) -> (k T, ...)
            return torch.from_numpy(np.ascontiguousarray(x.swapaxes(0, 1)).reshape(-1, *x.shape[2:])).to(device)
        starts = np.zeros_like(self.dones)
        starts[1:] = self.dones[:-1]  # the step after an episode's last begins the next (step 0: state0 holds it)
        return Batch(frames(flat(self.obs)), flat(self.actions), flat(self.logp), flat(adv), flat(self.returns), rng,
                     flat(self.values), flat(starts), flat(self.states0), self.seq_len)


class Collector:
    """Steps k envs for T steps per call, reusing its buffers; times env and inference separately. With
    --rnn it carries the policy's state of each env across steps and calls (zeros at each episode's start)."""

    def __init__(self, venv, policy: torch.nn.Module, horizon: int, obs: np.ndarray,
                 device: torch.device = torch.device("cpu"), profile: Profile | None = None,
                 seq_len: int = 1, state: torch.Tensor | None = None):
        """venv: a VecEnv (VecAtari or VecGym); obs: (k, ...) the envs' current observations (reset or
        restored); device: where `policy` is (one batched transfer each way per step when not the CPU);
        profile: where the seconds stepping envs ("env") and in forward passes ("inference") add up;
        --rnn: seq_len, the update's chunk length (a divisor of T), and state (k, state_size), the envs'
        restored states (None: zeros, as at their episodes' start)."""
        self.venv, self.policy, self.T = venv, policy, horizon
        k = venv.num_envs
        self.obs = obs.copy()  # (k, ...): the next observation
        self.act = batched_act(policy, device, self.obs)  # (k, ...), state -> numpy (actions, logp, values), state
        self.state = policy.initial_state(k, device)  # (k, state_size) or None (feed-forward)
        if self.state is not None and state is not None:
            self.state.copy_(state)
        recurrent = self.state is not None
        self.seg = Segment(
            obs=np.zeros((horizon, *self.obs.shape), self.obs.dtype),
            actions=np.zeros((horizon, k, *policy.action_shape), policy.action_dtype),
            logp=np.zeros((horizon, k), np.float32),
            values=np.zeros((horizon, k), np.float32),
            rewards=np.zeros((horizon, k), np.float32),
            dones=np.zeros((horizon, k), bool),
            last_value=np.zeros(k, np.float32),
            episodes=[],
            cut_values=np.zeros((horizon, k), np.float32),
            states0=np.zeros((horizon // seq_len, k, self.state.shape[1]), np.float32) if recurrent else None,
            seq_len=seq_len if recurrent else 1)
        self.profile = profile or Profile()
        self.device = device

    @torch.no_grad()
    def value(self, obs: np.ndarray, state: torch.Tensor | None) -> np.ndarray:
        """V of observations (n, ...) (with --rnn: from the states (n, state_size) that led to them); no
        action is drawn, so the policy's random stream is left as it is."""
        return self.policy.step(torch.from_numpy(obs).to(self.device), state)[1].float().cpu().numpy()

    def collect(self) -> Segment:
        """Run the policy for T steps in every env. Returns the (reused) Segment buffer."""
        seg, clock = self.seg, self.profile
        seg.episodes, seg.advantages, seg.returns = [], None, None
        seg.cut_values[:] = 0.0
        for t in range(self.T):
            seg.obs[t] = self.obs
            if self.state is not None and t % seg.seq_len == 0:  # where a chunk of the update starts
                seg.states0[t // seg.seq_len] = self.state.cpu().numpy()
            start = clock.now()
            seg.actions[t], seg.logp[t], seg.values[t], state = self.act(seg.obs[t], self.state)
            mid = clock.now()
            try:
                obs, seg.rewards[t], seg.dones[t], episodes = self.venv.step(seg.actions[t])
            except PPO1Error:  # an env that crashed (EnvCrash), its data (EnvDataError), or a family's own line
                raise
            except Exception as e:  # ppo1's own code: one line, its traceback kept (Trainer.collect)
                raise EnvCrash(e, traceback.format_exc(), ours=True) from None
            self.obs[:] = obs
            seg.episodes.extend(episodes)
            end = clock.now()
            clock.add("inference", mid - start)
            clock.add("env", end - mid)
            if self.venv.cut:  # episodes cut by a time limit: the value of their last observation
                with clock.timer("inference"):
                    envs = sorted(set(self.venv.cut) - self.venv.crashed)
                    if envs:
                        seg.cut_values[t, envs] = self.value(np.stack([self.venv.cut[i] for i in envs]),
                                                             None if state is None else state[envs])
                # an env made anew after its step raised: its cut observation is s_t, which this step acted
                # on, valued as the rollout did, V(s_t | h_t) (the state after it has already seen s_t)
                for i in self.venv.crashed:
                    seg.cut_values[t, i] = seg.values[t, i]
            if state is not None:  # an episode that ended starts the next from zeros
                self.state = state * torch.from_numpy(~seg.dones[t]).to(state.device, state.dtype)[:, None]
        with clock.timer("inference"):
            seg.last_value[:] = self.act(self.obs, self.state)[2]
        return seg
