"""CNN policies of baselines' ppo1 `cnn_policy`: `small` (the PPO paper's, as A3C) and `large` (Nature DQN).

Both map uint8 frames (B, 4, 84, 84) to categorical action logits (B, A) and a value (B,). Frames are
scaled to [0, 1] inside the model, so rollouts store uint8. Linear layers use baselines' normc
initialisation (policy head gain 0.01); conv layers use baselines' Glorot-uniform (= Xavier uniform).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Categorical

from ppo1 import PPO1Error


def normc_(weight: torch.Tensor, std: float = 1.0) -> torch.Tensor:
    """baselines' normc_initializer: Gaussian rows, each scaled to norm `std` (one row per output unit)."""
    with torch.no_grad():
        weight.normal_()
        weight.mul_(std / weight.norm(dim=1, keepdim=True))
    return weight


def _conv(c_in: int, c_out: int, k: int, s: int) -> nn.Conv2d:
    conv = nn.Conv2d(c_in, c_out, k, s)
    nn.init.xavier_uniform_(conv.weight)
    nn.init.zeros_(conv.bias)
    return conv


def _linear(n_in: int, n_out: int, std: float) -> nn.Linear:
    lin = nn.Linear(n_in, n_out)
    normc_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class CnnPolicy(nn.Module):
    """Actor-critic CNN with a shared torso, a categorical policy head and a value head."""

    def __init__(self, num_actions: int, model_type: str = "small", in_channels: int = 4):
        super().__init__()
        if model_type == "small":   # Mnih et al. 2016 (A3C), used by the PPO paper
            self.torso = nn.Sequential(
                _conv(in_channels, 16, 8, 4), nn.ReLU(),
                _conv(16, 32, 4, 2), nn.ReLU(), nn.Flatten(),
                _linear(32 * 9 * 9, 256, 1.0), nn.ReLU())
            hidden = 256
        elif model_type == "large":  # Mnih et al. 2015 (Nature DQN)
            self.torso = nn.Sequential(
                _conv(in_channels, 32, 8, 4), nn.ReLU(),
                _conv(32, 64, 4, 2), nn.ReLU(),
                _conv(64, 64, 3, 1), nn.ReLU(), nn.Flatten(),
                _linear(64 * 7 * 7, 512, 1.0), nn.ReLU())
            hidden = 512
        else:
            raise PPO1Error(f"--model_type={model_type!r} is invalid: must be small or large")
        self.model_type = model_type
        self.num_actions = num_actions
        self.pi = _linear(hidden, num_actions, 0.01)
        self.vf = _linear(hidden, 1, 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs (B, 4, 84, 84) uint8 -> (logits (B, A) float32, value (B,) float32)."""
        h = self.torso(obs.float().div_(255.0))
        return self.pi(h), self.vf(h).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, greedy: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample (or argmax) actions. Returns (actions (B,) int64, log-probs (B,), values (B,))."""
        logits, value = self(obs)
        dist = Categorical(logits=logits)
        action = logits.argmax(-1) if greedy else dist.sample()
        return action, dist.log_prob(action), value


def build(model_type: str, num_actions: int) -> CnnPolicy:
    """The policy of `--model_type` for a game with `num_actions` actions."""
    return CnnPolicy(num_actions, model_type)
