import numpy as np
import torch

from ppo1.advantages import standardize
from ppo1.observations import Obs
from ppo1.policies import CnnPolicy
from ppo1.rollout import Segment


def _segment(T=4, k=2):
    rng = np.random.default_rng(0)
    seg = Segment(obs=Obs({"image": rng.integers(0, 256, (T, k, 4, 84, 84), dtype=np.uint8)}),
                  actions=rng.integers(0, 6, (T, k)), logp=rng.normal(size=(T, k)).astype(np.float32),
                  values=rng.normal(size=(T, k)).astype(np.float32), rewards=np.zeros((T, k), np.float32),
                  dones=np.zeros((T, k), bool), last_value=np.zeros(k, np.float32), episodes=[])
    seg.advantages = rng.normal(size=(T, k)).astype(np.float32)
    seg.returns = rng.normal(size=(T, k)).astype(np.float32)
    return seg


def test_batch_flattens_time_and_envs_and_standardizes_advantages_over_the_batch():
    seg = _segment()
    cnn = CnnPolicy(6)  # the observations in the policy's own layout: frames channels-last on the CPU
    b = seg.batch(torch.device("cpu"), np.random.default_rng(1), standardize_adv=True, lay_out=cnn.laid_out)
    frames = b.obs["image"]
    assert len(b) == 8 and frames.shape == (8, 4, 84, 84) and frames.dtype == torch.uint8
    assert torch.equal(frames[3], torch.from_numpy(seg.obs["image"][1, 1]))      # sample t * k + i
    assert frames.is_contiguous(memory_format=torch.channels_last)  # on the CPU laid out once for the convolutions
    assert seg.batch(torch.device("cpu"), np.random.default_rng(1), standardize_adv=True).obs["image"].is_contiguous()
    assert torch.equal(b.adv, torch.from_numpy(standardize(seg.advantages.reshape(8))))
    raw = seg.batch(torch.device("cpu"), np.random.default_rng(1), standardize_adv=False)
    assert torch.equal(raw.adv, torch.from_numpy(seg.advantages.reshape(8)))


def test_minibatches_draw_one_permutation_per_epoch_in_equal_minibatches():
    seg = _segment()
    rng, twin = np.random.default_rng(5), np.random.default_rng(5)
    b = seg.batch(torch.device("cpu"), rng, standardize_adv=False, lay_out=CnnPolicy(6).laid_out)
    for _ in range(2):  # epochs
        perm = twin.permutation(8)
        mbs = list(b.minibatches(3))
        assert [len(m) for m in mbs] == [3, 3], "the 2 left over sit this epoch out (baselines, CleanRL)"
        assert torch.equal(torch.cat([m.returns for m in mbs]), b.returns[torch.from_numpy(perm[:6])])
        assert torch.equal(mbs[1].obs["image"], b.obs["image"][torch.from_numpy(perm[3:6])])  # the same rows,
        assert mbs[1].obs["image"].is_contiguous(memory_format=torch.channels_last)  # still channels-last
        assert [len(m) for m in b.minibatches(4)] == [4, 4] and [len(m) for m in b.minibatches(8)] == [8]
        twin.permutation(8), twin.permutation(8)
    assert rng.bit_generator.state == twin.bit_generator.state  # nothing else drawn: resume stays bit-identical


def test_a_minibatch_never_holds_a_single_leftover_sample():
    # 32 samples in minibatches of 31 used to end each epoch with a minibatch of 1, whose advantage std is NaN
    seg = _segment(T=16, k=2)
    b = seg.batch(torch.device("cpu"), np.random.default_rng(0), standardize_adv=False)
    assert [len(m) for m in b.minibatches(31)] == [31]


