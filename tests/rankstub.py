"""What `mpirun` starts for each rank of a test run: hands the rank to the fork server (tests/forkserver.py,
listening on SOCKET) with this process's environment, working directory, stdin/stdout/stderr and PMI_FD, so
the rank pays no torch import; forwards the signals it gets to the rank; exits as the rank did (with its
signal, if one ended it). Usage: python -S tests/rankstub.py SOCKET ARGV..."""
import json
import os
import signal
import socket
import sys


def main() -> None:
    path, argv = sys.argv[1], sys.argv[2:]
    fds = [0, 1, 2] + ([int(os.environ["PMI_FD"])] if "PMI_FD" in os.environ else [])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    msg = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                      "launcher": os.getppid()}).encode() + b"\n"
    socket.send_fds(conn, [msg], fds)
    reader = conn.makefile("r")
    pid = int(reader.readline())
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    line = reader.readline()
    code = int(line) if line.strip() else 1
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main()
