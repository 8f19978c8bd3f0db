"""The training loop (baselines' pposgd_simple.learn): collect, advantages, update, log, save."""
from __future__ import annotations

import collections
import os
import random
import time

import cv2
import numpy as np
import torch

from ppo1 import PPO1Error, checkpoint
from ppo1.advantages import gae
from ppo1.config import Config
from ppo1.distributed import Comm
from ppo1.envs import VecAtari, cpu_count
from ppo1.metrics import EpisodeLog, ProgressLog
from ppo1.policies import build
from ppo1.ppo import explained_variance, linear_alpha, standardize, update
from ppo1.rollout import Collector


def configure_threads(config: Config, comm: Comm) -> int:
    """torch threads per rank: --num_threads, or the cores available divided by the ranks on this node."""
    n = config.num_threads or max(1, cpu_count() // comm.local_size)
    torch.set_num_threads(n)
    cv2.setNumThreads(1)
    return n


def _rank_rng(config: Config, rank: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([config.seed, rank, 2**31 - 1]))


def train(config: Config, comm: Comm, log=print) -> dict:
    """Train until config.env_steps agent steps (whole iterations). Returns the final counters.

    Resumes from the newest checkpoint in config.run_dir when there is one.
    """
    threads = configure_threads(config, comm)
    torch.manual_seed(config.seed * 1000 + comm.rank)
    random.seed(config.seed * 1000 + comm.rank)
    rng = _rank_rng(config, comm.rank)
    n_actors = comm.size * config.envs_per_rank

    # -------- set-up: any rank may fail here, so all ranks agree on the outcome before going on
    error, state, venv = None, None, None
    try:
        config.check_fits(comm.size)
        venv = VecAtari(config.env_name, config.envs_per_rank, config.seed, comm.rank)
        policy = build(config.model_type, venv.num_actions)
        optimizer = torch.optim.Adam(policy.parameters(), lr=config.optim_stepsize, eps=config.adam_epsilon)
        if comm.is_root:
            state, path, problems = checkpoint.load_newest(config.run_dir)
            for p in problems:
                log(f"ppo1: warning: {p}; using an older checkpoint")
            if state is not None:
                checkpoint.validate(state, config, venv.num_actions, n_actors)
                log(f"ppo1: resuming from {path} (iteration {state['iteration']}, "
                    f"{state['timesteps']} steps)")
    except PPO1Error as e:
        error = e
    comm.agree(error)
    state = comm.bcast(state)

    iteration, timesteps, episodes_total = 0, 0, 0
    recent = collections.deque(maxlen=100)  # (return, length) of the last 100 real games, all ranks
    if state is not None:
        policy.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        iteration, timesteps, episodes_total = state["iteration"], state["timesteps"], state["episodes"]
        recent.extend(zip(state["recent_returns"], state["recent_lengths"]))
    comm.broadcast_parameters(policy)
    comm.check_synced(policy)

    n_iters = config.num_iterations(comm.size)
    steps_per_iter = config.steps_per_iteration(comm.size)
    T, k = config.timesteps_per_actorbatch, config.envs_per_rank
    if comm.is_root:
        log(f"ppo1: {config.env_name}, {comm.size} ranks x {k} envs = {n_actors} actors, "
            f"{threads} torch thread(s) per rank, {n_iters} iterations of {steps_per_iter} steps; "
            f"run dir {config.run_dir}")
        progress = ProgressLog(config.run_dir)
    episode_log = EpisodeLog(config.run_dir, comm.rank)
    collector = Collector(venv, policy, T)
    update_seconds = 0.0
    start = time.time()
    start_steps = timesteps

    def save() -> None:
        ranks = comm.gather({"torch_rng": torch.get_rng_state(), "np_rng": rng.bit_generator.state})
        if comm.is_root:
            checkpoint.save(config.run_dir, {
                "format": checkpoint.FORMAT, "model": policy.state_dict(), "optimizer": optimizer.state_dict(),
                "iteration": iteration, "timesteps": timesteps, "episodes": episodes_total,
                "recent_returns": [r for r, _ in recent], "recent_lengths": [n for _, n in recent],
                "num_actions": venv.num_actions, "n_actors": n_actors, "n_ranks": comm.size,
                "config": config.to_dict(), "ranks": ranks}, config)

    while iteration < n_iters:
        alpha = linear_alpha(timesteps, config.env_steps)
        seg = collector.collect()
        adv, ret = gae(seg.rewards, seg.values, seg.dones, seg.last_value, config.gamma, config.lam)
        N = T * k  # samples on this rank
        t0 = time.perf_counter()
        stats = update(
            policy, optimizer, comm, rng,
            obs=torch.from_numpy(seg.obs.reshape(N, *seg.obs.shape[2:])),
            actions=torch.from_numpy(seg.actions.reshape(N)),
            old_logp=torch.from_numpy(seg.logp.reshape(N)),
            adv=torch.from_numpy(standardize(adv.reshape(N))),
            returns=torch.from_numpy(ret.reshape(N)),
            clip=config.epsilon * alpha, lr=config.optim_stepsize * alpha, epochs=config.optim_epochs,
            minibatch=config.optim_batchsize * k, vf_coef=config.vf_coef, ent_coef=config.ent_coef)
        update_seconds += time.perf_counter() - t0
        iteration += 1
        timesteps += steps_per_iter

        episode_log.write(seg.episodes, timesteps)
        finished = [g for games in comm.allgather([(e.ret, e.length) for e in seg.episodes]) for g in games]
        episodes_total += len(finished)
        recent.extend(finished)
        values = np.array([stats[key] for key in sorted(stats)] +
                          [explained_variance(seg.values.reshape(-1), ret.reshape(-1))])
        means = comm.mean(values)
        if iteration % config.sync_check_interval == 0 or iteration == n_iters:
            comm.check_synced(policy)
        if comm.is_root:
            elapsed = time.time() - start
            row = dict(zip(sorted(stats), means[:-1]))
            row.update(
                iteration=iteration, timesteps=timesteps, episodes=episodes_total,
                ep_return_mean=float(np.mean([r for r, _ in recent])) if recent else float("nan"),
                ep_length_mean=float(np.mean([n for _, n in recent])) if recent else float("nan"),
                explained_variance=means[-1], clip_param=config.epsilon * alpha,
                stepsize=config.optim_stepsize * alpha, sps=(timesteps - start_steps) / max(elapsed, 1e-9),
                time_elapsed=elapsed, time_env=collector.env_seconds, time_inference=collector.inference_seconds,
                time_update=update_seconds, time_comm=comm.seconds)
            progress.write(row)
        if iteration % config.save_interval == 0 or iteration == n_iters:
            save()

    episode_log.close()
    venv.close()
    if comm.is_root:
        progress.close()
        log(f"ppo1: done: {timesteps} steps in {iteration} iterations; checkpoint "
            f"{os.path.join(config.run_dir, checkpoint.LATEST)}")
    return {"iteration": iteration, "timesteps": timesteps, "episodes": episodes_total}
