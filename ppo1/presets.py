"""The hyperparameter families of `--preset`, each with its source and what differs from it.

A preset gives a value to every flag not given on the command line; a field it does not name keeps
the Config default (the PPO paper's Table 5). Which preset a run takes, and what it sets by the game and the
actors: ppo1.resolve. How `fast` was found: docs/history.md.
"""
from __future__ import annotations


# Vector observations (classic control, MuJoCo): baselines' run_mujoco.py.
VECTOR_DEFAULTS = {
    "model_type": "mlp", "env_steps": 1_000_000, "timesteps_per_actorbatch": 2048, "optim_epochs": 10,
    "optim_stepsize": 3e-4, "optim_batchsize": 64, "epsilon": 0.2, "ent_coef": 0.0, "gamma": 0.99, "lam": 0.95,
}

# Vector observations with --rnn (their default then): rl-zoo's ppo_lstm settings for CartPoleNoVel-v1
# (sb3-contrib RecurrentPPO): 8 envs of T 32 (one chunk each), 20 epochs of one 256-sample minibatch, step
# size 1e-3 and clip 0.2 annealed, no entropy bonus, gamma 0.98, lambda 0.8, an LSTM of 64, observations
# normalised (VecNormalize with norm_reward False: the rewards stay the env's), the critic's own LSTM
# (enable_critic_lstm), and what it keeps of SB3's defaults: c1 0.5, gradient-norm clip 0.5, advantages
# standardised per minibatch. Its actors are ranks x
# --envs_per_rank (RECURRENT_VECTOR_ACTORS, rounded up).
RECURRENT_VECTOR = {
    "model_type": "mlp", "env_steps": 1_000_000, "timesteps_per_actorbatch": 32, "optim_epochs": 20,
    "optim_stepsize": 1e-3, "optim_batchsize": 32, "epsilon": 0.2, "ent_coef": 0.0, "gamma": 0.98, "lam": 0.8,
    "rnn_size": 64, "rnn_critic": "separate", "vf_coef": 0.5, "max_grad_norm": 0.5, "adv_norm": "minibatch",
}
RECURRENT_VECTOR_ACTORS = 8

# --rnn over the preset of a family of images (Atari, any image env, ViZDoom, stable-retro): CleanRL
# ppo_atari_lstm.py's settings where they differ from the feed-forward paper run: one frame (the core remembers, not a
# stack), 8 actors, 4 epochs, c1 0.5, gradient-norm clip 0.5; with --bptt_len 0 (paper's and the others') each env's
# whole rollout is one sequence (config.seq_len); fast and vizdoom name sequences of 32 (more minibatches). The core
# keeps --rnn_size's 256 units (CleanRL: 128, 2.7x the steps per second here, but one seed of three short of the
# 48-step cue at 200k: docs/memory.md). A setting the preset names itself stays the preset's (fast: its actors, c1
# 0.25); flags the user gives win over both. Chrono's gate biases (--rnn_init chrono, cores.chrono_init_) on images
# only: vector envs keep zeros (CartPole without velocities needs the last few steps and learned far less with
# chrono's).
RECURRENT_IMAGE = {"frame_stack": 1, "optim_epochs": 4, "vf_coef": 0.5, "max_grad_norm": 0.5, "rnn_init": "chrono"}
RECURRENT_IMAGE_ACTORS = 8

# CleanRL ppo_atari.py (= baselines ppo2's Atari settings): Nature CNN, 4 epochs, orthogonal init, c1 0.25
# (their vf_coef 0.5 times their 0.5 x squared error), gradient-norm clip 0.5, per-minibatch advantage
# standardisation, clip 0.1 constant, the value loss clipped around the rollout's values (--clip-vloss).
CLEANRL = {"model_type": "large", "optim_epochs": 4, "init": "orthogonal", "vf_coef": 0.25,
           "max_grad_norm": 0.5, "adv_norm": "minibatch", "anneal_clip": False, "clip_vloss": True}

