"""A small gymnasium env with image observations, for the tests of `--env_name module:callable` and
`module:EnvId`: fast, deterministic by seed, and learnable in a few thousand steps.

A size x size RGB image (uint8) on an 8 x 8 grid of cells: the agent is a gray cell, the goal a bright white
one. Discrete(4) actions move the agent up, down, left or right (walls stop it); reaching the goal pays +1
and terminates the episode; after `max_steps` steps the episode is truncated (a time limit, not a death).

    make_env(size=32, max_steps=50, multibinary=False, render_mode=None)   the factory (MultiBinary(4): argmax)
    make_dict_env(size=32, ...)                                            its image in a Dict, beside a vector
    make_multidiscrete_env(size=32, ...)                                   MultiDiscrete([4, 2]): (move, go)
    make_tuple_env(size=32, ...)                                           Tuple actions (not trained by ppo1)
    make_counted_env(log, size=32, ...)                                     make_env, counting its makes in a file
    PixelSquare-v0                                                          the id registered on import
"""
from __future__ import annotations

import gymnasium
import numpy as np

GRID = 8
ENV_ID = "PixelSquare-v0"
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))  # up, down, left, right


class PixelSquare(gymnasium.Env):
    """Move the gray square onto the white one; see the module docstring."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, size: int = 32, max_steps: int = 50, multibinary: bool = False,
                 render_mode: str | None = None):
        if size < GRID:
            raise ValueError(f"size must be at least {GRID}, not {size}")
        self.size, self.max_steps, self.render_mode = size, max_steps, render_mode
        self.observation_space = gymnasium.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.action_space = gymnasium.spaces.MultiBinary(4) if multibinary else gymnasium.spaces.Discrete(4)
        self.agent = self.goal = (0, 0)
        self.steps = 0

    def _image(self) -> np.ndarray:
        image = np.zeros((self.size, self.size, 3), np.uint8)
        cell = self.size // GRID
        for (r, c), value in ((self.goal, 255), (self.agent, 100)):
            image[r * cell:(r + 1) * cell, c * cell:(c + 1) * cell] = value
        return image

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        cells = self.np_random.choice(GRID * GRID, 2, replace=False)
        self.agent, self.goal = divmod(int(cells[0]), GRID), divmod(int(cells[1]), GRID)
        self.steps = 0
        return self._image(), {}

    def step(self, action):
        dr, dc = MOVES[int(np.argmax(action)) if np.ndim(action) else int(action)]
        self.agent = (min(max(self.agent[0] + dr, 0), GRID - 1), min(max(self.agent[1] + dc, 0), GRID - 1))
        self.steps += 1
        reached = self.agent == self.goal
        return self._image(), float(reached), reached, not reached and self.steps >= self.max_steps, {}

    def render(self):
        return self._image() if self.render_mode == "rgb_array" else None


def make_env(size: int = 32, **kwargs) -> PixelSquare:
    """The factory of `--env_name tests.pixelenv:make_env --env_kwargs '{"size": 24}'`."""
    return PixelSquare(size=size, **kwargs)


def make_counted_env(log: str, size: int = 32, **kwargs) -> PixelSquare:
    """make_env that appends a line to the file `log` each time an env is made (how often a run makes its envs)."""
    with open(log, "a") as f:
        f.write(f"made in {__import__('os').getpid()}\n")
    return PixelSquare(size=size, **kwargs)


class WithSteps(gymnasium.ObservationWrapper):
    """PixelSquare's image beside a vector entry, as a Dict (ViZDoom's screen and gamevariables)."""

    def __init__(self, env: PixelSquare):
        super().__init__(env)
        self.observation_space = gymnasium.spaces.Dict(
            {"steps": gymnasium.spaces.Box(0, np.inf, (1,), np.float32), "screen": env.observation_space})

    def observation(self, image):
        return {"steps": np.array([self.env.unwrapped.steps], np.float32), "screen": image}


class MultiDiscreteSquare(PixelSquare):
    """PixelSquare with MultiDiscrete([4, 2]) actions (direction, go): the agent moves only where go is 1."""

    def __init__(self, size: int = 32, **kwargs):
        super().__init__(size=size, **kwargs)
        self.action_space = gymnasium.spaces.MultiDiscrete([4, 2])

    def step(self, action):
        direction, go = (int(a) for a in action)
        if go:
            return super().step(direction)
        self.steps += 1
        return self._image(), 0.0, False, self.steps >= self.max_steps, {}


def make_multidiscrete_env(size: int = 32, **kwargs) -> MultiDiscreteSquare:
    """The factory of a MultiDiscrete-action env: MultiDiscrete([4, 2]), a direction and whether to move."""
    return MultiDiscreteSquare(size=size, **kwargs)


def make_dict_env(size: int = 32, **kwargs) -> WithSteps:
    """The factory of a Dict-observation env: {"steps": (1,) float32, "screen": the image}."""
    return WithSteps(PixelSquare(size=size, **kwargs))


def make_tuple_env(size: int = 32, **kwargs) -> PixelSquare:
    """PixelSquare with Tuple actions, a space ppo1 does not train."""
    env = PixelSquare(size=size, **kwargs)
    env.action_space = gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(4), gymnasium.spaces.Discrete(2)))
    return env


def not_an_env(**kwargs):
    """A factory that returns something other than a gymnasium Env."""
    return [1, 2, 3]


NOT_CALLABLE = 42

if ENV_ID not in gymnasium.registry:  # imported as tests.pixelenv and as pixelenv: register once
    gymnasium.register(ENV_ID, entry_point=PixelSquare, kwargs={"size": 24, "max_steps": 20})
