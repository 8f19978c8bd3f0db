"""Run ppo1's CLI with files limited to 2 MB (RLIMIT_FSIZE), set after MPI has started: a real failed write."""
import resource
import signal
import sys

from ppo1 import cli
from ppo1.distributed import Comm

if __name__ == "__main__":
    Comm.create()                                                        # MPI's own files first
    resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, 2_000_000))   # a checkpoint is ~8 MB
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)                       # a failed write, not a kill
    sys.exit(cli.main(sys.argv[1:]))
