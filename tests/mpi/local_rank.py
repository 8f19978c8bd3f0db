"""Run under `mpirun -np N`: prints each rank's rank, local rank and ranks on the node."""
from ppo1.distributed import Comm

comm = Comm.create()
print(f"rank {comm.rank} local_rank {comm.local_rank} local_size {comm.local_size}", flush=True)
