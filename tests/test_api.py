"""The Python API: docs/api.md's example runs as written (a shorter env_steps), and errors raise PPO1Error."""
import json
import os
import re

import pytest

from conftest import REPO
from ppo1 import PPO1Error, Config


def example() -> str:
    with open(os.path.join(REPO, "docs", "api.md")) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    return blocks[-1]  # the complete example


def test_the_example_of_docs_api_md_trains_plays_and_catches_an_error(tmp_path, monkeypatch, capsys):
    code = example()
    assert "env_steps=1_100_000" in code and "envs_per_rank=8," in code
    code = code.replace("env_steps=1_100_000", "env_steps=256, num_threads=1").replace(  # one iteration of 2 envs
        "envs_per_rank=8,", "envs_per_rank=2,")  # x 128 steps (the preset's): what the example runs, scaled down
    monkeypatch.chdir(tmp_path)  # run as a notebook's cell, in this process, from tmp_path
    exec(compile(code, "docs/api.md", "exec"), {})
    out = capsys.readouterr().out
    assert "256 agent steps" in out
    scores = re.search(r"scores of 2 whole games: \[(.*)\]", out).group(1).split(", ")
    assert len(scores) == 2 and all(-21 <= float(s) <= 21 for s in scores)
    assert "error: no run directory" in out
    assert (tmp_path / "checkpoints" / "notebook-pong" / "config.json").exists()


def test_for_preset_applies_the_preset_to_settings_not_given():
    fast = Config.for_preset("fast", optim_epochs=2)
    assert (fast.model_type, fast.optim_stepsize, fast.optim_epochs) == ("small", 1.25e-3, 2)
    assert Config.for_preset().preset == "paper" and Config.for_preset().frame_norm == "center"


@pytest.mark.parametrize("settings, words", [({"env_stepz": 1}, "'env_stepz' is not a setting"),
                                             ({"gamma": 2.0}, "--gamma=2.0 is invalid"),
                                             ({"preset": "fastest"}, "is not a preset")])
def test_bad_settings_raise_ppo1error_with_the_cli_message(settings, words):
    with pytest.raises(PPO1Error, match=re.escape(words)):
        Config.for_preset(**settings)


def test_train_refuses_a_config_and_settings_together():
    from ppo1 import train
    with pytest.raises(PPO1Error, match="not both"):
        train(Config(), env_steps=1)


def test_train_and_play_stay_the_api_functions_after_their_modules_load():
    # the modules behind them (ppo1.trainer, ppo1.player) have names of their own: once loaded, `from ppo1 import
    # train, play` (a notebook cell run again) still gives the API's functions
    import importlib
    import ppo1
    from ppo1 import api
    train_module, play_module = (importlib.import_module(name) for name in ("ppo1.trainer", "ppo1.player"))
    from ppo1 import play, train
    assert train is api.train and play is api.play and ppo1.train is api.train
    # the modules themselves stay importable by their full names
    assert hasattr(train_module, "Trainer") and not hasattr(play_module, "Trainer")
    assert (train_module.__name__, play_module.__name__) == ("ppo1.trainer", "ppo1.player")


def test_train_with_settings_makes_each_env_once(tmp_path):
    # the env made to learn the family of the settings' env becomes the run's first env, as on the command line
    log = tmp_path / "made.txt"
    from ppo1 import train
    r = train(env_name="tests.pixelenv:make_counted_env", env_kwargs=json.dumps({"log": str(log), "size": 24}),
              env_steps=256, envs_per_rank=2, timesteps_per_actorbatch=128, optim_batchsize=32, num_threads=1,
              checkpoint_dir=str(tmp_path), model_name="api", log=None)
    assert r.timesteps == 256
    assert len(log.read_text().splitlines()) == 2  # its 2 envs, the first the one made to learn its family
