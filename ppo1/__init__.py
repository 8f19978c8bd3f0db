"""ppo1: MPI-parallel PPO (Schulman et al., 2017) for Atari in PyTorch, a port of OpenAI baselines' ppo1.

    from ppo1 import Config, train, play      # the Python API (ppo1.api); see docs/api.md

`import ppo1` alone loads nothing heavy: Config, train and play are imported on first use.
"""

__version__ = "0.1.0"

__all__ = ["Config", "PPO1Error", "RanksError", "TrainResult", "play", "train"]


from ppo1.errors import PPO1Error, RanksError, error_line, first_line  # noqa: F401 (the API's names)


def __getattr__(name: str):
    if name == "Config":
        from ppo1.config import Config
        return Config
    if name in ("train", "play", "TrainResult"):
        from ppo1 import api
        return getattr(api, name)
    raise AttributeError(f"module 'ppo1' has no attribute {name!r}")
