"""The torsos of the CNN policies: what turns an image (B, C, H, W) into features (B, hidden), one module each.

    small    the PPO paper's CNN (A3C's): conv 8x8/4 (16), conv 4x4/2 (32), fc 256; images of 20 px or more
    large    the Nature DQN CNN: conv 8x8/4 (32), 4x4/2 (64), 3x3/1 (64), fc 512; images of 36 px or more
    impala   the IMPALA CNN (Espeholt et al. 2018): 3 stages of conv, max-pool and 2 residual blocks, fc 256; any size
    grid     small and large on an image smaller than they take (a 7x7 view): 2 convs 3x3/1 padded, fc 256, so
             every cell keeps its place (impala would pool 7x7 down to 1x1)

Every torso ends in its hidden layer (Linear, ReLU), which torso_features runs in float32 under autocast. Linear layers
use baselines' normc initialisation, convolutions Glorot-uniform; orthogonal_init_ is ppo2's, CleanRL's and SB3's.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ppo1.errors import PPO1Error


def normc_(weight: torch.Tensor, std: float = 1.0) -> torch.Tensor:
    """baselines' normc_initializer: Gaussian rows, each scaled to norm `std` (one row per output unit)."""
    with torch.no_grad():
        weight.normal_()
        weight.mul_(std / weight.norm(dim=1, keepdim=True))
    return weight


def conv_layer(c_in: int, c_out: int, k: int, s: int, padding: int = 0) -> nn.Conv2d:
    """A convolution with baselines' Glorot-uniform weights and zero biases."""
    conv = nn.Conv2d(c_in, c_out, k, s, padding)
    nn.init.xavier_uniform_(conv.weight)
    nn.init.zeros_(conv.bias)
    return conv


def linear_layer(n_in: int, n_out: int, std: float) -> nn.Linear:
    """A linear layer with baselines' normc weights of norm `std` per unit and zero biases."""
    lin = nn.Linear(n_in, n_out)
    normc_(lin.weight, std)
    nn.init.zeros_(lin.bias)
    return lin


class ResidualBlock(nn.Module):
    """IMPALA's residual block: x + conv3x3(relu(conv3x3(relu(x)))), channels and size kept."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv0 = conv_layer(channels, channels, 3, 1, padding=1)
        self.conv1 = conv_layer(channels, channels, 3, 1, padding=1)

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
    return nn.Sequential(conv_layer(c_in, c_out, 3, 1, padding=1), nn.MaxPool2d(3, 2, padding=1),
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
    return nn.Sequential(*stages, nn.ReLU(), nn.Flatten(), linear_layer(c * h * w, hidden, 1.0), nn.ReLU())


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


def grid_torso(shape: tuple[int, int, int], hidden: int = 256) -> nn.Sequential:
    """The torso of an image smaller than the small CNN's 20 px (a 7x7 symbolic view): two 3x3 convolutions of
    stride 1, padded, so every cell keeps its place (16 and 32 channels: no pooling, no stride), then ReLU, flatten
    and fc `hidden` + ReLU. (C, 7, 7) -> 32 x 7 x 7 features before the fc."""
    c, h, w = shape
    return nn.Sequential(conv_layer(c, 16, 3, 1, padding=1), nn.ReLU(), conv_layer(16, 32, 3, 1, padding=1), nn.ReLU(),
                         nn.Flatten(), linear_layer(32 * h * w, hidden, 1.0), nn.ReLU())


def keeps_layout(model_type: str, shape: tuple[int, ...]) -> bool:
    """Whether `--model_type` small or large reads images of `shape` (C, H, W) through grid_torso: they are smaller
    than its convolutions take (small: 20 px, large: 36)."""
    convs = {"small": SMALL_CONVS, "large": LARGE_CONVS}.get(model_type)
    return convs is not None and min(shape[1:]) < min_frame_size(convs)


def torso_words(model_type: str, shape: tuple[int, ...]) -> str:
    """The torso cnn_torso makes for images of `shape`, in words (the start line)."""
    if keeps_layout(model_type, shape):
        side = min_frame_size(SMALL_CONVS if model_type == "small" else LARGE_CONVS)
        return (f"2 convolutions 3x3 that keep the {shape[1]}x{shape[2]} layout (smaller than the {model_type} CNN's "
                f"{side} px)")
    return {"small": "the small CNN (A3C)", "large": "the Nature CNN", "impala": "the IMPALA CNN"}[model_type]


def cnn_torso(model_type: str, shape: tuple[int, int, int]) -> tuple[nn.Sequential, int]:
    """The torso of `--model_type` (small, large, impala) for images (C, H, W): (module, its features); small and
    large read an image smaller than their convolutions take through grid_torso."""
    in_channels = shape[0]
    if keeps_layout(model_type, shape):  # smaller than its convolutions take: one that keeps every cell
        return grid_torso(shape), 256
    if model_type == "impala":  # Espeholt et al. 2018 (IMPALA), the Procgen paper's network
        return impala_torso(shape), 256
    if model_type == "small":   # Mnih et al. 2016 (A3C), used by the PPO paper
        h, w = (conv_output_size(n, SMALL_CONVS) for n in shape[1:])  # 84x84: 9x9
        return nn.Sequential(
            conv_layer(in_channels, 16, 8, 4), nn.ReLU(),
            conv_layer(16, 32, 4, 2), nn.ReLU(), nn.Flatten(),
            linear_layer(32 * h * w, 256, 1.0), nn.ReLU()), 256
    if model_type == "large":  # Mnih et al. 2015 (Nature DQN)
        h, w = (conv_output_size(n, LARGE_CONVS) for n in shape[1:])  # 84x84: 7x7
        return nn.Sequential(
            conv_layer(in_channels, 32, 8, 4), nn.ReLU(),
            conv_layer(32, 64, 4, 2), nn.ReLU(),
            conv_layer(64, 64, 3, 1), nn.ReLU(), nn.Flatten(),
            linear_layer(64 * h * w, 512, 1.0), nn.ReLU()), 512
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
