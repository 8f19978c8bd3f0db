"""ppo1 beside a reference PPO (Stable-Baselines3) at the same hyperparameters, on the same game.

    python -m bench.reference --preset paper --steps 1e6                # both, one after the other
    python -m bench.reference --preset paper --steps 1e6 --only ppo1    # one side (reuse the other's CSV)
    python -m bench.reference --preset paper --set init=orthogonal --tag orth   # an A/B variant
    python -m bench.reference --preset ppo_lstm --env_name bench.cartpole_novel:make_env --set rnn=lstm \
        --set env_steps=100000 --steps 1e5 --out assets/reference/cartpole-novel-lstm
                                                       # --rnn: sb3-contrib's RecurrentPPO at rl-zoo's settings
    python -m bench.reference --preset vizdoom --env_name VizdoomBasic-v1 --steps 1e5 --set env_steps=100000 \
        --only sb3 --ppo1_run assets/vizdoom/basic-vizdoom --out assets/reference/vizdoom-basic
                                                       # SB3 beside a ppo1 run that bench.learning made
    python -m bench.reference --env_name bench.cue:screen --set env_kwargs='{"delay": 16}' --set rnn=lstm \
        --steps 1e5 --only sb3 --sb3_defaults --ppo1_run checkpoints/bench-cue-screen-16 --out assets/reference/cue
                                                       # RecurrentPPO at its own defaults beside a ppo1 --rnn run
    python -m bench.reference --preset ppo_lstm --env_name tests.maskenv:make --set env_kwargs='{"mode": "method"}' \
        --set env_steps=100000 --steps 1e5 --out assets/reference/maskenv-method
                                                       # an env that masks its actions: sb3-contrib's MaskablePPO

ppo1 runs as a user runs it (`mpirun -np 2 python -m run_atari --preset P --envs_per_rank 4`, 8 actors);
SB3 runs PPO with 8 envs (DummyVecEnv: on an Atari game its DeepMind `AtariWrapper`; on another env with
image observations, such as ViZDoom, ppo1's own preprocessing of the image alone, and VecNormalize's reward
scaling where the preset has --norm_reward) and the same settings read from the
same resolved Config: ppo1's own CNN torso as the features extractor (pi and V heads on it, shared),
T, epochs, global minibatch, lr and clip schedules annealed over the preset's env_steps (so a 1M-step
run follows the first tenth of a 10M schedule, as the published curves do), c1, c2, Adam epsilon,
the same initialisation, gradient clipping only when the preset has it. SB3 standardises advantages
per minibatch only; value clipping stays off on both sides.

A vector-observation env (--model_type mlp) that masks its actions, as sb3-contrib's MaskablePPO reads a mask
(a Dict observation with an `action_mask` entry, or an `action_masks()` method; action_mask_kind makes one env
to see, without --rnn), runs MaskablePPO on SB3's side instead (run_sb3_maskable): the same settings from the
same Config, baselines' MLP (separate 2x64 tanh pi and V networks, normc initialisation), observations
normalised (VecNormalize, clipped to +-5 as ppo1's running mean/std), both sides trained for the same whole
iterations of T x 8 steps. With --rnn (run_sb3_recurrent) the mask is not used.

Writes under --out (default assets/reference/<preset>[-tag]/): config.json (the resolved settings; with
--only sb3: sb3-config.json, so a ppo1 run's record stays), ppo1.csv and sb3.csv (agent steps,
mean return of the last 100 real games), curves.png with both curves and the published reference
points (shared/REFERENCE.md) as markers, and summary.txt (a line per side: steps, minutes, steps per second,
return; ppo1's minutes are its whole mpirun, start-up included, its steps per second those of its training
clock; SB3's both of its learn() alone).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import json
import os
import subprocess
import sys
import time
from collections import deque

from ppo1.errors import PPO1Error  # light: ppo1/__init__.py imports nothing

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACTORS = 8

# Published Pong curves (agent steps -> mean return of the last 100 games), all annealed over 10M:
# PPO paper (3 seeds: min, max), baselines ppo2 (mean of 6), CleanRL ppo_atari (3 seeds).
PUBLISHED = {
    "PongNoFrameskip-v4": {
        "PPO paper (range of 3 seeds)": {5e5: (-20, -10), 1e6: (-16, -2), 2e6: (7, 17), 3e6: (18, 20)},
        "baselines ppo2": {5e5: -17, 1e6: -2, 2e6: 14, 3e6: 17.7},
        "CleanRL ppo_atari": {5e5: -19.4, 1e6: -8.8, 2e6: 12.7, 3e6: 17.0},
    },
    "BreakoutNoFrameskip-v4": {
        "PPO paper (range of 3 seeds)": {1e6: (23, 28), 2e6: (33, 47), 3e6: (60, 84)},
        "baselines ppo2": {1e6: 22, 2e6: 48, 3e6: 99},
        "CleanRL ppo_atari": {1e6: 20, 2e6: 49, 3e6: 102},
    },
}


def resolve_config(preset: str, env_name: str, overrides: dict):
    """The Config ppo1 builds for `--preset preset` plus the given overrides on ACTORS actors."""
    from ppo1.config import Config
    from ppo1.resolve import preset_values

    unknown = sorted(set(overrides) - Config.field_names())
    if unknown:
        raise PPO1Error(f"--set {unknown[0]}=...: no such setting (the names are run_atari's flags without --)")
    given = {"preset": preset, "env_name": env_name, **overrides}
    at = {"envs_per_rank": ACTORS}  # the preset as it is for this benchmark's actors (fast sets its minibatch by them)
    return dataclasses.replace(Config(), **{**preset_values({**given, **at}, defaults=Config), **given}).validate()


def _parse_set(items: list[str]) -> dict:
    """--set name=value pairs (JSON values, else strings; the text as given for a setting that is a string,
    such as env_kwargs) -> dict."""
    from ppo1.config import Config

    out = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            out[name] = value if isinstance(getattr(Config, name, None), str) else json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
    return out


def _mpirun(np_: int) -> list[str]:
    from bench.learning import _mpirun as find
    return find(np_)


def run_ppo1(config, steps: int, seed: int, out: str, ranks: int = 2) -> dict:
    """Train ppo1 under mpirun for `steps` agent steps (the schedule still runs over config.env_steps)."""
    run_dir = os.path.join(out, "ppo1-run")
    iterations = steps // (config.timesteps_per_actorbatch * ACTORS)
    from ppo1.config import Config
    from ppo1.resolve import preset_values
    preset = set(preset_values({"preset": config.preset, "env_name": config.env_name, "env_kwargs": config.env_kwargs,
                                "rnn": config.rnn}, defaults=Config))
    flags = []
    for f in dataclasses.fields(config):
        if f.name in ("checkpoint_dir", "model_name", "envs_per_rank", "seed", "asset_dir"):
            continue
        if config.rnn == "none" and f.name in ("rnn_size", "rnn_critic"):
            continue  # a recurrent core's: ppo1 refuses --rnn_critic separate (ppo_lstm's) without --rnn
        value = getattr(config, f.name)
        if f.name not in preset and value == getattr(Config, f.name):
            continue  # the default: left out, as a family refuses flags it does not take (--frame_size on vectors)
        if isinstance(value, bool):
            flags.append(f"--{f.name}" if value else f"--no-{f.name}")
        else:
            flags += [f"--{f.name}", str(value)]
    cmd = [*_mpirun(ranks), sys.executable, "-m", "run_atari", *flags, "--envs_per_rank", str(ACTORS // ranks),
           "--seed", str(seed), "--checkpoint_dir", out, "--model_name", "ppo1-run", "--fresh",
           "--stop_after_iterations", str(iterations), "--save_interval", "1000000"]
    print("bench.reference:", " ".join(cmd), flush=True)
    start = time.time()
    code = subprocess.call(cmd, cwd=REPO)
    minutes = (time.time() - start) / 60
    if code != 0:
        raise SystemExit(f"bench.reference: ppo1 exited with status {code}")
    rows = _progress_curve(os.path.join(run_dir, "progress.csv"))
    _write_curve(os.path.join(out, "ppo1.csv"), rows)
    with open(os.path.join(run_dir, "progress.csv")) as f:  # the training's own clock, without mpirun's start-up
        seconds = float(list(csv.DictReader(f))[-1]["time_elapsed"])
    return {"steps": rows[-1][0] if rows else 0, "minutes": minutes, "ret100": rows[-1][1] if rows else float("nan"),
            "train_minutes": seconds / 60}


def run_sb3(config, steps: int, seed: int, out: str, vec: str = "dummy") -> dict:
    """Train Stable-Baselines3 PPO with the same settings; log the last-100 mean of real games."""
    import ale_py
    import gymnasium
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    from ppo1.device import cpu_count
    from ppo1.policies import CnnPolicy
    from ppo1.torsos import normc_

    gymnasium.register_envs(ale_py)
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    torch.set_num_threads(cpu_count())

    class Torso(BaseFeaturesExtractor):
        """ppo1's CNN torso (small or large), initialised as ppo1 initialises it."""

        def __init__(self, observation_space, model_type: str, init: str):
            net = CnnPolicy(6, model_type, init=init, obs_shape=observation_space.shape)
            super().__init__(observation_space, features_dim=256 if model_type == "small" else 512)
            self.torso = net.torso

        def forward(self, obs):
            return self.torso(obs)

    def schedule(start: float, anneal: bool = True):
        return _schedule(start, steps / config.env_steps, anneal)

    env = _sb3_envs(config, seed, vec)
    orth = config.init == "orthogonal"
    model = PPO("CnnPolicy", env, n_steps=config.timesteps_per_actorbatch, n_epochs=config.optim_epochs,
                batch_size=config.optim_batchsize * ACTORS, learning_rate=schedule(config.optim_stepsize),
                clip_range=schedule(config.epsilon, config.anneal_clip), gamma=config.gamma,
                gae_lambda=config.lam, ent_coef=config.ent_coef, vf_coef=config.vf_coef,
                max_grad_norm=config.max_grad_norm or 1e10, normalize_advantage=True, seed=seed,
                device="cpu", verbose=0,
                policy_kwargs={"features_extractor_class": Torso, "net_arch": [], "ortho_init": orth,
                               "share_features_extractor": True,
                               "features_extractor_kwargs": {"model_type": config.model_type, "init": config.init},
                               "optimizer_kwargs": {"eps": config.adam_epsilon}})
    if not orth:  # ppo1's normc heads (SB3 would keep torch's default Linear init)
        normc_(model.policy.action_net.weight, 0.01)
        normc_(model.policy.value_net.weight, 1.0)
        torch.nn.init.zeros_(model.policy.action_net.bias)
        torch.nn.init.zeros_(model.policy.value_net.bias)

    return _learn_logged(model, env, steps, out, report_every=50)


