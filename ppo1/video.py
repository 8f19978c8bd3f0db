"""Recording the trained agent playing one game as an MP4 (and a GIF): for `--mode movie` and for the
videos rank 0 takes during training (`--video_interval`).

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

from ppo1.errors import PPO1Error
from ppo1.config import Config
from ppo1.envs import EnvOptions
from ppo1.envs.base import EnvRaised
from ppo1.evaluate import fmt_score, generator_for, open_game, stream_game
from ppo1.policies import ActorCritic
from ppo1.safeio import cause

GIF_EVERY = 3     # a GIF keeps every 3rd frame ...
GIF_FPS = 20      # ... and plays at 20 fps: real time
VIDEO_STREAM = 1_000_002  # seed stream of the evaluation games recorded during training and by movie


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
    fps: int               # frames per second of the MP4 (the env's: Atari's emulator 60)


def _tmp_path(directory: str, ext: str) -> str:
    return os.path.join(directory, f".recording-{os.getpid()}.{ext}")


class _Frames:
    """The frame sink of a recording: each frame to the MP4 writer (and every GIF_EVERY-th kept for the
    GIF) until `max_frames` (0 = no limit)."""

    def __init__(self, writer, gif: bool, max_frames: int):
        self.writer, self.gif, self.max_frames = writer, gif, max_frames
        self.count = 0  # frames written
        self.gif_frames: list[np.ndarray] = []

    def __call__(self, frame: np.ndarray) -> None:  # frame: (210, 160, 3) uint8
        if self.full():
            return
        self.writer.write_frame(frame)
        if self.gif and self.count % GIF_EVERY == 0:
            self.gif_frames.append(frame)
        self.count += 1

    def full(self) -> bool:
        return bool(self.max_frames) and self.count >= self.max_frames


def _write_gif(frames: list[np.ndarray], directory: str, name: str) -> str:
    from moviepy import ImageSequenceClip

    tmp_gif = _tmp_path(directory, "gif")
    try:
        ImageSequenceClip(frames, fps=GIF_FPS).write_gif(tmp_gif, fps=GIF_FPS, logger=None)
        os.replace(tmp_gif, name + ".gif")
        return name + ".gif"
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp_gif)


def record_game(policy: ActorCritic, env_name: str, seed: np.random.SeedSequence, stem: str,
                greedy: bool = False, max_frames: int = 0, gif: bool = False,
                options: EnvOptions = EnvOptions(), check: Callable[[Any], None] | None = None) -> Recording:
    """Play one game of `env_name` with `policy` and record it as `<stem>_score<S>[_partial].mp4`.

    max_frames > 0 cuts the game after that many emulator frames (the name then ends in _partial);
    0 records the whole game. With gif=True a GIF of the same frames is written beside the MP4. `check(env)`
    may refuse the env before any frame (movie: Trained.check_env).
    Files are written under temporary names and renamed when complete. Returns the Recording.
    """
    from moviepy.video.io.ffmpeg_writer import FFMPEG_VideoWriter

    start = time.time()
    directory = os.path.dirname(os.path.abspath(stem))
    os.makedirs(directory, exist_ok=True)
    env_seed, torch_seed = seed.spawn(2)
    env, obs, (height, width), fps = open_game(env_name, env_seed, options)
    if check is not None:
        try:
            check(env)
        except BaseException:
            env.close()
            raise
    tmp = _tmp_path(directory, "mp4")
    writer = FFMPEG_VideoWriter(tmp, (width, height), fps)
    frames = _Frames(writer, gif, max_frames)
    try:
        score, steps, finished = stream_game(policy, env, obs, frames, generator_for(torch_seed), greedy,
                                             frames.full, options.episode_life)
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
    gif_path = _write_gif(frames.gif_frames, directory, name) if gif and frames.gif_frames else None
    return Recording(name + ".mp4", gif_path, frames.count, len(frames.gif_frames), steps, float(score), finished,
                     time.time() - start, fps)


def describe(rec: Recording) -> str:
    """One line about a recording: score, frames, steps, file sizes."""
    cut = "" if rec.finished else f" (cut at {rec.frames} frames)"
    text = (f"score {fmt_score(rec.score)}{cut}, {rec.steps} agent steps, {rec.frames} frames "
            f"({rec.frames / rec.fps:.1f} s at {rec.fps} fps) -> {rec.path} ({os.path.getsize(rec.path) / 1e3:.0f} kB)")
    if rec.gif:
        text += f", {rec.gif} ({rec.gif_frames} frames at {GIF_FPS} fps, {os.path.getsize(rec.gif) / 1e3:.0f} kB)"
    return text


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
            rec = record_game(policy, cfg.env_name, seed, stem, max_frames=cfg.video_max_frames,
                              options=EnvOptions.of(cfg, evaluation=True))
        except OSError as e:  # disk full, videos/ not a directory ...: no video this time
            self.log(f"ppo1: warning: video at iteration {iteration} not written to {os.path.dirname(stem)}: "
                     f"{cause(e)}; training continues")
            return None
        except EnvRaised as e:  # the video's own env crashed (an engine that died): no video this time
            self.log(f"ppo1: warning: video at iteration {iteration} not recorded: its env raised {e} "
                     f"({e.where}); training continues")
            return None
        finally:
            torch.set_num_threads(threads)
        self.log(f"ppo1: video at iteration {iteration} ({rec.seconds:.1f} s, other ranks waited): "
                 f"{describe(rec)}")
        return rec
