"""What `--env_name` names, and how to build it: a gymnasium id, `module:EnvId` or `package.module:callable`.

    CartPole-v1                      a registered gymnasium id
    minigrid:MiniGrid-Empty-5x5-v0   `module` is imported first (packages that register their ids on import,
                                     gymnasium's own convention), then the id is made
    mypackage.games:make_env         a factory returning a gymnasium Env, called with --env_kwargs

`module:EnvId` and `module:callable` are told apart by what the name after the colon is once the module is
imported: a registered id, else an attribute of the module. (`procgen:<game>` is Procgen's, ppo1.envs, and
never comes here.) Every failure is a PPO1Error of one line naming its cause, so the CLI says it on every rank.

A registered id's entry point may tell the family of its envs without making one (EnvRef.told_family,
ENTRY_POINT_FAMILIES); a factory's envs, and those of any other entry point, are made to tell it (ppo1.envs.env_family).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import os
from typing import Any, Callable

from ppo1.errors import PPO1Error, error_line, first_line
from ppo1.envs.base import env_spec, load_gymnasium
from ppo1.envs.children import owned_temp_dir


@dataclasses.dataclass(frozen=True)
class Package:
    """A package whose gymnasium ids register when one of its modules is imported, so that its ids can be
    named plainly (`--env_name VizdoomBasic-v1`): the ids' prefix, the module, the pip extra of ppo1 that
    installs it, its flag defaults for the `pixels` family, the keyword arguments each env is made with and its
    default preset."""

    prefix: str
    module: str
    extra: str
    defaults: dict
    make_kwargs: Callable[[], dict] | None = None  # keyword arguments of every make, under the user's
    preset: str = ""  # its default --preset ("" = the family's)
    factories: tuple[str, ...] = ()  # `--env_name module:callable` factories whose envs take its defaults


def vizdoom_kwargs() -> dict:
    """ViZDoom writes its settings file into the working directory unless told where, and two processes
    creating it at once can crash: each env gets its own, in a temporary directory that goes when the process
    ends, however it ends (ppo1.envs.children.owned_temp_dir). It also makes `./_vizdoom/`, and one of two
    processes that race to make it crashes: it is made here first."""
    os.makedirs("_vizdoom", exist_ok=True)
    return {"doom_config_path": f"{owned_temp_dir('vizdoom')}/vizdoom.ini"}


PACKAGES = (
    # ViZDoom's gymnasium wrapper: Dict(screen, gamevariables) observations; 4 tics per action as in the
    # published PPO setups (lkiel/rl-doom, sample-factory). Its timeout sets terminated and truncated, and
    # its last screen is blank, so it stays terminal (as in SB3): bootstrapping from the value of a blank
    # screen, which no update ever sees, made the value loss diverge (0.5 to 1e9 in 100k steps of Basic).
    Package("Vizdoom", "vizdoom.gymnasium_wrapper", "vizdoom", {"frame_skip": 4}, make_kwargs=vizdoom_kwargs,
            preset="vizdoom"),
    # stable-retro's games (a factory, no registered ids): each action held 4 frames, as its own PPO example.
    Package("", "stable_retro", "retro", {"frame_skip": 4}, factories=("stable_retro:make", "retro:make")),
)


# The pip extra of ppo1 that installs a module an env may need (named in the one line of a failed import).
MODULE_EXTRAS = {"vizdoom": "vizdoom", "stable_retro": "retro", "retro": "retro", "pygba": "gba", "mgba": "gba",
                 "procgen_gym": "procgen"}


# Entry points whose envs' observations are known without making one, each with the family that takes them (its
# name in ppo1.envs.families), the first that matches: gymnasium's own (CarRacing's images; the vectors and
# discrete values of classic control, toy text, MuJoCo and Box2D's other envs) and ViZDoom's ids (a Dict holding its
# screen). Their keyword arguments change no observation space.
ENTRY_POINT_FAMILIES = (
    ("gymnasium.envs.box2d.car_racing:", "pixels"),
    ("gymnasium.envs.box2d.", "vector"),
    ("gymnasium.envs.classic_control.", "vector"),
    ("gymnasium.envs.toy_text.", "vector"),
    ("gymnasium.envs.mujoco.", "vector"),
    ("vizdoom.gymnasium_wrapper.", "pixels"),
)


def missing_extra(error: BaseException) -> str | None:
    """The extra to install for an import that failed because a module of MODULE_EXTRAS is missing, else None."""
    name = getattr(error, "name", None) if isinstance(error, ModuleNotFoundError) else None
    return MODULE_EXTRAS.get((name or "").split(".")[0])


def package_of(gym_id: str | None, packages: tuple[Package, ...] = PACKAGES) -> Package | None:
    """The Package whose ids start like `gym_id`, or None."""
    return next((p for p in packages if gym_id and p.prefix and gym_id.startswith(p.prefix)), None)


def import_package(name: str, gym_id: str, packages: tuple[Package, ...] = PACKAGES) -> None:
    """Import the module that registers `gym_id` where a known package has it; PPO1Error naming the extra to
    install when the package is missing."""
    package = package_of(gym_id, packages)
    if package is None:
        return
    try:
        importlib.import_module(package.module)
    except ImportError as e:
        raise PPO1Error(f"--env_name={name!r} needs the {package.extra!r} package, which cannot be imported "
                        f"({first_line(e)}): pip install 'ppo1[{package.extra}]'") from None


def parse_env_kwargs(text: str) -> dict[str, Any]:
    """The keyword arguments of `--env_kwargs`, a JSON object string. Raises PPO1Error for anything else."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except (json.JSONDecodeError, RecursionError) as e:
        raise PPO1Error(f"--env_kwargs={text!r} is not valid JSON ({first_line(e)}): give a JSON object such as "
                        """'{"size": 24}'""") from None
    if not isinstance(value, dict):
        raise PPO1Error(f"--env_kwargs={text!r} is not a JSON object: give one such as '{{\"size\": 24}}' "
                        "(or {} for none)")
    return value


