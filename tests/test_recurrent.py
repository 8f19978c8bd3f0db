"""--rnn lstm / gru: the recurrent core, its state in rollouts, updates, checkpoints and play; memory learned."""
import csv
import dataclasses
import json

import numpy as np
import pytest
import torch

from conftest import first_ratios, run_cli
from ppo1 import PPO1Error
from ppo1.config import Config
from ppo1.distributed import Comm
from ppo1.envs import EnvOptions, make_vec_env
from ppo1.observations import Obs
from ppo1.cores import RecurrentCore
from ppo1.policies import build
from ppo1.rollout import Batch, RecurrentBatch, RecurrentCollector, rnn_update_line
from ppo1.update_pass import UpdatePass

CUE = ["--env_name", "tests.memoryenv:make"]


def last_return(run_dir) -> float:
    with open(run_dir / "progress.csv", newline="") as f:
        return float(list(csv.DictReader(f))[-1]["ep_return_mean"])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_replayed_chunks_equal_the_steps_with_the_state_zeroed_at_each_episode_start(kind):
    torch.manual_seed(0)
    core = RecurrentCore(kind, 5, 7)
    x, state0 = torch.randn(4, 6, 5), torch.randn(4, core.memory_size)
    starts = torch.zeros(4, 6, dtype=torch.bool)
    starts[1, 2] = starts[2, 3] = starts[3, 5] = starts[2, 0] = True  # episodes begin inside chunks (and at one's start)
    state0[2] = 0.0  # a chunk that begins an episode starts from zeros (the rollout saved them so)
    with torch.no_grad():
        replayed = core.sequences(x, starts, state0)
        state, steps = state0.clone(), []
        for t in range(6):
            state = state * (~starts[:, t]).float()[:, None]
            out, state = core.step(x[:, t], state)
            steps.append(out)
    torch.testing.assert_close(replayed, torch.stack(steps, 1), rtol=0, atol=1e-6)
    with torch.no_grad():  # no start inside any chunk: one call over whole chunks (step: the one-step cell)
        torch.testing.assert_close(core.sequences(x, torch.zeros_like(starts), state0)[:, 0],
                                   core.step(x[:, 0], state0)[0], rtol=0, atol=1e-6)


def cue_envs(k: int, delay: int = 3):
    return make_vec_env("tests.memoryenv:make", k, seed=0, rank=0, options=EnvOptions(json.dumps({"delay": delay})))


def test_each_env_state_starts_from_zeros_at_an_episode_start_and_is_its_own():
    torch.manual_seed(0)
    venv = cue_envs(3)
    policy = build("mlp", venv.action_space, (1,), rnn="lstm", rnn_size=8)
    seg = RecurrentCollector(venv, policy, 16, venv.reset(), seq_len=8).collect()
    assert seg.dones.sum() >= 9  # episodes of 4 steps: several start inside each chunk of 8
    with torch.no_grad():
        for t, i in zip(*np.nonzero(seg.dones[:-1])):  # the step after an episode's last: as from zeros
            _, value, _ = policy.step(seg.obs[t + 1, i:i + 1].map(torch.from_numpy), policy.initial_memory(1))
            assert value.item() == pytest.approx(seg.values[t + 1, i], abs=1e-6)
        # env 1 alone, from zeros, step by step: the values the batched rollout gave it (no other env's state)
        state = policy.initial_memory(1)
        for t in range(16):
            _, value, state = policy.step(seg.obs[t, 1:2].map(torch.from_numpy), state)
            assert value.item() == pytest.approx(seg.values[t, 1], abs=1e-6)
            state = state * float(not seg.dones[t, 1])
    venv.close()