def test_set_pi_old_gives_the_log_probs_of_the_policy_as_it_is_now_and_keeps_the_rollouts_values():
    # --clip_vloss clips V around the values the returns were built on: the rollout's, not the recomputed ones
    from ppo1.policies import build
    from ppo1.update_pass import UpdatePass
    torch.manual_seed(0)
    policy = build("small", 6, frame_norm="center")
    seg = _segment()
    seg.values[:] = np.arange(8, dtype=np.float32).reshape(4, 2)
    b = seg.batch(torch.device("cpu"), np.random.default_rng(0), standardize_adv=False)
    before = seg.logp.copy()
    UpdatePass(policy).set_pi_old(b, statistics_moved=True, block=3)
    dist, values, _ = policy.step(b.obs, None)
    torch.testing.assert_close(b.logp, dist.log_prob(b.actions), rtol=0, atol=1e-6)
    assert b.values.tolist() == list(range(8)) and not torch.allclose(b.values, values)
    np.testing.assert_array_equal(seg.logp, before)  # the segment's own buffers are left as they were


def test_the_collector_records_the_value_of_each_time_limit_cut_episodes_last_observation():
    from ppo1.envs import make_vec_env
    from ppo1.policies import build
    from ppo1.rollout import Collector
    torch.manual_seed(0)
    venv = make_vec_env("Pendulum-v1", 2, seed=0, rank=0)  # every episode cut at 200 steps
    policy = build("mlp", venv.action_space, venv.obs_spec)
    collector = Collector(venv, policy, 200, venv.reset())
    seg = collector.collect()
    assert np.flatnonzero(seg.cut_values.any(axis=1)).tolist() == [199] and seg.dones[199].all()
    # the step that cut them was the segment's last: each env keeps its last
    cut = [env.cut_obs for env in venv.maker.envs]
    with torch.no_grad():
        _, expected, _ = policy.step(Obs.stack(cut).map(torch.from_numpy), None)
    np.testing.assert_allclose(seg.cut_values[199], expected.numpy(), rtol=1e-6)


def test_multidiscrete_actions_are_stored_per_step_as_integer_vectors_and_index_with_their_samples():
    import gymnasium
    from ppo1.envs import EnvOptions, make_vec_env
    from ppo1.envs.pixels import Frames
    from ppo1.policies import build
    from ppo1.rollout import Collector
    torch.manual_seed(0)
    venv = make_vec_env("tests.pixelenv:make_multidiscrete_env", 2, seed=0, rank=0,
                        options=EnvOptions('{"size": 24}', Frames(size=24, stack=2)))
    assert venv.action_space == gymnasium.spaces.MultiDiscrete([4, 2]) and venv.num_actions == 6
    policy = build("impala", venv.action_space, venv.obs_spec)
    seg = Collector(venv, policy, 8, venv.reset()).collect()
    assert seg.actions.shape == (8, 2, 2) and seg.actions.dtype == np.int64
    assert seg.actions[..., 0].max() < 4 and seg.actions[..., 1].max() < 2
    seg.advantages, seg.returns = np.zeros((8, 2), np.float32), np.zeros((8, 2), np.float32)
    b = seg.batch(torch.device("cpu"), np.random.default_rng(0), standardize_adv=False)
    assert b.actions.shape == (16, 2) and torch.equal(b.actions[3], torch.from_numpy(seg.actions[1, 1]))
    with torch.no_grad():
        torch.testing.assert_close(policy.step(b.obs, None)[0].log_prob(b.actions), b.logp)
    for mb in b.minibatches(4):
        assert mb.actions.shape == (4, 2)


def _act_states(policy) -> list:
    """Note torch's random state after each of `policy`'s act calls (the collector's action draws)."""
    states, real = [], policy.act

    def act(*a, **k):
        out = real(*a, **k)
        states.append(torch.get_rng_state())
        return out
    policy.act = act
    return states


def test_the_bootstrap_value_draws_no_action_so_the_random_stream_is_the_t_steps_draws():
    # the value of the observation after the segment, feed-forward and recurrent, is the one act gives it, but
    # no action is drawn for it: torch's random stream is where the T steps' actions left it
    from ppo1.envs import make_vec_env
    from ppo1.policies import build
    from ppo1.rollout import make_collector
    for rnn in ("none", "lstm"):
        torch.manual_seed(0)
        venv = make_vec_env("CartPole-v1", 2, seed=0, rank=0)
        policy = build("mlp", venv.action_space, venv.obs_spec, rnn=rnn, rnn_size=8)
        collector = make_collector(venv, policy, 4, venv.reset(), seq_len=4)
        states = _act_states(policy)
        seg = collector.collect()
        assert len(states) == 4 and torch.equal(torch.get_rng_state(), states[-1])
        obs = collector.obs.map(torch.from_numpy)
        before = torch.get_rng_state()
        value = policy.value(obs, collector.memory)
        assert torch.equal(torch.get_rng_state(), before)
        assert np.array_equal(seg.last_value, value.numpy())
        assert torch.equal(value, policy.act(obs, memory=collector.memory)[2])


