"""`python tests/multihost/rank.py train ARGS`, one process per rank under the multi-host mpiexec.

It prints one JSON line per rank (probe: rank, hostname, the shared-memory communicator's size and the torch
threads ppo1 would take on that host), then runs run_atari ARGS, and on every parameter sync check appends this
rank's parameter digest to digests.rank<r> on this host's disk ($PPO1_MH_DISK), so a test can compare the hosts'
parameters; the watchdog's line also goes to watchdog.rank<r> there.
"""
import importlib
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from ppo1 import cli, distributed, watchdog  # noqa: E402

train_module = importlib.import_module("ppo1.trainer")


def probe() -> int:
    from ppo1.config import Config
    from ppo1.device import configure_threads
    comm = distributed.Comm.create()
    threads = configure_threads(Config(), comm)
    print(json.dumps({"rank": comm.rank, "host": socket.gethostname(), "local_size": comm.local_size,
                      "threads": threads, "cpus": os.cpu_count()}), flush=True)
    return 0


def train(args: list[str]) -> int:
    check = distributed.Comm.check_synced

    def recording_check(self, module):
        with open(os.path.join(os.environ["PPO1_MH_DISK"], f"digests.rank{self.rank}"), "a") as f:
            f.write(distributed.parameter_digest(module) + "\n")
        return check(self, module)

    distributed.Comm.check_synced = recording_check

    class RecordingWatchdog(watchdog.Watchdog):
        """Also appends its line to watchdog.rank<r> on this host's disk: the stderr of a rank on a
        host cut off from the launcher never reaches the launcher."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            stderr = self._write

            def tee(line: str) -> None:
                with open(os.path.join(os.environ["PPO1_MH_DISK"], f"watchdog.rank{self.rank}"), "a") as f:
                    f.write(line)
                stderr(line)
            self._write = tee

    train_module.Watchdog = RecordingWatchdog
    probe()
    return cli.main(args)


if __name__ == "__main__":
    assert sys.argv[1] == "train", sys.argv
    sys.exit(train(sys.argv[2:]))
