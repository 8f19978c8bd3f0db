"""--eval_interval: evaluation games during training, their columns and line, best.pt, --checkpoint best; training
bit-identical with or without evaluation."""
import dataclasses
import os

import pytest
import torch

from conftest import copy_run, rows, run_cli
from ppo1 import PPO1Error, checkpoint, runfiles
from ppo1.config import Config
from ppo1.distributed import Comm
from ppo1.plot import read_eval
from ppo1.trainer import train


def test_a_two_rank_run_evaluates_each_iteration_keeps_the_best_as_best_pt_and_plays_it(cartpole_run, tmp_path):
    # the suite's CartPole run (conftest's cartpole_run): 2 ranks x 1 env, 8 iterations, 3 evaluation games after
    # each (2 on rank 0, 1 on rank 1), --keep_checkpoints 1; this test changes a copy of it
    ck, r = cartpole_run
    run_dir = copy_run(ck / "cp", tmp_path, "cp")
    progress = rows(run_dir / "progress.csv")
    assert [int(p["eval_games"]) for p in progress] == [3] * 8
    for p in progress:  # CartPole: one reward a step, so a game's score is its length
        assert float(p["eval_return_mean"]) == pytest.approx(float(p["eval_length_mean"]))
        assert int(p["eval_steps"]) == round(3 * float(p["eval_length_mean"])) and float(p["eval_seconds"]) > 0
        assert p["eval_train_return_mean"] == ""  # CartPole's evaluation games are its training games
    lines = [line for line in r.stdout.splitlines() if line.startswith("ppo1: evaluation at iteration")]
    assert len(lines) == 8 and "3 games" in lines[0] and "sampled actions" in lines[0] and "new best" in lines[0]
    # best.pt: the first evaluation of the highest score, with its score and iteration; kept by --keep_checkpoints 1
    scores = [float(p["eval_return_mean"]) for p in progress]
    best = checkpoint.load(str(run_dir / "best.pt"))
    assert best.best["score"] == pytest.approx(max(scores)) and best.iteration == scores.index(max(scores)) + 1
    assert best.best["iteration"] == best.iteration and best.optimizer is None
    assert sorted(os.listdir(run_dir)).count("best.pt") == 1 and runfiles.list_checkpoints(str(run_dir)) == [
        runfiles.checkpoint_path(str(run_dir), 8)]
    # play takes it, a .pt file's path, or the newest
    r = run_cli(["--mode", "play", "--checkpoint", "best", "--checkpoint_dir", str(tmp_path), "--model_name", "cp",
                 "--episodes", "1"])
    assert r.returncode == 0, r.stderr
    assert f"best.pt (iteration {best.iteration}" in r.stdout and "best evaluation, score" in r.stdout
    # the plot's evaluation curve: one point per evaluation
    [(what, (steps, _hours, rets))] = read_eval(str(run_dir / "progress.csv"))
    assert what == "evaluation" and rets == pytest.approx(scores) and steps == [1024.0 * i for i in range(1, 9)]
    # a resumed run knows the best so far: a better best.pt is never replaced by a worse one
    better = dataclasses.replace(best, best={**best.best, "score": 1e9})
    runfiles.save_best(str(run_dir), better)
    config = dataclasses.replace(runfiles.load_config(str(run_dir)), checkpoint_dir=str(tmp_path))  # the copy's
    said = []
    train(dataclasses.replace(config, env_steps=9216, envs_per_rank=2), Comm(None), log=said.append)  # same actors
    assert checkpoint.load(str(run_dir / "best.pt")).best["score"] == 1e9
    assert any("best evaluation so far: score 1000000000.00" in line for line in said)
    assert [int(p["iteration"]) for p in rows(run_dir / "progress.csv") if p["eval_games"]][-1] == 9


