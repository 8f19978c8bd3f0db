"""The training loop (baselines' pposgd_simple.learn): collect, advantages, update, log, save."""
from __future__ import annotations

import collections
import os
import random
import signal
import time

import cv2
import numpy as np
import torch

from ppo1 import PPO1Error, checkpoint, runlock
from ppo1 import device as devices
from ppo1.advantages import gae
from ppo1.bounds import check_batch_memory
from ppo1.config import Config
from ppo1.distributed import Comm
from ppo1.envs import cpu_count, make_vec_env
from ppo1.metrics import EpisodeLog, ProgressLog
from ppo1.movie import TrainingVideo
from ppo1.policies import build
from ppo1.ppo import explained_variance, linear_alpha, standardize, update
from ppo1.rollout import Collector
from ppo1.watchdog import Watchdog


def configure_threads(config: Config, comm: Comm, log=print) -> int:
    """torch threads per rank: 1 if --deterministic, else --num_threads (at most the cores this process may
    use), else cores / ranks on this node."""
    cores = cpu_count()
    n = 1 if config.deterministic else config.num_threads or max(1, cores // comm.local_size)
    if n > cores:
        log(f"ppo1: note: --num_threads={n} is more than the {cores} cores this process may use; using {cores}")
        n = cores
    torch.set_num_threads(n)
    torch.use_deterministic_algorithms(config.deterministic)
    cv2.setNumThreads(1)
    return n


class StopRequest:
    """SIGINT/SIGTERM: finish the current iteration, checkpoint, exit. A second signal exits at once."""

    def __init__(self, quiet: bool = False):
        self.signum = 0
        self.quiet = quiet  # ranks other than 0 exit without a word
        self._previous: dict = {}

    def __enter__(self) -> "StopRequest":
        for s in (signal.SIGINT, signal.SIGTERM):
            self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _handle(self, signum, frame) -> None:
        if self.signum:  # the second: exit now, one line, no traceback (a save cut short leaves only a temp file)
            if not self.quiet:
                os.write(2, f"ppo1: second {signal.Signals(signum).name}: exiting now without a checkpoint; the "
                            f"newest one on disk is intact\n".encode())
            os._exit(128 + signum)
        self.signum = signum


def train(config: Config, comm: Comm, log=print, fresh: bool = False, stop_after: int = 0) -> dict:
    """Train until config.env_steps agent steps (whole iterations), a signal, or `stop_after` iterations.

    Resumes from the newest checkpoint in config.run_dir unless `fresh`, which moves the old run
    aside. Returns the final counters and the process exit code (0, or 128 + signal number).
    """
    threads = configure_threads(config, comm, log)
    device = devices.setup_rank(config.device, config.deterministic, comm, log)  # the first line: devices
    torch.manual_seed(config.seed * 1000 + comm.rank)
    random.seed(config.seed * 1000 + comm.rank)
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, comm.rank, 2**31 - 1]))
    n_actors = comm.size * config.envs_per_rank

    # -------- set-up: any rank may fail here, so all ranks agree on the outcome before going on
    error, state, path, venv, lock = None, None, None, None, None
    try:  # first of all: rank 0 locks the run directory (one training per run), refused at once if held
        config.check_fits(comm.size)
        if comm.is_root:
            lock = runlock.prepare_run_dir(config.run_dir, fresh, log)
    except PPO1Error as e:
        error = e
    comm.agree(error)
    try:
        venv = make_vec_env(config.env_name, config.envs_per_rank, config.seed, comm.rank)
        check_batch_memory(config.timesteps_per_actorbatch, config.envs_per_rank, venv.obs.shape[1:],
                           venv.obs.itemsize, comm.local_size)
        policy = build(config.model_type, venv.action_space, venv.obs.shape[1:], init=config.init).to(device)
        optimizer = devices.make_adam(policy.parameters(), device, config.optim_stepsize, config.adam_epsilon)
        if comm.is_root:
            state, path, problems = checkpoint.load_newest(config.run_dir, resume=True)
            for p in problems:
                log(f"ppo1: warning: {p}; using an older checkpoint")
            if state is not None:
                checkpoint.validate(state, config, venv.num_actions, n_actors)
                log(f"ppo1: resuming from {path} (iteration {state['iteration']}, {state['timesteps']} steps)")
    except PPO1Error as e:
        error = e
    comm.agree(error)
    state, path = comm.bcast((state, path))

    iteration, timesteps, episodes_total = 0, 0, 0
    recent = collections.deque(maxlen=100)  # (return, length) of the last 100 real games, all ranks
    obs = venv.reset()
    try:  # a checkpoint whose contents do not fit is one line on every rank, not a traceback
        if state is not None:
            policy.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            iteration, timesteps, episodes_total = state["iteration"], state["timesteps"], state["episodes"]
            recent.extend(zip(state["recent_returns"], state["recent_lengths"]))
            if state["n_ranks"] == comm.size:
                mine = state["ranks"][comm.rank]
                torch.set_rng_state(mine["torch_rng"])
                rng.bit_generator.state = mine["np_rng"]
                random.setstate(mine["py_rng"])
                devices.set_rng_state(device, mine.get("cuda_rng"))
                if mine["envs"] is not None:
                    obs = venv.set_state(mine["envs"])
            else:
                log(f"ppo1: the checkpoint ran on {state['n_ranks']} ranks, this run on {comm.size} (same "
                    f"{n_actors} actors): model, optimizer and counters resume; games and RNGs start afresh")
    except Exception as e:
        error = PPO1Error(f"checkpoint {path} does not fit this run and cannot be restored: "
                          f"{type(e).__name__}: {e}".splitlines()[0][:400])
    comm.agree(error)
    del state
    comm.broadcast_parameters(policy)
    comm.check_synced(policy)

    n_iters = config.num_iterations(comm.size)
    steps_per_iter = config.steps_per_iteration(comm.size)
    T, k = config.timesteps_per_actorbatch, config.envs_per_rank
    if comm.is_root:
        log(f"ppo1: {config.env_name}, {comm.size} ranks x {k} envs = {n_actors} actors, "
            f"{threads} torch thread(s) per rank, {n_iters} iterations of {steps_per_iter} steps; "
            f"run dir {config.run_dir}")
        progress = ProgressLog(config.run_dir, total_steps=n_iters * steps_per_iter, start_step=timesteps)
        video = TrainingVideo(config, log=progress.note)
        log = progress.note  # later messages go above the progress bar
    episode_log = EpisodeLog(config.run_dir, comm.rank, warn=log if comm.is_root else None)
    collector = Collector(venv, policy, T, obs, device)
    dist_fn = devices.CompiledDist(policy, lambda m: log(m)) if config.compile else None
    update_seconds = 0.0
    start, start_steps, start_iteration = time.time(), timesteps, iteration

    def save() -> str | None:
        """Collective: rank 0 writes a checkpoint of every rank's state. Returns the error, if any."""
        wd.phase = "checkpoint gather"
        ranks = comm.gather({"torch_rng": torch.get_rng_state(), "np_rng": rng.bit_generator.state,
                             "py_rng": random.getstate(), "envs": venv.get_state(),
                             "cuda_rng": devices.rng_state(device)})
        problem = None
        if comm.is_root:
            try:
                checkpoint.save(config.run_dir, {
                    "format": checkpoint.FORMAT, "model": devices.to_cpu(policy.state_dict()),
                    "optimizer": devices.to_cpu(optimizer.state_dict()),
                    "iteration": iteration, "timesteps": timesteps, "episodes": episodes_total,
                    "recent_returns": [r for r, _ in recent], "recent_lengths": [n for _, n in recent],
                    "num_actions": venv.num_actions, "n_actors": n_actors, "n_ranks": comm.size,
                    "config": config.to_dict(), "ranks": ranks}, config, keep=config.keep_checkpoints)
            except checkpoint.CheckpointWriteError as e:
                problem = f"checkpoint at iteration {iteration} not written ({e}); the previous one is intact"
        return comm.bcast(problem)

    exit_code, reason = 0, "done"
    with StopRequest(quiet=not comm.is_root) as stop, Watchdog(config.watchdog_timeout, comm.rank, comm.abort) as wd:
        while iteration < n_iters:
            wd.phase = "rollout"
            alpha = linear_alpha(timesteps, config.env_steps)
            seg = collector.collect()
            adv, ret = gae(seg.rewards, seg.values, seg.dones, seg.last_value, config.gamma, config.lam)
            wd.phase = "observation statistics allreduce"
            if hasattr(policy, "ob_rms"):  # baselines: observation statistics update before the epochs
                policy.ob_rms.update(seg.obs, comm.sum)
            N = T * k  # samples on this rank
            t0 = time.perf_counter()
            wd.phase = "gradient allreduce"
            stats = update(
                policy, optimizer, comm, rng,
                obs=torch.from_numpy(seg.obs.reshape(N, *seg.obs.shape[2:])).to(device),  # once per iteration
                actions=torch.from_numpy(seg.actions.reshape(N, *seg.actions.shape[2:])).to(device),
                old_logp=torch.from_numpy(seg.logp.reshape(N)).to(device),
                adv=torch.from_numpy(standardize(adv.reshape(N)) if config.adv_norm == "batch"
                                     else adv.reshape(N)).to(device),
                returns=torch.from_numpy(ret.reshape(N)).to(device),
                clip=config.clip_param(alpha), lr=config.optim_stepsize * alpha, epochs=config.optim_epochs,
                minibatch=config.optim_batchsize * k, vf_coef=config.vf_coef, ent_coef=config.ent_coef,
                adv_norm=config.adv_norm, max_grad_norm=config.max_grad_norm, dist_fn=dist_fn)
            update_seconds += time.perf_counter() - t0
            iteration += 1
            timesteps += steps_per_iter

            episode_log.write(seg.episodes, timesteps)
            wd.phase = "episode statistics allgather"
            finished = [g for games in comm.allgather([(e.ret, e.length) for e in seg.episodes]) for g in games]
            episodes_total += len(finished)
            recent.extend(finished)
            values = np.array([stats[key] for key in sorted(stats)] +
                              [explained_variance(seg.values.reshape(-1), ret.reshape(-1)), stop.signum])
            wd.phase = "statistics allreduce"
            means = comm.mean(values)  # also tells every rank whether any rank was signalled
            if iteration % config.sync_check_interval == 0 or iteration == n_iters:
                wd.phase = "parameter sync check"
                comm.check_synced(policy)
            if comm.is_root:
                wd.phase = "progress log and video (rank 0)"
                elapsed = time.time() - start
                row = dict(zip(sorted(stats), means[:-2]))
                row.update(
                    iteration=iteration, timesteps=timesteps, episodes=episodes_total,
                    ep_return_mean=float(np.mean([r for r, _ in recent])) if recent else float("nan"),
                    ep_length_mean=float(np.mean([n for _, n in recent])) if recent else float("nan"),
                    explained_variance=means[-2], clip_param=config.clip_param(alpha),
                    stepsize=config.optim_stepsize * alpha, sps=(timesteps - start_steps) / max(elapsed, 1e-9),
                    time_elapsed=elapsed, time_env=collector.env_seconds,
                    time_inference=collector.inference_seconds, time_update=update_seconds,
                    time_comm=comm.seconds)
                progress.write(row, finished)
                video.maybe_record(policy, iteration, timesteps)

            if means[-1] > 0:
                signum = max(comm.allgather(stop.signum)) or signal.SIGTERM
                exit_code, reason = 128 + signum, f"stopped by {signal.Signals(signum).name}"
            elif stop_after and iteration - start_iteration >= stop_after:
                reason = f"stopped after {stop_after} iterations (--stop_after_iterations)"
            final = exit_code or reason != "done" or iteration == n_iters
            if final or iteration % config.save_interval == 0:
                problem = save()
                if problem and final:
                    err = PPO1Error(problem)
                    err.all_ranks = True
                    raise err
                if problem and comm.is_root:
                    log(f"ppo1: warning: {problem}; training continues")
            wd.beat()
            if final:
                break

    episode_log.close()
    venv.close()
    if comm.is_root:
        progress.close()
        lock.release()
        latest = os.path.join(config.run_dir, checkpoint.LATEST)
        if reason == "done":
            log(f"ppo1: done: {timesteps} steps in {iteration} iterations; checkpoint {latest}")
        else:
            log(f"ppo1: {reason} at iteration {iteration} ({timesteps} of {config.env_steps} steps); "
                f"checkpoint {latest}; run the same command again to resume")
    return {"iteration": iteration, "timesteps": timesteps, "episodes": episodes_total, "exit_code": exit_code}
