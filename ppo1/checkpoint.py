"""What a checkpoint holds, and how one is read: the on-disk format, safe loading, validation against a run.

`TrainState` is everything a checkpoint holds and the only code that knows its keys (format FORMAT; `upgrade`
reads format 1); `RankParts` gathers by name the parts of a rank that save their own state (`RankRngs` its
generators). `load` reads one file with `torch.load(..., weights_only=True)`, so no pickled code from a
checkpoint is ever run, and says in one line why a file is not a checkpoint it can use; `validate` refuses one
of another game, model or number of actors. Where a run's files lie and how they are written atomically and
kept is `ppo1.runfiles`, which builds on this module.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import random
import re
import zipfile
from typing import Any

import numpy as np
import torch

from ppo1.errors import PPO1Error, error_line
from ppo1.actions import check_actions
from ppo1 import device as devices
from ppo1.config import Config
from ppo1.safeio import cause
from ppo1.observations import IMAGE, ObsSpec

FORMAT = 2  # what every checkpoint written now is; `upgrade` reads format 1 (ppo1 before 2026-12-04) as format 2
RECENT = 100  # the mean return and length reported are over the last RECENT real games (all ranks)


class NewerCheckpoint(PPO1Error):
    """A checkpoint of a format newer than FORMAT: written by a later ppo1. Never skipped for an older one (the
    run would go on from behind it) and never deleted."""


class RankRngs:
    """A rank's random generators as a part of its state (RankParts): torch's, the CUDA one where actions are
    sampled on a GPU, Python's, and `rng`, the numpy Generator that shuffles the minibatches."""

    with_games = False

    def __init__(self, rng: np.random.Generator, device: torch.device):
        self.rng, self.device = rng, device

    def state_dict(self) -> dict:
        return {"torch_rng": torch.get_rng_state(), "np_rng": self.rng.bit_generator.state,
                "py_rng": random.getstate(), "cuda_rng": devices.rng_state(self.device)}

    def load_state_dict(self, state: dict) -> None:
        torch.set_rng_state(state["torch_rng"])
        self.rng.bit_generator.state = state["np_rng"]
        random.setstate(state["py_rng"])
        devices.set_rng_state(self.device, state.get("cuda_rng"))


class RankParts:
    """The parts of one rank that hold per-rank state, by name (its RNGs, envs, env restarts, the collector's
    memory, the reward normaliser's running returns): each saves and loads its own with `state_dict()` /
    `load_state_dict()`, as nn.Module does. A checkpoint's entry of the rank is the union of their dicts, each
    part owning its keys (those checkpoints have always had). A part whose `with_games` is True lives with the
    envs' games and is loaded only when they go on: a part (the envs) whose load returns False says they do not."""

    def __init__(self, **parts):
        """parts: name -> the part, None for one this run has not (left out); loaded in this order."""
        self.parts = {name: part for name, part in parts.items() if part is not None}

    def state_dict(self, games: bool = True) -> dict:
        """The rank's entry. games False: without the games (an env stop: an env may be broken mid-rollout): the
        parts `with_games` left out and the envs' `without_games()` (what a resume makes them anew from)."""
        data: dict = {}
        for name, part in self.parts.items():
            if not games and part.with_games:
                continue
            own = part.state_dict() if games or not hasattr(part, "without_games") else part.without_games()
            if set(own) & set(data):
                raise ValueError(f"rank part {name!r} saves keys {sorted(set(own) & set(data))} another part saves")
            data.update(own)
        return data

    def load_state_dict(self, data: dict) -> bool:
        """Load every part from a rank's entry `data`; those `with_games` only when the games go on. Returns
        whether they go on."""
        games = True
        for part in self.parts.values():
            if not part.with_games and part.load_state_dict(data) is False:
                games = False
        for part in self.parts.values():
            if part.with_games and games:
                part.load_state_dict(data)
        return games


