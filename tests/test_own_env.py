"""A user's own gymnasium env with image observations: named as package.module:callable (with --env_kwargs)
or module:EnvId, preprocessed by ppo1.envs.pixels, trained, resumed, played and recorded through the real CLI.
The env is tests/pixelenv.py."""
import json
import re
import sys

import numpy as np
import pytest
import torch

from conftest import TINY, decode, run_cli
from ppo1 import PPO1Error
from ppo1.config import Config
from ppo1.envs import EnvOptions, env_family, env_seed, make_vec_env
from ppo1.envs.pixels import Frames, PixelEnv, obs_shape, preprocess, push, repeat_action
from ppo1.policies import build

FACTORY = ["--env_name", "tests.pixelenv:make_env", "--env_kwargs", '{"size": 24}']
GAME = re.compile(r"^game \d+/\d+: score (\S+), (\d+) agent steps", re.M)


# ------------------------------------------------------------------------------ preprocessing
def test_a_frame_is_resized_by_area_and_turned_gray_channels_first():
    image = np.zeros((4, 4, 3), np.uint8)
    image[:2, :2] = (255, 0, 0)          # a red block top left: its 2x2 area is one pixel of the 2x2 frame
    image[2:, 2:] = (0, 0, 255)          # blue bottom right
    gray = preprocess(image, Frames(size=2, gray=True))
    assert gray.shape == (1, 2, 2) and gray.dtype == np.uint8
    assert gray[0].tolist() == [[76, 0], [0, 29]]  # ITU-R 601 luma: 0.299 x 255, 0.114 x 255
    rgb = preprocess(image, Frames(size=2, gray=False))
    assert rgb.shape == (3, 2, 2) and rgb[:, 0, 0].tolist() == [255, 0, 0] and rgb[:, 1, 1].tolist() == [0, 0, 255]
    native = preprocess(image[:, :, 0], Frames(size=0))  # (H, W) images have one channel; 0 keeps the size
    assert native.shape == (1, 4, 4) and native[0, 0, 0] == 255
    assert obs_shape((210, 160, 3), Frames(size=0, gray=False, stack=2)) == (6, 210, 160)
    assert obs_shape((100, 48), Frames()) == (4, 84, 84)  # larger than --frame_size on a side: resized
    # smaller on both sides (a 7x7 symbolic view): its size and channels kept, no upscaling, no gray
    assert obs_shape((64, 48), Frames()) == (4, 64, 48) and obs_shape((7, 7, 3), Frames()) == (12, 7, 7)


def test_the_frame_stack_holds_the_last_frames_oldest_first():
    stack = np.zeros((3 * 2, 1, 1), np.uint8)  # 3 frames of 2 channels
    for value in (1, 2, 3, 4):
        push(stack, np.full((2, 1, 1), value, np.uint8))
    assert stack.ravel().tolist() == [2, 2, 3, 3, 4, 4]


class Countdown:
    """A hand-built env for repeat_action: step i pays reward i and terminates at step `end`."""

    def __init__(self, end: int):
        self.end, self.i = end, 0

    def step(self, action):
        self.i += 1
        return self.i, float(self.i), self.i == self.end, False, {}


def test_frame_skip_repeats_the_action_summing_rewards_and_stops_where_the_episode_ends():
    assert repeat_action(Countdown(end=10), 0, 4) == (4, 1 + 2 + 3 + 4, False, False)
    assert repeat_action(Countdown(end=2), 0, 4) == (2, 1 + 2, True, False)


def test_a_time_limit_truncation_is_done_with_its_last_observation_kept_for_the_bootstrap():
    from ppo1.envs.ref import resolve
    env = PixelEnv(resolve("tests.pixelenv:make_env", '{"size": 16, "max_steps": 3}'), env_seed(0, 0, 0),
                   Frames(size=16, stack=2))
    first = env.reset()["image"].copy()
    assert first.shape == (2, 16, 16) and np.array_equal(first[0], first[1]), "a start repeats its first frame"
    results = [env.step(0) for _ in range(3)]  # up, up, up: seed 0 puts the goal elsewhere
    ep = results[-1][3]
    assert [r[2] for r in results] == [False, False, True] and ep.truncated and ep.length == 3
    assert env.cut_obs is not None and not np.array_equal(env.cut_obs["image"], results[-1][0]["image"])