def run_sb3_recurrent(config, steps: int, seed: int, out: str) -> dict:
    """sb3-contrib's RecurrentPPO at rl-zoo's ppo_lstm settings for CartPoleNoVel-v1 (MlpLstmPolicy, LSTM 64 for
    the actor and one for the critic, ReLU heads of 64, 8 envs of T 32, 20 epochs of batch 256, step size 1e-3
    and clip 0.2 annealed over its 100k steps, gamma 0.98, lambda 0.8, c2 0, observations normalised), on
    `config.env_name`'s env; logs the last-100 mean of its games as run_sb3."""
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from ppo1.device import cpu_count
    from ppo1.envs.ref import resolve

    torch.set_num_threads(cpu_count())
    ref = resolve(config.env_name, config.env_kwargs)
    env = VecNormalize(make_vec_env(lambda: ref.make(None), n_envs=ACTORS, seed=seed), norm_obs=True,
                       norm_reward=False)

    def linear(start: float):
        return lambda progress_remaining: start * progress_remaining
    model = RecurrentPPO("MlpLstmPolicy", env, n_steps=32, batch_size=256, n_epochs=20, learning_rate=linear(1e-3),
                         clip_range=linear(0.2), gamma=0.98, gae_lambda=0.8, ent_coef=0.0, seed=seed, device="cpu",
                         verbose=0, policy_kwargs={"ortho_init": False, "activation_fn": torch.nn.ReLU,
                                                   "lstm_hidden_size": 64, "enable_critic_lstm": True,
                                                   "net_arch": {"pi": [64], "vf": [64]}})
    return _learn_logged(model, env, steps, out)


