"""Stable-Baselines3 PPO at its usual Atari settings, timed on this machine (`--compare sb3`).

The settings of the rl-baselines3-zoo Atari entry for PPO: `make_atari_env` (DeepMind wrappers:
no-op reset, frame skip 4 with max-pool, life loss ends the episode, FIRE reset, 84x84 grayscale,
clipped rewards) with 8 envs + `VecFrameStack(4)`, `CnnPolicy` (the Nature CNN), n_steps 128,
n_epochs 4, batch_size 256, lr 2.5e-4 and clip 0.1 (both linear), vf_coef 0.5, ent_coef 0.01.
torch keeps its default threads (all cores), as an SB3 user gets them; `device` is SB3's own
(`cpu`, `auto` = CUDA where torch sees a GPU, `cuda`, `cuda:N`). The envs run in a
DummyVecEnv (SB3's default for make_atari_env, stepped in the learner's process) unless
`--vec subproc`.

`python -m bench.sb3 '{"env_name": ..., "steps": 16384, "warmup": 2048, "vec": "dummy", "device": "cpu"}'`
prints JSON.
Needs the `bench` extra: `pip install -e '.[bench]'`.
"""
from __future__ import annotations

import functools
import json
import resource
import sys
import time

N_ENVS, N_STEPS = 8, 128


def _make(env_name: str, **kwargs):
    """gymnasium.make with the ALE registered first: SubprocVecEnv's workers start without it."""
    import ale_py
    import gymnasium

    gymnasium.register_envs(ale_py)
    return gymnasium.make(env_name, **kwargs)


def run(env_name: str, steps: int, warmup: int, vec: str = "dummy", seed: int = 0, device: str = "cpu") -> dict:
    """Train SB3 PPO for `warmup` agent steps, then time `steps` more. Returns SPS and settings."""
    import ale_py
    import gymnasium
    import torch

    gymnasium.register_envs(ale_py)
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    import stable_baselines3
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack

    vec_cls = {"dummy": DummyVecEnv, "subproc": SubprocVecEnv}[vec]
    env = VecFrameStack(make_atari_env(functools.partial(_make, env_name), n_envs=N_ENVS, seed=seed,
                                       vec_env_cls=vec_cls), n_stack=4)
    model = PPO("CnnPolicy", env, n_steps=N_STEPS, n_epochs=4, batch_size=256,
                learning_rate=lambda f: 2.5e-4 * f, clip_range=lambda f: 0.1 * f,
                vf_coef=0.5, ent_coef=0.01, seed=seed, device=device, verbose=0)
    rollout = N_ENVS * N_STEPS
    if warmup > 0:
        model.learn(total_timesteps=warmup)
    start = time.perf_counter()
    model.learn(total_timesteps=steps, reset_num_timesteps=warmup <= 0)
    elapsed = time.perf_counter() - start
    done = model.num_timesteps - (-(-warmup // rollout) * rollout if warmup > 0 else 0)
    env.close()
    return {"sps": done / elapsed, "steps": done, "seconds": elapsed, "vec_env": vec_cls.__name__,
            "n_envs": N_ENVS, "n_steps": N_STEPS, "n_epochs": 4, "batch_size": 256, "policy": "CnnPolicy (Nature)",
            "torch_threads": torch.get_num_threads(), "device": str(model.device), "version": stable_baselines3.__version__,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}


if __name__ == "__main__":
    print(json.dumps(run(**json.loads(sys.argv[1]))))
