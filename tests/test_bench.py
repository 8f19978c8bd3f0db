"""bench.throughput end to end on a tiny scenario: real games, real `mpirun -np 2`, no timed assertions."""
import json
import subprocess
import sys

import numpy as np

from conftest import REPO, run_cli


def test_throughput_reports_sps_time_split_rss_and_limits(tmp_path):
    out = tmp_path / "report.json"
    r = run_cli(["--ranks", "2", "--envs_per_rank", "1", "--horizon", "16", "--minibatch", "8", "--warmup", "1",
                 "--iterations", "1", "--limit_seconds", "0.05", "--json", str(out), "--quiet"],
                module="bench.throughput")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SPS" in r.stdout and "allred/upd" in r.stdout and "ideal" in r.stdout
    report = json.loads(out.read_text())
    (run,) = report["runs"]
    assert run["scenario"]["ranks"] == 2 and run["actors"] == 2
    assert run["steps"] == 32 and run["sps"] > 0
    assert run["precision"] == "fp32" and "bf16" not in run["label"]  # the paper's default, read from the run
    assert set(run["share"]) == {"env", "inference", "update", "statistics", "other", "other_parts"}
    parts = run["share"]["other_parts"]  # every part of the loop timed; how small "outside" is, is the bench's to say
    assert set(parts) == {"bookkeeping", "advantages", "logging", "checkpoint", "evaluation", "outside"}
    assert abs(sum(parts.values()) - run["share"]["other"]) < 1e-9
    assert all(parts[name] > 0 for name in ("bookkeeping", "advantages", "logging", "checkpoint"))
    assert "other, part by part" in r.stdout
    assert 0 < run["share"]["update"] < 1 and 0 <= run["allreduce_share_of_update"] < 1
    assert len(run["peak_rss_mb"]) == 2 and all(m > 0 for m in run["peak_rss_mb"])
    assert len(run["allreduce_share_of_update_per_rank"]) == 2
    assert run["allreduce_transfer_ms"] > 0 and run["allreduce_transfer_share_of_update"] >= 0
    assert run["torch_threads"] == [1, 1]
    for key in ("env_sps", "forward_sps", "train_sps"):
        assert run["limits"][key] > 0
    assert run["ideal_sps"] > 0 and run["ratio_to_ideal"] > 0
    assert any(c["what"].endswith("peak RSS per rank, MB (max)") for c in report["comparisons"])


def test_throughput_rejects_a_bad_preset():
    r = subprocess.run([sys.executable, "-m", "bench.throughput", "--preset", "nope"], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_reference_plots_both_curves_and_leaves_the_runs_config_alone(tmp_path):
    (tmp_path / "ppo1.csv").write_text("timesteps,ep_return_mean\n1024,1.5\n2048,2.5\n")
    (tmp_path / "config.json").write_text('{"model_name": "B"}')  # the record of the run that made ppo1.csv
    (tmp_path / "sb3.csv").write_text("timesteps,ep_return_mean\n1024,1.0\n2048,2.0\n")
    from bench.reference import main  # in-process: plotting and files, no run started
    assert main(["--only", "plot", "--preset", "cleanrl", "--env_name", "BreakoutNoFrameskip-v4", "--set",
                 "optim_epochs=2", "--out", str(tmp_path)]) == 0
    png = tmp_path / "curves.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert json.loads((tmp_path / "config.json").read_text()) == {"model_name": "B"}


def test_reference_resolves_a_preset_with_overrides_as_run_atari_does():
    from bench.reference import resolve_config

    config = resolve_config("cleanrl", "BreakoutNoFrameskip-v4", {"optim_epochs": 2})
    assert config.env_name == "BreakoutNoFrameskip-v4" and config.preset == "cleanrl"
    assert config.model_type == "large" and config.init == "orthogonal" and config.anneal_clip is False
    assert config.optim_epochs == 2 and config.env_steps == 10_000_000
    fast = resolve_config("fast", "BreakoutNoFrameskip-v4", {})  # its 8 actors: fast's minibatch of 256 is 32 each
    assert fast.optim_batchsize == 32 and fast.env_steps == 2_000_000


def test_reference_refuses_an_unknown_preset_or_setting_with_one_line(tmp_path, capsys):
    from bench.reference import main  # in-process: what is checked is its argument handling, not a start
    for flags, words in ((["--preset", "nope"], "not a preset"), (["--set", "nosuch=1"], "no such setting"),
                         (["--set", "optim_epochs=0"], "--optim_epochs=0 is invalid")):
        assert main(["--only", "plot", "--out", str(tmp_path), *flags]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "curves.png").exists()


def test_games_reads_a_curve_at_the_first_row_past_a_mark_and_a_run_ending_just_short_at_its_last_row():
    # A 2M run of 1,024-step iterations ends at 1,999,872; its value "at 2M" is its final row's, not
    # that of the first row within the slack below 2M (Breakout: 70.6 there against 68.98 at the end).
    from bench.games import at_steps
    rows = [(499_712, 1.0, 0.0), (500_736, 2.0, 0.0), (1_992_704, 70.6, 0.0), (1_999_872, 68.98, 0.0)]
    assert at_steps(rows, 500_000) == 2.0
    assert at_steps(rows, 2_000_000) == 68.98
    assert str(at_steps(rows[:2], 2_000_000)) == "nan"  # never got near 2M


def test_games_table_names_the_actors_of_each_run_from_its_first_iteration(tmp_path):
    # The GPU set runs 16 ranks x 8 envs, the CPU sets 2 x 4: config.json has envs_per_rank but not
    # the ranks, so the table reads the actors from the steps of the first iteration.
    import json
    from bench.games import load_published, results_table, summarize
    head = "iteration,timesteps,ep_return_mean,time_elapsed\n"
    for name, per_iter, actors in (("gpu", 16_384, 128), ("cpu", 1_024, 8)):
        run = tmp_path / name
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"env_name": "BeamRiderNoFrameskip-v4", "preset": "fast",
                                                     "timesteps_per_actorbatch": 128}))
        (run / "progress.csv").write_text(head + f"1,{per_iter},400.0,3.0\n2,{2 * per_iter},410.0,6.0\n")
        s = summarize(str(run))
        assert s["actors"] == actors
        row = results_table({"BeamRider": s}, load_published()).splitlines()[-1]
        assert f"| fast | {actors} | {2 * per_iter:,} |" in row