def test_videos_show_the_envs_render_else_its_own_images():
    from ppo1.envs.ref import resolve
    ref = resolve("tests.pixelenv:make_env", '{"size": 16}')
    rendered, plain = (PixelEnv(ref, env_seed(0, 0, 0), Frames(), render_mode=mode) for mode in ("rgb_array", None))
    for env in (rendered, plain):
        env.reset()
        env.step(1)
        np.testing.assert_array_equal(env.rgb(), env.gym_env.unwrapped._image())
    assert plain.gym_env.render_mode is None and rendered.gym_env.render_mode == "rgb_array"
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4)  # an (H, W) image becomes RGB
    plain._raw["image"] = gray
    assert plain.rgb().shape == (3, 4, 3) and np.array_equal(plain.rgb()[:, :, 2], gray)


# ------------------------------------------------------------------------------ naming an env
def test_the_three_ways_of_naming_an_env_give_their_families():
    assert env_family("tests.pixelenv:make_env", '{"size": 24}').name == "pixels"
    assert env_family("tests.pixelenv:PixelSquare-v0").name == "pixels"   # module:EnvId, registered on import
    assert env_family("CartPole-v1").name == "vector" and env_family("PongNoFrameskip-v4").name == "atari"
    venv = make_vec_env("tests.pixelenv:make_env", 2, seed=0, rank=0,
                        options=EnvOptions('{"size": 24}', Frames(size=0, gray=False, stack=1)))
    assert venv.reset()["image"].shape == (2, 3, 24, 24) and venv.obs["image"].dtype == np.uint8
    assert venv.num_actions == 4


# ------------------------------------------------------------------------------ through the CLI
@pytest.fixture(scope="module")
def pixel_run(tmp_path_factory):
    """(checkpoint_dir, CompletedProcess) of a factory env trained 2 iterations in one process of 4 envs (the
    factory does not depend on the ranks)."""
    ck = tmp_path_factory.mktemp("own_env")
    r = run_cli([*TINY, "--env_steps", "1024", *FACTORY, "--checkpoint_dir", str(ck), "--model_name", "px",
                 "--envs_per_rank", "4"])
    assert r.returncode == 0, r.stderr
    return ck, r


def test_a_factory_env_trains_and_its_config_records_how_to_make_it(pixel_run):
    ck, r = pixel_run
    assert "1 ranks x 4 envs = 4 actors" in r.stdout and "done: 1024 steps in 2 iterations" in r.stdout
    config = json.loads((ck / "px" / "config.json").read_text())
    assert config["env_name"] == "tests.pixelenv:make_env" and json.loads(config["env_kwargs"]) == {"size": 24}
    pixels = config["pixels"]  # the family's settings in a section of their own
    assert (pixels["frame_size"], pixels["frame_gray"], pixels["frame_stack"], pixels["frame_skip"]) == (84, True, 4, 1)
    assert config["preset"] == "paper" and config["model_type"] == "small"


def test_a_factory_run_resumes_and_plays_and_records_the_env_it_was_trained_on(pixel_run):
    ck, _ = pixel_run
    common = ["--checkpoint_dir", str(ck), "--model_name", "px"]
    r = run_cli([*common, "--env_steps", "1536"])  # the same env from config.json, one more iteration
    assert r.returncode == 0, r.stderr
    assert "(iteration 2, 1024 steps)" in r.stdout and "done: 1536 steps in 3 iterations" in r.stdout
    r = run_cli(["--mode", "play", "--episodes", "3", *common])
    assert r.returncode == 0, r.stderr
    games = GAME.findall(r.stdout)
    # the env's own returns: 1 for reaching the goal, else 0 when cut at its 50-step limit
    assert len(games) == 3 and all((s, n) == ("0", "50") or (s == "1" and int(n) <= 50) for s, n in games), r.stdout
    r = run_cli(["--mode", "movie", *common])
    assert r.returncode == 0, r.stderr
    [mp4] = (ck / "px").glob("tests.pixelenv-make_env_iter3_*.mp4")
    (width, height), fps, frames = decode(str(mp4))
    assert (width, height, fps) == (24, 24, 10) and len(frames) > 1  # the env's render: 24x24 at its 10 fps
    r = run_cli(["--mode", "plot", *common])
    assert r.returncode == 0 and (ck / "px" / "learning_curve.png").exists(), r.stderr


