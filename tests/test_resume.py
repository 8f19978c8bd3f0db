"""Exact resume and fault tolerance: real training runs, real signals, real kills."""
import os
import random
import signal
import time

import pytest
import torch

from conftest import copy_run, killed_on_failure, rows, run_cli, run_script, signalled, start, wait_for_rows
from ppo1 import runfiles

HERE = os.path.dirname(os.path.abspath(__file__))
# 2 ranks x 2 envs x T=64: 256 steps per iteration
TINY = ["--envs_per_rank", "2", "--timesteps_per_actorbatch", "64", "--optim_batchsize", "16",
        "--save_interval", "1", "--num_threads", "1"]


def latest(run):
    return torch.load(os.path.join(run, "latest.pt"), weights_only=True)


def assert_same_state(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_sigterm_under_mpirun_checkpoints_and_the_rerun_resumes_bit_identical_to_an_uninterrupted_run(tmp_path):
    # the suite's one signal -> checkpoint -> resume of a whole job (each signal's exit status: test_signals_stop).
    # An LSTM policy on stacks of 4 frames on 2 ranks: what a feed-forward run restores (model, Adam, every rank's
    # RNGs and games with their frame stacks, the schedules), and each env's recurrent state at the stop (zeros
    # instead would change the resumed run). --save_interval 1000: the stop's checkpoint is the only one
    memory = ["--rnn", "lstm", "--bptt_len", "16"]
    common = [*TINY, *memory, "--deterministic", "--save_interval", "1000", "--env_steps", "768",
              "--checkpoint_dir", str(tmp_path)]  # 3 iterations
    full = run_cli([*common, "--model_name", "full"], np_=2)
    assert full.returncode == 0, full.stderr
    part = [*common, "--model_name", "part"]
    code, out, err = signalled(part, tmp_path / "part" / "progress.csv", signal.SIGTERM, np_=2, after=1, timeout=60)
    assert code == 143, "a run stopped by SIGTERM exits 128 + 15, not success"
    assert "stopped by SIGTERM" in out and "run the same command again to resume" in out, out + err
    done = len(rows(tmp_path / "part" / "progress.csv"))
    assert 1 <= done < 3, f"the SIGTERM sent after iteration 1 stopped the run at iteration {done}"
    assert latest(tmp_path / "part")["iteration"] == done
    rest = run_cli(part, np_=2)
    assert rest.returncode == 0, rest.stderr
    assert f"resuming from {tmp_path / 'part' / 'latest.pt'} (iteration {done}," in rest.stdout
    a, b = latest(tmp_path / "full"), latest(tmp_path / "part")
    assert (a["iteration"], a["timesteps"], a["episodes"]) == (b["iteration"], b["timesteps"], b["episodes"]) == \
        (3, 768, a["episodes"])
    assert_same_state(a["model"], b["model"])
    for sa, sb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values()):
        assert_same_state(sa, sb)
    for ra, rb in zip(a["ranks"], b["ranks"]):  # every rank's RNGs and recurrent state
        assert torch.equal(ra["torch_rng"], rb["torch_rng"]) and torch.equal(ra["rnn_state"], rb["rnn_state"])
    # schedules and statistics continued: every logged number but the timings is identical
    ra, rb = rows(tmp_path / "full" / "progress.csv"), rows(tmp_path / "part" / "progress.csv")
    keys = ["iteration", "timesteps", "pol_loss", "vf_loss", "entropy", "approx_kl", "clip_param", "stepsize"]
    assert [[r[k] for k in keys] for r in ra] == [[r[k] for k in keys] for r in rb]
    assert [float(r["clip_param"]) for r in rb] == pytest.approx([0.1, 0.1 * 2 / 3, 0.1 / 3])


