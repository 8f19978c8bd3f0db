"""The policies of baselines' ppo1.

`small` (the PPO paper's CNN, as A3C) and `large` (Nature DQN) of `cnn_policy` map uint8 frames
(B, 4, 84, 84) to categorical logits (B, A) (Discrete actions; MultiDiscrete and MultiBinary: one categorical
per dimension, ppo1.actions.MultiCategorical) and a value (B,), and so does `impala` (the IMPALA CNN,
Espeholt et al. 2018) for any image (B, C, H, W), e.g. Procgen's (B, 3, 64, 64); frames are scaled to [0, 1] inside the
model (with `--frame_norm center`, less the running per-pixel mean the model keeps), so rollouts store
uint8. `mlp` (baselines' `mlp_policy`) maps vector observations (B, D),
normalised by a running mean/std kept identical on all ranks, through separate 2x64 tanh networks to
a categorical (Discrete actions), one per dimension (MultiDiscrete, MultiBinary) or a diagonal Gaussian with
state-independent log-std (Box actions) and a value. Linear layers use baselines' normc initialisation
(policy head gain 0.01); conv layers use baselines' Glorot-uniform (= Xavier uniform).

With `--rnn lstm` or `gru`, a RecurrentCore (one layer of `--rnn_size`) sits between the torso and the heads:
the policy then carries a memory per env (zeros at each episode's start) and replays the rollout's chunks
of steps in the update from the memories saved at their starts (`evaluate` with starts and memory0). With
`--rnn_critic separate` the value head reads a second core of its own (`critic_core`, on the same torso features),
as sb3-contrib's RecurrentPPO with enable_critic_lstm: the memory is then the policy core's followed by the
critic core's.

Observations are named entries (ppo1.observations.Obs): the CNN policy reads each image entry through a torso of
its own and the "vector" entry beside their features; the MLP reads the "vector" entry; an "action_mask" entry
leaves the invalid actions probability 0 (masked_logits). A policy whose observations have one entry also takes
that entry's tensor alone (`as_obs`).

Every policy has `step(obs, memory) -> (distribution, value, memory)`, `act(obs, greedy, memory) -> (action,
logp, value, memory)` and `value(obs, memory)` for acting (memory None without a core), and for the update
`evaluate(obs, actions, starts, memory0) -> (logp, entropy, value)` (starts, memory0 None without a core). None
takes a precision: the update runs `evaluate` under torch.autocast for --precision bf16 (ppo1.update_pass), which
the torsos' convolutions follow while their hidden layer, the cores, heads and distribution run in float32; acting
runs in float32.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.distributions import Distribution

from ppo1 import PPO1Error
from ppo1.actions import action_nvec, choose, distribution, head_size
from ppo1.config import RNN_CHOICES, RNN_CRITICS
from ppo1.observations import ACTION_MASK, IMAGE, VECTOR, Obs, ObsSpec


def normc_(weight: torch.Tensor, std: float = 1.0) -> torch.Tensor:
    """baselines' normc_initializer: Gaussian rows, each scaled to norm `std` (one row per output unit)."""
    with torch.no_grad():
        weight.normal_()
        weight.mul_(std / weight.norm(dim=1, keepdim=True))
    return weight


def _conv(c_in: int, c_out: int, k: int, s: int, padding: int = 0) -> nn.Conv2d:
    conv = nn.Conv2d(c_in, c_out, k, s, padding)
    nn.init.xavier_uniform_(conv.weight)
    nn.init.zeros_(conv.bias)
    return conv