@dataclasses.dataclass
class TrainState:
    """Everything a checkpoint holds, and the only code that knows how it is laid out on disk.

    A checkpoint is the dict of `to_checkpoint()` (format FORMAT), saved with torch.save. `model`,
    `config` (Config.to_saved()), the counters, the action/actor counts and what sizes the model (`obs_spec`,
    `model_io`) are in every checkpoint (play and movie need them); a training resumes from the rest as well.
    Checkpoints of format 1 are read through `upgrade`.
    """

    model: dict                        # state dict, CPU tensors
    config: dict                       # Config.to_saved() of the run
    num_actions: int
    n_actors: int                      # ranks x envs_per_rank
    obs_spec: list                     # the observations the model reads: ObsSpec.to_list()
    model_io: dict                     # the rest that sizes the model without an env (ModelIO.of)
    iteration: int = 0
    timesteps: int = 0                 # agent steps over all actors
    episodes: int = 0                  # real games finished over all actors
    recent: collections.deque = dataclasses.field(default_factory=lambda: collections.deque(maxlen=RECENT))
    optimizer: dict | None = None      # state dict, CPU tensors
    n_ranks: int | None = None
    ranks: list[dict] | None = None    # RankParts.state_dict() of every rank, in rank order
    reward_norm: dict | None = None    # --norm_reward: RewardNormalizer.state_dict() (the same on every rank)
    action_nvec: list[int] | None = None  # MultiDiscrete / MultiBinary: the choices per action dimension (else None)
    best: dict | None = None  # best.pt: its evaluation {"score", "iteration", "timesteps", "games", "greedy"}
    wandb_id: str | None = None  # --wandb: the W&B run's id, which a resume continues (None: none yet, or older)

    def to_checkpoint(self) -> dict:
        """The dict saved on disk (keys of format FORMAT; the parts that are None are left out)."""
        data = {"format": FORMAT, "model": self.model, "optimizer": self.optimizer, "iteration": self.iteration,
                "timesteps": self.timesteps, "episodes": self.episodes,
                "recent_returns": [r for r, _ in self.recent], "recent_lengths": [n for _, n in self.recent],
                "num_actions": self.num_actions, "n_actors": self.n_actors, "n_ranks": self.n_ranks,
                "config": self.config, "ranks": self.ranks, "reward_norm": self.reward_norm,
                "obs_spec": self.obs_spec, "action_nvec": self.action_nvec, "model_io": self.model_io,
                "best": self.best, "wandb_id": self.wandb_id}
        return {k: v for k, v in data.items() if v is not None}

    @classmethod
    def from_checkpoint(cls, data: Any, path: str, resume: bool = False) -> "TrainState":
        """A TrainState from a loaded checkpoint dict. Raises PPO1Error (naming `path`) unless it is a
        ppo1 checkpoint of format FORMAT with what play and movie need, and, with `resume`, all that
        a training resumes from. A checkpoint of format 1 is read as `upgrade` makes it."""
        data = upgrade(data, path)
        written = data.get("format") if isinstance(data, dict) else None
        if isinstance(written, int) and not isinstance(written, bool) and written > FORMAT:
            raise NewerCheckpoint(f"checkpoint {path} was written by a newer ppo1 (checkpoint format {written}; this "
                                  f"ppo1 reads formats 1 to {FORMAT}): resume or play it with that ppo1 (pip install "
                                  "-U ppo1), or train anew with --fresh, which moves this run aside and keeps its files")
        if not isinstance(data, dict) or data.get("format") != FORMAT or "model" not in data:
            raise PPO1Error(f"checkpoint {path} is not a ppo1 checkpoint (it holds no model and no checkpoint format)")
        _check_keys(data, path, _REQUIRED)
        config_from_data(data["config"], f"checkpoint {path}")
        if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in data["model"].items()):
            raise PPO1Error(f"checkpoint {path} is corrupt: 'model' does not map names to tensors")
        if resume:
            _check_resumable(data, path)
        recent = zip(data.get("recent_returns", []), data.get("recent_lengths", []))
        return cls(model=data["model"], config=data["config"], num_actions=data["num_actions"],
                   n_actors=data["n_actors"], iteration=data["iteration"], timesteps=data["timesteps"],
                   episodes=data.get("episodes", 0), recent=collections.deque(recent, maxlen=RECENT),
                   optimizer=data.get("optimizer"), n_ranks=data.get("n_ranks"), ranks=data.get("ranks"),
                   reward_norm=data.get("reward_norm"), obs_spec=_spec(data["obs_spec"], path),
                   action_nvec=_shape(data.get("action_nvec"), "action_nvec", path),
                   model_io=ModelIO.check(data["model_io"], path), best=_best(data.get("best"), path),
                   wandb_id=_wandb_id(data.get("wandb_id"), path))

    def observations(self) -> ObsSpec:
        """The observations the model reads."""
        return ObsSpec.from_list(self.obs_spec)

    def model_spec(self):
        """(observations (ObsSpec), action space, stacked) that build() takes for this checkpoint's model."""
        m, obs = self.model_io, self.observations()
        stacked = m["stacked"]
        if stacked is None:  # not said (a checkpoint of before 2026-12-05): 4 channels were read as a stack
            stacked = bool(obs.images) and obs.images[0].shape[0] == 4
        return obs, ModelIO.space(m["actions"], self.num_actions, self.action_nvec), stacked

    def rank(self, r: int) -> dict:
        """Rank r's saved state (RankParts.state_dict()): its generators, games, restarts, memory, returns."""
        return self.ranks[r]

    def record(self, log) -> None:
        """The run's counters and the last RECENT games' mean return and length, into a metrics.Recorder."""
        log.record(iteration=self.iteration, timesteps=self.timesteps, episodes=self.episodes,
                   ep_return_mean=float(np.mean([r for r, _ in self.recent])) if self.recent else float("nan"),
                   ep_length_mean=float(np.mean([n for _, n in self.recent])) if self.recent else float("nan"))


