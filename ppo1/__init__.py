"""ppo1: MPI-parallel PPO (Schulman et al., 2017) for Atari in PyTorch, a port of OpenAI baselines' ppo1.

    from ppo1 import Config, train, play      # the Python API (ppo1.api); see docs/api.md

`import ppo1` alone loads nothing heavy: Config, train and play are imported on first use.
"""

__version__ = "0.1.0"

__all__ = ["Config", "PPO1Error", "TrainResult", "play", "train"]


class PPO1Error(Exception):
    """An error the user can cause (bad flag, unknown env, bad checkpoint).

    The CLI prints its message as one line and exits with status 2; the Python API raises it.
    """


def first_line(text, limit: int = 300) -> str:
    """The first line of `text` (of an exception: its message), stripped, at most `limit` characters."""
    lines = str(text).strip().splitlines()
    return (lines[0] if lines else "")[:limit]


def error_line(e: BaseException, limit: int = 300) -> str:
    """`e` in one line, for a one-line message: its type and the first line of its message (at most `limit`
    characters), or its type alone when the message is empty."""
    first = first_line(e, limit)
    return type(e).__name__ + (f": {first}" if first else "")


def __getattr__(name: str):
    if name == "Config":
        from ppo1.config import Config
        return Config
    if name in ("train", "play", "TrainResult"):
        from ppo1 import api
        return getattr(api, name)
    raise AttributeError(f"module 'ppo1' has no attribute {name!r}")
