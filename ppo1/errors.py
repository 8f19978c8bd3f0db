"""ppo1's errors: PPO1Error, a fault the user can cause and the CLI says in one line, and RanksError, one that every
rank raises at the same point; and the one-line forms of any exception (first_line, error_line). Every module
imports them from here; the package re-exports the two errors for the Python API."""
from __future__ import annotations


class PPO1Error(Exception):
    """An error the user can cause (bad flag, unknown env, bad checkpoint).

    The CLI prints its message as one line and exits with status 2; the Python API raises it. `all_ranks`: every
    rank raises it at the same point (after a collective agreed on it), so rank 0 alone says the line and no rank
    aborts the job; an error of one rank only (False) is said by that rank, which ends the job.
    """

    all_ranks = False


class RanksError(PPO1Error):
    """A PPO1Error that every rank raises at the same point (all_ranks): the one way to end all ranks with one line."""

    all_ranks = True


def first_line(text, limit: int = 300) -> str:
    """The first line of `text` (of an exception: its message), stripped, at most `limit` characters."""
    lines = str(text).strip().splitlines()
    return (lines[0] if lines else "")[:limit]


def error_line(e: BaseException, limit: int = 300) -> str:
    """`e` in one line, for a one-line message: its type and the first line of its message (at most `limit`
    characters), or its type alone when the message is empty."""
    first = first_line(e, limit)
    return type(e).__name__ + (f": {first}" if first else "")
