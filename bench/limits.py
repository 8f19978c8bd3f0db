"""The machine's limits, measured with ppo1's own stack in one process with 1 torch thread.

    env:   VecAtari stepping k games with random actions (DeepMind preprocessing), agent steps/s
    fwd:   CnnPolicy.act (forward + sampling) at batch k = envs per rank, samples/s
    train: ppo1.ppo.update (fwd + bwd + Adam per minibatch, no allreduce) at the per-rank minibatch, samples/s

`python -m bench.limits '{"env_name": ..., "envs_per_rank": 4, ...}'` prints them as JSON.
"""
from __future__ import annotations

import json
import sys
import time

import cv2
import numpy as np
import torch


def _timed(step, min_seconds: float, min_calls: int = 3) -> tuple[int, float]:
    """Call step() until both min_seconds and min_calls are reached. Returns (calls, seconds)."""
    calls, start = 0, time.perf_counter()
    while True:
        step()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds and calls >= min_calls:
            return calls, elapsed


def env_sps(env_name: str, k: int, seconds: float) -> float:
    """Agent steps per second of k VecAtari games (one process, random actions)."""
    from ppo1.envs import VecAtari

    venv = VecAtari(env_name, k, seed=0, rank=0)
    venv.reset()
    rng = np.random.default_rng(0)
    n = venv.num_actions

    def step():
        venv.step(rng.integers(0, n, size=k))

    for _ in range(10):
        step()
    calls, elapsed = _timed(step, seconds)
    venv.close()
    return k * calls / elapsed


def forward_sps(model_type: str, num_actions: int, batch: int, seconds: float) -> float:
    """Samples per second of CnnPolicy.act (forward + sample) on uint8 frames at `batch`."""
    from ppo1.policies import build

    policy = build(model_type, num_actions)
    obs = torch.randint(0, 256, (batch, 4, 84, 84), dtype=torch.uint8)
    for _ in range(5):
        policy.act(obs)
    calls, elapsed = _timed(lambda: policy.act(obs), seconds)
    return batch * calls / elapsed


def train_sps(model_type: str, num_actions: int, samples: int, minibatch: int, seconds: float) -> float:
    """Samples per second of one epoch of ppo1.ppo.update over `samples` in minibatches of `minibatch`
    (fwd + bwd + Adam per minibatch; a single-process Comm, so no allreduce)."""
    from ppo1.distributed import Comm
    from ppo1.observations import Obs
    from ppo1.policies import build
    from ppo1.ppo import Hyper, update
    from ppo1.rollout import Batch

    policy = build(model_type, num_actions)
    opt = torch.optim.Adam(policy.parameters(), lr=2.5e-4, eps=1e-5)
    comm, rng = Comm(None), np.random.default_rng(0)
    batch = Batch(obs=Obs({"image": torch.randint(0, 256, (samples, 4, 84, 84), dtype=torch.uint8)}),
                  actions=torch.randint(0, num_actions, (samples,)),
                  logp=torch.full((samples,), -float(np.log(num_actions))),
                  adv=torch.randn(samples), returns=torch.randn(samples), rng=rng)
    hp = Hyper(clip=0.1, lr=2.5e-4, epochs=1, minibatch=minibatch, vf_coef=1.0, ent_coef=0.01)

    def epoch():
        update(policy, opt, comm, batch, hp)

    epoch()
    calls, elapsed = _timed(epoch, seconds, min_calls=2)
    return samples * calls / elapsed


def measure(env_name: str, envs_per_rank: int, model_type: str, horizon: int, minibatch_per_actor: int,
            seconds: float = 3.0) -> dict:
    """All three limits for one rank of a scenario, with 1 torch thread."""
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    from ppo1.envs import VecAtari

    probe = VecAtari(env_name, 1, seed=0, rank=0)
    num_actions = probe.num_actions
    probe.close()
    k = envs_per_rank
    return {"env_sps": env_sps(env_name, k, seconds),
            "forward_sps": forward_sps(model_type, num_actions, k, seconds),
            "train_sps": train_sps(model_type, num_actions, horizon * k, minibatch_per_actor * k, seconds),
            "forward_batch": k, "train_minibatch": minibatch_per_actor * k, "threads": 1}


def ideal_sps(limits: dict, epochs: int) -> float:
    """Agent steps/s of one rank if env stepping, inference and `epochs` update passes ran back to
    back at the measured limits: 1 / (1/env + 1/fwd + epochs/train)."""
    return 1.0 / (1.0 / limits["env_sps"] + 1.0 / limits["forward_sps"] + epochs / limits["train_sps"])


if __name__ == "__main__":
    print(json.dumps(measure(**json.loads(sys.argv[1]))))
