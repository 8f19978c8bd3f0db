"""What the modes share: a trained policy loaded from a run, its actions, and whole games played with it.

`play` and `movie` (and the videos taken during training) are peers that build on this module; none
of them imports another mode. Games here are whole (all lives, unclipped score, no life-loss resets:
`AtariEnv(episode_life=False)`); envs with vector observations play their own episodes (`GymEnv`). A
recurrent policy's memory starts afresh where its training started an episode: at each game's start and,
for a run trained with --episode_life (Atari's default), at each life the env says it lost (`life_lost`).
Actions are sampled with a generator of their own, so evaluation never moves the global torch RNG
that training uses.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import numpy as np
import torch

from ppo1 import checkpoint, runfiles
from ppo1.errors import PPO1Error
from ppo1.actions import action_nvec, check_actions, choose
from ppo1.config import Config
from ppo1.device import configure, fit_threads, select_device
from ppo1.distributed import Comm
from ppo1.envs import EnvOptions, Episode, families, make_eval_env
from ppo1.observations import Obs, ObsSpec
from ppo1.policies import ActorCritic, build

# Flags that play and movie take from the command line; every other setting is the checkpoint's.
EVAL_FLAGS = ("checkpoint_dir", "model_name", "asset_dir", "seed", "num_threads", "deterministic", "device",
              "compile")


@dataclasses.dataclass
class Trained:
    """A policy restored from a checkpoint, with the settings it was trained with."""

    policy: ActorCritic
    config: Config      # the checkpoint's config, with the evaluation flags (EVAL_FLAGS) applied
    path: str
    iteration: int
    timesteps: int
    obs_spec: ObsSpec | None = None  # the observations the model reads (None: an older checkpoint)
    best: dict | None = None  # best.pt: the evaluation that made it the best (TrainState.best)

    def describe(self) -> str:
        """e.g. `checkpoints/pong/latest.pt (iteration 40, 40960 steps)`; best.pt adds its evaluation's score."""
        best = (f"; best evaluation, score {self.best['score']:.2f} over {self.best.get('games', '?')} games"
                if self.best else "")
        return f"{self.path} (iteration {self.iteration}, {self.timesteps} steps{best})"

    def check_env(self, env) -> None:
        """PPO1Error unless `env` (the one env play or movie makes) has the model's actions and observations:
        the model was sized from the checkpoint, so an env whose code or kwargs changed since is caught here."""
        check_env_fits(f"checkpoint {self.path}", self.policy.num_actions, self.policy.nvec, self.obs_spec,
                       self.config.env_name, env)


def check_env_fits(where: str, num_actions: int, nvec, obs_spec: ObsSpec | None, env_name: str, env) -> None:
    """PPO1Error unless `env` has the actions (num_actions, nvec) and the observations (obs_spec; None: not
    known) of the model in `where`: an env whose code, kwargs or preprocessing changed since it was trained."""
    check_actions(where, (num_actions, nvec), env_name, (env.num_actions, action_nvec(env.action_space)))
    checkpoint.check_observations(obs_spec, env.obs_spec, env_name)


def _load_on_root(config: Config, given: dict, which: str) -> tuple[checkpoint.TrainState, str, Config]:
    """Rank 0's part of load_trained: (the checkpoint `which` names without its training-only parts, its path,
    its config with the evaluation flags applied). Raises PPO1Error."""
    state, path = runfiles.resolve(config.run_dir, which)
    saved = Config.from_dict(state.config)
    for name, value in sorted(given.items()):
        if name not in EVAL_FLAGS and value != getattr(saved, name):
            raise PPO1Error(
                f"--{name}={value!r} conflicts with the checkpoint {path}, trained with {name}="
                f"{getattr(saved, name)!r}: play and movie take the game and model from the checkpoint, "
                f"so leave --{name} out")
    saved = dataclasses.replace(saved, **{n: getattr(config, n) for n in EVAL_FLAGS if hasattr(config, n)})
    return dataclasses.replace(state, optimizer=None, ranks=None), path, saved


