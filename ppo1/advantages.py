"""Generalized advantage estimation (Schulman et al., 2016), as in baselines' `add_vtarg_and_adv`; the
reward normalisation of baselines' VecNormalize (--norm_reward)."""
from __future__ import annotations

import numpy as np
import torch


def gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, last_value: np.ndarray,
        gamma: float, lam: float, cut_values: np.ndarray | None = None,
        live: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """GAE(lambda) advantages and TD(lambda) value targets for a segment of T steps of k actors.

    rewards, values, dones: (T, k); dones[t] is True when the episode ended with step t, so step
    t+1 starts a new one and nothing is bootstrapped across. last_value: (k,) value of the
    observation after the segment's last step, bootstrapped unless that step ended an episode.
    cut_values (T, k): V of the last observation of an episode cut by a time limit at step t (0
    elsewhere): a time limit is not a terminal state, so that step bootstraps from it (as SB3).
    live (T, k) bool: False for a step that never ran (its env crashed and was made anew; done): its
    advantage is 0, so the episode ends at s_t as one cut there, step t-1 bootstrapping from V(s_t).

        delta_t = r_t + gamma * (V(s_{t+1}) * (1 - done_t) + V_cut_t) - V(s_t)
        A_t     = (delta_t + gamma * lam * (1 - done_t) * A_{t+1}) * live_t
        R_t     = A_t + V(s_t)                      (the TD(lambda) return)

    Returns (advantages (T, k) float32, returns (T, k) float32).
    """
    T = rewards.shape[0]
    adv = np.zeros(rewards.shape, np.float32)
    next_value = np.asarray(last_value, np.float32)
    last = np.zeros(rewards.shape[1:], np.float32)
    for t in reversed(range(T)):
        nonterminal = 1.0 - dones[t].astype(np.float32)
        bootstrap = next_value * nonterminal + (0.0 if cut_values is None else cut_values[t])
        delta = rewards[t] + gamma * bootstrap - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last = last if live is None else np.where(live[t], last, np.float32(0.0))
        next_value = values[t]
    return adv, (adv + values).astype(np.float32)


def running_returns(rewards: np.ndarray, dones: np.ndarray, ret: np.ndarray, gamma: float) -> np.ndarray:
    """baselines VecNormalize's running discounted return of each actor, step by step:

        G_t = gamma * G_{t-1} + r_t,   G_{t-1} = 0 when step t-1 ended the episode

    rewards, dones (T, k); ret (k,): G before the segment, updated in place to G after it (0 where
    the last step ended an episode). Returns G (T, k) float64."""
    out = np.zeros(rewards.shape, np.float64)
    for t in range(rewards.shape[0]):
        ret *= gamma
        ret += rewards[t]
        out[t] = ret
        ret[dones[t]] = 0.0
    return out


def shape_rewards(rewards: np.ndarray, sign: bool, scale: float) -> np.ndarray:
    """Training rewards from the env's own: their sign (-1, 0, +1) where `sign` (--clip_reward), then times
    `scale` (--reward_scale). float32, same shape."""
    return ((np.sign(rewards) if sign else rewards) * scale).astype(np.float32)


class RunningReturns:
    """--norm_reward: the running discounted return G (k,) float64 of each of a rank's envs (running_returns
    updates it in place), a part of the rank's state that goes on with its games (ppo1.checkpoint.RankParts)."""

    with_games = True

    def __init__(self, num_envs: int):
        self.g = np.zeros(num_envs, np.float64)

    def state_dict(self) -> dict:
        """{"reward_ret": G (k,)}, the key checkpoints have always used."""
        return {"reward_ret": torch.from_numpy(self.g.copy())}

    def load_state_dict(self, state: dict) -> None:
        if state.get("reward_ret") is not None:
            self.g[:] = state["reward_ret"].numpy()


class RewardNormalizer:
    """--norm_reward (the Procgen paper; baselines VecNormalize(ob=False)): rewards divided by the
    standard deviation of the actors' running discounted returns G (running_returns), clipped to
    [-clip, clip]. The statistics of G are summed over all ranks (the same scale on every rank, as one
    process of all the actors would have) and updated once per iteration with the segment's T x k
    returns before its rewards are scaled (baselines updates them at every step).

    `state_dict()` / `load_state_dict()`: the statistics (checkpointed with the run); `returns` holds the
    rank's running returns (checkpointed with the rank's games: RunningReturns).
    """

    def __init__(self, num_envs: int, gamma: float, clip: float = 10.0, epsilon: float = 1e-8):
        self.gamma, self.clip, self.epsilon = gamma, clip, epsilon
        self.returns = RunningReturns(num_envs)
        self.stats = np.array([0.0, 0.0, 1e-4])  # sum, sum of squares, count of the returns G

    def std(self) -> float:
        """sqrt(Var[G] + epsilon); Var = 1 before any return (as VecNormalize's RunningMeanStd starts)."""
        total, sumsq, count = self.stats
        var = 1.0 if count < 1 else max(sumsq / count - (total / count) ** 2, 0.0)
        return float(np.sqrt(var + self.epsilon))

    def __call__(self, rewards: np.ndarray, dones: np.ndarray, allreduce_sum=None,
                 live: np.ndarray | None = None) -> np.ndarray:
        """Scaled rewards (T, k) float32 for a segment's raw rewards and dones (T, k); `allreduce_sum`
        sums a float64 array over ranks (Comm.sum); `live` (T, k) bool, as gae's: False for a step that never
        ran (its env crashed and was made anew), whose return is then not one of the statistics."""
        g = running_returns(rewards, dones, self.returns.g, self.gamma)
        if live is not None:
            g = g[live]
        local = np.array([g.sum(), np.square(g).sum(), g.size], np.float64)
        self.stats = self.stats + (allreduce_sum(local) if allreduce_sum else local)
        return np.clip(rewards / self.std(), -self.clip, self.clip).astype(np.float32)

    def state_dict(self) -> dict:
        return {"stats": torch.from_numpy(self.stats.copy())}

    def load_state_dict(self, state: dict) -> None:
        self.stats = state["stats"].double().numpy().copy()


# Advantages are standardised by their std, but never by less than this fraction of the returns' std (standardize, and
# ppo.normalized per minibatch). Once every advantage is noise (a solved task: values right to 0.5% of the returns), the
# plain standardisation blows that noise up to unit size and the epochs walk the policy off what it learned: the
# 16-step vector cue went 0.99 -> 0.0 in 20 iterations. On Pong (`fast`) the advantages' std never fell below 0.21 of
# the returns' in 3,530 minibatches, so this floor never binds there.
ADV_STD_FLOOR = 0.1


def standardize(x: np.ndarray, weights: np.ndarray | None = None, returns: np.ndarray | None = None,
                floor: float = ADV_STD_FLOOR) -> np.ndarray:
    """(x - mean) / (max(std, floor x std of `returns`) + 1e-8) over the rank's batch, as baselines standardizes
    advantages (returns: the value targets, same shape, None: the plain std). With `weights`
    (1 or 0 per sample): the statistics of the samples of weight 1 alone, those of weight 0 (steps whose env crashed,
    trained on by no loss) set to 0."""
    if weights is not None:
        out, live = np.zeros(x.shape, np.float32), weights > 0
        if live.any():
            out[live] = standardize(x[live], None, None if returns is None else returns[live], floor)
        return out
    std = x.std() if returns is None else max(x.std(), floor * returns.std())
    return ((x - x.mean()) / (std + 1e-8)).astype(np.float32)