def run_sb3_recurrent_defaults(config, steps: int, seed: int, out: str) -> dict:
    """sb3-contrib's RecurrentPPO with its own defaults (n_steps 128, batch 128, 10 epochs, step size 3e-4, clip
    0.2, gamma 0.99, lambda 0.95, c1 0.5, c2 0, gradient clip 0.5, an LSTM of 256 for the actor and one for the
    critic) on ACTORS envs of `config.env_name`: MlpLstmPolicy on vector observations (as they come: its defaults
    normalise nothing), CnnLstmPolicy on images with ppo1's small CNN as its features extractor (its NatureCNN
    needs 36 px; frames / 255 as its default), ppo1's image preprocessing (_sb3_envs; --frame_stack as the config
    says). What a user of sb3-contrib gets without tuning; logs the last-100 mean of its games as run_sb3."""
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, FlattenExtractor

    from ppo1.device import cpu_count
    from ppo1.envs.ref import resolve
    from ppo1.torsos import cnn_torso

    torch.set_num_threads(cpu_count())
    if config.model_type == "mlp":
        class Flatten(FlattenExtractor):
            """SB3's own FlattenExtractor (a MultiDiscrete observation one-hot per entry) with its size an int:
            for MultiDiscrete it comes as a numpy integer, which torch's LSTM refuses (POPGym's CountRecall)."""

            def __init__(self, observation_space):
                super().__init__(observation_space)
                self._features_dim = int(self._features_dim)

        ref = resolve(config.env_name, config.env_kwargs)
        env, policy = make_vec_env(lambda: ref.make(None), n_envs=ACTORS, seed=seed), "MlpLstmPolicy"
        kwargs = {"policy_kwargs": {"features_extractor_class": Flatten}}
    else:
        class Torso(BaseFeaturesExtractor):
            """ppo1's small CNN (any image of 20 px or more)."""

            def __init__(self, observation_space):
                torso, features = cnn_torso("small", observation_space.shape)
                super().__init__(observation_space, features_dim=features)
                self.torso = torso

            def forward(self, obs):
                return self.torso(obs)

        env, policy = _sb3_envs(config, seed), "CnnLstmPolicy"
        kwargs = {"policy_kwargs": {"features_extractor_class": Torso}}
    model = RecurrentPPO(policy, env, seed=seed, device="cpu", verbose=0, **kwargs)
    return _learn_logged(model, env, steps, out)


