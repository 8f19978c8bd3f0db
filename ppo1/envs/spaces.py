"""What a gymnasium observation space is to ppo1: images (is_image_space, has_images: what the `pixels` family
takes) or vectors (vector_size, to_vector: what the `vector` family takes, and a Dict's entries beside an image).
Both families and the family table read these; this module reads no family."""
from __future__ import annotations

import numpy as np

from ppo1.envs.base import EnvDataError, checked_obs


def is_image_space(space) -> bool:
    """Whether a gymnasium space holds images ppo1 can train on: a Box of uint8, (H, W) or (H, W, C)."""
    import gymnasium
    return (isinstance(space, gymnasium.spaces.Box) and space.dtype == np.uint8 and len(space.shape) in (2, 3)
            and min(space.shape) >= 1)


def has_images(space) -> bool:
    """Image observations: an image Box, or a Dict holding one."""
    import gymnasium
    return is_image_space(space) or (isinstance(space, gymnasium.spaces.Dict)
                                     and any(is_image_space(s) for s in space.spaces.values()))


VECTORS = "a 1-D Box, Discrete, MultiDiscrete, MultiBinary, or a Tuple or Dict of those"  # what the family takes


def vector_size(space) -> int | None:
    """How many float32 values an observation of `space` is as a vector (to_vector), or None for a space the vector
    family does not take (VECTORS): an image, a Box of more dimensions, Text, Graph, Sequence, an empty Tuple or
    Dict..."""
    import gymnasium
    spaces = gymnasium.spaces
    if isinstance(space, spaces.Box):
        return int(space.shape[0]) if len(space.shape) == 1 else None
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(space.nvec.sum())
    if isinstance(space, spaces.MultiBinary):
        return int(np.prod(space.shape))
    if isinstance(space, (spaces.Tuple, spaces.Dict)):
        parts = [vector_size(s) for s in (space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces)]
        return sum(parts) if parts and None not in parts else None
    return None


def to_vector(env_name: str, space, obs) -> np.ndarray:
    """An observation of `space` (one vector_size takes) as the float32 vector (D,) the MLP reads: see the module's
    docstring. EnvDataError naming the env and the entry when it does not fit its space: another shape, a
    Discrete or MultiDiscrete value that is not an integer in its range, a value that is not finite."""
    import gymnasium
    if isinstance(space, gymnasium.spaces.Box):  # the common case: the array as it is, no copy per entry
        return checked_obs(env_name, obs, space.shape, image=False).astype(np.float32, copy=False)
    out = np.zeros(vector_size(space), np.float32)
    _encode(env_name, space, obs, out, "an observation")
    return out


def _encode(env_name: str, space, obs, out: np.ndarray, what: str) -> None:
    """Write the vector of `obs`, an observation (or entry: `what`) of `space`, into `out` (its vector_size values),
    which holds zeros."""
    import gymnasium
    spaces = gymnasium.spaces
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        out[:] = checked_obs(env_name, obs, space.shape, image=False, what=what).ravel()
    elif isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        value = np.asarray(obs)
        shape = () if isinstance(space, spaces.Discrete) else space.shape
        if value.shape != shape or not np.issubdtype(value.dtype, np.integer):
            raise EnvDataError(f"{env_name} gave {what} {_short(obs)}, not an integer {'array ' if shape else ''}"
                               f"of its space {space}")
        index, n = (value - space.start).ravel(), np.ravel(space.n if shape == () else space.nvec)
        if ((index < 0) | (index >= n)).any():
            raise EnvDataError(f"{env_name} gave {what} {_short(obs)}, outside its space {space}")
        out[np.cumsum(n) - n + index] = 1.0  # the one-hot of each entry, one after another
    else:  # Tuple, Dict: their entries' vectors one after another
        keys = list(space.spaces) if isinstance(space, spaces.Dict) else range(len(space.spaces))
        try:
            entries = [obs[k] for k in keys]
        except (KeyError, IndexError, TypeError):
            raise EnvDataError(f"{env_name} gave {what} {_short(obs)}, which lacks entries of its space "
                               f"{space}") from None
        if isinstance(space, spaces.Tuple) and len(obs) != len(keys):
            raise EnvDataError(f"{env_name} gave {what} of {len(obs)} entries, its space {space} has {len(keys)}")
        start = 0
        for k, entry in zip(keys, entries):
            size = vector_size(space[k])
            _encode(env_name, space[k], entry, out[start:start + size], f"entry [{k!r}] of {what}")
            start += size


def _short(obs) -> str:
    """An observation in a message: its repr, cut to 80 characters."""
    text = repr(obs)
    return text if len(text) <= 80 else text[:77] + "..."


def has_vectors(space) -> bool:
    """Vector observations: a space the vector family takes (vector_size, VECTORS)."""
    return vector_size(space) is not None
