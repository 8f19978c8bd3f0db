"""Entry point: `mpirun -np N python -m run_atari --env_name PongNoFrameskip-v4` (see --help), as
`python -m ppo1` and the `ppo1` command (ppo1/__main__.py)."""
import sys

if __name__ == "__main__":
    from ppo1.__main__ import main  # light: `import ppo1` loads nothing heavy

    sys.exit(main("run_atari"))