def test_a_segment_replayed_from_its_saved_states_gives_the_rollouts_log_probs():
    torch.manual_seed(0)
    venv = cue_envs(2, delay=4)  # episodes of 5 steps across chunks of 4
    policy = build("mlp", venv.action_space, (1,), rnn="gru", rnn_size=8)
    collector = RecurrentCollector(venv, policy, 16, venv.reset(), seq_len=4)
    collector.collect()
    seg = collector.collect()  # the second: its chunks start from states carried over from the first
    assert np.abs(seg.memory0).sum() > 0 and seg.dones.sum() >= 4
    seg.advantages = seg.returns = np.zeros_like(seg.rewards)
    batch = seg.batch(torch.device("cpu"), np.random.default_rng(0), standardize_adv=False)
    assert batch.memory0.shape == (2 * 16 // 4, 8) and len(batch) == 32
    with torch.no_grad():
        logp, _, values = UpdatePass(policy).evaluate(batch)
    torch.testing.assert_close(logp, batch.logp, rtol=0, atol=1e-5)
    torch.testing.assert_close(values, batch.values, rtol=0, atol=1e-5)
    mbs = list(batch.minibatches(10))  # 32 // 10 = 3 minibatches, as without --rnn: 2 whole chunks of 4 each
    assert [len(m) for m in mbs] == [8] * 3 and batch.minibatch_count(10) == 3
    venv.close()


@pytest.mark.parametrize("args", [
    dict(env_name="PongNoFrameskip-v4", rnn="lstm", frame_stack=1, frame_norm="center", envs_per_rank=2,
         timesteps_per_actorbatch=32, optim_batchsize=16, env_steps=128, optim_epochs=2),
    dict(env_name="CartPole-v1", rnn="gru", timesteps_per_actorbatch=64, env_steps=512, envs_per_rank=2,
         optim_epochs=3),
], ids=["atari-lstm", "vector-gru"])
def test_the_first_minibatch_has_ratio_one_and_pi_old_stays_fixed_across_epochs(tmp_path, monkeypatch, args):
    preset = "ppo_lstm" if args["env_name"] == "CartPole-v1" else "paper"
    cfg = Config.for_preset(preset, num_threads=1, checkpoint_dir=str(tmp_path), model_name="r", **args)
    first, fixed = first_ratios(monkeypatch, cfg)
    assert len(first) >= 2 and all(fixed)
    for ratio in first:  # fp32: equal up to the rounding of batched matrix products
        torch.testing.assert_close(ratio, torch.ones_like(ratio), rtol=0, atol=1e-5)


def test_memory_solves_the_cue_task_that_a_policy_without_it_leaves_at_chance(tmp_path):
    # The cue shows on an episode's first step only; the last (9th) step's action pays when it matches.
    # --rnn lstm and nothing else: the ppo_lstm preset's settings, 6144 steps.
    common = [*CUE, "--env_steps", "6144", "--checkpoint_dir", str(tmp_path), "--num_threads", "1"]
    r = run_cli([*common, "--rnn", "lstm", "--model_name", "lstm"])
    assert r.returncode == 0, r.stderr
    assert json.load(open(tmp_path / "lstm" / "config.json"))["preset"] == "ppo_lstm"
    assert last_return(tmp_path / "lstm") >= 0.9
    r = run_cli([*common, "--preset", "ppo_lstm", "--model_name", "none"])  # the same settings, no memory
    assert r.returncode == 0, r.stderr
    assert last_return(tmp_path / "none") <= 0.7
    # greedy play of the trained policy: its state starts from zeros each game, so each cue is read afresh
    r = run_cli(["--mode", "play", "--checkpoint_dir", str(tmp_path), "--model_name", "lstm", "--episodes", "20",
                 "--greedy"])
    assert r.returncode == 0, r.stderr
    assert "20 games: score 1.00 ± 0.00" in r.stdout


def test_a_checkpoint_refuses_a_resume_with_another_recurrent_core(tmp_path):
    common = ["--env_name", "CartPole-v1", "--env_steps", "256", "--checkpoint_dir", str(tmp_path), "--model_name", "c",
              "--timesteps_per_actorbatch", "128", "--envs_per_rank", "1", "--num_threads", "1"]
    assert run_cli([*common, "--env_steps", "128"]).returncode == 0
    r = run_cli([*common, "--rnn", "lstm"])
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "ppo1: error: checkpoint holds a model with no recurrent core, not --rnn lstm --rnn_size 256: resume with "
        "the run's own --rnn, or give --fresh to start a new run"]
    r = run_cli([*common, "--rnn", "gru", "--fresh"])
    assert r.returncode == 0, r.stderr
    r = run_cli([*common, "--rnn", "none", "--env_steps", "512"])
    assert r.returncode == 2 and "holds a model with a GRU core of 64 units, not --rnn none" in r.stderr
    r = run_cli([*common, "--rnn", "gru", "--rnn_critic", "shared", "--env_steps", "512"])  # ppo_lstm's is separate
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "ppo1: error: checkpoint holds a model whose value head reads a core of its own, not --rnn_critic shared: "
        "resume with the run's own --rnn_critic, or give --fresh to start a new run"]