def test_games_table_gives_the_score_at_the_end_of_a_run_longer_than_its_last_mark(tmp_path):
    # A 10M run's table row reads the curve at 0.5M / 1M / 2M and, in its own column, where the run ended.
    import json
    from bench.games import load_published, results_table, summarize
    run = tmp_path / "BeamRider"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"env_name": "BeamRiderNoFrameskip-v4", "preset": "fast",
                                                 "timesteps_per_actorbatch": 128}))
    rows = [f"{i},{i * 500_000},{50.0 * i},{30.0 * i}" for i in range(1, 9)]
    (run / "progress.csv").write_text("iteration,timesteps,ep_return_mean,time_elapsed\n" + "\n".join(rows) + "\n")
    row = results_table({"BeamRider": summarize(str(run))}, load_published()).splitlines()[-1]
    assert "| 4,000,000 | 4.0 | 16667 | 50.0 | 100.0 | 200.0 | 400.0 |" in row


def test_games_table_gives_the_mean_of_the_games_ended_in_the_100k_steps_before_1m_and_2m(tmp_path):
    # The DreamerV3 repository's PPO is read as the mean of a 400k-frame bin (100k agent steps); the last 100
    # games of a long game reach back further. bench.games keeps every rank's games in one episodes.csv,
    # and the table gives that bin's mean beside the curve; a run short of a mark has none there.
    import json
    from bench.games import load_published, merge_games, results_table, summarize
    run, out = tmp_path / "run", tmp_path / "Enduro"
    run.mkdir(), out.mkdir()
    (run / "episodes.rank0.csv").write_text("return,length,time,timesteps\n"
                                            "10.0,3323,1.0,899000\n20.0,3323,2.0,950000\n300.0,3323,3.0,1999872\n")
    (run / "episodes.rank1.csv").write_text("return,length,time,timesteps\n40.0,3323,1.0,1000000\n"
                                            "500.0,6651,4.0,1900001\n")
    assert merge_games(str(run), str(out / "episodes.csv")) == 5
    assert [line.split(",")[0] for line in (out / "episodes.csv").read_text().splitlines()] == \
        ["timesteps", "899000", "950000", "1000000", "1900001", "1999872"]
    (out / "config.json").write_text(json.dumps({"env_name": "EnduroNoFrameskip-v4", "preset": "fast",
                                                 "timesteps_per_actorbatch": 128}))
    rows = [f"{i},{i * 1024},{i / 10},{i}" for i in range(1, 1954)]
    (out / "progress.csv").write_text("iteration,timesteps,ep_return_mean,time_elapsed\n" + "\n".join(rows) + "\n")
    row = results_table({"Enduro": summarize(str(out))}, load_published()).splitlines()[-1]
    assert "| 195.3 | 195.3 | 30.0 / 400.0 | – / – |" in row  # games 950k and 1M; 1,900,001 and 1,999,872
    (out / "progress.csv").write_text("iteration,timesteps,ep_return_mean,time_elapsed\n" + "\n".join(rows[:1000]))
    assert "| 100.0 | 30.0 / – | – / – |" in results_table({"Enduro": summarize(str(out))},
                                                         load_published()).splitlines()[-1]  # ended at 1,024,000


