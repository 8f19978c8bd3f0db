import dataclasses
import json

import pytest

from ppo1 import PPO1Error
from ppo1.config import Config
from ppo1.envs import families


def test_defaults_are_the_papers_atari_hyperparameters():
    c = Config()
    assert (c.timesteps_per_actorbatch, c.optim_stepsize, c.optim_epochs, c.optim_batchsize) == (128, 2.5e-4, 3, 32)
    assert (c.gamma, c.lam, c.epsilon, c.vf_coef, c.ent_coef) == (0.99, 0.95, 0.1, 1.0, 0.01)
    assert c.model_type == "small" and c.env_steps == 10_000_000


def test_json_round_trip_keeps_every_field():
    c = Config(env_name="ALE/Breakout-v5", gamma=0.9, envs_per_rank=3)
    assert Config.from_json(c.to_json()) == c


def test_config_json_of_older_versions_with_extra_still_loads(tmp_path):
    from ppo1.runfiles import load_config
    old = dict(Config(gamma=0.9).to_dict(), extra={})          # every config.json before the key went
    assert Config.from_dict(old) == Config(gamma=0.9)
    (tmp_path / "config.json").write_text(json.dumps(old))
    assert load_config(str(tmp_path)) == Config(gamma=0.9)


def test_config_json_groups_each_familys_settings_in_its_section_and_flat_files_still_load(tmp_path):
    from ppo1.checkpoint import config_from_data
    from ppo1.runfiles import load_config
    from ppo1.config import SECTIONS
    c = Config(env_name="procgen:coinrun", num_levels=200, frame_size=64, episode_life=False, max_episode_steps=9)
    saved = json.loads(c.to_json())
    assert saved["procgen"] == {"num_levels": 200, "start_level": 0, "distribution_mode": "easy"}
    assert saved["pixels"]["frame_size"] == 64 and saved["atari"] == {"episode_life": False}
    assert saved["gym"] == {"max_episode_steps": 9} and saved["gamma"] == 0.99
    assert not set(saved) & {name for names in SECTIONS.values() for name in names}  # none also at the top
    assert Config.from_dict(saved) == c == config_from_data(saved, "checkpoint x")
    (tmp_path / "config.json").write_text(json.dumps(c.to_dict()))  # a flat file of an older version
    assert load_config(str(tmp_path)) == c
    with pytest.raises(PPO1Error, match="'frame_size' both at the top level and in section 'pixels'"):
        Config.from_dict({**saved, "frame_size": 48})
    with pytest.raises(PPO1Error, match="checkpoint x: config section 'procgen' is 3, not an object"):
        config_from_data({**saved, "procgen": 3}, "checkpoint x")


def test_runs_saved_before_lr_warmup_and_frame_norm_resume_without_them_and_new_ones_have_the_presets(tmp_path):
    from ppo1.cli import build_config, build_parser
    from ppo1.resolve import preset_values
    run = tmp_path / "old-fast"
    run.mkdir()
    saved = dataclasses.replace(Config(), **preset_values({"preset": "fast"}, defaults=Config)).to_dict()
    del saved["lr_warmup"], saved["frame_norm"]                 # config.json of a run before the fields
    (run / "config.json").write_text(json.dumps(saved))
    flags = ["--checkpoint_dir", str(tmp_path), "--preset", "fast", "--model_name"]
    old = build_config(build_parser().parse_args(flags + ["old-fast"]))
    new = build_config(build_parser().parse_args(flags + ["new-fast"]))
    assert (old.lr_warmup, old.frame_norm) == (0, "scale")     # its checkpoint has no frame mean to load
    assert (new.lr_warmup, new.frame_norm) == (100_000, "center")
    saved = dataclasses.replace(Config(), **preset_values({"preset": "paper"}, defaults=Config)).to_dict()
    del saved["lr_warmup"], saved["frame_norm"]                 # a paper run (the default) of before
    (tmp_path / "old-paper").mkdir()
    (tmp_path / "old-paper" / "config.json").write_text(json.dumps(saved))
    assert build_config(build_parser().parse_args(flags[:2] + ["--model_name", "old-paper"])).frame_norm == "scale"
    assert build_config(build_parser().parse_args(flags[:2] + ["--model_name", "new-paper"])).frame_norm == "center"


