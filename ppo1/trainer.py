"""Training (baselines' pposgd_simple.learn) as a Trainer: set-up, resume, then per iteration
collect -> advantages -> update -> record -> maybe_save (the PPO paper's Algorithm 1), with stop
requests (ppo1.stops) and a watchdog (ppo1.watchdog) beside the loop."""
from __future__ import annotations

import dataclasses
import os
import random
import signal
import time

import cv2
import numpy as np
import torch

from ppo1 import checkpoint, runfiles, runlock
from ppo1.errors import PPO1Error, RanksError, error_line
from ppo1 import device as devices
from ppo1.actions import action_nvec
from ppo1.advantages import RewardNormalizer, gae, shape_rewards
from ppo1.bounds import check_batch_ram
from ppo1.checkpoint import ModelIO, RankParts, RankRngs, TrainState
from ppo1.config import Config
from ppo1.distributed import Comm
from ppo1.envs import EnvCrash, EnvDataError, EnvOptions, Spares, make_vec_env
from ppo1.envs.calls import Call, CallTimer
from ppo1.envs.faults import EngineFaults
from ppo1.evaluation import BestSoFar, Evaluation
from ppo1.keeper import Keeper
from ppo1.snapshot import Snapshots
from ppo1.metrics import EpisodeLog, ProgressLog, Recorder, timed
from ppo1.observations import Obs
from ppo1.policies import build
from ppo1.restarts import EnvRestarts
from ppo1.ppo import Hyper, NonFiniteUpdate, explained_variance, kl_warning, linear_alpha, update, warmup_factor
from ppo1.rollout import Segment, make_collector, rnn_update_line
from ppo1.stops import StopRequest
from ppo1.update_pass import UpdatePass
from ppo1.video import TrainingVideo
from ppo1.wandb_log import WandbLog, require as require_wandb
from ppo1.watchdog import Watchdog