def action_mask_kind(config) -> str | None:
    """How `config.env_name`'s env gives its valid actions, as ppo1 (ppo1.envs.masks.ActionMasks) and MaskablePPO
    read them: "dict" (a Dict observation with an `action_mask` entry), "method" (an `action_masks()` method), or
    None. Makes one env."""
    from ppo1.envs.ref import resolve
    from ppo1.envs.masks import ActionMasks

    env = resolve(config.env_name, config.env_kwargs).make(None)
    try:
        masks = ActionMasks.of(config.env_name, env)
    finally:
        env.close()
    return None if masks is None else "method" if masks.method else "dict"


def run_sb3_maskable(config, steps: int, seed: int, out: str) -> dict:
    """sb3-contrib's MaskablePPO on an env that masks its actions (action_mask_kind), with the settings ppo1
    runs: 8 envs (DummyVecEnv) of T steps, the epochs, the global minibatch (optim_batchsize per actor x 8),
    step size and clip annealed over config.env_steps as run_sb3's, gamma, lambda, c1, c2, Adam epsilon,
    gradient clipping only where the preset has it; baselines' mlp_policy (separate 2x64 tanh pi and V networks,
    normc weights and zero biases as ppo1's MlpPolicy) on observations normalised by VecNormalize (clipped to
    +-5, as ppo1's). MlpPolicy for a Box observation with `action_masks()`, MultiInputPolicy for a Dict one
    (its Box entries normalised), whose `action_mask` entry an ActionMasker-like wrapper (DictMask) hands to
    MaskablePPO and takes out of the policy's input, as ppo1 does. `steps` is rounded down to whole iterations
    of T x 8, as run_ppo1 does, so both sides train as many steps. Logs the last-100 mean of its games as
    run_sb3."""
    import gymnasium
    import numpy as np
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from ppo1.device import cpu_count
    from ppo1.envs.ref import resolve
    from ppo1.envs.masks import without_mask
    from ppo1.torsos import normc_

    kind = action_mask_kind(config)
    if kind is None:
        raise PPO1Error(f"bench.reference: {config.env_name} gives no action mask (a Dict observation's "
                        "action_mask entry or an action_masks() method) for MaskablePPO")
    torch.set_num_threads(cpu_count())

    class DictMask(gymnasium.Wrapper):
        """The last observation's `action_mask` entry as `action_masks()`, which MaskablePPO calls (through the
        vec env's env_method) before each step (after an episode's end DummyVecEnv has reset the env, so the
        mask is the next episode's first), and the observation without that entry, as ppo1's network sees it
        (its vector holds every entry but the mask)."""

        def __init__(self, env):
            super().__init__(env)
            self.observation_space = without_mask(env.observation_space)

        def _split(self, obs: dict) -> dict:
            self.mask = obs["action_mask"]
            return {k: v for k, v in obs.items() if k != "action_mask"}

        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            return self._split(obs), info

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            return self._split(obs), reward, terminated, truncated, info

        def action_masks(self) -> np.ndarray:
            return np.asarray(self.mask, bool)

    ref = resolve(config.env_name, config.env_kwargs)
    env = make_vec_env(lambda: ref.make(None), n_envs=ACTORS, seed=seed,
                       wrapper_class=DictMask if kind == "dict" else None)
    space = env.observation_space
    boxes = ([k for k, s in space.spaces.items() if isinstance(s, gymnasium.spaces.Box)]
             if isinstance(space, gymnasium.spaces.Dict) else None)  # VecNormalize takes Box entries only
    env = VecNormalize(env, norm_obs=True, norm_reward=False, clip_obs=5.0, norm_obs_keys=boxes)

    iteration = config.timesteps_per_actorbatch * ACTORS
    steps = max(steps // iteration, 1) * iteration  # whole iterations, as run_ppo1's --stop_after_iterations
    def schedule(start: float, anneal: bool = True):
        return _schedule(start, steps / config.env_steps, anneal)

    clip = schedule(config.epsilon, config.anneal_clip)
    model = MaskablePPO("MultiInputPolicy" if kind == "dict" else "MlpPolicy", env,
                        n_steps=config.timesteps_per_actorbatch, n_epochs=config.optim_epochs,
                        batch_size=config.optim_batchsize * ACTORS,
                        learning_rate=schedule(config.optim_stepsize, config.anneal_lr), clip_range=clip,
                        clip_range_vf=clip if config.clip_vloss else None, gamma=config.gamma,
                        gae_lambda=config.lam, ent_coef=config.ent_coef, vf_coef=config.vf_coef,
                        max_grad_norm=config.max_grad_norm or 1e10, normalize_advantage=True,
                        target_kl=config.target_kl / 1.5 or None,  # SB3 stops past 1.5 x its target_kl
                        seed=seed, device="cpu", verbose=0,
                        policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [64, 64]},
                                       "activation_fn": torch.nn.Tanh, "ortho_init": False,
                                       "optimizer_kwargs": {"eps": config.adam_epsilon}})
    # ppo1's MlpPolicy initialisation (normc rows, zero biases) where SB3 would keep torch's default Linear init
    policy = model.policy
    heads = {policy.action_net: 0.01, policy.value_net: 1.0}
    for layer in [*policy.mlp_extractor.modules(), *heads]:
        if isinstance(layer, torch.nn.Linear):
            normc_(layer.weight, heads.get(layer, 1.0))
            torch.nn.init.zeros_(layer.bias)

    return _learn_logged(model, env, steps, out)


