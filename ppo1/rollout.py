"""Collecting a segment of T steps from the k envs of one rank, with batched inference; the segment's
samples as one flat batch on the policy's device, in shuffled minibatches for the update.

A feed-forward policy and a recurrent one (--rnn) each have their own types, as Stable-Baselines3 has its
RolloutBuffer and RecurrentRolloutBuffer. Collector, Segment and Batch lay the samples out time-major (the k
envs' step t, then step t + 1) and shuffle single samples. RecurrentCollector, RecurrentSegment and
RecurrentBatch carry the policy's memory of each env from step to step, lay the samples out env-major (each
env's T steps as T / L chunks of L consecutive steps) and shuffle whole chunks, each replayed in the update
from the memory saved before its first step. make_collector picks the collector a policy needs.
"""
from __future__ import annotations

import dataclasses
import traceback
from typing import Callable, Iterator

import numpy as np
import torch

from ppo1.errors import PPO1Error
from ppo1.envs import EnvCrash, Episode
from ppo1.metrics import Profile
from ppo1.observations import Obs
from ppo1.advantages import standardize


def batched_act(policy, device: torch.device, obs: Obs) -> Callable[..., tuple]:
    """A function from the k envs' observations (an Obs of (k, ...) entries, as `obs`) and, with --rnn, their
    memories (k, memory_size) on `device` (else None) to (actions (k, ...), log-probs (k,), values (k,)) as numpy
    and the memories after them (on `device`; None without --rnn), running `policy.act` on `device`.

    CPU: the observations are used in place (torch.from_numpy), no copy. CUDA: they are copied
    into a pinned host buffer and sent as one non-blocking copy; actions, log-probs and values
    come back packed in one float64 tensor (exact for int64 actions < 2**53 and float32 values),
    one transfer per step.
    """
    if device.type == "cpu":
        def act_cpu(o: Obs, memory: torch.Tensor | None = None) -> tuple:
            action, logp, value, memory = policy.act(o.map(torch.from_numpy), memory=memory)
            return action.numpy(), logp.numpy(), value.numpy(), memory
        return act_cpu

    pinned = obs.map(lambda x: torch.empty(x.shape, dtype=torch.from_numpy(x[:0]).dtype).pin_memory())
    host = pinned.map(lambda t: t.numpy())
    k = len(obs)
    action_shape = tuple(policy.action_shape)
    action_dtype = np.dtype(policy.action_dtype)
    a_width = int(np.prod(action_shape)) if action_shape else 1

    def act_device(o: Obs, memory: torch.Tensor | None = None) -> tuple:
        host[...] = o  # the previous step's transfer back has completed, so the buffer is free
        action, logp, value, memory = policy.act(pinned.map(lambda t: t.to(device, non_blocking=True)), memory=memory)
        packed = torch.cat([action.reshape(k, a_width).double(), logp.reshape(k, 1).double(),
                            value.reshape(k, 1).double()], dim=1).cpu().numpy()  # (k, A + 2)
        actions = packed[:, :a_width].astype(action_dtype).reshape(k, *action_shape)
        return actions, packed[:, a_width].astype(np.float32), packed[:, a_width + 1].astype(np.float32), memory
    return act_device


def rows(x: torch.Tensor, idx: torch.Tensor | slice) -> torch.Tensor:
    """x[idx]: a slice's view, or for a 1-D index tensor the rows of x in that order as index_select copies
    them (on the CPU about 8x faster than advanced indexing for a minibatch of frames); frames kept
    channels-last stay so (gathered as the (N, H, W, C) rows they are in memory)."""
    if isinstance(idx, slice):
        return x[idx]
    if x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
        return torch.index_select(x.permute(0, 2, 3, 1), 0, idx).permute(0, 3, 1, 2)
    return torch.index_select(x, 0, idx)


def time_major(x: np.ndarray, device: torch.device) -> torch.Tensor:
    """(T, k, ...) -> (T k, ...) on `device`, sample t k + i being step t of env i (on the CPU a view of x)."""
    return torch.from_numpy(x.reshape(-1, *x.shape[2:])).to(device)


