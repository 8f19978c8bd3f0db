"""Command line: the flags of ppo1 (lucaslingle/ppo1) and the modes train / play / movie / plot.

Errors a user can cause print as one line `ppo1: error: ...` and exit with status 2 on every rank;
an unexpected error on any rank ends every rank of the job (MPI_Abort) with status 1.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
import traceback

from ppo1.errors import PPO1Error
from ppo1.bounds import MAX_EPISODES, MAX_FRAMES
from ppo1.config import (ADV_NORMS, DISTRIBUTION_MODES, FRAME_CODES, FRAME_NORMS, INITS, MODEL_TYPES, REWARD_CLIPS,
                         PRECISIONS, RNN_CHOICES, RNN_CRITICS, RNN_INITS, Config)
from ppo1.presets import ALL_PRESETS, PRESET_HELP
from ppo1.resolve import machine_defaults, preset_values
from ppo1.launch import HeldInterrupt, say_error_before_mpi, say_interrupted_while_starting

def _whole(text: str) -> int:
    """An int flag that also takes 1e6 or 10_000_000."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(value)


def _count(text: str) -> int:
    """A count flag: a whole number >= 0 (0 = off)."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is invalid: must be a whole number >= 0 (0 = off)")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error, printed by rank 0 only."""

    def error(self, message: str):
        say_error_before_mpi(f"{message} (see --help)")
        sys.exit(2)


# Flags of one or more modes other than train: name -> (modes, default, add_argument kwargs).
_MODE_FLAGS = {
    "episodes": (("play",), 10, {"type": _whole, "metavar": "N",
                 "help": "play: whole games to play, split over the ranks (default: 10)"}),
    "greedy": (("play", "movie"), False, {"action": "store_true",
               "help": "play, movie: take the most probable action (argmax; of each dimension for MultiDiscrete "
                       "and MultiBinary actions) instead of sampling from the policy (sampling is the default, "
                       "as in ppo1)"}),
    "checkpoint": (("play", "movie"), "latest", {"metavar": "WHICH",
                   "help": "play, movie: the checkpoint: latest (the run's newest), best (its best.pt, the best "
                           "evaluation of --eval_interval) or the path of a .pt file (default: latest)"}),
    "render": (("play",), False, {"action": "store_true",
               "help": "play: show the game in a window, when a display exists (else headless)"}),
    "max_frames": (("movie",), 0, {"type": _whole, "metavar": "N",
                   "help": "movie: cut the video after N emulator frames, 60 per second (default: 0 = one "
                           "whole game)"}),
    "gif": (("movie",), False, {"action": "store_true",
            "help": "movie: also write a GIF (every 3rd frame, 20 fps); keep it short with --max_frames"}),
    "runs": (("plot",), None, {"metavar": "A,B",
             "help": "plot: runs to draw, comma-separated: names under --checkpoint_dir, run directories or "
                     "progress.csv files (default: --model_name)"}),
    "plot_x": (("plot",), "timesteps", {"choices": ("timesteps", "time"),
               "help": "plot: x axis, agent steps or wall-clock hours (default: timesteps)"}),
}


def _apply_mode_flags(args: argparse.Namespace) -> None:
    """Refuse a mode flag given to another mode (PPO1Error); fill in the defaults of the others."""
    for name, (modes, default, _kwargs) in _MODE_FLAGS.items():
        if hasattr(args, name) and args.mode not in modes:
            raise PPO1Error(f"--{name} is for --mode {' or '.join(modes)}, not --mode {args.mode}")
        if not hasattr(args, name):
            setattr(args, name, default)
    if not 1 <= args.episodes <= MAX_EPISODES:
        raise PPO1Error(f"--episodes={args.episodes} is invalid: must be a whole number >= 1 and <= {MAX_EPISODES}")
    if not 0 <= args.max_frames <= MAX_FRAMES:
        raise PPO1Error(f"--max_frames={args.max_frames} is invalid: must be >= 0 (0 = one whole game) "
                        f"and <= {MAX_FRAMES} (30 minutes at 60 fps)")


def _given_config_flags(args: argparse.Namespace) -> dict:
    """The Config flags given on the command line, by name."""
    return {k: v for k, v in vars(args).items() if k in Config.field_names()}


