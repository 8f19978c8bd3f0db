"""Training across two simulated hosts (network namespaces, own hostnames and disks, one veth link),
started by MPICH's mpiexec with an ssh-like launcher, the MPI data path forced over TCP; then the link
is cut mid-training and the watchdog must end every process on both hosts.

Runs as root where network namespaces can be made (skipped with the reason otherwise). By hand:
`sudo .venv/bin/python -m pytest -q tests/test_multihost.py` or `sudo .venv/bin/python tests/multihost/hosts.py`.
"""
import json
import os
import re
import sys
import time

import pytest

from multihost.hosts import Hosts, mpiexec, unavailable
from ppo1 import checkpoint, runfiles
from ppo1.device import cpu_count
from ppo1.watchdog import EXIT_CODE

HERE = os.path.dirname(os.path.abspath(__file__))
RANK = [sys.executable, os.path.join(HERE, "multihost", "rank.py")]
LIMIT = 12  # --watchdog_timeout of the run whose link is cut (above a loaded machine's iteration time)
TRAIN = ["--env_steps", "100000", "--envs_per_rank", "1", "--timesteps_per_actorbatch", "64",
         "--optim_batchsize", "32", "--num_threads", "1", "--save_interval", "1", "--sync_check_interval", "1",
         "--model_name", "mh"]

_why = unavailable() or (None if mpiexec() else "needs MPICH's hydra mpiexec (the mpich wheel)")
pytestmark = pytest.mark.skipif(_why is not None, reason=f"multi-host test: {_why}")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """Two hosts, removed (namespaces, link, every process in them) however the tests end."""
    h = Hosts(str(tmp_path_factory.mktemp("multihost")))
    try:
        h.up()
        yield h
    finally:
        h.down()


def run(h: Hosts, args: list[str], name: str, timeout: float = 240) -> tuple[int, str, str]:
    p = h.popen(args, name)
    try:
        rc = p.wait(timeout)
    finally:
        if p.poll() is None:
            p.kill()
    return rc, h.read(name, "out"), h.read(name, "err")


def lines(path: str) -> list[str]:
    with open(path) as f:
        return f.read().split()


def test_ranks_on_two_hosts_take_their_hosts_cores_keep_parameters_identical_and_only_rank_0_writes(hosts):
    rc, out, err = run(hosts, [*RANK, "train", *TRAIN, "--checkpoint_dir", hosts.disk, "--stop_after_iterations",
                               "2"], "train")
    assert rc == 0, err
    # each rank's probe line (rank.py): one JSON object per rank; mpiexec may forward two ranks' lines without a
    # newline between them
    probes = [json.loads(m) for m in re.findall(r"\{[^{}]*\}", out) if '"local_size"' in m]
    ranks = sorted(probes, key=lambda r: r["rank"])
    assert [(r["rank"], r["host"]) for r in ranks] == [(0, "ppo1-host1"), (1, "ppo1-host2")]
    assert all(r["local_size"] == 1 for r in ranks)                   # alone on its node
    assert all(r["threads"] == max(1, cpu_count()) for r in ranks)    # so it takes the node's cores
    assert "stopped after 2 iterations" in out
    d1, d2 = lines(f"{hosts.disk}.host1/digests.rank0"), lines(f"{hosts.disk}.host2/digests.rank1")
    assert len(d1) == 3 and d1 == d2            # after the broadcast and after each iteration: bit-identical
    assert len(set(d1)) == 3                    # and the updates changed them
    assert sorted(os.listdir(f"{hosts.disk}.host2/mh")) == ["episodes.rank1.csv"]
    written = set(os.listdir(f"{hosts.disk}.host1/mh"))
    assert {"ckpt-00000001.pt", "ckpt-00000002.pt", "latest.pt", "config.json", "progress.csv",
            "episodes.rank0.csv"} <= written and "episodes.rank1.csv" not in written


def test_resume_then_a_cut_link_ends_every_process_on_every_host_by_the_watchdog(hosts):
    before = lines(f"{hosts.disk}.host2/digests.rank1")
    p = hosts.popen([*RANK, "train", *TRAIN, "--checkpoint_dir", hosts.disk, "--watchdog_timeout", str(LIMIT)], "cut")
    try:
        deadline = time.monotonic() + 240
        while len(lines(f"{hosts.disk}.host2/digests.rank1")) < len(before) + 3:  # 2 iterations after resume
            assert p.poll() is None and time.monotonic() < deadline, hosts.read("cut", "err")
            time.sleep(0.1)
        hosts.set_link(False)
        cut = time.monotonic()
        at_cut = len(lines(f"{hosts.disk}.host2/digests.rank1"))
        while p.poll() is None or hosts.pids():
            assert time.monotonic() - cut < 300, f"still running: {hosts.pids()}"
            time.sleep(0.1)
        gone = time.monotonic() - cut
    finally:
        if p.poll() is None:
            p.kill()
    out, err = hosts.read("cut", "out"), hosts.read("cut", "err")
    print(f"\nmulti-host: every process on both hosts gone {gone:.1f} s after the cut (limit {LIMIT} s), "
          f"mpiexec exit status {p.returncode}")
    # resumed where the first run stopped, with identical parameters on both hosts
    assert "resuming from" in out and "(iteration 2, 256 steps)" in out
    d1, d2 = lines(f"{hosts.disk}.host1/digests.rank0"), lines(f"{hosts.disk}.host2/digests.rank1")
    assert d1[len(before)] == before[-1] and d2[:len(d1)] == d1[:len(d2)]
    # the data path really was the link: no iteration finished after the cut (the digest is written just
    # before the sync check's allgather, so one more line may appear)
    assert len(lines(f"{hosts.disk}.host2/digests.rank1")) <= at_cut + 1
    # the watchdog ended every process (its exit status and its line, below), not a link error or a timeout
    assert p.returncode == EXIT_CODE, err
    line = [s for s in err.splitlines() if "ppo1: watchdog: rank 0 on host ppo1-host1" in s]
    assert len(line) == 1 and "no iteration finished" in line[0] and "waiting in" in line[0], err
    # the cut-off rank's stderr cannot reach the launcher any more: its line is on its own host's disk
    with open(f"{hosts.disk}.host2/watchdog.rank1") as f:
        assert f.read().startswith("ppo1: watchdog: rank 1 on host ppo1-host2: no iteration finished")
    # the checkpoint of iteration 3 is on disk: rank 1 wrote iteration 4's digest, so rank 0 had joined
    # iteration 4's gradient allreduce, which it reaches only after saving iteration 3. Iteration 4's own
    # checkpoint may be lost: the cut can fall between that digest and the gather before its save.
    state, path, problems = runfiles.load_newest(f"{hosts.disk}.host1/mh")
    assert state is not None and not problems and state.iteration >= 3, problems
    checkpoint.load(os.path.join(f"{hosts.disk}.host1/mh", runfiles.LATEST))
