"""Entry point: `mpirun -np N python -m run_atari --env_name PongNoFrameskip-v4` (see --help)."""
import os
import sys

if __name__ == "__main__":
    try:
        from ppo1.launch import HeldInterrupt

        held = HeldInterrupt().hold()  # Ctrl-C waits until every rank is past MPI_Init (see HeldInterrupt)
        from ppo1.cli import main

        sys.exit(main(held=held))
    except KeyboardInterrupt:  # Ctrl-C in the first milliseconds, before the hold: one line from rank 0
        from ppo1.launch import STARTING_LINE, launcher_rank  # no torch: the interrupt may have cut its import short

        if (launcher_rank() or 0) == 0:
            print(STARTING_LINE, file=sys.stderr, flush=True)
        # os._exit, not sys.exit: the interrupt may have cut an import of torch short, and the
        # interpreter's clean-up of a half-imported extension can crash (a rank died of SIGSEGV)
        sys.stdout.flush()
        os._exit(130)
