"""Run under `mpirun -np 2`: rank 1 raises during its second rollout; the whole job must end."""
import sys

from ppo1 import cli, rollout

if __name__ == "__main__":
    from mpi4py import MPI
    if MPI.COMM_WORLD.Get_rank() == 1:
        original = rollout.Collector.collect
        calls = []

        def failing(self):
            calls.append(1)
            if len(calls) == 2:
                raise RuntimeError("injected env crash on rank 1")
            return original(self)
        rollout.Collector.collect = failing
    sys.exit(cli.main(sys.argv[1:]))