def _schedule(start: float, frac: float, anneal: bool = True):
    """An SB3 schedule (progress_remaining 1 -> 0 over its run) of ppo1's linear one, start x alpha with alpha
    1 -> 1 - frac, where frac is the part of ppo1's schedule (config.env_steps) the run covers; `start` throughout
    without `anneal`."""
    def f(progress_remaining: float) -> float:
        return start * max(1.0 - (1.0 - progress_remaining) * frac, 0.0) if anneal else start
    return f


def _learn_logged(model, env, steps: int, out: str, report_every: int = 0) -> dict:
    """model.learn for `steps`, writing sb3.csv (agent steps, the mean return of the last 100 real games: SB3's
    Monitor, all lives and raw score) after every rollout, so a long run stopped early keeps its curve (and
    printing it every `report_every` rollouts); closes `env`. Returns {"steps", "minutes", "ret100"}."""
    import numpy as np
    from stable_baselines3.common.callbacks import BaseCallback

    recent: deque = deque(maxlen=100)
    rows: list = []
    curve = os.path.join(out, "sb3.csv")
    _write_curve(curve, rows)

    class Games(BaseCallback):
        def _on_step(self) -> bool:
            recent.extend(info["episode"]["r"] for info in self.locals["infos"] if "episode" in info)
            return True

        def _on_rollout_end(self) -> None:
            if recent:
                rows.append((self.num_timesteps, float(np.mean(recent))))
                _write_curve(curve, rows)
                if report_every and len(rows) % report_every == 0:
                    print(f"bench.reference: sb3 {self.num_timesteps} steps, {(time.time() - start) / 60:.1f} min,"
                          f" mean of the last 100 games {rows[-1][1]:.2f}", flush=True)

    start = time.time()
    model.learn(total_timesteps=steps, callback=Games())
    minutes = (time.time() - start) / 60
    env.close()
    return {"steps": rows[-1][0] if rows else 0, "minutes": minutes, "ret100": rows[-1][1] if rows else float("nan")}