def _linear(n_in: int, n_out: int, std: float) -> nn.Linear:
    lin = nn.Linear(n_in, n_out)
    normc_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class ActorCritic(nn.Module):
    """A policy with a value head: subclasses define `features(obs) -> (B, F)` (the torso) and the heads'
    modules `pi` (distribution parameters) and `vf` (value), which `heads` applies; `core`, when set (`--rnn`),
    is a RecurrentCore between them."""

    action_shape: tuple = ()
    action_dtype = np.int64
    continuous = False  # Box actions: a Gaussian of mean `pi`'s outputs and std exp(`logstd`) (MlpPolicy)
    nvec: tuple[int, ...] | None = None  # MultiDiscrete / MultiBinary: the choices per action dimension

    def __init__(self, spec: ObsSpec):
        super().__init__()
        self.spec = spec  # the observations' named entries
        self.core: RecurrentCore | None = None  # --rnn lstm / gru
        self.critic_core: RecurrentCore | None = None  # --rnn_critic separate: the value head's own core

    def features(self, obs: Obs) -> torch.Tensor:
        """obs (B, ...) -> the torso's features (B, F), float32: a CNN torso's convolutions run in the ambient
        autocast's precision (bf16 in the update with --precision bf16), its hidden layer in float32."""
        raise NotImplementedError

    def as_obs(self, obs) -> Obs:
        """`obs` as an Obs: itself, or a tensor (or array) that is the only entry of this policy's observations."""
        if isinstance(obs, Obs):
            return obs
        if len(self.spec.entries) != 1:
            raise TypeError(f"a policy of observations {self.spec.describe()} reads an Obs of them")
        return Obs({self.spec.entries[0].name: obs})

    def heads(self, h: torch.Tensor, h_vf: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Features (B, F) (the core's outputs, with --rnn) -> (the policy head `pi`'s outputs (B, ...): logits or
        the Gaussian's mean, float32; the value head `vf`'s value (B,)); the value head reads h_vf (the critic
        core's outputs) when given, else h."""
        return self.pi(h), self.vf(h if h_vf is None else h_vf).squeeze(-1)

    def _add_cores(self, kind: str, n_in: int, size: int, critic: str) -> int:
        """--rnn `kind` (not none): the policy's core of `size` units on n_in features and, with critic
        `separate`, the value head's own. Returns the features the heads read (size)."""
        if critic not in RNN_CRITICS:
            raise PPO1Error(f"--rnn_critic={critic!r} is invalid: must be one of {', '.join(RNN_CRITICS)}")
        self.core = RecurrentCore(kind, n_in, size)
        if critic == "separate":
            self.critic_core = RecurrentCore(kind, n_in, size)
        return size

    @property
    def recurrent(self) -> bool:
        """Whether the policy has a recurrent core (--rnn): it then carries a memory per env from step to step
        (`step`, `act`) and replays chunks of steps in the update (`evaluate`)."""
        return self.core is not None

    @property
    def memory_size(self) -> int:
        """The width of the recurrent memory (what the policy carries from step to step): the core's, plus the
        critic core's with --rnn_critic separate."""
        if self.core is None:
            return 0
        return self.core.memory_size + (0 if self.critic_core is None else self.critic_core.memory_size)

    def distribution(self, out: torch.Tensor, obs: Obs | None = None) -> Distribution:
        """The distribution over actions of the policy head's outputs (ppo1.actions.distribution): a categorical
        (Discrete), one per dimension (MultiDiscrete, MultiBinary) or a diagonal Gaussian with state-independent
        log-std (Box, `continuous`); over the valid actions alone where the observations `obs` carry an
        action mask."""
        mask = None if obs is None else self.as_obs(obs).get(ACTION_MASK)
        return distribution(out, self.nvec, self.logstd.exp().expand_as(out) if self.continuous else None, mask)

    def observe(self, obs: Obs, allreduce_sum=None) -> bool:
        """Add a batch of observations (N, ...) to the model's running input statistics, summed over
        ranks by `allreduce_sum` (Comm.sum); a policy without them ignores it. Returns whether the
        policy changed (it has such statistics)."""
        return False

    def initial_memory(self, n: int, device: torch.device | str = "cpu") -> torch.Tensor | None:
        """The recurrent memory of n envs at an episode's start (zeros (n, memory_size)); None without --rnn."""
        return None if self.core is None else torch.zeros(n, self.memory_size, device=device)

    def step(self, obs: Obs, memory: torch.Tensor | None):
        """One step of B envs: (distribution, value (B,), the memory after obs (None without --rnn))."""
        obs = self.as_obs(obs)
        x = self.features(obs)
        if self.core is None:
            out, value = self.heads(x)
            return self.distribution(out, obs), value, None
        if self.critic_core is None:
            h, memory = self.core.step(x, memory)
            out, value = self.heads(h)
            return self.distribution(out, obs), value, memory
        pi_memory, vf_memory = memory.split(self.core.memory_size, dim=-1)
        h, pi_memory = self.core.step(x, pi_memory)
        h_vf, vf_memory = self.critic_core.step(x, vf_memory)
        out, value = self.heads(h, h_vf)
        return self.distribution(out, obs), value, torch.cat([pi_memory, vf_memory], dim=-1)

    def evaluate(self, obs: Obs, actions: torch.Tensor, starts: torch.Tensor | None = None,
                 memory0: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The update's pass over B samples: (log-probability of `actions` (B,), entropy (B,), value (B,)), all
        float32. A recurrent policy replays n chunks of L steps: obs (n L, ...) chunk after chunk, starts (n, L)
        bool (True: the step begins an episode), memory0 (n, memory_size) the memory before each chunk, giving
        step for step what `step` gave in the rollout; a feed-forward one takes neither (None).

        The torsos run in the ambient autocast's precision (features); the cores, heads, distribution,
        log-probabilities and values with autocast off, in float32, where the ratio and losses are formed."""
        obs = self.as_obs(obs)
        x = self.features(obs)
        with torch.autocast(x.device.type, enabled=False):
            out, value = self.heads(x) if self.core is None else self._replay(x, starts, memory0)
            dist = self.distribution(out, obs)
            return dist.log_prob(actions), dist.entropy(), value

    def _replay(self, x: torch.Tensor, starts: torch.Tensor, memory0: torch.Tensor):
        """The cores and heads over n chunks of L steps of features x (n L, F) (see evaluate): (the policy head's
        outputs (n L, ...), value (n L,))."""
        n, length = starts.shape
        x = x.reshape(n, length, -1)
        if self.critic_core is None:
            h, h_vf = self.core.sequences(x, starts, memory0), None
        else:
            pi_memory0, vf_memory0 = memory0.split(self.core.memory_size, dim=-1)
            h = self.core.sequences(x, starts, pi_memory0)
            h_vf = self.critic_core.sequences(x, starts, vf_memory0).reshape(n * length, -1)
        return self.heads(h.reshape(n * length, -1), h_vf)

    @torch.no_grad()
    def value(self, obs: Obs, memory: torch.Tensor | None = None) -> torch.Tensor:
        """V of B observations (B,) (a recurrent policy's from the memories (B, memory_size) before them), the
        value `act` gives them; no action is drawn, so torch's random stream is left as it is."""
        return self.step(obs, memory)[1]

    @torch.no_grad()
    def act(self, obs: Obs, greedy: bool = False, memory: torch.Tensor | None = None):
        """Sample (or take the most probable) actions. Returns (actions (B, ...), log-probs (B,), values (B,),
        the memory after obs (None without --rnn))."""
        dist, value, memory = self.step(obs, memory)
        action = choose(dist, greedy)
        return action, dist.log_prob(action), value, memory


class RecurrentCore(nn.Module):
    """One LSTM or GRU layer (torch's fused nn.LSTM / nn.GRU) between a policy's torso and its heads.

    The memory of n envs is one tensor (n, memory_size): h (LSTM: h and c side by side), zeros at an
    episode's start. `step` advances it by one observation; `sequences` replays chunks of L steps from
    the memories saved at their starts, cut at the episode starts inside them, in one fused call."""

    def __init__(self, kind: str, n_in: int, size: int):
        super().__init__()
        if kind not in RNN_CHOICES[1:]:  # "none" makes no core
            raise PPO1Error(f"--rnn={kind!r} is invalid: must be one of {', '.join(RNN_CHOICES)}")
        self.kind, self.size = kind, size
        self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(n_in, size, batch_first=True)
        self.memory_size = 2 * size if kind == "lstm" else size
        for name, param in self.rnn.named_parameters():  # CleanRL ppo_atari_lstm: orthogonal, zero biases
            if name.startswith("weight"):
                nn.init.orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)

    def _to_rnn(self, memory: torch.Tensor):
        """(n, memory_size) -> what nn.LSTM (h0, c0) or nn.GRU (h0) takes: (1, n, size) each."""
        if self.kind == "lstm":
            h, c = memory.split(self.size, dim=-1)
            return h.unsqueeze(0).contiguous(), c.unsqueeze(0).contiguous()
        return memory.unsqueeze(0).contiguous()

    def _from_rnn(self, hidden) -> torch.Tensor:
        """What nn.LSTM (h, c) or nn.GRU (h) returns as its last hidden state -> the memory (n, memory_size)."""
        return torch.cat([hidden[0][0], hidden[1][0]], dim=-1) if self.kind == "lstm" else hidden[0]

    def step(self, x: torch.Tensor, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of n envs: x (n, n_in), memory (n, memory_size) -> (output (n, size), next memory)."""
        out, hidden = self.rnn(x.unsqueeze(1), self._to_rnn(memory))
        return out[:, 0], self._from_rnn(hidden)

    def sequences(self, x: torch.Tensor, starts: torch.Tensor, memory0: torch.Tensor) -> torch.Tensor:
        """n chunks of L steps: x (n, L, n_in); starts (n, L) bool, True where a step begins an episode
        (the memory there is zeros); memory0 (n, memory_size), the memory before each chunk's first step.
        Returns the outputs (n, L, size), as `step` gives them one step at a time.

        Each chunk is cut into pieces at the episode starts inside it; the pieces run as one packed batch
        (the first from its chunk's saved memory, the others from zeros)."""
        n, length = starts.shape
        if not bool(starts[:, 1:].any()):  # no episode starts inside a chunk: whole chunks
            return self.rnn(x, self._to_rnn(memory0))[0]
        begins = starts.clone()
        begins[:, 0] = True
        flat = begins.reshape(-1)
        piece = flat.cumsum(0) - 1                       # (n L,) the piece of each step
        first = flat.nonzero().squeeze(1)                # (P,) the flat index of each piece's first step
        lengths = torch.diff(first, append=first.new_tensor([n * length]))
        pos = torch.arange(n * length, device=x.device) - first[piece]  # each step's place in its piece
        padded = x.new_zeros(len(first), length, x.shape[-1])
        padded[piece, pos] = x.reshape(n * length, -1)
        init = memory0.new_zeros(len(first), self.memory_size)
        at_chunk_start = first % length == 0
        init[at_chunk_start] = memory0[first[at_chunk_start] // length]
        packed = nn.utils.rnn.pack_padded_sequence(padded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed, self._to_rnn(init))
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=length)
        return out[piece, pos].reshape(n, length, self.size)


class ResidualBlock(nn.Module):
    """IMPALA's residual block: x + conv3x3(relu(conv3x3(relu(x)))), channels and size kept."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv0 = _conv(channels, channels, 3, 1, padding=1)
        self.conv1 = _conv(channels, channels, 3, 1, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, C, H, W) -> (B, C, H, W)."""
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


def frame_layout(obs: torch.Tensor) -> torch.Tensor:
    """Frames (B, C, H, W) in the memory layout a CNN reads on their device, same values and shape: on the
    CPU channels-last (NHWC in memory), the layout oneDNN's CPU convolutions are fastest in
    (docs/throughput.md has the figures; no copy when they are already); GPUs keep the default layout."""
    return obs.contiguous(memory_format=torch.channels_last) if obs.device.type == "cpu" else obs


def impala_stage(c_in: int, c_out: int) -> nn.Sequential:
    """One stage of the IMPALA CNN: conv 3x3 (padding 1) -> max-pool 3x3 stride 2 (padding 1) -> two
    residual blocks. (B, c_in, H, W) -> (B, c_out, ceil(H / 2), ceil(W / 2))."""
    return nn.Sequential(_conv(c_in, c_out, 3, 1, padding=1), nn.MaxPool2d(3, 2, padding=1),
                         ResidualBlock(c_out), ResidualBlock(c_out))


def impala_torso(in_shape: tuple[int, int, int], channels: tuple[int, ...] = (16, 32, 32),
                 hidden: int = 256) -> nn.Sequential:
    """The IMPALA CNN (Espeholt et al., 2018, Figure 3, right; the Procgen paper's network): one stage
    per entry of `channels`, then ReLU, flatten, fc `hidden` + ReLU. in_shape (C, H, W): (4, 84, 84)
    -> 32 x 11 x 11 features before the fc; (3, 64, 64) -> 32 x 8 x 8."""
    c, h, w = in_shape
    stages = []
    for c_out in channels:
        stages.append(impala_stage(c, c_out))
        c, h, w = c_out, (h + 1) // 2, (w + 1) // 2  # max-pool 3x3 / 2, padding 1: ceil(size / 2)
    return nn.Sequential(*stages, nn.ReLU(), nn.Flatten(), _linear(c * h * w, hidden, 1.0), nn.ReLU())


# The convolutions (kernel, stride) of the small (A3C) and large (Nature DQN) CNNs, without padding.
SMALL_CONVS = ((8, 4), (4, 2))
LARGE_CONVS = ((8, 4), (4, 2), (3, 1))


def conv_output_size(size: int, convs: tuple[tuple[int, int], ...]) -> int:
    """The side of the feature map that unpadded convolutions (kernel, stride) make of a side `size`
    (< 1: the input is too small for them). 84 -> 9 (small), 7 (large)."""
    for kernel, stride in convs:
        size = (size - kernel) // stride + 1 if size >= kernel else 0
    return size


def min_frame_size(convs: tuple[tuple[int, int], ...]) -> int:
    """The smallest side the convolutions `convs` take (small: 20, large: 36)."""
    return next(n for n in range(1, 1024) if conv_output_size(n, convs) >= 1)


def orthogonal_init_(module: nn.Module, head_gains: dict[nn.Module, float]) -> None:
    """ppo2 / CleanRL / SB3 initialisation: orthogonal weights (gain sqrt 2 for hidden layers, the given
    gain for each head), zero biases."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.orthogonal_(m.weight, head_gains.get(m, float(np.sqrt(2))))
            nn.init.zeros_(m.bias)


def cnn_torso(model_type: str, shape: tuple[int, int, int]) -> tuple[nn.Sequential, int]:
    """The torso of `--model_type` (small, large, impala) for images (C, H, W): (module, its features)."""
    in_channels = shape[0]
    if model_type == "impala":  # Espeholt et al. 2018 (IMPALA), the Procgen paper's network
        return impala_torso(shape), 256
    if model_type == "small":   # Mnih et al. 2016 (A3C), used by the PPO paper
        h, w = (conv_output_size(n, SMALL_CONVS) for n in shape[1:])  # 84x84: 9x9
        return nn.Sequential(
            _conv(in_channels, 16, 8, 4), nn.ReLU(),
            _conv(16, 32, 4, 2), nn.ReLU(), nn.Flatten(),
            _linear(32 * h * w, 256, 1.0), nn.ReLU()), 256
    if model_type == "large":  # Mnih et al. 2015 (Nature DQN)
        h, w = (conv_output_size(n, LARGE_CONVS) for n in shape[1:])  # 84x84: 7x7
        return nn.Sequential(
            _conv(in_channels, 32, 8, 4), nn.ReLU(),
            _conv(32, 64, 4, 2), nn.ReLU(),
            _conv(64, 64, 3, 1), nn.ReLU(), nn.Flatten(),
            _linear(64 * h * w, 512, 1.0), nn.ReLU()), 512
    raise PPO1Error(f"--model_type={model_type!r} is invalid: must be small, large or impala")


def torso_features(torso: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """A CNN torso (cnn_torso, impala_torso: convolutions, then the hidden layer, Linear and ReLU) on its input x:
    the features (B, hidden), float32. Under autocast (--precision bf16 in the update) the convolutions run in its
    precision and the hidden layer in float32: with that layer in bfloat16 as well, Pong's `fast` ended seed 0 at
    +13.3 against fp32's +19.85, with it in float32 at +19.05 (docs/history.md)."""
    if not torch.is_autocast_enabled(x.device.type):
        return torso(x)
    convolved = torso[:-2](x)
    with torch.autocast(x.device.type, enabled=False):
        return torso[-2:](convolved.float())


class CnnPolicy(ActorCritic):
    """Actor-critic CNN with a shared torso, a categorical policy head and a value head.

    nvec (MultiDiscrete, MultiBinary actions): the choices per action dimension; the head's num_actions =
    sum(nvec) logits are split into one categorical per dimension (ppo1.actions.MultiCategorical).

    init: `normc` (baselines ppo1: Glorot-uniform convs, normc linears) or `orthogonal` (ppo2, CleanRL).
    obs_shape (C, H, W): the one image's shape, any channels and size, e.g. Atari's stack of four grayscale frames
    (4, 84, 84) or Procgen's one RGB frame (3, 64, 64); the fully connected layer's inputs follow from it (small and
    large need frames of at least 20x20 and 36x36). spec (in its place): the observations' entries
    (ppo1.observations): each image through a torso of its own (the first is `torso`, the others `more_torsos`, in
    the spec's order), and a "vector" entry of D numbers, normalised by their running mean and std (as the MLP's
    observations), beside the torsos' features before both heads.
    """

    def __init__(self, num_actions: int, model_type: str = "small", in_channels: int = 4, init: str = "normc",
                 frame_norm: str = "scale", obs_shape: tuple[int, int, int] | None = None,
                 nvec: tuple[int, ...] | None = None, rnn: str = "none", rnn_size: int = 256,
                 stacked: bool | None = None, rnn_critic: str = "shared", spec: ObsSpec | None = None):
        super().__init__(spec or ObsSpec.of({IMAGE: tuple(obs_shape or (in_channels, 84, 84))}))
        images = self.spec.images
        self.image_names = [e.name for e in images]
        self.vec_dim = self.spec.vector_size
        if self.vec_dim:
            self.vec_rms = RunningMeanStd((self.vec_dim,))
        # --frame_norm center: the running per-pixel mean of the frames. A stack of one-channel frames (the env
        # says so: `stacked`; None, for callers that do not, means 4 channels) keeps one mean frame (H, W),
        # updated from each observation's newest frame; any other image is one frame, its mean (C, H, W) per
        # pixel and channel (an RGBA frame is not a stack of 4).
        first = images[0].shape
        self.stacked = first[0] == 4 if stacked is None else stacked
        self.torso, hidden = cnn_torso(model_type, first)
        self.more_torsos = nn.ModuleList()  # the torsos of the second image on, when there are several
        for entry in images[1:]:
            torso, n = cnn_torso(model_type, entry.shape)
            self.more_torsos.append(torso)
            hidden += n
        if frame_norm == "center":
            self.frame_rms = RunningMeanStd(first[1:] if self.stacked else first)
            self.more_frame_rms = nn.ModuleList(RunningMeanStd(e.shape[1:] if self.stacked else e.shape)
                                                for e in images[1:])
        self.model_type = model_type
        self.num_actions = num_actions
        if nvec is not None:  # num_actions = sum(nvec)
            self.nvec, self.action_shape = tuple(nvec), (len(nvec),)
        n_features = hidden + self.vec_dim
        if rnn != "none":  # the torsos' features (and the vector entry) enter the core(s)
            n_features = self._add_cores(rnn, n_features, rnn_size, rnn_critic)
        self.pi = _linear(n_features, num_actions, 0.01)
        self.vf = _linear(n_features, 1, 1.0)
        if init == "orthogonal":
            orthogonal_init_(self, {self.pi: 0.01, self.vf: 1.0})

    def _frame_means(self) -> list:
        """--frame_norm center: the running frame mean of each image, in the spec's order (else Nones)."""
        if not hasattr(self, "frame_rms"):
            return [None] * len(self.image_names)
        return [self.frame_rms, *self.more_frame_rms]

    def features(self, obs: Obs) -> torch.Tensor:
        """obs: each image (B, C, H, W) uint8 ((B, 4, 84, 84) on Atari) and the vector (B, D) -> the torsos'
        features and the normalised vector side by side (B, hidden + D) float32.

        The torsos' convolutions run in the ambient autocast's precision: bf16 in the update's passes with
        --precision bf16 (ppo1.update_pass), float32 when acting; their hidden layer, the cores and the heads in
        float32 (torso_features)."""
        obs = self.as_obs(obs)
        torsos = [self.torso, *self.more_torsos]
        inputs = [self.torso_input(obs[name], i) for i, name in enumerate(self.image_names)]
        hs = [torso_features(torso, x) for torso, x in zip(torsos, inputs)]
        if self.vec_dim:
            hs.append(self.vec_rms.normalize(obs[VECTOR]))
        return hs[0] if len(hs) == 1 else torch.cat(hs, -1)

    def torso_input(self, frames: torch.Tensor, image: int = 0) -> torch.Tensor:
        """uint8 frames (B, C, H, W) of the image `image` (its place in the spec) -> what its torso reads: float32
        in [0, 1] (`scale`), less the image's running per-pixel mean / 255 (`center`).

        The frames enter the convolutions in frame_layout (channels-last on the CPU).
        """
        x = frame_layout(frames).float()  # float() keeps the layout
        rms = self._frame_means()[image]
        if rms is not None:  # the mean (84, 84) (or (C, H, W)) laid out as one frame of x, so the
            # subtraction runs element by element in x's memory order rather than broadcast across it;
            # in place, as an out-of-place one returns NCHW and undoes the channels-last layout
            x.sub_(rms.frame_mean(x.shape[1:]))
        return x.div_(255.0)

    def observe(self, obs: Obs, allreduce_sum=None) -> bool:
        """The running statistics of the inputs: the vector entry's mean and std; with --frame_norm center, the
        newest frame of each image (..., 4, 84, 84) into its running mean (each frame is the newest of one
        observation, so every frame counts once), an unstacked image (..., C, H, W) whole. Returns whether the
        policy changed (it keeps such statistics)."""
        obs = self.as_obs(obs)
        if self.vec_dim:
            self.vec_rms.update(obs[VECTOR], allreduce_sum)
        for name, rms in zip(self.image_names, self._frame_means()):
            if rms is not None:
                frames = obs[name]
                rms.update(frames[..., -1, :, :] if self.stacked else frames, allreduce_sum)
        return bool(self.vec_dim) or hasattr(self, "frame_rms")


class RunningMeanStd(nn.Module):
    """Mean and std of observations over all ranks' samples so far (baselines' MPI RunningMeanStd).

    Sums are float64 buffers, so they are saved in checkpoints and compared by the rank sync check.
    """

    def __init__(self, shape: tuple[int, ...], epsilon: float = 1e-2):
        super().__init__()
        self.register_buffer("sum", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("sumsq", torch.full(shape, epsilon, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))
        self._kept: dict[str, tuple] = {}  # what _keep computed: name -> (the sums' versions it was computed at, value)

    def update(self, x: np.ndarray, allreduce_sum=None) -> None:
        """Add a batch x (N, *shape); `allreduce_sum` sums a float64 array over ranks (Comm.sum)."""
        x = x.reshape(-1, *self.sum.shape)
        if x.dtype == np.uint8:  # frames: exact integer sums (2.4x faster than in float64, the same values)
            sums, squares = x.sum(0, dtype=np.int64), np.square(x, dtype=np.uint16).sum(0, dtype=np.int64)
        else:
            x = x.astype(np.float64)
            sums, squares = x.sum(0), np.square(x).sum(0)
        local = np.concatenate([sums.ravel(), squares.ravel(), [len(x)]], dtype=np.float64)
        total = torch.from_numpy(allreduce_sum(local) if allreduce_sum else local).to(self.sum.device)
        n = self.sum.numel()
        self.sum += total[:n].view_as(self.sum)
        self.sumsq += total[n:2 * n].view_as(self.sumsq)
        self.count += total[-1]

    def mean(self) -> torch.Tensor:
        return self.sum / self.count

    def _keep(self, name: str, compute, *key):
        """compute(), kept between calls while the sums stay as they are (their version counters: an update or a
        load_state_dict moves them) and `key` is the same, so the rollout's steps and the update's minibatches do
        not compute it anew each call. A compiled graph keeps no Python state: there it is computed in the graph."""
        if torch.compiler.is_compiling():
            return compute()
        key = (self.sum._version, self.sumsq._version, self.count._version, self.sum.data_ptr(), *key)
        kept = self._kept.get(name)
        if kept is None or kept[0] != key:
            kept = self._kept[name] = (key, compute())
        return kept[1]

    def frame_mean(self, shape: torch.Size) -> torch.Tensor:
        """The mean as float32, expanded to one frame of `shape` (C, H, W) and in frame_layout: what a torso's input
        subtracts (kept, _keep)."""
        return self._keep("frame_mean", lambda: frame_layout(self.mean().float().expand(1, *shape)), tuple(shape))

    def mean_std(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, std), float64, std = sqrt(max(E[x^2] - mean^2, 1e-2)) (kept, _keep)."""
        def compute():
            mean = self.mean()
            return mean, torch.sqrt(torch.clamp(self.sumsq / self.count - mean.square(), min=1e-2))
        return self._keep("mean_std", compute)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """clip((x - mean) / std, -5, 5), as float32."""
        mean, std = self.mean_std()
        return torch.clamp((x.double() - mean) / std, -5.0, 5.0).float()


class MlpPolicy(ActorCritic):
    """baselines' mlp_policy: normalised observations, separate 2x64 tanh networks for pi and V."""

    def __init__(self, obs_dim: int, action_space, hidden: int = 64, layers: int = 2, rnn: str = "none",
                 rnn_size: int = 256, rnn_critic: str = "shared", spec: ObsSpec | None = None):
        """obs_dim: the numbers of the "vector" entry; spec: the observations' entries (default: that vector)."""
        super().__init__(spec or ObsSpec.of(vector=obs_dim))
        import gymnasium
        self.ob_rms = RunningMeanStd((obs_dim,))
        n_features = obs_dim
        if rnn != "none":  # as sb3-contrib's MlpLstmPolicy: the normalised observations enter the core(s)
            n_features = self._add_cores(rnn, obs_dim, rnn_size, rnn_critic)

        def mlp(out: int, gain: float) -> nn.Sequential:
            mods, n_in = [], n_features
            for _ in range(layers):
                mods += [_linear(n_in, hidden, 1.0), nn.Tanh()]
                n_in = hidden
            return nn.Sequential(*mods, _linear(n_in, out, gain))

        if isinstance(action_space, gymnasium.spaces.Discrete):
            self.continuous, self.num_actions = False, int(action_space.n)
            self.pi = mlp(self.num_actions, 0.01)
            self.action_shape, self.action_dtype = (), np.int64
        elif isinstance(action_space, gymnasium.spaces.Box) and len(action_space.shape) == 1:
            self.continuous, self.num_actions = True, int(action_space.shape[0])
            self.pi = mlp(self.num_actions, 0.01)
            self.logstd = nn.Parameter(torch.zeros(self.num_actions))
            self.action_shape, self.action_dtype = (self.num_actions,), np.float32
        elif action_nvec(action_space) is not None:  # MultiDiscrete, MultiBinary: one categorical per dimension
            self.nvec = action_nvec(action_space)
            self.continuous, self.num_actions = False, sum(self.nvec)
            self.pi = mlp(self.num_actions, 0.01)
            self.action_shape, self.action_dtype = (len(self.nvec),), np.int64
        else:
            raise PPO1Error(f"action space {action_space} is not supported: use Discrete, MultiDiscrete, "
                            "MultiBinary or a 1-D Box")
        self.vf = mlp(1, 1.0)
        self.model_type = "mlp"

    def observe(self, obs: Obs, allreduce_sum=None) -> bool:
        self.ob_rms.update(self.as_obs(obs)[VECTOR], allreduce_sum)
        return True

    def features(self, obs: Obs) -> torch.Tensor:
        """obs: the vector (B, D) -> the normalised observations (B, D), float32 under any autocast (no op of
        the normalisation is one autocast casts), so with evaluate's float32 heads the MLP runs in float32 in
        every pass, --precision bf16 or not."""
        return self.ob_rms.normalize(self.as_obs(obs)[VECTOR])



def build(model_type: str, action_space, obs: ObsSpec | tuple[int, ...] = (4, 84, 84), init: str = "normc",
          frame_norm: str = "scale", rnn: str = "none", rnn_size: int = 256, stacked: bool | None = None,
          rnn_critic: str = "shared") -> nn.Module:
    """The policy of `--model_type` for an action space (or a number of discrete actions) and observations `obs`
    (an ObsSpec, or the shape of one entry: (C, H, W) an image, (D,) a vector): Discrete, MultiDiscrete or
    MultiBinary actions (and 1-D Box with `mlp`); rnn (`lstm`, `gru`, `none`): a RecurrentCore of rnn_size before
    the heads (rnn_critic `separate`: the value head's own second core); stacked: the images are stacks of
    one-channel frames (the env's `stacked`; None: 4 channels are)."""
    spec = obs if isinstance(obs, ObsSpec) else ObsSpec.of(
        {IMAGE: obs} if len(obs) == 3 else None, vector=obs[0] if len(obs) == 1 else 0)
    if not spec.entries:
        raise PPO1Error(f"observations of shape {tuple(obs)} are neither images (C, H, W) nor vectors (D,)")
    num_actions = action_space if isinstance(action_space, int) else head_size(action_space)  # sum(nvec) or n
    if spec.mask_size and spec.mask_size != num_actions:
        raise PPO1Error(f"the action mask has {spec.mask_size} values, the actions {num_actions} choices")
    if model_type == "mlp":
        if spec.images:
            raise PPO1Error(f"--model_type=mlp needs vector observations, not images ({spec.describe()})")
        return MlpPolicy(spec.vector_size, action_space, rnn=rnn, rnn_size=rnn_size, rnn_critic=rnn_critic, spec=spec)
    if model_type in ("small", "large", "impala") and not spec.images:
        raise PPO1Error(f"--model_type={model_type} needs image observations (C, H, W), not {spec.describe()}; "
                        "use --model_type mlp")
    if model_type in ("small", "large"):
        side = min_frame_size(SMALL_CONVS if model_type == "small" else LARGE_CONVS)
        for image in spec.images:
            if min(image.shape[1:]) < side:
                raise PPO1Error(f"--model_type={model_type} needs frames of at least {side}x{side}, not "
                                f"{image.shape[1]}x{image.shape[2]}: use a larger --frame_size or --model_type impala "
                                "(which reads any size)")
    nvec = None if isinstance(action_space, int) else action_nvec(action_space)
    return CnnPolicy(num_actions, model_type, init=init, frame_norm=frame_norm, nvec=nvec, rnn=rnn, rnn_size=rnn_size,
                     stacked=stacked, rnn_critic=rnn_critic, spec=spec)
