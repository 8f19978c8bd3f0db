"""--mode movie: real games recorded, real MP4/GIF files decoded again."""
import re
import shutil

import numpy as np
from PIL import Image, ImageSequence

from conftest import decode, run_cli
from ppo1.config import Config
from ppo1.distributed import Comm
from ppo1.envs.atari import FPS
from ppo1.movie import movie
from ppo1.video import GIF_FPS

RECORDED = re.compile(r"score (-?\d+), (\d+) agent steps, (\d+) frames \([\d.]+ s at 60 fps\) -> (\S+\.mp4)")


def test_movie_records_one_whole_game_as_raw_60fps_frames(breakout_run, tmp_path):
    ck, name, _ = breakout_run
    r = run_cli(["--mode", "movie", "--checkpoint_dir", str(ck), "--model_name", name, "--asset_dir",
                 str(tmp_path)])
    assert r.returncode == 0, r.stderr
    m = RECORDED.search(r.stdout)
    assert m, r.stdout
    score, steps, frames, path = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
    assert path == str(tmp_path / name / f"BreakoutNoFrameskip-v4_iter4_1024steps_score{score}.mp4")
    assert "_partial" not in path and "cut at" not in r.stdout
    # every emulator frame of the game: 4 per agent step, plus the reset's no-ops and FIRE/RIGHT
    assert 4 * (steps - 1) < frames <= 4 * steps + 30 + 8
    size, fps, decoded = decode(path)
    assert size == (160, 210) and fps == FPS
    assert len(decoded) == frames and decoded[0].shape == (210, 160, 3)
    assert not np.array_equal(decoded[0], decoded[-1])
    assert list(tmp_path.rglob(".recording-*")) == []


def test_movie_cut_by_max_frames_with_a_gif_of_every_third_frame(breakout_run, tmp_path):
    ck, name, _ = breakout_run
    config = Config(checkpoint_dir=str(ck), model_name=name, asset_dir=str(tmp_path))
    rec = movie(config, {}, Comm(None), max_frames=90, gif=True, greedy=True, out=lambda line: None)
    assert not rec.finished and rec.frames == 90
    assert rec.path.endswith("_greedy_score0_partial.mp4") and rec.gif.endswith("_partial.gif")
    size, _fps, decoded = decode(rec.path)
    assert size == (160, 210) and len(decoded) == 90
    assert rec.gif_frames == 30
    with Image.open(rec.gif) as gif:  # identical consecutive frames are merged: count their durations
        durations = [frame.info["duration"] for frame in ImageSequence.Iterator(gif)]
        assert gif.format == "GIF" and gif.size == (160, 210)
    assert sum(durations) == 30 * 1000 / GIF_FPS and 1 < len(durations) <= 30


def test_movie_without_asset_dir_writes_into_the_runs_own_directory(breakout_run, tmp_path):
    # user output goes beside the run's checkpoints, never into a folder of the repository
    ck, name, _ = breakout_run
    shutil.copytree(ck / name, tmp_path / name)
    config = Config(checkpoint_dir=str(tmp_path), model_name=name)
    rec = movie(config, {}, Comm(None), max_frames=30, out=lambda line: None)
    assert rec.path.startswith(str(tmp_path / name / "BreakoutNoFrameskip-v4_iter4_1024steps_"))
    assert [p.name for p in tmp_path.iterdir()] == [name]
