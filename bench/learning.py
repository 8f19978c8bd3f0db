"""Learning benchmarks: train a named benchmark with its reference settings, plot it, summarise it.

    python -m bench.learning pong                 # the PPO paper's Atari settings, 2 ranks x 4 envs
    python -m bench.learning cartpole --np 2      # baselines' MLP defaults
    python -m bench.learning cartpole-novel       # CartPole without velocities, --rnn lstm
    python -m bench.learning pong --env_steps 2e6 --out assets/pong-2M
    python -m bench.learning vizdoom-basic --run doom-norm -- --norm_reward   # run_atari flags after --
    python -m bench.learning airstriker --random 20 --summary_only --out assets/retro/airstriker
                                                  # the floor: 20 whole games of uniformly random actions

Writes checkpoint_dir/<run>/progress.csv (a real training run: rerunning resumes it), and the learning
curve PNG, summary.txt (one line: steps, wall time, mean return of the last 100 real games, the last
evaluation's with --eval_interval) and copies of config.json and progress.csv under --out (default
assets/<run>/).
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import time

from ppo1.distributed import mpirun_command
from ppo1.metrics import cumulative_seconds
from ppo1.plot import plot

# name -> (env id, ranks, envs per rank, default env_steps, extra flags). Hyperparameters not given
# here are ppo1's family defaults: the PPO paper's for Atari, baselines' run_mujoco for vectors.
BENCHMARKS = {
    "pong": ("PongNoFrameskip-v4", 2, 4, 2_000_000, []),
    "breakout": ("BreakoutNoFrameskip-v4", 2, 4, 10_000_000, []),
    "cartpole": ("CartPole-v1", 2, 1, 100_000, []),
    "hopper": ("Hopper-v5", 2, 1, 1_000_000, []),
    # memory (issue 63): CartPole with its velocities hidden, --rnn lstm and the preset it picks (ppo_lstm:
    # 8 actors); `-- --preset ppo_lstm --rnn none` is the same run without memory
    "cartpole-novel": ("bench.cartpole_novel:make_env", 2, 4, 100_000, ["--rnn", "lstm"]),
    # memory (bench/cue.py): a cue seen once, recalled 16 or 48 steps later, on a 24x24 screen or as 2 numbers;
    # --rnn lstm and what it brings (8 actors on images, ppo_lstm on vectors); `-- --rnn none` is chance (0.5)
    "cue-screen-16": ("bench.cue:screen", 2, 4, 100_000, ["--env_kwargs", '{"delay": 16}', "--rnn", "lstm"]),
    "cue-screen-48": ("bench.cue:screen", 2, 4, 200_000, ["--env_kwargs", '{"delay": 48}', "--rnn", "lstm"]),
    "cue-vector-16": ("bench.cue:vector", 2, 4, 100_000, ["--env_kwargs", '{"delay": 16}', "--rnn", "lstm"]),
    "cue-grid-16": ("bench.cue:grid", 2, 4, 100_000, ["--env_kwargs", '{"delay": 16}', "--rnn", "lstm"]),
    # memory on pixels (bench/flicker.py): Pong whose screens are black half the time, the fast preset's 8 actors;
    # `-- --rnn none --frame_stack 1` and `-- --rnn none` (4 frames) are the feed-forward runs beside it
    "flicker-pong": ("bench.flicker:pong", 2, 4, 1_100_000, ["--preset", "fast", "--rnn", "lstm"]),
    # POPGym (pip install popgym, in the bench extra): memory tasks of its benchmark, --rnn lstm (ppo_lstm's settings)
    "popgym-count-recall-easy": ("popgym:popgym-CountRecallEasy-v0", 2, 4, 100_000, ["--rnn", "lstm"]),
    "popgym-position-only-cartpole-easy": ("popgym:popgym-PositionOnlyCartPoleEasy-v0", 2, 4, 100_000,
                                           ["--rnn", "lstm"]),
    # ViZDoom (the vizdoom extra): its ids' own defaults (the vizdoom preset, frame skip 4), 8 actors
    "vizdoom-basic": ("VizdoomBasic-v1", 2, 4, 100_000, []),
    "vizdoom-defend-center": ("VizdoomDefendCenter-v1", 2, 4, 300_000, []),
    "vizdoom-health-gathering": ("VizdoomHealthGathering-v1", 2, 4, 300_000, []),
    # stable-retro (the retro extra; its free ROM): one emulator per process, so 8 ranks of 1 env; the
    # `stable_retro:make` factory's defaults (frame skip 4 as stable-retro's own PPO example, 84x84 gray)
    "airstriker": ("stable_retro:make", 8, 1, 1_000_000, ["--env_kwargs", '{"game": "Airstriker-Genesis-v0"}']),
    # Procgen (Python 3.13, the procgen extra): the procgen preset's 64 actors and 25M steps; on CPU cores a run
    # is cut short with --env_steps, and `-- --eval_interval N` adds the unseen and training levels' curves
    "procgen-coinrun": ("procgen:coinrun", 2, 32, 25_000_000, []),
}


def _mpirun(np_: int) -> list[str]:
    """The mpirun prefix for np_ ranks; none for one rank or where there is no mpirun."""
    return (mpirun_command(np_) or []) if np_ > 1 else []


def summarize(progress_csv: str) -> dict:
    """Steps, wall time and final mean return (last 100 real games) of a run's progress.csv."""
    with open(progress_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"bench.learning: {progress_csv} has no iteration yet")
    last = rows[-1]
    wall = cumulative_seconds(float(row["time_elapsed"]) for row in rows)[-1]  # over every resume
    evals = [row for row in rows if row.get("eval_return_mean")]  # --eval_interval: the last evaluation
    return {"steps": int(last["timesteps"]), "hours": wall / 3600, "ret100": float(last["ep_return_mean"]),
            "episodes": int(last["episodes"]), "sps": int(last["timesteps"]) / max(wall, 1e-9),
            "eval": evals[-1] if evals else None}


