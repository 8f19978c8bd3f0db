import os

import pytest
import torch

from ppo1 import PPO1Error, checkpoint, runfiles
from ppo1.config import Config


SPEC = [["image", "image", [4, 84, 84]]]
IO = {"actions": "discrete", "stacked": True}


def state(iteration, **kw):
    kw = {"obs_spec": SPEC, "model_io": IO, **kw}
    return checkpoint.TrainState(model={"w": torch.full((3,), float(iteration))}, config=Config().to_dict(),
                                 num_actions=6, n_actors=8, iteration=iteration, timesteps=iteration * 10, **kw)


def test_round_trip_loads_with_weights_only(tmp_path):
    path = runfiles.save(str(tmp_path), state(1), Config())
    loaded = checkpoint.load(path)
    assert loaded.iteration == 1 and torch.equal(loaded.model["w"], torch.ones(3))
    assert torch.load(path, weights_only=True)["timesteps"] == 10
    assert runfiles.load_config(str(tmp_path)) == Config()


def test_latest_points_at_the_newest_and_only_k_are_kept(tmp_path):
    for i in range(1, 6):
        runfiles.save(str(tmp_path), state(i), Config(), keep=2)
    names = sorted(os.listdir(tmp_path))
    assert names == ["ckpt-00000004.pt", "ckpt-00000005.pt", "config.json", "latest.pt"]
    s, path, problems = runfiles.load_newest(str(tmp_path))
    assert s.iteration == 5 and path.endswith("latest.pt") and problems == []


def test_failed_write_keeps_the_previous_checkpoint(tmp_path):
    runfiles.save(str(tmp_path), state(1), Config())

    class Boom(Exception):
        pass

    def failing(f):
        f.write(b"partial")
        raise Boom()

    with pytest.raises(Boom):
        runfiles.atomic_write(os.path.join(tmp_path, "latest.pt"), failing)
    assert checkpoint.load(os.path.join(tmp_path, "latest.pt")).iteration == 1
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n], "no temp file left behind"


def test_truncated_newest_falls_back_to_the_previous_one(tmp_path):
    runfiles.save(str(tmp_path), state(1), Config())
    path2 = runfiles.save(str(tmp_path), state(2), Config())
    size = os.path.getsize(path2)
    with open(path2, "r+b") as f:   # latest.pt is the same file (hard link)
        f.truncate(size // 2)
    s, path, problems = runfiles.load_newest(str(tmp_path))
    assert s.iteration == 1 and path.endswith("ckpt-00000001.pt")
    assert problems == [f"checkpoint {tmp_path / name} is truncated: its {size // 2} bytes end before the end of its "
                        "zip archive (a copy or a write cut short)" for name in ("latest.pt", "ckpt-00000002.pt")]


@pytest.mark.parametrize("content, said", [
    (b"", "is empty (0 bytes)"),
    (os.urandom(4000), "is not a checkpoint: not the zip archive torch.save writes"),
], ids=["empty", "random-bytes"])
def test_a_file_that_is_no_checkpoint_is_named_so(tmp_path, content, said):
    (tmp_path / "latest.pt").write_bytes(content.replace(b"PK", b"pk"))
    with pytest.raises(PPO1Error) as e:
        checkpoint.load(str(tmp_path / "latest.pt"))
    assert str(e.value) == f"checkpoint {tmp_path / 'latest.pt'} {said}"


def test_a_newer_checkpoint_is_refused_never_skipped_and_keep_last_k_deletes_only_what_it_reads(tmp_path):
    # iterations 1-6 written by this ppo1; 7 and 8 (and latest.pt) by a later one, of format 99
    for i in range(1, 9):
        runfiles.save(str(tmp_path), state(i), Config(), keep=10)
    for name in ("ckpt-00000007.pt", "ckpt-00000008.pt"):
        data = torch.load(tmp_path / name, weights_only=True)
        torch.save({**data, "format": 99}, tmp_path / name)
    os.unlink(tmp_path / "latest.pt")
    os.link(tmp_path / "ckpt-00000008.pt", tmp_path / "latest.pt")
    with pytest.raises(checkpoint.NewerCheckpoint) as e:
        runfiles.load_newest(str(tmp_path), resume=False)
    assert str(e.value) == (
        f"checkpoint {tmp_path / 'latest.pt'} was written by a newer ppo1 (checkpoint format 99; this ppo1 reads "
        "formats 1 to 2): resume or play it with that ppo1 (pip install -U ppo1), or train anew with --fresh, which "
        "moves this run aside and keeps its files")
    # a save (of iteration 9, keep 2) deletes the older checkpoints this ppo1 reads, not the newer format's
    (tmp_path / "ckpt-00000005.pt").write_bytes(b"garbage")  # unreadable: left where it is
    runfiles.save(str(tmp_path), state(9), Config(), keep=2)
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("ckpt")) == [
        "ckpt-00000005.pt", "ckpt-00000007.pt", "ckpt-00000008.pt", "ckpt-00000009.pt"]


