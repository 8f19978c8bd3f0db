"""Entry point: `mpirun -np N python -m run_atari --env_name PongNoFrameskip-v4` (see --help)."""
import os
import sys

if __name__ == "__main__":
    try:
        from ppo1.launch import HeldInterrupt

        held = HeldInterrupt().hold()  # Ctrl-C waits until every rank is past MPI_Init (see HeldInterrupt)
        from ppo1.cli import main

        code = main(held=held)
        from ppo1.distributed import flush_console

        flush_console()  # before MPI_Finalize (mpi4py's atexit), which Python runs before its own flush
        sys.exit(code)
    except KeyboardInterrupt:  # Ctrl-C before the hold (while ppo1.launch loads): one line from rank 0
        from ppo1.launch import say_interrupted_while_starting

        say_interrupted_while_starting()
        sys.stdout.flush()
        os._exit(130)  # as HeldInterrupt's second Ctrl-C: no clean-up of a start that was cut short
