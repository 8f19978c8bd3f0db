"""Atari environments on gymnasium + ale-py with the DeepMind preprocessing.

The preprocessing of baselines' `make_atari` + `wrap_deepmind`, fused into one class that drives the
emulator (`ale_py.ALEInterface`) directly, so no RGB frame is built for the 3 of 4 skipped frames:

    reset: 1..30 random no-ops, then FIRE (where the game has it)
    step:  repeat the action for 4 frames, max over the last two frames, grayscale, 84x84 (INTER_AREA)
    train: a lost life ends the agent's episode (not the game) and starts the frame stack afresh
           (--no-episode_life: only the game's end does); the trainer sign-clips the rewards (--clip_reward)
    obs:   the last 4 frames, oldest first: (4, 84, 84) uint8 (the first frame repeated at a start)

Episode statistics are always those of the real game: all lives, unclipped score, real length.

Procgen games (Cobbe et al., 2020), `--env_name procgen:<game>` where the `procgen-gym` package is
installed: (3, 64, 64) uint8 RGB observations (one frame, no stacking, no frame skip), 15 actions,
rewards as the game gives them; training on `num_levels` levels from `start_level`, evaluation on
the levels after them (ProcgenLevels).

Any other gymnasium env, named by id, `module:EnvId` or `package.module:callable` (ppo1.envref): image
observations get ppo1.pixels' PixelEnv, vector observations GymEnv. `env_family` says which of the four
families an env is, for the presets and the modes.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import cv2
import numpy as np
import torch

from ppo1 import PPO1Error
from ppo1.actions import check_action_space, env_action, head_size

FRAME_SKIP = 4
FRAME_SIZE = 84
FRAME_STACK = 4
NOOP_MAX = 30
MAX_EPISODE_FRAMES = 108_000


def load_gymnasium():
    """Import gymnasium with the ALE envs registered (ROMs ship inside ale-py)."""
    import ale_py
    import gymnasium

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner on every ROM load
    gymnasium.register_envs(ale_py)
    return gymnasium


def env_spec(env_id: str):
    """The gymnasium EnvSpec of `env_id`; PPO1Error naming the id if it is unknown."""
    gymnasium = load_gymnasium()
    try:
        return gymnasium.spec(env_id)
    except gymnasium.error.Error as e:
        raise PPO1Error(f"--env_name={env_id!r} is not a known environment id ({e}); "
                        "use e.g. PongNoFrameskip-v4, ALE/Pong-v5, CartPole-v1, module:EnvId (a package that "
                        "registers EnvId on import) or package.module:make_env (a factory)") from None


def is_atari(env_id: str) -> bool:
    """True for ids of ale-py's Atari games (which get the DeepMind preprocessing and a CNN)."""
    if is_procgen(env_id):
        return False
    from ppo1.envref import resolve
    gym_id = resolve(env_id).gym_id  # None for a factory (package.module:callable)
    return gym_id is not None and str(env_spec(gym_id).entry_point).startswith("ale_py")


def env_family(env_name: str, env_kwargs: str = "{}", obs_key: str = "") -> str:
    """The family of an env, which decides its preprocessing, policy and presets: `atari` (DeepMind
    preprocessing), `procgen`, `pixels` (any other env with image observations, ppo1.pixels) or `vector`
    (GymEnv). The last two are told apart by the env's observation space, so such an env is made (and
    closed) here. Raises PPO1Error for an env ppo1 cannot name, make or train (its spaces)."""
    family = named_family(env_name, env_kwargs)
    if family is not None:
        return family
    from ppo1.envref import resolve
    env = resolve(env_name, env_kwargs).make()
    try:
        family = observation_family(env.observation_space, env_name)
        if family == "pixels":
            from ppo1.pixels import check_spaces
            check_spaces(env_name, env.observation_space, env.action_space, obs_key)
        return family
    finally:
        env.close()


