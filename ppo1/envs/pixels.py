"""The `pixels` family: any gymnasium env with image observations (other than Atari and Procgen), with the
AtariEnv interface.

An observation that is a Box of uint8, (H, W, C) or (H, W), or a Dict holding such images, becomes what the CNNs
read (ppo1.observations):

    step:   the action repeated --frame_skip times, the rewards summed (fewer where the episode ends first)
    frame:  resized to --frame_size x --frame_size (INTER_AREA; 0 keeps the native size), gray (cv2's ITU-R 601
            luma of RGB) unless --no-frame_gray, channels first. An image smaller than --frame_size on both sides
            (a 7x7 symbolic view) keeps its size and its channels: no upscaling, no gray.
    images: the last --frame_stack frames, oldest first: (stack x channels, N, N) uint8, the first frame
            repeated at a start. One image (an image Box, --obs_key, or a Dict's only image) is the entry
            "image"; a Dict of several images gives one entry each, named by its key (each read by a CNN of its own)
    vector: a Dict's other entries (Box, Discrete, MultiDiscrete, MultiBinary, as ppo1.envs.spaces.to_vector:
            one-hot where discrete), flattened in the Dict's order to the float32 entry "vector" (D,), which the
            CNN policy reads beside its image features (--no-obs_vectors: the images alone)
    mask:   an `action_mask` entry or an `action_masks()` method: the entry "action_mask" (ppo1.envs.masks)

Rewards are the env's own (training may clip or scale them: --clip_reward, --reward_scale). An episode ends
when the env terminates or truncates it, or after --max_episode_steps agent steps, and the env is reset at once; an episode cut by a time limit (truncated, not terminated) leaves its last
observation in `cut_obs` for that step, so training bootstraps from its value (as GymEnv). Such envs cannot
be snapshotted: a resumed run starts new episodes. Actions must be Discrete (the CNNs' categorical head),
MultiDiscrete or MultiBinary (one categorical per dimension; ppo1.actions).
"""
from __future__ import annotations

import dataclasses
import time

import cv2
import numpy as np

from ppo1.errors import PPO1Error, error_line
from ppo1.actions import check_action_space, env_action, head_size
from ppo1.envs.base import (Episode, ResetSeeds, checked_obs, checked_reward, env_call, reset_result, step_result,
                            time_limit)
from ppo1.envs.family import Family
from ppo1.envs.masks import ActionMasks, mask_words, numbers
from ppo1.envs.ref import EnvRef
from ppo1.envs.spaces import has_images, is_image_space, to_vector, vector_size
from ppo1.envs.vecenv import VecEnv
from ppo1.observations import ACTION_MASK, IMAGE, VECTOR, Obs, ObsSpec


@dataclasses.dataclass(frozen=True)
class Frames:
    """The preprocessing of image observations: action repeat, frame size (0 = native), gray, stack."""

    skip: int = 1
    size: int = 84
    gray: bool = True
    stack: int = 4
    key: str = ""  # --obs_key: the image entry of a Dict observation ("" = every image entry)
    vectors: bool = False  # --obs_vectors: a Dict's vector entries go to the network too
    upscale: bool = False  # --frame_upscale: an image smaller than `size` is resized (and grayed) too
    codes: str = "off"  # --frame_codes: auto (codes where the space's high bound says so: looks_like_codes), on, off

    @classmethod
    def of(cls, config) -> "Frames":
        """The run's preprocessing (--frame_skip, --frame_size, --frame_gray, --frame_stack, --obs_key,
        --obs_vectors, --frame_upscale)."""
        return cls(config.frame_skip, config.frame_size, config.frame_gray, config.frame_stack, config.obs_key,
                   config.obs_vectors, config.frame_upscale, config.frame_codes)


def image_key(space, obs_key: str = "", env_name: str = "") -> str | None:
    """Where the image of an observation is: None for an image Box; for a Dict, `obs_key` or, when it is
    empty, the Dict's first image entry. Raises PPO1Error naming the entries when there is none to take."""
    return image_keys(space, obs_key, env_name)[0]