# --help's sections: every Config field and every other flag in exactly one (a test checks).
GROUPS: dict[str, tuple[str, ...]] = {
    "what to train": ("mode", "env_name", "env_kwargs", "preset", "env_steps", "seed", "num_levels", "start_level",
                      "distribution_mode"),
    "image observations (envs other than Atari and Procgen)": ("frame_skip", "frame_size", "frame_upscale",
                                                               "frame_gray", "frame_stack", "frame_codes", "obs_key",
                                                               "obs_vectors"),
    "PPO hyperparameters": (
        "timesteps_per_actorbatch", "optim_epochs", "optim_batchsize", "optim_stepsize", "anneal_lr",
        "adam_epsilon", "lr_warmup", "target_kl", "epsilon", "anneal_clip", "gamma", "lam", "ent_coef",
        "anneal_ent", "vf_coef", "clip_vloss", "adv_norm", "max_grad_norm"),
    "rewards and episodes": ("clip_reward", "reward_scale", "norm_reward", "episode_life", "max_episode_steps"),
    "network": ("model_type", "init", "frame_norm", "rnn", "rnn_size", "rnn_critic", "rnn_init", "bptt_len",
                "precision", "compile"),
    "parallelism and devices": ("np", "envs_per_rank", "num_threads", "device", "deterministic",
                                "sync_check_interval", "watchdog_timeout", "env_restarts",
                                "env_restart_window", "env_step_timeout"),
    "run directory and checkpoints": ("model_name", "checkpoint_dir", "asset_dir", "fresh", "save_interval",
                                      "keep_checkpoints", "stop_after_iterations", "snapshot_interval",
                                      "video_interval", "video_max_frames"),
    "evaluation during training": ("eval_interval", "eval_episodes", "eval_greedy", "eval_max_steps"),
    "Weights & Biases (pip install -e '.[wandb]')": ("wandb", "wandb_project", "wandb_entity", "wandb_name",
                                                     "wandb_group", "wandb_tags"),
    "play / movie / plot": ("checkpoint", "episodes", "greedy", "render", "max_frames", "gif", "runs", "plot_x"),
}

_CHOICES = {"model_type": MODEL_TYPES, "init": INITS, "adv_norm": ADV_NORMS, "precision": PRECISIONS,
            "frame_norm": FRAME_NORMS, "frame_codes": FRAME_CODES, "distribution_mode": DISTRIBUTION_MODES,
            "clip_reward": REWARD_CLIPS,
            "rnn": RNN_CHOICES, "rnn_critic": RNN_CRITICS, "rnn_init": RNN_INITS,
            "preset": tuple(ALL_PRESETS)}


def _field_kwargs(f: dataclasses.Field, default) -> dict:
    """add_argument's keywords for a Config field: its help (from the field's metadata) and type."""
    help_ = f"{f.metadata['help']} (default: {default if default != '' else 'none'})"
    if f.name == "preset":
        help_ += ":" + "".join(f"\n{name}: {text}" for name, text in PRESET_HELP.items())
    if isinstance(default, bool):
        return {"action": argparse.BooleanOptionalAction, "default": argparse.SUPPRESS, "help": help_}
    kwargs = {"type": _whole if type(default) is int else type(default), "default": argparse.SUPPRESS,
              "help": help_}
    if f.name in _CHOICES:
        kwargs["choices"] = _CHOICES[f.name]
    return kwargs


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, keeping the line breaks written into a help text (the presets)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        split = super()._split_lines  # (zero-argument super() does not work inside a comprehension)
        return [line for part in text.splitlines() for line in split(part, width)]


def command_name(module: str, argv0: str) -> str:
    """The command the user ran, as --help and argparse's errors name it: `python -m run_atari`, `python -m ppo1`
    (argv0 ppo1/__main__.py) or the `ppo1` command (its script)."""
    if module == "run_atari":
        return "python -m run_atari"
    return "python -m ppo1" if os.path.basename(argv0) == "__main__.py" else "ppo1"


