"""`--snapshot_interval N`: every N iterations rank 0 shows what its envs show now, for watching long games.

One PNG, run_dir/snapshot.png, a grid of the current screens of rank 0's envs (each env's `rgb()`: the
emulator screen, the env's render or its last image), replaced atomically (written beside it, then renamed:
a reader never sees half a file, and there is never more than one), and the same image in TensorBoard
(tag `snapshot/envs`) at the iteration's agent steps.
"""
from __future__ import annotations

import math
import os
from typing import Callable

import cv2
import numpy as np

from ppo1.runfiles import atomic_write
from ppo1.safeio import cause

FILE = "snapshot.png"
GAP = 2  # pixels of black between the tiles


def grid(frames: list[np.ndarray], cols: int = 0) -> np.ndarray:
    """The frames (H, W, 3) uint8 in a grid, row by row, `cols` wide (0: the squarest that holds them), each
    in a tile of the largest frame's size (smaller ones at its top left), GAP black pixels between tiles."""
    cols = cols or math.ceil(math.sqrt(len(frames)))
    rows = math.ceil(len(frames) / cols)
    h, w = max(f.shape[0] for f in frames), max(f.shape[1] for f in frames)
    out = np.zeros((rows * h + (rows - 1) * GAP, cols * w + (cols - 1) * GAP, 3), np.uint8)
    for i, frame in enumerate(frames):
        r, c = divmod(i, cols)
        out[r * (h + GAP):r * (h + GAP) + frame.shape[0], c * (w + GAP):c * (w + GAP) + frame.shape[1]] = frame
    return out


def png(image: np.ndarray) -> bytes:
    """An RGB image (H, W, 3) uint8 encoded as PNG."""
    ok, data = cv2.imencode(".png", np.ascontiguousarray(image[:, :, ::-1]))  # cv2 writes BGR
    if not ok:
        raise ValueError("PNG encoding failed")
    return data.tobytes()


class Snapshots:
    """Rank 0's snapshots of its envs every `interval` iterations (0: never): `rgb(i)` is what env i shows now,
    (H, W, 3) uint8, for each of its `count` envs (VecEnv.rgb). A snapshot that cannot be made or written is a
    warning (once), and training goes on without them."""

    def __init__(self, run_dir: str, interval: int, rgb: Callable[[int], np.ndarray], count: int, events=None,
                 warn=print):
        self.path = os.path.join(run_dir, FILE)
        self.interval, self.rgb, self.count, self.events, self.warn = interval, rgb, count, events, warn

    def maybe_write(self, iteration: int, timesteps: int) -> str | None:
        """Write the snapshot when `iteration` is a multiple of the interval. Returns its path, or None."""
        if not self.interval or iteration % self.interval:
            return None
        try:
            image = grid([np.asarray(self.rgb(i), np.uint8) for i in range(self.count)])
            data = png(image)
            atomic_write(self.path, lambda f: f.write(data))
        except Exception as e:  # an env that cannot render, a full disk: say it once, train on
            self.warn(f"ppo1: warning: no snapshot of the envs ({cause(e) if isinstance(e, OSError) else e}); "
                      "--snapshot_interval is off for the rest of the run")
            self.interval = 0
            return None
        if self.events is not None:
            self.events.write_image(timesteps, "snapshot/envs", data, image.shape[0], image.shape[1])
        return self.path