def named_family(env_name: str, env_kwargs: str = "{}") -> str | None:
    """`atari` or `procgen` where the name says so (no env is made), else None. Raises PPO1Error for
    --env_kwargs given to them (their envs take none)."""
    if not (is_procgen(env_name) or is_atari(env_name)):
        return None
    from ppo1.envref import parse_env_kwargs
    if parse_env_kwargs(env_kwargs):
        raise PPO1Error(f"--env_kwargs is for envs other than Atari and Procgen games, not {env_name}")
    return "procgen" if is_procgen(env_name) else "atari"


def observation_family(space, env_name: str) -> str:
    """`pixels` for image observations, `vector` for vector observations; PPO1Error naming any other space."""
    import gymnasium
    from ppo1.pixels import is_image_space

    if is_image_space(space) or (isinstance(space, gymnasium.spaces.Dict)
                                 and any(is_image_space(s) for s in space.spaces.values())):
        return "pixels"
    if isinstance(space, gymnasium.spaces.Box) and len(space.shape) == 1:
        return "vector"
    raise PPO1Error(f"--env_name={env_name!r} has observations {space}: ppo1 trains image observations (a Box of "
                    "uint8, (H, W) or (H, W, C), or a Dict holding one) and vector observations (a 1-D Box)")


# ---------------------------------------------------------------------------------------- Procgen
PROCGEN_PREFIX = "procgen:"
PROCGEN_GAMES = ("bigfish", "bossfight", "caveflyer", "chaser", "climber", "coinrun", "dodgeball", "fruitbot",
                 "heist", "jumper", "leaper", "maze", "miner", "ninja", "plunder", "starpilot")
PROCGEN_SHAPE = (3, 64, 64)
PROCGEN_FPS = 15  # the Procgen games' own frame rate (one frame per agent step)
PROCGEN_INSTALL = "pip install procgen-gym (Python 3.13 or newer: make venv PYTHON=python3.13)"


def is_procgen(env_id: str) -> bool:
    """True for `procgen:<game>` ids."""
    return isinstance(env_id, str) and env_id.startswith(PROCGEN_PREFIX)


def procgen_game(env_id: str) -> str:
    """The game of a `procgen:<game>` id; PPO1Error for a game Procgen does not have."""
    game = env_id[len(PROCGEN_PREFIX):]
    if game not in PROCGEN_GAMES:
        raise PPO1Error(f"--env_name={env_id!r} is not a Procgen game: use procgen:<game> with one of "
                        f"{', '.join(PROCGEN_GAMES)}")
    return game


def load_procgen(env_id: str):
    """gymnasium with the Procgen games registered; PPO1Error naming what to install when they are not."""
    procgen_game(env_id)
    gymnasium = load_gymnasium()
    try:
        import procgen_gym  # noqa: F401  registers procgen_gym/procgen-<game>-v0
    except ImportError:
        raise PPO1Error(f"--env_name={env_id!r} needs the Procgen games, which are not installed: "
                        f"{PROCGEN_INSTALL}") from None
    return gymnasium


@dataclasses.dataclass(frozen=True)
class ProcgenLevels:
    """Which Procgen levels an env draws: `num_levels` from `start_level` (0 = every level), in
    `distribution_mode` (easy, hard, ...)."""

    num_levels: int = 0
    start_level: int = 0
    distribution_mode: str = "easy"

    @classmethod
    def training(cls, config) -> "ProcgenLevels":
        """The run's training levels (--num_levels from --start_level)."""
        return cls(config.num_levels, config.start_level, config.distribution_mode)

    @classmethod
    def unseen(cls, config) -> "ProcgenLevels":
        """Evaluation: every level after the training ones (the Procgen paper's test levels); all
        levels when training used all (--num_levels 0)."""
        if config.num_levels == 0:
            return cls.training(config)
        return cls(0, config.start_level + config.num_levels, config.distribution_mode)


