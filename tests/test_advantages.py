import numpy as np
import pytest

from ppo1.advantages import gae, shape_rewards


def test_gae_on_a_hand_computed_single_actor_trajectory():
    # T=3, no episode end: deltas d_t = r_t + g V_{t+1} - V_t, A_t = d_t + g l A_{t+1}
    g, lam = 0.5, 0.5
    r = np.array([[1.0], [0.0], [2.0]], np.float32)
    v = np.array([[0.5], [1.0], [0.0]], np.float32)
    done = np.zeros((3, 1), bool)
    last = np.array([4.0], np.float32)
    d2 = 2.0 + 0.5 * 4.0 - 0.0      # 4.0
    d1 = 0.0 + 0.5 * 0.0 - 1.0      # -1.0
    d0 = 1.0 + 0.5 * 1.0 - 0.5      # 1.0
    a2 = d2
    a1 = d1 + 0.25 * a2             # 0.0
    a0 = d0 + 0.25 * a1             # 1.0
    adv, ret = gae(r, v, done, last, g, lam)
    np.testing.assert_allclose(adv[:, 0], [a0, a1, a2], rtol=1e-6)
    np.testing.assert_allclose(ret[:, 0], [a0 + 0.5, a1 + 1.0, a2 + 0.0], rtol=1e-6)


def test_episode_end_stops_bootstrapping_and_propagation():
    g, lam = 0.9, 0.8
    r = np.array([[1.0], [1.0], [1.0]], np.float32)
    v = np.array([[2.0], [3.0], [5.0]], np.float32)
    done = np.array([[False], [True], [False]])    # the episode ends with step 1
    last = np.array([7.0], np.float32)
    adv, _ = gae(r, v, done, last, g, lam)
    a2 = 1.0 + g * 7.0 - 5.0                       # bootstrapped from the value after the segment
    a1 = 1.0 - 3.0                                 # terminal: no V(s_2), no A_2
    a0 = (1.0 + g * 3.0 - 2.0) + g * lam * a1
    np.testing.assert_allclose(adv[:, 0], [a0, a1, a2], rtol=1e-6)


def test_last_step_ending_an_episode_ignores_the_bootstrap_value():
    r = np.array([[1.0]], np.float32)
    v = np.array([[0.25]], np.float32)
    adv_a, _ = gae(r, v, np.array([[True]]), np.array([100.0], np.float32), 0.99, 0.95)
    adv_b, _ = gae(r, v, np.array([[True]]), np.array([-100.0], np.float32), 0.99, 0.95)
    assert adv_a[0, 0] == adv_b[0, 0] == pytest.approx(0.75)


def test_actors_are_independent_columns():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(5, 3)).astype(np.float32)
    done = rng.random((5, 3)) < 0.3
    last = rng.normal(size=3).astype(np.float32)
    adv, ret = gae(r, v, done, last, 0.99, 0.95)
    for j in range(3):
        a1, r1 = gae(r[:, j:j + 1], v[:, j:j + 1], done[:, j:j + 1], last[j:j + 1], 0.99, 0.95)
        np.testing.assert_allclose(adv[:, j], a1[:, 0], rtol=1e-6)
        np.testing.assert_allclose(ret[:, j], r1[:, 0], rtol=1e-6)


def test_lambda_one_gives_discounted_monte_carlo_returns():
    r = np.array([[1.0], [2.0], [3.0]], np.float32)
    v = np.array([[9.0], [-4.0], [0.5]], np.float32)
    _, ret = gae(r, v, np.zeros((3, 1), bool), np.array([10.0], np.float32), 0.5, 1.0)
    np.testing.assert_allclose(ret[:, 0], [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 10, 2 + 0.5 * 3 + 0.25 * 10, 3 + 5.0])


def test_running_returns_discount_each_actor_and_restart_after_an_episode_end():
    from ppo1.advantages import running_returns
    rewards = np.array([[1.0, 0.0], [2.0, 1.0], [0.0, 1.0]], np.float32)
    dones = np.array([[False, False], [True, False], [False, False]])
    ret = np.array([4.0, 0.0])
    g = running_returns(rewards, dones, ret, gamma=0.5)
    # actor 0: 0.5*4 + 1 = 3; 0.5*3 + 2 = 3.5 (the episode ends); 0 + 0 = 0
    # actor 1: 0; 0 + 1 = 1; 0.5*1 + 1 = 1.5
    np.testing.assert_allclose(g, [[3.0, 0.0], [3.5, 1.0], [0.0, 1.5]])
    np.testing.assert_allclose(ret, [0.0, 1.5])  # carried into the next segment


def test_reward_normalizer_divides_by_the_std_of_the_returns_summed_over_ranks_and_clips():
    from ppo1.advantages import RewardNormalizer
    norm = RewardNormalizer(1, gamma=1.0, clip=10.0)
    rewards = np.array([[2.0], [2.0]], np.float32)  # G = 2, 4: mean 3, Var 1 (the prior's count 1e-4 aside)
    scaled = norm(rewards, np.zeros((2, 1), bool))
    np.testing.assert_allclose(scaled, [[2.0], [2.0]], rtol=1e-3)
    # another rank's returns 0 and 8 as well (Comm.sum): G = 2, 4, 0, 8: mean 3.5, Var (4+16+0+64)/4 - 12.25 = 8.75
    other = RewardNormalizer(1, gamma=1.0)
    summed = other(rewards, np.zeros((2, 1), bool), allreduce_sum=lambda x: x + np.array([8.0, 64.0, 2.0]))
    np.testing.assert_allclose(summed, rewards / np.sqrt(8.75), rtol=1e-3)
    settled = RewardNormalizer(1, gamma=1.0)
    settled.stats = np.array([0.0, 1e6, 1e6])       # a million returns of mean 0 and Var 1 so far
    assert settled(np.array([[50.0], [-3.0]], np.float32), np.ones((2, 1), bool)).ravel().tolist() == pytest.approx(
        [10.0, -3.0], rel=1e-2)                      # 50 std is clipped to 10
    restored = RewardNormalizer(1, gamma=1.0)
    restored.load_state_dict(other.state_dict())
    assert restored.std() == other.std()


