"""A daemon thread that looks at something every so often: what the watchdog (ppo1.watchdog) and the env-call
timer (ppo1.envs.calls) share. It holds no lock the main thread may hold, so it runs while the main thread is
stuck in a collective or an env's call."""
from __future__ import annotations

import threading


class Ticker:
    """Calls `check()` every `interval()` seconds on a daemon thread from `start()` (when `enabled()`) until
    `stop()`, or with `once` until `check()` says it acted (returns True); a context manager for both."""

    name = "ppo1-ticker"
    once = False

    def __init__(self):
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def enabled(self) -> bool:
        return True

    def interval(self) -> float:
        return 1.0

    def check(self) -> bool:
        """One look; returns whether it acted."""
        raise NotImplementedError

    def start(self):
        if self.enabled() and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval()):
            if self.check() and self.once:
                return