class ProcgenEnv:
    """One Procgen game with the AtariEnv interface: obs (3, 64, 64) uint8 (CHW), raw rewards, an
    episode ends when the game does (the level is won or lost, or its time runs out) and a new level
    starts at once. Episode statistics are the game's returns and lengths."""

    def __init__(self, env_id: str, seed: np.random.SeedSequence, levels: ProcgenLevels | None = None):
        gymnasium = load_procgen(env_id)
        levels = levels or ProcgenLevels()
        self.env_id = env_id
        self.levels = levels
        self._seed = int(seed.generate_state(1)[0] % (2**31 - 1))
        try:
            self.gym_env = gymnasium.make(f"procgen_gym/procgen-{procgen_game(env_id)}-v0", num_levels=levels.num_levels,
                                          start_level=levels.start_level, distribution_mode=levels.distribution_mode,
                                          rand_seed=self._seed)
        except OSError as e:  # its C++ library loads with ctypes: a system library it links is missing
            raise PPO1Error(f"--env_name={env_id!r}: Procgen's game library cannot load ({e}); it needs the "
                            f"system's libGL and glib (Debian/Ubuntu: apt-get install libgl1 libglib2.0-0)") from None
        self.action_space = self.gym_env.action_space
        self.num_actions = int(self.action_space.n)
        self.obs_shape = PROCGEN_SHAPE
        self.fps = PROCGEN_FPS
        self._frame = np.zeros(PROCGEN_SHAPE[1:] + PROCGEN_SHAPE[:1], np.uint8)  # (64, 64, 3): the last frame
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        self.level_seed = -1

    def _obs(self, frame) -> np.ndarray:
        """(64, 64, 3) RGB -> (3, 64, 64); keeps the frame for rgb()."""
        self._frame[:] = frame
        return np.ascontiguousarray(self._frame.transpose(2, 0, 1))

    def reset(self) -> np.ndarray:
        """Start a new level. Returns obs (3, 64, 64) uint8."""
        obs, info = self.gym_env.reset(seed=self._seed)
        self.level_seed = int(info.get("level_seed", -1))  # the level being played (its seed)
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        return self._obs(obs)

    def step(self, action) -> tuple[np.ndarray, float, bool, Episode | None]:
        """(obs, reward, done, episode) as AtariEnv.step; after done, obs starts the next level."""
        obs, reward, terminated, truncated, info = self.gym_env.step(int(action))
        self.ep_return += float(reward)
        self.ep_length += 1
        episode = None
        if terminated or truncated:  # the game has moved on to its next level by itself
            episode = Episode(self.ep_return, self.ep_length, time.time() - self.ep_start,
                              bool(truncated and not terminated))
            self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        self.level_seed = int(info.get("level_seed", -1))
        return self._obs(obs), float(reward), episode is not None, episode

    def get_state(self) -> None:
        """Procgen games are not snapshotted: a resumed run starts new levels."""
        return None

    def rgb(self) -> np.ndarray:
        """The frame the agent sees, (64, 64, 3) uint8, for videos."""
        return self._frame.copy()

    def close(self) -> None:
        self.gym_env.close()


def make_ale_env(env_id: str, render_mode: str | None = None):
    """Create the raw gymnasium AtariEnv for `env_id` with frameskip 1 (we skip frames ourselves).

    `<Game>NoFrameskip-v4` keeps its deterministic actions; `ALE/<Game>-v5` keeps its sticky actions
    (repeat_action_probability 0.25). Raises PPO1Error for an id that is unknown or not an Atari game.
    """
    gymnasium = load_gymnasium()
    if not is_atari(env_id):
        raise PPO1Error(f"--env_name={env_id!r} is not an Atari game; use an id such as PongNoFrameskip-v4 "
                        "or ALE/Pong-v5")
    kwargs: dict[str, Any] = {"frameskip": 1, "max_num_frames_per_episode": MAX_EPISODE_FRAMES}
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    return gymnasium.make(env_id, disable_env_checker=True, **kwargs).unwrapped


def env_seed(seed: int, rank: int, index: int) -> np.random.SeedSequence:
    """A distinct seed sequence for env `index` of rank `rank` of a run seeded with `seed`."""
    return np.random.SeedSequence([seed, rank, index])


@dataclasses.dataclass
class Episode:
    """One finished real game: unclipped score over all lives, length in agent steps, wall time."""

    ret: float
    length: int
    time: float
    truncated: bool = False  # cut by the 108,000-frame limit rather than ended by the game


