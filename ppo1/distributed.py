"""Everything MPI. The rest of ppo1 calls this small interface, which also works with one process.

    comm = Comm.create()
    comm.broadcast_parameters(model)     # rank 0's parameters everywhere
    comm.average_gradients(params)       # one flat allreduce, then divide by the number of ranks
    comm.check_synced(model)             # raises RanksOutOfSync if any rank's parameters differ
    comm.allgather(obj) / comm.mean_of(d) # episode statistics, loss statistics (by name)
    comm.agree(error)                    # all ranks learn whether any rank failed during set-up
    comm.abort(code)                     # end every rank now (an error during training)
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from typing import Any, Iterable

import numpy as np
import torch

from ppo1.errors import PPO1Error, RanksError
from ppo1.launch import LAUNCHER_RANK_VARS, kill_descendants, mpirun_command, wait_for_launcher_to_read  # noqa: F401 (mpirun_command: re-exported)
from ppo1.metrics import Profile


def mpi_environment(environ: dict) -> dict[str, str]:
    """Variables to set before the MPI library loads, given the environment `environ` (those it sets are kept).

    UCX_DEBUG_SIGNO=0: MPICH's UCX layer otherwise catches SIGHUP (its debug signal) as it loads, even
    when the process was started with SIGHUP ignored (nohup), and a hang-up then switches UCX's log level
    to DEBUG (some 240 lines at the exit) instead of stopping training or being ignored."""
    return {} if "UCX_DEBUG_SIGNO" in environ else {"UCX_DEBUG_SIGNO": "0"}


def flush_console() -> None:
    """Flush stdout and stderr; a console that is gone (a closed terminal: EIO, a closed pipe: EPIPE) is skipped."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


def say_line(line: str, stream=None) -> None:
    """Write `line` and its newline in one write, then flush (default stream: stdout). Under mpirun the ranks
    share one console: each rank's lines reach it as they are said, not in one block at exit after
    MPI_Finalize (Python flushes later), and with PYTHONUNBUFFERED set (common in containers) print() writes a
    line and its newline separately, so another rank's line could land between them."""
    stream = stream or sys.stdout
    stream.write(line + "\n")
    stream.flush()


class RanksOutOfSync(RanksError):
    """Ranks hold different parameters: gradients were not averaged identically."""