def image_keys(space, obs_key: str = "", env_name: str = "") -> list:
    """The images of an observation the network reads: [None] for an image Box; for a Dict, [obs_key] or, when it
    is empty, every image entry in the Dict's order. Raises PPO1Error naming the entries when there is none."""
    import gymnasium
    if not isinstance(space, gymnasium.spaces.Dict):
        if obs_key:
            raise PPO1Error(f"--obs_key={obs_key!r} is for Dict observations; {env_name} has {space}")
        return [None]
    images = [k for k, s in space.spaces.items() if is_image_space(s)]
    if obs_key:
        if obs_key not in images:
            raise PPO1Error(f"--obs_key={obs_key!r} is not an image entry of {env_name}'s observations {space}: "
                            f"choose from {', '.join(images) or 'none (it has no image entry)'}")
        return [obs_key]
    if not images:
        raise PPO1Error(f"{env_name} has observations {space} with no image entry: ppo1 trains image observations")
    return images


def image_space(space, obs_key: str = "", env_name: str = ""):
    """The (first) image space of an observation space (itself, or the Dict entry image_key takes)."""
    key = image_key(space, obs_key, env_name)
    return space if key is None else space.spaces[key]


def is_vector_space(space) -> bool:
    """Whether a Dict entry is numbers the network can read beside the image: a numeric Box that is not an
    image, Discrete, MultiDiscrete, MultiBinary, or a Tuple or Dict of vectors (to_vector: as the vector family
    reads them, nested too)."""
    import gymnasium
    spaces = gymnasium.spaces
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        return True
    if isinstance(space, (spaces.Tuple, spaces.Dict)):
        return vector_size(space) is not None
    return isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.number) and not is_image_space(space)


def entry_size(space) -> int:
    """How many numbers a vector entry (is_vector_space) is in the vector: a Box's or MultiBinary's values, a
    Discrete's one-hot (n), a MultiDiscrete's one-hots (sum(nvec)), a Tuple's or Dict's entries' (vector_size)."""
    from gymnasium.spaces import Box
    return int(np.prod(space.shape)) if isinstance(space, Box) else vector_size(space)


def vector_keys(space, env_name: str = "") -> list[str]:
    """The vector entries (is_vector_space) of a Dict observation space that are neither images nor its action
    mask, in the Dict's order; [] for an image Box. PPO1Error naming an entry that is none of these (Text, Graph,
    a Tuple holding an image...): the network would never see it."""
    import gymnasium
    if not isinstance(space, gymnasium.spaces.Dict):
        return []
    for key, entry in space.spaces.items():
        if key != ACTION_MASK and not is_image_space(entry) and not is_vector_space(entry):
            raise PPO1Error(f"--env_name={env_name!r} has an observation entry {key!r} of {entry} that ppo1 cannot "
                            f"read beside its images (it reads images and numbers: a Box, Discrete, "
                            "MultiDiscrete, MultiBinary, or a Tuple or Dict of those): wrap the env to drop or encode "
                            "it, or give --no-obs_vectors to train on the images alone")
    return [k for k, s in space.spaces.items() if k != ACTION_MASK and is_vector_space(s)]


def check_spaces(env_name: str, observation_space, action_space, obs_key: str = "") -> None:
    """Raise PPO1Error naming the space unless the observations are images (is_image_space), or a Dict holding
    one (image_key), and the actions Discrete, MultiDiscrete or MultiBinary (ppo1.actions)."""
    if not is_image_space(image_space(observation_space, obs_key, env_name)):
        raise PPO1Error(f"--env_name={env_name!r} has observations {observation_space}: ppo1 trains image "
                        "observations that are a Box of uint8, (H, W) or (H, W, C), or a Dict holding one")
    check_action_space(env_name, action_space)


def frame_channels(channels: int, gray: bool) -> int:
    """The channels of one preprocessed frame of an image with `channels` channels. Raises PPO1Error where
    gray has no meaning (2 or more than 4 channels)."""
    if not gray or channels == 1:
        return channels
    if channels not in (3, 4):
        raise PPO1Error(f"--frame_gray needs images of 1, 3 (RGB) or 4 (RGBA) channels, not {channels}; "
                        "give --no-frame_gray")
    return 1


