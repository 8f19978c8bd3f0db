"""Action masks: the actions an env allows at each step, as sb3-contrib's MaskablePPO reads them.

An env masks its actions with a Dict observation entry named `action_mask`, or with an `action_masks()` method
(found through its wrappers). Either gives one value per choice, nonzero where the choice is valid: n values for
Discrete(n), sum(nvec) for MultiDiscrete(nvec) (each dimension's choices one after another), 2 per dimension for
MultiBinary. The mask travels with the observation (its ACTION_MASK entry, ppo1.observations), so the rollout,
the update's replay of the ratio, play, movie and videos all read the mask of the step they act on.
"""
from __future__ import annotations

import numpy as np

from ppo1.errors import PPO1Error
from ppo1.actions import action_nvec, head_size
from ppo1.envs.base import EnvDataError
from ppo1.observations import ACTION_MASK


def without_mask(space):
    """The observation space less its `action_mask` entry (a Dict holding one), else `space` itself."""
    import gymnasium
    if isinstance(space, gymnasium.spaces.Dict) and ACTION_MASK in space.spaces:
        return gymnasium.spaces.Dict({k: s for k, s in space.spaces.items() if k != ACTION_MASK})
    return space


def check_mask_space(env_name: str, space, actions) -> None:
    """PPO1Error in one line unless an `action_mask` entry's declared space holds one value per choice of the
    actions (a Box, MultiBinary or MultiDiscrete of head_size(actions) values)."""
    import gymnasium
    spaces = gymnasium.spaces
    size = head_size(actions)
    if not isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)):
        raise PPO1Error(f"--env_name={env_name!r} has an {ACTION_MASK!r} entry of {space}: a mask is a Box or "
                        f"MultiBinary of {size} values, one per choice of its actions {actions}")
    if int(np.prod(space.shape)) != size:
        raise PPO1Error(f"--env_name={env_name!r} has an {ACTION_MASK!r} entry of {space}, "
                        f"{int(np.prod(space.shape))} values: its actions {actions} need {size}, one per choice")


def numbers(n: int) -> str:
    """`1 number`, `30 numbers`: a vector's size in words, for the start line."""
    return f"{n} number{'' if n == 1 else 's'}"


def mask_words(masks: "ActionMasks | None") -> list[str]:
    """What the policy reads of an env's mask, for the start line (VecEnv.reads): [] without one."""
    return [] if masks is None else [f"{ACTION_MASK} ({masks.size},) from {masks.where}"]


class ActionMasks:
    """Reads the valid actions of one env after each reset and step (`read`), checked: (size,) bool."""

    def __init__(self, env_name: str, gym_env, size: int, nvec: tuple[int, ...] | None, method=None):
        self.env_name, self.gym_env, self.size, self.method = env_name, gym_env, size, method
        self.nvec = nvec or (size,)

    @classmethod
    def of(cls, env_name: str, gym_env) -> "ActionMasks | None":
        """The masks of `gym_env`: from its `action_mask` entry, else its `action_masks()` method; None when it
        has neither. PPO1Error when it masks actions that are not Discrete, MultiDiscrete or MultiBinary."""
        import gymnasium
        space = gym_env.observation_space
        method = None
        if not (isinstance(space, gymnasium.spaces.Dict) and ACTION_MASK in space.spaces):
            try:
                method = gym_env.get_wrapper_attr("action_masks")
            except AttributeError:
                return None
        actions = gym_env.action_space
        nvec = action_nvec(actions)
        if nvec is None and not isinstance(actions, gymnasium.spaces.Discrete):
            source = "an action_masks() method" if method else "an 'action_mask' entry"
            raise PPO1Error(f"--env_name={env_name!r} has {source} but actions {actions}: ppo1 masks Discrete, "
                            "MultiDiscrete and MultiBinary actions")
        if method is None:
            check_mask_space(env_name, space.spaces[ACTION_MASK], actions)
        return cls(env_name, gym_env, head_size(actions), nvec, method)

    @property
    def where(self) -> str:
        """Where the mask comes from, in words: `action_masks()` or `its 'action_mask' entry`."""
        return "action_masks()" if self.method else f"its {ACTION_MASK!r} entry"

    def read(self, obs) -> np.ndarray:
        """The mask of the observation `obs` the env just gave (its entry, or the method's answer now), as (size,)
        bool. EnvDataError when it has another number of values, or leaves an action dimension no valid choice."""
        where = self.where
        try:
            raw = self.method() if self.method else obs[ACTION_MASK]
        except Exception as e:  # noqa: BLE001 -- the env's own method
            raise EnvDataError(f"{self.env_name}'s action_masks() raised {type(e).__name__}: {e}") from None
        mask = np.asarray(raw)
        if mask.size != self.size or not (mask.dtype == np.bool_ or np.issubdtype(mask.dtype, np.number)):
            raise EnvDataError(f"{self.env_name} gave an action mask ({where}) of shape {mask.shape} and dtype "
                               f"{mask.dtype}: ppo1 needs {self.size} values, one per choice of its actions")
        mask = mask.reshape(self.size) != 0
        ends = np.cumsum(self.nvec)
        for d, (start, end) in enumerate(zip(ends - self.nvec, ends)):
            if not mask[start:end].any():
                raise EnvDataError(f"{self.env_name} gave an action mask ({where}) with no valid action"
                                   + (f" in dimension {d}" if len(self.nvec) > 1 else ""))
        return mask
