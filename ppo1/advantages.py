"""Generalized advantage estimation (Schulman et al., 2016), as in baselines' `add_vtarg_and_adv`."""
from __future__ import annotations

import numpy as np


def gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, last_value: np.ndarray,
        gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """GAE(lambda) advantages and TD(lambda) value targets for a segment of T steps of k actors.

    rewards, values, dones: (T, k); dones[t] is True when the episode ended with step t, so step
    t+1 starts a new one and nothing is bootstrapped across. last_value: (k,) value of the
    observation after the segment's last step, bootstrapped unless that step ended an episode.

        delta_t = r_t + gamma * V(s_{t+1}) * (1 - done_t) - V(s_t)
        A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1}
        R_t     = A_t + V(s_t)                      (the TD(lambda) return)

    Returns (advantages (T, k) float32, returns (T, k) float32).
    """
    T = rewards.shape[0]
    adv = np.zeros(rewards.shape, np.float32)
    next_value = np.asarray(last_value, np.float32)
    last = np.zeros(rewards.shape[1:], np.float32)
    for t in reversed(range(T)):
        nonterminal = 1.0 - dones[t].astype(np.float32)
        delta = rewards[t] + gamma * next_value * nonterminal - values[t]
        adv[t] = last = delta + gamma * lam * nonterminal * last
        next_value = values[t]
    return adv, (adv + values).astype(np.float32)
