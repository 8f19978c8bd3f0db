"""Observations as named entries, from the env wrappers through the rollout and the update to the policies.

An env's observation is an `Obs`: a dict of named arrays that share their leading (batch) dimensions, indexed
and assigned row by row as one array would be. Its `ObsSpec` says what each entry is:

    image   uint8 (C, H, W): frames for a CNN (Atari's "image" (4, 84, 84); a Dict's image entries by their keys)
    codes   uint8 (C, H, W): an image whose values are codes, not intensities (a symbolic grid's object ids): read
            by a CNN as the numbers they are, not / 255
    vector  float32 (D,): numbers for an MLP or beside the CNN's features ("vector": a vector env's observation,
            or a Dict's other entries, Discrete / MultiDiscrete one-hot, ppo1.envs.spaces.to_vector)
    mask    bool (A,): the valid actions (ACTION_MASK: a Dict's `action_mask` entry or the env's
            `action_masks()`), one per logit of the policy head (MultiDiscrete: the choices of each dimension
            one after another, as sb3-contrib's MaskablePPO takes them)

The same class holds numpy arrays (envs, the rollout's buffers) and torch tensors (batches, the policy's input):
`map` turns one into the other.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

import numpy as np

IMAGE, VECTOR, MASK, CODES = "image", "vector", "mask", "codes"
ACTION_MASK = "action_mask"  # the entry of the valid actions (and the Dict key an env gives them in)
DTYPES = {IMAGE: np.uint8, VECTOR: np.float32, MASK: np.bool_, CODES: np.uint8}


@dataclasses.dataclass(frozen=True)
class Entry:
    """One named entry of an observation: its kind (image, codes, vector, mask) and its shape for one env."""

    name: str
    kind: str
    shape: tuple[int, ...]

    @property
    def dtype(self):
        return DTYPES[self.kind]


@dataclasses.dataclass(frozen=True)
class ObsSpec:
    """The entries of an env's observations, in order: images first, then the vector, then the mask."""

    entries: tuple[Entry, ...]

    @classmethod
    def of(cls, images: dict[str, tuple[int, ...]] | None = None, vector: int = 0, mask: int = 0,
           codes: frozenset[str] = frozenset()) -> "ObsSpec":
        """images {name: (C, H, W)} (those named in `codes` of the codes kind), a vector of `vector` numbers (0: none),
        a mask of `mask` actions (0: none)."""
        entries = [Entry(name, CODES if name in codes else IMAGE, tuple(int(n) for n in shape))
                   for name, shape in (images or {}).items()]
        if vector:
            entries.append(Entry(VECTOR, VECTOR, (int(vector),)))
        if mask:
            entries.append(Entry(ACTION_MASK, MASK, (int(mask),)))
        return cls(tuple(entries))

    @property
    def images(self) -> list[Entry]:
        """The entries a CNN reads: images and codes."""
        return [e for e in self.entries if e.kind in (IMAGE, CODES)]

    @property
    def vector_size(self) -> int:
        """The numbers of the vector entry (0: none)."""
        return next((e.shape[0] for e in self.entries if e.kind == VECTOR), 0)

    @property
    def mask_size(self) -> int:
        """The actions the mask entry covers (0: the env masks nothing)."""
        return next((e.shape[0] for e in self.entries if e.kind == MASK), 0)

    def zeros(self, *lead: int) -> "Obs":
        """An observation of zeros with leading dimensions `lead` (e.g. (T, k) for a rollout's buffer)."""
        return Obs({e.name: np.zeros((*lead, *e.shape), e.dtype) for e in self.entries})

    def nbytes(self) -> int:
        """The bytes of one observation (every entry)."""
        return sum(int(np.prod(e.shape)) * np.dtype(e.dtype).itemsize for e in self.entries)

    def to_list(self) -> list[list]:
        """As a checkpoint saves it: [[name, kind, [shape...]], ...]."""
        return [[e.name, e.kind, list(e.shape)] for e in self.entries]

    @classmethod
    def from_list(cls, value: Any) -> "ObsSpec | None":
        """What to_list wrote; None when `value` is not that (a corrupt or foreign record)."""
        if not isinstance(value, list) or not value:
            return None
        entries = []
        for item in value:
            if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and item[1] in DTYPES
                    and isinstance(item[2], list) and all(type(n) is int and n >= 1 for n in item[2])):
                return None
            entries.append(Entry(item[0], item[1], tuple(item[2])))
        return cls(tuple(entries))

    def describe(self) -> str:
        """In words, for messages: `image (4, 84, 84)`, `screen (4, 24, 24), vector (3,), action_mask (5,)`."""
        return ", ".join(f"{e.name} {e.shape}{' codes' if e.kind == CODES else ''}" for e in self.entries)


class Obs:
    """Named arrays (numpy or torch) with the same leading dimensions: `obs["image"]` is an entry; any other index
    (an int, a slice, an index array) takes those rows of every entry, and assigning an Obs to it writes them."""

    __slots__ = ("entries",)

    def __init__(self, entries: dict[str, Any]):
        self.entries = entries

    def __getitem__(self, index):
        if isinstance(index, str):
            return self.entries[index]
        return Obs({k: v[index] for k, v in self.entries.items()})

    def __setitem__(self, index, value: "Obs") -> None:
        for k, v in self.entries.items():
            v[index] = value.entries[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        """The rows (the first leading dimension)."""
        return len(next(iter(self.entries.values())))

    def get(self, name: str, default=None):
        return self.entries.get(name, default)

    def map(self, fn: Callable) -> "Obs":
        """An Obs of fn(entry) for every entry (e.g. torch.from_numpy, a transfer to a device)."""
        return Obs({k: fn(v) for k, v in self.entries.items()})

    def copy(self) -> "Obs":
        return self.map(lambda v: v.copy() if isinstance(v, np.ndarray) else v.clone())

    @property
    def device(self):
        """The device of torch entries."""
        return next(iter(self.entries.values())).device

    @staticmethod
    def stack(observations: list["Obs"]) -> "Obs":
        """Observations of one env each -> one Obs with a leading dimension over them (numpy)."""
        return Obs({k: np.stack([o.entries[k] for o in observations]) for k in observations[0].entries})

    def __repr__(self) -> str:
        return "Obs(" + ", ".join(f"{k}={tuple(v.shape)}" for k, v in self.entries.items()) + ")"
