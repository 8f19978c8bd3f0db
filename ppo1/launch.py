"""Launching: finding mpirun and starting ranks under it (--np), what an MPI launcher tells a process
before MPI starts, read without importing torch or mpi4py (run_atari's Ctrl-C-while-starting line and
the CLI's flag errors use it before either is loaded), holding Ctrl-C while the C++ extensions load,
and waiting for the launcher to take this process's output before MPI_Abort."""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import termios
import time

from ppo1.errors import PPO1Error

# What MPI launchers (mpich/hydra, Open MPI, PMIx) put in the environment of each process they start.
LAUNCHER_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def launcher_rank() -> int | None:
    """This process's rank as the MPI launcher tells it, before MPI is initialised; None without a launcher."""
    for var in LAUNCHER_RANK_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return None


def mpirun_command(np_: int) -> list[str] | None:
    """`mpirun -np np_` of the venv's MPI (the mpich wheel) or of the system, with the flags Open MPI needs
    here (root, more ranks than cores); None when no mpirun is found."""
    here = os.path.join(os.path.dirname(sys.executable), "mpirun")
    exe = here if os.path.exists(here) else shutil.which("mpirun") or shutil.which("mpiexec")
    if exe is None:
        return None
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    extra = ["--oversubscribe", "--allow-run-as-root"] if "Open MPI" in version or "OpenRTE" in version else []
    return [exe, *extra, "-np", str(np_)]