def test_every_field_has_one_line_help_and_the_cli_shows_it():
    from ppo1.cli import build_parser
    text = build_parser().format_help()
    for f in dataclasses.fields(Config):
        help_text = f.metadata.get("help", "")
        assert help_text.strip() and "\n" not in help_text, f.name
        assert f"--{f.name}" in text, f.name


def test_unknown_json_key_is_refused():
    with pytest.raises(PPO1Error, match="unknown keys"):
        Config.from_dict({"nope": 1})


@pytest.mark.parametrize("field,value,match", [
    ("gamma", 1.5, "gamma=1.5"), ("gamma", 0.0, "gamma=0.0"), ("lam", -0.1, "lam"),
    ("epsilon", 0.0, "epsilon"), ("optim_epochs", 0, "optim_epochs=0"), ("optim_stepsize", -1.0, "optim_stepsize"),
    ("timesteps_per_actorbatch", 0, "timesteps_per_actorbatch"), ("envs_per_rank", 0, "envs_per_rank"),
    ("optim_batchsize", 256, "optim_batchsize=256"), ("model_type", "huge", "model_type"),
    ("gamma", float("nan"), "gamma"), ("model_name", "a/b", "model_name"),
])
def test_out_of_range_value_is_refused_naming_it(field, value, match):
    with pytest.raises(PPO1Error, match=match):
        dataclasses.replace(Config(), **{field: value}).validate()


def test_iterations_are_whole_and_never_overrun_env_steps():
    c = Config(env_steps=10_000, timesteps_per_actorbatch=128, envs_per_rank=4)
    assert c.steps_per_iteration(2) == 1024
    assert c.num_iterations(2) == 9 and 9 * 1024 <= 10_000
    with pytest.raises(PPO1Error, match="env_steps=10000"):
        c.check_fits(32)


def test_presets_set_their_family_and_leave_the_rest_at_the_papers_values():
    from ppo1.resolve import preset_values
    paper = dataclasses.replace(Config(), **preset_values({"preset": "paper"}, defaults=Config))
    assert paper == dataclasses.replace(Config(), preset="paper", frame_norm="center")  # Table 5, centred frames
    base = dataclasses.replace(Config(), **preset_values({"preset": "baselines"}, defaults=Config))
    assert (base.model_type, base.timesteps_per_actorbatch, base.optim_epochs, base.optim_stepsize,
            base.epsilon, base.optim_batchsize) == ("large", 256, 4, 1e-3, 0.2, 64)
    assert base.gamma == 0.99 and base.vf_coef == 1.0
    fast = dataclasses.replace(Config(), **preset_values({"preset": "fast"}, defaults=Config))
    clean = dataclasses.replace(Config(), **preset_values({"preset": "cleanrl"}, defaults=Config))
    assert (fast.model_type, fast.optim_stepsize, fast.env_steps, fast.lr_warmup, fast.frame_norm,
            fast.envs_per_rank, fast.optim_batchsize, fast.precision, fast.bptt_len) == (
        "small", 1.25e-3, 1_100_000, 100_000, "center", 8, 32, "auto", 32)
    assert dataclasses.replace(fast, preset="cleanrl", model_type="large", optim_stepsize=2.5e-4,
                               env_steps=10_000_000, lr_warmup=0, frame_norm="scale", envs_per_rank=1,
                               clip_vloss=True, precision="fp32", bptt_len=0) == clean


def test_presets_named_for_a_source_clip_the_value_loss_as_their_source_does():
    # CleanRL ppo_atari's --clip-vloss defaults to on; train-procgen's ppo2 always clips the value loss
    from ppo1.presets import PRESET_HELP
    assert Config.for_preset("cleanrl").clip_vloss and Config.for_preset("cleanrl").epsilon == 0.1
    from ppo1.presets import PROCGEN_PRESET
    assert PROCGEN_PRESET["clip_vloss"] and PROCGEN_PRESET["epsilon"] == 0.2
    assert not Config.for_preset("fast").clip_vloss and "value loss not clipped" in PRESET_HELP["fast"]
    assert "frames centred" in PRESET_HELP["paper"]  # what differs from the source, said in its help
    for name, text in PRESET_HELP.items():
        assert "differs" in text or "as its source" in text, name