def _sb3_envs(config, seed: int, vec: str = "dummy"):
    """SB3's ACTORS envs: for an Atari game its own `make_atari_env` + `VecFrameStack(4)`; for an env with
    image observations (the `pixels` family: ViZDoom, stable-retro, a user's factory) ppo1's own PixelEnv
    preprocessing (frame skip, size, gray, stack; the image alone, without a Dict's vector entries) in a
    gymnasium Env each, with VecNormalize's return-based reward scaling where the preset has --norm_reward.
    vec: SB3's DummyVecEnv (the envs in this process) or SubprocVecEnv (a process each: emulators that allow
    one per process, such as stable-retro's)."""
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecFrameStack, VecNormalize

    from ppo1.envs import env_family

    family = env_family(config.env_name, config.env_kwargs, config.obs_key).name  # SB3's own make per family
    if family == "atari":
        env = VecFrameStack(make_atari_env(config.env_name, n_envs=ACTORS, seed=seed), n_stack=4)
    elif family == "pixels":
        vec_cls = {"dummy": DummyVecEnv, "subproc": SubprocVecEnv}[vec]
        env = vec_cls([functools.partial(_pixel_env, config, seed, i) for i in range(ACTORS)])
    else:
        raise PPO1Error(f"bench.reference compares Atari games and envs with image observations, not the "
                        f"{family} env {config.env_name}")
    if config.norm_reward:
        env = VecNormalize(env, norm_obs=False, norm_reward=True, gamma=config.gamma)
    return env


