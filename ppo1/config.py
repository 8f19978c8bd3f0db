"""The run's configuration: one dataclass, with the PPO paper's Atari defaults (Table 5), each setting with its help,
and its JSON (config.json, a checkpoint's `config`). The checks of its values are ppo1.checks' (ConfigChecks, its
base); what a preset sets for a new run is ppo1.resolve's (Config.for_preset calls it)."""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field, fields

from ppo1.checks import (ADV_NORMS, DISTRIBUTION_MODES, FRAME_CODES, FRAME_NORMS, INITS, MODEL_TYPES,  # noqa: F401
                         PRECISIONS, REWARD_CLIPS, RNN_CHOICES, RNN_CRITICS, RNN_INITS, ConfigChecks)
from ppo1.errors import PPO1Error
from ppo1.presets import FRAME_FLAGS
from ppo1.resolve import preset_values

# Keys that config.json files and checkpoints of older ppo1 versions hold and that are read and dropped
# (`extra`: an always-empty dict of "later settings", until the CLI gained each setting as a field).
LEGACY_KEYS = ("extra",)


# The settings of one env family each, saved in a section of their own in config.json and checkpoints
# ({"procgen": {"num_levels": 200, ...}, ...}); every other setting is at the top level. The attributes stay flat
# (config.num_levels, the flag --num_levels), and a saved config without sections (older files) loads as well.
SECTIONS = {
    "atari": ("episode_life",),
    "procgen": ("num_levels", "start_level", "distribution_mode"),
    "pixels": FRAME_FLAGS,  # the image preprocessing and a Dict's entries
    "gym": ("max_episode_steps",),  # envs made by gymnasium or a factory (the pixels and vector families)
}


def without_legacy_keys(data: dict) -> dict:
    """`data` (the JSON of a saved config) without LEGACY_KEYS."""
    return {k: v for k, v in data.items() if k not in LEGACY_KEYS}


def setting(default, help: str, details: str = ""):
    """A Config field with its one-line help (shown by --help, read by the CLI from the field's metadata; at most
    two printed lines) and the details that do not fit there (docs/flags.md shows them after the help)."""
    return field(default=default, metadata={"help": help, "details": details})


