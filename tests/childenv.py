"""A factory env whose observations come from a child process, as ViZDoom's engine or an emulator server: each
step sends the action to the child and reads its answer back. The first `dying` envs reset in a process kill
their child (SIGKILL) at step `die_at` of their life, so that step finds it dead and raises, as an engine
that crashed does (tests/test_env_restarts.py); or, at step `hang_at`, make it stop answering while it stays
alive, as an engine that hangs: that step blocks until the child is killed (--env_step_timeout)."""
from __future__ import annotations

import os
import subprocess
import sys

import gymnasium
import numpy as np

# says "ready" once it runs, then echoes each line, but for "hang", after which it answers nothing more; at EOF
# (its env gone) it runs on, as an engine that does not notice, until it is killed
ENGINE = ("import sys, time\nprint('ready', flush=True)\nfor line in sys.stdin:\n"
          "    if line == 'hang\\n':\n        time.sleep(3600)\n    sys.stdout.write(line)\n    sys.stdout.flush()\n"
          "time.sleep(3600)\n# {tag}\n")
started = 0  # envs reset in this process


class ChildEnv(gymnasium.Env):
    def __init__(self, die_at: int = 0, dying: int = 1, tag: str = "", hang_at: int = 0):
        """tag: a word in the child's command line, by which a test finds it."""
        self.die_at, self.hang_at, self.dying = die_at, hang_at, dying
        self.steps, self.t = 0, 0
        self.observation_space = gymnasium.spaces.Box(-1.0, 30.0, (3,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.engine = subprocess.Popen([sys.executable, "-c", ENGINE.format(tag=tag)], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
        # the engine's first line: it runs its program, so its command line (and tag) is readable from now on
        # (Popen returns once exec is under way, when /proc/<pid>/cmdline can still be empty)
        if self.engine.stdout.readline() != "ready\n":
            self.close()
            raise RuntimeError("the engine did not start")

    def _ask(self, n: int) -> float:
        try:
            self.engine.stdin.write(f"{n}\n")
            self.engine.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError("the engine exited unexpectedly") from None
        line = self.engine.stdout.readline()
        if not line:
            raise RuntimeError("the engine exited unexpectedly")
        return float(line)

    def _obs(self, answer: float) -> np.ndarray:
        return np.array([answer, self.t / 10, 1.0], np.float32)

    def reset(self, *, seed=None, options=None):
        global started
        if self.dying:
            started += 1
            doomed = started <= self.dying
            self.die_at, self.hang_at, self.dying = self.die_at * doomed, self.hang_at * doomed, 0
        super().reset(seed=seed)
        self.t = 0
        return self._obs(self._ask(0)), {}

    def step(self, action):
        self.steps += 1
        self.t += 1
        if self.steps == self.die_at:
            self.engine.kill()
            self.engine.wait()
        if self.steps == self.hang_at:
            self.engine.stdin.write("hang\n")
        answer = self._ask(int(action))
        return self._obs(answer), float(answer == 1), self.t >= 20, False, {}

    def close(self):
        if self.engine.poll() is None:
            self.engine.kill()
        self.engine.wait()


def make(**kwargs) -> ChildEnv:
    return ChildEnv(**kwargs)


def engines(tag: str) -> list[int]:
    """The live child processes of ChildEnvs made with `tag`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if f"# {tag}".encode() in cmd and not zombie:
            found.append(int(pid))
    return found