def test_a_checkpoint_refuses_the_env_once_its_observations_differ(pixel_run, tmp_path):
    import shutil
    ck, _ = pixel_run
    shutil.copytree(ck / "px", tmp_path / "px")
    config = json.loads((tmp_path / "px" / "config.json").read_text())
    config["pixels"]["frame_size"] = 20  # a "changed env": its 24x24 RGB images (kept as they are) now resized
    (tmp_path / "px" / "config.json").write_text(json.dumps(config))
    r = run_cli(["--checkpoint_dir", str(tmp_path), "--model_name", "px", "--env_steps", "2048"])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "ppo1: error: checkpoint holds a model of observations image (12, 24, 24), tests.pixelenv:make_env now "
        "gives image (4, 20, 20): was the env or its preprocessing changed?"]


def test_play_and_movie_size_the_model_from_the_checkpoint_and_refuse_an_env_that_changed(pixel_run, tmp_path):
    import shutil
    from ppo1.config import Config
    from ppo1.distributed import Comm
    from ppo1.evaluate import load_trained
    from ppo1.envs import make_eval_env
    ck, _ = pixel_run
    shutil.copytree(ck / "px", tmp_path / "px")
    saved = torch.load(tmp_path / "px" / "latest.pt", weights_only=False)
    assert saved["model_io"] == {"actions": "discrete", "stacked": False}  # 4 RGB frames, not 4 gray ones
    assert saved["obs_spec"] == [["image", "image", [12, 24, 24]]]
    saved["config"]["env_kwargs"] = '{"size": 4}'  # PixelSquare refuses it: no env of this run can be made now
    torch.save(saved, tmp_path / "px" / "latest.pt")
    trained = load_trained(Config(checkpoint_dir=str(tmp_path), model_name="px"), {}, Comm(None))  # makes no env
    assert trained.obs_spec.describe() == "image (12, 24, 24)" and trained.policy.num_actions == 4
    seed = np.random.SeedSequence(0)
    fits = make_eval_env("tests.pixelenv:make_env", seed, options=EnvOptions('{"size": 24}'))
    trained.check_env(fits)
    fits.close()
    smaller = make_eval_env("tests.pixelenv:make_env", seed, options=EnvOptions('{"size": 24}', Frames(size=20)))
    with pytest.raises(PPO1Error, match=r"holds a model of observations image \(12, 24, 24\), .* now gives image \(4, 20, 20\)"):
        trained.check_env(smaller)
    smaller.close()
    binary = make_eval_env("tests.pixelenv:make_env", seed, options=EnvOptions('{"size": 24, "multibinary": true}'))
    with pytest.raises(PPO1Error, match=r"has 4 actions, .* has actions \[2, 2, 2, 2\]"):
        trained.check_env(binary)
    binary.close()
    del saved["model_io"]  # a checkpoint of a version before model_io, which needed its env to size its model
    saved["format"] = 1
    torch.save(saved, tmp_path / "px" / "latest.pt")
    with pytest.raises(PPO1Error, match=r"latest.pt is of a ppo1 version before 2026-12-02, which did not save what"):
        load_trained(Config(checkpoint_dir=str(tmp_path), model_name="px"), {}, Comm(None),
                     str(tmp_path / "px" / "latest.pt"))


def test_each_env_is_made_once_a_new_run_keeps_the_env_that_told_its_family_and_play_makes_one(tmp_path):
    log = tmp_path / "made.txt"
    where = ["--checkpoint_dir", str(tmp_path), "--model_name", "once"]
    r = run_cli([*TINY, "--env_steps", "256", "--env_name", "tests.pixelenv:make_counted_env", "--env_kwargs",
                 json.dumps({"log": str(log), "size": 24}), *where])
    assert r.returncode == 0, r.stderr
    assert len(log.read_text().splitlines()) == 2  # its 2 envs, the first the one made to learn its family
    log.unlink()
    r = run_cli(["--mode", "play", "--episodes", "1", *where])
    assert r.returncode == 0, r.stderr
    assert len(log.read_text().splitlines()) == 1  # the model is sized from the checkpoint


def test_an_env_registered_on_import_trains_as_module_colon_id(tmp_path):
    r = run_cli([*TINY, "--env_name", "tests.pixelenv:PixelSquare-v0", "--frame_size", "0", "--model_type",
                 "impala", "--checkpoint_dir", str(tmp_path), "--model_name", "id"])
    assert r.returncode == 0, r.stderr
    assert "ppo1: done: 512 steps" in r.stdout