def without_np(argv: list[str]) -> list[str]:
    """`argv` without its --np flag (`--np N` or `--np=N`)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--np":
            skip = True
        elif not arg.startswith("--np="):
            out.append(arg)
    return out


def mpi_fork_command(np_: int, argv: list[str], module: str = "run_atari") -> list[str]:
    """The command that runs `python -m MODULE ARGV` (less --np; run_atari or ppo1) as np_ ranks under this
    environment's mpirun (as Spinning Up's mpi_fork). Raises PPO1Error under a launcher or without an mpirun."""
    if np_ < 1:
        raise PPO1Error(f"--np={np_} is invalid: must be a whole number >= 1")
    rank = launcher_rank()
    if rank is not None:
        raise PPO1Error(f"--np={np_}: this process already runs under mpirun (rank {rank}), which sets the "
                        "number of ranks itself; give either --np or mpirun -np, not both")
    cmd = mpirun_command(np_)
    if cmd is None:
        raise PPO1Error(f"--np={np_}: no mpirun found beside {sys.executable} or on PATH (pip install mpich, "
                        "or install a system MPI)")
    return [*cmd, sys.executable, "-m", module, *without_np(argv)]


def _relay(src: int, dst: int, muted=None) -> None:
    """Copy `src` to `dst` until `src` ends; once `dst` is gone (a closed terminal: EIO), keep reading
    and drop what comes, so the writer never blocks or sees an error. Once `muted` (a threading.Event) is
    set, only whole lines that start with `ppo1:` pass (mpirun's report of ranks it saw exit is dropped)."""
    gone, pending = False, b""
    while True:
        try:
            chunk = os.read(src, 65536)
        except OSError:
            return
        if not chunk:
            return
        if muted is not None and muted.is_set():
            pending += chunk
            lines = pending.split(b"\n")
            pending = lines.pop()
            chunk = b"".join(line + b"\n" for line in lines if line.startswith(b"ppo1:"))
        while chunk and not gone:
            try:
                chunk = chunk[os.write(dst, chunk):]
            except OSError:
                gone = True


def descendants(pid: int | None = None) -> list[int]:
    """The processes below `pid` (default: this one), children first, read from /proc ([] where it is
    unreadable)."""
    root = os.getpid() if pid is None else pid
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after the command name, which may hold spaces
        if len(fields) > 1 and fields[1].isdigit():
            children.setdefault(int(fields[1]), []).append(int(name))
    found, queue = [], list(children.get(root, []))
    while queue:
        p = queue.pop(0)
        found.append(p)
        queue.extend(children.get(p, []))
    return found


SPARED: set[int] = set()  # processes below this one that kill_descendants leaves (the envs' reaper, spare)


def spare(pid: int) -> None:
    """Let process `pid` outlive kill_descendants: the reaper of this process's envs (ppo1.envs.children.reaped),
    which ends what they started and removes their temporary folders once this process has ended."""
    SPARED.add(pid)


def kill_descendants() -> int:
    """SIGKILL every process below this one (envs' engines left running) but those spared (spare). Returns how
    many were signalled. Reads /proc only (no import, no lock): it may run in a signal handler."""
    n = 0
    for p in descendants():
        if p in SPARED:
            continue
        try:
            os.kill(p, signal.SIGKILL)
            n += 1
        except OSError:
            pass
    return n


def local_ranks(launcher: int) -> list[int]:
    """The processes below `launcher` (mpirun) on this host that run run_atari or `python -m ppo1`: its ranks
    here."""
    ranks = []
    for pid in descendants(launcher):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"run_atari" in argv or any(a.endswith(b"run_atari.py") for a in argv) or argv[1:3] == [b"-m", b"ppo1"]:
            ranks.append(pid)
    return ranks


def run_launcher(cmd: list[str]) -> int:
    """Run mpirun (`cmd`) as a child and wait for it; return the exit status for this process.
    mpirun runs in a process group of its own, with SIGHUP ignored, and its output goes through this process
    (a terminal that is gone is never mpirun's error). The stop signals reach this process alone, and it
    hands them to this host's ranks themselves (`local_ranks`), not through mpirun, because MPICH's mpirun
    passes a signal to each rank's whole process group, where it also reaches what the rank's envs started
    (ViZDoom's engine, which then exits mid-iteration), dies of a hang-up (its proxy then SIGKILLs the
    ranks), and takes a second Ctrl-C as "kill the job". One rank's signal stops them all after the same
    iteration, with a checkpoint (ranks on other hosts too: they agree on it). So: Ctrl-C and SIGTERM are
    passed on as they are, a hang-up as SIGTERM (exit 129); a second Ctrl-C makes the ranks exit at once with
    their one line, and this process exits 130 without mpirun's report of it. Where no rank is found here,
    the signal goes to mpirun."""
    child, relays, muted = _start_mpirun(cmd)
    hung_up, interrupts = [], []

    def deliver(signum: int) -> None:
        _deliver(child, signum)

    def on_hangup(_signum, _frame):
        if not hung_up:
            hung_up.append(True)
            try:
                os.write(2, b"ppo1: hang-up: every rank stops after its iteration, with a checkpoint\n")
            except OSError:  # the terminal is gone
                pass
            deliver(signal.SIGTERM)

    def on_interrupt(_signum, _frame):
        interrupts.append(True)
        if len(interrupts) > 1:
            muted.set()  # the ranks' own lines pass; mpirun's report of their exit does not
        deliver(signal.SIGINT)

    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # under nohup it stays ignored
        signal.signal(signal.SIGHUP, on_hangup)
    signal.signal(signal.SIGTERM, lambda _s, _f: deliver(signal.SIGTERM))
    signal.signal(signal.SIGINT, on_interrupt)
    code = child.wait()
    for relay in relays:
        relay.join(timeout=5)
    if hung_up:
        return 128 + signal.SIGHUP
    if len(interrupts) >= 2:
        return 128 + signal.SIGINT
    return 128 - code if code < 0 else code  # mpirun killed by a signal: 128 + its number


def _deliver(child, signum: int) -> None:
    """A stop signal for the job under mpirun `child`: to this host's ranks themselves, or to mpirun where none is
    found here (run_launcher says why)."""
    ranks = local_ranks(child.pid)
    if not ranks:
        child.send_signal(signum)
    for pid in ranks:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def _start_mpirun(cmd: list[str]) -> tuple:
    """mpirun (`cmd`) as a child, in a process group of its own with SIGHUP ignored, and the threads that relay
    its stdout and stderr through this process. Returns (the child, the relay threads, the Event that mutes them)."""
    import threading
    # stdin=/dev/null: mpirun forwards its stdin to rank 0 and reads it ahead, eating what the caller's later
    # commands would read (`while read x; do python -m run_atari --np 2 ...; done`); no mode reads stdin
    child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             process_group=0, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    muted = threading.Event()
    relays = [threading.Thread(target=_relay, args=(pipe.fileno(), fd, muted), daemon=True)
              for pipe, fd in ((child.stdout, 1), (child.stderr, 2))]
    for relay in relays:
        relay.start()
    return child, relays, muted


def wait_for_launcher_to_read(fds: tuple[int, ...] = (1, 2), timeout: float = 2.0) -> bool:
    """Wait until the launcher has read what this process wrote to `fds` (pipes: mpich's hydra proxy),
    at most `timeout` s. True when every pipe is empty (or none is a pipe).

    Before MPI_Abort: the proxy forwards a rank's output and its abort request upstream in the
    order it reads them, and mpiexec may exit on the abort before it writes output that came
    after it; when the proxy reads both in the same poll, the abort goes first and the rank's last
    lines (its one-line error) are lost. An empty pipe means the proxy has read, and so forwarded,
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


def say_error_before_mpi(message: str) -> None:
    """`ppo1: error: MESSAGE` on stderr from the launcher's rank 0 (or a lone process) only: before MPI
    starts every rank meets the same error, and one line is enough."""
    if (launcher_rank() or 0) == 0:
        print(f"ppo1: error: {message}", file=sys.stderr, flush=True)


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

    Two ways a Ctrl-C while starting goes wrong unheld: torch's and ale_py's imports run Python code from
    C++ (pybind11), and a KeyboardInterrupt raised there ends the rank in std::terminate (SIGABRT,
    exit 6); and a rank that exits before MPI_Init leaves the others waiting in MPI_Init for ever
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
