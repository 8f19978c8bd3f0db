"""One timed training run: `mpirun -np R python -m bench.worker SPEC.json OUT.json`.

Runs the real training loop (`ppo1.trainer.train`, fresh, in the spec's checkpoint dir) for
`warmup + iterations` iterations, then gathers from every rank its peak RSS, CPU time, torch threads
the seconds it spent in gradient allreduces during the timed iterations, and the time of one
allreduce of the gradient buffer when no rank has to wait for another. Rank 0 writes them
to OUT.json; the per-iteration timings come from the run's progress.csv (rank 0's clocks).
"""
from __future__ import annotations

import json
import os
import resource
import socket
import sys
import time
import traceback

import numpy as np
import torch

from ppo1.config import Config
from ppo1.distributed import Comm


class TimedComm(Comm):
    """A Comm that notes (wall clock, cumulative allreduce seconds) each time train() averages its
    per-iteration statistics (Comm.mean_of calls mean once), i.e. once per iteration: the per-rank
    split of the timed window."""

    def __init__(self, mpi_comm=None):
        super().__init__(mpi_comm)
        self.marks: list[tuple[float, float]] = []

    def mean(self, x: np.ndarray) -> np.ndarray:
        self.marks.append((time.perf_counter(), self.profile.seconds["comm"]))
        return super().mean(x)


def _window(marks: list[tuple[float, float]], warmup: int, iterations: int) -> dict:
    """Wall and allreduce seconds of this rank over the timed iterations (None unless train() was
    seen to call Comm.mean exactly once per iteration, and there was a warm-up to start from)."""
    if len(marks) != warmup + iterations or warmup < 1:
        return {"window_seconds": None, "window_comm_seconds": None}
    (t0, c0), (t1, c1) = marks[warmup - 1], marks[warmup + iterations - 1]
    return {"window_seconds": t1 - t0, "window_comm_seconds": c1 - c0}


def allreduce_transfer_seconds(comm: Comm, reps: int = 50) -> float | None:
    """Median seconds of one gradient allreduce with every rank already waiting (a barrier first), on
    a buffer the size of the gradients: the transfer alone, without waiting for a slower rank."""
    if comm.size == 1 or comm.gradient_size == 0:
        return None
    buf, times = np.zeros(comm.gradient_size, np.float32), []
    for i in range(reps + 5):
        comm.barrier()
        start = time.perf_counter()
        comm.allreduce_sum_(buf)
        if i >= 5:
            times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv: list[str]) -> int:
    spec_path, out_path = argv
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    comm = TimedComm.create()  # Comm.create builds cls
    from ppo1.trainer import train  # after MPI is up

    try:
        config = Config(**spec["config"]).validate()
        start = time.perf_counter()
        result = train(config, comm, log=print if comm.is_root else (lambda *a, **k: None), fresh=True,
                       stop_after=spec["warmup"] + spec["iterations"])
        wall = time.perf_counter() - start
    except BaseException:
        print(f"bench.worker: error on rank {comm.rank}:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        comm.abort(1)
        return 1
    transfer = allreduce_transfer_seconds(comm)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    mine = {
        "rank": comm.rank, "host": socket.gethostname(), "pid": os.getpid(),
        "peak_rss_mb": usage.ru_maxrss / 1024.0,  # Linux: kilobytes
        "cpu_seconds": usage.ru_utime + usage.ru_stime, "wall_seconds": wall,
        "involuntary_switches": usage.ru_nivcsw, "torch_threads": torch.get_num_threads(),
        "comm_seconds": comm.profile.seconds["comm"], "allreduce_transfer_seconds": transfer, **_window(comm.marks, spec["warmup"], spec["iterations"]),
    }
    ranks = comm.gather(mine)
    if comm.is_root:
        with open(out_path, "w", encoding="utf-8") as f:
            json.dump({"result": result, "ranks": ranks}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
