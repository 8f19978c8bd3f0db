"""The `atari` family: gymnasium + ale-py games with the DeepMind preprocessing.

The preprocessing of baselines' `make_atari` + `wrap_deepmind`, fused into one class that drives the
emulator (`ale_py.ALEInterface`) directly, so no RGB frame is built for the 3 of 4 skipped frames:

    reset: 1..30 random no-ops, then FIRE (where the game has it)
    step:  repeat the action for 4 frames, max over the last two frames, grayscale, 84x84 (INTER_AREA)
    train: a lost life ends the agent's episode (not the game) and starts the frame stack afresh
           (--no-episode_life: only the game's end does); the trainer sign-clips the rewards (--clip_reward)
    obs:   the last 4 frames, oldest first: (4, 84, 84) uint8 (the first frame repeated at a start); with
           --rnn, --frame_stack N frames ((1, 84, 84): memory in the policy instead of a stack)

Episode statistics are always those of the real game: all lives, unclipped score, real length.
"""
from __future__ import annotations

import functools
import time
from typing import Any

import cv2
import numpy as np
import torch

from ppo1.errors import PPO1Error
from ppo1.envs.base import Episode, env_call, env_spec, seeded_envs
from ppo1.envs.family import Family
from ppo1.observations import IMAGE, Obs, ObsSpec
from ppo1.envs.procgen import is_procgen
from ppo1.envs.ref import resolve
from ppo1.envs.vecenv import VecEnv

FRAME_SKIP = 4
FRAME_SIZE = 84
FRAME_STACK = 4
NOOP_MAX = 30
MAX_EPISODE_FRAMES = 108_000
FPS = 60  # emulator frames per second (NTSC): a recorded Atari game runs in real time at this rate


def ale_spec(env_id: str):
    """The gymnasium EnvSpec of an ale-py Atari game's id (also as module:EnvId), None for any other id."""
    if is_procgen(env_id):
        return None
    gym_id = resolve(env_id).gym_id  # None for a factory (package.module:callable)
    if gym_id is None:
        return None
    spec = env_spec(gym_id)
    return spec if str(spec.entry_point).startswith("ale_py") else None


def is_atari(env_id: str) -> bool:
    """True for ids of ale-py's Atari games (which get the DeepMind preprocessing and a CNN)."""
    return ale_spec(env_id) is not None


def make_ale_env(env_id: str, render_mode: str | None = None, seed: int | None = None):
    """Create the raw gymnasium AtariEnv for `env_id` with frameskip 1 (we skip frames ourselves), its emulator
    seeded with `seed` (None: at random) before the ROM is loaded.

    `<Game>NoFrameskip-v4` keeps its deterministic actions; `ALE/<Game>-v5` keeps its sticky actions
    (repeat_action_probability 0.25). Raises PPO1Error for an id that is unknown or not an Atari game.
    """
    spec = ale_spec(env_id)
    if spec is None:
        raise PPO1Error(f"--env_name={env_id!r} is not an Atari game; use an id such as PongNoFrameskip-v4 "
                        "or ALE/Pong-v5")
    kwargs: dict[str, Any] = {"frameskip": 1, "max_num_frames_per_episode": MAX_EPISODE_FRAMES}
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    return _seeded_atari_class()(seed, **{**spec.kwargs, **kwargs})


@functools.cache
def _seeded_atari_class() -> type:
    """ale-py's AtariEnv, seeded before its one ROM load. ale-py's own loads the ROM in __init__ with a random
    seed and again at reset(seed=...), and a load is most of the ~0.2 s that making a game costs."""
    from ale_py.env import AtariEnv as AleAtariEnv

    class SeededAtariEnv(AleAtariEnv):
        def __init__(self, seed: int | None, **kwargs):
            self._first_seed = seed
            super().__init__(**kwargs)  # calls seed_game() then load_game()

        def seed_game(self, seed: int | None = None):
            if seed is None:
                seed, self._first_seed = self._first_seed, None
            return super().seed_game(seed)

    return SeededAtariEnv