class AtariEnv:
    """One Atari game with the DeepMind preprocessing; see the module docstring.

    `episode_life=True` (training's default) ends the agent's episode at a lost life; `episode_life=False`
    plays whole games, as play and movie do. Rewards are always the game's own (training clips them).
    """

    def __init__(self, env_id: str, seed: np.random.SeedSequence, episode_life: bool = True,
                 render_mode: str | None = None):
        self.env_id = env_id
        self.episode_life = episode_life
        self.gym_env = make_ale_env(env_id, render_mode=render_mode)
        ale_seed, noop_seed = seed.spawn(2)
        self.gym_env.reset(seed=int(ale_seed.generate_state(1)[0] % (2**31 - 1)))
        self.ale = self.gym_env.ale
        self.action_set = list(self.gym_env._action_set)
        self.num_actions = len(self.action_set)
        self.action_space = self.gym_env.action_space
        self.obs_shape = (FRAME_STACK, FRAME_SIZE, FRAME_SIZE)
        meanings = self.gym_env.get_action_meanings()
        self.has_fire = len(meanings) >= 3 and meanings[1] == "FIRE"
        self.rng = np.random.default_rng(noop_seed)
        h, w = self.ale.getScreenDims()
        self._raw = np.zeros((2, h, w), np.uint8)                  # last two grayscale frames
        self.stack = np.zeros((FRAME_STACK, FRAME_SIZE, FRAME_SIZE), np.uint8)
        self.lives = 0
        self.ep_return = 0.0
        self.ep_length = 0
        self.ep_start = time.time()

    # ---------------------------------------------------------------- emulator
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
    def reset(self) -> np.ndarray:
        """Start a new real game. Returns obs (4, 84, 84) uint8, the first frame repeated."""
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
        if not (self.has_fire and not over):
            # no agent-sized step ran: the first frame is the last screen (baselines' NoopReset)
            self.ale.getScreenGrayscale(self._raw[0])
            self._raw[1] = self._raw[0]
        # else FIRE's 4-frame steps left the last two screens in _raw: their max, as baselines' FireReset
        self.stack[:] = self._frame()
        self.lives = self.ale.lives()
        return self.stack

    def step(self, action: int) -> tuple[np.ndarray, float, bool, Episode | None]:
        """Take one agent step.

        Returns (obs, reward, done, episode): reward is the game's own; done is True when the agent's
        episode ended (a lost life with episode_life, else game over); episode is the
        finished real game or None. When done, `obs` is already the first observation of what
        follows (auto-reset). As in baselines, a game cut by the 108,000-frame limit counts as done.
        """
        reward, over = self._skip(action)
        self.ep_return += reward
        self.ep_length += 1
        lives = self.ale.lives()
        life_lost = self.episode_life and 0 < lives < self.lives
        self.lives = lives
        episode = None
        if over:
            episode = Episode(self.ep_return, self.ep_length, time.time() - self.ep_start,
                              bool(self.ale.game_truncated()))
            obs = self.reset()
        elif life_lost:  # a new agent episode: the stack starts afresh from its first frame (CleanRL's
            self._start()  # FrameStack refills it at the reset that follows a lost life)
            self.stack[:] = self._frame()
            obs = self.stack
        else:
            self._push(self._frame())
            obs = self.stack
        return obs, reward, over or life_lost, episode

    def get_state(self) -> dict:
        """Everything needed to continue this game exactly: emulator (with its RNG), no-op RNG, frames,
        lives and the running real-game statistics. Only tensors, bytes and plain values (weights_only-safe)."""
        return {"ale": self.ale.cloneState(include_rng=True).serialize(),
                "rng": self.rng.bit_generator.state, "stack": torch.from_numpy(self.stack.copy()),
                "lives": self.lives, "ep_return": self.ep_return, "ep_length": self.ep_length}

    def set_state(self, state: dict) -> np.ndarray:
        """Restore what get_state() returned. Returns the current observation (4, 84, 84) uint8."""
        import ale_py
        self.ale.restoreState(ale_py.ALEState(state["ale"]))
        self.rng.bit_generator.state = state["rng"]
        self.stack[:] = state["stack"].numpy()
        self.lives, self.ep_return, self.ep_length = state["lives"], state["ep_return"], state["ep_length"]
        self.ep_start = time.time()
        return self.stack

    def rgb(self) -> np.ndarray:
        """The current emulator screen as RGB: (210, 160, 3) uint8."""
        return self.ale.getScreenRGB()

    def close(self) -> None:
        self.gym_env.close()


