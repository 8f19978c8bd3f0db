"""`--snapshot_interval`: a grid of rank 0's envs' current screens in run_dir/snapshot.png and TensorBoard."""
import os

import cv2
import numpy as np

from conftest import TINY, run_cli
from ppo1.snapshot import GAP, grid


def test_a_grid_puts_the_frames_row_by_row_in_tiles_of_the_largest_with_black_gaps():
    a = np.full((2, 3, 3), 10, np.uint8)
    b = np.full((4, 2, 3), 20, np.uint8)
    c = np.full((1, 1, 3), 30, np.uint8)
    g = grid([a, b, c])  # 3 frames: 2 columns, 2 rows of 4 x 3 tiles
    assert g.shape == (2 * 4 + GAP, 2 * 3 + GAP, 3)
    assert (g[:2, :3] == 10).all() and (g[2:4, :3] == 0).all(), "a smaller frame sits at its tile's top left"
    assert (g[:4, 3 + GAP:3 + GAP + 2] == 20).all()
    assert (g[4 + GAP, 0] == 30).all() and (g[4:4 + GAP] == 0).all() and (g[:, 3:3 + GAP] == 0).all()
    assert grid([a, a, a], cols=3).shape == (2, 3 * 3 + 2 * GAP, 3)


def test_training_writes_one_snapshot_of_rank_0s_envs_and_the_same_image_to_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    r = run_cli([*TINY, "--env_name", "tests.pixelenv:make_env", "--env_kwargs", '{"size": 24}', "--snapshot_interval",
                 "1", "--checkpoint_dir", str(tmp_path), "--model_name", "s"])
    assert r.returncode == 0, r.stderr
    run = tmp_path / "s"
    image = cv2.imread(str(run / "snapshot.png"))
    assert image.shape == (24, 2 * 24 + GAP, 3), "the 2 envs' 24 x 24 screens side by side"
    assert [f for f in os.listdir(run) if "snapshot" in f] == ["snapshot.png"], "one file, no temporary one left"
    events = EventAccumulator(str(run)).Reload()
    images = [(e.step, e.height, e.width) for e in events.Images("snapshot/envs")]
    assert images == [(256, 24, 50), (512, 24, 50)], "one per iteration, at its agent steps"
    last = cv2.imdecode(np.frombuffer(events.Images("snapshot/envs")[-1].encoded_image_string, np.uint8), 1)
    assert (last == image).all(), "TensorBoard shows the file's image"


def test_envs_that_cannot_show_their_screen_warn_once_and_training_goes_on(tmp_path):
    r = run_cli([*TINY, "--env_name", "CartPole-v1", "--envs_per_rank", "1", "--snapshot_interval", "1",
                 "--checkpoint_dir", str(tmp_path), "--model_name", "c"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ppo1: warning: no snapshot of the envs") == 1, r.stdout
    assert "ppo1: done" in r.stdout and not (tmp_path / "c" / "snapshot.png").exists()