def test_a_one_sample_minibatch_with_per_minibatch_standardisation_is_refused_in_one_line():
    with pytest.raises(PPO1Error, match="at least 2 samples"):
        Config.for_preset("cleanrl", optim_batchsize=1, timesteps_per_actorbatch=32)
    assert Config.for_preset("cleanrl", optim_batchsize=1, envs_per_rank=2).optim_batchsize == 1
    assert Config.for_preset("paper", optim_batchsize=1).optim_batchsize == 1  # per-batch standardisation


@pytest.mark.parametrize("n_ranks, envs_per_rank, pong_envs_per_rank",
                         [(1, 32, 8), (2, 16, 4), (4, 8, 2), (3, 11, 3), (16, 2, 1), (64, 1, 1)])
def test_fast_steps_32_envs_over_the_ranks_it_runs_on_and_8_on_pong_unless_envs_per_rank_is_given(
        n_ranks, envs_per_rank, pong_envs_per_rank):
    # 32 actors met every game's 2M target where 8 fell short on BeamRider; 8 won Pong v4 in four seeds;
    # 3 ranks round up to 33 (and 9).
    from ppo1.cli import build_config, build_parser
    assert Config.for_preset("fast", n_ranks=n_ranks, env_name="BreakoutNoFrameskip-v4").envs_per_rank == envs_per_rank
    assert Config.for_preset("fast", n_ranks=n_ranks, env_name="ALE/Pong-v5").envs_per_rank == envs_per_rank
    assert Config.for_preset("fast", n_ranks=n_ranks).envs_per_rank == pong_envs_per_rank  # PongNoFrameskip-v4
    assert Config.for_preset("fast", n_ranks=n_ranks, envs_per_rank=4).envs_per_rank == 4
    assert Config.for_preset("cleanrl", n_ranks=n_ranks).envs_per_rank == 1
    flags = ["--preset", "fast", "--checkpoint_dir", "/nonexistent", "--model_name", "x"]
    assert build_config(build_parser().parse_args(flags), n_ranks).envs_per_rank == pong_envs_per_rank
    args = build_parser().parse_args(flags + ["--env_name", "QbertNoFrameskip-v4"])
    assert build_config(args, n_ranks).envs_per_rank == envs_per_rank


@pytest.mark.parametrize("n_ranks, envs_per_rank, optim_batchsize",
                         [(1, None, 8), (2, None, 8), (2, 4, 32), (1, 8, 32), (2, 8, 16), (3, None, 8), (8, 16, 2),
                          (64, 8, 1)])
def test_fast_minibatch_is_256_samples_whatever_the_actors_unless_optim_batchsize_is_given(
        n_ranks, envs_per_rank, optim_batchsize):
    # With 32 actors, minibatches of 256 (optim_batchsize 8) beat those of 1,024 on Qbert, Breakout, Seaquest and
    # Pong-v5 at 2M; 8 actors (2 ranks x 4 envs) keep 32 per actor, the settings that won Pong in four seeds.
    given = {"env_name": "SeaquestNoFrameskip-v4", **({"envs_per_rank": envs_per_rank} if envs_per_rank else {})}
    assert Config.for_preset("fast", n_ranks=n_ranks, **given).optim_batchsize == optim_batchsize
    assert Config.for_preset("fast", n_ranks=n_ranks, optim_batchsize=64, **given).optim_batchsize == 64
    assert Config.for_preset("fast", n_ranks=2).optim_batchsize == 32  # Pong v4: 8 actors
    assert Config.for_preset("cleanrl", n_ranks=n_ranks, **given).optim_batchsize == 32


@pytest.mark.parametrize("n_ranks, envs_per_rank, horizon, optim_batchsize",
                         [(1, 1, None, 128), (1, 2, None, 128), (2, 1, 64, 64), (1, 1, 256, 256), (1, 4, 32, 32)])