class VecEnv:
    """k envs of one rank (AtariEnv or GymEnv), stepped together so the policy runs one batched forward pass."""

    def __init__(self, envs: list, obs_dtype):
        self.envs = envs
        self.num_envs = len(envs)
        self.num_actions = envs[0].num_actions
        self.action_space = envs[0].action_space
        self.vec_dim = getattr(envs[0], "vec_dim", 0)  # numbers packed into the images' last channel (pixels)
        self.obs = np.zeros((self.num_envs, *envs[0].obs_shape), obs_dtype)
        self.cut: dict[int, np.ndarray] = {}

    def reset(self) -> np.ndarray:
        """Reset all envs. Returns obs (k, *obs_shape) (a buffer reused across calls)."""
        for i, env in enumerate(self.envs):
            self.obs[i] = env.reset()
        return self.obs

    def step(self, actions: np.ndarray):
        """Step every env with actions (k, ...). Returns (obs (k, *obs_shape), rewards (k,) float32,
        dones (k,) bool, finished episodes [Episode]). `cut` is then {env index: the last observation}
        of the episodes this step cut by a time limit (envs with `cut_obs`; Atari's 108,000-frame cut
        stays terminal, as in baselines)."""
        k = self.num_envs
        rewards = np.zeros(k, np.float32)
        dones = np.zeros(k, bool)
        episodes = []
        self.cut = {}
        for i, env in enumerate(self.envs):
            self.obs[i], rewards[i], dones[i], ep = env.step(actions[i])
            if ep is not None:
                episodes.append(ep)
            if getattr(env, "cut_obs", None) is not None:
                self.cut[i] = env.cut_obs
        return self.obs, rewards, dones, episodes

    def get_state(self) -> list[dict] | None:
        """Every env's state, or None when the envs cannot be snapshotted (GymEnv)."""
        states = [env.get_state() for env in self.envs]
        return None if any(st is None for st in states) else states

    def set_state(self, states: list[dict]) -> np.ndarray:
        """Restore every env; returns the current observations (k, *obs_shape)."""
        for i, (env, state) in enumerate(zip(self.envs, states, strict=True)):
            self.obs[i] = env.set_state(state)
        return self.obs

    def close(self) -> None:
        for env in self.envs:
            env.close()


class VecAtari(VecEnv):
    """k AtariEnvs of one rank: obs (k, 4, 84, 84) uint8."""

    def __init__(self, env_id: str, num_envs: int, seed: int, rank: int, episode_life: bool = True):
        super().__init__([AtariEnv(env_id, env_seed(seed, rank, i), episode_life=episode_life) for i in range(num_envs)],
                         np.uint8)