def env_major(x: np.ndarray, device: torch.device) -> torch.Tensor:
    """(T, k, ...) -> (k T, ...) on `device`, sample i T + t being step t of env i: each env's steps in a row."""
    return torch.from_numpy(np.ascontiguousarray(x.swapaxes(0, 1)).reshape(-1, *x.shape[2:])).to(device)


@dataclasses.dataclass
class Batch:
    """A rank's samples of one iteration, flattened (N = T x k), on the policy's device.

    obs: the observations' entries (ppo1.observations), each (N, ...): images (N, 4, 84, 84) uint8 (in frame_layout:
    channels-last on the CPU), a vector (N, D) float32, an action mask (N, A) bool; actions (N,) int64
    (Discrete), (N, A) float32 (Box) or (N, dims) int64 (MultiDiscrete, MultiBinary); logp, adv, returns (N,);
    values (N,): V_old, the rollout's values, on which the returns were built (for --clip_vloss; None where not
    kept); weights (N,): 1, or 0 for a sample no loss learns from (a step whose env crashed), None where every
    sample's is 1.
    `rng` is the rank's generator that shuffles them (its state is checkpointed: a resumed run
    draws the same minibatches).
    """

    obs: Obs
    actions: torch.Tensor
    logp: torch.Tensor
    adv: torch.Tensor
    returns: torch.Tensor
    rng: np.random.Generator
    values: torch.Tensor | None = None
    weights: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.obs)

    def _rows(self, idx: torch.Tensor | slice) -> dict:
        """The rows `idx` of every per-sample field, as a Batch's keyword arguments (the rng shared)."""
        return dict(obs=self.obs.map(lambda x: rows(x, idx)),
                    actions=rows(self.actions, idx), logp=rows(self.logp, idx),
                    adv=rows(self.adv, idx), returns=rows(self.returns, idx), rng=self.rng,
                    values=None if self.values is None else rows(self.values, idx),
                    weights=None if self.weights is None else rows(self.weights, idx))

    def minibatch_count(self, size: int) -> int:
        """The minibatches of one epoch (see minibatches): len // size."""
        return len(self) // size

    def minibatches(self, size: int) -> Iterator["Batch"]:
        """One epoch: the samples in a fresh random order (one rng.permutation(N) per call), N // size
        minibatches of `size` each (baselines, CleanRL): the N % size left over sit this epoch out, so
        every Adam step weighs as many samples and none averages over one. size <= N."""
        perm = torch.from_numpy(self.rng.permutation(len(self))).to(self.obs.device)
        for start in range(0, len(self) - size + 1, size):
            yield Batch(**self._rows(perm[start:start + size]))

    def blocks(self, size: int) -> Iterator["Batch"]:
        """The samples in their order, in blocks of `size` (the last one shorter): slices, views of the batch."""
        for start in range(0, len(self), size):
            yield Batch(**self._rows(slice(start, min(start + size, len(self)))))

    def memory_inputs(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """What the policy's evaluate takes besides the observations and actions: (starts (n, L), memory0
        (n, memory_size)) for a recurrent policy's chunks; none for a feed-forward policy's samples."""
        return None, None


def rnn_minibatches(samples: int, size: int, seq_len: int) -> tuple[int, int]:
    """--rnn: (sequences per minibatch, minibatches per epoch) for a rank's `samples` (T x k) in sequences of
    `seq_len` steps and minibatches of `size` samples (size <= samples). The count is the feed-forward run's,
    samples // size, so --rnn takes as many Adam steps at the same flags, at most one per sequence; each
    minibatch holds sequences // count whole sequences, and the sequences % count left over sit the epoch out."""
    chunks = samples // seq_len
    count = min(samples // size, chunks)
    return chunks // count, count


def rnn_update_line(cfg) -> str:
    """--rnn: the settings that shape the recurrent update (the overlay's, presets.RECURRENT_IMAGE, on images) and
    its realised minibatches per rank and epoch (rnn_minibatches), beside a feed-forward run's at the same flags:
    one line for the start of a run (rank 0). cfg: the run's Config."""
    horizon, length = cfg.timesteps_per_actorbatch, cfg.seq_len()
    samples, size = horizon * cfg.envs_per_rank, cfg.optim_batchsize * cfg.envs_per_rank
    chunks, feed_forward = samples // length, samples // size
    per, count = rnn_minibatches(samples, size, length)
    whole = " (each env's whole rollout)" if length == horizon else ""
    frames = "" if cfg.model_type == "mlp" else f", {cfg.frame_stack} frame{'s' * (cfg.frame_stack != 1)}"
    line = (f"ppo1: --rnn {cfg.rnn} ({cfg.rnn_size} units, critic {cfg.rnn_critic}{frames}, "
            f"{cfg.optim_epochs} epochs, c1 {cfg.vf_coef:g}, gradient clip "
            f"{cfg.max_grad_norm:g}): sequences of {length} steps{whole}; each epoch {count} "
            f"minibatch{'es' * (count != 1)} of {per} sequence{'s' * (per != 1)} x {length} steps = {per * length} "
            "samples per rank")
    if count < feed_forward:  # the rank's steps hold fewer sequences than a feed-forward run takes minibatches
        fits = max(d for d in range(1, length) if horizon % d == 0 and samples // d >= feed_forward)
        return (line + f", fewer than the {feed_forward} of {size} samples without --rnn: the rank's {samples} "
                f"steps hold {chunks} sequence{'s' * (chunks != 1)} (--bptt_len {fits} or more --envs_per_rank "
                "give as many)")
    line += ", as many as without --rnn"
    return line + (f" (each epoch leaves out {chunks % count} of the {chunks} sequences)" if chunks % count else "")


@dataclasses.dataclass
class RecurrentBatch(Batch):
    """--rnn: a Batch whose samples are chunks of `seq_len` (L) consecutive steps of one env, chunk after
    chunk (each env's T steps as T / L chunks); starts (N,) bool (the step begins an episode), memory0
    (N / L, memory_size) the policy's memory before each chunk's first step. Minibatches and blocks hold whole
    chunks, which the update replays from their saved memories."""

    starts: torch.Tensor = dataclasses.field(kw_only=True)
    memory0: torch.Tensor = dataclasses.field(kw_only=True)
    seq_len: int = dataclasses.field(kw_only=True)

    def _chunks(self, chunks: torch.Tensor | slice) -> "RecurrentBatch":
        """The chunks `chunks` (a 1-D index tensor, or a slice of consecutive chunks), each one's steps in order."""
        length = self.seq_len
        if isinstance(chunks, slice):
            idx = slice(chunks.start * length, chunks.stop * length)
        else:
            idx = (chunks[:, None] * length + torch.arange(length, device=chunks.device)).reshape(-1)
        return RecurrentBatch(**self._rows(idx), starts=rows(self.starts, idx), memory0=rows(self.memory0, chunks),
                              seq_len=length)

    def minibatch_count(self, size: int) -> int:
        """The minibatches of one epoch (see minibatches): len // size, at most one per chunk."""
        return rnn_minibatches(len(self), size, self.seq_len)[1]

    def minibatches(self, size: int) -> Iterator["RecurrentBatch"]:
        """One epoch: whole chunks in a fresh random order (one rng.permutation(chunks) per call), as many
        minibatches as a feed-forward Batch takes (N // size, at most one per chunk), each of the whole chunks
        rnn_minibatches gives, the chunks left over sitting the epoch out; the same count on every rank
        (each has the same T and k)."""
        per, count = rnn_minibatches(len(self), size, self.seq_len)
        perm = torch.from_numpy(self.rng.permutation(len(self.memory0))).to(self.obs.device)
        for start in range(0, count * per, per):
            yield self._chunks(perm[start:start + per])

    def blocks(self, size: int) -> Iterator["RecurrentBatch"]:
        """The chunks in their order, about `size` samples (at least one chunk) a block: slices, views."""
        per, chunks = max(size // self.seq_len, 1), len(self.memory0)
        for first in range(0, chunks, per):
            yield self._chunks(slice(first, min(first + per, chunks)))

    def memory_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(starts (n, L) bool, memory0 (n, memory_size)) of the n chunks: where the policy's evaluate replays them
        from."""
        return self.starts.view(-1, self.seq_len), self.memory0


@dataclasses.dataclass
class Segment:
    """T steps of k actors. dones[t] is True when step t ended the agent's episode."""

    obs: Obs                # (T + 1, k, ...) each entry: row t the observation before step t, row T the one after
    #                         the last step (Atari: "image" (T + 1, k, 4, 84, 84)); the envs write each row t + 1
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
    weights: np.ndarray | None = None     # (T, k) float32: 0 where env i crashed in step t (made anew: the step
    #                                       never ran, no loss learns from its sample), else 1; None: all 1

    @property
    def step_obs(self) -> Obs:
        """(T, k, ...) each entry: the observations the T steps acted on (obs without the row after the last step;
        a view)."""
        return self.obs[:len(self.rewards)]

    def _samples(self, layout: Callable, device: torch.device, standardize_adv: bool, lay_out: Callable) -> dict:
        """The per-sample fields of a Batch, each (T, k, ...) flattened by `layout` (time_major, env_major)
        onto `device`; the observations in the policy's own input layout (`lay_out`: ActorCritic.laid_out), once here,
        not in each forward."""
        n = self.rewards.size  # T x k samples on this rank
        weights = None if self.weights is None or self.weights.all() else self.weights  # (T, k): a step crashed
        adv = self.advantages.reshape(n)
        if standardize_adv:  # over the samples the losses learn from
            adv = standardize(adv, None if weights is None else weights.reshape(n), self.returns.reshape(n))
        obs = self.step_obs.map(lambda x: layout(x, device))
        return dict(obs=lay_out(obs), actions=layout(self.actions, device),
                    logp=layout(self.logp, device), adv=layout(adv.reshape(self.rewards.shape), device),
                    returns=layout(self.returns, device), values=layout(self.values, device),
                    weights=None if weights is None else layout(weights, device))

    def batch(self, device: torch.device, rng: np.random.Generator, standardize_adv: bool,
              lay_out: Callable[[Obs], Obs] = lambda obs: obs) -> Batch:
        """The segment's samples flattened time-major to one Batch on `device` (copied there once per
        iteration). `standardize_adv`: advantages standardised over the whole batch (baselines ppo1); `lay_out`: the
        observations in the layout the policy reads (its `laid_out`; default: as they are)."""
        return Batch(**self._samples(time_major, device, standardize_adv, lay_out), rng=rng)


@dataclasses.dataclass
class RecurrentSegment(Segment):
    """--rnn: a Segment with the policy's memory where each of the update's chunks of L steps starts."""

    memory0: np.ndarray = dataclasses.field(kw_only=True)  # (T / L, k, memory_size) float32: the memory
    #                                                        before steps 0, L, 2L, ...
    seq_len: int = dataclasses.field(kw_only=True)         # L

    def batch(self, device: torch.device, rng: np.random.Generator, standardize_adv: bool,
              lay_out: Callable[[Obs], Obs] = lambda obs: obs) -> RecurrentBatch:
        """The segment's samples as one RecurrentBatch on `device`, laid out env-major: env after env, each
        env's T steps as T / L chunks of L. `standardize_adv` and `lay_out` as for Segment.batch."""
        starts = np.zeros_like(self.dones)
        starts[1:] = self.dones[:-1]  # the step after an episode's last begins the next (step 0: memory0 holds it)
        return RecurrentBatch(**self._samples(env_major, device, standardize_adv, lay_out), rng=rng,
                              starts=env_major(starts, device), memory0=env_major(self.memory0, device),
                              seq_len=self.seq_len)


class Collector:
    """Steps k envs for T steps per call with a feed-forward policy, reusing its buffers; times env and
    inference separately."""

    memory: torch.Tensor | None = None  # what the policy carries from step to step: nothing (RecurrentCollector)
    with_games = True  # a part of a rank's state (ppo1.checkpoint.RankParts): its memory goes on with the games

    def __init__(self, venv, policy: torch.nn.Module, horizon: int, obs: Obs,
                 device: torch.device = torch.device("cpu"), profile: Profile | None = None):
        """venv: a VecEnv (VecAtari or VecGym); obs: (k, ...) the envs' current observations (reset or
        restored); device: where `policy` is (one batched transfer each way per step when not the CPU);
        profile: where the seconds stepping envs ("env") and in forward passes ("inference") add up."""
        self.venv, self.policy, self.T = venv, policy, horizon
        self.seg = self._segment(horizon, venv.num_envs)
        self.seg.obs[horizon] = obs  # between calls the segment's last row holds the envs' observations now
        self.act = batched_act(policy, device, obs)  # (k, ...), memory -> numpy (actions, logp, values), memory
        self.profile = profile or Profile()
        self.device = device

    def _buffers(self, horizon: int, k: int) -> dict:
        """A Segment's arrays for T = horizon steps of k envs, zeros."""
        policy = self.policy
        return dict(obs=self.venv.obs_spec.zeros(horizon + 1, k),
                    actions=np.zeros((horizon, k, *policy.action_shape), policy.action_dtype),
                    logp=np.zeros((horizon, k), np.float32), values=np.zeros((horizon, k), np.float32),
                    rewards=np.zeros((horizon, k), np.float32), dones=np.zeros((horizon, k), bool),
                    last_value=np.zeros(k, np.float32), episodes=[], cut_values=np.zeros((horizon, k), np.float32),
                    weights=np.ones((horizon, k), np.float32))

    def _segment(self, horizon: int, k: int) -> Segment:
        return Segment(**self._buffers(horizon, k))

    @torch.no_grad()
    def value(self, obs: Obs, memory: torch.Tensor | None = None) -> np.ndarray:
        """V of observations (n, ...) (a recurrent policy's: from the memories (n, memory_size) that led to
        them); no action is drawn, so the policy's random stream is left as it is."""
        obs = obs.map(lambda x: torch.from_numpy(x).to(self.device))
        return self.policy.value(obs, memory).float().cpu().numpy()

    def collect(self) -> Segment:
        """Run the policy for T steps in every env. Returns the (reused) Segment buffer."""
        seg = self.seg
        seg.obs[0] = seg.obs[self.T]  # the last segment's last observation is this one's first
        seg.episodes, seg.advantages, seg.returns = [], None, None
        seg.cut_values[:] = 0.0
        seg.weights[:] = 1.0
        for t in range(self.T):
            self._step(t)
        with self.profile.timer("inference"):  # the bootstrap V(s_T): no action drawn for it
            seg.last_value[:] = self.value(seg.obs[self.T], self.memory)
        return seg

    def _step(self, t: int) -> None:
        """Step t of the segment: the policy acts on the envs' observations (row t), the envs step, writing the
        observations after it into row t + 1."""
        seg, clock = self.seg, self.profile
        self._before_act(t)
        start = clock.now()
        seg.actions[t], seg.logp[t], seg.values[t], memory = self.act(seg.obs[t], self.memory)
        mid = clock.now()
        try:
            done = self.venv.step(seg.actions[t], out=seg.obs[t + 1])
        except PPO1Error:  # an env that crashed (EnvCrash), its data (EnvDataError), or a family's own line
            raise
        except Exception as e:  # ppo1's own code: one line, its traceback kept (EnvRestarts)
            raise EnvCrash(e, traceback.format_exc(), ours=True) from None
        seg.rewards[t], seg.dones[t] = done.rewards, done.dones
        seg.episodes.extend(done.episodes)
        end = clock.now()
        clock.add("inference", mid - start)
        clock.add("env", end - mid)
        if done.crashed:  # a step that never ran: nothing learns from its sample
            seg.weights[t, sorted(done.crashed)] = 0.0
        if done.cut:  # episodes cut by a time limit: the value of their last observation
            self._value_cut(t, memory, done.cut)
        self._carry(memory, seg.dones[t])

    def _value_cut(self, t: int, memory: torch.Tensor | None, cut: dict[int, Obs]) -> None:
        """seg.cut_values[t] of the envs whose episode a time limit cut at step t (`cut`: their last
        observations, Stepped.cut), valued from `memory`, the policy's after step t. An env that crashed in step t
        is not among them: that step never ran (weight 0), its episode ends at s_t, and step t - 1 bootstraps
        from V(s_t | h_t), the rollout's value of it (advantages.gae, `live`)."""
        envs = sorted(cut)
        with self.profile.timer("inference"):
            self.seg.cut_values[t, envs] = self.value(Obs.stack([cut[i] for i in envs]), self._memory_of(memory, envs))

    @property
    def obs(self) -> Obs:
        """(k, ...) the envs' observations now, which the next step acts on (a view of the segment's last row)."""
        return self.seg.obs[self.T]

    def resume_from(self, obs: Obs) -> None:
        """Go on from the envs' observations `obs` (k, ...) (restored from a checkpoint, or of envs made anew)."""
        self.seg.obs[self.T] = obs

    def state_dict(self) -> dict:
        """What a checkpoint keeps of the collector: the policy's memory of each env (k, memory_size) on the CPU,
        None for a feed-forward policy (on disk under "rnn_state", its name in checkpoints since format 1)."""
        return {"rnn_state": None if self.memory is None else self.memory.detach().cpu().clone()}

    def load_state_dict(self, state: dict) -> None:
        """The memory of `state_dict()`, where it holds one (else the memory stays zeros)."""
        if self.memory is not None and state.get("rnn_state") is not None:
            self.memory.copy_(state["rnn_state"])

    def _before_act(self, t: int) -> None:
        """Before step t's action: a feed-forward policy keeps nothing."""

    def _memory_of(self, memory: torch.Tensor | None, envs: list[int]) -> torch.Tensor | None:
        """The policy's memory of the envs `envs`: a feed-forward policy has none."""
        return None

    def _carry(self, memory: torch.Tensor | None, dones: np.ndarray) -> None:
        """Carry the policy's memory after a step (dones (k,): the episodes it ended) to the next: none here."""


class RecurrentCollector(Collector):
    """--rnn: a Collector that carries the policy's memory of each env across steps and calls (zeros at each
    episode's start) and saves it in the Segment where each of the update's chunks of L steps starts."""

    def __init__(self, venv, policy: torch.nn.Module, horizon: int, obs: Obs,
                 device: torch.device = torch.device("cpu"), profile: Profile | None = None, seq_len: int = 1,
                 memory: torch.Tensor | None = None):
        """As Collector's; seq_len: L, the update's chunk length (a divisor of T); memory (k, memory_size): the
        envs' memories restored from a checkpoint (None: zeros, as at their episodes' start)."""
        self.seq_len = seq_len
        super().__init__(venv, policy, horizon, obs, device, profile)
        self.memory = policy.initial_memory(venv.num_envs, device)  # (k, memory_size)
        if memory is not None:
            self.memory.copy_(memory)

    def _segment(self, horizon: int, k: int) -> RecurrentSegment:
        return RecurrentSegment(**self._buffers(horizon, k), seq_len=self.seq_len,
                                memory0=np.zeros((horizon // self.seq_len, k, self.policy.memory_size), np.float32))

    def _before_act(self, t: int) -> None:
        """Where a chunk of the update starts (t a multiple of L), the memory it starts from."""
        if t % self.seq_len == 0:
            self.seg.memory0[t // self.seq_len] = self.memory.cpu().numpy()

    def _memory_of(self, memory: torch.Tensor, envs: list[int]) -> torch.Tensor:
        return memory[envs]

    def _carry(self, memory: torch.Tensor, dones: np.ndarray) -> None:
        """The memory after the step, zeros for the envs whose episode it ended (the next starts afresh)."""
        self.memory = memory * torch.from_numpy(~dones).to(memory.device, memory.dtype)[:, None]


def make_collector(venv, policy: torch.nn.Module, horizon: int, obs: Obs,
                   device: torch.device = torch.device("cpu"), profile: Profile | None = None, seq_len: int = 1,
                   memory: torch.Tensor | None = None) -> Collector:
    """The collector of `policy`: a RecurrentCollector (seq_len, memory as there) for a recurrent one (--rnn),
    else a Collector, which has no use for seq_len and memory."""
    if policy.recurrent:
        return RecurrentCollector(venv, policy, horizon, obs, device, profile, seq_len, memory)
    return Collector(venv, policy, horizon, obs, device, profile)
