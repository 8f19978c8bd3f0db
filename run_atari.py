"""Entry point: `mpirun -np N python -m run_atari --env_name PongNoFrameskip-v4` (see --help)."""
import os
import sys

if __name__ == "__main__":
    try:
        from ppo1.cli import main

        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C while starting (imports, MPI): one line from rank 0, no traceback
        if os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")) == "0":
            print("ppo1: interrupted while starting; nothing was written", file=sys.stderr, flush=True)
        sys.exit(130)
