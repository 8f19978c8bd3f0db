"""`--mode movie` and the videos taken during training: the trained agent playing the real game.

Every emulator frame is recorded, as the console shows it: raw RGB, 210x160, 60 frames per second
(the Atari's NTSC rate, so the video runs in real time; one agent step = 4 frames). Frames go
straight from the emulator to moviepy's ffmpeg writer, one at a time, so a whole game needs no
more memory than one frame (no image files in between). A GIF, when asked for, takes every third
frame (20 fps, real time: GIF frame delays are whole hundredths of a second) and holds its frames in
memory until written, so keep GIFs short with --max_frames.

Envs with vector observations (CartPole, MuJoCo) are recorded from their own renderer, one frame
per agent step at the env's render_fps (CartPole 50, Hopper 125).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import Any, Callable

import numpy as np
import torch

from ppo1 import PPO1Error
from ppo1.config import Config
from ppo1.distributed import Comm
from ppo1.envs import AtariEnv, GymEnv, is_atari
from ppo1.play import choose_action, fmt_score, generator_for, load_trained
from ppo1.policies import ActorCritic
from ppo1.safeio import cause, ensure_writable_dir

FPS = 60          # emulator frames per second (NTSC)
GIF_EVERY = 3     # a GIF keeps every 3rd frame ...
GIF_FPS = 20      # ... and plays at 20 fps: real time
VIDEO_STREAM = 1_000_002  # seed stream of the evaluation games recorded during training


class _FrameTap:
    """Stands in for an AtariEnv's ALEInterface: forwards every call, and hands the RGB screen after
    each emulated frame of the first game started through it to `sink`."""

    def __init__(self, ale: Any, sink: Callable[[np.ndarray], None]):
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


@dataclasses.dataclass
class Recording:
    """One recorded game: files written, frames, agent steps and the (real, unclipped) score."""

    path: str              # the MP4
    gif: str | None
    frames: int            # emulator frames in the MP4
    gif_frames: int
    steps: int             # agent steps played
    score: float           # the game's score over the recorded part
    finished: bool         # the game ended (False: cut by max_frames)
    seconds: float         # wall time of playing and encoding
    fps: int = FPS         # frames per second of the MP4


def _tmp_path(directory: str, ext: str) -> str:
    return os.path.join(directory, f".recording-{os.getpid()}.{ext}")


def record_game(policy: ActorCritic, env_name: str, seed: np.random.SeedSequence, stem: str,
                greedy: bool = False, max_frames: int = 0, gif: bool = False) -> Recording:
    """Play one game of `env_name` with `policy` and record it as `<stem>_score<S>[_partial].mp4`.

    max_frames > 0 cuts the game after that many emulator frames (the name then ends in _partial);
    0 records the whole game. With gif=True a GIF of the same frames is written beside the MP4.
    Files are written under temporary names and renamed when complete. Returns the Recording.
    """
    from moviepy import ImageSequenceClip
    from moviepy.video.io.ffmpeg_writer import FFMPEG_VideoWriter

    start = time.time()
    directory = os.path.dirname(os.path.abspath(stem))
    os.makedirs(directory, exist_ok=True)
    env_seed, torch_seed = seed.spawn(2)
    atari = is_atari(env_name)
    if atari:
        env = AtariEnv(env_name, env_seed, training=False)
        (height, width), fps = env.ale.getScreenDims(), FPS
    else:
        env = GymEnv(env_name, env_seed, render_mode="rgb_array")
        obs = env.reset()
        (height, width), fps = env.rgb().shape[:2], env.fps
    tmp = _tmp_path(directory, "mp4")
    writer = FFMPEG_VideoWriter(tmp, (width, height), fps)
    count = 0  # frames written
    gif_frames: list[np.ndarray] = []

    def sink(frame: np.ndarray) -> None:  # frame: (210, 160, 3) uint8
        nonlocal count
        if max_frames and count >= max_frames:
            return
        writer.write_frame(frame)
        if gif and count % GIF_EVERY == 0:
            gif_frames.append(frame)
        count += 1

    try:
        generator = generator_for(torch_seed)
        finished, steps = False, 0
        if atari:
            env.ale = _FrameTap(env.ale, sink)
            obs = env.reset()
        else:
            sink(env.rgb())
        while not finished and not (max_frames and count >= max_frames):
            obs, _reward, _done, episode = env.step(choose_action(policy, obs, greedy, generator))
            steps += 1
            finished = episode is not None
            if not atari and not finished:  # a finished GymEnv has already reset: skip that frame
                sink(env.rgb())
        score = episode.ret if finished else env.ep_return
        writer.close()
        if not os.path.exists(tmp) or os.path.getsize(tmp) == 0:
            raise PPO1Error(f"ffmpeg wrote no video to {tmp}")
    except BaseException:
        with contextlib.suppress(Exception):  # ffmpeg may be gone already (a full disk)
            writer.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    finally:
        env.close()
    name = f"{stem}_score{fmt_score(score)}{'' if finished else '_partial'}"
    os.replace(tmp, name + ".mp4")
    gif_path = None
    if gif and gif_frames:
        tmp_gif = _tmp_path(directory, "gif")
        try:
            ImageSequenceClip(gif_frames, fps=GIF_FPS).write_gif(tmp_gif, fps=GIF_FPS, logger=None)
            gif_path = name + ".gif"
            os.replace(tmp_gif, gif_path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp_gif)
    return Recording(name + ".mp4", gif_path, count, len(gif_frames), steps, float(score), finished,
                     time.time() - start, fps)


def describe(rec: Recording) -> str:
    """One line about a recording: score, frames, steps, file sizes."""
    cut = "" if rec.finished else f" (cut at {rec.frames} frames)"
    text = (f"score {fmt_score(rec.score)}{cut}, {rec.steps} agent steps, {rec.frames} frames "
            f"({rec.frames / rec.fps:.1f} s at {rec.fps} fps) -> {rec.path} ({os.path.getsize(rec.path) / 1e3:.0f} kB)")
    if rec.gif:
        text += f", {rec.gif} ({rec.gif_frames} frames at {GIF_FPS} fps, {os.path.getsize(rec.gif) / 1e3:.0f} kB)"
    return text


def movie(config: Config, given: dict, comm: Comm, max_frames: int = 0, gif: bool = False,
          greedy: bool = False, out: Callable[[str], None] = print) -> Recording | None:
    """Record one game of the newest checkpoint into asset_dir/model_name/ (rank 0 only).

    Returns the Recording on rank 0, None on the other ranks.
    """
    if max_frames < 0:
        raise PPO1Error(f"--max_frames={max_frames} is invalid: must be >= 0 (0 = one whole game)")
    error = None
    if comm.is_root:  # before any work: the video's directory can be written
        try:
            ensure_writable_dir(os.path.join(config.asset_dir, config.model_name), "asset directory")
        except PPO1Error as e:
            error = e
    comm.agree(error)
    trained = load_trained(config, given, comm)
    if not comm.is_root:
        return None
    cfg = trained.config
    game = cfg.env_name.replace("/", "-")
    stem = os.path.join(cfg.asset_dir, cfg.model_name,
                        f"{game}_iter{trained.iteration}_{trained.timesteps}steps{'_greedy' if greedy else ''}")
    out(f"ppo1: recording {cfg.env_name} with {trained.describe()}"
        f"{f', at most {max_frames} frames' if max_frames else ', one whole game'}")
    seed = np.random.SeedSequence([cfg.seed, VIDEO_STREAM, trained.iteration])
    try:
        rec = record_game(trained.policy, cfg.env_name, seed, stem, greedy=greedy, max_frames=max_frames, gif=gif)
    except OSError as e:
        raise PPO1Error(f"cannot write the video {stem}_*.mp4: {cause(e)}") from None
    out(f"ppo1: {describe(rec)}")
    return rec


class TrainingVideo:
    """Rank 0's evaluation game every `config.video_interval` iterations, recorded into run_dir/videos/.

    The other ranks go on to their next collective and wait there while rank 0 records, so each
    video stalls training by the time it takes (printed); `config.video_max_frames` bounds that.
    """

    def __init__(self, config: Config, log: Callable[[str], None] = print):
        self.config, self.log = config, log
        self.interval = config.video_interval

    def due(self, iteration: int) -> bool:
        return bool(self.interval) and iteration % self.interval == 0

    def maybe_record(self, policy: ActorCritic, iteration: int, timesteps: int) -> Recording | None:
        """Record a game when `iteration` is a multiple of the interval. Returns it, or None."""
        if not self.due(iteration):
            return None
        cfg = self.config
        stem = os.path.join(cfg.run_dir, "videos", f"iter{iteration:06d}_{timesteps}steps")
        seed = np.random.SeedSequence([cfg.seed, VIDEO_STREAM, iteration])
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # batch-1 forward passes: 1 thread is fastest
        try:
            rec = record_game(policy, cfg.env_name, seed, stem, max_frames=cfg.video_max_frames)
        except OSError as e:  # disk full, videos/ not a directory ...: no video this time
            self.log(f"ppo1: warning: video at iteration {iteration} not written to {os.path.dirname(stem)}: "
                     f"{cause(e)}; training continues")
            return None
        finally:
            torch.set_num_threads(threads)
        self.log(f"ppo1: video at iteration {iteration} ({rec.seconds:.1f} s, other ranks waited): "
                 f"{describe(rec)}")
        return rec
