"""Envs of the own-env family beyond the basic case: MultiBinary and MultiDiscrete actions, and ViZDoom's ids
by name (the vizdoom extra). A file of its own so that the suite's workers share the own-env tests."""
import json
import re

import numpy as np
import pytest

from conftest import TINY, run_cli
from ppo1.envs.pixels import Frames, PixelEnv

FACTORY = ["--env_name", "tests.pixelenv:make_env", "--env_kwargs", '{"size": 24}']
GAME = re.compile(r"^game \d+/\d+: score (\S+), (\d+) agent steps", re.M)


# ------------------------------------------------------------------------------ MultiBinary, MultiDiscrete actions
def test_a_multibinary_env_trains_and_plays_with_sampled_and_greedy_actions(tmp_path):
    common = ["--checkpoint_dir", str(tmp_path), "--model_name", "mb"]
    r = run_cli([*TINY, *FACTORY[:3], '{"size": 24, "multibinary": true}', "--frame_size", "24", *common,
                 "--envs_per_rank", "4"])  # one process: the actions do not depend on the ranks
    assert r.returncode == 0, r.stderr
    assert "1 ranks x 4 envs = 4 actors" in r.stdout and "ppo1: done: 512 steps" in r.stdout
    import torch
    state = torch.load(tmp_path / "mb" / "latest.pt", weights_only=True)
    assert (state["num_actions"], state["action_nvec"]) == (8, [2, 2, 2, 2])
    for greedy in ([], ["--greedy"]):  # one process: the ranks' play is test_play's
        r = run_cli(["--mode", "play", "--episodes", "2", *greedy, *common])
        assert r.returncode == 0, r.stderr
        assert len(GAME.findall(r.stdout)) == 2 and "ppo1: 2 games: score" in r.stdout, r.stdout


def test_a_multidiscrete_env_trains_and_records_a_movie(tmp_path):
    common = ["--checkpoint_dir", str(tmp_path), "--model_name", "md"]
    r = run_cli([*TINY, "--env_name", "tests.pixelenv:make_multidiscrete_env", "--env_kwargs", '{"size": 24}',
                 "--frame_size", "24", "--model_type", "impala", *common])
    assert r.returncode == 0, r.stderr
    assert "ppo1: done: 512 steps" in r.stdout
    r = run_cli(["--mode", "movie", "--greedy", *common])
    assert r.returncode == 0, r.stderr
    assert list((tmp_path / "md").glob("tests.pixelenv-make_multidiscrete_env_iter2_*.mp4"))


# ------------------------------------------------------------------------------ ViZDoom
def test_vizdoom_ends_an_episode_at_its_timeout_as_terminal_its_last_screen_being_blank():
    pytest.importorskip("vizdoom", reason="vizdoom is not installed: pip install 'ppo1[vizdoom]'")
    from ppo1.envs.ref import resolve
    env = PixelEnv(resolve("VizdoomBasic-v1"), np.random.SeedSequence(0), Frames(skip=4))
    try:
        assert env.key == "screen" and env.obs_spec.to_list() == [["image", "image", [4, 84, 84]]]
        env.reset()
        for _ in range(100):  # MOVE_LEFT only: the monster lives until the 300-tic timeout (75 steps of 4)
            obs, _reward, done, episode = env.step(0)
            if done:
                break
        assert episode is not None and episode.length == 75
        assert not episode.truncated and env.cut_obs is None, "no bootstrap from a blank screen"
    finally:
        env.close()