class ModelIO:
    """A checkpoint's `model_io`: what builds its model besides obs_spec, num_actions and action_nvec, so that
    play and movie need no env to size it: {"actions": "discrete" | "box" | "multi", "stacked": whether the images
    are stacks of frames (None in checkpoints of before 2026-12-05 that did not know: TrainState.model_spec)}."""

    KINDS = ("discrete", "box", "multi")

    @staticmethod
    def of(action_space, stacked: bool) -> dict:
        import gymnasium
        from ppo1.actions import action_nvec
        kind = ("multi" if action_nvec(action_space) is not None else
                "box" if isinstance(action_space, gymnasium.spaces.Box) else "discrete")
        return {"actions": kind, "stacked": bool(stacked)}

    @staticmethod
    def space(kind: str, num_actions: int, nvec: list[int] | None):
        """The action space a model of `kind` was built for (the bounds of a Box do not size a model)."""
        import gymnasium
        if kind == "multi":
            return gymnasium.spaces.MultiDiscrete(nvec)
        if kind == "box":
            return gymnasium.spaces.Box(-np.inf, np.inf, (num_actions,), np.float32)
        return gymnasium.spaces.Discrete(num_actions)

    @classmethod
    def check(cls, value: Any, path: str) -> dict:
        """A checkpoint's model_io as read; PPO1Error naming `path` when it is malformed."""
        if not (isinstance(value, dict) and set(value) == {"actions", "stacked"} and value["actions"] in cls.KINDS
                and value["stacked"] in (None, True, False)):
            raise PPO1Error(f"checkpoint {path} is corrupt: 'model_io' is {value!r}")
        return value


def readable_format(data: Any) -> bool:
    """Whether `data`, a loaded checkpoint, is of a format this ppo1 reads: FORMAT, or 1 through `upgrade`."""
    return isinstance(data, dict) and data.get("format") in (1, FORMAT)