@dataclass
class Config(ConfigChecks):
    """Everything that defines a training run. Saved beside every checkpoint as config.json.

    Hyperparameters are per actor: `timesteps_per_actorbatch` steps per env per iteration and
    `optim_batchsize` samples per actor per minibatch, so 8 actors take the same batches whether they run
    as 8 ranks x 1 env, 2 x 4 or 1 x 8 (advantages are standardised over each rank's own samples).
    """

    env_name: str = setting("PongNoFrameskip-v4",
        "the env: an Atari id (<Game>NoFrameskip-v4, ALE/<Game>-v5), procgen:<game>, any other gymnasium id, "
        "module:EnvId or package.module:callable (a factory, with --env_kwargs)",
        "Atari ids get DeepMind's preprocessing; any other registered gymnasium id may have image or vector "
        "observations; module:EnvId imports module first, for packages that register their ids on import; "
        "package.module:callable is a factory returning a gymnasium Env, called with --env_kwargs.")
    env_kwargs: str = setting("{}",
        "keyword arguments, a JSON object such as '{\"size\": 24}', for the factory of --env_name "
        "package.module:callable (or gymnasium.make of an id other than Atari and Procgen)",
        "Saved with the run, so resume, play and movie make the same env.")
    env_steps: int = setting(10_000_000,
        "agent steps to train for, summed over all actors (on Atari 1 step = 4 frames); alpha anneals over it")
    timesteps_per_actorbatch: int = setting(128, "horizon T: steps per actor (env) per iteration")
    gamma: float = setting(0.99, "discount factor, in (0, 1]")
    lam: float = setting(0.95, "GAE lambda, in [0, 1]")
    epsilon: float = setting(0.1, "PPO clip parameter at the start; annealed linearly to 0")
    ent_coef: float = setting(0.01, "entropy bonus coefficient c2")
    vf_coef: float = setting(1.0, "value loss coefficient c1")
    optim_epochs: int = setting(3, "epochs over each iteration's batch")
    optim_stepsize: float = setting(2.5e-4, "Adam step size at the start; annealed linearly to 0")
    optim_batchsize: int = setting(32, "minibatch samples per actor (x actors = the global minibatch; "
                                           "--preset fast: 256 / actors, at most T, so its minibatch is 256 samples)")
    adam_epsilon: float = setting(1e-5, "Adam epsilon")
    anneal_lr: bool = setting(True,
        "anneal the step size linearly with alpha to 0 (the paper) or keep it constant (the Procgen paper)")
    lr_warmup: int = setting(0,
        "agent steps over which the step size rises linearly from 0 to its annealed value (Adam's first "
        "steps otherwise move every weight by the full step size); 0 = off (the paper)")
    seed: int = setting(0, "random seed; each env is seeded from (seed, rank, env index)")
    frame_skip: int = setting(1,
        "image-observation envs other than Atari and Procgen: repeat each action this many env steps, "
        "summing their rewards; ViZDoom's ids and stable_retro:make default to 4",
        "Atari keeps DeepMind's 4 and its own preprocessing.")
    frame_size: int = setting(84,
        "image-observation envs other than Atari and Procgen: resize each frame to N x N (INTER_AREA); 0 "
        "keeps the env's own size",
        "An image smaller than N on both sides (a 7x7 symbolic view) keeps its size and its channels: it is "
        "neither upscaled nor turned gray.")
    frame_upscale: bool = setting(False,
        "image-observation envs other than Atari and Procgen: resize (and gray) an image smaller than "
        "--frame_size too; off: it keeps its size and channels",
        "Versions before named observation entries resized every image: their checkpoints play so, and resume "
        "with --frame_upscale.")
    frame_gray: bool = setting(True,
        "image-observation envs other than Atari and Procgen: convert RGB frames to gray (--no-frame_gray "
        "keeps their colours)")
    frame_stack: int = setting(4,
        "image-observation envs other than Atari and Procgen: the observation is the last N frames, oldest "
        "first (rewards are the env's own, not clipped)")
    obs_key: str = setting("",
        "image-observation envs whose observations are a Dict (ViZDoom's screen and gamevariables): the one "
        "image entry to train on; empty: every image entry, each read by a CNN of its own")
    obs_vectors: bool = setting(False,
        "image-observation envs whose observations are a Dict: its other entries (ViZDoom's gamevariables) "
        "also go to the CNN policy; off: the images alone",
        "The entries (Box, MultiBinary; Discrete and MultiDiscrete one-hot) join the image features as one "
        "vector, normalised by its running mean and std. New runs of such envs "
        "have it on (their preset sets it); off, the field's default, is what a config.json without the "
        "setting loads as.")
    frame_codes: str = setting("off",
        "image-observation envs other than Atari and Procgen: images as codes (the numbers they are, not / 255): "
        "auto (integers whose space's high bound is 31 or less), on, off",
        "Codes are never resized nor grayed. For symbolic views whose values are ids (object, colour, state) rather "
        "than intensities. New runs of such envs have auto (their preset sets it); off, the field's default, is what "
        "a config.json without the setting loads as.")
    model_type: str = setting("small",
        "policy network: small (the PPO paper's CNN, A3C), large (Nature DQN), impala (the IMPALA CNN) or "
        "mlp (2x64 tanh, for vector observations; the default there)",
        "impala: the CNN of Espeholt et al. 2018, 3 stages of conv, max-pool and 2 residual blocks, 16/32/32 "
        "channels, fc 256; it takes any image observation.")
    rnn: str = setting("none",
        "memory: none, lstm or gru, a one-layer recurrent core between the torso and the heads, its state "
        "carried across steps and zeroed at each episode's start",
        "For games a few frames do not show whole (partial observability: what happened long ago matters), "
        "usually with --frame_stack 1.")
    rnn_size: int = setting(256, "units of the --rnn core")
    rnn_critic: str = setting("shared",
        "--rnn: the value head reads the policy's core (shared) or a core of its own on the same features "
        "(separate: ppo_lstm's, sb3-contrib RecurrentPPO's default; the state doubles)")
    rnn_init: str = setting("zeros",
        "--rnn: the gate biases a new core starts from: zeros (CleanRL's) or chrono (each unit keeps its memory over "
        "1 to 31 steps at the start; --rnn's default on images)",
        "Chrono: Tallec & Ollivier 2018, the LSTM forget gate's (GRU update gate's) bias log(u), u ~ U[1, 31]. On the "
        "16-step screen cue 0.9 came at 26.6k steps against 57.9k; on CartPole without velocities, which needs the "
        "last steps rather than a long memory, seed 0 ended at 112.9 against 465.9 with zeros.")
    bptt_len: int = setting(0,
        "--rnn: the update replays each env's steps in sequences of this many (backprop through time within one); "
        "it divides T; 0 = T, each env's whole rollout one sequence",
        "A dependency longer than a sequence gets no gradient (a cue 48 steps before its answer needs more than 48). "
        "The sequences fill as many minibatches as the update has without --rnn, at most one per sequence.")
    model_name: str = setting("model-ppo1-defaults",
        "name of the run: its files live in checkpoint_dir/model_name/")
    checkpoint_dir: str = setting("checkpoints", "directory holding one sub-directory per run")
    asset_dir: str = setting("", "movie and plot write into asset_dir/model_name/; empty (the default): into "
                                 "the run's own directory, checkpoint_dir/model_name/")
    snapshot_interval: int = setting(0,
        "train: every N iterations rank 0 writes a grid of its envs' current screens to run_dir/snapshot.png "
        "(replaced atomically) and to TensorBoard, to watch long games; 0 = off")
    video_interval: int = setting(0,
        "train: every N iterations rank 0 records one evaluation game into run_dir/videos/ (the other"
        " ranks wait meanwhile); 0 = no videos")
    video_max_frames: int = setting(18_000,
        "train: a video is cut after this many emulator frames (60 per second of game)")
    eval_interval: int = setting(0,
        "train: every N iterations, and after the last, the policy plays --eval_episodes whole games on envs of "
        "its own, split over the ranks (progress.csv's eval_ columns, best.pt); 0 = off")
    eval_episodes: int = setting(10,
        "train: whole games per evaluation, as --mode play plays them (Procgen: on its unseen levels, and as "
        "many again on its training levels)")
    eval_greedy: bool = setting(False,
        "train: evaluation takes the most probable action (argmax) instead of sampling from the policy (the "
        "default, as --mode play)")
    eval_max_steps: int = setting(27_000,
        "train: an evaluation game is cut after this many agent steps and counted with its score so far "
        "(27,000 = Atari's 108,000-frame limit), so an env that never ends cannot stall training")
    wandb: bool = setting(False,
        "train: rank 0 also logs every progress row, config.json, the videos and snapshots to Weights & Biases; "
        "offline into run_dir/wandb/ unless W&B credentials or WANDB_MODE say otherwise (docs/usage.md)")
    wandb_project: str = setting("", "--wandb: the W&B project; empty: WANDB_PROJECT, else ppo1")
    wandb_entity: str = setting("", "--wandb: the W&B user or team; empty: WANDB_ENTITY, else your default entity")
    wandb_name: str = setting("", "--wandb: the W&B run's display name; empty: WANDB_NAME, else --model_name")
    wandb_group: str = setting("", "--wandb: a W&B group for related runs; empty: WANDB_RUN_GROUP, else none")
    wandb_tags: str = setting("", "--wandb: W&B tags, comma-separated; empty: WANDB_TAGS, else none")
    envs_per_rank: int = setting(1, "envs stepped together by each MPI rank (actors = ranks x envs_per_rank; "
                                      "--preset fast: 32 actors in all, 8 on PongNoFrameskip-v4, rounded up)")
    save_interval: int = setting(50, "iterations between checkpoints (one is always written at the end)")
    sync_check_interval: int = setting(10, "iterations between checks that all ranks hold identical parameters")
    num_threads: int = setting(0, "torch threads per rank; 0 = 1 for a feed-forward MLP, else the cores available "
                                  "divided by the ranks on the node")
    keep_checkpoints: int = setting(3, "numbered checkpoints to keep (latest.pt always points at the newest)")
    deterministic: bool = setting(False,
        "1 torch thread per rank and deterministic kernels, so a resumed run is bit-identical")
    preset: str = setting("paper",
        "hyperparameter family applied to every flag not given; without --preset, the env family's own (Atari and "
        "other image-observation envs: paper)",
        "Atari and other image-observation envs take paper, fast, cleanrl, baselines or vizdoom (the default of "
        "ViZDoom's ids); vector-observation envs mujoco (baselines' run_mujoco); procgen:<game> envs procgen "
        "(the Procgen paper's easy mode).")
    init: str = setting("normc",
        "weight initialisation: normc (baselines ppo1: Glorot-uniform convolutions, normc linears) or "
        "orthogonal (ppo2, CleanRL, SB3; with --model_type impala its features start ~20x larger)")
    frame_norm: str = setting("scale",
        "CNN input: scale (frames / 255, baselines) or center (frames / 255 minus the per-pixel mean of "
        "all ranks' frames so far, a running mean kept in the model)",
        "Centred, a background common to every pixel does not move all of a filter's weights together.")
    adv_norm: str = setting("batch",
        "standardise advantages over the rank's batch (baselines ppo1) or each minibatch (ppo2)")
    max_grad_norm: float = setting(0.0,
        "clip the global gradient norm to this after averaging over ranks; 0 = off")
    target_kl: float = setting(0.0,
        "end the iteration's remaining epochs once the approximate KL(pi_old || pi) of a minibatch, averaged "
        "over all ranks, exceeds this, checked before each minibatch's step; 0 = off (the paper)",
        "As SB3, which stops at 1.5 x its target_kl; CleanRL checks after each epoch. A minibatch's granularity, "
        "so one large step cannot run a whole epoch past the target. The estimator is SB3's and CleanRL's "
        "mean((r - 1) - log r); progress.csv's epochs column says how many epochs ran.")
    clip_vloss: bool = setting(False,
        "value loss as baselines ppo2 and CleanRL --clip-vloss: the larger of (V - R)^2 and (V_clipped "
        "- R)^2; off = the paper's plain (V - R)^2",
        "V_clipped = V_old + clip(V - V_old, -eps, eps), around the rollout's values at the iteration's clip "
        "parameter eps.")
    clip_reward: str = setting("auto",
        "training rewards: sign (-1, 0 or +1: DeepMind's Atari setting), none (the env's own) or auto (sign for "
        "Atari games, none for every other env)",
        "Applied before --reward_scale and --norm_reward. Episode scores are always the env's own.")
    reward_scale: float = setting(1.0,
        "training rewards are multiplied by this, after --clip_reward and before --norm_reward (e.g. 0.01 "
        "for a game that pays hundreds of points per event)")
    episode_life: bool = setting(True,
        "Atari: a lost life ends the agent's episode, as DeepMind's EpisodicLife (its value does not "
        "bootstrap past a death); --no-episode_life: only the game's end does. Play and movie always play "
        "whole games")
    max_episode_steps: int = setting(0,
        "envs other than Atari and Procgen: cut each episode after this many agent steps, as a time limit; 0 = "
        "only the env's own limit",
        "Training bootstraps from the value of its last observation; play and movie cut there too.")
    norm_reward: bool = setting(False,
        "divide rewards by the standard deviation of the actors' running discounted returns (all ranks' "
        "statistics), clipped to +-10; off = raw rewards",
        "As baselines VecNormalize and the Procgen paper. Atari clips the rewards' sign instead (--clip_reward).")
    num_levels: int = setting(0,
        "Procgen: levels to train on, from --start_level; 0 = every level. --mode play and movie play the "
        "levels after them (unseen), or every level when 0")
    start_level: int = setting(0, "Procgen: the first training level (the levels' seed)")
    distribution_mode: str = setting("easy",
        "Procgen: the games' variant: easy (the Procgen paper's easy mode), hard, extreme, memory or exploration")
    anneal_clip: bool = setting(True,
        "anneal the clip parameter linearly with alpha (the paper) or keep it constant")
    anneal_ent: bool = setting(False,
        "anneal the entropy coefficient c2 linearly with alpha, to 0 at the schedule's end, or keep it "
        "constant (the paper)")
    watchdog_timeout: float = setting(-1.0,
        "train: seconds without a finished iteration after which every rank prints where it waited and ends "
        "the job (exit status 3); -1 = max(10 x median iteration time, 300 s), 0 = off",
        "It ends a job that a lost host or a rank stuck in a collective would hold up for ever.")
    env_restarts: int = setting(5,
        "train: times a rank may make an env anew when its step raises (an engine that died), in the run "
        "or in --env_restart_window iterations; one more stops the run (exit status 2); 0 = the first")
    env_restart_window: int = setting(0,
        "train: count --env_restarts in the last this many iterations (a rate, for runs of days); 0 = in "
        "the whole run, across resumes")
    env_step_timeout: float = setting(120.0,
        "train: seconds an env's step or reset may run before the processes that env started (an engine, an "
        "emulator server) are killed, so the call fails and the env is made anew (--env_restarts); 0 = off")
    device: str = setting("auto",
        "auto (a GPU when torch sees one, else the CPU), cpu, cuda or cuda:N; under mpirun each rank "
        "takes GPU local_rank %% GPUs on its node, cuda:N pins GPU N; may differ on resume")
    compile: bool = setting(False,
        "torch.compile each minibatch's forward, loss and backward as one graph (pays on small networks; "
        "needs a C compiler at run time; falls back to eager with a notice if compiling fails)")
    precision: str = setting("fp32",
        "the update's CNN torso: fp32, bf16 (torch.autocast; where every rank's device has it in hardware) or auto "
        "(bf16 where every rank's device has it, else fp32; --preset fast's); may differ on resume",
        "bf16 needs AVX512-BF16 or AMX-BF16 on a CPU, bfloat16 support on a GPU (refused elsewhere). bf16: the torso's convolutions in bfloat16 in the update's forward and backward, and "
        "in the pass that takes pi_old for it, so its first ratio is exactly 1; the torso's hidden layer, heads, "
        "loss, Adam and the rollouts stay float32. auto: bf16 where every rank's device has it in hardware and the "
        "policy has a CNN, else fp32; config.json holds the choice.")

    # ------------------------------------------------------------------ derived
    @property
    def run_dir(self) -> str:
        """Directory of this run: checkpoints, config.json, progress.csv, episode logs."""
        return os.path.join(self.checkpoint_dir, self.model_name)

    def asset_path(self, name: str) -> str:
        """Where movie and plot write for `name`: asset_dir/name, or checkpoint_dir/name (the run's own
        directory) when asset_dir is empty, as by default."""
        return os.path.join(self.asset_dir or self.checkpoint_dir, name)

    def clip_param(self, alpha: float) -> float:
        """The clip parameter at annealing factor alpha."""
        return self.epsilon * alpha if self.anneal_clip else self.epsilon

    def sign_rewards(self, family) -> bool:
        """Whether training clips the rewards of an env of `family` (a ppo1.envs.Family) to their sign."""
        return self.clip_reward == "sign" or (self.clip_reward == "auto" and family.sign_rewards)

    def seq_len(self) -> int:
        """The steps of a sequence the update replays with --rnn: --bptt_len, or 0: T, each env's whole rollout (the
        longest a gradient can reach back: a cue seen 48 steps before its answer needs sequences longer than 48);
        1 without --rnn (no sequences)."""
        if self.rnn == "none":
            return 1
        return self.bptt_len or self.timesteps_per_actorbatch

    def ent_coef_at(self, alpha: float) -> float:
        """The entropy coefficient c2 at annealing factor alpha."""
        return self.ent_coef * alpha if self.anneal_ent else self.ent_coef

    def steps_per_iteration(self, n_ranks: int) -> int:
        """Agent steps collected per iteration over all actors."""
        return self.timesteps_per_actorbatch * self.envs_per_rank * n_ranks

    def num_iterations(self, n_ranks: int) -> int:
        """Whole iterations that fit in env_steps (training never overruns the schedule)."""
        return self.env_steps // self.steps_per_iteration(n_ranks)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        """Every setting by its name, flat (as the attributes and flags)."""
        return dataclasses.asdict(self)

    def to_saved(self) -> dict:
        """What config.json and a checkpoint's `config` hold: each family's settings in its section (SECTIONS)."""
        flat = self.to_dict()
        sectioned = {name for names in SECTIONS.values() for name in names}
        return {**{k: v for k, v in flat.items() if k not in sectioned},
                **{section: {k: flat[k] for k in names} for section, names in SECTIONS.items()}}

    def to_json(self) -> str:
        return json.dumps(self.to_saved(), indent=2, sort_keys=True)

    @staticmethod
    def flatten(data: dict) -> dict:
        """A saved config (to_saved's dict, or an older file's flat one) as flat settings, without LEGACY_KEYS.
        Raises PPO1Error for a section that is not an object, or a setting given twice."""
        flat = {k: v for k, v in without_legacy_keys(data).items() if k not in SECTIONS}
        for section in SECTIONS:
            if section in data:
                if not isinstance(data[section], dict):
                    raise PPO1Error(f"config section {section!r} is {data[section]!r}, not an object")
                twice = sorted(set(flat) & set(data[section]))
                if twice:
                    raise PPO1Error(f"config has {twice[0]!r} both at the top level and in section {section!r}")
                flat.update(data[section])
        return flat

    @classmethod
    def field_names(cls) -> frozenset[str]:
        """The names of every setting (the run_atari flags without --, the keys of config.json)."""
        return frozenset(f.name for f in fields(cls))

    @classmethod
    def for_preset(cls, preset: str | None = None, n_ranks: int = 1, spares=None, **fields) -> "Config":
        """The Config that `python -m run_atari --preset PRESET --FIELD VALUE ...` builds for a new run on
        n_ranks ranks: the preset's values (default: the env family's; ppo1.resolve.preset_values) for every field
        not given. Validated. spares (ppo1.envs.Spares): where an env made to learn the env's family is kept for the
        run to take."""
        given = {**({"preset": preset} if preset is not None else {}), **fields}
        unknown = sorted(set(given) - cls.field_names())
        if unknown:
            raise PPO1Error(f"{unknown[0]!r} is not a setting (the settings are run_atari's flags without --)")
        values = preset_values(given, n_ranks, spares, defaults=cls)
        return dataclasses.replace(cls(), **{**values, **given}).validate()

    @classmethod
    def from_dict(cls, data: dict) -> "Config":
        """The Config of a saved dict (sectioned or flat); PPO1Error for unknown keys."""
        data = cls.flatten(data)
        unknown = sorted(set(data) - cls.field_names())
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
