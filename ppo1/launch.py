"""What an MPI launcher tells a process before MPI starts, read without importing torch or mpi4py
(run_atari's Ctrl-C-while-starting line and the CLI's flag errors use it before either is loaded)."""
from __future__ import annotations

import os

# What MPI launchers (mpich/hydra, Open MPI, PMIx) put in the environment of each process they start.
LAUNCHER_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def launcher_rank() -> int | None:
    """This process's rank as the MPI launcher tells it, before MPI is initialised; None without a launcher."""
    for var in LAUNCHER_RANK_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return None