def build_parser(command: str = "python -m run_atari") -> argparse.ArgumentParser:
    """The command line's parser; `command`: what the user ran (command_name), in the usage and examples."""
    p = _Parser(
        prog=command, formatter_class=_Formatter,
        usage=f"{command} [--np N] [--mode {{train,play,movie,plot}}] [--preset NAME] "
              "[--env_name ID] [--FLAG VALUE ...]",
        description="PPO (Schulman et al., 2017) on Atari, MPI-parallel: "
        f"{command} --np 2 --preset fast (or mpirun -np N {command} ...)")
    groups = {title: p.add_argument_group(title) for title in GROUPS}
    where = {name: groups[title] for title, names in GROUPS.items() for name in names}
    where["mode"].add_argument(
        "--mode", choices=tuple(MODES), default="train",
        help="train a policy, play games with the newest checkpoint, record a video of one, or plot "
             "learning curves")
    defaults = Config()
    for f in dataclasses.fields(Config):  # each field's help is in its metadata (config.setting)
        where[f.name].add_argument(f"--{f.name}", **_field_kwargs(f, getattr(defaults, f.name)))
    for name, (_modes, _default, kwargs) in _MODE_FLAGS.items():
        where[name].add_argument(f"--{name}", default=argparse.SUPPRESS, **kwargs)
    where["np"].add_argument(
        "--np", type=_whole, default=0, metavar="N",
        help="start N ranks: this command again under the mpirun of this Python environment (the mpich "
             "wheel's, else the one on PATH); not under mpirun, which sets the ranks (default: 0 = this process "
             "alone, or mpirun's ranks)")
    where["fresh"].add_argument(
        "--fresh", action="store_true",
        help="train from scratch: move an existing run directory aside (to <run>.old-<time>) instead of "
             "resuming")
    where["stop_after_iterations"].add_argument(
        "--stop_after_iterations", type=_count, default=0, metavar="N",
        help="train mode: end this invocation after N iterations (checkpointed; the schedule still runs "
             "over --env_steps, so running again resumes it)")
    return p


def build_config(args: argparse.Namespace, n_ranks: int = 1, spares=None) -> Config:
    """Config from the flags given; on top of the run's saved config.json when there is one, else on
    top of the preset's values for n_ranks ranks (default: the env family's; Atari: the PPO paper's,
    vector observations: VECTOR_DEFAULTS). An env made to learn the family is kept in `spares` (ppo1.envs.Spares)."""
    given = _given_config_flags(args)
    run_dir = os.path.join(given.get("checkpoint_dir", Config.checkpoint_dir),
                           given.get("model_name", Config.model_name))
    base = Config()
    if not getattr(args, "fresh", False) and os.path.exists(os.path.join(run_dir, "config.json")):
        from ppo1.runfiles import load_config
        saved = load_config(run_dir)
        base = dataclasses.replace(saved, **machine_defaults(saved.preset, defaults=Config))
        if given.get("preset", base.preset) != base.preset:
            raise PPO1Error(f"--preset={given['preset']} differs from the run's preset {base.preset!r} "
                            f"({run_dir}); give --fresh to start a new run with it")
    else:
        base = dataclasses.replace(base, **preset_values(given, n_ranks, spares, defaults=Config))
    return dataclasses.replace(base, **given).validate()


def _mpi_fork(np_: int, argv: list[str], module: str = "run_atari") -> None:
    """Run `mpirun -np np_ python -m MODULE ARGV` (less --np) and exit with its status (see
    launch.run_launcher: a hang-up stops the ranks with a checkpoint); on a bad --np, one line from rank 0
    and exit status 2 on every rank."""
    from ppo1.launch import mpi_fork_command, run_launcher
    try:
        cmd = mpi_fork_command(np_, argv, module)
    except PPO1Error as e:
        say_error_before_mpi(str(e))
        sys.exit(2)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(run_launcher(cmd))


def _train(module, args: argparse.Namespace, config: Config, comm, spares) -> int:
    log = print if comm.is_root else (lambda *a, **k: None)
    return module.train(config, comm, log=log, fresh=args.fresh, stop_after=args.stop_after_iterations,
                        spares=spares)["exit_code"]


def _play(module, args: argparse.Namespace, config: Config, comm, spares) -> int:
    module.play(config, _given_config_flags(args), comm, args.episodes, greedy=args.greedy, render=args.render,
                checkpoint=args.checkpoint)
    return 0


def _movie(module, args: argparse.Namespace, config: Config, comm, spares) -> int:
    module.movie(config, _given_config_flags(args), comm, max_frames=args.max_frames, gif=args.gif,
                 greedy=args.greedy, checkpoint=args.checkpoint)
    return 0


def _plot(module, args: argparse.Namespace, config: Config, comm, spares) -> int:
    error = None  # rank 0 draws; its error is every rank's
    if comm.is_root:
        try:
            module.plot_mode(config, args.runs, args.plot_x, model_name_given="model_name" in vars(args))
        except PPO1Error as e:
            error = e
    comm.agree(error)
    return 0


