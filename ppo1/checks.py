"""The checks of a Config's values: ConfigChecks, the base of ppo1.config.Config, raises one PPO1Error naming the
first setting out of range and what would be valid (`--gamma=1.5 is invalid: must be in (0, 1]`); and the choices a
setting may take, which the modules that read them import from ppo1.config."""
from __future__ import annotations

import dataclasses
import math
import os

from ppo1.bounds import MAX_ENVS_PER_RANK, MAX_EPISODES, MAX_FRAMES
from ppo1.errors import PPO1Error
from ppo1.presets import ALL_PRESETS, PRESETS

MODEL_TYPES = ("small", "large", "impala", "mlp")

INITS = ("normc", "orthogonal")
ADV_NORMS = ("batch", "minibatch")
PRECISIONS = ("fp32", "bf16", "auto")
RNN_CHOICES = ("none", "lstm", "gru")  # --rnn: no recurrent core, or the kind of the policy's (policies.RecurrentCore)
RNN_CRITICS = ("shared", "separate")  # --rnn_critic: the value head reads the policy's core, or a core of its own
RNN_INITS = ("zeros", "chrono")  # --rnn_init: the gate biases of a new core (cores.chrono_init_)
FRAME_NORMS = ("scale", "center")
FRAME_CODES = ("auto", "on", "off")
REWARD_CLIPS = ("auto", "sign", "none")
DISTRIBUTION_MODES = ("easy", "hard", "extreme", "memory", "exploration")  # Procgen's