class GymEnv:
    """One gymnasium env with vector observations (classic control, MuJoCo; any id or factory of
    ppo1.envref, made with --env_kwargs), the AtariEnv interface.

    No preprocessing besides float32 observations and Box actions clipped to their bounds (MultiDiscrete and
    MultiBinary actions: integer vectors, ppo1.actions.env_action); rewards
    are not clipped; an episode ends when the env terminates or is truncated, and the env is reset at
    once (or after --max_episode_steps steps). An episode cut by a time limit (truncated, not terminated) leaves its last observation in
    `cut_obs` for that step, so training bootstraps from its value. The episode statistics are the
    env's own returns and lengths.
    """

    def __init__(self, env_id: str, seed: np.random.SeedSequence, render_mode: str | None = None,
                 env_kwargs: str = "{}", gym_env=None, max_episode_steps: int = 0):
        """gym_env: the env already made (by make_gym_env), else it is made from env_id and env_kwargs;
        max_episode_steps: a time limit in steps (0 = the env's own)."""
        from ppo1.envref import resolve
        gymnasium = load_gymnasium()
        if gym_env is None:
            offscreen(render_mode)
            gym_env = resolve(env_id, env_kwargs).make(render_mode)
        self.gym_env = gym_env
        self.observation_space = self.gym_env.observation_space
        self.action_space = self.gym_env.action_space
        if not isinstance(self.observation_space, gymnasium.spaces.Box) or len(self.observation_space.shape) != 1:
            self.gym_env.close()
            family = observation_family(self.observation_space, env_id)  # PPO1Error naming any other space
            raise PPO1Error(f"--env_name={env_id!r} has {family} observations, not vectors (make_vec_env gives it "
                            "a PixelEnv)")
        try:
            check_action_space(env_id, self.action_space, box=True)
        except PPO1Error:
            self.gym_env.close()
            raise
        self.num_actions = head_size(self.action_space)
        self.obs_shape = tuple(self.observation_space.shape)
        self._box = isinstance(self.action_space, gymnasium.spaces.Box)
        self._seed = int(seed.generate_state(1)[0] % (2**31 - 1))
        self.max_episode_steps = max_episode_steps
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        self.cut_obs: np.ndarray | None = None  # the last observation of an episode the last step cut

    def reset(self) -> np.ndarray:
        """Start a new (seeded) episode. Returns obs (D,) float32."""
        obs, _ = self.gym_env.reset(seed=self._seed)
        self.action_space.seed(self._seed)
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        return np.asarray(obs, np.float32)

    def step(self, action) -> tuple[np.ndarray, float, bool, Episode | None]:
        """(obs, reward, done, episode) as AtariEnv.step; after done, obs starts the next episode."""
        a = np.clip(action, self.action_space.low, self.action_space.high) if self._box else env_action(
            self.action_space, action)
        obs, reward, terminated, truncated, _ = self.gym_env.step(a)
        self.ep_return += float(reward)
        self.ep_length += 1
        truncated = truncated or time_limit(self.ep_length, self.max_episode_steps)
        episode = None
        self.cut_obs = np.asarray(obs, np.float32) if truncated and not terminated else None
        if terminated or truncated:
            episode = Episode(self.ep_return, self.ep_length, time.time() - self.ep_start,
                              bool(truncated and not terminated))
            obs, _ = self.gym_env.reset()
            self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        return np.asarray(obs, np.float32), float(reward), episode is not None, episode

    def get_state(self) -> None:
        """General gymnasium envs cannot be snapshotted: a resumed run starts new episodes."""
        return None

    @property
    def fps(self) -> int:
        """Frames per second of the env's own rendering (one frame per step)."""
        return int(self.gym_env.metadata.get("render_fps") or 30)

    def rgb(self) -> np.ndarray:
        """The env's rendered frame (H, W, 3) uint8 (needs render_mode='rgb_array')."""
        try:
            frame = self.gym_env.render()
        except Exception as e:  # a missing renderer (pygame, OpenGL) surfaces only here
            raise PPO1Error(f"{self.gym_env.spec.id} cannot render frames: {type(e).__name__}: {e}".splitlines()[0])
        return np.asarray(frame, np.uint8)

    def close(self) -> None:
        self.gym_env.close()


def offscreen(render_mode: str | None) -> None:
    """Let envs render rgb_array frames without a display (MuJoCo through EGL, pygame's dummy driver)."""
    if render_mode == "rgb_array":
        os.environ.setdefault("MUJOCO_GL", "egl")  # MuJoCo renders off-screen without a display
        if not os.environ.get("DISPLAY"):
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame (classic control) likewise


def time_limit(length: int, max_episode_steps: int) -> bool:
    """Whether an episode of `length` steps has reached --max_episode_steps (0 = no limit of ppo1's)."""
    return 0 < max_episode_steps <= length


