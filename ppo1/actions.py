"""The action spaces ppo1 trains, the distribution of a policy's actions, and how an action is chosen from it.

    Discrete(n)           one categorical of n logits (every family)
    MultiDiscrete(nvec)   one categorical per dimension, from one head of sum(nvec) logits split per dimension
    MultiBinary(n)        as MultiDiscrete([2] * n)
    Box, 1-D              a diagonal Gaussian (vector observations only; MlpPolicy)

Actions of the multi-discrete spaces are integer vectors (one index per dimension), stored as (..., dims) int64
beside Box's float vectors; the env is given them in its space's dtype, offset by MultiDiscrete's `start`.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.distributions import Categorical, Distribution, Independent, Normal

from ppo1.errors import PPO1Error


def action_nvec(space) -> tuple[int, ...] | None:
    """The choices per dimension of a MultiDiscrete (its nvec) or MultiBinary(n) (n twos) action space of one
    dimension; None for any other space (Discrete, Box, or one of more dimensions)."""
    import gymnasium
    if isinstance(space, gymnasium.spaces.MultiDiscrete) and space.nvec.ndim == 1 and len(space.nvec):
        return tuple(int(n) for n in space.nvec)
    if isinstance(space, gymnasium.spaces.MultiBinary) and len(space.shape) == 1 and space.shape[0] >= 1:
        return (2,) * int(space.shape[0])
    return None


def head_size(space) -> int:
    """The outputs of the policy head for an action space: n logits (Discrete), sum(nvec) logits (MultiDiscrete,
    MultiBinary: 2 per dimension), or the Gaussian mean's width (Box). This is `num_actions` in checkpoints."""
    nvec = action_nvec(space)
    if nvec is not None:
        return sum(nvec)
    return int(getattr(space, "n", None) or space.shape[0])


def check_action_space(env_name: str, space, box: bool = False) -> None:
    """Raise PPO1Error naming the space unless ppo1 trains it: Discrete, MultiDiscrete or MultiBinary of one
    dimension, and with `box` (vector observations) a 1-D Box."""
    import gymnasium
    if isinstance(space, gymnasium.spaces.Discrete) or action_nvec(space) is not None:
        return
    if box and isinstance(space, gymnasium.spaces.Box) and len(space.shape) == 1:
        return
    kinds = "Discrete, MultiDiscrete or MultiBinary (of one dimension)" + (" or 1-D Box" if box else "")
    observations = "vector" if box else "image"
    raise PPO1Error(f"--env_name={env_name!r} has actions {space}: ppo1 trains {observations} observations "
                    f"with {kinds} actions")


def env_action(space, action):
    """What the env's step takes for a policy's action (an index per dimension from 0) of a Discrete,
    MultiDiscrete or MultiBinary space: an int (Discrete), or the vector of indices (dims,) in the space's dtype;
    either plus the space's `start` (gymnasium's Discrete(n, start=s) and MultiDiscrete(nvec, start=...))."""
    if action_nvec(space) is None:
        return int(action) + int(getattr(space, "start", 0))
    action = np.asarray(action, space.dtype)
    start = getattr(space, "start", None)
    return action if start is None else action + start


def describe(num_actions: int, nvec: tuple[int, ...] | list[int] | None) -> str:
    """The actions of a checkpoint or env in words: `6 actions`, `actions [2, 3] (MultiDiscrete)`."""
    return f"{num_actions} actions" if nvec is None else f"actions {list(nvec)} (MultiDiscrete)"


def check_actions(where: str, saved: tuple[int, tuple | list | None], env_name: str,
                  now: tuple[int, tuple | list | None]) -> None:
    """Raise PPO1Error unless the actions (num_actions, nvec) a model was trained with (`where`: the checkpoint)
    are those of the env now; nvec None (Discrete, Box, a checkpoint written before MultiDiscrete) only matches
    None."""
    (num_saved, nvec_saved), (num_now, nvec_now) = saved, now
    same_nvec = (nvec_saved is None) == (nvec_now is None) and (nvec_saved is None or
                                                                list(nvec_saved) == list(nvec_now))
    if num_saved != num_now or not same_nvec:
        raise PPO1Error(f"{where} has {describe(num_saved, nvec_saved)}, {env_name} has {describe(num_now, nvec_now)}")


