"""A process that has imported what `python -m run_atari` imports (torch, gymnasium, ale-py, cv2, ppo1) and
forks a fresh child for each single-process run the tests ask for, so each run pays no interpreter start and no
torch import. Each child is a real process: it runs run_atari as `python -m run_atari ARGV` does (as __main__,
from `cwd`), in a session of its own, with its own streams, exit status and atexit handlers. MPI ranks are never
forked here: every `mpirun` run of the tests starts real `python -m run_atari` ranks (tests/conftest.py).

Protocol: one JSON object per line on stdin, one reply per line on stdout, one request at a time:
    {"argv": [...], "cwd": "...", "timeout": s, "env": {...}}: a run to its end (with the environment variables
        `env`, optional, added: only those read when the run uses them, not at an import, e.g. TMPDIR), its reply
        {"returncode": n, "stdout": "...", "stderr": "...", "timed_out": b};
    {"start": true, "argv": [...], "cwd": "...", "stdout": path, "stderr": path}: a run in the background, its
        streams into those files; the reply {"pid": n} comes at once (the test signals it, other runs come
        meanwhile);
    {"wait": pid, "timeout": s}: wait up to s seconds for a background run (0: poll); the reply
        {"returncode": n}, or null while it runs. The child is this server's, so the server reaps it.
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
    import ppo1.trainer  # noqa: F401
    from ppo1.envs import load_gymnasium
    load_gymnasium()
    assert "mpi4py.MPI" not in sys.modules, "MPI must start in each child, not here"


def become_run_atari(argv: list[str], cwd: str, env: dict | None = None) -> None:
    """In a forked child whose streams are in place: run `python -m run_atari ARGV` from cwd with the variables
    `env` added to its environment, and exit with its status. Never returns."""
    code = 1
    try:
        os.setsid()
        os.environ.update(env or {})
        tempfile.tempdir = None  # TMPDIR is read anew at the next temporary file, as in a new interpreter
        os.chdir(cwd)
        sys.path[0] = cwd  # as `python -m` puts the working directory first
        sys.argv = ["run_atari", *argv]
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as a new interpreter has it: a closed pipe is an exception
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
        mpi = sys.modules.get("mpi4py.MPI")  # what the interpreter's own shutdown does, which os._exit skips
        if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
            mpi.Finalize()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def fork_run(req: dict, out: int, err: int) -> int:
    """Fork a child that runs `req` with stdout and stderr on the descriptors out and err. Returns its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            sys.stdin.close()
            os.dup2(out, 1)
            os.dup2(err, 2)
        except BaseException:
            os._exit(1)
        become_run_atari(req["argv"], req["cwd"], req.get("env"))
    return pid


def start(req: dict) -> dict:
    """Fork one run in the background, its streams into the files req names. Returns the reply (its pid)."""
    fds = [os.open(req[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) for name in ("stdout", "stderr")]
    try:
        return {"pid": fork_run(req, *fds)}
    finally:
        for fd in fds:
            os.close(fd)


def wait(req: dict) -> dict:
    """Wait up to req["timeout"] s for the background run req["wait"]. Returns the reply (its exit status, or
    None while it runs)."""
    deadline = time.monotonic() + req["timeout"]
    while True:
        done, status = os.waitpid(req["wait"], os.WNOHANG)
        if done:
            return {"returncode": os.waitstatus_to_exitcode(status)}
        if time.monotonic() >= deadline:
            return {"returncode": None}
        time.sleep(0.01)


def run(req: dict) -> dict:
    """Fork one run, wait for it (SIGKILL to its session past the timeout). Returns the reply."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = fork_run(req, out.fileno(), err.fileno())
    deadline, timed_out = time.monotonic() + req["timeout"], False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _, status = os.waitpid(pid, 0)
            timed_out = True
            break
        time.sleep(0.01)
    texts = []
    for f in (out, err):
        f.seek(0)
        texts.append(f.read().decode(errors="replace"))
        f.close()
    return {"returncode": os.waitstatus_to_exitcode(status), "stdout": texts[0], "stderr": texts[1],
            "timed_out": timed_out}


def serve() -> None:
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray output of this process stays out of the replies
    preload()
    for line in sys.stdin:
        req = json.loads(line)
        answer = start(req) if "start" in req else wait(req) if "wait" in req else run(req)
        reply.write(json.dumps(answer) + "\n")
        reply.flush()


if __name__ == "__main__":
    serve()