class Trainer:
    """One training run on this rank: `run()` = setup(), resume(), the loop, finish()."""

    def __init__(self, config: Config, comm: Comm, log=print, fresh: bool = False, stop_after: int = 0,
                 spares: Spares | None = None):
        self.config, self.comm, self.log, self.fresh, self.stop_after = config, comm, log, fresh, stop_after
        self.spares = spares
        self.profile = comm.profile  # env, inference, update and comm (allreduce) seconds of this rank
        self.exit_code, self.reason = 0, "done"
        self.last_kl: float | None = None  # the previous iteration's approx_kl (rank 0), for kl_warning
        self.restarts = EnvRestarts(config.env_restarts, config.env_restart_window, comm.rank, config.run_dir)
        self.calls = CallTimer(config.env_step_timeout, comm.rank)  # --env_step_timeout; setup gives it the envs
        self.evaluation: Evaluation | None = None  # --eval_interval: this rank's evaluation envs
        self.best = BestSoFar(config.run_dir)  # rank 0: the best evaluation so far and best.pt
        self.wandb: WandbLog | None = None  # --wandb: rank 0's W&B run (None elsewhere, or when it did not start)
        self.lock: runlock.RunLock | None = None  # rank 0: the run directory's lock (setup)

    def run(self) -> dict:
        """Train until config.env_steps agent steps (whole iterations), a signal, or `stop_after`
        iterations. Returns the final counters and the process exit code (0, or 128 + signal number)."""
        try:  # --env_step_timeout, from the envs' first reset (setup) until the loop ends; an engine's fatal signal
            with self.calls, EngineFaults(self.env_call, self.comm.rank, self.end_now):
                self.resume(*self.setup())
                self.loop()
        except BaseException:  # an error ends the run: so does its W&B run, marked failed, with wandb's processes
            if self.wandb is not None:
                self.wandb.finish(exit_code=1)
            raise
        return self.finish()

    def loop(self) -> None:
        """The iterations, until the last one, a stop request or `stop_after` iterations; checkpointed at the end."""
        cfg, comm = self.config, self.comm
        with StopRequest(quiet=not comm.is_root, run_dir=cfg.run_dir, rank=comm.rank, calling=self.env_call) as stop, \
                Watchdog(cfg.watchdog_timeout, comm.rank, comm.abort, calling=self.env_call) as wd:
            self.wd = wd
            while self.train_state.iteration < self.n_iters:
                wd.phase = "rollout"
                t = self.train_state.timesteps
                hp = Hyper.at(cfg, linear_alpha(t, cfg.env_steps), cfg.envs_per_rank,   # the step size warms
                              warmup_factor(t + cfg.steps_per_iteration(comm.size), cfg.lr_warmup))  # up to its batch's end
                seg = self.collect()                                             # T x k steps
                self.advantages(seg)                                             # GAE(lambda), TD(lambda)
                stats = self.update(seg, hp)                                     # epochs x minibatches
                self.train_state.iteration += 1                                  # counted: what follows sees it
                self.train_state.timesteps += self.steps_per_iter
                self.evaluate()                                                  # --eval_interval, best.pt
                reason = self.stop_reason(stop)                                  # a signal, --stop_after_...
                self.record(seg, stats, hp)                                      # progress.csv, console, TB
                final = self.maybe_save(reason)                                  # every save_interval, last
                wd.beat()
                if final:
                    break

    def end_now(self, code: int) -> None:
        """End this rank (and under MPI the job) at once with `code`, from inside a fatal signal's handler
        (EngineFaults): a new run's folder that holds only its lock removed (by any rank: rank 0 may be waiting in a
        collective, to be ended by the abort), the envs' processes ended."""
        runlock.remove_if_only_lock(self.config.run_dir)
        self.comm.end_now(code)

    def env_call(self) -> Call | None:
        """The env call this rank is in (its VecEnv's CallSlot), None outside one or before the envs are made."""
        venv = getattr(self, "venv", None)
        return None if venv is None else venv.calls.current

    # ------------------------------------------------------------------ set-up and resume
    def setup(self) -> tuple[TrainState | None, str | None, Obs]:
        """Collective: threads, device, seeds, the run lock (rank 0), envs and their first reset, policy and
        optimizer; rank 0 loads the newest checkpoint. Any rank may fail here, so all ranks agree on the outcome
        before going on; a refused set-up leaves no run directory that holds only its lock. Returns (the checkpoint
        to resume from, its path), both None for a new run, on every rank, and the envs' first observations."""
        self._machine()
        cfg, comm = self.config, self.comm
        error, saved, path, obs, self.lock = None, None, None, None, None
        try:  # first of all: rank 0 locks the run directory (one training per run), refused at once if held
            cfg.check_fits(comm.size)
            if comm.is_root:
                if cfg.wandb:  # only rank 0 logs to W&B; every rank learns of a missing package below
                    require_wandb()
                self.lock = runlock.prepare_run_dir(cfg.run_dir, self.fresh, self.log)
        except PPO1Error as e:
            error = e
        comm.agree(error)
        try:
            self.venv = make_vec_env(cfg.env_name, cfg.envs_per_rank, cfg.seed, comm.rank, EnvOptions.of(cfg),
                                     self.spares)
            self.calls.watch(self.venv.calls)
            self.venv.maker.mend_with(self.restarts)  # --env_restarts: an env whose reset or step raises is made anew
            obs = self.venv.reset()  # an env that refuses its first observations (a bad mask) is a refused set-up
            check_batch_ram(cfg.timesteps_per_actorbatch, cfg.envs_per_rank, self.venv.obs_spec.nbytes(),
                            comm.local_size)
            self.policy = build(cfg.model_type, self.venv.action_space, self.venv.obs_spec,
                                init=cfg.init, frame_norm=cfg.frame_norm, rnn=cfg.rnn, rnn_size=cfg.rnn_size,
                                stacked=self.venv.stacked, rnn_critic=cfg.rnn_critic,
                                rnn_init=cfg.rnn_init).to(self.device)
            self.reward_norm = RewardNormalizer(cfg.envs_per_rank, cfg.gamma) if cfg.norm_reward else None
            self.sign_rewards = cfg.sign_rewards(self.venv.family)
            self.optimizer = devices.make_adam(self.policy.parameters(), self.device, cfg.optim_stepsize,
                                               cfg.adam_epsilon, compiled=cfg.compile)
            if comm.is_root:
                saved, path = self._newest_checkpoint()
                if saved is None:  # a new run that could keep nothing is refused now, not after its last iteration
                    runfiles.check_room(cfg.run_dir, self.policy)
                self.best.load(self.log, say_score=bool(cfg.eval_interval))
            if cfg.eval_interval:  # made once, here: an env that cannot be made stops the run before any work
                self.evaluation = Evaluation(cfg, comm, saved.iteration if saved is not None else 0)
        except EnvCrash as e:  # its first reset raised past --env_restarts
            error = PPO1Error(self.restarts.error(e, 0))
        except PPO1Error as e:
            error = e
        try:
            comm.agree(error)
        except PPO1Error:
            if self.evaluation is not None:
                self.evaluation.close()
            if self.lock is not None:  # refused before any work: no directory of only a lock file is left
                self.lock.abandon()
            raise
        return (*comm.bcast((saved, path)), obs)

    def _machine(self) -> None:
        """Collective: this rank's threads and device, the run's precision (--precision auto: bf16 where every
        rank's device has it, kept in config.json; bf16: refused where a rank's has not) and this rank's seeds."""
        cfg, comm = self.config, self.comm
        self.threads = devices.configure_threads(cfg, comm, self.log)
        cv2.setNumThreads(1)  # the envs' image preprocessing: one thread per rank
        self.device = devices.setup_rank(cfg.device, cfg.deterministic, comm, self.log)  # the first line: devices
        if cfg.precision != "fp32":
            precision = devices.resolve_precision(cfg.precision, cfg.model_type,
                                                  comm.allgather(devices.bf16_capable(self.device)))
            if comm.is_root and cfg.precision == "auto":
                self.log(f"ppo1: --precision auto: {precision}")
            self.config = cfg = dataclasses.replace(cfg, precision=precision)
        torch.manual_seed(cfg.seed * 1000 + comm.rank)
        random.seed(cfg.seed * 1000 + comm.rank)
        self.rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, comm.rank, 2**31 - 1]))
        self.n_actors = comm.size * cfg.envs_per_rank

    def _newest_checkpoint(self) -> tuple[TrainState | None, str | None]:
        """Rank 0: the newest checkpoint that resumes and fits this run, or (None, None). Raises PPO1Error."""
        saved, path, problems = runfiles.load_newest(self.config.run_dir, resume=True)
        for p in problems:
            self.log(f"ppo1: warning: {p}; using an older checkpoint")
        if saved is not None:
            checkpoint.validate(saved, self.config, self.venv.num_actions, self.n_actors, self.venv.obs_spec,
                                action_nvec(self.venv.action_space))
            self.log(f"ppo1: resuming from {path} (iteration {saved.iteration}, {saved.timesteps} steps)")
        return saved, path

    def resume(self, saved: TrainState | None, path: str | None, obs: Obs) -> None:
        """Collective: this run's TrainState, from `saved` when there is one (model, optimizer and
        counters; every rank's parts, rank_parts, when it ran on as many ranks), then rank 0's parameters
        everywhere; then the loop's logs and clocks. `obs`: the envs' first observations (setup)."""
        cfg, comm = self.config, self.comm
        # model, optimizer and ranks: filled at each save
        nvec = action_nvec(self.venv.action_space)
        self.train_state = TrainState(model={}, config=cfg.to_saved(), num_actions=self.venv.num_actions,
                                      n_actors=self.n_actors, obs_spec=self.venv.obs_spec.to_list(),
                                      action_nvec=None if nvec is None else list(nvec),
                                      model_io=ModelIO.of(self.venv.action_space, self.venv.stacked))
        self.collector = make_collector(self.venv, self.policy, cfg.timesteps_per_actorbatch, obs, self.device,
                                        self.profile, cfg.seq_len())
        self.rank_parts = RankParts(rngs=RankRngs(self.rng, self.device), envs=self.venv, restarts=self.restarts,
                                    collector=self.collector,
                                    returns=None if self.reward_norm is None else self.reward_norm.returns)
        error = None
        try:  # a checkpoint whose contents do not fit is one line on every rank, not a traceback
            if saved is not None:
                self._restore(saved)
        except Exception as e:
            error = PPO1Error(f"checkpoint {path} does not fit this run and cannot be restored: {error_line(e)}")
        comm.agree(error)
        self.keeper = Keeper(cfg, comm, self.train_state, self.policy, self.optimizer, self.rank_parts,
                             self.reward_norm, self.lock, kept=(self.train_state.iteration, path),
                             log=lambda line: self.log(line))  # the log of the moment: above the progress bar
        comm.broadcast_parameters(self.policy)
        comm.check_synced(self.policy)
        self._open_logs()

    def _restore(self, saved: TrainState) -> None:
        """Load `saved` into this rank: the run's model, optimizer and counters; the parts of this rank
        (rank_parts) when it ran on as many ranks, else new games with seeds no earlier rank used."""
        self.policy.load_state_dict(saved.model)
        self.optimizer.load_state_dict(saved.optimizer)
        state = self.train_state
        state.iteration, state.timesteps, state.episodes = saved.iteration, saved.timesteps, saved.episodes
        state.recent.extend(saved.recent)
        state.wandb_id = saved.wandb_id  # the W&B run a resume continues
        if self.reward_norm is not None and saved.reward_norm is not None:
            self.reward_norm.load_state_dict(saved.reward_norm)
        if saved.n_ranks == self.comm.size:  # the games go on where saved (with their memories and running
            self.rank_parts.load_state_dict(saved.rank(self.comm.rank))  # returns), or anew from zeros
        else:
            self.log(f"ppo1: the checkpoint ran on {saved.n_ranks} ranks, this run on {self.comm.size} (same "
                     f"{self.n_actors} actors): model, optimizer and counters resume; games and RNGs start afresh")
            ranks = [saved.rank(r) for r in range(saved.n_ranks)]
            self.restarts.load_state_dict(max(ranks, key=lambda r: len(r.get("restarts") or [])))  # the most counted
            # no seed of the earlier ranks' envs again: no games, every place made anew past the most envs made in any
            made = max(m for r in ranks for m in (r.get("env_made") or [0]))
            self.venv.load_state_dict({"envs": None, "env_made": [made] * self.venv.num_envs})
        self.collector.resume_from(self.venv.obs)

    def _open_logs(self) -> None:
        """The update's pass (its precision, --compile), the loop's logs (rank 0: console, progress.csv,
        TensorBoard, videos; every rank: its episode CSV) and clocks."""
        cfg, comm, state = self.config, self.comm, self.train_state
        self.n_iters = cfg.num_iterations(comm.size)
        self.steps_per_iter = cfg.steps_per_iteration(comm.size)
        progress, self.video, self.snapshots = None, None, None
        if comm.is_root:
            self.log(f"ppo1: {cfg.env_name}, {comm.size} ranks x {cfg.envs_per_rank} envs = {self.n_actors} "
                     f"actors, {self.threads} torch thread(s) per rank, {self.n_iters} iterations of "
                     f"{self.steps_per_iter} steps; run dir {cfg.run_dir}")
            self.log(f"ppo1: the policy reads {self.venv.reads()}")
            if self.policy.describe():
                self.log(f"ppo1: its torso: {self.policy.describe()}")
            if cfg.rnn != "none":  # whole chunks per minibatch: the update's realised minibatches, said
                self.log(rnn_update_line(cfg))
            progress = ProgressLog(cfg.run_dir, total_steps=self.n_iters * self.steps_per_iter,
                                   start_step=state.timesteps)
            self.video = TrainingVideo(cfg, log=progress.note)
            self.snapshots = Snapshots(cfg.run_dir, cfg.snapshot_interval, self.venv.rgb, self.venv.num_envs,
                                       progress.events, warn=progress.note)
            self.log = progress.note  # later messages go above the progress bar
            if cfg.wandb:  # the checkpoint's W&B run, or a new one whose id the next checkpoint keeps
                self.wandb = WandbLog.start(cfg, state.wandb_id, warn=progress.note)
                state.wandb_id = self.wandb.run_id if self.wandb is not None else state.wandb_id
        self.recorder = Recorder(progress, [self.wandb] if self.wandb is not None else [])
        self.episode_log = EpisodeLog(cfg.run_dir, comm.rank, warn=self.log if comm.is_root else None)
        self.update_pass = UpdatePass(self.policy, self.device, cfg.precision, cfg.compile, lambda m: self.log(m))
        self.start, self.start_steps, self.start_iteration = time.time(), state.timesteps, state.iteration

    # ------------------------------------------------------------------ one iteration
    @timed("rollout")
    def collect(self) -> Segment:
        """Collective: the rollout of T steps in each env. What an env does wrong on any rank (data ppo1 cannot
        train on, an exception of its own past --env_restarts: its traceback into the run directory) stops the
        run on every rank before anything of this iteration is used, its work kept (env_stop)."""
        iteration = self.train_state.iteration + 1
        self.restarts.begin(iteration)  # an env made anew meanwhile: a warning on the rank, its trace kept
        seg, why = None, None
        try:
            seg = self.collector.collect()
        except (EnvDataError, EnvCrash) as e:
            why = self.restarts.error(e, iteration)
        self.wd.phase = "env stop allgather"
        stops = [w for w in self.comm.allgather(why) if w is not None]
        if stops:
            self.env_stop(stops[0])
        return seg

    def env_stop(self, why: str) -> None:
        """Collective: end training for an env's fault `why` (the lowest rank's) with the work of the iterations
        done kept (Keeper.keep_work). Raises the one line every rank exits with."""
        self.wd.phase = "checkpoint gather"
        raise RanksError(f"{why}; nothing of this iteration was used; {self.keeper.keep_work()}")

    @timed("advantages")
    def advantages(self, seg: Segment) -> None:
        """The rewards the update learns from (--clip_reward, --reward_scale, --norm_reward), then the segment's
        GAE(lambda) advantages and TD(lambda) returns."""
        cfg = self.config
        live = seg.weights > 0  # the steps that ran (not those whose env crashed)
        seg.rewards[:] = shape_rewards(seg.rewards, self.sign_rewards, cfg.reward_scale)
        if self.reward_norm is not None:
            self.wd.phase = "reward statistics allreduce"
            seg.rewards[:] = self.reward_norm(seg.rewards, seg.dones, self.comm.sum, live)
        seg.advantages, seg.returns = gae(seg.rewards, seg.values, seg.dones, seg.last_value, cfg.gamma, cfg.lam,
                                          seg.cut_values, live)

    def update(self, seg: Segment, hp: Hyper) -> dict[str, float]:
        """Observation statistics (MLP, --frame_norm center), then the PPO epochs on this rank's batch.
        Returns this rank's statistics: the update's means and the value function's explained variance."""
        self.wd.phase = "observation statistics allreduce"
        with self.profile.timer("statistics"):
            moved = self.policy.observe(seg.step_obs, self.comm.sum)  # baselines: before the epochs
        self.wd.phase = "gradient allreduce"
        with self.profile.timer("update"):
            batch = seg.batch(self.device, self.rng, standardize_adv=self.config.adv_norm == "batch",
                              lay_out=self.policy.laid_out)
            self.update_pass.set_pi_old(batch, moved)  # where the statistics moved or in bf16: the first ratio is 1
            try:
                stats = update(self.policy, self.optimizer, self.comm, batch, hp, self.update_pass)
            except NonFiniteUpdate as e:  # the same on every rank: one line, exit 2, nothing saved of it
                raise RanksError(f"training stopped at iteration {self.train_state.iteration + 1}, {e}; no step was "
                                 "taken and no checkpoint written of it (the newest on disk is intact); try a smaller "
                                 "--optim_stepsize or a larger minibatch") from None
        live = seg.weights.reshape(-1) > 0  # the samples trained on (not the steps whose env crashed)
        stats["explained_variance"] = explained_variance(seg.values.reshape(-1)[live], seg.returns.reshape(-1)[live])
        return stats

    @timed("logging")
    def record(self, seg: Segment, stats: dict[str, float], hp: Hyper) -> None:
        """Collective: the games finished on all ranks, the statistics averaged over ranks, the periodic
        parameter sync check; rank 0 writes the iteration's row and, when due, records a video and writes a
        snapshot of its envs."""
        cfg, comm, state = self.config, self.comm, self.train_state
        self.episode_log.write(seg.episodes, state.timesteps)
        self.wd.phase = "episode statistics allgather"
        finished = [g for games in comm.allgather([(e.ret, e.length) for e in seg.episodes]) for g in games]
        state.episodes += len(finished)
        state.recent.extend(finished)
        self.wd.phase = "statistics allreduce"
        means = comm.mean_of(stats)
        if state.iteration % cfg.sync_check_interval == 0 or state.iteration == self.n_iters:
            self.wd.phase = "parameter sync check"
            comm.check_synced(self.policy)
        if comm.is_root:
            self.wd.phase = "progress log, video and snapshot (rank 0)"
            elapsed = time.time() - self.start
            self.recorder.record(**means, sps=(state.timesteps - self.start_steps) / max(elapsed, 1e-9),
                                 time_elapsed=elapsed)
            warning = kl_warning(state.iteration, means["approx_kl"], self.last_kl)
            if warning:
                self.log(warning)
            self.last_kl = means["approx_kl"]
            for part in (state, hp, self.profile):
                part.record(self.recorder)
            self.recorder.dump(finished)
            video = self.video.maybe_record(self.policy, state.iteration, state.timesteps)
            snapshot = self.snapshots.maybe_write(state.iteration, state.timesteps)
            if self.wandb is not None:  # the files just written, as W&B media
                if video is not None:
                    self.wandb.video(video.path, state.timesteps)
                if snapshot is not None:
                    self.wandb.image(snapshot, state.timesteps)

    @timed("evaluation")
    def evaluate(self) -> None:
        """Collective, when due (--eval_interval, and after the last iteration): the policy after this iteration's
        update plays the evaluation games (ppo1.evaluation); rank 0 records their columns, says a line, and keeps the
        policy as best.pt when its score (the mean return of the games play plays) beats the best so far."""
        state = self.train_state
        if self.evaluation is None or not self.evaluation.due(state.iteration, self.n_iters):
            return
        self.wd.phase = f"evaluation ({self.config.eval_episodes} games)"
        row = self.evaluation.run(self.policy, state.iteration, self.wd.beat)
        if row is None:  # not rank 0
            return
        self.recorder.record(**row)
        line = self.evaluation.line(state.iteration, state.timesteps, row)
        self.log(line + self.best.offer(float(row["eval_return_mean"]), state,  # the model copied for a new best only
                                        lambda: devices.to_cpu(self.policy.state_dict()), self.config))

    @timed("checkpoint")
    def stop_reason(self, stop: StopRequest) -> str | None:
        """Collective: why training stops after this iteration (a signal on any rank, --stop_after_iterations), or
        None to go on. A signal sets the exit code 128 + its number."""
        self.wd.phase = "stop request allgather"
        lost = self.lock is not None and not self.lock.intact()  # rank 0 holds the lock
        gathered = self.comm.allgather((lost, stop.signum))  # one collective for both
        if any(lost for lost, _ in gathered):
            raise RanksError(f"the run directory {self.config.run_dir} was removed or moved (its lock file with it) "
                             f"while training: stopped after iteration {self.train_state.iteration}, writing nothing more "
                             "there, so no second training shares it")
        signum = stop.agreed([signum for _, signum in gathered])
        if signum:
            self.exit_code = 128 + signum
            return f"stopped by {signal.Signals(signum).name}" + (" (a hang-up)" if signum == signal.SIGHUP else "")
        if self.stop_after and self.train_state.iteration - self.start_iteration >= self.stop_after:
            return f"stopped after {self.stop_after} iterations (--stop_after_iterations)"
        return None

    @timed("checkpoint")
    def maybe_save(self, stop_reason: str | None) -> bool:
        """Collective: checkpoint every save_interval iterations and after the last one (Keeper.save_due). Returns
        whether this was the last iteration."""
        self.reason = stop_reason or self.reason
        final = stop_reason is not None or self.train_state.iteration == self.n_iters
        if final or self.train_state.iteration % self.config.save_interval == 0:
            self.wd.phase = "checkpoint gather"
            self.keeper.save_due(final)
        return final

    def finish(self) -> dict:
        """Close the envs and logs, release the run lock (rank 0), say how the run ended. Returns the
        final counters and the exit code."""
        cfg, state = self.config, self.train_state
        self.episode_log.close()
        self.venv.close()
        if self.evaluation is not None:
            self.evaluation.close()
        if self.comm.is_root:
            self.recorder.progress.close()
            if self.wandb is not None:  # the W&B run ends with the process's exit code (128 + a stop signal's)
                self.wandb.finish(self.exit_code)
            self.lock.release()
            latest = os.path.join(cfg.run_dir, runfiles.LATEST)
            if self.reason == "done":
                self.log(f"ppo1: done: {state.timesteps} steps in {state.iteration} iterations; checkpoint {latest}")
            else:
                self.log(f"ppo1: {self.reason} at iteration {state.iteration} ({state.timesteps} of "
                         f"{cfg.env_steps} steps); checkpoint {latest}; run the same command again to resume")
        return {"iteration": state.iteration, "timesteps": state.timesteps, "episodes": state.episodes,
                "exit_code": self.exit_code}


def train(config: Config, comm: Comm, log=print, fresh: bool = False, stop_after: int = 0,
          spares: Spares | None = None) -> dict:
    """Train until config.env_steps agent steps (whole iterations), a signal, or `stop_after` iterations.

    Resumes from the newest checkpoint in config.run_dir unless `fresh`, which moves the old run
    aside. Returns the final counters and the process exit code (0, or 128 + signal number). `spares`: an
    env made already (ppo1.envs.Spares), taken as the first training env; closed if it is not.
    """
    return Trainer(config, comm, log, fresh, stop_after, spares).run()
