"""Run under `mpirun -np 2`: averaged gradients equal the one-process gradient of the union batch (with a
crashed step's sample of weight 0 on one rank too), ranks stay bit-identical through PPO updates, and the sync
check raises when they are not.
Optional argument: the device (default cpu; `cuda` puts policy, data and a fused Adam on the GPU)."""
import sys

import numpy as np
import torch

from ppo1.device import make_adam
from ppo1.distributed import Comm, RanksOutOfSync, parameter_digest
from ppo1.observations import Obs
from ppo1.policies import build
from ppo1.ppo import Hyper, ppo_loss, ranks_share, update
from ppo1.update_pass import UpdatePass
from ppo1.rollout import Batch

comm = Comm.create()
assert comm.size == 2, comm.size
torch.set_num_threads(1)
device = torch.device(sys.argv[1] if len(sys.argv) > 1 else "cpu")
# Full float32 on the GPU: with TF32 convolutions (torch's default there) a half batch and the union
# batch differ by ~1e-3 relative, which is rounding, not a wrong average.
torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False

# identical data on every rank: the union batch; rank r owns half r
g = torch.Generator().manual_seed(0)
N = 16
obs = torch.randint(0, 256, (N, 4, 84, 84), generator=g, dtype=torch.uint8)
actions = torch.randint(0, 6, (N,), generator=g)
old_logp = torch.log(torch.full((N,), 1 / 6)) + 0.05 * torch.randn(N, generator=g)
adv = torch.randn(N, generator=g)
returns = torch.randn(N, generator=g)
obs, actions, old_logp, adv, returns = (t.to(device) for t in (obs, actions, old_logp, adv, returns))

torch.manual_seed(100 + comm.rank)          # different init per rank: the broadcast must fix that
policy = build("small", 6).to(device)
comm.broadcast_parameters(policy)
comm.check_synced(policy)


def grads(idx, weights=None, share=1.0):
    policy.zero_grad()
    logp, entropy, values = policy.evaluate(obs[idx], actions[idx])
    loss, _ = ppo_loss(logp, entropy, values, old_logp[idx], adv[idx], returns[idx], 0.1, 1.0, 0.01,
                       weights=None if weights is None else weights[idx])
    (loss * share).backward()
    return [p.grad.clone() for p in policy.parameters()]


union = grads(torch.arange(N, device=device))
half = torch.arange(comm.rank * N // 2, (comm.rank + 1) * N // 2, device=device)
grads(half)
comm.average_gradients(list(policy.parameters()))
for u, p in zip(union, policy.parameters()):
    # cuDNN may choose other algorithms for 8 and 16 samples: a little more rounding there
    torch.testing.assert_close(p.grad, u, rtol=1e-5 if device.type == "cpu" else 1e-4, atol=1e-7)
    assert p.grad.abs().sum() > 0

# sample 3 (rank 0's) crashed: the ranks' shares of their weighted losses average to the union's weighted mean
weights = torch.ones(N, device=device)
weights[3] = 0.0
union = grads(torch.arange(N, device=device), weights)
share, _ = ranks_share(comm, weights[half], torch.tensor(0.0), 0.0)
assert share == (14 / 15 if comm.rank == 0 else 16 / 15), share
grads(half, weights, share)
comm.average_gradients(list(policy.parameters()))
for u, p in zip(union, policy.parameters()):
    torch.testing.assert_close(p.grad, u, rtol=1e-5 if device.type == "cpu" else 1e-4, atol=1e-7)

# PPO updates on different data per rank keep the ranks bit-identical
opt = make_adam(policy.parameters(), device, lr=1e-3, eps=1e-5)
rng = np.random.default_rng(comm.rank)
before = parameter_digest(policy)
update(policy, opt, comm, Batch(Obs({"image": obs[half]}), actions[half], old_logp[half], adv[half], returns[half], rng),
       Hyper(clip=0.1, lr=1e-3, epochs=3, minibatch=4, vf_coef=1.0, ent_coef=0.01), UpdatePass(policy))
# likewise with a crashed sample on rank 0 alone (rank 1 weighs its own by 1, every allreduce matched)
update(policy, opt, comm, Batch(Obs({"image": obs[half]}), actions[half], old_logp[half], adv[half], returns[half], rng,
                                weights=weights[half] if comm.rank == 0 else None),
       Hyper(clip=0.1, lr=1e-3, epochs=3, minibatch=4, vf_coef=1.0, ent_coef=0.01, target_kl=1e9), UpdatePass(policy))
assert parameter_digest(policy) != before
digests = comm.allgather(parameter_digest(policy))
assert digests[0] == digests[1], digests
comm.check_synced(policy)

# a rank that drifts is caught
if comm.rank == 1:
    with torch.no_grad():
        next(policy.parameters()).view(-1)[0] += 1e-6
try:
    comm.check_synced(policy)
except RanksOutOfSync as e:
    assert "ranks [1]" in str(e), e
else:
    sys.exit("check_synced did not raise")
print(f"rank {comm.rank}: OK")
