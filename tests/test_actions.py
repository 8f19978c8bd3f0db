"""ppo1.actions: which action spaces train, and the multi-categorical distribution on hand-computed values."""
import math

import gymnasium
import numpy as np
import pytest
import torch

from ppo1 import PPO1Error
from ppo1.actions import (MultiCategorical, action_nvec, check_action_space, check_actions, env_action,
                          head_size)

LN2, LN3 = math.log(2), math.log(3)


def test_a_multi_categorical_sums_the_log_probabilities_and_entropies_of_its_dimensions():
    # nvec [2, 3]: dimension 0 has probabilities (1/4, 3/4), dimension 1 (1/4, 1/4, 1/2); a second state uniform
    logits = torch.tensor([[0.0, LN3, 0.0, 0.0, LN2], [0.0, 0.0, 0.0, 0.0, 0.0]])
    dist = MultiCategorical(logits, (2, 3))
    actions = torch.tensor([[1, 2], [0, 1]])
    expected_logp = [math.log(3 / 4) + math.log(1 / 2), math.log(1 / 2) + math.log(1 / 3)]
    torch.testing.assert_close(dist.log_prob(actions), torch.tensor(expected_logp))
    h0 = -(1 / 4 * math.log(1 / 4) + 3 / 4 * math.log(3 / 4))
    h1 = -(2 * 1 / 4 * math.log(1 / 4) + 1 / 2 * math.log(1 / 2))
    torch.testing.assert_close(dist.entropy(), torch.tensor([h0 + h1, LN2 + LN3]))
    assert dist.mode[0].tolist() == [1, 2]
    assert dist.sample().shape == (2, 2) and dist.sample().dtype == torch.int64


def test_multibinary_is_a_categorical_of_two_per_dimension_the_same_as_a_bernoulli():
    # MultiBinary(3): probabilities of 1 are 1/2, 3/4, 1/4
    logits = torch.tensor([[0.0, 0.0, 0.0, LN3, LN3, 0.0]])
    dist = MultiCategorical(logits, action_nvec(gymnasium.spaces.MultiBinary(3)))
    action = torch.tensor([[0, 1, 0]])
    torch.testing.assert_close(dist.log_prob(action), torch.tensor([math.log(1 / 2) + 2 * math.log(3 / 4)]))
    h = -(1 / 4 * math.log(1 / 4) + 3 / 4 * math.log(3 / 4))
    torch.testing.assert_close(dist.entropy(), torch.tensor([LN2 + 2 * h]))
    bernoulli = torch.distributions.Bernoulli(logits=logits[:, 1::2] - logits[:, 0::2])
    torch.testing.assert_close(dist.log_prob(action), bernoulli.log_prob(action.float()).sum(-1))
    torch.testing.assert_close(dist.entropy(), bernoulli.entropy().sum(-1))
    assert dist.mode.tolist() == [[0, 1, 0]]


def test_a_multi_categorical_samples_each_dimension_with_its_own_probabilities():
    torch.manual_seed(0)
    dist = MultiCategorical(torch.tensor([0.0, LN3, 0.0, 0.0, LN2]).expand(20000, 5), (2, 3))
    a = dist.sample()
    assert a[:, 0].float().mean().item() == pytest.approx(3 / 4, abs=0.02)
    assert torch.bincount(a[:, 1], minlength=3).div(20000).tolist() == pytest.approx([1 / 4, 1 / 4, 1 / 2], abs=0.02)


def test_the_spaces_ppo1_trains_their_head_sizes_and_the_actions_their_envs_are_given():
    spaces = gymnasium.spaces
    assert (action_nvec(spaces.MultiDiscrete([2, 3])), head_size(spaces.MultiDiscrete([2, 3]))) == ((2, 3), 5)
    assert (action_nvec(spaces.MultiBinary(12)), head_size(spaces.MultiBinary(12))) == ((2,) * 12, 24)
    assert action_nvec(spaces.Discrete(6)) is None and head_size(spaces.Discrete(6)) == 6
    assert head_size(spaces.Box(-1, 1, (3,))) == 3
    assert env_action(spaces.Discrete(6), np.int64(4)) == 4 and type(env_action(spaces.Discrete(6), np.int64(4))) is int
    binary = env_action(spaces.MultiBinary(3), np.array([1, 0, 1]))
    assert binary.dtype == np.int8 and binary.tolist() == [1, 0, 1]
    assert env_action(spaces.MultiDiscrete([3, 2], start=[-1, 5]), np.array([0, 1])).tolist() == [-1, 6]
    for space in (spaces.Discrete(2), spaces.MultiDiscrete([2, 3]), spaces.MultiBinary(4)):
        check_action_space("e", space)
    check_action_space("e", spaces.Box(-1, 1, (2,)), box=True)


@pytest.mark.parametrize("space,box,message", [
    (gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(2), gymnasium.spaces.Discrete(3))), True,
     "has actions Tuple(Discrete(2), Discrete(3)): ppo1 trains vector observations with Discrete, MultiDiscrete "
     "or MultiBinary (of one dimension) or 1-D Box actions"),
    (gymnasium.spaces.Box(-1, 1, (2,)), False, "ppo1 trains image observations with Discrete, MultiDiscrete or "
                                               "MultiBinary (of one dimension) actions"),
    (gymnasium.spaces.MultiBinary([2, 3]), False, "has actions MultiBinary((2, 3))"),
    (gymnasium.spaces.MultiDiscrete([[2, 3], [2, 2]]), True, "has actions MultiDiscrete("),
])
def test_a_space_ppo1_cannot_train_is_named(space, box, message):
    with pytest.raises(PPO1Error, match="^--env_name='e' ") as e:
        check_action_space("e", space, box=box)
    assert message in str(e.value)


def test_a_model_refuses_actions_of_another_count_or_split():
    check_actions("checkpoint", (5, [2, 3]), "e", (5, (2, 3)))
    check_actions("checkpoint", (6, None), "e", (6, None))
    for saved, now, message in [((6, None), (4, None), "checkpoint has 6 actions, e has 4 actions"),
                                ((5, [2, 3]), (5, (3, 2)), "checkpoint has actions [2, 3] (MultiDiscrete), "
                                                           "e has actions [3, 2] (MultiDiscrete)"),
                                ((4, None), (4, (2, 2)), "checkpoint has 4 actions, e has actions [2, 2]")]:
        with pytest.raises(PPO1Error, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            check_actions("checkpoint", saved, "e", now)


def test_an_action_index_reaches_the_env_offset_by_the_spaces_start():
    assert env_action(gymnasium.spaces.Discrete(3, start=-1), 0) == -1
    assert env_action(gymnasium.spaces.Discrete(3), np.int64(2)) == 2
    assert env_action(gymnasium.spaces.MultiDiscrete([2, 3], start=[1, -1]), [1, 0]).tolist() == [2, -1]
