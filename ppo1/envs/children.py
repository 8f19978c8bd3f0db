"""What an env starts (an emulator server, a user's subprocess) begins with the stop signals blocked:
`shielded()` is held while envs are made, and fork and exec keep the mask, so a child that keeps it hears
no Ctrl-C, `kill -TERM` or hang-up sent to its rank's process group; only its rank stops and closes it. A
signal that comes meanwhile waits in ppo1 (blocked, not lost) and is handled once the envs are made.
ViZDoom's engine unblocks them and installs handlers of its own, so under `--np` the launcher signals the
ranks themselves (ppo1.launch.run_launcher); a rank that exits without closing its envs ends what is left
of them first (ppo1.launch.kill_descendants), and one killed outright (SIGKILL, the OOM killer) leaves them to
its reaper (`reaped()`), a small process that outlives it by a moment to kill them."""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
OWNER = "PPO1_ENV_OWNER"  # the variable that marks every process this rank's envs start (with its token)
TEMP_PREFIX = "ppo1-"  # the start of the names of owned_temp_dir's directories

# The reaper: waits for its rank to end (EOF on its stdin: the rank holds the only write end, which the kernel
# closes on any death, SIGKILL too), then kills every process whose environment carries the rank's token and
# removes the temporary directories named with it (owned_temp_dir) from the rank's temporary directory.
REAPER = f"""
import os, shutil, signal, sys
for s in {tuple(int(s) for s in STOP_SIGNALS)}:
    signal.signal(s, signal.SIG_IGN)
sys.stdin.buffer.read()
mark = b"\\0{OWNER}=" + sys.argv[1].encode() + b"\\0"
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            with open("/proc/" + pid + "/environ", "rb") as f:
                if mark in b"\\0" + f.read() + b"\\0":
                    os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
try:
    names = os.listdir(sys.argv[2])
except OSError:
    names = []
for name in names:
    if name.startswith("{TEMP_PREFIX}") and "-" + sys.argv[1] + "-" in name:
        shutil.rmtree(os.path.join(sys.argv[2], name), True)
"""


@contextlib.contextmanager
def shielded():
    """Block the stop signals in this thread while the body runs (envs are made): the processes it starts
    inherit the block; this process gets any signal that came meanwhile when the body ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        reaped()
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def reaped() -> None:
    """Once per process, before its envs start anything (Linux): mark what they start with a token in the
    environment they inherit, and start the reaper, which kills those processes when this one ends, however it
    ends (a rank killed with SIGKILL would otherwise leave ViZDoom's engines running with parent 1)."""
    if os.environ.get(OWNER, "").startswith(f"{os.getpid()}-") or not os.path.isdir("/proc"):
        return  # this process has its reaper (a token it inherited is its parent's: it gets one of its own)
    token = f"{os.getpid()}-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if k != OWNER}
    try:
        # a session of its own: mpirun's proxy, which kills a finished rank's process group, leaves it its work
        reaper = subprocess.Popen([sys.executable, "-I", "-S", "-c", REAPER, token, tempfile.gettempdir()],
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=env, close_fds=True, start_new_session=True)
    except OSError:
        return  # no reaper: the envs are closed by their own close() on every exit but SIGKILL
    from ppo1.launch import spare
    spare(reaper.pid)  # a rank that exits at once kills what is below it, but for its reaper
    os.set_inheritable(reaper.stdin.fileno(), False)  # only this process holds the write end
    reaped.reaper = reaper  # kept for the life of the process: its pipe closes when the process ends
    os.environ[OWNER] = token


def owned_temp_dir(name: str) -> str:
    """A new temporary directory (`ppo1-<name>-...`) that goes when this process ends, however it ends: removed at
    a normal exit, and named with the token of this process's reaper (reaped), which removes it after any other
    (os._exit after a stop, the watchdog's, a signal, SIGKILL)."""
    reaped()
    token = os.environ.get(OWNER, "")
    mine = token if token.startswith(f"{os.getpid()}-") else ""  # none where the reaper could not start
    directory = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{name}-{mine + '-' if mine else ''}")
    atexit.register(shutil.rmtree, directory, True)
    return directory


def direct_children() -> set[int]:
    """The processes this one started that have not been reaped (every thread's; Linux /proc, else empty)."""
    found: set[int] = set()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                found.update(int(p) for p in f.read().split())
        except OSError:  # a thread that ended meanwhile, or a kernel without the file: the slow way below
            if not os.path.exists(f"/proc/self/task/{tid}"):
                continue
            from ppo1.launch import descendants
            me = os.getpid()
            return {p for p in descendants() if _parent(p) == me}
    return found


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return int(stat[stat.rfind(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


class Started(list):
    """The child processes this process starts in a `recording()` body (an env's engine or emulator server: what
    ppo1.envs.calls.CallTimer ends when a call of that env hangs): the list, filled once the body has run, and
    `so_far()`, those started since it began, for a watcher while it runs."""

    def __init__(self):
        super().__init__()
        self.before = direct_children()

    def so_far(self) -> list[int]:
        return sorted(direct_children() - self.before)


@contextlib.contextmanager
def recording():
    """Yields a Started, filled with the child processes this process started in the body once it has run."""
    started = Started()
    yield started
    started.extend(started.so_far())


def below(pids) -> list[int]:
    """Those of `pids` that are still below this process, each followed by everything below it (never a process
    that is not this one's: a pid reused since is left alone)."""
    from ppo1.launch import descendants
    mine = set(descendants())
    return list(dict.fromkeys(q for p in pids if p in mine for q in (p, *descendants(p))))


def kill(pids) -> None:
    """SIGKILL each of `pids` (below(...)'s) that is still there."""
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