def test_fast_takes_one_minibatch_of_the_whole_batch_when_an_iteration_has_fewer_than_256_samples(
        n_ranks, envs_per_rank, horizon, optim_batchsize):
    # 256 samples per actor would exceed the horizon T, which validate() refuses: a run of `fast` on one actor
    # (or with a shorter --timesteps_per_actorbatch) would end in an error about a flag it was never given.
    given = {"envs_per_rank": envs_per_rank, **({"timesteps_per_actorbatch": horizon} if horizon else {})}
    config = Config.for_preset("fast", n_ranks=n_ranks, env_name="BreakoutNoFrameskip-v4", **given)
    assert config.optim_batchsize == optim_batchsize
    assert config.optim_batchsize <= config.timesteps_per_actorbatch


@pytest.mark.parametrize("env_name, steps", [("PongNoFrameskip-v4", 1_100_000), ("BreakoutNoFrameskip-v4", 2_000_000),
                                             ("ALE/Pong-v5", 2_000_000), ("SeaquestNoFrameskip-v4", 2_000_000)])
def test_fast_trains_each_game_for_its_measured_budget_unless_env_steps_is_given(env_name, steps):
    assert Config.for_preset("fast", env_name=env_name).env_steps == steps
    assert Config.for_preset("fast", env_name=env_name, env_steps=3_000_000).env_steps == 3_000_000
    assert Config.for_preset("cleanrl", env_name=env_name).env_steps == 10_000_000


def test_clip_is_annealed_unless_anneal_clip_is_off():
    assert Config(epsilon=0.2).clip_param(0.25) == pytest.approx(0.05)
    assert Config(epsilon=0.2, anneal_clip=False).clip_param(0.25) == 0.2


def test_entropy_coefficient_is_constant_unless_anneal_ent_is_on():
    from ppo1.ppo import Hyper
    assert Hyper.at(Config(ent_coef=0.01), 0.25, 4).ent_coef == 0.01
    assert Hyper.at(Config(ent_coef=0.01, anneal_ent=True), 0.25, 4).ent_coef == pytest.approx(0.0025)
    assert Hyper.at(Config(ent_coef=0.01, anneal_ent=True), 0.0, 4).ent_coef == 0.0


def test_step_size_is_warmup_times_alpha_times_optim_stepsize():
    from ppo1.ppo import Hyper, warmup_factor
    # 8 actors x T 128 = 1,024 steps per iteration; a warm-up over 4,096 steps: 1/4, 2/4, 3/4, then 1
    assert [warmup_factor(t, 4096) for t in (1024, 2048, 3072, 4096, 8192)] == [0.25, 0.5, 0.75, 1.0, 1.0]
    assert warmup_factor(1024, 0) == 1.0  # off: the paper's step size from the first iteration
    cfg = Config(optim_stepsize=1e-3, lr_warmup=4096)
    assert Hyper.at(cfg, 0.5, 4, warmup_factor(1024, cfg.lr_warmup)).lr == pytest.approx(1.25e-4)
    assert Hyper.at(cfg, 0.5, 4).lr == pytest.approx(5e-4)


@pytest.mark.parametrize("field,value", [("init", "xavier"), ("adv_norm", "global"), ("max_grad_norm", -1.0),
                                         ("preset", "turbo"), ("anneal_ent", "yes"),
                                         ("lr_warmup", -1), ("lr_warmup", 0.5),
                                         ("deterministic", "yes"), ("compile", "yes"), ("frame_norm", "mean"),
                                         ("clip_reward", "clip"), ("reward_scale", 0.0), ("reward_scale", float("inf")),
                                         ("max_episode_steps", -1), ("max_episode_steps", 2.5), ("episode_life", 1),
                                         ("wandb", "yes"), ("wandb_project", "a/b"), ("wandb_tags", "ok," + "x" * 65)])
def test_new_knobs_refuse_bad_values(field, value):
    with pytest.raises(PPO1Error, match=field):
        dataclasses.replace(Config(), **{field: value}).validate()


def test_frame_norm_center_is_refused_for_mlp_policies_naming_the_flag():
    with pytest.raises(PPO1Error, match="frame_norm"):
        Config(env_name="CartPole-v1", model_type="mlp", frame_norm="center").validate()