def test_all_checkpoints_corrupt_is_an_error_not_a_fresh_start(tmp_path):
    (tmp_path / "latest.pt").write_bytes(b"garbage")
    with pytest.raises(PPO1Error, match="no loadable checkpoint"):
        runfiles.load_newest(str(tmp_path))


def test_empty_run_dir_has_no_checkpoint(tmp_path):
    assert runfiles.load_newest(str(tmp_path)) == (None, None, [])


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


def test_a_checkpoint_records_multidiscrete_actions_and_refuses_an_env_of_other_actions(tmp_path):
    runfiles.save(str(tmp_path), state(1, action_nvec=[2, 2, 2, 2]), Config())
    saved = checkpoint.load(str(tmp_path / "latest.pt"))
    assert saved.action_nvec == [2, 2, 2, 2]
    checkpoint.validate(saved, Config(), 6, 8, action_nvec=(2, 2, 2, 2))
    with pytest.raises(PPO1Error, match=r"^checkpoint has actions \[2, 2, 2, 2\] \(MultiDiscrete\), "
                                        r"PongNoFrameskip-v4 has 6 actions$"):
        checkpoint.validate(saved, Config(), 6, 8)
    with pytest.raises(PPO1Error, match=r"has actions \[2, 2, 2, 2\] \(MultiDiscrete\), .* has actions \[3, 3\]"):
        checkpoint.validate(saved, Config(), 6, 8, action_nvec=(3, 3))
    assert "action_nvec" not in state(1).to_checkpoint(), "Discrete and Box checkpoints keep their keys"
    with pytest.raises(PPO1Error, match="is corrupt: 'action_nvec' is 'x', not a list of whole numbers"):
        checkpoint.TrainState.from_checkpoint({**state(1).to_checkpoint(), "action_nvec": "x"}, "p")


def _format_1(iteration: int = 3, **what_the_model_reads) -> dict:
    """A resumable checkpoint dict as ppo1 wrote it in format 1 (before 2026-12-04), with `what_the_model_reads`
    (obs_spec, or obs_shape and model_io, by its version)."""
    rank = {"torch_rng": torch.get_rng_state(), "np_rng": {"bit_generator": "PCG64"}, "py_rng": (3, (1, 2), None),
            "envs": None, "cuda_rng": None}
    return {"format": 1, "model": {"w": torch.ones(3)}, "optimizer": {"state": {}, "param_groups": []},
            "iteration": iteration, "timesteps": 30, "episodes": 2, "recent_returns": [-21.0, -20.0],
            "recent_lengths": [800, 900], "num_actions": 6, "n_actors": 8, "n_ranks": 2,
            "config": Config().to_saved(), "ranks": [rank, rank], **what_the_model_reads}


def test_a_format_1_checkpoint_with_obs_spec_resumes_and_is_written_back_as_format_2_holding_the_same(tmp_path):
    old = _format_1(obs_spec=SPEC, model_io=IO)  # as 73847f9 wrote it
    torch.save(old, tmp_path / "latest.pt")
    s, path, problems = runfiles.load_newest(str(tmp_path), resume=True)
    assert (s.iteration, s.timesteps, s.episodes, list(s.recent)) == (3, 30, 2, [(-21.0, 800), (-20.0, 900)])
    assert s.rank(1)["py_rng"] == (3, (1, 2), None) and s.n_ranks == 2 and not problems
    assert s.observations().describe() == "image (4, 84, 84)" and s.model_spec()[2] is True
    again = s.to_checkpoint()
    assert again["format"] == 2 and sorted(again) == sorted(old)
    assert all(again[k] is old[k] or again[k] == old[k] for k in old if k not in ("format", "model", "ranks"))
    assert checkpoint.TrainState.from_checkpoint(again, "again", resume=True).to_checkpoint().keys() == again.keys()