def _pixel_env(config, seed: int, index: int):
    """A gymnasium Env over ppo1's PixelEnv (which resets itself at an episode's end, where SB3's vec env
    resets it: the next episode's first obs is kept for that reset). info["episode"] carries each finished
    episode's return and length, as SB3's Monitor does; a time limit returns the cut observation, so SB3
    bootstraps from it."""
    import gymnasium
    import numpy as np

    from ppo1.envs import EnvOptions, env_seed, make_gym_env

    options = EnvOptions.of(config)
    options = dataclasses.replace(options, frames=dataclasses.replace(options.frames, vectors=False))

    class Pixels(gymnasium.Env):
        def __init__(self):
            self.env = make_gym_env(config.env_name, env_seed(seed, 0, index), options=options)
            image = self.env.obs_spec.images[0]  # the one image (no vector: vectors=False above)
            self.observation_space = gymnasium.spaces.Box(0, 255, image.shape, np.uint8)
            self.action_space = self.env.action_space
            self.next_obs = None

        def reset(self, *, seed=None, options=None):
            obs, self.next_obs = (self.env.reset()["image"] if self.next_obs is None else self.next_obs), None
            return obs.copy(), {}

        def step(self, action):
            obs, reward, done, episode = self.env.step(action)
            obs = obs["image"]
            if not done:
                return obs.copy(), reward, False, False, {}
            self.next_obs = obs.copy()
            last = self.env.cut_obs["image"] if episode.truncated else obs
            return last.copy(), reward, not episode.truncated, episode.truncated, {
                "episode": {"r": episode.ret, "l": episode.length}}

        def close(self):
            self.env.close()

    return Pixels()


def _progress_curve(path: str) -> list:
    """(agent steps, mean return of the last 100 games) of a ppo1 run's progress.csv, as ppo1's plot reads it
    (a resumed run's repeated iterations once; iterations before the first finished game left out)."""
    from ppo1.plot import read_curve

    steps, _hours, returns = read_curve(path)
    return [(int(s), r) for s, r in zip(steps, returns)]


def _write_curve(path: str, rows: list) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timesteps", "ep_return_mean"])
        w.writerows(rows)


def _read_curve(path: str) -> list:
    with open(path, newline="") as f:
        return [(int(r["timesteps"]), float(r["ep_return_mean"])) for r in csv.DictReader(f)]


def _per_second(side: dict) -> str:
    """A side's agent steps per second of its training: ppo1's from its progress.csv clock ("train_minutes",
    without mpirun's start-up), SB3's of its learn() ("minutes")."""
    minutes = side.get("train_minutes", side["minutes"])
    return f"{side['steps'] / (minutes * 60):.0f}" if minutes > 0 else "nan"


