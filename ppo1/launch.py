"""What an MPI launcher tells a process before MPI starts, read without importing torch or mpi4py
(run_atari's Ctrl-C-while-starting line and the CLI's flag errors use it before either is loaded),
holding Ctrl-C while the C++ extensions load, and waiting for the launcher to take this process's
output before MPI_Abort."""
from __future__ import annotations

import fcntl
import os
import signal
import stat
import struct
import termios
import time

# What MPI launchers (mpich/hydra, Open MPI, PMIx) put in the environment of each process they start.
LAUNCHER_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def launcher_rank() -> int | None:
    """This process's rank as the MPI launcher tells it, before MPI is initialised; None without a launcher."""
    for var in LAUNCHER_RANK_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return None


def wait_for_launcher_to_read(fds: tuple[int, ...] = (1, 2), timeout: float = 2.0) -> bool:
    """Wait until the launcher has read what this process wrote to `fds` (pipes: mpich's hydra proxy),
    at most `timeout` s. True when every pipe is empty (or none is a pipe).

    Before MPI_Abort: the proxy forwards a rank's output and its abort request upstream in the
    order it reads them, and mpiexec may exit on the abort before it writes output that came
    after it; when the proxy read both in the same poll, the abort went first and the rank's last
    lines (its one-line error) were lost. An empty pipe means the proxy has read, and so forwarded,
    them before the abort request is sent."""
    pipes = []
    for fd in fds:
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                pipes.append(fd)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while pipes:
        try:
            pipes = [fd for fd in pipes
                     if struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0] > 0]
        except OSError:
            return False
        if not pipes:
            break
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


STARTING_LINE = "ppo1: interrupted while starting; nothing was written"


def say_interrupted_while_starting() -> None:
    """STARTING_LINE on stderr from the launcher's rank 0 (or a lone process); one write, safe in a
    signal handler."""
    if (launcher_rank() or 0) == 0:
        try:
            os.write(2, (STARTING_LINE + "\n").encode())
        except OSError:  # stderr is gone (a closed terminal or pipe)
            pass


class HeldInterrupt:
    """Hold Ctrl-C (SIGINT) while a rank starts: `pending` tells whether one came.

    Two ways a Ctrl-C while starting went wrong: torch's and ale_py's imports run Python code from
    C++ (pybind11), and a KeyboardInterrupt raised there ended the rank in std::terminate (SIGABRT,
    exit 6); and a rank that exited before MPI_Init left the others waiting in MPI_Init for ever
    (hydra does not end the job for a process that never started MPI). Held through the imports
    and MPI_Init (from run_atari's first line), the interrupt is acted on by every rank together
    (cli.main). A second Ctrl-C exits at once (130) with one line from rank 0."""

    def __init__(self):
        self.pending = False
        self._previous = None

    def hold(self) -> "HeldInterrupt":
        """Start holding (again: no-op)."""
        if self._previous is None:
            self._previous = signal.signal(signal.SIGINT, self._hold)
        return self

    def release(self) -> None:
        """Give SIGINT back to the handler it had before hold(); `pending` stays as it was."""
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _hold(self, signum, frame) -> None:
        if self.pending:
            say_interrupted_while_starting()
            os._exit(130)
        self.pending = True