def test_a_format_1_checkpoint_with_a_packed_vector_is_read_as_an_image_and_a_vector_that_resized_its_images():
    old = _format_1(obs_shape=[5, 24, 24], model_io={**IO, "vec_dim": 1})
    del old["config"]["pixels"]["frame_upscale"]  # that version had no such setting
    s = checkpoint.TrainState.from_checkpoint(old, "p", resume=True)
    assert s.observations().describe() == "image (4, 24, 24), vector (1,)" and s.model_io == IO
    assert Config.from_dict(s.config).frame_upscale, "that version resized every image"
    assert "obs_shape" not in s.to_checkpoint()
    flat = checkpoint.TrainState.from_checkpoint(_format_1(obs_shape=[30], model_io=IO), "p")
    assert flat.observations().describe() == "vector (30,)"


@pytest.mark.parametrize("reads", [{}, {"obs_shape": [4, 84, 84]}, {"model_io": {"actions": "discrete"}}],
                         ids=["nothing", "no-model-io", "obs-shape-not-given"])
def test_a_format_1_checkpoint_that_does_not_say_what_its_model_reads_is_refused_in_one_line(reads):
    with pytest.raises(PPO1Error, match=r"^checkpoint p is of a ppo1 version before 2026-12-02, which did not save "
                                        r"what its model reads: play it with that version, or train anew \(--fresh\)$"):
        checkpoint.TrainState.from_checkpoint(_format_1(**reads), "p")


def test_a_format_2_checkpoint_without_its_observations_is_refused_as_incomplete():
    data = state(1).to_checkpoint()
    del data["obs_spec"]
    with pytest.raises(PPO1Error, match="^checkpoint p is incomplete: it has no 'obs_spec'$"):
        checkpoint.TrainState.from_checkpoint(data, "p")
    with pytest.raises(PPO1Error, match="^checkpoint p is corrupt: 'model_io' is "):
        checkpoint.TrainState.from_checkpoint({**state(1).to_checkpoint(), "model_io": {**IO, "vec_dim": 1}}, "p")


def test_a_checkpoint_without_what_a_training_resumes_from_loads_for_play_only(tmp_path):
    runfiles.save(str(tmp_path), state(1), Config())
    assert runfiles.load_newest(str(tmp_path))[0].optimizer is None
    with pytest.raises(PPO1Error, match="is incomplete: it has no 'optimizer'"):
        runfiles.load_newest(str(tmp_path), resume=True)


def test_a_checkpoint_keeps_the_wandb_run_id_and_refuses_one_that_is_not_an_id(tmp_path):
    runfiles.save(str(tmp_path), state(1, wandb_id="3ea6dmbn"), Config())
    assert checkpoint.load(str(tmp_path / "latest.pt")).wandb_id == "3ea6dmbn"
    assert "wandb_id" not in state(1).to_checkpoint(), "none without --wandb, as in checkpoints of before"
    with pytest.raises(PPO1Error, match="'wandb_id' is '../x', not a W&B run id"):
        checkpoint.TrainState.from_checkpoint({**state(1).to_checkpoint(), "wandb_id": "../x"}, "p")


def test_a_checkpoint_that_did_not_say_whether_its_frames_stack_is_read_as_its_policy_read_it():
    # model_io's stacked None (checkpoints of before 2026-12-05): 4 channels were a stack of frames, others not
    said = state(1, model_io={"actions": "discrete", "stacked": None}).model_spec()[2]
    rgb = state(1, obs_spec=[["image", "image", [3, 64, 64]]], model_io={"actions": "discrete", "stacked": None})
    assert (said, rgb.model_spec()[2]) == (True, False)
    assert checkpoint.ModelIO.of(6, 0) == {"actions": "discrete", "stacked": False}  # now always said