PRESETS: dict[str, dict] = {
    # The PPO paper, Table 5; frames centred (the paper does not say how frames enter the network).
    "paper": {"frame_norm": "center"},
    # baselines ppo1's run_atari.py (lucaslingle/ppo1 "model-ppo1-defaults").
    "baselines": {"model_type": "large", "timesteps_per_actorbatch": 256, "optim_epochs": 4,
                  "optim_stepsize": 1e-3, "epsilon": 0.2, "optim_batchsize": 64},
    "cleanrl": CLEANRL,
    # Fewest minutes on a few CPU cores. Its env_steps and actors depend on the game (FAST_GAMES), its
    # optim_batchsize on the actors (FAST_MINIBATCH).
    # --precision auto: the torso's convolutions in bf16 where every rank's device has it (Pong 1.1M and Breakout
    # 2M over 3 seeds each within fp32's range: docs/benchmarks.md).
    # With --rnn, sequences of 32 steps: each minibatch then mixes chunks of several envs (Pong 1.1M with an LSTM:
    # +20.25; with each env's whole rollout one sequence, a minibatch is one env's 128 steps per rank: +14.2).
    "fast": {**CLEANRL, "clip_vloss": False, "model_type": "small", "optim_stepsize": 1.25e-3,
             "lr_warmup": 100_000, "frame_norm": "center", "precision": "auto", "bptt_len": 32},
    # ViZDoom's ids' default (measured on VizdoomBasic-v1: docs/benchmarks.md): the paper's settings with 10
    # epochs of minibatches of 4 samples per actor (as many gradient steps per sample as Stable-Baselines3's
    # ViZDoom example, 10 epochs of 64; the paper's 3 epochs of 32 barely move in 100k steps), rewards
    # normalised (its scenarios pay 1 to 100 per event: raw, the value loss swamps the shared torso).
    # With --rnn, sequences of 32 steps: 16 minibatches of a chunk per rank and epoch (DefendCenter with a GRU,
    # 300k: 18.97; each env's whole rollout one sequence, 4 minibatches of 128 steps: 17.05; docs/memory.md).
    "vizdoom": {"frame_norm": "center", "optim_epochs": 10, "optim_batchsize": 4, "norm_reward": True,
                "bptt_len": 32},
}

# The Procgen paper's PPO (Cobbe et al. 2020; baselines ppo2 in train-procgen), easy mode: IMPALA CNN,
# 200 training levels, T 256, 3 epochs of 8 minibatches (32 samples per actor x 64 actors), lr 5e-4 and
# clip 0.2 constant, value loss clipped at 0.2 (ppo2), c1 0.25 (ppo2's 0.5 x 0.5 x squared error), entropy
# 0.01, gamma 0.999, lambda 0.95, gradient-norm clip 0.5, per-minibatch standardisation, rewards scaled by
# the running std of the discounted return (VecNormalize), 25M steps. Init normc (Glorot-uniform
# convolutions, TensorFlow's default in the paper's IMPALA CNN). Its 64 envs are ranks x --envs_per_rank.
PROCGEN_PRESET = {
    "model_type": "impala", "init": "normc", "num_levels": 200, "start_level": 0, "distribution_mode": "easy",
    "timesteps_per_actorbatch": 256, "optim_epochs": 3, "optim_batchsize": 32, "optim_stepsize": 5e-4,
    "anneal_lr": False, "epsilon": 0.2, "anneal_clip": False, "ent_coef": 0.01, "vf_coef": 0.25, "gamma": 0.999,
    "lam": 0.95, "max_grad_norm": 0.5, "adv_norm": "minibatch", "norm_reward": True, "clip_vloss": True,
    "env_steps": 25_000_000,
}

# `fast` by env id: the agent steps it trains for (over which the step size anneals) and its actors
# (ranks x envs_per_rank), each unless given: Pong v4 is won by 8 actors in 1.1M steps; every other game
# trains 32 actors for 2M.
FAST_GAMES = {"PongNoFrameskip-v4": {"env_steps": 1_100_000, "actors": 8}}
FAST_DEFAULT = {"env_steps": 2_000_000, "actors": 32}
# `fast`'s minibatch in samples (optim_batchsize per actor x actors) whatever the actors, so that 32
# actors take as many gradient steps per agent step as 8.
FAST_MINIBATCH = 256