def plot_curves(out: str, env_name: str, title: str, sb3_label: str = "Stable-Baselines3 (same settings)") -> str:
    """curves.png: ppo1 and SB3 (whichever CSVs exist) and the published points of env_name."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name, color in (("ppo1", "tab:blue"), ("sb3", "tab:orange")):
        path = os.path.join(out, f"{name}.csv")
        if os.path.exists(path) and (rows := _read_curve(path)):
            ax.plot([r[0] for r in rows], [r[1] for r in rows], color=color,
                    label="ppo1" if name == "ppo1" else sb3_label)
    markers = {"PPO paper (range of 3 seeds)": ("k", "s"), "baselines ppo2": ("tab:green", "^"),
               "CleanRL ppo_atari": ("tab:red", "o")}
    for label, points in PUBLISHED.get(env_name, {}).items():
        color, marker = markers[label]
        xs = sorted(points)
        ys = [points[x] for x in xs]
        if isinstance(ys[0], tuple):
            mid = [(a + b) / 2 for a, b in ys]
            err = [[m - a for (a, _b), m in zip(ys, mid)], [b - m for (_a, b), m in zip(ys, mid)]]
            ax.errorbar(xs, mid, yerr=err, fmt=marker, color=color, capsize=4, label=label)
        else:
            ax.plot(xs, ys, marker, color=color, label=label)
    ax.set_xlabel("agent steps (all actors)")
    ax.set_ylabel("mean return of the last 100 real games")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    path = os.path.join(out, "curves.png")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.reference", description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="paper")
    p.add_argument("--env_name", default="PongNoFrameskip-v4")
    p.add_argument("--steps", type=lambda s: int(float(s)), default=1_000_000, help="agent steps per side")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override a Config field on both sides (an A/B variant)")
    p.add_argument("--tag", default="", help="suffix of the output directory for a variant")
    p.add_argument("--only", choices=("ppo1", "sb3", "plot"), help="run one side only, or only plot")
    p.add_argument("--out", help="output directory (default: assets/reference/<preset>[-<tag>])")
    p.add_argument("--sb3_vec", choices=("dummy", "subproc"), default="dummy",
                   help="SB3's envs in its own process (DummyVecEnv) or one process each (SubprocVecEnv: "
                        "stable-retro, one emulator per process); on envs other than Atari")
    p.add_argument("--sb3_defaults", action="store_true",
                   help="SB3's side: sb3-contrib RecurrentPPO with its own defaults (run_sb3_recurrent_defaults), not "
                        "ppo1's settings (with --only plot: the curve's label)")
    p.add_argument("--ppo1_run", metavar="DIR",
                   help="with --only sb3: ppo1's curve (ppo1.csv) from a run this benchmark did not start, the "
                        "progress.csv in DIR (a run folder, or a results folder of bench.learning)")
    args = p.parse_args(argv)

    try:
        config = resolve_config(args.preset, args.env_name, _parse_set(args.set))
    except PPO1Error as e:
        print(f"bench.reference: {e}", file=sys.stderr)
        return 2
    name = args.preset + (f"-{args.tag}" if args.tag else "")
    out = os.path.abspath(args.out or os.path.join(REPO, "assets", "reference", name))
    os.makedirs(out, exist_ok=True)
    if args.only != "plot":  # the settings both sides read; config.json only where ppo1 runs (its record)
        name_json = "sb3-config.json" if args.only == "sb3" else "config.json"
        with open(os.path.join(out, name_json), "w") as f:
            f.write(config.to_json())
    lines = []
    if args.ppo1_run:
        rows = _progress_curve(os.path.join(args.ppo1_run, "progress.csv"))
        _write_curve(os.path.join(out, "ppo1.csv"), rows)
        lines.append(f"ppo1: {rows[-1][0]} steps, mean of the last 100 games {rows[-1][1]:.2f} "
                     f"(from {os.path.relpath(os.path.abspath(args.ppo1_run), REPO)})")
    if args.only in (None, "ppo1"):
        s = run_ppo1(config, args.steps, args.seed, out)
        lines.append(f"ppo1: {s['steps']} steps, {s['minutes']:.1f} min, {_per_second(s)} steps/s, "
                     f"mean of the last 100 games {s['ret100']:.2f}")
    if args.only in (None, "sb3"):
        if config.frame_norm != "scale":  # SB3's CnnPolicy divides by 255; the Torso above reads what it gets
            print(f"bench.reference: SB3 reads frames / 255 where ppo1 runs --frame_norm {config.frame_norm}; "
                  "--set frame_norm=scale gives both the same input", flush=True)
        if args.sb3_defaults:
            s = run_sb3_recurrent_defaults(config, args.steps, args.seed, out)
        elif config.rnn != "none":
            s = run_sb3_recurrent(config, args.steps, args.seed, out)
        elif config.model_type == "mlp" and action_mask_kind(config):  # a vector env that masks its actions
            s = run_sb3_maskable(config, args.steps, args.seed, out)
        else:
            s = run_sb3(config, args.steps, args.seed, out, args.sb3_vec)
        lines.append(f"sb3:  {s['steps']} steps, {s['minutes']:.1f} min, {_per_second(s)} steps/s, "
                     f"mean of the last 100 games {s['ret100']:.2f}")
    png = plot_curves(out, config.env_name, f"{config.env_name}, preset {name}, seed {args.seed}",
                      "sb3-contrib RecurrentPPO (its defaults)" if args.sb3_defaults else
                      "Stable-Baselines3 (same settings)")
    if lines:
        with open(os.path.join(out, "summary.txt"), "a") as f:
            f.write("".join(f"{line}\n" for line in lines))
    for line in lines:
        print(line)
    print(f"bench.reference: {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