def test_a_vizdoom_id_trains_with_its_frame_skip_and_plays_leaving_no_settings_file(tmp_path):
    pytest.importorskip("vizdoom", reason="vizdoom is not installed: pip install 'ppo1[vizdoom]'")
    ck = tmp_path / "ck"
    memory = ["--rnn", "gru", "--frame_stack", "1"]  # as sample-factory trains ViZDoom: a GRU, one frame
    r = run_cli([*TINY, *memory, "--env_name", "VizdoomBasic-v1", "--checkpoint_dir", str(ck), "--model_name", "doom"],
                cwd=str(tmp_path))  # one process (ViZDoom under mpirun: test_stop_signals)
    assert r.returncode == 0, r.stderr
    config = json.loads((ck / "doom" / "config.json").read_text())
    assert (config["pixels"]["frame_skip"], config["preset"], config["optim_epochs"], config["norm_reward"], config["rnn"]) == (
        4, "vizdoom", 10, True, "gru")
    r = run_cli(["--mode", "play", "--episodes", "2", "--checkpoint_dir", str(ck), "--model_name", "doom"],
                cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert len(GAME.findall(r.stdout)) == 2
    assert not (tmp_path / "_vizdoom.ini").exists(), "ViZDoom's settings file goes to a temporary directory"


def test_a_vizdoom_multibinary_id_trains(tmp_path):
    pytest.importorskip("vizdoom", reason="vizdoom is not installed: pip install 'ppo1[vizdoom]'")
    r = run_cli([*TINY, "--env_steps", "256", "--env_name", "VizdoomBasic-MultiBinary-v1", "--frame_size", "42",
                 "--checkpoint_dir", str(tmp_path / "ck"), "--model_name", "doom-mb"], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "ppo1: done: 256 steps" in r.stdout


# ------------------------------------------------------------------------------ Dict entries: read or refused
def _make_entries(vectors: bool = True, **kwargs):
    from ppo1.envs import EnvOptions, make_gym_env
    return make_gym_env("tests.entriesenv:make", np.random.SeedSequence(0),
                        options=EnvOptions(env_kwargs=json.dumps(kwargs), frames=Frames(vectors=vectors)))


@pytest.mark.parametrize("image", [True, False], ids=["beside an image", "alone"])
def test_a_text_entry_is_refused_in_one_line_naming_it_with_or_without_an_image(image):
    from ppo1 import PPO1Error
    with pytest.raises(PPO1Error) as raised:
        _make_entries(extra="text", image=image)
    assert "Text(" in str(raised.value) and "\n" not in str(raised.value)
    if image:  # the entry named, and the way to train on the images alone
        assert str(raised.value).startswith("--env_name='tests.entriesenv:make' has an observation entry 'note' of "
                                            "Text("), raised.value
        env = _make_entries(vectors=False, extra="text")  # --no-obs_vectors: the images alone, as asked
        try:
            assert "vector" not in env.obs_spec.entries
        finally:
            env.close()


@pytest.mark.parametrize("image", [True, False], ids=["beside an image", "alone"])
def test_a_nested_dict_entry_is_flattened_into_the_vector_with_or_without_an_image(image):
    env = _make_entries(extra="nested", image=image)
    try:
        obs = env.reset()
        # pos (0.5, -0.5), then mode 2 of Discrete(3) one-hot: the same 5 numbers whether an image is beside it
        np.testing.assert_array_equal(obs["vector"], np.array([0, 0, 1, 0.5, -0.5], np.float32))
        assert ("image" in obs.entries) == image
    finally:
        env.close()


@pytest.mark.parametrize("image", [True, False], ids=["beside an image", "alone"])
def test_an_action_mask_entry_of_another_size_than_the_actions_is_refused_at_set_up(image):
    from ppo1 import PPO1Error
    with pytest.raises(PPO1Error) as raised:
        _make_entries(extra="none" if image else "nested", image=image, mask=5)
    assert str(raised.value) == ("--env_name='tests.entriesenv:make' has an 'action_mask' entry of MultiBinary(5), "
                                 "5 values: its actions Discrete(3) need 3, one per choice"), raised.value
    env = _make_entries(extra="none" if image else "nested", image=image, mask=3)  # one per action: read
    try:
        assert env.reset()["action_mask"].tolist() == [True] * 3
    finally:
        env.close()


def test_what_the_policy_reads_is_said_in_words_entry_by_entry_with_where_the_mask_comes_from():
    from ppo1.envs import EnvOptions, make_vec_env
    made = [("tests.entriesenv:make", {"extra": "nested", "mask": 3}, Frames(vectors=True)),
            ("tests.entriesenv:make", {"extra": "nested", "image": False}, None),
            ("tests.entriesenv:make", {"extra": "none"}, Frames(size=12, stack=1)),
            ("tests.maskenv:make", {"mode": "method"}, None)]
    said = []
    for name, kwargs, frames in made:
        venv = make_vec_env(name, 1, 0, 0, EnvOptions(env_kwargs=json.dumps(kwargs), frames=frames))
        said.append(venv.reads())
        venv.close()
    assert said == [
        "image (4, 24, 24): the env's 24x24x1 'screen' kept at its size, 4 frames; vector (5,): 5 numbers of "
        "'state'; action_mask (3,) from its 'action_mask' entry",
        "vector (5,): the observation as 5 numbers",
        "image (1, 12, 12): the env's 24x24x1 'screen' resized to 12x12, 1 frame",
        "vector (5,): the observation as 5 numbers; action_mask (5,) from action_masks()"]