class Comm:
    """A communicator over all ranks of the job (MPI.COMM_WORLD, or a single process without MPI)."""

    def __init__(self, mpi_comm=None):
        self._comm = mpi_comm
        self.rank = mpi_comm.Get_rank() if mpi_comm is not None else 0
        self.size = mpi_comm.Get_size() if mpi_comm is not None else 1
        self.local_size, self.local_rank = 1, 0   # ranks on this node, and this rank's index among them
        if mpi_comm is not None and self.size > 1:
            from mpi4py import MPI
            node = mpi_comm.Split_type(MPI.COMM_TYPE_SHARED)
            self.local_size, self.local_rank = node.Get_size(), node.Get_rank()
            node.Free()
        self._flat: torch.Tensor | None = None   # gradient buffer on the gradients' device, reused
        self._host: torch.Tensor | None = None   # its host copy for MPI (the same tensor on the CPU)
        self.profile = Profile()                  # "comm": seconds inside gradient allreduces

    @classmethod
    def create(cls) -> "Comm":
        """MPI.COMM_WORLD when mpi4py and an MPI library load; otherwise a single-process Comm."""
        os.environ.update(mpi_environment(os.environ))
        try:
            from mpi4py import MPI
        except ImportError:
            if any(k in os.environ for k in LAUNCHER_RANK_VARS):
                raise PPO1Error("started under mpirun but mpi4py cannot be imported; "
                                "install it with `pip install mpi4py mpich`") from None
            return cls(None)
        return cls(MPI.COMM_WORLD)

    @property
    def is_root(self) -> bool:
        return self.rank == 0

    # ------------------------------------------------------------------ parameters
    def broadcast_parameters(self, module: torch.nn.Module) -> None:
        """Overwrite every rank's parameters and buffers with rank 0's, in one broadcast."""
        if self.size == 1:
            return
        tensors = [t for t in module.state_dict().values()]
        flat = torch.cat([t.detach().reshape(-1).double() for t in tensors]).cpu()  # float64: exact for all
        self._comm.Bcast(flat.numpy(), root=0)
        offset = 0
        with torch.no_grad():
            for t in tensors:
                n = t.numel()
                t.copy_(flat[offset:offset + n].view_as(t))
                offset += n

    def average_gradients(self, params: Iterable[torch.nn.Parameter]) -> None:
        """Replace each gradient by its mean over ranks: one allreduce of one reused flat buffer.

        Gradients on a GPU are gathered into a flat buffer there and staged through one pinned host
        buffer (one copy each way); on the CPU the flat buffer is the one MPI reduces.
        """
        if self.size == 1:
            return
        params = [p for p in params if p.grad is not None]
        n = sum(p.numel() for p in params)
        device = params[0].grad.device
        if self._flat is None or self._flat.numel() != n or self._flat.device != device:
            self._flat = torch.empty(n, dtype=torch.float32, device=device)
            self._host = self._flat if device.type == "cpu" else torch.empty(n, dtype=torch.float32).pin_memory()
        flat, offset = self._flat, 0
        for p in params:
            flat[offset:offset + p.numel()].copy_(p.grad.reshape(-1))
            offset += p.numel()
        if self._host is not flat:
            self._host.copy_(flat)
        with self.profile.timer("comm"):
            self.allreduce_sum_(self._host.numpy())
        if self._host is not flat:
            flat.copy_(self._host, non_blocking=True)
        flat.div_(self.size)
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p.grad))
            offset += p.numel()

    @property
    def gradient_size(self) -> int:
        """Elements of the flat gradient buffer (0 before the first average_gradients)."""
        return 0 if self._flat is None else self._flat.numel()

    def allreduce_sum_(self, buffer: np.ndarray) -> None:
        """Sum a contiguous numpy array over ranks, in place (one MPI Allreduce)."""
        if self.size > 1:
            from mpi4py import MPI
            self._comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)

    def check_synced(self, module: torch.nn.Module) -> None:
        """Raise RanksOutOfSync unless every rank holds bit-identical parameters and buffers."""
        if self.size == 1:
            return
        digest = parameter_digest(module)
        digests = self._comm.allgather(digest)
        if len(set(digests)) != 1:
            bad = [r for r, d in enumerate(digests) if d != digests[0]]
            raise RanksOutOfSync(f"ranks {bad} hold parameters that differ from rank 0's")

    # ------------------------------------------------------------------ statistics
    def allgather(self, obj: Any) -> list:
        """Every rank's `obj`, in rank order (small picklable objects only)."""
        return [obj] if self.size == 1 else self._comm.allgather(obj)

    def gather(self, obj: Any) -> list | None:
        """Every rank's `obj` on rank 0 (None on the others)."""
        return [obj] if self.size == 1 else self._comm.gather(obj, root=0)

    def mean(self, x: np.ndarray) -> np.ndarray:
        """Elementwise mean of a float64 array over ranks."""
        return self.sum(x) / self.size

    def mean_of(self, values: dict[str, float]) -> dict[str, float]:
        """The mean over ranks of each named value (one allreduce; every rank passes the same names)."""
        names = sorted(values)
        return dict(zip(names, self.mean(np.array([values[n] for n in names], np.float64)).tolist()))

    def sum(self, x: np.ndarray) -> np.ndarray:
        """Elementwise sum of a float64 array over ranks (the same result on every rank)."""
        x = np.asarray(x, np.float64)
        if self.size == 1:
            return x
        from mpi4py import MPI
        out = np.empty_like(x)
        self._comm.Allreduce(x, out, op=MPI.SUM)
        return out

    def bcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank."""
        return obj if self.size == 1 else self._comm.bcast(obj, root=0)

    def barrier(self) -> None:
        if self.size > 1:
            self._comm.Barrier()

    # ------------------------------------------------------------------ failure
    def agree(self, error: BaseException | None) -> None:
        """Collective: if any rank passes an error, raise it on every rank (the lowest rank's).

        Used after set-up steps that may fail on some ranks only, so no rank is left waiting in a
        collective for one that has given up. The raised error is a RanksError (said once, by rank 0).
        """
        message = None if error is None else (isinstance(error, PPO1Error), type(error).__name__, str(error))
        for m in self.allgather(message):
            if m is not None:
                ours, kind, text = m
                raise RanksError(text if ours else f"{kind}: {text}")

    def exit(self, code: int) -> None:
        """End this rank now with `code` after a clean MPI_Finalize, skipping the interpreter's own
        shutdown: that shutdown puts SIGINT/SIGTERM back to the default action, so a second signal
        arriving then would kill the rank without a word (exit 15). Everything must be written and closed."""
        flush_console()
        if self._comm is not None:
            from mpi4py import MPI
            if not MPI.Is_finalized():
                MPI.Finalize()
        os._exit(code)

    def end_now(self, code: int) -> None:
        """End this rank, and under MPI the job, at once with `code`, from where no exception may travel (a fatal
        signal's handler): MPI_Abort (which may return before the launcher ends this rank), then the processes
        below this one ended and os._exit."""
        try:
            self.abort(code)
        except SystemExit:
            pass
        flush_console()
        kill_descendants()
        os._exit(code)

    def abort(self, code: int = 1) -> None:
        """End every rank of the job now (MPI_Abort); in one process, exit. A rank ends whatever its envs
        started first: MPI_Abort kills the ranks, not their engines."""
        flush_console()
        if self.size > 1:
            kill_descendants()
            wait_for_launcher_to_read()  # else the launcher may end the job before it prints our last lines
            self._comm.Abort(code)
        sys.exit(code)


def parameter_digest(module: torch.nn.Module) -> str:
    """A hash of the bytes of every parameter and buffer (equal iff bit-identical)."""
    h = hashlib.blake2b(digest_size=16)
    for name, t in module.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()