class MultiCategorical(Distribution):
    """Independent categoricals, one per action dimension, over logits (B, sum(nvec)) split per dimension
    (Stable-Baselines3's MultiCategoricalDistribution): log pi(a|s) = sum_d log pi_d(a_d|s) and
    H = sum_d H_d, as the dimensions are independent. Actions (B, dims) int64.

    MultiBinary(n) is MultiDiscrete([2] * n) here, two logits per dimension, where Stable-Baselines3 takes a
    Bernoulli of one logit: a categorical of logits (l0, l1) is a Bernoulli of logit l1 - l0, so both give the
    same policies, and one distribution, head layout and action path serves both spaces.
    """

    arg_constraints: dict = {}

    def __init__(self, logits: torch.Tensor, nvec: tuple[int, ...]):
        self.nvec = tuple(nvec)
        self.dists = [Categorical(logits=part, validate_args=False) for part in torch.split(logits, self.nvec, -1)]
        super().__init__(logits.shape[:-1], torch.Size([len(self.nvec)]), validate_args=False)

    def sample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:
        """One index per dimension, drawn dimension by dimension: (*sample_shape, B, dims) int64."""
        return torch.stack([d.sample(sample_shape) for d in self.dists], -1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        """actions (B, dims) -> the sum of the dimensions' log-probabilities (B,)."""
        return torch.stack([d.log_prob(a) for d, a in zip(self.dists, actions.unbind(-1))], -1).sum(-1)

    def entropy(self) -> torch.Tensor:
        """The sum of the dimensions' entropies (B,)."""
        return torch.stack([d.entropy() for d in self.dists], -1).sum(-1)

    @property
    def mode(self) -> torch.Tensor:
        """The most probable index of each dimension (B, dims): the greedy action."""
        return torch.stack([d.logits.argmax(-1) for d in self.dists], -1)


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Logits (B, n) with those of invalid actions (mask (B, n) False) at the lowest finite value, so that
    softmax gives them probability 0: log-probabilities, sampling, the greedy choice and the entropy (torch's
    Categorical counts 0 x log 0 as 0) are then over the valid actions alone, as sb3-contrib's MaskablePPO."""
    return logits.masked_fill(~mask.bool(), torch.finfo(logits.dtype).min)


def distribution(out: torch.Tensor, nvec: tuple[int, ...] | None = None,
                 std: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> Distribution:
    """The distribution over actions of a policy head's outputs `out` (B, ...): with `std` (Box actions) a diagonal
    Gaussian of mean out and standard deviation std (B, A); with `nvec` (MultiDiscrete, MultiBinary) one categorical
    per dimension (MultiCategorical); else (Discrete) one categorical of logits out (B, n). mask (B, n) bool: the
    valid actions (masked_logits), where the env masks them."""
    if mask is not None:
        out = masked_logits(out, mask)
    if std is not None:
        return Independent(Normal(out, std, validate_args=False), 1, validate_args=False)
    if nvec is not None:
        return MultiCategorical(out, nvec)
    return Categorical(logits=out, validate_args=False)  # NaN logits: caught as a non-finite update


def most_probable(dist: Distribution) -> torch.Tensor:
    """The greedy action of each row of a `distribution`: the Gaussian's mean (B, A), the most probable index
    of each dimension (B, dims), or the most probable action (B,)."""
    if isinstance(dist, Independent):
        return dist.base_dist.mean
    if isinstance(dist, MultiCategorical):
        return dist.mode
    return dist.logits.argmax(-1)


def sample_on_cpu(dist: Distribution, generator: torch.Generator) -> torch.Tensor:
    """An action per row of a `distribution`, drawn on the CPU with `generator` (not the global torch RNG): the
    mean plus std x standard normal noise (Box), one index per dimension drawn dimension by dimension
    (MultiDiscrete, MultiBinary), or one index (Discrete)."""
    if isinstance(dist, Independent):
        base = dist.base_dist
        mean, std = base.mean.cpu(), base.stddev.cpu()
        return mean + std * torch.randn(mean.shape, generator=generator)
    if isinstance(dist, MultiCategorical):
        return torch.cat([torch.multinomial(d.probs.cpu(), 1, generator=generator) for d in dist.dists], -1)
    return torch.multinomial(dist.probs.cpu(), 1, generator=generator).squeeze(-1)


def choose(dist: Distribution, greedy: bool, generator: torch.Generator | None = None) -> torch.Tensor:
    """The action of each row of a `distribution` (B, ...): the most probable (`greedy`), else one sampled from it,
    with the global torch RNG on dist's device (`generator` None: the rollout's draws, which a checkpoint's RNG
    states reproduce) or with `generator` on the CPU (evaluation's own stream, which leaves training's alone)."""
    if greedy:
        return most_probable(dist)
    return dist.sample() if generator is None else sample_on_cpu(dist, generator)