@dataclasses.dataclass(frozen=True)
class EnvOptions:
    """What makes an env besides its name: --env_kwargs (a JSON object string, for envs other than Atari and
    Procgen), the image preprocessing of the `pixels` family (ppo1.pixels.Frames; None = its defaults),
    --max_episode_steps (other than Atari and Procgen) and --episode_life (Atari training)."""

    env_kwargs: str = "{}"
    frames: Any = None
    max_episode_steps: int = 0
    episode_life: bool = True

    @classmethod
    def of(cls, config) -> "EnvOptions":
        """The run's options, from its Config."""
        from ppo1.pixels import Frames
        return cls(config.env_kwargs, Frames.of(config), config.max_episode_steps, config.episode_life)


class VecGym(VecEnv):
    """k GymEnvs of one rank: obs (k, D) float32."""

    def __init__(self, envs: list[GymEnv]):
        super().__init__(envs, np.float32)
        self.observation_space = self.envs[0].observation_space


class VecPixels(VecEnv):
    """k PixelEnvs of one rank (ppo1.pixels): obs (k, stack x C, N, N) uint8."""

    def __init__(self, envs: list):
        super().__init__(envs, np.uint8)


def make_gym_env(env_id: str, seed: np.random.SeedSequence, render_mode: str | None = None,
                 options: EnvOptions = EnvOptions()):
    """One env other than Atari and Procgen, made once and wrapped by its observations: PixelEnv (images,
    preprocessed by options.frames) or GymEnv (vectors). Raises PPO1Error for an env ppo1 cannot make or
    train."""
    from ppo1.envref import resolve
    from ppo1.pixels import Frames, PixelEnv

    ref = resolve(env_id, options.env_kwargs)
    offscreen(render_mode)
    gym_env = ref.make(render_mode)
    try:
        if observation_family(gym_env.observation_space, env_id) == "pixels":
            return PixelEnv(ref, seed, options.frames or Frames(), gym_env=gym_env,
                            max_episode_steps=options.max_episode_steps)
        return GymEnv(env_id, seed, gym_env=gym_env, max_episode_steps=options.max_episode_steps)
    except BaseException:
        gym_env.close()
        raise


class VecProcgen(VecEnv):
    """k ProcgenEnvs of one rank: obs (k, 3, 64, 64) uint8."""

    def __init__(self, env_id: str, num_envs: int, seed: int, rank: int, levels: ProcgenLevels | None = None):
        super().__init__([ProcgenEnv(env_id, env_seed(seed, rank, i), levels) for i in range(num_envs)], np.uint8)


def make_vec_env(env_id: str, num_envs: int, seed: int, rank: int, levels: ProcgenLevels | None = None,
                 options: EnvOptions = EnvOptions()):
    """VecAtari (DeepMind preprocessing) for Atari ids, VecProcgen for `procgen:<game>` (on `levels`),
    VecPixels for other envs with image observations, VecGym for envs with vector observations."""
    family = named_family(env_id, options.env_kwargs)
    if family == "procgen":
        return VecProcgen(env_id, num_envs, seed, rank, levels)
    if family == "atari":
        return VecAtari(env_id, num_envs, seed, rank, options.episode_life)
    envs: list = []
    try:
        for i in range(num_envs):
            envs.append(make_gym_env(env_id, env_seed(seed, rank, i), options=options))
    except BaseException:
        for env in envs:
            env.close()
        raise
    return VecGym(envs) if isinstance(envs[0], GymEnv) else VecPixels(envs)


def make_eval_env(env_id: str, seed: np.random.SeedSequence, render_mode: str | None = None,
                  levels: ProcgenLevels | None = None, options: EnvOptions = EnvOptions()):
    """One env that plays whole games with real scores: AtariEnv(episode_life=False), ProcgenEnv (on
    `levels`: evaluation passes the unseen ones), PixelEnv or GymEnv."""
    family = named_family(env_id, options.env_kwargs)
    if family == "procgen":
        return ProcgenEnv(env_id, seed, levels)
    if family == "atari":
        return AtariEnv(env_id, seed, episode_life=False, render_mode=render_mode)
    return make_gym_env(env_id, seed, render_mode, options)
