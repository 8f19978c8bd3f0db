"""The machine's limits, measured with ppo1's own stack in one process with 1 torch thread.

    env:   VecAtari stepping k games with random actions (DeepMind preprocessing), agent steps/s
    fwd:   CnnPolicy.act (forward + sampling) at batch k = envs per rank, samples/s
    train: ppo1.ppo.update (fwd + bwd + Adam per minibatch, no allreduce) at the per-rank minibatch, samples/s

each with the scenario's own settings (model, init, frame normalisation, loss settings, precision; a
feed-forward policy). `python -m bench.limits '{"config": {Config fields}, "seconds": 3}'` prints them as JSON.
"""
from __future__ import annotations

import dataclasses
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


def _policy(config):
    """The scenario's feed-forward policy (its model, init and frame normalisation) for Pong's 6 actions."""
    from ppo1.policies import build

    return build(config.model_type, 6, init=config.init, frame_norm=config.frame_norm)


def forward_sps(config, batch: int, seconds: float) -> float:
    """Samples per second of CnnPolicy.act (forward + sample) on uint8 frames at `batch`."""
    policy = _policy(config)
    obs = torch.randint(0, 256, (batch, 4, 84, 84), dtype=torch.uint8)
    for _ in range(5):
        policy.act(obs)
    calls, elapsed = _timed(lambda: policy.act(obs), seconds)
    return batch * calls / elapsed


def train_sps(config, samples: int, minibatch: int, seconds: float) -> float:
    """Samples per second of one epoch of ppo1.ppo.update over `samples` in minibatches of `minibatch`
    (fwd + bwd + Adam per minibatch, with the scenario's loss settings and precision; a single-process Comm,
    so no allreduce)."""
    from ppo1.device import make_adam
    from ppo1.distributed import Comm
    from ppo1.observations import Obs
    from ppo1.torsos import frame_layout
    from ppo1.ppo import Hyper, update
    from ppo1.rollout import Batch
    from ppo1.update_pass import UpdatePass

    policy = _policy(config)
    opt = make_adam(policy.parameters(), torch.device("cpu"), config.optim_stepsize, config.adam_epsilon)
    comm, rng = Comm(None), np.random.default_rng(0)
    frames = frame_layout(torch.randint(0, 256, (samples, 4, 84, 84), dtype=torch.uint8))  # as Segment.batch
    batch = Batch(obs=Obs({"image": frames}), actions=torch.randint(0, 6, (samples,)),
                  logp=torch.full((samples,), -float(np.log(6))),
                  adv=torch.randn(samples), returns=torch.randn(samples), rng=rng)
    hp = dataclasses.replace(Hyper.at(config, 1.0, 1), epochs=1, minibatch=minibatch)
    update_pass = UpdatePass(policy, "cpu", config.precision)

    def epoch():
        update(policy, opt, comm, batch, hp, update_pass)

    epoch()
    calls, elapsed = _timed(epoch, seconds, min_calls=2)
    return samples * calls / elapsed


def measure(config: dict, seconds: float = 3.0) -> dict:
    """All three limits for one rank of a scenario (`config`: its Config's fields), with 1 torch thread."""
    from ppo1 import device as devices
    from ppo1.config import Config

    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    config = Config(**config)
    if config.precision == "auto":  # as Trainer.setup resolves it
        precision = devices.resolve_precision("auto", config.model_type, [devices.bf16_capable(torch.device("cpu"))])
        config = dataclasses.replace(config, precision=precision)
    k = config.envs_per_rank
    minibatch = config.optim_batchsize * k
    return {"env_sps": env_sps(config.env_name, k, seconds),
            "forward_sps": forward_sps(config, k, seconds),
            "train_sps": train_sps(config, config.timesteps_per_actorbatch * k, minibatch, seconds),
            "forward_batch": k, "train_minibatch": minibatch, "threads": 1}


def ideal_sps(limits: dict, epochs: int) -> float:
    """Agent steps/s of one rank if env stepping, inference and `epochs` update passes ran back to
    back at the measured limits: 1 / (1/env + 1/fwd + epochs/train)."""
    return 1.0 / (1.0 / limits["env_sps"] + 1.0 / limits["forward_sps"] + epochs / limits["train_sps"])


if __name__ == "__main__":
    print(json.dumps(measure(**json.loads(sys.argv[1]))))
