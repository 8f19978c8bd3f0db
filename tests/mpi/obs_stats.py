"""Run under `mpirun -np 2`: observation statistics are the union's on every rank, bit-identical."""
import numpy as np
import torch

from ppo1.distributed import Comm
from ppo1.policies import RunningMeanStd

comm = Comm.create()
data = np.random.default_rng(0).normal(3.0, 2.0, size=(2, 500, 3))   # rank r holds data[r]
rms = RunningMeanStd((3,))
rms.update(data[comm.rank], comm.sum)
union = RunningMeanStd((3,))
union.update(data.reshape(1000, 3))
for name in ("sum", "sumsq", "count"):
    torch.testing.assert_close(getattr(rms, name), getattr(union, name), rtol=1e-12, atol=1e-9)
digests = comm.allgather(rms.sum.numpy().tobytes() + rms.sumsq.numpy().tobytes())
assert digests[0] == digests[1]
print(f"rank {comm.rank}: OK")