# one process each: test_cli's 2-rank runs pin that a set-up refusal reaches every rank (another game's
# checkpoint) and that ranks failing alike print one line (a game that does not exist)
@pytest.mark.parametrize("args,message", [
    (["--env_name", "no_such_module:make_env"],
     "module 'no_such_module' cannot be imported: ModuleNotFoundError: No module named 'no_such_module'"),
    (["--env_name", "tests.pixelenv:nothing"], "module 'tests.pixelenv' has no attribute 'nothing'"),
    (["--env_name", "tests.pixelenv:NOT_CALLABLE"], "tests.pixelenv.NOT_CALLABLE is not callable (it is int 42)"),
    (["--env_name", "tests.pixelenv:not_an_env"], "tests.pixelenv:not_an_env() returned list, not a gymnasium Env"),
    ([*FACTORY[:3], '{"size": 4}'],
     "tests.pixelenv:make_env(size=4) raised ValueError: size must be at least 8, not 4"),
    ([*FACTORY[:3], '[24]'], "--env_kwargs='[24]' is not a JSON object"),
    ([*FACTORY[:3], '{size: 24}'], "--env_kwargs='{size: 24}' is not valid JSON"),
    ([*FACTORY[:3], '{"colour": 1}'], "raised TypeError: PixelSquare.__init__() got an unexpected keyword argument"),
    (["--env_name", "tests.pixelenv:make_tuple_env", "--env_kwargs", '{"size": 24}'],
     "has actions Tuple(Discrete(4), Discrete(2)): ppo1 trains image observations with Discrete, MultiDiscrete or "
     "MultiBinary (of one dimension) actions"),
    (["--env_name", "CartPole-v1", "--frame_stack", "2"], "--frame_stack is for image-observation envs"),
])
def test_an_env_that_cannot_be_named_made_or_trained_is_one_line_and_exit_2(tmp_path, args, message):
    r = run_cli([*TINY, *args, "--checkpoint_dir", str(tmp_path), "--model_name", "bad"], timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ppo1: error: ") and message in lines[0], r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert not (tmp_path / "bad").exists()


# ------------------------------------------------------------------------------ Dict observations
def test_a_dict_observation_trains_on_its_image_entries_unless_obs_key_names_one(tmp_path):
    import gymnasium
    from ppo1.envs.pixels import image_key, image_keys
    from tests.pixelenv import make_dict_env
    env = make_dict_env(size=24)
    assert image_key(env.observation_space) == "screen" and image_key(env.observation_space, "screen") == "screen"
    with pytest.raises(PPO1Error, match=r"--obs_key='steps' is not an image entry .* choose from screen"):
        image_key(env.observation_space, "steps", "e")
    two = gymnasium.spaces.Dict({"a": env.observation_space["screen"], "b": env.observation_space["screen"]})
    assert image_keys(two, "", "e") == ["a", "b"] and image_keys(two, "b", "e") == ["b"]
    with pytest.raises(PPO1Error, match="--obs_key='a' is for Dict observations"):
        image_key(env.observation_space["screen"], "a", "e")
    r = run_cli([*TINY, "--env_name", "tests.pixelenv:make_dict_env", "--env_kwargs", '{"size": 24}',
                 "--frame_size", "0", "--checkpoint_dir", str(tmp_path), "--model_name", "d"])
    assert r.returncode == 0, r.stderr
    state = json.loads((tmp_path / "d" / "config.json").read_text())
    assert state["pixels"]["obs_key"] == "" and state["pixels"]["obs_vectors"] and "ppo1: done: 512 steps" in r.stdout
    saved = torch.load(tmp_path / "d" / "latest.pt", weights_only=True)
    # 4 gray frames and the step count beside them; its statistics and the heads' extra input saved
    assert saved["obs_spec"] == [["image", "image", [4, 24, 24]], ["vector", "vector", [1]]]
    assert saved["model"]["vec_rms.count"] > 500
    assert saved["model"]["pi.weight"].shape[1] == 256 + 1
    r = run_cli(["--mode", "play", "--episodes", "1", "--checkpoint_dir", str(tmp_path), "--model_name", "d"])
    assert r.returncode == 0 and "ppo1: 1 games: score" in r.stdout, r.stderr
    # as the version before observations had named entries wrote it: the vector packed into a 5th channel
    del saved["obs_spec"]
    saved["format"], saved["obs_shape"], saved["model_io"]["vec_dim"] = 1, [5, 24, 24], 1
    torch.save(saved, tmp_path / "d" / "latest.pt")
    r = run_cli(["--mode", "play", "--episodes", "1", "--checkpoint_dir", str(tmp_path), "--model_name", "d"])
    assert r.returncode == 0 and "ppo1: 1 games: score" in r.stdout, r.stderr


def test_a_dicts_vector_entries_reach_the_policy_beside_the_image_and_change_what_it_outputs():
    from ppo1.envs.ref import resolve
    from ppo1.envs.pixels import Frames, PixelEnv
    from ppo1.observations import Obs
    ref = resolve("tests.pixelenv:make_dict_env", '{"size": 24}')
    env = PixelEnv(ref, env_seed(0, 0, 0), Frames(size=0, vectors=True))
    plain = PixelEnv(ref, env_seed(0, 0, 0), Frames(size=0))
    assert (env.obs_spec.describe(), plain.obs_spec.describe()) == ("image (4, 24, 24), vector (1,)", "image (4, 24, 24)")
    obs = env.reset()
    np.testing.assert_array_equal(obs["image"], plain.reset()["image"])
    assert obs["vector"].tolist() == [0.0] and obs["vector"].dtype == np.float32
    obs, *_ = env.step(0)
    assert obs["vector"].tolist() == [1.0], "the steps entry after one step"
    policy = build("small", env.action_space, env.obs_spec)
    early, late = obs.copy(), obs.copy()
    late["vector"][:] = 40.0
    both = Obs.stack([early, late])
    assert policy.observe(both)  # the running statistics of the vector: mean 20.5, std 19.5
    logits, values = policy.heads(policy.features(both.map(torch.from_numpy)))
    assert not torch.equal(values[0], values[1]) and not torch.equal(logits[0], logits[1])
    for e in (env, plain):
        e.close()


def test_a_missing_package_of_a_known_id_names_the_extra_to_install():
    from ppo1.envs.ref import Package, import_package
    missing = Package("Nosuch", "no_such_package.gymnasium_wrapper", "nosuch", {})
    with pytest.raises(PPO1Error, match=r"--env_name='NosuchGame-v0' needs the 'nosuch' package, which cannot "
                                        r"be imported .*: pip install 'ppo1\[nosuch\]'"):
        import_package("NosuchGame-v0", "NosuchGame-v0", packages=(missing,))


def test_a_factory_module_that_needs_a_missing_extra_names_it_in_one_line(tmp_path, monkeypatch):
    from ppo1.envs.ref import resolve
    (tmp_path / "retrogame.py").write_text("import stable_retro\nmake = stable_retro.make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "stable_retro", None)  # as where stable-retro is not installed
    with pytest.raises(PPO1Error, match=r"module 'retrogame' cannot be imported: ModuleNotFoundError: .*"
                                        r"\(pip install 'ppo1\[retro\]'\)$"):
        resolve("retrogame:make")
    (tmp_path / "other.py").write_text("import no_such_module_anywhere\n")
    with pytest.raises(PPO1Error) as e:
        resolve("other:make")
    assert "pip install" not in str(e.value), "a module no extra provides is named as it is"


def test_the_complete_example_of_the_own_env_page_trains_and_plays(tmp_path):
    import os
    page = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "own-env.md")).read()
    code = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    assert len(code.splitlines()) <= 45, "a short example"
    (tmp_path / "mygame.py").write_text(code)
    args = ["--env_name", "mygame:make_env", "--env_kwargs", '{"size": 32}', "--checkpoint_dir", str(tmp_path / "ck"),
            "--model_name", "square"]
    r = run_cli([*TINY, *args, "--snapshot_interval", "1"], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "ck" / "square" / "snapshot.png").exists()
    r = run_cli(["--mode", "play", "--episodes", "2", *args], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert len(GAME.findall(r.stdout)) == 2


def test_a_family_registered_from_outside_ppo1_trains_plays_and_records(tmp_path):
    # tests/toyfamily.py registers its family when --env_name names its module: no table in ppo1 is edited
    common = ["--env_name", "tests.toyfamily:coin", "--checkpoint_dir", str(tmp_path), "--model_name", "coin"]
    r = run_cli([*common, "--env_steps", "4096", "--envs_per_rank", "2", "--timesteps_per_actorbatch", "256",
                 "--optim_batchsize", "64", "--num_threads", "1"])
    assert r.returncode == 0, r.stderr
    saved = json.loads((tmp_path / "coin" / "config.json").read_text())
    assert (saved["preset"], saved["model_type"]) == ("mujoco", "mlp")  # the family's default preset
    r = run_cli(["--mode", "play", "--episodes", "4", "--greedy", *common])
    assert r.returncode == 0 and "4 games: score " in r.stdout, r.stdout + r.stderr
    assert float(r.stdout.split("4 games: score ")[1].split()[0]) > 4  # of 8: it learned to name the coin
    r = run_cli(["--mode", "movie", "--max_frames", "16", *common, "--asset_dir", str(tmp_path / "assets")])
    assert r.returncode == 0, r.stderr
    assert list((tmp_path / "assets" / "coin").glob("*.mp4"))
    refused = run_cli([*common[:2], "--episode_life", "--checkpoint_dir", str(tmp_path)])
    assert refused.returncode == 2 and "--episode_life is for Atari games" in refused.stderr


def test_a_family_is_refused_at_registration_when_its_table_could_not_use_it():
    from ppo1.envs import Family, families
    from ppo1.envs.family import Families

    def table():  # a table of its own: the process's stays as it is
        t = Families()
        for f in families:
            t.register(f)
        return t
    named = lambda name, kwargs: name.startswith("mine:")  # noqa: E731
    with pytest.raises(PPO1Error, match="'atari' is registered already"):
        table().register(Family("atari", "x", presets=("paper",), claims=named, make_vec=print, make_eval=print))
    with pytest.raises(PPO1Error, match="give it either claims .names. or observations"):
        table().register(Family("mine", "x", presets=("paper",), make_vec=print, make_eval=print))
    with pytest.raises(PPO1Error, match="a family that claims names makes its envs: give it make_vec and make_eval"):
        table().register(Family("mine", "x", presets=("paper",), claims=named, make_vec=print))


def test_an_image_smaller_than_frame_size_keeps_its_size_and_channels_and_a_torso_that_keeps_its_layout():
    from ppo1.envs.ref import resolve
    env = PixelEnv(resolve("tests.pixelenv:make_env", '{"size": 8}'), env_seed(0, 0, 0), Frames())
    # an 8x8 RGB view (one pixel per cell, as a symbolic grid): four frames of its three channels, not 84x84 gray
    assert env.obs_spec.describe() == "image (12, 8, 8)"
    obs = env.reset()
    assert obs["image"][:3].transpose(1, 2, 0).tolist() == env.gym_env.unwrapped._image().tolist()
    # small and large read it through 2 padded 3x3 convolutions: 32 x 8 x 8 features, every cell in its place
    # (impala pools 8x8 down to 1x1)
    for model_type in ("small", "large"):
        policy = build(model_type, env.action_space, env.obs_spec)
        convolved = policy.torso[:-2](policy.torso_input(torch.from_numpy(obs["image"])[None]))
        assert convolved.shape == (1, 32 * 8 * 8)
        logits, values = policy.heads(policy.features(obs.map(torch.from_numpy)[None]))
        assert logits.shape == (1, 4) and values.shape == (1,)
        assert policy.describe() == ("image (12, 8, 8): 2 convolutions 3x3 that keep the 8x8 layout (smaller than the "
                                     f"{model_type} CNN's {20 if model_type == 'small' else 36} px)")
    env.close()


def test_a_run_of_the_version_that_resized_small_images_plays_and_resumes_with_frame_upscale(tmp_path):
    # as that version saved it: no frame_upscale setting, obs_shape, model_io's vec_dim
    where = ["--checkpoint_dir", str(tmp_path), "--model_name", "old"]
    r = run_cli([*TINY, "--env_steps", "256", *FACTORY, "--frame_upscale", *where])
    assert r.returncode == 0, r.stderr
    run = tmp_path / "old"
    config = json.loads((run / "config.json").read_text())
    del config["pixels"]["frame_upscale"]
    (run / "config.json").write_text(json.dumps(config))
    saved = torch.load(run / "latest.pt", weights_only=True)
    assert saved.pop("obs_spec") == [["image", "image", [4, 84, 84]]]  # 24x24 RGB resized and grayed
    del saved["config"]["pixels"]["frame_upscale"]
    saved["format"], saved["obs_shape"], saved["model_io"]["vec_dim"] = 1, [4, 84, 84], 0
    torch.save(saved, run / "latest.pt")
    r = run_cli(["--mode", "play", "--episodes", "1", *where])  # its images resized as then
    assert r.returncode == 0 and "ppo1: 1 games: score" in r.stdout, r.stderr
    r = run_cli(["--env_steps", "512", *where])
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "ppo1: error: checkpoint holds a model of observations image (4, 84, 84), tests.pixelenv:make_env now "
        "gives image (12, 24, 24): was the env or its preprocessing changed? (its version resized every image: "
        "give --frame_upscale to resume it)"]
    r = run_cli(["--env_steps", "512", "--frame_upscale", *where])
    assert r.returncode == 0 and "resuming from" in r.stdout, r.stderr
    assert json.loads((run / "config.json").read_text())["pixels"]["frame_upscale"] is True