def upgrade(data: Any, path: str) -> Any:
    """A checkpoint dict of format 1 as format 2 says it; anything else as it is (from_checkpoint checks it).

    Format 1 said what the model reads by its version: `obs_spec` as format 2 does; or (before named observation
    entries) `obs_shape`, the one image's shape with model_io's `vec_dim` numbers packed into one last channel, read
    as that image one channel smaller beside a vector, from a version that resized every image (its config gets
    frame_upscale, which the setting does now); or nothing (before 2026-12-02), which is refused: PPO1Error."""
    if not isinstance(data, dict) or data.get("format") != 1:
        return data
    old_io, shape = data.get("model_io"), data.get("obs_shape")
    if not isinstance(old_io, dict) or (data.get("obs_spec") is None and shape is None):
        raise PPO1Error(f"checkpoint {path} is of a ppo1 version before 2026-12-02, which did not save what its "
                        "model reads: play it with that version, or train anew (--fresh)")
    vec_dim = old_io.get("vec_dim", 0)
    if type(vec_dim) is not int or vec_dim < 0 or _shape(shape, "obs_shape", path) == []:
        raise PPO1Error(f"checkpoint {path} is corrupt: 'obs_shape' {shape!r} with 'model_io' {old_io!r}")
    new = {k: v for k, v in data.items() if k != "obs_shape"}
    new.update(format=FORMAT, model_io={k: v for k, v in old_io.items() if k != "vec_dim"})
    if data.get("obs_spec") is None:
        shape = tuple(shape)
        spec = (ObsSpec.of(vector=shape[0]) if len(shape) == 1 else
                ObsSpec.of({IMAGE: (shape[0] - 1, *shape[1:]) if vec_dim else shape}, vector=vec_dim))
        new.update(obs_spec=spec.to_list(), config=_resizing(data["config"]))
    return new


def _resizing(config: Any) -> Any:
    """A saved config of a version before --frame_upscale, which resized every image, with frame_upscale set."""
    if not isinstance(config, dict) or "frame_upscale" in config or "frame_upscale" in config.get("pixels", {}):
        return config
    if isinstance(config.get("pixels"), dict):
        return {**config, "pixels": {**config["pixels"], "frame_upscale": True}}
    return {**config, "frame_upscale": True}


def _shape(value: Any, key: str, path: str) -> list[int] | None:
    """A checkpoint's 'obs_shape' or 'action_nvec' (a list of whole numbers >= 1, or absent). Raises PPO1Error
    naming `path`."""
    if value is not None and not (isinstance(value, list) and all(type(n) is int and n >= 1 for n in value)):
        raise PPO1Error(f"checkpoint {path} is corrupt: {key!r} is {value!r}, not a list of whole numbers")
    return value


def _spec(value: Any, path: str) -> list | None:
    """A checkpoint's 'obs_spec' (ObsSpec.to_list()), or None; PPO1Error naming `path` when it is malformed."""
    if value is not None and ObsSpec.from_list(value) is None:
        raise PPO1Error(f"checkpoint {path} is corrupt: 'obs_spec' is {value!r}")
    return value


def _best(value: Any, path: str) -> dict | None:
    """A checkpoint's `best` record (best.pt's evaluation), or None; PPO1Error naming `path` when malformed."""
    if value is None:
        return None
    if not (isinstance(value, dict) and isinstance(value.get("score"), float) and type(value.get("iteration")) is int
            and value["iteration"] >= 0):
        raise PPO1Error(f"checkpoint {path} is corrupt: 'best' is {value!r}")
    return value


def _wandb_id(value: Any, path: str) -> str | None:
    """A checkpoint's 'wandb_id' (W&B run ids are letters, digits, - and _), or None when absent. Raises PPO1Error
    naming `path`."""
    if value is not None and not (isinstance(value, str) and re.fullmatch(r"[\w-]{1,128}", value)):
        raise PPO1Error(f"checkpoint {path} is corrupt: 'wandb_id' is {value!r}, not a W&B run id")
    return value


