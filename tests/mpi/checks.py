"""Run under `mpirun -np 2`: the scripts named on the command line (files of this folder, without .py), one after
the other in one launch, so that the checks of the MPI layer pay for one start of the ranks, not one each. After
each, every rank prints `rank R NAME: OK`; the first that fails ends the job (MPI_Abort) with its traceback."""
import os
import runpy
import sys
import traceback

from mpi4py import MPI

HERE = os.path.dirname(os.path.abspath(__file__))

for name in sys.argv[1:]:
    path = os.path.join(HERE, f"{name}.py")
    sys.argv = [path]  # each script as if run alone, with no arguments
    try:
        runpy.run_path(path, run_name="__main__")
    except BaseException:  # an assertion, or a script's sys.exit: the other rank may wait in a collective
        print(f"rank {MPI.COMM_WORLD.Get_rank()} {name}: FAILED\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Abort(1)
    print(f"rank {MPI.COMM_WORLD.Get_rank()} {name}: OK", flush=True)