# --mode: its module (imported before MPI starts: a library it needs that is missing fails every rank alike) and
# what runs it, given the module, the flags, the agreed Config, the Comm and the Spares. Returns the exit status.
MODES = {"train": ("ppo1.trainer", _train), "play": ("ppo1.player", _play), "movie": ("ppo1.movie", _movie),
         "plot": ("ppo1.plot", _plot)}


def main(argv: list[str] | None = None, held: HeldInterrupt | None = None, module: str = "run_atari") -> int:
    """Run one mode; `held`: ppo1.__main__'s HeldInterrupt, holding Ctrl-C since its first line; `module`: what
    the ranks of --np run (`python -m run_atari` or `python -m ppo1`). Returns the exit status."""
    held = (held or HeldInterrupt()).hold()  # until every rank is past MPI_Init (see HeldInterrupt)
    try:
        args = build_parser(command_name(module, sys.argv[0])).parse_args(argv)
        if args.np:  # run this command again as args.np ranks under mpirun; this process becomes mpirun
            _mpi_fork(args.np, sys.argv[1:] if argv is None else argv, module)
        started = _start(args.mode)
        if started is None:
            return 2
        comm, module = started
        if any(comm.allgather(held.pending)):  # every rank ends here, together
            sys.stderr.flush()
            say_interrupted_while_starting()
            comm.exit(130)
    finally:
        held.release()
    try:
        if held.pending:  # came after the ranks agreed above
            raise KeyboardInterrupt
        return _run(module, args, comm)
    except (Exception, KeyboardInterrupt) as e:
        return _failed(e, comm)


def _start(mode: str) -> tuple | None:
    """Before MPI: the libraries and the mode's module, then MPI. Returns (the Comm, the mode's module), or None
    after one line on stderr (exit status 2)."""
    try:
        from ppo1.distributed import Comm
        from ppo1.envs import load_gymnasium

        load_gymnasium()
        module = importlib.import_module(MODES[mode][0])
    except ImportError as e:  # before MPI: every rank fails alike (e.g. a system library cv2 links)
        say_error_before_mpi(f"a library ppo1 needs cannot be imported: {e}")
        return None
    try:
        return Comm.create(), module
    except PPO1Error as e:
        print(f"ppo1: error: {e}", file=sys.stderr)
        return None


def _run(module, args: argparse.Namespace, comm) -> int:
    """Collective: the Config of the flags, agreed by every rank, then the mode. Returns the exit status."""
    from ppo1.envs import Spares
    spares = Spares()  # an env made to learn the env's family: the first training env
    try:
        config = _agreed_config(args, comm, spares if args.mode == "train" else None)
        code = MODES[args.mode][1](module, args, config, comm, spares)
    finally:
        spares.close()  # what training did not take: the run was refused before it made its envs
    if code > 128:  # stopped by a signal, its checkpoint written: keep the signal handler to the end
        comm.exit(code)
    return code


def _agreed_config(args: argparse.Namespace, comm, spares) -> Config:
    """Collective: the Config of the flags (build_config), the mode's flags checked; the first rank's PPO1Error
    on every rank."""
    error, config = None, None
    try:
        config = build_config(args, comm.size, spares)
        _apply_mode_flags(args)
    except PPO1Error as e:
        error = e
    comm.agree(error)
    return config


def _failed(e: BaseException, comm) -> int:
    """After `e` ended the mode on this rank: its line on stderr, and the exit status, or the end of every rank
    (see the module's docstring). A user's error (PPO1Error, an env's own exception outside training's restarts:
    play, movie) is one line: from rank 0 when every rank has it, else from this rank, ending the job."""
    from ppo1.distributed import say_line
    from ppo1.envs.base import EnvRaised  # (not at the top: the --np launcher imports no env code)
    if isinstance(e, KeyboardInterrupt):
        say_line(f"ppo1: interrupted (rank {comm.rank})", sys.stderr)
        comm.abort(130)
    if isinstance(e, (PPO1Error, EnvRaised)):
        line = f"the env raised {e} ({e.where})" if isinstance(e, EnvRaised) else str(e)
        if getattr(e, "all_ranks", False) or comm.size == 1:
            if comm.is_root:
                print(f"ppo1: error: {line}", file=sys.stderr, flush=True)
            return 2
        say_line(f"ppo1: error on rank {comm.rank}: {line}", sys.stderr)
        comm.abort(2)
    say_line(f"ppo1: unexpected error on rank {comm.rank}:\n{''.join(traceback.format_exception(e))}", sys.stderr)
    comm.abort(1)
    return 1


if __name__ == "__main__":
    sys.exit(main())
