"""Two simulated hosts on one machine, for running ppo1 under a real multi-host `mpiexec`.

Each host is a network namespace with its own hostname (ppo1-host1, ppo1-host2) and, optionally, its
own disk at one path; a veth pair joins them (10.77.0.1 <-> 10.77.0.2, an interface named `mh0` on
both sides). MPICH's `mpiexec -launcher ssh -launcher-exec tests/multihost/launch.sh` starts the
remote rank on host 2; the MPI data path is forced over TCP (UCX_TLS=tcp,self), so cutting the link
really cuts the job. Needs root (network namespaces) and MPICH's hydra mpiexec.

Rerun by hand (as root, from the repository root):

    .venv/bin/python tests/multihost/hosts.py              # 2 hosts, a few tiny iterations of Pong
    .venv/bin/python tests/multihost/hosts.py -- --env_steps 2048 ...   # other run_atari flags
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SUBNET = "10.77.0"
IFACE = "mh0"   # the link's name inside each namespace (namespace-local, so it never clashes)

# MPICH (ch4:ucx from the mpich wheel) sees both namespaces on one machine and would move data through
# shared memory; TCP only, over the link, or the test tests nothing.
TCP_ONLY = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": IFACE, "MPIR_CVAR_CH4_NETMOD": "ucx",
            "FI_PROVIDER": "tcp", "FI_TCP_IFACE": IFACE}


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def unavailable() -> str | None:
    """Why simulated hosts cannot be made here (None when they can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root to create network namespaces"
    for tool in ("ip", "unshare", "mount", "hostname"):
        if shutil.which(tool) is None:
            return f"needs the `{tool}` command"
    name = f"p1mhprobe{os.getpid() % 100000}"
    r = _ip("netns", "add", name, check=False)
    if r.returncode != 0:
        return f"cannot create a network namespace: {r.stderr.strip()}"
    try:
        r = _ip("netns", "exec", name, "unshare", "--uts", "--mount", "true", check=False)
    finally:
        _ip("netns", "del", name, check=False)
    if r.returncode != 0:
        return f"cannot make a host with its own hostname and mounts: {r.stderr.strip()}"
    return None


def mpiexec() -> str | None:
    """MPICH's hydra mpiexec next to this Python (the mpich wheel), else on PATH (None if neither)."""
    for exe in (os.path.join(os.path.dirname(sys.executable), "mpiexec"), shutil.which("mpiexec")):
        if exe and os.path.exists(exe):
            out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
            if "HYDRA" in out:
                return exe
    return None


class Hosts:
    """Context manager: `with Hosts() as h:` makes the two hosts; leaving it (also on an error) removes
    them and ends every process still inside them. `h.disk` is a path that is a different directory
    on each host (DIR.host1, DIR.host2)."""

    def __init__(self, workdir: str | None = None):
        self.prefix = f"p1mh{os.getpid() % 100000}"   # namespaces <prefix>h1, <prefix>h2
        self.workdir = workdir or tempfile.mkdtemp(prefix="ppo1-multihost-")
        self.disk = os.path.join(self.workdir, "disk")
        self.hostfile = os.path.join(self.workdir, "hostfile")
        self.namespaces = [f"{self.prefix}h1", f"{self.prefix}h2"]

    def __enter__(self) -> "Hosts":
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        for ns in self.namespaces:
            _ip("netns", "add", ns)
        a, b = f"{self.prefix}va", f"{self.prefix}vb"
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        for n, (ns, dev) in enumerate(zip(self.namespaces, (a, b)), start=1):
            _ip("link", "set", dev, "netns", ns)
            _ip("-n", ns, "link", "set", dev, "name", IFACE)
            _ip("-n", ns, "addr", "add", f"{SUBNET}.{n}/24", "dev", IFACE)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", IFACE, "up")
        with open(self.hostfile, "w") as f:
            f.write(f"{SUBNET}.1:1\n{SUBNET}.2:1\n")

    def pids(self) -> list[int]:
        """Every process inside the hosts' namespaces."""
        found = []
        for ns in self.namespaces:
            r = _ip("netns", "pids", ns, check=False)
            found += [int(p) for p in r.stdout.split()]
        return found

    def down(self) -> None:
        """End every process in the hosts (SIGKILL) and delete the namespaces (and so the link)."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        for ns in self.namespaces:
            _ip("netns", "del", ns, check=False)

    def set_link(self, up: bool) -> None:
        """Bring the link between the hosts up or down (down on both ends: a cut cable)."""
        for ns in self.namespaces:
            _ip("-n", ns, "link", "set", IFACE, "up" if up else "down")

    def env(self) -> dict:
        """Environment for host.sh / launch.sh and a TCP-only MPI data path."""
        return {"PPO1_MH_PREFIX": self.prefix, "PPO1_MH_DISK": self.disk, **TCP_ONLY}

    def command(self, args: list[str], np_: int = 2) -> list[str]:
        """`host.sh 1 mpiexec ... -n np_ ARGS`: an mpiexec started on host 1, ranks spread over both hosts."""
        exe = mpiexec()
        if exe is None:
            raise RuntimeError("needs MPICH's hydra mpiexec (pip install mpich)")
        return [os.path.join(HERE, "host.sh"), "1", exe, "-launcher", "ssh",
                "-launcher-exec", os.path.join(HERE, "launch.sh"), "-f", self.hostfile, "-iface", IFACE,
                "-n", str(np_), *args]

    def popen(self, args: list[str], name: str, np_: int = 2) -> subprocess.Popen:
        """Start `args` on np_ ranks over the hosts; stdout and stderr go to WORKDIR/NAME.out and .err."""
        env = dict(os.environ, **self.env(), PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with open(self.output(name, "out"), "w") as out, open(self.output(name, "err"), "w") as err:
            return subprocess.Popen(self.command(args, np_), env=env, cwd=REPO, text=True,
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err)

    def output(self, name: str, stream: str) -> str:
        return os.path.join(self.workdir, f"{name}.{stream}")

    def read(self, name: str, stream: str) -> str:
        with open(self.output(name, stream)) as f:
            return f.read()


def main(argv: list[str]) -> int:
    """Make the hosts, run a tiny 2-host training (run_atari flags from argv after `--`), remove them."""
    why = unavailable()
    if why:
        print(f"multihost: {why}", file=sys.stderr)
        return 2
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    with Hosts() as h:
        args = [sys.executable, "-m", "run_atari", "--env_steps", "512", "--envs_per_rank", "2",
                "--timesteps_per_actorbatch", "64", "--optim_batchsize", "32", "--save_interval", "1",
                "--num_threads", "1",  # the simulated hosts share this machine's cores
                "--checkpoint_dir", h.disk, "--model_name", "mh", *extra]
        print("multihost:", " ".join(h.command(args)), flush=True)
        p = h.popen(args, "run")
        p.wait()
        print(h.read("run", "out"), end="")
        print(h.read("run", "err"), end="", file=sys.stderr)
        for n in (1, 2):
            d = f"{h.disk}.host{n}"
            files = sorted(os.listdir(os.path.join(d, "mh"))) if os.path.isdir(os.path.join(d, "mh")) else []
            print(f"multihost: ppo1-host{n} wrote {files}")
        return p.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
