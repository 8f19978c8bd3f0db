import os

import pytest
import torch

from ppo1 import PPO1Error, checkpoint
from ppo1.config import Config


def state(iteration, **kw):
    s = {"format": checkpoint.FORMAT, "model": {"w": torch.full((3,), float(iteration))},
         "iteration": iteration, "timesteps": iteration * 10, "num_actions": 6, "n_actors": 8,
         "config": Config().to_dict()}
    s.update(kw)
    return s


def test_round_trip_loads_with_weights_only(tmp_path):
    path = checkpoint.save(str(tmp_path), state(1), Config())
    loaded = checkpoint.load(path)
    assert loaded["iteration"] == 1 and torch.equal(loaded["model"]["w"], torch.ones(3))
    assert torch.load(path, weights_only=True)["timesteps"] == 10
    assert checkpoint.load_config(str(tmp_path)) == Config()


def test_latest_points_at_the_newest_and_only_k_are_kept(tmp_path):
    for i in range(1, 6):
        checkpoint.save(str(tmp_path), state(i), Config(), keep=2)
    names = sorted(os.listdir(tmp_path))
    assert names == ["ckpt-00000004.pt", "ckpt-00000005.pt", "config.json", "latest.pt"]
    s, path, problems = checkpoint.load_newest(str(tmp_path))
    assert s["iteration"] == 5 and path.endswith("latest.pt") and problems == []


def test_failed_write_keeps_the_previous_checkpoint(tmp_path):
    checkpoint.save(str(tmp_path), state(1), Config())

    class Boom(Exception):
        pass

    def failing(f):
        f.write(b"partial")
        raise Boom()

    with pytest.raises(Boom):
        checkpoint.atomic_write(os.path.join(tmp_path, "latest.pt"), failing)
    assert checkpoint.load(os.path.join(tmp_path, "latest.pt"))["iteration"] == 1
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n], "no temp file left behind"


def test_truncated_newest_falls_back_to_the_previous_one(tmp_path):
    checkpoint.save(str(tmp_path), state(1), Config())
    path2 = checkpoint.save(str(tmp_path), state(2), Config())
    size = os.path.getsize(path2)
    with open(path2, "r+b") as f:   # latest.pt is the same file (hard link)
        f.truncate(size // 2)
    s, path, problems = checkpoint.load_newest(str(tmp_path))
    assert s["iteration"] == 1 and path.endswith("ckpt-00000001.pt")
    assert len(problems) == 2 and "corrupt" in problems[0]


def test_all_checkpoints_corrupt_is_an_error_not_a_fresh_start(tmp_path):
    (tmp_path / "latest.pt").write_bytes(b"garbage")
    with pytest.raises(PPO1Error, match="no loadable checkpoint"):
        checkpoint.load_newest(str(tmp_path))


def test_empty_run_dir_has_no_checkpoint(tmp_path):
    assert checkpoint.load_newest(str(tmp_path)) == (None, None, [])


def test_pickled_code_is_never_executed(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))
    torch.save({"format": 1, "model": Evil()}, tmp_path / "latest.pt")
    with pytest.raises(PPO1Error, match="corrupt or unreadable"):
        checkpoint.load(str(tmp_path / "latest.pt"))
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("change,match", [
    ({"env_name": "BreakoutNoFrameskip-v4"}, "trained on PongNoFrameskip-v4"),
    ({"model_type": "large"}, "'small' model"),
])
def test_checkpoint_of_another_game_or_model_is_refused(change, match):
    import dataclasses
    with pytest.raises(PPO1Error, match=match):
        checkpoint.validate(state(1), dataclasses.replace(Config(), **change), 6, 8)


def test_checkpoint_with_other_action_count_or_actors_is_refused():
    with pytest.raises(PPO1Error, match="6 actions"):
        checkpoint.validate(state(1), Config(), 4, 8)
    with pytest.raises(PPO1Error, match="8 actors"):
        checkpoint.validate(state(1), Config(), 6, 4)