class AtariEnv:
    """One Atari game with the DeepMind preprocessing; see the module docstring.

    `episode_life=True` (training's default) ends the agent's episode at a lost life; `episode_life=False`
    plays whole games, as play and movie do. Rewards are always the game's own (training clips them).
    """

    cut_note = " (cut at the 108,000-frame limit)"  # how play names a game cut short

    def __init__(self, env_id: str, seed: np.random.SeedSequence, episode_life: bool = True,
                 render_mode: str | None = None, stack: int = FRAME_STACK):
        self.env_id = env_id
        self.episode_life = episode_life
        ale_seed, noop_seed = seed.spawn(2)
        self.gym_env = make_ale_env(env_id, render_mode=render_mode,
                                    seed=int(ale_seed.generate_state(1)[0] % (2**31 - 1)))
        self.gym_env.reset()
        self.ale = self.gym_env.ale
        self.action_set = list(self.gym_env._action_set)
        self.num_actions = len(self.action_set)
        self.action_space = self.gym_env.action_space
        self.obs_spec = ObsSpec.of({IMAGE: (stack, FRAME_SIZE, FRAME_SIZE)})
        self.stacked = stack > 1  # a stack of gray frames, one channel each
        meanings = self.gym_env.get_action_meanings()
        self.has_fire = len(meanings) >= 3 and meanings[1] == "FIRE"
        self.rng = np.random.default_rng(noop_seed)
        h, w = self.ale.getScreenDims()
        self._raw = np.zeros((2, h, w), np.uint8)                  # last two grayscale frames
        self.stack = np.zeros((stack, FRAME_SIZE, FRAME_SIZE), np.uint8)
        self.observation = Obs({IMAGE: self.stack})  # what reset and step return: the stack, by name
        self.lives = 0
        self.life_lost = False  # the last step lost a life and the game goes on (what play tells the Player)
        self.ep_return = 0.0
        self.ep_length = 0
        self.ep_start = time.time()

    # ---------------------------------------------------------------- emulator
    def reads(self) -> str:
        """What the policy reads, in words (VecEnv.reads): the DeepMind preprocessing of the emulator's screen."""
        n = len(self.stack)
        return (f"{IMAGE} ({n}, {FRAME_SIZE}, {FRAME_SIZE}): the emulator's screen, each action repeated for "
                f"{FRAME_SKIP} frames and the last 2 maxed, gray, resized to {FRAME_SIZE}x{FRAME_SIZE}, {n} frame"
                f"{'s' if n > 1 else ''}; up to {NOOP_MAX} no-ops at a start" + (", then FIRE" if self.has_fire else "")
                + ("; a lost life ends the agent's episode" if self.episode_life else ""))

    def _skip(self, action: int) -> tuple[float, bool]:
        """Repeat `action` for 4 frames; grab the last two screens. Returns (raw reward, game over)."""
        ale, a = self.ale, self.action_set[action]
        reward = 0.0
        for i in range(FRAME_SKIP):
            reward += ale.act(a)
            if i >= FRAME_SKIP - 2:
                ale.getScreenGrayscale(self._raw[i - (FRAME_SKIP - 2)])
            if ale.game_over():  # the screen no longer matters: the game is reset next
                return reward, True
        return reward, False

    def _frame(self) -> np.ndarray:
        """The max over the last two screens, resized to 84x84: (84, 84) uint8."""
        frame = np.maximum(self._raw[0], self._raw[1])
        return cv2.resize(frame, (FRAME_SIZE, FRAME_SIZE), interpolation=cv2.INTER_AREA)

    def _push(self, frame: np.ndarray) -> None:
        self.stack[:-1] = self.stack[1:]
        self.stack[-1] = frame

    def _internal_step(self, action: int) -> bool:
        """A step the agent does not choose (reset no-ops/FIRE): counts toward the real score."""
        r, over = self._skip(action)
        self.ep_return += r
        return over

    def _start(self) -> None:
        """What baselines' EpisodicLife + FireReset do after a lost life: NOOP, then FIRE, RIGHT."""
        self._internal_step(0)
        if self.has_fire:
            self._internal_step(1)
            self._internal_step(2)

    # ---------------------------------------------------------------- API
    def reset(self) -> Obs:
        """Start a new real game. Returns obs: "image" (4, 84, 84) uint8, the first frame repeated."""
        over = env_call(self._new_game)
        if not (self.has_fire and not over):
            # no agent-sized step ran: the first frame is the last screen (baselines' NoopReset)
            self.ale.getScreenGrayscale(self._raw[0])
            self._raw[1] = self._raw[0]
        # else FIRE's 4-frame steps left the last two screens in _raw: their max, as baselines' FireReset
        self.stack[:] = self._frame()
        self.lives = self.ale.lives()
        self.life_lost = False
        return self.observation

    def _new_game(self) -> bool:
        """The emulator's part of reset: a new game, its random no-ops and FIRE. Returns whether it is over."""
        for _attempt in range(10):
            self.ale.reset_game()
            self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
            over = False
            for _ in range(int(self.rng.integers(1, NOOP_MAX + 1))):  # raw-frame no-ops
                self.ep_return += self.ale.act(self.action_set[0])
                if over := self.ale.game_over():
                    break
            if not over and self.has_fire:
                over = self._internal_step(1) or self._internal_step(2)
            if not over:
                break
        return over

    def step(self, action: int) -> tuple[Obs, float, bool, Episode | None]:
        """Take one agent step.

        Returns (obs, reward, done, episode): reward is the game's own; done is True when the agent's
        episode ended (a lost life with episode_life, else game over); episode is the
        finished real game or None. When done, `obs` is already the first observation of what
        follows (auto-reset). As in baselines, a game cut by the 108,000-frame limit counts as done.
        `life_lost` says whether this step lost a life in a game that goes on, with or without episode_life:
        a whole game played for a run trained with episode_life restarts the policy's memory there.
        """
        reward, over = env_call(self._skip, action)  # the emulator's 4 frames
        self.ep_return += reward
        self.ep_length += 1
        lives = self.ale.lives()
        self.life_lost = not over and 0 < lives < self.lives
        life_lost = self.episode_life and self.life_lost
        self.lives = lives
        episode = None
        if over:
            episode = Episode(self.ep_return, self.ep_length, time.time() - self.ep_start,
                              bool(self.ale.game_truncated()))
            obs = self.reset()
        elif life_lost:  # a new agent episode: the stack starts afresh from its first frame (CleanRL's
            env_call(self._start)  # FrameStack refills it at the reset that follows a lost life)
            self.stack[:] = self._frame()
            obs = self.observation
        else:
            self._push(self._frame())
            obs = self.observation
        return obs, reward, over or life_lost, episode

    def get_state(self) -> dict:
        """Everything needed to continue this game exactly: emulator (with its RNG), no-op RNG, frames,
        lives and the running real-game statistics. Only tensors, bytes and plain values (weights_only-safe)."""
        return {"ale": self.ale.cloneState(include_rng=True).serialize(),
                "rng": self.rng.bit_generator.state, "stack": torch.from_numpy(self.stack.copy()),
                "lives": self.lives, "ep_return": self.ep_return, "ep_length": self.ep_length}

    def set_state(self, state: dict) -> Obs:
        """Restore what get_state() returned. Returns the current observation ("image" (4, 84, 84) uint8)."""
        import ale_py
        self.ale.restoreState(ale_py.ALEState(state["ale"]))
        self.rng.bit_generator.state = state["rng"]
        self.stack[:] = state["stack"].numpy()
        self.lives, self.ep_return, self.ep_length = state["lives"], state["ep_return"], state["ep_length"]
        self.ep_start = time.time()
        return self.observation

    def rgb(self) -> np.ndarray:
        """The current emulator screen as RGB: (210, 160, 3) uint8."""
        return self.ale.getScreenRGB()

    def tap(self, sink) -> None:
        """Hand every emulated frame of the next game (all 4 of each agent step, at FPS) to `sink`, as RGB."""
        self.ale = _FrameTap(self.ale, sink)

    def close(self) -> None:
        self.gym_env.close()