@dataclasses.dataclass(frozen=True)
class EnvRef:
    """An env as `--env_name` and `--env_kwargs` name it: a registered gymnasium id (`gym_id`) or a
    factory, and the keyword arguments either is made with."""

    name: str                                 # --env_name as given
    gym_id: str | None = None                 # the registered id (forms 1 and 2)
    factory: Callable[..., Any] | None = None  # the callable (form 3)
    kwargs: dict = dataclasses.field(default_factory=dict)

    @property
    def package(self) -> Package | None:
        """The known Package of a registered id or of a known factory (PACKAGES), or None."""
        return package_of(self.gym_id) or next((p for p in PACKAGES if self.name in p.factories), None)

    def told_family(self) -> str | None:
        """The name of the family of this id's envs where its registered entry point tells (ENTRY_POINT_FAMILIES,
        no wrappers added to it) and loads (its module imports: what its envs need is installed), else None: a
        factory, an id of another package, an entry point that does not load (making the env says why). Makes no
        env."""
        if self.gym_id is None:
            return None
        spec = env_spec(self.gym_id)
        entry = spec.entry_point if isinstance(spec.entry_point, str) else ""
        family = next((family for prefix, family in ENTRY_POINT_FAMILIES if entry.startswith(prefix)), None)
        if family is None or spec.additional_wrappers:
            return None
        try:
            load_gymnasium().envs.registration.load_env_creator(entry)
        except (Exception, SystemExit):
            return None
        return family

    def describe(self) -> str:
        """How the env is made, for error messages: `gymnasium.make('X-v0', ...)` or `pkg.mod:make(...)`."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        if self.gym_id is not None:
            return f"gymnasium.make({self.gym_id!r}{', ' + args if args else ''})"
        return f"{self.name}({args})"

    def make(self, render_mode: str | None = None):
        """A new gymnasium Env. render_mode goes to gymnasium.make, and to a factory that takes it (a
        `render_mode` parameter, or **kwargs that do not refuse it), None too (stable-retro's default is a
        window); else its env renders as it was made.
        Raises PPO1Error naming the env when it cannot be made or is not a gymnasium Env."""
        import gymnasium

        package = self.package
        kwargs = {**(package.make_kwargs() if package and package.make_kwargs else {}), **self.kwargs}
        if "render_mode" not in kwargs and (self.factory is not None and _takes(self.factory, "render_mode")
                                            or self.gym_id is not None and render_mode is not None):
            kwargs["render_mode"] = render_mode  # a factory's own default may be "human" (a window)
        try:
            if self.gym_id is not None:
                env = gymnasium.make(self.gym_id, **kwargs)
            else:
                try:
                    env = self.factory(**kwargs)
                except TypeError as e:  # **kwargs that end in a constructor without render_mode
                    if "render_mode" not in str(e) or "render_mode" in self.kwargs:
                        raise
                    env = self.factory(**self.kwargs)
        except PPO1Error:
            raise
        except gymnasium.error.DependencyNotInstalled as e:
            raise PPO1Error(f"--env_name={self.name!r} needs a package that is not installed: {first_line(e)}") from None
        except (Exception, SystemExit) as e:  # the user's code: whatever it raises (sys.exit too) is one line
            raise PPO1Error(f"--env_name={self.name!r}: {self.describe()} raised {type(e).__name__}: "
                            f"{first_line(e)}") from None
        if not isinstance(env, gymnasium.Env):
            raise PPO1Error(f"--env_name={self.name!r}: {self.describe()} returned {type(env).__name__}, "
                            "not a gymnasium Env")
        return env


def _takes(fn: Callable | None, name: str) -> bool:
    """Whether `fn` takes a keyword argument `name`: a parameter of that name, or **kwargs."""
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def resolve(name: str, env_kwargs: str = "{}") -> EnvRef:
    """The EnvRef of an `--env_name` (not `procgen:<game>`) and its `--env_kwargs`. Imports the module of
    `module:X`; makes no env. Raises PPO1Error for an unknown id, a module that does not import, a missing
    or non-callable attribute, kwargs that are not a JSON object."""
    gymnasium = load_gymnasium()
    kwargs = parse_env_kwargs(env_kwargs)
    module_name, colon, attr = name.partition(":")
    if not colon:
        import_package(name, name)
        env_spec(name)  # PPO1Error naming an unknown id
        return EnvRef(name, gym_id=name, kwargs=kwargs)
    if not module_name or not attr or ":" in attr:
        raise PPO1Error(f"--env_name={name!r} is invalid: must be an id, module:EnvId or package.module:callable")
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as e:  # ModuleNotFoundError, or whatever the module raises as it runs
        extra = missing_extra(e)
        hint = f" (pip install 'ppo1[{extra}]')" if extra else ""
        raise PPO1Error(f"--env_name={name!r}: module {module_name!r} cannot be imported: "
                        f"{error_line(e)}{hint}") from None
    import_package(name, attr)  # `vizdoom:VizdoomBasic-v1`: the ids register in vizdoom.gymnasium_wrapper
    try:
        gymnasium.spec(attr)  # registered by the module (or before it)
        return EnvRef(name, gym_id=attr, kwargs=kwargs)
    except gymnasium.error.Error:
        pass
    if not hasattr(module, attr):
        raise PPO1Error(f"--env_name={name!r}: module {module_name!r} has no attribute {attr!r} and registers no "
                        f"env id {attr!r}")
    factory = getattr(module, attr)
    if not callable(factory):
        raise PPO1Error(f"--env_name={name!r}: {module_name}.{attr} is not callable (it is {type(factory).__name__} "
                        f"{first_line(repr(factory), 60)}): name a callable that returns a gymnasium Env")
    return EnvRef(name, factory=factory, kwargs=kwargs)