# The highest value an integer image's space may declare for --frame_codes auto to read it as codes: a symbolic
# grid's object, colour and state ids (MiniGrid's go to 10), far below an intensity's 255.
CODES_MAX_HIGH = 31


def looks_like_codes(space) -> bool:
    """Whether an image space (a Box) holds codes rather than intensities: integer values whose declared high bound
    is at most CODES_MAX_HIGH."""
    return np.issubdtype(space.dtype, np.integer) and int(np.max(space.high)) <= CODES_MAX_HIGH


def as_is(image_shape: tuple[int, ...], frames: Frames) -> Frames:
    """The preprocessing of images of `image_shape`: `frames`, or for an image smaller than --frame_size on both
    sides (a 7x7 symbolic view) its native size and channels (no upscaling, no gray) unless --frame_upscale."""
    if frames.size and not frames.upscale and image_shape[0] < frames.size and image_shape[1] < frames.size:
        return dataclasses.replace(frames, size=0, gray=False)
    return frames


def obs_shape(image_shape: tuple[int, ...], frames: Frames) -> tuple[int, int, int]:
    """(channels, height, width) of the observations the policy reads, for env images of `image_shape`
    ((H, W) or (H, W, C)); an image smaller than --frame_size keeps its size and channels (as_is)."""
    frames = as_is(image_shape, frames)
    h, w = image_shape[:2]
    c = image_shape[2] if len(image_shape) == 3 else 1
    if frames.size:
        h = w = frames.size
    return (frames.stack * frame_channels(c, frames.gray), h, w)


def preprocess(image: np.ndarray, frames: Frames) -> np.ndarray:
    """One env image (H, W) or (H, W, C) uint8 -> one frame (C', N, N) uint8: resized (INTER_AREA),
    gray where asked (C' = 1), channels first (frames as as_is gives them for the image)."""
    image = np.asarray(image, np.uint8)
    if image.ndim == 2:
        image = image[:, :, None]
    if frames.size and image.shape[:2] != (frames.size, frames.size):
        resized = cv2.resize(image, (frames.size, frames.size), interpolation=cv2.INTER_AREA)
        image = resized.reshape(frames.size, frames.size, image.shape[2])  # cv2 drops a channel axis of 1
    if frames.gray and image.shape[2] in (3, 4):
        image = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY if image.shape[2] == 3 else cv2.COLOR_RGBA2GRAY)[:, :, None]
    return np.ascontiguousarray(image.transpose(2, 0, 1))


def push(stack: np.ndarray, frame: np.ndarray) -> None:
    """Shift the frame stack (S x C, N, N) one frame older, in place, and put `frame` (C, N, N) last."""
    c = frame.shape[0]
    stack[:-c] = stack[c:]
    stack[-c:] = frame


def repeat_action(env, action, times: int, env_name: str = "the env") -> tuple[np.ndarray, float, bool, bool]:
    """Step a gymnasium env `times` times with `action`, stopping where the episode ends. Returns (the last
    observation, the sum of the rewards, terminated, truncated)."""
    total = 0.0
    for _ in range(times):
        obs, reward, terminated, truncated, _info = step_result(env_name, env.step(action))
        total += float(reward)
        if terminated or truncated:
            break
    return obs, total, bool(terminated), bool(truncated)


