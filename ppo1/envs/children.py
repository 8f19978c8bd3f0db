"""What an env starts (ViZDoom's engine, an emulator server, a user's subprocess) is the rank's child, not the
terminal's: `shielded()` is held while envs are made, so every process started then begins with the stop
signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT) blocked, a mask that fork and exec keep. Ctrl-C, `kill -TERM`, a
hang-up and what mpirun forwards to a rank's process group then reach ppo1 alone, which stops after its
iteration with a checkpoint and closes its envs; a signal that comes meanwhile waits in ppo1 (it is blocked,
not lost) and is handled once the envs are made. `kill_descendants()` ends whatever is left of them when a
rank exits without closing its envs (a second Ctrl-C, MPI_Abort): no engine outlives its rank that way."""
from __future__ import annotations

import contextlib
import os
import signal
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@contextlib.contextmanager
def shielded():
    """Block the stop signals in this thread while the body runs (envs are made): the processes it starts
    inherit the block; this process gets any signal that came meanwhile when the body ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


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


def kill_descendants() -> int:
    """SIGKILL every process below this one (envs' engines left running). Returns how many were signalled.
    Safe in a signal handler: no allocation beyond reading /proc, no locks."""
    n = 0
    for p in descendants():
        try:
            os.kill(p, signal.SIGKILL)
            n += 1
        except OSError:
            pass
    return n