# Keys every checkpoint holds, with their types (play and movie need these) ...
_REQUIRED = {"format": int, "model": dict, "iteration": int, "timesteps": int, "num_actions": int,
             "n_actors": int, "config": dict, "obs_spec": list, "model_io": dict}
# ... and the ones a training resumes from as well.
_RESUME = {"optimizer": dict, "episodes": int, "recent_returns": list, "recent_lengths": list, "n_ranks": int,
           "ranks": list}


def _torch_reason(e: Exception) -> str:
    """Why torch.load failed, without torch's advice to load with weights_only=False (never right here)."""
    text = str(e)
    m = re.search(r"WeightsUnpickler error:\s*(.*?)\s*(?:Check the documentation|$)", text, re.S)
    if m:
        detail = " ".join(m.group(1).split())
        return ("it holds objects other than tensors and plain data, which ppo1 never loads"
                + (f" ({detail})" if detail else ""))
    if isinstance(e, OSError):
        return cause(e)
    return error_line(e)


def _check_keys(state: dict, path: str, keys: dict) -> None:
    for key, kind in keys.items():
        if key not in state:
            raise PPO1Error(f"checkpoint {path} is incomplete: it has no {key!r}")
        value = state[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise PPO1Error(f"checkpoint {path} is corrupt: {key!r} is of type {type(value).__name__}, "
                            f"not {kind.__name__}")
        if kind is int and key != "format" and value < 0:
            raise PPO1Error(f"checkpoint {path} is corrupt: {key!r} is {value}, must be >= 0")


def load(path: str, resume: bool = False) -> TrainState:
    """Load one checkpoint safely (weights_only). Raises PPO1Error if missing, truncated or corrupt,
    or if it lacks a key play and movie need (or has one of the wrong type); with `resume`, also
    if it lacks what a training resumes from."""
    if not os.path.lexists(path):
        raise PPO1Error(f"no checkpoint at {path}")
    if not os.path.exists(path):
        raise PPO1Error(f"checkpoint {path} is a dangling link (to {os.readlink(path)})")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, bad pickle, forbidden global, a directory ...
        raise PPO1Error(f"checkpoint {path} {_unreadable(path, e)}") from None
    return TrainState.from_checkpoint(data, path, resume)


def _unreadable(path: str, e: Exception) -> str:
    """Why torch.load could not read the file at `path`, in words: empty, not the zip archive torch.save writes,
    truncated (the archive's end is missing), or what torch said."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as err:
        return f"cannot be read: {cause(err)}"
    if size == 0:
        return "is empty (0 bytes)"
    if head != b"PK\x03\x04":
        return "is not a checkpoint: not the zip archive torch.save writes"
    if not zipfile.is_zipfile(path):
        return (f"is truncated: its {size} bytes end before the end of its zip archive (a copy or a write cut "
                "short)")
    return f"is corrupt or unreadable: {_torch_reason(e)}"


def _check_resumable(state: dict, path: str) -> None:
    """Raise PPO1Error unless a checkpoint dict holds all a training needs to resume (keys and types)."""
    _check_keys(state, path, _RESUME)
    if len(state["ranks"]) != state["n_ranks"] or not all(isinstance(r, dict) for r in state["ranks"]):
        raise PPO1Error(f"checkpoint {path} is corrupt: 'ranks' does not hold one dict per rank")
    if len(state["recent_returns"]) != len(state["recent_lengths"]):
        raise PPO1Error(f"checkpoint {path} is corrupt: 'recent_returns' and 'recent_lengths' differ in length")


def config_from_data(data: object, where: str) -> Config:
    """A Config from the parsed JSON of a config.json or a checkpoint's 'config'. Raises PPO1Error naming
    `where` for anything but an object of known fields, each of its field's type, with valid values."""
    if not isinstance(data, dict):
        raise PPO1Error(f"{where} does not hold a JSON object of settings")
    try:
        data = Config.flatten(data)
    except PPO1Error as e:
        raise PPO1Error(f"{where}: {e}") from None
    kinds = {f.name: type(getattr(Config(), f.name)) for f in dataclasses.fields(Config)}
    unknown = sorted(set(data) - set(kinds))
    if unknown:
        raise PPO1Error(f"{where} has unknown settings {unknown}; was it written by a newer ppo1?")
    values = {}
    for name, value in data.items():
        kind = kinds[name]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            ok, value = True, float(value)
        if not ok:
            raise PPO1Error(f"{where}: setting {name!r} is {value!r}, must be of type {kind.__name__}")
        values[name] = value
    try:
        return Config(**values).validate()
    except PPO1Error as e:  # worded for flags: say it is the file's value
        message = re.sub(r"--(\w+)=", r"setting \1=", str(e))
        raise PPO1Error(f"{where}: {message}") from None


def validate(state: TrainState, config: Config, num_actions: int, n_actors: int,
             obs_spec: ObsSpec | None = None, action_nvec: tuple[int, ...] | None = None) -> None:
    """Raise PPO1Error if a checkpoint does not belong to this game (its name, kwargs, observations and actions:
    `num_actions` and, for MultiDiscrete / MultiBinary actions, `action_nvec`), model or number of actors."""
    saved = config_from_data(state.config, "checkpoint")
    path = "checkpoint"
    if saved.env_name != config.env_name:
        raise PPO1Error(f"{path} was trained on {saved.env_name}, not {config.env_name}")
    if json.loads(saved.env_kwargs) != json.loads(config.env_kwargs):
        raise PPO1Error(f"{path} was trained with --env_kwargs {saved.env_kwargs}, not {config.env_kwargs}")
    try:
        check_observations(state.observations(), obs_spec, config.env_name)
    except PPO1Error as e:
        if config.frame_upscale or not saved.frame_upscale:
            raise
        raise PPO1Error(f"{e} (its version resized every image: give --frame_upscale to resume it)") from None
    if saved.model_type != config.model_type:
        raise PPO1Error(f"{path} holds a {saved.model_type!r} model, not --model_type={config.model_type}")
    if (saved.rnn, saved.rnn_size) != (config.rnn, config.rnn_size):
        held = "no recurrent core" if saved.rnn == "none" else f"{CORE_NAMES[saved.rnn]} core of {saved.rnn_size} units"
        asked = "--rnn none" if config.rnn == "none" else f"--rnn {config.rnn} --rnn_size {config.rnn_size}"
        raise PPO1Error(f"{path} holds a model with {held}, not {asked}: resume with the run's own --rnn, or "
                        "give --fresh to start a new run")
    if config.rnn != "none" and saved.rnn_critic != config.rnn_critic:
        raise PPO1Error(f"{path} holds a model whose value head reads {CRITIC_NAMES[saved.rnn_critic]}, not "
                        f"--rnn_critic {config.rnn_critic}: resume with the run's own --rnn_critic, or give --fresh "
                        "to start a new run")
    check_actions(path, (state.num_actions, state.action_nvec), config.env_name, (num_actions, action_nvec))
    if n_actors and state.n_actors != n_actors:
        raise PPO1Error(f"{path} was trained with {state.n_actors} actors (ranks x envs_per_rank), "
                        f"this run has {n_actors}")


CORE_NAMES = {"lstm": "an LSTM", "gru": "a GRU"}
CRITIC_NAMES = {"shared": "the policy's core", "separate": "a core of its own"}


def check_observations(saved: ObsSpec, now: ObsSpec | None, env_name: str) -> None:
    """Raise PPO1Error if the checkpoint's model reads the observations `saved` and the env now gives others
    (`now`: its own code, or the preprocessing flags, changed); `now` None: not known, which passes."""
    if now is not None and saved != now:
        raise PPO1Error(f"checkpoint holds a model of observations {saved.describe()}, {env_name} now gives "
                        f"{now.describe()}: was the env or its preprocessing changed?")
