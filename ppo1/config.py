"""The run's configuration: one dataclass, with the PPO paper's Atari defaults (Table 5)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field, fields

from ppo1 import PPO1Error
from ppo1.bounds import MAX_ENVS_PER_RANK, MAX_FRAMES

MODEL_TYPES = ("small", "large", "mlp")

INITS = ("normc", "orthogonal")
ADV_NORMS = ("batch", "minibatch")

# Settings of the machine, not of the run: a resumed run takes them from its command line (or the
# defaults), never from the config.json of the checkpoint, so a run moves between GPU and CPU boxes.
MACHINE_FIELDS = ("device", "compile")

# Defaults for envs with vector observations (classic control, MuJoCo): baselines' run_mujoco.py.
VECTOR_DEFAULTS = {
    "model_type": "mlp", "env_steps": 1_000_000, "timesteps_per_actorbatch": 2048, "optim_epochs": 10,
    "optim_stepsize": 3e-4, "optim_batchsize": 64, "epsilon": 0.2, "ent_coef": 0.0, "gamma": 0.99, "lam": 0.95,
}

# --preset NAME: hyperparameters applied to every flag not given on the command line (Atari).
# Every field not named keeps the Config default (the PPO paper's Table 5).
PRESETS: dict[str, dict] = {
    # The PPO paper, Table 5: small CNN, T 128, 3 epochs, minibatch 32/actor, lr 2.5e-4 and clip 0.1
    # both annealed, c1 = 1, per-batch advantage standardisation, no gradient clipping.
    "paper": {},
    # baselines ppo1's own run_atari.py (lucaslingle/ppo1 "model-ppo1-defaults").
    "baselines": {"model_type": "large", "timesteps_per_actorbatch": 256, "optim_epochs": 4,
                  "optim_stepsize": 1e-3, "epsilon": 0.2, "optim_batchsize": 64},
    # CleanRL ppo_atari.py / baselines ppo2 Atari: Nature CNN, 4 epochs, orthogonal init, c1 0.25
    # (their vf_coef 0.5 times their 0.5 * squared error),
    # gradient-norm clipping 0.5, per-minibatch standardisation, clip constant 0.1.
    "cleanrl": {"model_type": "large", "optim_epochs": 4, "init": "orthogonal", "vf_coef": 0.25,
                "max_grad_norm": 0.5, "adv_norm": "minibatch", "anneal_clip": False},
    # Fewest wall-clock minutes to win Pong with 8 actors on 2 CPU cores (README: how it was chosen).
    "fast": {"model_type": "small", "init": "orthogonal", "optim_epochs": 4, "optim_stepsize": 5e-4,
             "epsilon": 0.2, "vf_coef": 0.5, "max_grad_norm": 0.5, "adv_norm": "minibatch",
             "optim_batchsize": 32, "env_steps": 2_500_000},
}


@dataclass
class Config:
    """Everything that defines a training run. Saved beside every checkpoint as config.json.

    Hyperparameters are per actor: `timesteps_per_actorbatch` steps per env per iteration and
    `optim_batchsize` samples per actor per minibatch, so 8 actors pose the same learning problem
    whether they run as 8 ranks x 1 env, 2 x 4 or 1 x 8.
    """

    env_name: str = "PongNoFrameskip-v4"
    env_steps: int = 10_000_000          # agent steps summed over all actors (1 step = 4 frames)
    timesteps_per_actorbatch: int = 128  # horizon T per actor
    gamma: float = 0.99
    lam: float = 0.95
    epsilon: float = 0.1                 # clip parameter, annealed with alpha
    ent_coef: float = 0.01               # c2
    vf_coef: float = 1.0                 # c1
    optim_epochs: int = 3
    optim_stepsize: float = 2.5e-4       # Adam step size, annealed with alpha
    optim_batchsize: int = 32            # minibatch samples per actor
    adam_epsilon: float = 1e-5
    seed: int = 0
    model_type: str = "small"
    model_name: str = "model-ppo1-defaults"
    checkpoint_dir: str = "checkpoints"
    asset_dir: str = "assets"
    video_interval: int = 0              # iterations between videos of an evaluation game (rank 0); 0 = none
    video_max_frames: int = 18_000       # a training video is cut after this many frames (5 min at 60 fps)
    envs_per_rank: int = 1
    save_interval: int = 50              # iterations between checkpoints (and one at the end)
    sync_check_interval: int = 10        # iterations between checks that ranks hold identical parameters
    num_threads: int = 0                 # torch threads per rank; 0 = cores available / ranks on the node
    keep_checkpoints: int = 3            # numbered checkpoints kept (latest.pt is always the newest)
    deterministic: bool = False          # 1 thread per rank + deterministic torch kernels: bit-exact resume
    preset: str = "paper"                # the hyperparameter family the run started from (PRESETS)
    init: str = "normc"                  # normc (baselines ppo1) or orthogonal (ppo2, CleanRL, SB3)
    adv_norm: str = "batch"              # standardise advantages per rank batch or per minibatch
    max_grad_norm: float = 0.0           # clip the global gradient norm (after averaging); 0 = off
    anneal_clip: bool = True             # anneal the clip parameter with alpha (the paper) or keep it
    watchdog_timeout: float = -1.0       # s without a finished iteration before a rank ends the job; -1 = auto, 0 = off
    device: str = "auto"                 # auto, cpu, cuda or cuda:N (ppo1.device); not inherited on resume
    compile: bool = False                # torch.compile the training forward (eager if that fails)
    extra: dict = field(default_factory=dict)  # room for later settings without breaking old JSON

    # ------------------------------------------------------------------ derived
    @property
    def run_dir(self) -> str:
        """Directory of this run: checkpoints, config.json, progress.csv, episode logs."""
        return os.path.join(self.checkpoint_dir, self.model_name)

    def clip_param(self, alpha: float) -> float:
        """The clip parameter at annealing factor alpha."""
        return self.epsilon * alpha if self.anneal_clip else self.epsilon

    def steps_per_iteration(self, n_ranks: int) -> int:
        """Agent steps collected per iteration over all actors."""
        return self.timesteps_per_actorbatch * self.envs_per_rank * n_ranks

    def num_iterations(self, n_ranks: int) -> int:
        """Whole iterations that fit in env_steps (training never overruns the schedule)."""
        return self.env_steps // self.steps_per_iteration(n_ranks)

    # ------------------------------------------------------------------ checks
    def validate(self) -> "Config":
        """Raise PPO1Error naming the first out-of-range value; return self when all are valid."""

        def bad(name: str, valid: str) -> None:
            raise PPO1Error(f"--{name}={getattr(self, name)!r} is invalid: must be {valid}")

        def finite(name: str) -> float:
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                bad(name, "a finite number")
            return v

        if not isinstance(self.env_name, str) or not self.env_name.strip():
            bad("env_name", "a gymnasium Atari id such as PongNoFrameskip-v4")
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
        if not finite("optim_stepsize") > 0.0:
            bad("optim_stepsize", "> 0")
        if not finite("adam_epsilon") > 0.0:
            bad("adam_epsilon", "> 0")
        for name in ("timesteps_per_actorbatch", "optim_epochs", "optim_batchsize", "envs_per_rank",
                     "save_interval", "sync_check_interval", "env_steps", "keep_checkpoints"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                bad(name, "a whole number >= 1")
        if self.envs_per_rank > MAX_ENVS_PER_RANK:
            bad("envs_per_rank", f"at most {MAX_ENVS_PER_RANK} (for more actors, run more ranks)")
        if self.optim_batchsize > self.timesteps_per_actorbatch:
            raise PPO1Error(
                f"--optim_batchsize={self.optim_batchsize} is invalid: must be <= "
                f"--timesteps_per_actorbatch={self.timesteps_per_actorbatch} (both are per actor)")
        if finite("max_grad_norm") < 0.0:
            bad("max_grad_norm", ">= 0 (0 = off)")
        if self.init not in INITS:
            bad("init", f"one of {', '.join(INITS)}")
        if self.adv_norm not in ADV_NORMS:
            bad("adv_norm", f"one of {', '.join(ADV_NORMS)}")
        if self.preset not in PRESETS and self.preset != "mujoco":
            bad("preset", f"one of {', '.join(PRESETS)}")
        if not isinstance(self.anneal_clip, bool):
            bad("anneal_clip", "true or false")
        if self.model_type not in MODEL_TYPES:
            bad("model_type", f"one of {', '.join(MODEL_TYPES)}")
        if not isinstance(self.seed, int) or self.seed < 0:
            bad("seed", "a whole number >= 0")
        if not isinstance(self.num_threads, int) or self.num_threads < 0:
            bad("num_threads", "a whole number >= 0 (0 = automatic)")
        if not isinstance(self.video_interval, int) or self.video_interval < 0:
            bad("video_interval", "a whole number >= 0 (0 = no videos)")
        if not isinstance(self.video_max_frames, int) or not 1 <= self.video_max_frames <= MAX_FRAMES:
            bad("video_max_frames", f"a whole number from 1 to {MAX_FRAMES} (30 minutes at 60 fps)")
        if finite("watchdog_timeout") < 0 and self.watchdog_timeout != -1:
            bad("watchdog_timeout", "seconds > 0, 0 (off) or -1 (automatic: max(10 x median iteration time, 300 s))")
        from ppo1.device import parse_device
        parse_device(self.device)
        if not isinstance(self.compile, bool):
            bad("compile", "true or false")
        if not self.model_name or os.sep in self.model_name or self.model_name in (".", ".."):
            bad("model_name", "a plain directory name")
        return self

    def check_fits(self, n_ranks: int) -> None:
        """Raise PPO1Error if env_steps is too small for even one iteration with n_ranks ranks."""
        if self.num_iterations(n_ranks) < 1:
            raise PPO1Error(
                f"--env_steps={self.env_steps} is invalid: one iteration needs "
                f"{self.steps_per_iteration(n_ranks)} steps ({n_ranks} ranks x {self.envs_per_rank} envs x "
                f"{self.timesteps_per_actorbatch} steps)")

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict) -> "Config":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise PPO1Error(f"config has unknown keys {unknown}; was it written by a newer ppo1?")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> "Config":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise PPO1Error(f"config.json is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise PPO1Error("config.json does not hold a JSON object")
        return cls.from_dict(data)