def random_games(flags: list[str], games: int, seed: int = 0) -> list[float]:
    """The scores of `games` whole games of uniformly random actions (one index per action dimension, as the
    policy samples them) on the env that run_atari `flags` name, made as play makes it."""
    import numpy as np

    from ppo1.actions import action_nvec
    from ppo1.cli import build_config, build_parser
    from ppo1.envs import EnvOptions, make_eval_env

    config = build_config(build_parser().parse_args([*flags, "--fresh"]))
    env = make_eval_env(config.env_name, np.random.SeedSequence(seed), options=EnvOptions.of(config))
    rng = np.random.default_rng(seed)
    nvec = action_nvec(env.action_space)
    scores: list[float] = []
    try:
        env.reset()
        while len(scores) < games:
            action = rng.integers(nvec) if nvec is not None else rng.integers(env.num_actions)
            _, _, _, episode = env.step(action)
            if episode is not None:
                scores.append(episode.ret)
    finally:
        env.close()
    return scores


def _write_line(path: str, line: str) -> None:
    """One line into the file at path (replaced) and onto stdout."""
    with open(path, "w") as f:
        f.write(line + "\n")
    print(line)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.learning", description=__doc__.splitlines()[0])
    p.add_argument("benchmark", choices=sorted(BENCHMARKS))
    p.add_argument("--env_steps", type=lambda s: int(float(s)), help="agent steps (default: the benchmark's)")
    p.add_argument("--np", type=int, help="MPI ranks (default: the benchmark's)")
    p.add_argument("--envs_per_rank", type=int, help="envs per rank (default: the benchmark's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint_dir", default="checkpoints")
    p.add_argument("--run", help="run name (default: bench-<benchmark>)")
    p.add_argument("--out", help="directory for the PNG and summary (default: assets/<run>)")
    p.add_argument("--summary_only", action="store_true", help="only plot and summarise an existing run")
    p.add_argument("--random", type=int, metavar="GAMES",
                   help="also play GAMES whole games of uniformly random actions and write their mean to "
                        "random.txt under --out (the floor the curve is read against)")
    args, flags = p.parse_known_args(argv)  # after --: more run_atari flags (an A/B variant)
    args.flags = [f for f in flags if f != "--"]

    env_id, ranks, envs, steps, extra = BENCHMARKS[args.benchmark]
    ranks, envs = args.np or ranks, args.envs_per_rank or envs
    steps = args.env_steps or steps
    run = args.run or f"bench-{args.benchmark}"
    out = args.out or os.path.join("assets", run)
    if not args.summary_only:
        cmd = [*_mpirun(ranks), sys.executable, "-m", "run_atari", "--env_name", env_id, "--envs_per_rank",
               str(envs), "--env_steps", str(steps), "--seed", str(args.seed), "--checkpoint_dir",
               args.checkpoint_dir, "--model_name", run, *extra, *args.flags]
        print("bench.learning:", " ".join(cmd), flush=True)
        start = time.time()
        code = subprocess.call(cmd)
        if code != 0:
            print(f"bench.learning: training exited with status {code} after {time.time() - start:.0f} s")
            return code
    os.makedirs(out, exist_ok=True)
    if args.random:
        scores = random_games(["--env_name", env_id, *extra, *args.flags], args.random, args.seed)
        line = (f"{args.benchmark} ({' '.join([env_id, *extra])}), uniformly random actions: {len(scores)} games, "
                f"score {statistics.mean(scores):.2f} ± {statistics.pstdev(scores):.2f} "
                f"(min {min(scores):g}, max {max(scores):g})")
        _write_line(os.path.join(out, "random.txt"), line)
    progress = os.path.join(args.checkpoint_dir, run, "progress.csv")
    if args.summary_only and args.random and not os.path.exists(progress):
        return 0  # the random floor alone
    s = summarize(progress)
    png, _ = plot([os.path.join(args.checkpoint_dir, run)], os.path.join(out, "learning_curve.png"),
                  args.checkpoint_dir)
    variant = f" {' '.join(args.flags)}" if args.flags else ""
    line = (f"{args.benchmark}{variant} ({env_id}, {ranks} ranks x {envs} envs): {s['steps']} agent steps, "
            f"{s['hours']:.2f} h wall, {s['sps']:.0f} SPS, {s['episodes']} games, "
            f"mean return of the last 100 games {s['ret100']:.2f}")
    if s["eval"]:
        e = s["eval"]
        levels = e.get("eval_train_return_mean")  # Procgen: unseen levels, and as many games on the training ones
        line += (f"; evaluation at {int(e['timesteps'])} steps, {e['eval_games']} games: "
                 + (f"unseen levels {float(e['eval_return_mean']):.2f}, training levels {float(levels):.2f}" if levels
                    else f"{float(e['eval_return_mean']):.2f}"))
    for name in ("config.json", "progress.csv"):  # the run's small files beside its curve
        shutil.copyfile(os.path.join(args.checkpoint_dir, run, name), os.path.join(out, name))
    _write_line(os.path.join(out, "summary.txt"), line)
    print(f"bench.learning: {png}, {os.path.join(out, 'summary.txt')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
