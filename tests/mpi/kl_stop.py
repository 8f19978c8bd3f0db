"""Run under `mpirun -np 2`: --target_kl stops the epochs on both ranks at the same minibatch, from the
KL averaged over the ranks, even where each rank's own KL would have stopped it at another minibatch;
both ranks then took the same number of Adam steps and hold bit-identical parameters.

The threshold is chosen from a probe: the same update with an unreachable target records every
minibatch's own and averaged KL on both ranks; the test then picks a target that the averaged KL
crosses at minibatch m (before the last) while one rank's own KL crosses it elsewhere. A rank that
decided alone would run a different number of steps: its allreduces would mismatch (an MPI error or a
hang, ended by the test's timeout) or its parameters and step count would differ from the other's.
"""
import copy
import sys

import numpy as np
import torch

from ppo1.distributed import Comm, parameter_digest
from ppo1.observations import Obs
from ppo1.policies import build
from ppo1.ppo import Hyper, update
from ppo1.update_pass import UpdatePass
from ppo1.rollout import Batch

comm = Comm.create()
assert comm.size == 2, comm.size
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

# different data on each rank (as different games give), one policy
g = torch.Generator().manual_seed(10 + comm.rank)
N, MB, EPOCHS = 24, 4, 3  # 6 minibatches per epoch, 18 in all
obs = torch.randint(0, 256, (N, 4, 84, 84), generator=g, dtype=torch.uint8)
actions = torch.randint(0, 6, (N,), generator=g)
adv = (1 + 3 * comm.rank) * torch.randn(N, generator=g)  # rank 1's larger advantages move its states more
returns = torch.randn(N, generator=g)
torch.manual_seed(0)
policy = build("small", 6)
comm.broadcast_parameters(policy)
with torch.no_grad():
    old_logp = policy.evaluate(obs, actions)[0]


class Recording(Comm):
    """This rank's Comm, noting each KL it averaged: (its own value, the ranks' mean)."""

    def __init__(self, comm: Comm):
        self.__dict__.update(comm.__dict__)
        self.kls: list[tuple[float, float]] = []

    def mean(self, x):
        out = super().mean(x)
        self.kls.append((float(np.asarray(x)[0]), float(out[0])))
        return out


def run(target: float):
    """The update from the same start on copies: (its stats, the KLs it averaged, policy, optimizer)."""
    p = copy.deepcopy(policy)
    o = torch.optim.Adam(p.parameters(), lr=3e-4, eps=1e-5)
    rec = Recording(comm)
    stats = update(p, o, rec, Batch(Obs({"image": obs}), actions, old_logp, adv, returns, np.random.default_rng(comm.rank)),
                   Hyper(clip=0.1, lr=3e-4, epochs=EPOCHS, minibatch=MB, vf_coef=1.0, ent_coef=0.01, target_kl=target),
                   UpdatePass(p))
    return stats, rec.kls, p, o


def first_above(values, target):
    return next((i for i, v in enumerate(values) if v > target), None)


_, probe, _, _ = run(1e9)  # never stops: every minibatch's KL, own and averaged
assert len(probe) == EPOCHS * N // MB, len(probe)
both = comm.allgather(probe)
means = [m for _, m in both[0]]
assert means == [m for _, m in both[1]], "the averaged KL is the same on both ranks"
target, stop = None, -1
for t in sorted({v * (1 - 1e-6) for kls in both for pair in kls for v in pair if v > 0}):
    m = first_above(means, t)
    own = [first_above([k for k, _ in kls], t) for kls in both]
    if m is not None and stop < m < len(means) - 1 and any(o != m for o in own):
        target, stop = t, m  # the latest such stop
assert target is not None, f"no target where a rank's own KL decides otherwise: {both}"

stats, kls, p, o = run(target)
steps = {int(s["step"]) for s in o.state.values()}
assert steps == {stop}, (steps, stop)                   # the m minibatches before the stopping one stepped
assert len(kls) == stop + 1                             # no KL averaged after the stop
assert stats["epochs"] == stop / (N // MB), stats["epochs"]
every = comm.allgather((parameter_digest(p), sorted(steps), stats["epochs"]))
assert every[0] == every[1], every                      # same steps and bit-identical parameters
comm.check_synced(p)
own = [first_above([k for k, _ in r], target) for r in both]
print(f"rank {comm.rank}: OK: stopped at minibatch {stop} of {len(means)} (own KLs would stop at {own})")
sys.stdout.flush()