def load_trained(config: Config, given: dict, comm: Comm, which: str = "latest") -> Trained:
    """The checkpoint `which` names (runfiles.resolve: `latest`, the newest of config.run_dir; `best`, its
    best.pt; or a .pt file's path) as a policy, on every rank.

    `given` holds the Config flags given on the command line; any of them outside EVAL_FLAGS must
    match the checkpoint's saved value. Raises PPO1Error (on every rank) for a missing run,
    a missing or unreadable checkpoint, or a conflicting flag.
    """
    error, loaded = None, None
    try:
        device = select_device(config.device, comm.local_rank)
        if comm.is_root:
            loaded = _load_on_root(config, given, which)
    except PPO1Error as e:
        error = e
    comm.agree(error)
    state, path, saved = comm.bcast(loaded)
    policy = None
    try:  # the model's shapes come from the checkpoint
        policy = _policy_for(state, saved, path)
    except PPO1Error as e:
        error = e
    comm.agree(error)
    configure(device, config.deterministic)
    policy.to(device).eval()
    # batch-1 forward passes: 1 thread is fastest
    torch.set_num_threads(fit_threads(given.get("num_threads") or 1,
                                      (lambda m: print(m, flush=True)) if comm.is_root else (lambda m: None)))
    return Trained(policy, saved, path, state.iteration, state.timesteps, state.observations(), state.best)


def _policy_for(state: checkpoint.TrainState, saved: Config, path: str) -> ActorCritic:
    """The checkpoint's model, sized from the checkpoint alone: no env is made here (play and movie make theirs and
    check it: Trained.check_env). Raises PPO1Error when its weights do not fit that model."""
    obs, actions, stacked = state.model_spec()
    policy = build(saved.model_type, actions, obs, frame_norm=saved.frame_norm, rnn=saved.rnn,
                   rnn_size=saved.rnn_size, stacked=stacked, rnn_critic=saved.rnn_critic)
    try:
        policy.load_state_dict(state.model)  # CPU tensors (checkpoint.load maps them there)
    except RuntimeError as e:
        raise PPO1Error(f"checkpoint {path} does not fit {saved.env_name}: {str(e).splitlines()[-1].strip()}") from None
    return policy


@torch.no_grad()
def choose_action(policy: ActorCritic, obs: Obs, greedy: bool, generator: torch.Generator,
                  memory: torch.Tensor | None = None):
    """The action for one observation: the most probable (greedy) or one sampled from pi (ppo1.actions.choose);
    `memory`: a recurrent policy's memory (1, memory_size) before obs (None without --rnn).

    Returns (action, the memory after obs): the action an int (Discrete actions), an int64 array (dims,)
    (MultiDiscrete, MultiBinary: the most probable or a sampled index per dimension) or a float32 array
    (Box actions). Samples with its own generator, so evaluation never moves the global torch RNG that
    training uses. A policy on a GPU computes the distribution there; the action is drawn on the CPU with the
    same generator.
    """
    device = next(policy.parameters()).device
    dist, _value, memory = policy.step(obs.map(lambda x: torch.from_numpy(x).unsqueeze(0).to(device)), memory)
    action = choose(dist, greedy, generator)[0].cpu()
    return (int(action) if action.dim() == 0 else action.numpy()), memory


class Player:
    """Chooses the actions of one game after another: a recurrent policy's memory is carried from step to
    step and starts from zeros where training's did, at each game's start and, with `episode_life` (the
    run trained with --episode_life: a lost life ended its episodes), at each life lost (`after_step`)."""

    def __init__(self, policy: ActorCritic, greedy: bool, generator: torch.Generator, episode_life: bool = False):
        self.policy, self.greedy, self.generator, self.episode_life = policy, greedy, generator, episode_life
        self.new_game()

    def new_game(self) -> None:
        self.memory = self.policy.initial_memory(1, next(self.policy.parameters()).device)

    def after_step(self, env, episode: Episode | None) -> None:
        """What env.step returned of the game: its end (`episode`), or a lost life (the env's `life_lost`,
        which only Atari's AtariEnv sets) where training started an episode afresh: zeros."""
        if episode is not None or (self.episode_life and getattr(env, "life_lost", False)):
            self.new_game()

    def __call__(self, obs: Obs):
        action, self.memory = choose_action(self.policy, obs, self.greedy, self.generator, self.memory)
        return action


def generator_for(seed: np.random.SeedSequence) -> torch.Generator:
    """A torch generator seeded from a SeedSequence."""
    return torch.Generator().manual_seed(int(seed.generate_state(1, np.uint64)[0] >> 1))


