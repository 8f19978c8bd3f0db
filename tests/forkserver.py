"""A process that has imported what `python -m run_atari` imports (torch, gymnasium, ale-py, cv2, ppo1) and
forks a fresh child for each run the tests ask for, so each run pays no interpreter start and no torch import.
Each child is a real process: it runs run_atari as `python -m run_atari ARGV` does (as __main__, from `cwd`),
with its own streams, session, exit status, atexit handlers and MPI_Finalize (MPI is never initialised here
before the fork).

Two kinds of run:
- one process: one JSON object per line on stdin, {"argv": [...], "cwd": "...", "timeout": s}; the reply on
  the stdout this process started with, {"returncode": n, "stdout": "...", "stderr": "...", "timed_out": b}.
- an MPI rank: `mpirun -np N python -S tests/rankstub.py SOCKET ARGV` starts N stubs; each connects to this
  process's Unix socket (--socket PATH) and sends {"argv", "cwd", "env", "launcher"} with its stdin, stdout,
  stderr and the MPI library's PMI_FD as file descriptors. The child becomes that rank: the stub's environment
  and descriptors (at their numbers), mpirun's PMI connection. The stub forwards the signals it gets to the
  child and exits with the child's status; a stub that dies (mpirun ended the job) takes its child with it.
"""
import atexit
import fcntl
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import tempfile
import time

# A rank's status goes to its stub once every rank of its job has ended, or this long after its own end.
# mpirun ends the job's other processes when one exits with an error and reports the first it saw: ranks
# that exit together (an error on every rank) must leave their stubs together, as they would leave mpirun.
TOGETHER_S = 0.25


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


def become_run_atari(argv: list[str], cwd: str) -> None:
    """In a forked child whose descriptors are in place: run `python -m run_atari ARGV` from cwd and exit
    with its status. Never returns."""
    code = 1
    try:
        os.setsid()
        os.chdir(cwd)
        sys.path[0] = cwd  # as `python -m` puts the working directory first
        sys.argv = ["run_atari", *argv]
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
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


def kill_group(pid: int) -> None:
    """SIGKILL a child's session (it may not have called setsid yet: then the child alone)."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Rank:
    def __init__(self, conn: socket.socket, launcher: int, size: int):
        self.conn, self.launcher, self.size = conn, launcher, size
        self.code, self.ended = None, None


class Server:
    def __init__(self, socket_path: str):
        self.reply = os.fdopen(os.dup(1), "w")
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray output of this process stays out of the replies
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(socket_path)  # stubs may connect from here on; they wait for the preload
        self.listener.listen(64)
        preload()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(sys.stdin, selectors.EVENT_READ, "stdin")
        self.wakeup, self.wakeup_w = os.pipe()  # a child's end wakes the loop at once
        os.set_blocking(self.wakeup, False)
        os.set_blocking(self.wakeup_w, False)
        signal.set_wakeup_fd(self.wakeup_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.sel.register(self.wakeup, selectors.EVENT_READ, "wakeup")
        self.single = None   # (pid, deadline, out, err) of the one-process run under way
        self.ranks: dict[int, Rank] = {}  # child pid -> its rank, until its stub has its status
        self.open = True

    def fork(self, setup) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                argv, cwd = setup()
            except BaseException:
                os._exit(1)
            become_run_atari(argv, cwd)
        return pid

    def close_sockets(self) -> None:
        """In a child: close what belongs to the server."""
        signal.set_wakeup_fd(-1)
        os.close(self.wakeup)
        os.close(self.wakeup_w)
        self.sel.close()
        self.listener.close()
        for rank in self.ranks.values():
            rank.conn.close()

    def start_single(self, line: str) -> None:
        req = json.loads(line)
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()

        def setup():
            self.close_sockets()
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            return req["argv"], req["cwd"]
        self.single = (self.fork(setup), time.monotonic() + req["timeout"], out, err)

    def start_rank(self, conn: socket.socket) -> None:
        data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 8)
        while not data.endswith(b"\n"):
            more = conn.recv(1 << 20)
            if not more:
                break
            data += more
        req = json.loads(data)

        def setup():
            self.close_sockets()
            conn.close()
            env = req["env"]
            targets = [0, 1, 2] + ([int(env["PMI_FD"])] if "PMI_FD" in env else [])
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for fd in fds]  # above every target
            for fd, target in zip(high, targets):
                os.dup2(fd, target)
            for fd in set(fds) | set(high):
                if fd not in targets:
                    os.close(fd)
            os.environ.clear()
            os.environ.update(env)
            return req["argv"], req["cwd"]
        pid = self.fork(setup)
        for fd in fds:
            os.close(fd)
        conn.sendall(f"{pid}\n".encode())
        self.ranks[pid] = Rank(conn, req["launcher"], int(req["env"].get("PMI_SIZE", 1)))
        self.sel.register(conn, selectors.EVENT_READ, pid)

    def stub_gone(self, pid: int) -> None:
        """A stub's connection ended before its status was sent: mpirun ended the job; so does its rank."""
        rank = self.ranks.pop(pid)
        self.sel.unregister(rank.conn)
        rank.conn.close()
        if rank.code is None:
            kill_group(pid)  # reaped below, as any child

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            code = os.waitstatus_to_exitcode(status)
            if self.single and pid == self.single[0]:
                self.finish_single(code, False)
            elif pid in self.ranks:
                self.ranks[pid].code, self.ranks[pid].ended = code, time.monotonic()
        now = time.monotonic()
        ended = {pid: rank for pid, rank in self.ranks.items() if rank.code is not None}
        for pid, rank in ended.items():
            job = [r for r in self.ranks.values() if r.launcher == rank.launcher]
            if now - rank.ended >= TOGETHER_S or (len(job) == rank.size and all(r.code is not None for r in job)):
                self.sel.unregister(rank.conn)
                try:
                    rank.conn.sendall(f"{rank.code}\n".encode())
                except OSError:
                    pass
                rank.conn.close()
        for pid in ended:
            if self.ranks[pid].conn.fileno() < 0:
                del self.ranks[pid]

    def finish_single(self, code: int, timed_out: bool) -> None:
        _pid, _deadline, out, err = self.single
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode(errors="replace"))
            f.close()
        self.single = None
        self.reply.write(json.dumps({"returncode": code, "stdout": texts[0], "stderr": texts[1],
                                     "timed_out": timed_out}) + "\n")
        self.reply.flush()

    def serve(self) -> None:
        while self.open or self.single or self.ranks:
            for key, _ in self.sel.select(timeout=0.02):
                if key.data == "wakeup":
                    os.read(self.wakeup, 4096)
                elif key.data == "accept":
                    self.start_rank(self.listener.accept()[0])
                elif key.data == "stdin":
                    line = sys.stdin.readline()
                    if line:
                        self.start_single(line)
                    else:
                        self.open = False
                        self.sel.unregister(sys.stdin)
                elif not key.fileobj.recv(1):  # a stub's connection: readable only when the stub is gone
                    self.stub_gone(key.data)
            self.reap()
            if self.single and time.monotonic() > self.single[1]:
                kill_group(self.single[0])
                _, status = os.waitpid(self.single[0], 0)
                self.finish_single(os.waitstatus_to_exitcode(status), True)


if __name__ == "__main__":
    Server(sys.argv[sys.argv.index("--socket") + 1]).serve()