def test_a_step_that_never_ran_adds_no_return_to_the_reward_statistics():
    from ppo1.advantages import RewardNormalizer
    norm = RewardNormalizer(2, gamma=1.0)
    rewards = np.array([[2.0, 1.0], [2.0, 0.0]], np.float32)
    dones = np.array([[False, False], [False, True]])  # env 1's second step crashed: made anew, the step never ran
    live = np.array([[True, True], [True, False]])
    norm(rewards, dones, live=live)
    # the returns that happened: 2, 4 (env 0) and 1 (env 1); not env 1's 1 + 0 at the step that never ran
    np.testing.assert_allclose(norm.stats, [7.0, 21.0, 3.0 + 1e-4])
    np.testing.assert_allclose(norm.returns.g, [4.0, 0.0])  # env 1 starts a new game


def test_an_episode_cut_by_a_time_limit_bootstraps_from_its_last_observation_by_hand():
    # one actor, 2 steps, gamma 0.5, lambda 1; step 0 cut by a time limit (done, the next step a new episode)
    r = np.array([[1.0], [2.0]], np.float32)
    v = np.array([[4.0], [8.0]], np.float32)
    done = np.array([[True], [False]])
    last = np.array([10.0], np.float32)
    cut = np.array([[6.0], [0.0]], np.float32)  # V(the cut episode's last observation) = 6
    adv, ret = gae(r, v, done, last, 0.5, 1.0, cut)
    # step 1: 2 + 0.5 * 10 - 8 = -1;  step 0: 1 + 0.5 * 6 - 4 = 0 (nothing carried over from step 1)
    np.testing.assert_allclose(adv, [[0.0], [-1.0]])
    np.testing.assert_allclose(ret, [[4.0], [7.0]])
    adv, _ = gae(r, v, done, last, 0.5, 1.0)  # terminal: 1 - 4 = -3
    np.testing.assert_allclose(adv, [[-3.0], [-1.0]])


def test_training_rewards_are_clipped_to_their_sign_then_scaled_by_hand():
    r = np.array([[-7.0, 0.0], [0.25, 100.0]], np.float32)
    np.testing.assert_array_equal(shape_rewards(r, sign=True, scale=1.0), [[-1, 0], [1, 1]])
    np.testing.assert_allclose(shape_rewards(r, sign=False, scale=0.01), [[-0.07, 0.0], [0.0025, 1.0]], rtol=1e-6)
    np.testing.assert_allclose(shape_rewards(r, sign=True, scale=0.5), [[-0.5, 0.0], [0.5, 0.5]])
    assert shape_rewards(r, sign=False, scale=1.0).dtype == np.float32
    np.testing.assert_array_equal(shape_rewards(r, sign=False, scale=1.0), r)


def test_a_crashed_step_has_no_advantage_and_the_step_before_bootstraps_from_its_observation_by_hand():
    # env crashed in step 1 (made anew: reward 0, done, the step never ran); gamma = lambda = 0.5
    #   A_2 = 2 + 0.5 * 4 - 3 = 1;  A_1 = 0 (not -(1 - gamma) V(s_1) = -1);  A_0 = 1 + 0.5 * 2 - 1 + 0.25 * A_1 = 1
    rewards = np.array([[1.0], [0.0], [2.0]], np.float32)
    values = np.array([[1.0], [2.0], [3.0]], np.float32)
    dones = np.array([[False], [True], [False]])
    live = np.array([[True], [False], [True]])
    adv, ret = gae(rewards, values, dones, np.array([4.0], np.float32), 0.5, 0.5, live=live)
    assert adv[:, 0].tolist() == [1.0, 0.0, 1.0] and ret[:, 0].tolist() == [2.0, 2.0, 4.0]
    same, _ = gae(rewards, values, dones, np.array([4.0], np.float32), 0.5, 0.5, live=np.ones((3, 1), bool))
    assert same.tolist() == gae(rewards, values, dones, np.array([4.0], np.float32), 0.5, 0.5)[0].tolist()


def test_a_crashed_steps_sample_does_not_move_the_advantage_statistics():
    from ppo1.advantages import standardize
    adv = np.array([1.0, 2.0, -50.0, 3.0, 6.0], np.float32)
    weights = np.array([1, 1, 0, 1, 1], np.float32)
    out = standardize(adv, weights)
    # mean 3 and std sqrt(3.5) of 1, 2, 3, 6 alone; the crashed sample's 0
    np.testing.assert_allclose(out, np.array([-2, -1, 0, 0, 3]) / (np.sqrt(3.5) + 1e-8), rtol=1e-6)
    assert out[2] == 0.0 and np.array_equal(out[weights > 0], standardize(adv[weights > 0]))
    adv[2] = 1e6
    assert np.array_equal(standardize(adv, weights), out)