def test_training_is_bit_identical_with_or_without_evaluation_of_a_recurrent_policy(tmp_path, capsys):
    # --rnn lstm on the cue task (games of 9 steps): evaluations after iterations 2 and 3 (the last), cut at 5 steps
    common = dict(env_name="tests.memoryenv:make", rnn="lstm", env_steps=768, timesteps_per_actorbatch=64,
                  envs_per_rank=4, deterministic=True, checkpoint_dir=str(tmp_path))
    plain = Config.for_preset(model_name="plain", **common)
    evaluated = dataclasses.replace(plain, model_name="evaluated", eval_interval=2, eval_episodes=4, eval_max_steps=5)
    train(plain, Comm(None), log=lambda *a: None)
    capsys.readouterr()
    train(evaluated, Comm(None), log=lambda *a: None)
    said = capsys.readouterr().out.splitlines()  # the console: rank 0's table and lines
    a, b = (checkpoint.load(str(tmp_path / name / "latest.pt"), resume=True) for name in ("plain", "evaluated"))
    assert a.iteration == b.iteration == 3
    for name in a.model:
        assert torch.equal(a.model[name], b.model[name]), name
    assert torch.equal(a.ranks[0]["rnn_state"], b.ranks[0]["rnn_state"])  # the training envs' memories
    assert torch.equal(a.ranks[0]["torch_rng"], b.ranks[0]["torch_rng"])  # the global RNG, untouched
    assert list(a.recent) == list(b.recent)  # the training games
    progress = rows(tmp_path / "evaluated" / "progress.csv")
    assert [p["eval_games"] for p in progress] == ["", "4", "4"]
    assert all(float(p["eval_length_mean"]) == 5.0 for p in progress[1:])  # every game cut at --eval_max_steps
    assert sum("4 cut at --eval_max_steps" in line for line in said) == 2


@pytest.mark.parametrize("change,message", [
    (dict(eval_interval=-1), "--eval_interval=-1 is invalid"),
    (dict(eval_interval=5, eval_episodes=0), "--eval_episodes=0 is invalid: must be a whole number from 1 to"),
    (dict(eval_max_steps=0), "--eval_max_steps=0 is invalid"),
])
def test_bad_evaluation_settings_are_refused_in_one_line(change, message):
    with pytest.raises(PPO1Error, match=message) as e:
        dataclasses.replace(Config(), **change).validate()
    assert "\n" not in str(e.value)
    dataclasses.replace(Config(), eval_episodes=0).validate()  # no evaluation: no games needed


def test_checkpoint_best_without_best_pt_or_a_missing_path_is_refused_in_one_line(tmp_path):
    with pytest.raises(PPO1Error, match=r"--checkpoint best: no best.pt in .*--eval_interval N"):
        runfiles.resolve(str(tmp_path), "best")
    with pytest.raises(PPO1Error, match=r"--checkpoint='nope.pt': no such file; give latest .*, best, or the path"):
        runfiles.resolve(str(tmp_path), "nope.pt")
    r = run_cli(["--mode", "play", "--checkpoint", "best", "--checkpoint_dir", str(tmp_path), "--model_name", "x"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no best.pt" in r.stderr


@pytest.mark.parametrize("image", [False, True], ids=["vector", "image"])
def test_evaluation_games_cut_at_eval_max_steps_each_start_a_new_game(image):
    # a game that never ends, whose every step pays a value its reset draws: 4 games cut at 3 steps score alike
    # only when every reset after a cut starts the env's first game again
    import numpy as np

    from ppo1.envs import EnvOptions, make_eval_env
    from ppo1.evaluate import generator_for, play_games
    from ppo1.policies import build
    env = make_eval_env("tests.endlessenv:make", np.random.SeedSequence(0),
                        options=EnvOptions(env_kwargs='{"image": true}' if image else "{}"))
    try:
        policy = build("impala" if image else "mlp", env.action_space, env.obs_spec)
        games = play_games(policy, env, 4, True, generator_for(np.random.SeedSequence(1)), max_steps=3)
    finally:
        env.close()
    assert all(g.truncated and g.length == 3 for g in games)
    scores = [g.ret for g in games]
    assert len(set(scores)) == 4, scores