def games_of_rank(n: int, rank: int, size: int) -> list[int]:
    """The (0-based) game numbers rank `rank` of `size` plays: round-robin."""
    return list(range(rank, n, size))


def play_games(policy: ActorCritic, env, n: int, greedy: bool, generator: torch.Generator,
               on_game: Callable[[Episode], None] = lambda ep: None, max_steps: int = 0,
               episode_life: bool = False) -> list[Episode]:
    """Play n whole games in `env` (from make_eval_env), from a reset. Returns their Episodes (see play_on)."""
    return play_on(policy, env, env.reset(), n, greedy, generator, on_game, max_steps, episode_life)[0]


def play_on(policy: ActorCritic, env, obs: Obs, n: int, greedy: bool, generator: torch.Generator,
            on_game: Callable[[Episode], None] = lambda ep: None, max_steps: int = 0,
            episode_life: bool = False) -> tuple[list[Episode], Obs]:
    """Play n whole games in `env` from its observation `obs` (the start of a game). A game longer than
    `max_steps` agent steps (0 = no limit) is cut there: its Episode has the score so far and truncated=True, and
    the env is reset, with a seed no earlier reset had (ppo1.envs.base.ResetSeeds), so the next game is a new one.
    episode_life: the run trained with --episode_life (a recurrent policy's memory then starts afresh at each life
    lost, as there). Returns (the games' Episodes, the observation that starts the next game)."""
    games: list[Episode] = []
    player, steps, start = Player(policy, greedy, generator, episode_life), 0, time.time()
    while len(games) < n:
        obs, _reward, _done, episode = env.step(player(obs))
        steps += 1
        if episode is None and max_steps and steps >= max_steps:
            episode = Episode(float(env.ep_return), steps, time.time() - start, truncated=True)
            obs = env.reset()
        player.after_step(env, episode)
        if episode is not None:
            games.append(episode)
            on_game(episode)
            steps, start = 0, time.time()
    return games, obs


def open_game(env_name: str, seed: np.random.SeedSequence,
              options: EnvOptions = EnvOptions()) -> tuple[Any, Obs | None, tuple[int, int], int]:
    """An env for stream_game: (env, its first observation or None if stream_game resets it,
    (height, width) of its frames, frames per second). Atari: every emulator frame, raw RGB 210x160
    at 60 fps; Procgen (on options.levels): the 64x64 frames the agent sees, 15 fps; other envs (made with
    `options`): their own rgb_array renderer, else (image observations) the env's own images, one frame
    per agent step."""
    family = families.by_name(env_name, options.env_kwargs)
    if family is not None and family.open_game is not None:
        return family.open_game(env_name, seed, options)
    env = make_eval_env(env_name, seed, render_mode="rgb_array", options=options)
    obs = env.reset()
    return env, obs, env.rgb().shape[:2], env.fps


def stream_game(policy: ActorCritic, env, obs: Obs | None, sink: Callable[[np.ndarray], None],
                generator: torch.Generator, greedy: bool = False,
                enough: Callable[[], bool] = lambda: False, episode_life: bool = False) -> tuple[float, int, bool]:
    """Play one game of an env from open_game, handing every frame to `sink` ((H, W, 3) uint8) as it
    is drawn, until the game ends or `enough()`. Returns (real score so far, agent steps, finished).
    episode_life: as play_games'."""
    tapped = hasattr(env, "tap")  # an env that hands over every frame it draws (Atari's emulator frames)
    if tapped:
        env.tap(sink)
        obs = env.reset()
    else:
        sink(env.rgb())
    finished, steps, episode, player = False, 0, None, Player(policy, greedy, generator, episode_life)
    while not finished and not enough():
        obs, _reward, _done, episode = env.step(player(obs))
        player.after_step(env, episode)
        steps += 1
        finished = episode is not None
        if not tapped and not finished:  # a finished GymEnv has already reset: skip that frame
            sink(env.rgb())
    return (episode.ret if finished else env.ep_return), steps, finished


def fmt_score(score: float) -> str:
    """A game score as text: whole numbers without a decimal point or exponent (1234567, -21)."""
    return str(int(score)) if float(score).is_integer() else f"{score:.2f}"