def test_an_env_refused_at_its_first_reset_leaves_no_run_directory_and_an_existing_one_stays(tmp_path):
    # a mask of 5 values where its space declares 3, given at the first reset: the lock file was left behind
    import dataclasses

    from ppo1.config import Config
    from ppo1.distributed import Comm
    from ppo1.trainer import train
    config = Config.for_preset(env_name="tests.entriesenv:make", env_kwargs=json.dumps(
        {"extra": "nested", "image": False, "mask": 3, "given": 5}), checkpoint_dir=str(tmp_path), model_name="bad",
        envs_per_rank=1, timesteps_per_actorbatch=16, optim_batchsize=16, env_steps=16)
    with pytest.raises(PPO1Error, match=r"gave an action mask \(its 'action_mask' entry\) of shape \(5,\)"):
        train(config, Comm(None), log=lambda *a: None)
    assert not (tmp_path / "bad").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "progress.csv").write_text("iteration\n1\n")  # a run's files: never removed
    with pytest.raises(PPO1Error, match="gave an action mask"):
        train(dataclasses.replace(config, model_name="kept"), Comm(None), log=lambda *a: None)
    assert sorted(p.name for p in kept.iterdir()) == ["progress.csv", "train.lock"]


def test_an_image_of_codes_is_read_as_the_numbers_it_holds_where_its_space_says_so_and_the_flag_overrides():
    from ppo1.envs.ref import resolve
    ref = resolve("bench.cue:grid", '{"delay": 3}')  # a 7x7x1 grid whose space's high bound is 2: codes
    env = PixelEnv(ref, env_seed(0, 0, 0), Frames(stack=1, codes="auto"))
    assert env.obs_spec.describe() == "image (1, 7, 7) codes" and env.obs_spec.images[0].kind == "codes"
    assert "as codes (values up to 2, not / 255)" in env.reads()
    obs = env.reset()
    policy = build("small", env.action_space, env.obs_spec, frame_norm="center")
    x = policy.torso_input(torch.from_numpy(obs["image"])[None])
    assert sorted(set(x.flatten().tolist())) == [0.0, float(obs["image"].max())] and x.max() in (1.0, 2.0)  # the id
    assert policy.describe().startswith("image (1, 7, 7) codes: 2 convolutions 3x3 that keep the 7x7 layout")
    env.close()
    off = PixelEnv(ref, env_seed(0, 0, 0), Frames(stack=1, codes="off"))  # --frame_codes off: intensities, / 255
    assert off.obs_spec.describe() == "image (1, 7, 7)" and "codes" not in off.reads()
    policy = build("small", off.action_space, off.obs_spec)
    assert float(policy.torso_input(torch.from_numpy(off.reset()["image"])[None]).max()) <= 2 / 255 + 1e-6
    off.close()
    screen = PixelEnv(resolve("bench.cue:screen", "{}"), env_seed(0, 0, 0), Frames(stack=1, codes="auto"))
    assert screen.obs_spec.images[0].kind == "image"  # 0-255 intensities stay images
    screen.close()
    # a new run of an image env reads codes where they are (auto); a config.json without the setting loads off
    cfg = Config.for_preset(env_name="bench.cue:grid", rnn="lstm")
    assert cfg.frame_codes == "auto"
    saved = cfg.to_saved()
    del saved["pixels"]["frame_codes"]
    assert Config.from_dict(saved).frame_codes == "off"
    with pytest.raises(PPO1Error, match="--frame_codes is for image-observation envs other than Atari"):
        Config.for_preset(frame_codes="on")