def test_a_step_whose_env_crashed_has_weight_0_its_game_is_logged_cut_and_its_batch_leaves_it_out(tmp_path):
    import importlib

    from ppo1.advantages import gae
    from ppo1.envs import EnvOptions, make_vec_env
    from ppo1.policies import build
    from ppo1.restarts import EnvRestarts
    from ppo1.rollout import Collector
    importlib.import_module("tests.childenv").started = 0
    torch.manual_seed(0)
    venv = make_vec_env("tests.childenv:make", 2, seed=0, rank=0, options=EnvOptions('{"die_at": 3}'))
    try:
        restarts = EnvRestarts(1, 0, 0, str(tmp_path))
        restarts.begin(1)
        venv.maker.mend_with(restarts)
        seg = Collector(venv, build("mlp", venv.action_space, venv.obs_spec), 4, venv.reset()).collect()
    finally:
        venv.close()
    # env 0's engine dies in step 2 (its third): that step never ran
    assert seg.weights.tolist() == [[1, 1], [1, 1], [0, 1], [1, 1]] and seg.dones[2, 0] and seg.rewards[2, 0] == 0
    assert not seg.cut_values.any()
    [game] = seg.episodes  # the crashed game, as far as it went: a cut one (ChildEnv's reward: 1 for action 1)
    assert game.truncated and game.length == 2
    assert game.ret == float(seg.actions[:2, 0].sum()) == seg.rewards[:2, 0].sum()
    seg.advantages, seg.returns = gae(seg.rewards, seg.values, seg.dones, seg.last_value, 0.99, 0.95,
                                      seg.cut_values, seg.weights > 0)
    assert seg.advantages[2, 0] == 0.0
    b = seg.batch(torch.device("cpu"), np.random.default_rng(0), standardize_adv=True)
    assert b.weights.tolist() == [1, 1, 1, 1, 0, 1, 1, 1]  # time-major: sample t k + i
    live = b.weights > 0
    assert b.adv[4] == 0
    assert torch.equal(b.adv[live], torch.from_numpy(standardize(seg.advantages.reshape(8)[[0, 1, 2, 3, 5, 6, 7]])))
    for mb in b.minibatches(3):  # the weights travel with their samples
        assert torch.equal(mb.weights, (mb.returns != b.returns[4]).float())


def test_a_recurrent_batch_carries_each_samples_weight_with_it_env_major_in_whole_chunks():
    from ppo1.rollout import RecurrentSegment
    T, k, L = 4, 2, 2
    seg = _segment(T, k)
    seg = RecurrentSegment(**{f: getattr(seg, f) for f in ("obs", "actions", "logp", "values", "rewards", "dones",
                                                            "last_value", "episodes", "advantages", "returns")},
                           memory0=np.zeros((T // L, k, 3), np.float32), seq_len=L)
    seg.weights = np.ones((T, k), np.float32)
    seg.weights[1, 1] = 0.0  # env 1 crashed in step 1
    seg.returns[:] = np.arange(T * k, dtype=np.float32).reshape(T, k)  # each sample's own label
    b = seg.batch(torch.device("cpu"), np.random.default_rng(0), standardize_adv=True)
    assert b.weights.tolist() == [1, 1, 1, 1, 1, 0, 1, 1]  # env-major: sample i T + t
    assert b.adv[5] == 0 and abs(float(b.adv[b.weights > 0].mean())) < 1e-6
    for mb in b.minibatches(2):
        assert mb.weights.tolist() == [0.0 if r == 3 else 1.0 for r in mb.returns.tolist()]  # seg.returns[1, 1] == 3