def test_recurrent_flags_are_checked_and_chosen_by_the_env():
    with pytest.raises(PPO1Error, match=r"--bptt_len=48 is invalid: must divide --timesteps_per_actorbatch=128"):
        Config.for_preset("paper", rnn="lstm", bptt_len=48)
    with pytest.raises(PPO1Error, match="--compile is not supported with --rnn lstm"):
        Config.for_preset("paper", rnn="lstm", compile=True)
    with pytest.raises(PPO1Error, match="--rnn='rnn' is invalid"):
        Config.for_preset("paper", rnn="rnn")
    assert Config.for_preset(rnn="lstm").seq_len() == 128 and Config.for_preset(rnn="lstm", bptt_len=16).seq_len() == 16
    # Atari takes --frame_stack with --rnn only; vector envs with --rnn default to ppo_lstm (8 actors, T 32)
    assert Config.for_preset(rnn="lstm", frame_stack=1).frame_stack == 1
    with pytest.raises(PPO1Error, match="with --rnn lstm or gru it takes --frame_stack"):
        Config.for_preset(frame_stack=1)
    cfg = Config.for_preset(n_ranks=2, env_name="CartPole-v1", rnn="lstm")
    assert (cfg.preset, cfg.envs_per_rank, cfg.timesteps_per_actorbatch, cfg.seq_len()) == ("ppo_lstm", 4, 32, 32)
    assert Config.for_preset(env_name="CartPole-v1").preset == "mujoco"


@pytest.mark.parametrize("horizon", [128, 100, 127, 20])
def test_the_automatic_sequence_is_each_envs_whole_rollout_whatever_T(horizon):
    # a cue 48 steps before its answer needs a sequence of more than 48 steps for a gradient to reach it
    assert Config.for_preset(rnn="lstm", timesteps_per_actorbatch=horizon, optim_batchsize=4).seq_len() == horizon
    # the user's own --bptt_len, however short, stands; a run without --rnn has no sequences
    assert Config.for_preset(rnn="gru", timesteps_per_actorbatch=horizon, optim_batchsize=4, bptt_len=1).seq_len() == 1
    assert Config.for_preset(timesteps_per_actorbatch=horizon, optim_batchsize=4).seq_len() == 1


def test_rnn_over_an_image_preset_brings_its_own_defaults_the_preset_and_the_users_flags_win():
    # paper: 1 frame, 8 actors, 4 epochs, c1 0.5, gradient clip 0.5 (CleanRL ppo_atari_lstm), whole rollouts
    cfg = Config.for_preset(n_ranks=2, rnn="lstm")
    assert (cfg.frame_stack, cfg.rnn_size, cfg.envs_per_rank, cfg.optim_epochs, cfg.vf_coef, cfg.max_grad_norm,
            cfg.seq_len(), cfg.rnn_init) == (1, 256, 4, 4, 0.5, 0.5, 128, "chrono")
    assert Config.for_preset(env_name="CartPole-v1", rnn="lstm").rnn_init == "zeros"  # vectors: ppo_lstm's zeros
    assert rnn_update_line(cfg) == (
        "ppo1: --rnn lstm (256 units, critic shared, 1 frame, 4 epochs, c1 0.5, gradient clip 0.5): sequences of 128 "
        "steps (each env's whole rollout); each epoch 4 minibatches of 1 sequence x 128 steps = 128 samples per rank, "
        "as many as without --rnn")
    fast = Config.for_preset("fast", n_ranks=2, rnn="lstm", env_name="BreakoutNoFrameskip-v4")
    # fast's own c1, 32 actors and sequences of 32 steps stay
    assert (fast.vf_coef, fast.envs_per_rank, fast.frame_stack, fast.seq_len()) == (0.25, 16, 1, 32)
    # a T that 32 does not divide: each env's whole rollout (T 16: 16 steps; T 100: 100)
    for horizon in (16, 100):
        assert Config.for_preset("fast", rnn="lstm", timesteps_per_actorbatch=horizon).seq_len() == horizon
    vizdoom = Config.for_preset("vizdoom", rnn="gru", n_ranks=2)
    # vizdoom's own 10 epochs of small minibatches, and sequences of 32: 16 minibatches of a chunk per rank, not
    # the 4 of whole rollouts (DefendCenter with a GRU, docs/memory.md)
    assert (vizdoom.optim_epochs, vizdoom.optim_batchsize, vizdoom.max_grad_norm, vizdoom.seq_len()) == (10, 4, 0.5, 32)
    assert len(minibatch_sizes(vizdoom)) == 16
    assert Config.for_preset("vizdoom", rnn="gru", timesteps_per_actorbatch=100).seq_len() == 100
    given = Config.for_preset(rnn="lstm", frame_stack=4, envs_per_rank=2, optim_epochs=3, vf_coef=1.0,
                              max_grad_norm=0.0)
    assert (given.frame_stack, given.envs_per_rank, given.optim_epochs, given.vf_coef, given.max_grad_norm) == (
        4, 2, 3, 1.0, 0.0)
    without = Config.for_preset(n_ranks=2)  # the feed-forward run keeps the paper's
    assert (without.frame_stack, without.envs_per_rank, without.optim_epochs, without.vf_coef) == (4, 1, 3, 1.0)


