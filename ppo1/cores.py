"""The recurrent memory of a policy (--rnn lstm or gru): RecurrentCore, one LSTM or GRU layer between the torso and
the heads, and Cores, which owns the policy's core, the value head's own core (--rnn_critic separate) and the layout
of the memory both carry from step to step, as sb3-contrib's RNNStates does. Acting (`step`) and the update's replay
of sequences (`replay`) both go through Cores.
"""
from __future__ import annotations

import torch
from torch import nn

from ppo1.errors import PPO1Error
from ppo1.config import RNN_CHOICES, RNN_CRITICS


# Chrono initialisation's longest time scale T_max (steps): the memory gates' biases are log(u), u ~ U[1, T_max - 1].
CHRONO_T_MAX = 32


def chrono_init_(rnn: nn.LSTM | nn.GRU, kind: str, size: int, t_max: int = CHRONO_T_MAX) -> None:
    """Chrono initialisation (Tallec & Ollivier, 2018) of one nn.LSTM or nn.GRU layer whose biases are zeros: the
    gate that keeps the memory gets the bias log(u), u ~ U[1, t_max - 1] per unit, so that at the start each unit
    keeps its memory over about u steps (with zero biases every gate is sigmoid(0) = 1/2 and a cue fades as 2^-t:
    1.5e-5 after 16 steps). LSTM (gates i, f, g, o): the forget gate's bias log(u), the input gate's -log(u);
    GRU (gates r, z, n; h' = (1 - z) n + z h): the update gate z's bias log(u)."""
    keep = torch.log(torch.empty(size).uniform_(1.0, t_max - 1.0))
    with torch.no_grad():
        rnn.bias_ih_l0[size:2 * size] = keep  # LSTM f, GRU z: the second gate of both
        if kind == "lstm":
            rnn.bias_ih_l0[:size] = -keep