class _FrameTap:
    """Stands in for an AtariEnv's ALEInterface: forwards every call, and hands the RGB screen after
    each emulated frame of the first game started through it to `sink`."""

    def __init__(self, ale: Any, sink):
        self._ale, self._sink, self.games = ale, sink, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ale, name)

    def reset_game(self) -> None:
        self.games += 1
        self._ale.reset_game()

    def act(self, action, *args) -> float:
        reward = self._ale.act(action, *args)
        if self.games == 1:
            self._sink(self._ale.getScreenRGB())
        return reward


class VecAtari(VecEnv):
    """k AtariEnvs of one rank: obs "image" (k, 4, 84, 84) uint8, made by seeded_envs (those made are closed when one
    cannot be)."""

    def __init__(self, env_id: str, num_envs: int, seed: int, rank: int, episode_life: bool = True,
                 stack: int = FRAME_STACK):
        envs, remake, started = seeded_envs(
            lambda seed_seq: AtariEnv(env_id, seed_seq, episode_life=episode_life, stack=stack), num_envs, seed, rank)
        super().__init__(envs, remake, started)


def _claims(env_id: str) -> bool:
    """is_atari, False for a name that names nothing (ppo1.envs.ref.resolve refuses it in its own words)."""
    try:
        return is_atari(env_id)
    except PPO1Error:
        return False


def _open_game(env_id: str, seed: np.random.SeedSequence, options):
    """What movie records: every emulator frame, raw RGB 210x160 at 60 fps (AtariEnv.tap)."""
    env = AtariEnv(env_id, seed, episode_life=False, stack=options.atari_stack)
    return env, None, tuple(env.ale.getScreenDims()), FPS


ATARI_FAMILY = Family(
    "atari", "Atari games", presets=("paper", "fast", "cleanrl", "baselines", "vizdoom"),
    claims=lambda env_id, env_kwargs: _claims(env_id),
    make_vec=lambda env_id, num_envs, seed, rank, options: VecAtari(
        env_id, num_envs, seed, rank, options.episode_life, options.atari_stack),
    make_eval=lambda env_id, seed, render_mode, options: AtariEnv(
        env_id, seed, episode_life=False, render_mode=render_mode, stack=options.atari_stack),
    open_game=_open_game, sign_rewards=True, frame_stack_with_rnn=True,
    frame_flags_why="Atari keeps the DeepMind preprocessing", episode_life=True,
    time_limit_why="Atari cuts a game at 108,000 frames, as baselines", env_kwargs=False, frames_per_step=FRAME_SKIP)
VecAtari.family = ATARI_FAMILY