class PixelEnv:
    """One gymnasium env with image observations, preprocessed as the module docstring says: obs of named entries
    (ppo1.observations; `obs_spec`), the env's own rewards, its episodes' returns and lengths (in agent steps)."""

    def __init__(self, ref: EnvRef, seed: np.random.SeedSequence, frames: Frames = Frames(),
                 render_mode: str | None = None, gym_env=None, max_episode_steps: int = 0):
        self.env_id = ref.name
        self.frames = frames
        self.max_episode_steps = max_episode_steps  # --max_episode_steps: agent steps (0 = the env's own limit)
        self.gym_env = gym_env if gym_env is not None else ref.make(render_mode)
        self.observation_space = self.gym_env.observation_space
        self.action_space = self.gym_env.action_space
        try:
            check_spaces(ref.name, self.observation_space, self.action_space, frames.key)
            keys = image_keys(self.observation_space, frames.key, ref.name)
            self.masks = ActionMasks.of(ref.name, self.gym_env)  # None: every action always valid
            self.vector_keys = vector_keys(self.observation_space, ref.name) if frames.vectors else []
        except PPO1Error:
            self.gym_env.close()
            raise
        self.key = keys[0]  # the (first) image's Dict key, None for an image Box
        self.num_actions = head_size(self.action_space)
        # the images read, {entry name: Dict key}: one is "image", several keep their keys
        self.images = {IMAGE: keys[0]} if len(keys) == 1 else {k: k for k in keys}
        self._raw = {name: np.zeros(self._space(key).shape, np.uint8) for name, key in self.images.items()}
        self._frames = {name: as_is(self._space(key).shape, frames) for name, key in self.images.items()}
        # --frame_codes: the images read as codes (auto: where the space's high bound says so), kept as they come
        self.codes = frozenset(name for name, key in self.images.items() if frames.codes == "on" or (
            frames.codes == "auto" and looks_like_codes(self._space(key))))
        for name in self.codes:  # codes are not resized nor grayed (a mean of two ids is no id)
            self._frames[name] = dataclasses.replace(self._frames[name], size=0, gray=False)
        shapes = {name: obs_shape(self._space(key).shape, self._frames[name]) for name, key in self.images.items()}
        size = sum(entry_size(self.observation_space[k]) for k in self.vector_keys)
        self.obs_spec = ObsSpec.of(shapes, vector=size, mask=self.masks.size if self.masks else 0, codes=self.codes)
        first = shapes[next(iter(shapes))]
        self.stacked = frames.stack > 1 and first[0] == frames.stack  # stacks of one-channel frames
        self.obs = self.obs_spec.zeros()  # what the policy reads (reused: VecEnv copies it)
        self.seeds = ResetSeeds(seed)
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        self.cut_obs: Obs | None = None  # the last observation of an episode the last step cut

    def reads(self) -> str:
        """What the policy reads, in words (VecEnv.reads): each image, from which of the env's images and how
        preprocessed, the vector's numbers and their entries, and the mask."""
        parts, shapes = [], {e.name: e.shape for e in self.obs_spec.entries}
        for name, key in self.images.items():
            shape, frames = self._space(key).shape, self._frames[name]
            size = "x".join(map(str, shape))
            how = ("kept at its size" if not frames.size or tuple(shape[:2]) == (frames.size, frames.size)
                   else f"resized to {frames.size}x{frames.size}") + (", gray" if frames.gray and
                                                                      len(shape) == 3 and shape[2] > 1 else "")
            what = "image" if key is None else f"{key!r}"
            codes = (f", as codes (values up to {int(np.max(self._space(key).high))}, not / 255)" if name in self.codes
                     else "")
            parts.append(f"{name} {shapes[name]}: the env's {size} {what} {how}, "
                         f"{frames.stack} frame{'s' if frames.stack > 1 else ''}{codes}")
        if self.vector_keys:
            parts.append(f"{VECTOR} ({self.obs_spec.vector_size},): {numbers(self.obs_spec.vector_size)} of "
                         f"{', '.join(map(repr, self.vector_keys))}")
        return "; ".join(parts + mask_words(self.masks))

    def _space(self, key: str | None):
        return self.observation_space if key is None else self.observation_space.spaces[key]

    def _observe(self, obs, start: bool) -> Obs:
        """The env's observation `obs` into self.obs: each image's newest frame pushed onto its stack (at an
        episode's start the stack filled with it), the vector and the mask. Returns self.obs."""
        for name, key in self.images.items():
            image = obs if key is None else obs[key]
            what = "an image" if key is None else f"an image ({key!r})"
            self._raw[name][:] = checked_obs(self.env_id, image, self._raw[name].shape, image=True, what=what)
            frame = preprocess(self._raw[name], self._frames[name])
            if start:
                self.obs[name][:] = np.tile(frame, (self.frames.stack, 1, 1))
            else:
                push(self.obs[name], frame)
        if self.vector_keys:
            self.obs[VECTOR][:] = np.concatenate([self._entry(obs, k) for k in self.vector_keys])
        if self.masks is not None:
            self.obs[ACTION_MASK][:] = self.masks.read(obs)
        return self.obs

    def _entry(self, obs, key: str) -> np.ndarray:
        """A Dict entry of the vector, checked against its space: a Box's numbers flattened, else to_vector's
        encoding (one-hot where discrete)."""
        import gymnasium
        space = self.observation_space[key]
        if isinstance(space, gymnasium.spaces.Box):
            return checked_obs(self.env_id, obs[key], space.shape, image=False, what=f"an entry {key!r}").ravel()
        return to_vector(self.env_id, space, obs[key])

    def _start(self, obs) -> Obs:
        """A new episode from its first observation."""
        self.ep_return, self.ep_length, self.ep_start = 0.0, 0, time.time()
        return self._observe(obs, start=True)

    def reset(self) -> Obs:
        """Start a new episode, seeded anew at every reset (ResetSeeds). Returns obs, each image's first frame
        repeated."""
        seed = self.seeds.next()
        obs, _ = reset_result(self.env_id, env_call(lambda: self.gym_env.reset(seed=seed)))
        self.action_space.seed(seed)
        return self._start(obs)

    def step(self, action) -> tuple[Obs, float, bool, Episode | None]:
        """(obs, reward, done, episode) as AtariEnv.step: reward is the sum over the repeated frames;
        after done, obs starts the next episode."""
        a = env_action(self.action_space, action)
        obs, reward, terminated, truncated = env_call(repeat_action, self.gym_env, a, self.frames.skip, self.env_id)
        reward = checked_reward(self.env_id, reward)
        self.ep_return += reward
        self.ep_length += 1
        truncated = truncated or time_limit(self.ep_length, self.max_episode_steps)
        self._observe(obs, start=False)
        self.cut_obs = self.obs.copy() if truncated and not terminated else None
        if not (terminated or truncated):
            return self.obs, reward, False, None
        episode = Episode(self.ep_return, self.ep_length, time.time() - self.ep_start,
                          bool(truncated and not terminated))
        obs, _ = reset_result(self.env_id, env_call(self.gym_env.reset))
        return self._start(obs), reward, True, episode

    def get_state(self) -> None:
        """General gymnasium envs cannot be snapshotted: a resumed run starts new episodes."""
        return None

    @property
    def fps(self) -> int:
        """Frames per second of a video with one frame per agent step: the env's render_fps (else 30) over
        the frame skip, at least 1."""
        metadata = self.gym_env.metadata  # stable-retro says video.frames_per_second
        fps = metadata.get("render_fps") or metadata.get("video.frames_per_second") or 30
        return max(1, int(fps) // self.frames.skip)

    def rgb(self) -> np.ndarray:
        """The frame for videos, (H, W, 3) uint8: the env's rgb_array render where it renders so, else its
        last (first) image (gray repeated to RGB, alpha dropped)."""
        if self.gym_env.render_mode == "rgb_array":
            try:
                frame = self.gym_env.render()
            except Exception as e:  # a missing renderer surfaces only here
                raise PPO1Error(f"{self.env_id} cannot render frames: {error_line(e)}") from None
            if frame is not None:
                return np.asarray(frame, np.uint8)
        image = next(iter(self._raw.values()))
        image = image if image.ndim == 3 else image[:, :, None]
        if image.shape[2] == 1:
            return np.repeat(image, 3, axis=2)
        return np.ascontiguousarray(image[:, :, :3]) if image.shape[2] >= 3 else np.repeat(image[:, :, :1], 3, axis=2)

    def close(self) -> None:
        self.gym_env.close()


class VecPixels(VecEnv):
    """k PixelEnvs of one rank: obs of the envs' entries, (k, ...) each."""


PIXELS_FAMILY = Family(
    "pixels", "image-observation envs", presets=("paper", "fast", "cleanrl", "baselines", "vizdoom"),
    observations=has_images, frame_flags=True, obs_vectors=True, known_packages=True)
VecPixels.family = PIXELS_FAMILY
