"""stable-retro through the factory form: `--env_name stable_retro:make --env_kwargs '{"game": ...}'` with the
free Airstriker-Genesis ROM the package ships (Box(224, 320, 3) uint8 screens, a MultiBinary(12) Genesis pad),
trained, resumed, played and recorded through the real CLI in one process (what ranks add does not depend on the
family: test_cli's 2-rank Pong). Needs the `retro` extra (stable-retro >= 1.0, whose game ids end in -v0);
skipped elsewhere. stable-retro holds one emulator per process, so a rank has one env (--envs_per_rank 1) and a
second one is refused in one line."""
import json
import re

import pytest

from conftest import decode, run_cli

pytest.importorskip("stable_retro", reason="stable-retro is not installed: pip install -e '.[retro]'")

GAME = "Airstriker-Genesis-v0"
KWARGS = json.dumps({"game": GAME})
ENV = ["--env_name", "stable_retro:make", "--env_kwargs", KWARGS]
SMALL = ["--envs_per_rank", "1", "--timesteps_per_actorbatch", "64", "--optim_batchsize", "32", "--num_threads",
         "1"]  # frame skip 4: stable-retro's default
PLAYED = re.compile(r"^game 1/1: score (\d+), (\d+) agent steps", re.M)


@pytest.fixture(scope="module")
def airstriker(tmp_path_factory):
    """(checkpoint_dir, CompletedProcess) of Airstriker trained 2 iterations of 64 agent steps in one process, with
    an LSTM core (resumed and played by the tests below with its state)."""
    ck = tmp_path_factory.mktemp("retro")
    r = run_cli([*SMALL, *ENV, "--rnn", "lstm", "--env_steps", "128", "--checkpoint_dir", str(ck), "--model_name", "air"])
    assert r.returncode == 0, r.stderr
    return ck, r


def test_the_genesis_pad_and_screen_are_what_ppo1_trains_on():
    import gymnasium
    import stable_retro
    env = stable_retro.make(game=GAME, render_mode="rgb_array")
    try:
        assert isinstance(env, gymnasium.Env)
        assert env.observation_space == gymnasium.spaces.Box(0, 255, (224, 320, 3), "uint8")
        assert env.action_space == gymnasium.spaces.MultiBinary(12)
    finally:
        env.close()


def test_airstriker_trains_on_its_screen_and_pad_with_one_emulator(airstriker):
    ck, r = airstriker
    assert "1 ranks x 1 envs = 1 actors" in r.stdout and "done: 128 steps in 2 iterations" in r.stdout
    config = json.loads((ck / "air" / "config.json").read_text())
    assert config["env_name"] == "stable_retro:make" and json.loads(config["env_kwargs"])["game"] == GAME
    pixels = config["pixels"]
    # frame skip 4 (stable_retro:make's), one frame: --rnn's own (the core remembers, no stack)
    assert (pixels["frame_size"], pixels["frame_gray"], pixels["frame_stack"], pixels["frame_skip"]) == (84, True, 1, 4)
    assert config["rnn"] == "lstm"


def test_an_airstriker_run_resumes_plays_a_whole_game_and_records_the_emulator_screen(airstriker):
    ck, _ = airstriker
    common = ["--checkpoint_dir", str(ck), "--model_name", "air"]
    r = run_cli([*SMALL, *common, "--env_steps", "192"])  # the env of config.json, one more iteration
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stdout and "done: 192 steps in 3 iterations" in r.stdout
    r = run_cli(["--mode", "play", "--episodes", "1", *common])
    assert r.returncode == 0, r.stderr
    [(score, steps)] = PLAYED.findall(r.stdout)
    assert int(score) % 10 == 0 and int(steps) > 50, r.stdout  # a whole game (3 lives), the game's own score
    r = run_cli(["--mode", "movie", "--max_frames", "40", *common])
    assert r.returncode == 0, r.stderr
    [mp4] = (ck / "air").glob("stable_retro-make_iter3_*.mp4")
    (width, height), _fps, frames = decode(str(mp4))
    assert (width, height) == (320, 224) and len(frames) > 1  # the emulator's own screen, not the 84x84 frames


def test_a_second_emulator_in_one_process_is_one_line_and_exit_2(tmp_path):
    r = run_cli([*SMALL, *ENV, "--envs_per_rank", "2", "--checkpoint_dir", str(tmp_path), "--model_name", "two"],
                timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ppo1: error: ") and "multiple emulator instances" in lines[0]
    assert "Traceback" not in r.stdout + r.stderr


def test_a_factory_env_made_for_training_opens_no_window():  # RetroEnv's own default is "human", a window
    from ppo1.envs.ref import resolve
    env = resolve("stable_retro:make", json.dumps({"game": GAME})).make()
    try:
        assert env.render_mode is None
    finally:
        env.close()
