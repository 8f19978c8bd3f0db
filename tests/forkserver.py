"""A process that has imported what `python -m run_atari` imports (torch, gymnasium, ale-py, cv2, ppo1) and
forks a fresh child for each single-process run the tests ask for, so each run pays no interpreter start and
no torch import. The child is a real process: it runs run_atari as `python -m run_atari ARGV` does (as
__main__, from `cwd`), with its own stdout and stderr files, session, exit status and atexit handlers
(MPI_Finalize included: MPI is never initialised here before the fork).

Protocol (one JSON object per line): in {"argv": [...], "cwd": "...", "timeout": s} on stdin; out
{"returncode": n, "stdout": "...", "stderr": "...", "timed_out": bool} on the stdout this process started with.
"""
import atexit
import json
import os
import runpy
import signal
import sys
import tempfile
import time


def preload() -> None:
    import cv2  # noqa: F401
    import gymnasium  # noqa: F401
    import numpy  # noqa: F401
    import torch  # noqa: F401

    import ppo1.cli  # noqa: F401
    import ppo1.launch  # noqa: F401
    import ppo1.train  # noqa: F401
    from ppo1.envs import load_gymnasium
    load_gymnasium()
    assert "mpi4py.MPI" not in sys.modules, "MPI must start in each child, not here"


def child(argv: list[str], cwd: str, out: int, err: int) -> None:
    """In the forked child: become `python -m run_atari ARGV` and exit as it would. Never returns."""
    code = 1
    try:
        os.setsid()
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.chdir(cwd)
        sys.path[0] = cwd  # as `python -m` puts the working directory first
        sys.argv = ["run_atari", *argv]
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            runpy.run_module("run_atari", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def serve() -> None:
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray output of this process stays out of the replies
    preload()
    sys.stdout.flush()
    for line in sys.stdin:
        req = json.loads(line)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            pid = os.fork()
            if pid == 0:
                child(req["argv"], req["cwd"], out.fileno(), err.fileno())
            deadline, timed_out = time.monotonic() + req["timeout"], False
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    os.killpg(pid, signal.SIGKILL)
                    _, status = os.waitpid(pid, 0)
                    break
                time.sleep(0.01)
            code = os.waitstatus_to_exitcode(status)
            texts = []
            for f in (out, err):
                f.seek(0)
                texts.append(f.read().decode(errors="replace"))
        reply.write(json.dumps({"returncode": code, "stdout": texts[0], "stderr": texts[1],
                                "timed_out": timed_out}) + "\n")
        reply.flush()


if __name__ == "__main__":
    serve()