def test_env_steps_given_on_resume_extends_the_schedule_not_restarts_it(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)  # 2 iterations of 1 rank x 2 envs x 64 steps: --env_steps 256
    r = run_cli([*TINY, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"])
    assert r.returncode == 0, r.stderr
    progress = rows(run / "progress.csv")
    assert [int(p["timesteps"]) for p in progress] == [128, 256, 384, 512]
    assert float(progress[2]["clip_param"]) == pytest.approx(0.1 * (1 - 256 / 512))


def test_fresh_moves_the_old_run_aside_and_on_a_new_run_moves_nothing(tmp_path):
    common = [*TINY, "--checkpoint_dir", str(tmp_path), "--model_name", "f", "--fresh"]
    r = run_cli([*common, "--env_steps", "128"])
    assert r.returncode == 0, r.stderr
    assert "moved the previous run" not in r.stdout and sorted(os.listdir(tmp_path)) == ["f"]
    r = run_cli([*common, "--env_steps", "256"])  # --fresh again: the finished run moves aside
    assert r.returncode == 0 and "resuming" not in r.stdout and "moved the previous run" in r.stdout
    old = [n for n in os.listdir(tmp_path) if n.startswith("f.old-")]
    assert len(old) == 1 and latest(tmp_path / old[0])["iteration"] == 1
    assert latest(tmp_path / "f")["iteration"] == 2  # a new run of 2 iterations


def test_other_rank_count_with_the_same_actors_resumes_with_a_notice(pong_run, tmp_path):
    ck, name, _ = pong_run  # 4 iterations of 2 ranks x 2 envs under mpirun: 4 actors
    run = copy_run(ck / name, tmp_path, name)
    common = ["--env_steps", "3072", "--checkpoint_dir", str(tmp_path), "--model_name", name]
    r = run_cli([*common, "--envs_per_rank", "4", "--stop_after_iterations", "1"])
    assert r.returncode == 0, r.stderr
    assert "ran on 2 ranks, this run on 1" in r.stdout
    assert "stopped after 1 iterations" in r.stdout and "resume" in r.stdout
    assert latest(run)["iteration"] == 5
    bad = run_cli([*common, "--envs_per_rank", "1"])
    assert bad.returncode == 2 and "trained with 4 actors" in bad.stderr


def test_truncated_newest_checkpoint_is_reported_and_the_previous_used(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)
    newest, previous = runfiles.list_checkpoints(str(run))[:2]   # iterations 2 and 1
    os.unlink(run / runfiles.LATEST)
    os.link(newest, run / runfiles.LATEST)  # as training leaves it: latest.pt is the newest's file
    with open(newest, "r+b") as f:
        f.truncate(os.path.getsize(newest) // 3)
    r = run_cli([*TINY, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "384"])
    assert r.returncode == 0, r.stderr
    assert f"warning: checkpoint {run / runfiles.LATEST} is truncated: its " in r.stdout
    assert f"resuming from {previous} (iteration 1" in r.stdout
    assert latest(run)["iteration"] == 3


def test_a_rank_that_raises_ends_the_whole_job(tmp_path):
    # 100,000 steps would take minutes: ending within the timeout means the job did not wait for them
    r = run_script(os.path.join(HERE, "mpi", "fault_rank.py"), 2, *TINY, "--env_steps", "100000",
                   "--checkpoint_dir", str(tmp_path), timeout=120)
    assert r.returncode != 0
    assert "injected env crash on rank 1" in r.stderr and "rank 1" in r.stderr


def test_kill_9_at_any_moment_leaves_a_loadable_checkpoint_and_no_stale_run_lock(tmp_path):
    # each start after a kill trains on (wait_for_rows fails when it exits): the killed run's lock went with it
    args = ["--envs_per_rank", "1", "--timesteps_per_actorbatch", "32", "--optim_batchsize", "32",
            "--save_interval", "1", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path), "--model_name", "k"]
    rnd = random.Random(0)
    progress = tmp_path / "k" / "progress.csv"
    for attempt in range(3):
        logged = len(rows(progress)) if progress.exists() else 0
        proc = start(args)
        with killed_on_failure(proc):
            wait_for_rows(progress, logged + 1, proc)  # not refused by a stale lock; killed within its next iteration
            time.sleep(rnd.uniform(0.0, 0.5))
            os.killpg(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=60) == -signal.SIGKILL
        state, path, problems = runfiles.load_newest(str(tmp_path / "k"))
        assert state is not None and state.iteration >= 1, problems


def test_failed_checkpoint_write_warns_keeps_the_previous_and_fails_at_the_end(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)  # 2 iterations
    before = (run / "latest.pt").read_bytes()
    r = run_script(os.path.join(HERE, "mpi", "small_disk.py"), 1, *TINY, "--checkpoint_dir", str(tmp_path),
                   "--model_name", "r", "--env_steps", "512", timeout=120)
    # 1 rank x 2 envs x 64 steps: iterations 3, 4; 3 fails with a warning, the final one is an error
    assert "checkpoint at iteration 3 not written" in r.stdout and "training continues" in r.stdout
    assert r.returncode == 2 and "checkpoint at iteration 4 not written" in r.stderr
    assert (run / "latest.pt").read_bytes() == before
    assert not [n for n in os.listdir(run) if ".tmp" in n]


@pytest.mark.parametrize("env", [dict(env_name="CartPole-v1"),
                                 dict(env_name="tests.pixelenv:make_env", frame_stack=1, model_type="small")],
                         ids=["vector", "pixels"])
def test_a_resume_without_its_games_starts_each_env_from_zeros_with_new_seeds(tmp_path, env):
    # vector and pixels envs cannot be snapshotted: a resume makes them anew with the next seed of their place,
    # so their first episodes start from a zero recurrent state and a zero running return, not from the
    # mid-game memory of the episodes the checkpoint left
    from ppo1.config import Config
    from ppo1.distributed import Comm
    from ppo1.envs.base import env_seed
    from ppo1.trainer import Trainer, train
    cfg = Config.for_preset("fast" if "model_type" in env else "ppo_lstm", **env, rnn="gru", rnn_size=16,
                            norm_reward=True, envs_per_rank=2, timesteps_per_actorbatch=16, optim_batchsize=16,
                            optim_epochs=1, env_steps=64, num_threads=1, checkpoint_dir=str(tmp_path), model_name="r")
    assert train(cfg, Comm(), log=lambda *a: None, stop_after=1)["iteration"] == 1
    ranks = latest(tmp_path / "r")["ranks"]
    assert ranks[0]["envs"] is None and ranks[0]["rnn_state"].abs().sum() > 0
    assert ranks[0]["reward_ret"].abs().sum() > 0 or "model_type" in env  # (the pixel game pays at its goal only)
    trainer = Trainer(cfg, Comm(), log=lambda *a: None)
    trainer.resume(*trainer.setup())
    try:
        assert not trainer.collector.memory.any() and not trainer.reward_norm.returns.g.any()
        assert trainer.venv.maker.made == [1, 1]  # the second env made in each place, with its own seed
        assert [e.seeds.first for e in trainer.venv.maker.envs] == [
            int(env_seed(cfg.seed, 0, i, 1).generate_state(1)[0] % (2**31 - 1)) for i in range(2)]
    finally:
        trainer.finish()
