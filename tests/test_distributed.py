import os

import pytest
import torch

from conftest import run_script
from ppo1.distributed import Comm, parameter_digest
from ppo1.policies import build

HERE = os.path.dirname(os.path.abspath(__file__))


def test_two_rank_gradient_average_equals_union_batch_and_ranks_stay_identical():
    r = run_script(os.path.join(HERE, "mpi", "grad_average.py"), 2, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0: OK" in r.stdout and "rank 1: OK" in r.stdout


def test_single_process_comm_is_a_no_op_that_still_works():
    comm = Comm(None)
    policy = build("small", 4)
    digest = parameter_digest(policy)
    comm.broadcast_parameters(policy)
    comm.check_synced(policy)
    assert parameter_digest(policy) == digest
    assert comm.allgather(3) == [3] and comm.mean([1.0, 2.0]).tolist() == [1.0, 2.0]


def test_agree_raises_on_every_rank_when_one_failed():
    from ppo1 import PPO1Error
    with pytest.raises(PPO1Error, match="boom") as info:
        Comm(None).agree(PPO1Error("boom"))
    assert info.value.all_ranks
    Comm(None).agree(None)


def test_parameter_digest_sees_a_one_ulp_change():
    policy = build("small", 4)
    d = parameter_digest(policy)
    with torch.no_grad():
        p = next(policy.parameters()).view(-1)
        p[0] = torch.nextafter(p[0], torch.tensor(1.0))
    assert parameter_digest(policy) != d