class ConfigChecks:
    """The value checks of a Config (its base: every method reads the Config's settings as attributes)."""

    def validate(self):
        """Raise PPO1Error naming the first out-of-range value; return self when all are valid."""
        if not isinstance(self.env_name, str) or not self.env_name.strip():
            self._bad("env_name", "a gymnasium Atari id such as PongNoFrameskip-v4")
        # (imported here, not at the top: ppo1.envs loads torch, and the --np launcher imports this module, no env code)
        from ppo1.envs.ref import parse_env_kwargs
        parse_env_kwargs(self.env_kwargs)
        self._validate_numbers()
        self._validate_env_numbers()
        self._validate_choices()
        return self

    def _bad(self, name: str, valid: str) -> None:
        raise PPO1Error(f"--{name}={getattr(self, name)!r} is invalid: must be {valid}")

    def _finite(self, name: str) -> float:
        v = getattr(self, name)
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            self._bad(name, "a finite number")
        return v

    def _whole(self, name: str, valid: str, low: int = 0, high: float = math.inf) -> None:
        """PPO1Error (`valid`: what would be) unless the setting `name` is an int from `low` to `high`."""
        v = getattr(self, name)
        if not isinstance(v, int) or not low <= v <= high:
            self._bad(name, valid)

    def _one_of(self, name: str, choices: tuple[str, ...]) -> None:
        if getattr(self, name) not in choices:
            self._bad(name, f"one of {', '.join(choices)}")

    def _validate_numbers(self) -> None:
        bad, finite, whole = self._bad, self._finite, self._whole
        if not 0.0 < finite("gamma") <= 1.0:
            bad("gamma", "in (0, 1]")
        if not 0.0 <= finite("lam") <= 1.0:
            bad("lam", "in [0, 1]")
        if not 0.0 < finite("epsilon") < 1.0:
            bad("epsilon", "in (0, 1)")
        if finite("ent_coef") < 0.0:
            bad("ent_coef", ">= 0")
        if finite("vf_coef") < 0.0:
            bad("vf_coef", ">= 0")
        if not 0.0 < finite("optim_stepsize") <= 1.0:
            bad("optim_stepsize", "in (0, 1]")
        if not finite("adam_epsilon") > 0.0:
            bad("adam_epsilon", "> 0")
        for name in ("timesteps_per_actorbatch", "optim_epochs", "optim_batchsize", "envs_per_rank",
                     "save_interval", "sync_check_interval", "env_steps", "keep_checkpoints"):
            whole(name, "a whole number >= 1", low=1)
        whole("env_restarts", "a whole number >= 0")
        whole("env_restart_window", "a whole number of iterations >= 0 (0 = the whole run)")
        if self.envs_per_rank > MAX_ENVS_PER_RANK:
            bad("envs_per_rank", f"at most {MAX_ENVS_PER_RANK} (for more actors, run more ranks)")
        if self.optim_batchsize > self.timesteps_per_actorbatch:
            raise PPO1Error(
                f"--optim_batchsize={self.optim_batchsize} is invalid: must be <= "
                f"--timesteps_per_actorbatch={self.timesteps_per_actorbatch} (both are per actor)")
        if self.adv_norm == "minibatch" and self.optim_batchsize * self.envs_per_rank < 2:
            raise PPO1Error(
                f"--optim_batchsize={self.optim_batchsize} is invalid with --adv_norm minibatch and "
                f"--envs_per_rank={self.envs_per_rank}: a rank's minibatch must hold at least 2 samples to "
                "standardise its advantages")
        whole("rnn_size", "a whole number from 1 to 8192", low=1, high=8192)
        whole("bptt_len", "a whole number >= 0 (0 = automatic)")
        if self.bptt_len and self.timesteps_per_actorbatch % self.bptt_len:
            raise PPO1Error(f"--bptt_len={self.bptt_len} is invalid: must divide --timesteps_per_actorbatch="
                            f"{self.timesteps_per_actorbatch} (or 0: the whole rollout, T steps)")
        if finite("max_grad_norm") < 0.0:
            bad("max_grad_norm", ">= 0 (0 = off)")
        if finite("target_kl") < 0.0:
            bad("target_kl", ">= 0 (0 = off)")
        whole("lr_warmup", "a whole number >= 0 (0 = off)")

    def _validate_env_numbers(self) -> None:
        bad, finite, whole = self._bad, self._finite, self._whole
        for name in ("frame_skip", "frame_stack"):
            whole(name, "a whole number from 1 to 64", low=1, high=64)
        whole("frame_size", "a whole number from 0 (the env's own size) to 1024", high=1024)
        if not finite("reward_scale") > 0.0:
            bad("reward_scale", "> 0")
        whole("max_episode_steps", "a whole number >= 0 (0 = the env's own limit)")
        for name in ("num_levels", "start_level"):
            whole(name, "a whole number >= 0", high=2**31 - 1)

    def _validate_choices(self) -> None:
        bad, finite, whole, one_of = self._bad, self._finite, self._whole, self._one_of
        one_of("init", INITS)
        one_of("frame_norm", FRAME_NORMS)
        one_of("frame_codes", FRAME_CODES)
        if self.frame_norm != "scale" and self.model_type == "mlp":
            bad("frame_norm", "scale with --model_type mlp (its observations have their own running mean/std)")
        one_of("distribution_mode", DISTRIBUTION_MODES)
        one_of("clip_reward", REWARD_CLIPS)
        one_of("adv_norm", ADV_NORMS)
        if self.preset not in ALL_PRESETS:
            bad("preset", f"one of {', '.join(PRESETS)}, procgen")
        for f in dataclasses.fields(self):  # every on/off setting
            if f.type == "bool" and not isinstance(getattr(self, f.name), bool):
                bad(f.name, "true or false")
        one_of("model_type", MODEL_TYPES)
        one_of("rnn", RNN_CHOICES)
        one_of("rnn_critic", RNN_CRITICS)
        one_of("rnn_init", RNN_INITS)
        if self.rnn != "none" and self.compile:
            raise PPO1Error(f"--compile is not supported with --rnn {self.rnn}: leave one of them out")
        one_of("precision", PRECISIONS)
        if self.precision == "bf16" and self.model_type == "mlp":
            bad("precision", "fp32 with --model_type mlp (bf16 applies to the CNN torso)")
        whole("seed", "a whole number >= 0")
        whole("num_threads", "a whole number >= 0 (0 = automatic)")
        whole("snapshot_interval", "a whole number >= 0 (0 = off)")
        whole("eval_interval", "a whole number of iterations >= 0 (0 = off)")
        whole("eval_episodes", f"a whole number from 1 to {MAX_EPISODES}", high=MAX_EPISODES)
        if self.eval_interval and self.eval_episodes < 1:
            bad("eval_episodes", f"a whole number from 1 to {MAX_EPISODES} with --eval_interval "
                                 f"{self.eval_interval} (evaluation on)")
        whole("eval_max_steps", "a whole number of agent steps >= 1", low=1)
        whole("video_interval", "a whole number >= 0 (0 = no videos)")
        whole("video_max_frames", f"a whole number from 1 to {MAX_FRAMES} (30 minutes at 60 fps)", low=1,
              high=MAX_FRAMES)
        if finite("env_step_timeout") < 0:
            bad("env_step_timeout", "seconds >= 0 (0 = off)")
        for name in ("wandb_project", "wandb_entity"):  # characters W&B refuses in these names
            if any(c in getattr(self, name) for c in "/\\#?%:"):
                bad(name, "a name without any of / \\ # ? % :")
        if any(len(t.strip()) > 64 for t in self.wandb_tags.split(",")):
            bad("wandb_tags", "comma-separated tags of at most 64 characters each (W&B's limit)")
        if finite("watchdog_timeout") < 0 and self.watchdog_timeout != -1:
            bad("watchdog_timeout", "seconds > 0, 0 (off) or -1 (automatic: max(10 x median iteration time, 300 s))")
        from ppo1.device import parse_device
        parse_device(self.device)
        if not self.model_name or os.sep in self.model_name or self.model_name in (".", ".."):
            bad("model_name", "a plain directory name")

    def check_fits(self, n_ranks: int) -> None:
        """Raise PPO1Error if env_steps is too small for even one iteration with n_ranks ranks."""
        if self.num_iterations(n_ranks) < 1:
            raise PPO1Error(
                f"--env_steps={self.env_steps} is invalid: one iteration needs "
                f"{self.steps_per_iteration(n_ranks)} steps ({n_ranks} ranks x {self.envs_per_rank} envs x "
                f"{self.timesteps_per_actorbatch} steps)")