def minibatch_sizes(cfg: Config) -> list[int]:
    """The samples of each minibatch of one epoch of a rank's batch under `cfg` (its real Batch.minibatches);
    with --rnn, checked to be whole chunks (each with its own saved state), no chunk twice."""
    n, length = cfg.timesteps_per_actorbatch * cfg.envs_per_rank, cfg.seq_len()
    step, zeros = torch.arange(n).float(), torch.zeros(n)
    if cfg.rnn != "none":
        batch = RecurrentBatch(Obs({"vector": step[:, None]}), zeros, zeros, zeros, zeros, np.random.default_rng(0), starts=zeros.bool(),
                               memory0=torch.arange(n // length)[:, None].float(), seq_len=length)
    else:
        batch = Batch(Obs({"vector": step[:, None]}), zeros, zeros, zeros, zeros, np.random.default_rng(0))
    mbs = list(batch.minibatches(cfg.optim_batchsize * cfg.envs_per_rank))
    if cfg.rnn != "none":
        chunks = torch.cat([mb.memory0[:, 0] for mb in mbs])
        assert len(set(chunks.tolist())) == len(chunks)
        for mb in mbs:
            assert torch.equal(mb.obs["vector"][:, 0].view(-1, length), mb.memory0 * length + torch.arange(length))
    return [len(mb) for mb in mbs]


@pytest.mark.parametrize("settings", [
    dict(env_name="CartPole-v1", n_ranks=1),                   # ppo_lstm: 8 envs of T 32, one 256-sample minibatch
    dict(env_name="CartPole-v1", n_ranks=2),                   # ppo_lstm on 2 ranks: 4 envs each
    dict(preset="vizdoom", envs_per_rank=12, bptt_len=32),     # T 128, 4 per actor: 32 minibatches (was 48)
    dict(preset="vizdoom", bptt_len=4, envs_per_rank=1),       # 1 env per rank: 32 chunks of 4
    dict(preset="fast", env_name="PongNoFrameskip-v4", n_ranks=3, bptt_len=32),  # 3 envs, 28 per actor: 4 minibatches
    dict(n_ranks=2),                                           # paper with --rnn: 4 envs, 4 minibatches of 1 rollout
], ids=["ppo_lstm", "ppo_lstm-2-ranks", "vizdoom-12-envs", "vizdoom-bptt-4", "fast-pong-3-ranks", "paper-2-ranks"])
def test_rnn_takes_as_many_minibatches_per_epoch_as_the_feed_forward_run_of_whole_chunks_alike(settings):
    recurrent = Config.for_preset(rnn="lstm", **settings)
    feed_forward = dataclasses.replace(recurrent, rnn="none")
    sizes = minibatch_sizes(recurrent)
    assert len(sizes) == len(minibatch_sizes(feed_forward)) >= 1
    assert len(set(sizes)) == 1 and sizes[0] % recurrent.seq_len() == 0  # every Adam step on as many whole chunks
    assert ", as many as without --rnn" in rnn_update_line(recurrent)  # what rank 0 says at the start


def test_the_start_line_says_when_a_rank_holds_fewer_sequences_than_feed_forward_minibatches():
    # vizdoom at 1 env per rank: 128 steps hold 4 sequences of 32, against 32 minibatches of 4 samples feed-forward
    cfg = Config.for_preset("vizdoom", rnn="gru", envs_per_rank=1, bptt_len=32)
    assert minibatch_sizes(cfg) == [32] * 4
    assert rnn_update_line(cfg) == (
        "ppo1: --rnn gru (256 units, critic shared, 1 frame, 10 epochs, c1 0.5, gradient clip 0.5): sequences of 32 "
        "steps; each epoch 4 minibatches of 1 sequence x 32 steps = 32 samples per rank, fewer than the 32 of 4 "
        "samples without --rnn: the rank's 128 steps hold 4 sequences (--bptt_len 4 or more --envs_per_rank give as "
        "many)")


def test_the_critic_core_is_separate_in_ppo_lstm_only_and_a_run_saved_without_the_setting_shares_it():
    assert Config.for_preset(env_name="CartPole-v1", rnn="lstm").rnn_critic == "separate"  # rl-zoo's ppo_lstm
    assert Config.for_preset(rnn="lstm").rnn_critic == "shared"
    saved = Config.for_preset(env_name="CartPole-v1", rnn="lstm").to_saved()
    del saved["rnn_critic"]  # a config.json or checkpoint written before --rnn_critic
    assert Config.from_dict(saved).rnn_critic == "shared"
    with pytest.raises(PPO1Error, match=r"^--rnn_critic='both' is invalid: must be one of shared, separate$"):
        Config.for_preset(rnn="lstm", rnn_critic="both")
    with pytest.raises(PPO1Error, match="^--rnn_critic separate gives the value head a recurrent core of its own: "
                                        "give --rnn lstm or gru with it$"):
        Config.for_preset(rnn_critic="separate")


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_separate_critic_core_keeps_the_value_loss_out_of_the_policy_core_and_doubles_the_state(kind):
    torch.manual_seed(0)
    venv = cue_envs(2)
    obs, starts = torch.randn(2 * 4, 1), torch.zeros(2, 4, dtype=torch.bool)
    grads = {}
    for critic in ("shared", "separate"):
        policy = build("mlp", venv.action_space, (1,), rnn=kind, rnn_size=8, rnn_critic=critic)
        state0 = torch.randn(2, policy.memory_size)
        _logp, _entropy, values = policy.evaluate(obs, torch.zeros(8, dtype=torch.int64), starts, state0)
        values.square().mean().backward()  # a value loss alone
        grads[critic] = {name: p.grad for name, p in policy.named_parameters()}
        assert policy.memory_size == policy.core.memory_size * (2 if critic == "separate" else 1)
        _dist, value, state = policy.step(obs[::4], state0)  # each chunk's first step: as replay, on the doubled state
        assert state.shape == state0.shape and torch.allclose(value, values.view(2, 4)[:, 0], atol=1e-6)
    assert all(g is not None and g.abs().sum() > 0 for n, g in grads["shared"].items() if n.startswith("core."))
    assert all(g is None for n, g in grads["separate"].items() if n.startswith(("core.", "pi.")))
    assert all(g.abs().sum() > 0 for n, g in grads["separate"].items() if n.startswith("critic_core."))
    venv.close()


def test_a_recurrent_atari_run_records_videos_and_plays_and_films_through_the_api(tmp_path):
    # memory instead of a stack (one frame), trained with a video every 2 iterations, then played and filmed
    import ppo1
    from ppo1.movie import movie

    lines = []
    result = ppo1.train(env_name="BreakoutNoFrameskip-v4", rnn="lstm", frame_stack=1, rnn_size=64, env_steps=512,
                        envs_per_rank=2, timesteps_per_actorbatch=64, optim_batchsize=16, num_threads=1,
                        video_interval=2, video_max_frames=60, checkpoint_dir=str(tmp_path), model_name="b",
                        log=lines.append)
    assert (result.exit_code, result.iteration) == (0, 4)
    assert ("ppo1: --rnn lstm (64 units, critic shared, 1 frame, 4 epochs, c1 0.5, gradient clip 0.5): sequences of 64 "
            "steps (each env's whole rollout); each epoch 2 minibatches of 1 sequence x 64 steps = 64 samples per rank, "
            "fewer than the 4 of 32 samples without --rnn: the rank's 128 steps hold 2 sequences (--bptt_len 32 or "
            "more --envs_per_rank give as many)") in lines
    assert sorted(p.name for p in (tmp_path / "b" / "videos").iterdir())[0].endswith(".mp4")
    ck = torch.load(tmp_path / "b" / "latest.pt", weights_only=True)
    assert ck["obs_spec"] == [["image", "image", [1, 84, 84]]] and ck["ranks"][0]["rnn_state"].shape == (2, 128)  # h and c of 2 envs
    scores = ppo1.play("b", str(tmp_path), episodes=2, log=None)
    assert len(scores) == 2 and all(s >= 0 for s in scores)
    rec = movie(Config(checkpoint_dir=str(tmp_path), model_name="b"), {}, Comm(None), max_frames=90,
                out=lambda line: None)
    assert rec.frames == 90 and rec.path.endswith("_partial.mp4")


@pytest.mark.parametrize("kind, critic", [("lstm", "shared"), ("gru", "separate")])
def test_evaluate_replays_chunks_as_step_gave_them_one_step_at_a_time(kind, critic):
    torch.manual_seed(0)
    venv = cue_envs(2)
    policy = build("mlp", venv.action_space, (1,), rnn=kind, rnn_size=8, rnn_critic=critic)
    n, length = 2, 5
    obs, actions = torch.randn(n * length, 1), torch.randint(0, venv.action_space.n, (n * length,))
    starts = torch.zeros(n, length, dtype=torch.bool)
    starts[0, 2] = starts[1, 4] = True  # an episode begins inside each chunk: its memory there is zeros
    memory0 = torch.randn(n, policy.memory_size)
    with torch.no_grad():
        logp, entropy, values = policy.evaluate(obs, actions, starts, memory0)
        for i in range(n):
            memory = memory0[i:i + 1]
            for t in range(length):
                j = i * length + t
                memory = memory * float(not starts[i, t])
                dist, value, memory = policy.step(obs[j:j + 1], memory)
                torch.testing.assert_close(logp[j:j + 1], dist.log_prob(actions[j:j + 1]), rtol=0, atol=1e-6)
                torch.testing.assert_close(entropy[j:j + 1], dist.entropy(), rtol=0, atol=1e-6)
                torch.testing.assert_close(values[j:j + 1], value, rtol=0, atol=1e-6)
    venv.close()


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_new_core_keeps_a_cue_over_16_steps_where_zero_gate_biases_halve_it_each_step(kind):
    # With the recurrent weights and the input at zero the memory decays by the keeping gate alone: LSTM
    # c_t = sigmoid(b_f) c_(t-1) (its candidate tanh(0) = 0), GRU h_t = sigmoid(b_z) h_(t-1) (its candidate 0). Zero
    # biases (the core before chrono's init) keep 0.5^16 = 1.5e-5 of it after 16 steps; chrono's biases
    # b = log(u), u ~ U[1, 31], keep E[(u / (1 + u))^16] = 0.34 of it on average, 0.60 in the longest-lived unit.
    torch.manual_seed(0)
    core = RecurrentCore(kind, 4, 256, init="chrono")
    zeros = RecurrentCore(kind, 4, 256)  # --rnn_init zeros: every keeping gate at sigmoid(0) = 1/2
    assert float(zeros.rnn.bias_ih_l0.abs().max()) == 0.0
    with torch.no_grad():
        core.rnn.weight_hh_l0.zero_()
    memory = torch.zeros(1, core.memory_size)
    cell = slice(256, 512) if kind == "lstm" else slice(0, 256)  # the LSTM's c, the GRU's h
    memory[:, cell] = 1.0
    if kind == "lstm":  # h = 0: with W_hh = 0 it does not enter the gates anyway
        memory[:, :256] = 0.0
    for _ in range(16):
        _, memory = core.step(torch.zeros(1, 4), memory)
    kept = memory[0, cell]
    assert float(kept.mean()) == pytest.approx(0.34, abs=0.04)
    assert 0.5 < float(kept.max()) <= (31 / 32) ** 16 + 1e-6
    keep_bias = core.rnn.bias_ih_l0[256:512]
    assert float(keep_bias.min()) >= 0.0 and float(keep_bias.max()) <= np.log(31) + 1e-6
    expected = torch.sigmoid(keep_bias).pow(16)
    assert torch.allclose(kept, expected, atol=1e-6)  # step for step the gate alone, as computed by hand