def test_every_field_has_a_row_in_a_flag_table_of_the_docs():
    import glob
    import os
    import re
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pages = "".join(open(p, encoding="utf-8").read() for p in glob.glob(os.path.join(root, "docs", "*.md")))
    rows = set(re.findall(r"^\| `--(\w+)", pages, re.M))
    assert [f.name for f in dataclasses.fields(Config) if f.name not in rows] == []


def test_runs_saved_before_target_kl_and_clip_vloss_load_and_resume_with_both_off(tmp_path):
    from ppo1 import checkpoint, runfiles
    from ppo1.cli import build_config, build_parser
    saved = Config(gamma=0.9).to_dict()
    for key in ("target_kl", "clip_vloss", "anneal_lr", "norm_reward", "num_levels", "start_level",
                "distribution_mode"):                        # config.json of a run before issue 28's fields
        del saved[key]
    run = tmp_path / "old"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(saved))
    old = runfiles.load_config(str(run))
    assert (old.target_kl, old.clip_vloss, old.gamma) == (0.0, False, 0.9)
    assert (old.anneal_lr, old.norm_reward, old.num_levels) == (True, False, 0)  # as those runs trained
    resumed = build_config(build_parser().parse_args(["--checkpoint_dir", str(tmp_path), "--model_name", "old"]))
    assert (resumed.target_kl, resumed.clip_vloss) == (0.0, False)
    assert checkpoint.config_from_data(saved, "checkpoint") == old  # a checkpoint's 'config' likewise


def test_target_kl_and_clip_vloss_are_flags_with_help_saved_in_config_json(tmp_path):
    from ppo1.cli import build_config, build_parser
    text = " ".join(build_parser().format_help().split())
    assert "--target_kl TARGET_KL" in text and "--clip_vloss, --no-clip_vloss" in text
    assert "checked before each minibatch" in text and "(default: 0.0)" in text
    c = build_config(build_parser().parse_args(["--checkpoint_dir", str(tmp_path), "--target_kl", "0.02",
                                                "--clip_vloss"]))
    assert (c.target_kl, c.clip_vloss) == (0.02, True)
    assert json.loads(c.to_json())["target_kl"] == 0.02 and json.loads(c.to_json())["clip_vloss"] is True
    with pytest.raises(PPO1Error, match="--target_kl=-0.1 is invalid: must be >= 0"):
        dataclasses.replace(c, target_kl=-0.1).validate()


def test_fast_on_many_ranks_of_one_env_keeps_two_samples_in_each_ranks_minibatch():
    assert Config.for_preset("fast", n_ranks=512, envs_per_rank=1).optim_batchsize == 2
    assert Config.for_preset("fast", n_ranks=512, envs_per_rank=2).optim_batchsize == 1


@pytest.mark.parametrize("env_name,given,match", [
    ("CartPole-v1", {"episode_life": False}, "--episode_life is for Atari games"),
    ("PongNoFrameskip-v4", {"max_episode_steps": 1000}, "--max_episode_steps is for envs other than Atari"),
])
def test_an_episode_flag_of_another_env_family_is_refused_in_one_line(env_name, given, match):
    with pytest.raises(PPO1Error, match=match):
        Config.for_preset(env_name=env_name, **given)


def test_rewards_are_sign_clipped_by_default_on_atari_only_and_runs_saved_before_the_reward_flags_keep_that():
    # auto: Atari's DeepMind sign, every other family the env's own (the trainer resolves it by the family)
    assert Config.for_preset(env_name="PongNoFrameskip-v4").clip_reward == "auto"
    named = {f.name: f for f in families}
    assert [Config(clip_reward="auto").sign_rewards(named[f]) for f in ("atari", "pixels", "vector", "procgen")] == [
        True, False, False, False]
    assert Config(clip_reward="none").sign_rewards(named["atari"]) is False
    assert Config(clip_reward="sign").sign_rewards(named["pixels"])
    old = {k: v for k, v in Config().to_dict().items()
           if k not in ("clip_reward", "reward_scale", "episode_life", "max_episode_steps")}
    cfg = Config.from_dict(old)
    assert (cfg.clip_reward, cfg.reward_scale, cfg.episode_life, cfg.max_episode_steps) == ("auto", 1.0, True, 0)