def test_games_table_names_the_flags_by_which_an_ab_variant_differs_from_its_preset(tmp_path):
    # bench.games --set=--FLAG=VALUE runs a variant of the preset; config.json is the record of what ran, so
    # the table names each learning setting that differs from the preset's, and a schedule the run
    # stopped short of (--env_steps 10M with --stop_after_iterations), but not where or how it ran.
    import json
    from bench.games import load_published, results_table, summarize
    from ppo1.config import Config
    run = tmp_path / "BeamRider"
    run.mkdir()
    cfg = Config.for_preset("fast", n_ranks=2, env_name="BeamRiderNoFrameskip-v4", env_steps=10_000_000,
                            ent_coef=0.02, optim_stepsize=0.000625, seed=3, envs_per_rank=8, model_name="x").to_dict()
    (run / "config.json").write_text(json.dumps(cfg))
    (run / "progress.csv").write_text("iteration,timesteps,ep_return_mean,time_elapsed\n"
                                      "1,2048,400.0,3.0\n2,4096,410.0,6.0\n")
    row = results_table({"BeamRider": summarize(str(run))}, load_published()).splitlines()[-1]
    assert "| fast `--ent_coef 0.02 --optim_stepsize 0.000625 --env_steps 10000000` | 16 | 4,096 |" in row
    cfg.update(env_steps=4096, ent_coef=0.01, optim_stepsize=0.00125)  # the preset's, run to its end
    (run / "config.json").write_text(json.dumps(cfg))
    row = results_table({"BeamRider": summarize(str(run))}, load_published()).splitlines()[-1]
    assert "| fast | 16 | 4,096 |" in row


def test_a_games_run_with_other_envs_per_rank_is_finished_at_the_end_of_its_own_last_iteration(tmp_path):
    # --set=--envs_per_rank=8 makes 16 actors: 2,048 steps per iteration, so a 2M schedule ends at 1,998,848
    import json
    from bench.games import _finished
    (tmp_path / "config.json").write_text(json.dumps({"timesteps_per_actorbatch": 128, "envs_per_rank": 8,
                                                      "env_steps": 2_000_000}))
    for last, done in ((1_996_800, False), (1_998_848, True)):
        (tmp_path / "progress.csv").write_text("iteration,timesteps,ep_return_mean,time_elapsed\n"
                                               f"{last // 2048},{last},400.0,3.0\n")
        assert _finished(str(tmp_path)) is done


