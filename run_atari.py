"""Entry point: `mpirun -np N python -m run_atari --env_name PongNoFrameskip-v4` (see --help)."""
import sys

from ppo1.cli import main

if __name__ == "__main__":
    sys.exit(main())
