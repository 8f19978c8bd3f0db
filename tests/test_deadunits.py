"""bench.deadunits: live ReLU units of a run's CNN on real frames."""
import subprocess
import sys

import torch

from bench.deadunits import live_units, main
from conftest import REPO


def test_a_unit_is_alive_if_positive_on_any_frame_and_position():
    conv = torch.nn.Conv2d(1, 2, 1)
    hidden = torch.nn.Linear(2 * 2 * 2, 3)
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([1.0, -1.0]).reshape(2, 1, 1, 1))  # filter 1 sees -pixel: never > 0
        conv.bias.zero_()
        hidden.weight.zero_()
        hidden.weight[0, :4] = 1.0    # sums filter 0's outputs: > 0 on the frame with a lit pixel
        hidden.weight[1, :4] = -1.0   # minus that sum: never > 0
        hidden.bias.copy_(torch.tensor([0.0, 0.0, 0.5]))  # unit 2: a constant 0.5, alive (but constant)
    torso = torch.nn.Sequential(conv, torch.nn.ReLU(), torch.nn.Flatten(), hidden, torch.nn.ReLU())
    frames = torch.zeros(3, 1, 2, 2)
    frames[2, 0, 1, 1] = 0.7  # one lit pixel, in one frame
    assert live_units(torso, frames) == [("conv 1 (2 filters)", 1, 2), ("hidden (3 units)", 2, 3)]
    assert live_units(torso, torch.zeros(3, 1, 2, 2)) == [("conv 1 (2 filters)", 0, 2), ("hidden (3 units)", 1, 3)]


def test_a_run_is_reported_layer_by_layer_with_the_small_cnns_sizes(pong_run):
    ck, name = pong_run
    import bench.deadunits as deadunits
    lines: list[str] = []
    layers = deadunits.report(str(ck), name, 50, 0, out=lines.append)
    assert [(kind, total) for kind, _live, total in layers] == [
        ("conv 1 (16 filters)", 16), ("conv 2 (32 filters)", 32), ("hidden (256 units)", 256)]
    assert all(0 <= live <= total for _kind, live, total in layers)
    assert lines[0] == f"{name}: 50 frames of random play in PongNoFrameskip-v4"
    assert lines[1].startswith("  conv 1 (16 filters): ") and lines[4].startswith("  value: mean ")
    assert deadunits.report(str(ck), name, 50, 0, out=lambda _line: None) == layers  # seeded: the same frames


def test_a_missing_run_or_too_few_frames_is_one_line_and_exit_2(pong_run, tmp_path):
    ck, name = pong_run
    for flags, words in ((["--model_name", "missing", "--checkpoint_dir", str(tmp_path)], "no run directory"),
                         (["--model_name", name, "--checkpoint_dir", str(ck), "--frames", "1"], "--frames")):
        r = subprocess.run([sys.executable, "-m", "bench.deadunits", *flags], cwd=REPO, capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and words in r.stderr and r.stderr.startswith("bench.deadunits: error: ")
    assert main(["--model_name", name, "--checkpoint_dir", str(ck), "--frames", "20"]) == 0
