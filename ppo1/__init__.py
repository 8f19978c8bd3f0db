"""ppo1: MPI-parallel PPO (Schulman et al., 2017) for Atari in PyTorch, a port of OpenAI baselines' ppo1."""

__version__ = "0.1.0"


class PPO1Error(Exception):
    """An error the user can cause (bad flag, unknown env, bad checkpoint).

    The CLI prints its message as one line and exits with status 2.
    """