class RecurrentCore(nn.Module):
    """One LSTM or GRU layer (torch's fused nn.LSTM / nn.GRU) between a policy's torso and its heads.

    The memory of n envs is one tensor (n, memory_size): h (LSTM: h and c side by side), zeros at an
    episode's start. `step` advances it by one observation; `sequences` replays chunks of L steps from
    the memories saved at their starts, cut at the episode starts inside them, in one fused call."""

    def __init__(self, kind: str, n_in: int, size: int, init: str = "zeros"):
        super().__init__()
        if kind not in RNN_CHOICES[1:]:  # "none" makes no core
            raise PPO1Error(f"--rnn={kind!r} is invalid: must be one of {', '.join(RNN_CHOICES)}")
        self.kind, self.size = kind, size
        self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(n_in, size, batch_first=True)
        self.memory_size = 2 * size if kind == "lstm" else size
        for name, param in self.rnn.named_parameters():  # CleanRL ppo_atari_lstm: orthogonal, zero biases ...
            if name.startswith("weight"):
                nn.init.orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)
        if init == "chrono":  # ... or chrono's gate biases (--rnn_init)
            chrono_init_(self.rnn, kind, size)

    def _to_rnn(self, memory: torch.Tensor):
        """(n, memory_size) -> what nn.LSTM (h0, c0) or nn.GRU (h0) takes: (1, n, size) each."""
        if self.kind == "lstm":
            h, c = memory.split(self.size, dim=-1)
            return h.unsqueeze(0).contiguous(), c.unsqueeze(0).contiguous()
        return memory.unsqueeze(0).contiguous()

    def step(self, x: torch.Tensor, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of n envs: x (n, n_in), memory (n, memory_size) -> (output (n, size), next memory). The layer's
        own weights through torch's one-step cell (lstm_cell, gru_cell): the same arithmetic as nn.LSTM / nn.GRU
        over one step, without the fused sequence call's set-up, which at 256 units costs 9x the step itself."""
        rnn = self.rnn
        weights = (rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0)
        if self.kind == "lstm":
            h, c = torch.lstm_cell(x, tuple(memory.split(self.size, dim=-1)), *weights)
            return h, torch.cat([h, c], dim=-1)
        h = torch.gru_cell(x, memory, *weights)
        return h, h

    def sequences(self, x: torch.Tensor, starts: torch.Tensor, memory0: torch.Tensor) -> torch.Tensor:
        """n chunks of L steps: x (n, L, n_in); starts (n, L) bool, True where a step begins an episode
        (the memory there is zeros); memory0 (n, memory_size), the memory before each chunk's first step.
        Returns the outputs (n, L, size), as `step` gives them one step at a time.

        Each chunk is cut into pieces at the episode starts inside it; the pieces run side by side as one padded
        batch (the first from its chunk's saved memory, the others from zeros), as many steps as the longest. A
        piece's padding comes after its last step, so it changes none of its outputs. Padded rather than packed:
        the packed call's shrinking batch costs more in slicing (forward) and zero-filled gradients (backward) than
        it saves, 1.9x the padded call's time over the 24x24 cue's 128-step sequence cut in 8 pieces (CPU)."""
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
        padded = x.new_zeros(len(first), int(lengths.max()), x.shape[-1])
        padded[piece, pos] = x.reshape(n * length, -1)
        init = memory0.new_zeros(len(first), self.memory_size)
        at_chunk_start = first % length == 0
        init[at_chunk_start] = memory0[first[at_chunk_start] // length]
        out, _ = self.rnn(padded, self._to_rnn(init))
        return out[piece, pos].reshape(n, length, self.size)


class Cores:
    """The recurrent cores of a policy and the layout of its memory: `core` (the policy head's) and, with --rnn_critic
    separate, `critic` (the value head's own, on the same features). A memory of n envs is one tensor (n,
    memory_size): the core's, then the critic's. The cores are the policy's modules (its `core` and `critic_core`,
    the names its state_dict has always had); this object holds them, it is not a module."""

    def __init__(self, core: RecurrentCore, critic: RecurrentCore | None = None):
        self.core, self.critic = core, critic

    @classmethod
    def build(cls, kind: str, n_in: int, size: int, critic: str, init: str = "zeros") -> "Cores":
        """--rnn `kind` (lstm, gru) of `size` units on n_in features; critic `separate`: a second core for the value
        head (`shared`: none); init: their gate biases (--rnn_init: zeros or chrono)."""
        if critic not in RNN_CRITICS:
            raise PPO1Error(f"--rnn_critic={critic!r} is invalid: must be one of {', '.join(RNN_CRITICS)}")
        return cls(RecurrentCore(kind, n_in, size, init),
                   RecurrentCore(kind, n_in, size, init) if critic == "separate" else None)

    @property
    def memory_size(self) -> int:
        """The width of the memory: the core's, plus the critic's."""
        return self.core.memory_size + (0 if self.critic is None else self.critic.memory_size)

    def initial(self, n: int, device: torch.device | str = "cpu") -> torch.Tensor:
        """The memory of n envs at an episode's start: zeros (n, memory_size)."""
        return torch.zeros(n, self.memory_size, device=device)

    def _split(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(n, memory_size) -> the core's part and the critic's (None without one)."""
        if self.critic is None:
            return memory, None
        return memory.split(self.core.memory_size, dim=-1)

    def step(self, x: torch.Tensor, memory: torch.Tensor):
        """One step of n envs: features x (n, F), memory (n, memory_size) -> (the core's outputs (n, size), the
        critic's (None without one), the memory after the step)."""
        mine, theirs = self._split(memory)
        h, mine = self.core.step(x, mine)
        if self.critic is None:
            return h, None, mine
        h_vf, theirs = self.critic.step(x, theirs)
        return h, h_vf, torch.cat([mine, theirs], dim=-1)

    def replay(self, x: torch.Tensor, starts: torch.Tensor, memory0: torch.Tensor):
        """n sequences of L steps: features x (n, L, F), starts (n, L) bool, memory0 (n, memory_size) -> (the core's
        outputs (n L, size), the critic's (None without one)), step for step what `step` gave."""
        n, length = starts.shape
        mine, theirs = self._split(memory0)
        h = self.core.sequences(x, starts, mine).reshape(n * length, -1)
        if self.critic is None:
            return h, None
        return h, self.critic.sequences(x, starts, theirs).reshape(n * length, -1)