# One line per preset for --help and docs/flags.md: its source, and exactly what differs from it.
PRESET_HELP = {
    "paper": "the default of Atari games and other image-observation envs: the PPO paper's Table 5 (small CNN, "
             "T 128, 3 epochs, minibatch 32 per actor, step size 2.5e-4 and clip 0.1 annealed to 0, c1 1, c2 0.01, advantages standardised per batch); differs: frames "
             "centred (--frame_norm center; the paper does not say, baselines divides by 255)",
    "baselines": "baselines ppo1's run_atari.py (Nature CNN, T 256, 4 epochs, minibatch 64 per actor, step size "
                 "1e-3 and clip 0.2 annealed, c1 1); as its source",
    "cleanrl": "CleanRL ppo_atari.py (baselines ppo2's Atari settings: Nature CNN, 4 epochs, orthogonal init, "
               "c1 0.25, gradient clipping 0.5, per-minibatch advantages, clip 0.1 constant, value loss "
               "clipped); differs: its 8 envs are ranks x --envs_per_rank here",
    "fast": "fewest minutes on a few CPU cores, from cleanrl's settings; differs from them: small CNN, step size "
            "1.25e-3 warmed up over 100k steps, frames centred, value loss not clipped, minibatches of 256 "
            "samples, --precision auto (the convolutions in bf16 where the hardware has it), with --rnn sequences of "
            "32 steps; PongNoFrameskip-v4: 8 "
            "actors for 1.1M agent steps, every other game: 32 actors for 2M (envs_per_rank = actors / ranks, "
            "rounded up; see docs/history.md)",
    "vizdoom": "ViZDoom's ids (their default): the paper's settings with 10 epochs, minibatches of 4 samples "
               "per actor and --norm_reward, with --rnn sequences of 32 steps; differs from paper: that (measured on "
               "VizdoomBasic-v1 and, with --rnn, VizdoomDefendCenter-v1)",
    "mujoco": "vector-observation envs (their default without --rnn): baselines' run_mujoco.py (MLP 2x64 tanh, "
              "T 2048, 10 epochs, step size 3e-4, clip 0.2); as its source",
    "ppo_lstm": "vector-observation envs with --rnn (their default then): rl-zoo's ppo_lstm settings for "
                "CartPoleNoVel (8 envs, T 32, 20 epochs of one 256-sample minibatch, step size 1e-3 and clip "
                "0.2 annealed, c2 0, gamma 0.98, lambda 0.8, an LSTM of 64 for the policy and one for the value "
                "(--rnn_critic separate); SB3's c1 0.5, gradient clipping 0.5, per-minibatch advantages); "
                "differs: its 8 envs are ranks x --envs_per_rank here, its heads are 2x64 tanh (rl-zoo: 1x64 ReLU)",
    "procgen": "procgen:<game> envs (their default and only preset): the Procgen paper's PPO, easy mode (IMPALA "
               "CNN, 200 levels, T 256, 3 epochs, step size 5e-4, clip 0.2 constant, value loss clipped, gamma "
               "0.999, rewards normalised, 25M steps); differs: its 64 envs are ranks x --envs_per_rank here",
}


def recurrent_overlay(preset: dict, n_ranks: int) -> dict:
    """--rnn on images: RECURRENT_IMAGE and RECURRENT_IMAGE_ACTORS's envs per rank (rounded up) for the settings
    `preset` (a preset's values) leaves unset."""
    overlay = {**RECURRENT_IMAGE, "envs_per_rank": -(-RECURRENT_IMAGE_ACTORS // max(1, n_ranks))}
    return {k: v for k, v in overlay.items() if k not in preset}


def fast_budget(env_name: str) -> int:
    """The agent steps `--preset fast` trains `env_name` for when --env_steps is not given."""
    return FAST_GAMES.get(env_name, FAST_DEFAULT)["env_steps"]


def fast_envs_per_rank(n_ranks: int, env_name: str) -> int:
    """The envs per rank that give `--preset fast` its actors for `env_name` on n_ranks ranks (rounded up)."""
    return -(-FAST_GAMES.get(env_name, FAST_DEFAULT)["actors"] // max(1, n_ranks))


def fast_optim_batchsize(actors: int, horizon: int, envs_per_rank: int = 1) -> int:
    """The samples per actor that make `--preset fast`'s minibatch FAST_MINIBATCH samples on `actors` actors
    (the nearest whole number), at least 2 samples in a rank's minibatch of envs_per_rank actors (which
    standardises its advantages), at most the horizon T: with fewer than FAST_MINIBATCH samples an
    iteration (1 actor: 128), one minibatch of all of them."""
    return min(horizon, max(round(FAST_MINIBATCH / actors), -(-2 // envs_per_rank)))


# The presets each env family takes are its Family's (ppo1.envs.family): Atari and other image-observation
# envs take the Atari presets (the same CNNs on stacks of 84x84 gray frames), vector envs mujoco and ppo_lstm,
# Procgen its own.
VECTOR_PRESETS = {"mujoco": VECTOR_DEFAULTS, "ppo_lstm": RECURRENT_VECTOR}
# Every preset by name, with the values it sets (ppo1.resolve.preset_values adds those that depend on the game and
# the actors).
ALL_PRESETS = {**PRESETS, **VECTOR_PRESETS, "procgen": PROCGEN_PRESET}
# The flags of the image preprocessing (the `pixels` family's): refused for a family that takes none.
FRAME_FLAGS = ("frame_skip", "frame_size", "frame_upscale", "frame_gray", "frame_stack", "obs_key", "obs_vectors",
               "frame_codes")
