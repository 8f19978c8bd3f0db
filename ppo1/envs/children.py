"""What an env starts (an emulator server, a user's subprocess) begins with the stop signals blocked:
`shielded()` is held while envs are made, and fork and exec keep the mask, so a child that keeps it hears
no Ctrl-C, `kill -TERM` or hang-up sent to its rank's process group; only its rank stops and closes it. A
signal that comes meanwhile waits in ppo1 (blocked, not lost) and is handled once the envs are made.
ViZDoom's engine unblocks them and installs handlers of its own, so under `--np` the launcher signals the
ranks themselves (ppo1.launch.run_launcher); a rank that exits without closing its envs ends what is left
of them first (ppo1.launch.kill_descendants)."""
from __future__ import annotations

import contextlib
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