def test_games_refuses_to_continue_or_report_a_run_left_with_other_settings_or_another_budget(tmp_path, capsys):
    # A run of `fast` from when its 32 actors took minibatches of 1,024 (optim_batchsize 32) under the same name:
    # run_atari would continue it with its saved settings, and a finished one would be reported as this
    # benchmark's; so would a run of another --steps (its schedule annealed over other steps). One line, exit 2.
    import json
    from bench.games import _other_settings, main
    from ppo1.config import Config
    ckpt = tmp_path / "checkpoints"
    run = ckpt / "fast-BeamRider-seed0"
    run.mkdir(parents=True)
    flags = ["--preset", "fast", "--env_name", "BeamRiderNoFrameskip-v4", "--env_steps", "2000000", "--seed", "0",
             "--checkpoint_dir", str(ckpt), "--model_name", "fast-BeamRider-seed0"]
    saved = Config.for_preset("fast", n_ranks=2, env_name="BeamRiderNoFrameskip-v4", env_steps=2_000_000,
                              checkpoint_dir=str(ckpt), model_name="fast-BeamRider-seed0")
    (run / "config.json").write_text(json.dumps(saved.to_dict()))
    assert _other_settings(flags, 2, str(run)) == ""  # fast as it is now: continued as it is
    (run / "config.json").write_text(json.dumps({**saved.to_dict(), "env_steps": 1_100_000}))
    assert _other_settings(flags, 2, str(run)) == "env_steps 1100000, not 2000000"  # another budget's schedule
    (run / "config.json").write_text(json.dumps({**saved.to_dict(), "optim_batchsize": 32}))
    assert _other_settings(flags, 2, str(run)) == "optim_batchsize 32, not 8"
    assert _other_settings([*flags, "--optim_batchsize", "32"], 2, str(run)) == ""  # asked for: the flag wins, as on resume
    code = main(["--games", "BeamRider", "--steps", "2e6", "--checkpoint_dir", str(ckpt), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 2 and len(out) == 1
    assert out[0].startswith(f"bench.games: {run} holds a run with other settings than this benchmark's "
                             "(optim_batchsize 32, not 8)")
    assert not (tmp_path / "out").exists()


def test_games_refuses_a_bad_set_flag_in_one_line_before_any_run(tmp_path, capsys):
    from bench.games import main
    code = main(["--games", "Pong", "--set=--ent_coef=-1", "--tag", "bad", "--checkpoint_dir", str(tmp_path),
                 "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 2 and len(out) == 1 and out[0].startswith("bench.games: --ent_coef=-1") and "holds" not in out[0]
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []


def test_reference_gives_sb3_a_pixel_env_as_ppo1_preprocesses_it_with_each_episode_and_its_time_limit():
    from bench.reference import _pixel_env, resolve_config

    config = resolve_config("paper", "tests.pixelenv:make_env", {"env_kwargs": '{"size": 24, "max_steps": 5}'})
    env = _pixel_env(config, 0, 0)
    try:
        obs, _ = env.reset()
        # a 24x24 RGB image, smaller than --frame_size 84: kept at its size, 4 RGB frames stacked
        assert obs.shape == env.observation_space.shape == (12, 24, 24) and obs.dtype.name == "uint8"
        episodes, steps = [], 0
        while not episodes:  # action 0 (up) reaches the goal only where it lies straight above
            obs, reward, terminated, truncated, info = env.step(0)
            steps += 1
            if "episode" in info:
                episodes.append((info["episode"], terminated, truncated))
        (episode, terminated, truncated), = episodes
        assert episode["l"] == steps and terminated != truncated
        if truncated:  # 5 steps: the observation that was cut, for SB3 to bootstrap from
            assert steps == 5 and episode["r"] == 0.0
        first, _ = env.reset()  # the next episode's first observation, kept from PixelEnv's own reset
        assert np.array_equal(first, env.env.obs["image"])
    finally:
        env.close()


def test_reference_takes_ppo1s_curve_from_a_run_folder_it_did_not_start(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "progress.csv").write_text("iteration,timesteps,ep_return_mean,time_elapsed\n1,1024,nan,1\n2,2048,3.5,2\n"
                                      "3,3072,4.0,3\n")
    from bench.reference import main  # in-process: plotting and files, no run started
    assert main(["--only", "plot", "--preset", "paper", "--out", str(tmp_path / "out"), "--ppo1_run", str(run)]) == 0
    assert (tmp_path / "out" / "ppo1.csv").read_text().splitlines() == ["timesteps,ep_return_mean", "2048,3.5",
                                                                         "3072,4.0"]
    assert "ppo1: 3072 steps, mean of the last 100 games 4.00" in (tmp_path / "out" / "summary.txt").read_text()


def test_learning_plays_whole_games_of_random_actions_for_the_floor_of_a_curve():
    from bench.learning import random_games

    scores = random_games(["--env_name", "tests.pixelenv:make_env", "--env_kwargs", '{"size": 24, "max_steps": 20}'],
                          games=6)
    assert len(scores) == 6 and set(scores) <= {0.0, 1.0}  # the goal pays 1, once, else the time limit cuts
    multibinary = random_games(["--env_name", "tests.pixelenv:make_env", "--env_kwargs", '{"multibinary": true}'], 2)
    assert len(multibinary) == 2


def test_layouts_prints_a_row_per_network_and_work_with_the_fastest_marked(capsys):
    from bench import layouts
    assert layouts.main(["--models", "small", "--batches", "4", "--repeat", "1", "--calls", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| small |")]
    assert [r.split("|")[2].strip() for r in rows] == ["train", "infer 4"]
    assert all(r.count("**") == 2 for r in rows)  # one fastest cell per row


def test_throughput_train_scenario_is_make_trains_config():
    from bench.throughput import TRAIN, build_parser, scenario_config
    from ppo1.config import Config

    args = build_parser().parse_args([])
    made = scenario_config(TRAIN, args, "/tmp/bench-dir", "run")
    expected = Config.for_preset("fast", n_ranks=2, env_name="PongNoFrameskip-v4").to_dict()
    bench_fields = {"checkpoint_dir", "model_name", "save_interval", "num_threads", "device", "compile", "precision",
                    "rnn", "wandb", "seed"}
    assert {k: v for k, v in made.items() if k not in bench_fields} == \
        {k: v for k, v in expected.items() if k not in bench_fields}
    assert made["save_interval"] == 10**9 and made["checkpoint_dir"] == "/tmp/bench-dir"
    assert made["precision"] == "auto"  # fast's own unless --precision is given
    assert scenario_config(TRAIN, build_parser().parse_args(["--precision", "fp32"]), "/tmp/d", "r")["precision"] == "fp32"
