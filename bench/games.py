"""Games benchmark: one preset on several Atari games, one after the other, as a user runs it.

    python -m bench.games --preset fast --steps 2e6 --games BeamRider,Qbert,Seaquest,MsPacman
    python -m bench.games --preset fast --steps 2e6 --games ALE/Pong-v5      # sticky actions
    python -m bench.games --preset fast --steps 2e6 --games Pong --only report   # table and grid only

Each game trains with `mpirun -np 2 python -m run_atari --preset P --env_name <Game>NoFrameskip-v4
--env_steps S --seed N`: `fast` with its own actors (2 ranks x 16 envs; Pong v4 2 x 4), other presets
with `--envs_per_rank 4` (8 actors, the paper's); a rerun continues the runs it finds (a run is
a normal ppo1 run directory under --checkpoint_dir, resumed as any run) and skips the finished ones;
one it finds with other settings than this benchmark's (left by an older preset, or trained for
another --steps) it refuses in one line.
After training, `--mode play --episodes 10` and a greedy GIF of the start of one game.

Writes, per game, under --out (default assets/games/<preset>-<steps>M[-seedN][-tag]/<Game>[-v5]/): config.json,
progress.csv, episodes.csv (every finished game: the agent steps at its end, its return and length),
curve.png (with the published points of bench/published.json as markers), play.txt (the play summary;
with --eval_interval in --set also play-best.txt, best.pt's), greedy.gif; for the set: results.md (one
table) and curves.png (a grid).

The table reads each curve (the mean of the last 100 games) at 0.5M, 1M and 2M agent steps and at the run's
end, and beside it the mean of the games that ended in the 100k agent steps up to 1M and 2M: that is how the
DreamerV3 repository's PPO is read (400k-frame bins), and on a long game (Enduro's day lasts 3,323 agent
steps or more) the last 100 games reach back several hundred thousand steps.

An A/B variant adds run_atari flags with --set and names its set with --tag:
    python -m bench.games --preset fast --steps 2e6 --games BeamRider --set=--ent_coef=0.02 --tag ent0.02
The table's preset column names the flags by which each run's config.json differs from its preset.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLISHED = os.path.join(REPO, "bench", "published.json")
NP, ENVS_PER_RANK = 2, 4  # ranks; envs per rank for a preset that does not set its actors
MARKS = (500_000, 1_000_000, 2_000_000)  # agent steps at which the table reads the curve
SLACK = 8192  # agent steps: a run ending this little short of a mark (a 2M schedule's last iteration) reaches it
BIN = 100_000  # agent steps: the DreamerV3 repository bins its PPO's scores per 400k frames (frame skip 4)
GIF_FRAMES = 900  # 15 s of game


def env_id(game: str) -> str:
    """`Pong` -> PongNoFrameskip-v4; a full id (ALE/Pong-v5, PongNoFrameskip-v4) is kept."""
    return game if "/" in game or "-v" in game else f"{game}NoFrameskip-v4"


def game_name(env: str) -> str:
    """The game of an env id: PongNoFrameskip-v4 -> Pong, ALE/Pong-v5 -> Pong."""
    base = env.split("/")[-1]
    return base.split("NoFrameskip")[0].split("-v")[0]


def label(env: str) -> str:
    """The directory (and table) name of a game's run: Pong for v4 ids, Pong-v5 for ALE/Pong-v5."""
    return game_name(env) + ("-v5" if env.endswith("-v5") else "")


def sticky(env: str) -> bool:
    return env.startswith("ALE/") and env.endswith("-v5")


def load_published(path: str = PUBLISHED) -> dict:
    with open(path) as f:
        return json.load(f)


def read_csv(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def curve(rows: list[dict]) -> list[tuple[int, float, float]]:
    """(agent steps, mean return of the last 100 real games, cumulative seconds) of each row of a
    progress.csv as csv.DictReader reads them, over every resume of the run."""
    from ppo1.metrics import cumulative_seconds

    seconds = cumulative_seconds(float(r["time_elapsed"]) for r in rows)
    out = []
    for r, t in zip(rows, seconds):
        ret = float(r["ep_return_mean"]) if r["ep_return_mean"] not in ("", "nan") else math.nan
        out.append((int(r["timesteps"]), ret, t))
    return out


def at_steps(rows: list[tuple[int, float, float]], steps: int, slack: int = SLACK) -> float:
    """The curve's value at `steps` agent steps: its first row with at least `steps`, or, for a run that
    ends less than `slack` steps short of them (a 2M schedule's last iteration ends a few hundred steps
    short), its last row; nan if it never gets there."""
    for s, ret, _t in rows:
        if s >= steps:
            return ret
    if rows and rows[-1][0] >= steps - slack:
        return rows[-1][1]
    return math.nan


def merge_games(run_dir: str, path: str) -> int:
    """Write the run's finished games, all ranks' (episodes.rank<r>.csv), to one csv at `path` (timesteps,
    return, length), in the order of the agent steps at which each ended. Returns how many."""
    games = []
    for name in sorted(os.listdir(run_dir)):
        if name.startswith("episodes.rank") and name.endswith(".csv"):
            games += [(int(r["timesteps"]), r["return"], r["length"])
                      for r in read_csv(os.path.join(run_dir, name))]
    games.sort(key=lambda g: g[0])
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timesteps", "return", "length"])
        w.writerows(games)
    return len(games)


def binned(games: list[tuple[int, float]], steps: int, end: int, slack: int = SLACK) -> float:
    """The mean return of the games (agent steps at its end, return) that ended in the BIN agent steps up to
    `steps`, as the DreamerV3 repository reads its PPO (the mean of a 400k-frame bin, where the last 100
    games of a long game reach back further); nan for a run that ended more than `slack` short of `steps`,
    or no game in the bin."""
    if end < steps - slack:
        return math.nan
    bin_ = [ret for t, ret in games if steps - BIN < t <= steps]
    return sum(bin_) / len(bin_) if bin_ else math.nan


def hns(score: float, pub: dict) -> float:
    """Human-normalised score: (score - random) / (human - random)."""
    return (score - pub["random"]) / (pub["human"] - pub["random"])


def _fmt(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:,.{digits}f}"


# config.json fields that name, place or pace a run rather than set how it learns.
RUN_FIELDS = frozenset({"env_name", "env_steps", "preset", "model_name", "checkpoint_dir", "asset_dir", "seed",
                        "envs_per_rank", "device", "num_threads", "compile", "deterministic", "save_interval",
                        "keep_checkpoints", "video_interval", "video_max_frames", "snapshot_interval", "watchdog_timeout",
                        "sync_check_interval"})


def variant(cfg: dict, steps: int, per_iter: int) -> str:
    """The flags by which a run differs from its preset (an A/B variant): each learning setting of its
    config.json that `--preset P --env_name E` sets otherwise, and --env_steps when the run stopped at
    least an iteration before its schedule's end (a schedule longer than the steps it ran). The preset is
    taken at the run's actors (per_iter / T), since `fast` sets its minibatch by them: as many ranks of one env
    each (envs_per_rank, a RUN_FIELD, is not compared), which no bound on the envs of one rank refuses."""
    from ppo1.config import Config
    actors = max(1, per_iter // cfg["timesteps_per_actorbatch"])
    base = Config.for_preset(cfg["preset"], n_ranks=actors, env_name=cfg["env_name"], envs_per_rank=1).to_dict()
    flags = [f"--{k} {v:g}" if isinstance(v, float) else f"--{k} {v}"
             for k, v in cfg.items() if k not in RUN_FIELDS and k in base and v != base[k]]
    if steps < schedule_end(cfg.get("env_steps", 0), per_iter):
        flags.append(f"--env_steps {cfg['env_steps']}")
    return " ".join(flags)


def per_iteration(raw: list[dict]) -> int:
    """Agent steps per iteration (all actors) of a run, from the first row of its progress.csv."""
    return int(raw[0]["timesteps"]) // int(raw[0]["iteration"])


def schedule_end(env_steps: int, per_iter: int) -> int:
    """The agent steps at which a schedule of env_steps ends: its last whole iteration."""
    return (env_steps // per_iter) * per_iter


def summarize(out_dir: str) -> dict | None:
    """One game's row from its out_dir (progress.csv, config.json, play.txt); None before training."""
    progress = os.path.join(out_dir, "progress.csv")
    if not os.path.exists(progress):
        return None
    from ppo1.config import Config
    with open(os.path.join(out_dir, "config.json")) as f:
        cfg = Config.flatten(json.load(f))
    raw = read_csv(progress)
    rows = curve(raw)
    steps, final, seconds = rows[-1]
    per_iter = per_iteration(raw)
    actors = per_iter // cfg["timesteps_per_actorbatch"]
    changes = variant(cfg, steps, per_iter)
    play = ""
    if os.path.exists(os.path.join(out_dir, "play.txt")):
        with open(os.path.join(out_dir, "play.txt")) as f:
            play = f.read().strip()
    binned_marks = None  # a folder from before episodes.csv was kept
    if os.path.exists(os.path.join(out_dir, "episodes.csv")):
        games = [(int(r["timesteps"]), float(r["return"])) for r in read_csv(os.path.join(out_dir, "episodes.csv"))]
        binned_marks = {m: binned(games, m, steps) for m in MARKS[1:]}
    return {"env": cfg["env_name"], "preset": cfg["preset"], "variant": changes, "actors": actors, "steps": steps,
            "minutes": seconds / 60, "sps": steps / max(seconds, 1e-9), "final": final,
            "marks": {m: at_steps(rows, m) for m in MARKS}, "binned": binned_marks, "play": play, "rows": rows,
            "evals": [(int(r["timesteps"]), float(r["eval_return_mean"])) for r in raw if r.get("eval_return_mean")]}


def results_table(rows: dict[str, dict], published: dict) -> str:
    """The markdown table of the set: one row per game (label -> summarize())."""
    head = ("| game | env id | preset | actors | agent steps | minutes | SPS | 0.5M | 1M | 2M | at end | "
            "100k-step bin at 1M / 2M | ppo2 1M / 2M | CleanRL 1M / 2M | DreamerV3-repo PPO 1M / 2M | "
            "10M finals: paper / ppo2 / CleanRL | HNS at end |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, s in rows.items():
        pub = published["games"].get(game_name(s["env"]), {})
        ref = (lambda src: " / ".join(_fmt(pub.get(src, {}).get(str(m))) for m in MARKS[1:])) if pub else None
        finals = " / ".join(_fmt(pub.get(k)) for k in ("paper_10M", "ppo2_10M", "cleanrl_10M")) if pub else "–"
        note = " (sticky)" if sticky(s["env"]) else ""
        preset = f"{s['preset']} `{s['variant']}`" if s["variant"] else s["preset"]
        lines.append(
            f"| {name} | `{s['env']}`{note} | {preset} | {s['actors']} | {s['steps']:,} | {s['minutes']:.1f} | "
            f"{s['sps']:.0f} | "
            + " | ".join(_fmt(s["marks"][m]) for m in MARKS)
            + f" | {_fmt(s['final'])} | "
            + (" / ".join(_fmt(s["binned"][m]) for m in MARKS[1:]) if s["binned"] else "–")
            + f" | {ref('ppo2') if ref else '–'} | {ref('cleanrl') if ref else '–'} | "
            + f"{ref('dreamerv3_ppo') if ref else '–'} | {finals} | "
            + (f"{hns(s['final'], pub):.2f}" if pub and not math.isnan(s["final"]) else "–") + " |")
    return "\n".join(lines) + "\n"


def _plot_one(ax, s: dict, pub: dict) -> None:
    rows = s["rows"]
    ax.plot([r[0] for r in rows], [r[1] for r in rows], color="tab:blue", label="ppo1")
    if s.get("evals"):  # --eval_interval: the policy's own whole games at each evaluation
        ax.plot(*zip(*s["evals"]), "--.", color="tab:cyan", label="ppo1 evaluation (--eval_interval)")
    references = (("ppo2", "tab:green", "^", "baselines ppo2", True),  # (.., v4 only)
                  ("cleanrl", "tab:red", "o", "CleanRL ppo_atari", True),
                  ("dreamerv3_ppo", "tab:purple", "s", "PPO of the DreamerV3 repo", False))
    for src, color, marker, text, no_sticky in references:
        points = pub.get(src, {})
        if points and not (no_sticky and sticky(s["env"])):
            xs = sorted(int(k) for k in points)
            ax.plot(xs, [points[str(x)] for x in xs], marker, color=color, label=text)
    ax.set_title(f"{s['env']} ({s['preset']})" + (f"\n{s['variant']}" if s["variant"] else ""), fontsize=9)
    ax.set_xlabel("agent steps", fontsize=8)
    ax.set_ylabel("mean of last 100 games", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def plot_game(out_dir: str, s: dict, published: dict) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    _plot_one(ax, s, published["games"].get(game_name(s["env"]), {}))
    path = os.path.join(out_dir, "curve.png")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_grid(path: str, rows: dict[str, dict], published: dict) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(rows)
    cols = min(n, 3)
    lines = math.ceil(n / cols)
    fig, axes = plt.subplots(lines, cols, figsize=(5 * cols, 3.6 * lines), squeeze=False)
    for ax, s in zip(axes.flat, rows.values()):
        _plot_one(ax, s, published["games"].get(game_name(s["env"]), {}))
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def _mpirun() -> list[str]:
    from bench.learning import _mpirun as find
    return find(NP)


def _run(cmd: list[str], log: str | None = None) -> int:
    print("bench.games:", " ".join(cmd), flush=True)
    if log is None:
        return subprocess.call(cmd, cwd=REPO)
    with open(log, "w") as f:
        return subprocess.call(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT)


def _play(env: str, run_dir: str, run_name: str, common: list[str], which: str, out: str) -> int:
    """`--mode play --episodes 10 --checkpoint <which>`; its game lines and summary into out (once)."""
    if os.path.exists(out):
        return 0
    log = os.path.join(run_dir, f"play-{which}.log")
    code = _run([*_mpirun(), sys.executable, "-m", "run_atari", "--mode", "play", "--episodes", "10",
                 "--checkpoint", which, *common], log)
    with open(log) as f:
        lines = [line for line in f.read().splitlines() if line.startswith(("game ", "ppo1: 10 games"))]
    if code != 0 or not lines:
        print(f"bench.games: {env} play exited with status {code}; see {log}")
        return code or 1
    with open(out, "w") as f:
        f.write(f"python -m run_atari --mode play --episodes 10 --checkpoint {which} --model_name {run_name} "
                f"(sampled actions)\n")
        f.write("\n".join(lines) + "\n")
    return 0


def run_game(env: str, args, run_name: str, out_dir: str) -> int:
    """Train (or continue) one game's run, then play and record it; copy its small files to out_dir."""
    run_dir = os.path.join(args.checkpoint_dir, run_name)
    common = ["--checkpoint_dir", args.checkpoint_dir, "--model_name", run_name]
    from ppo1.config import Config
    from ppo1.resolve import preset_values
    preset = preset_values({"preset": args.preset, "env_name": env}, NP, defaults=Config)
    actors = [] if "envs_per_rank" in preset else \
        ["--envs_per_rank", str(ENVS_PER_RANK)]  # a preset that sets its actors (fast: 32) has them
    flags = ["--preset", args.preset, "--env_name", env, *actors, "--env_steps", str(args.steps),
             "--seed", str(args.seed), *common, *args.extra]
    from ppo1.errors import PPO1Error
    try:
        stale = _other_settings(flags, NP, run_dir)
    except PPO1Error as e:  # a setting of --set run_atari would refuse
        print(f"bench.games: {e}")
        return 2
    if stale:
        print(f"bench.games: {run_dir} holds a run with other settings than this benchmark's ({stale}); "
              f"name this one with --tag, or move that run away")
        return 2
    train = [*_mpirun(), sys.executable, "-m", "run_atari", *flags]
    if not _finished(run_dir):
        start = time.time()
        code = _run(train)
        if code != 0:
            print(f"bench.games: {env} training exited with status {code} after {(time.time() - start) / 60:.1f} min")
            return code
    os.makedirs(out_dir, exist_ok=True)
    for name in ("config.json", "progress.csv"):
        shutil.copyfile(os.path.join(run_dir, name), os.path.join(out_dir, name))
    merge_games(run_dir, os.path.join(out_dir, "episodes.csv"))
    # the newest checkpoint, and with --eval_interval also best.pt (the best evaluation's policy)
    for which, name in (("latest", "play.txt"), ("best", "play-best.txt")):
        if which == "best" and not os.path.exists(os.path.join(run_dir, "best.pt")):
            continue
        code = _play(env, run_dir, run_name, common, which, os.path.join(out_dir, name))
        if code:
            return code
    if not os.path.exists(os.path.join(out_dir, "greedy.gif")):
        assets = os.path.join(run_dir, "movie")
        code = _run([sys.executable, "-m", "run_atari", "--mode", "movie", "--greedy", "--gif", "--max_frames",
                     str(GIF_FRAMES), "--asset_dir", assets, *common], os.path.join(run_dir, "movie.log"))
        gifs = sorted(g for g in os.listdir(os.path.join(assets, run_name)) if g.endswith(".gif")) \
            if code == 0 else []
        if not gifs:
            print(f"bench.games: {env} movie exited with status {code}; see {run_dir}/movie.log")
            return code or 1
        shutil.copyfile(os.path.join(assets, run_name, gifs[-1]), os.path.join(out_dir, "greedy.gif"))
    return 0


def _other_settings(flags: list[str], n_ranks: int, run_dir: str) -> str:
    """How the run in run_dir that run_atari would continue with these flags (its saved config.json, the
    flags on top) differs from a new run with them (the preset as it is now, the flags on top), e.g.
    "optim_batchsize 32, not 8" for a run left by an older `fast`, or "env_steps 1100000, not 1500000" for
    one of another budget (run_atari would stretch its schedule mid-run, and a finished one would be reported
    as this budget's); '' when they agree or there is no run. Raises PPO1Error for flags a new run would
    refuse."""
    from ppo1.errors import PPO1Error
    from ppo1.runfiles import load_config
    from ppo1.cli import build_config, build_parser
    from ppo1.resolve import MACHINE_FIELDS
    new = build_config(build_parser().parse_args([*flags, "--fresh"]), n_ranks).to_dict()
    if not os.path.exists(os.path.join(run_dir, "config.json")):
        return ""
    try:
        saved = build_config(build_parser().parse_args(flags), n_ranks).to_dict()
        saved["env_steps"] = load_config(run_dir).env_steps  # its schedule, which the flag would stretch
    except PPO1Error as e:
        return str(e)
    return ", ".join(f"{k} {saved[k]}, not {new[k]}" for k in new if k not in MACHINE_FIELDS and saved[k] != new[k])


def _finished(run_dir: str) -> bool:
    """Whether the run's progress.csv reaches the end of its schedule (the last iteration was logged)."""
    progress, config = os.path.join(run_dir, "progress.csv"), os.path.join(run_dir, "config.json")
    if not (os.path.exists(progress) and os.path.exists(config)):
        return False
    with open(config) as f:
        cfg = json.load(f)
    raw = read_csv(progress)
    return bool(raw) and int(raw[-1]["timesteps"]) >= schedule_end(cfg["env_steps"], per_iteration(raw))


def report(out: str, labels: list[str], published: dict) -> str | None:
    """Rewrite each game's curve.png and the set's results.md and curves.png from the files under out."""
    rows = {}
    for name in labels:
        s = summarize(os.path.join(out, name))
        if s is not None:
            plot_game(os.path.join(out, name), s, published)
            rows[name] = s
    if not rows:
        return None
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(results_table(rows, published))
    plot_grid(os.path.join(out, "curves.png"), rows, published)
    return os.path.join(out, "results.md")


def _game_dirs(out: str) -> list[str]:
    return sorted(d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d))) if os.path.isdir(out) else []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.games", description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="fast")
    p.add_argument("--steps", type=lambda s: int(float(s)), default=2_000_000, help="agent steps per game")
    p.add_argument("--games", default="BeamRider,Qbert,Seaquest,MsPacman,Pong,Breakout",
                   help="comma-separated: game names (<Game>NoFrameskip-v4) or full ids such as ALE/Pong-v5")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint_dir", default=os.path.join("checkpoints", "games"))
    p.add_argument("--out", help="default: assets/games/<preset>-<steps>M[-seed<N> when N > 0][-<tag>]")
    p.add_argument("--only", choices=("report",), help="only rewrite the table and plots from what exists")
    p.add_argument("--set", dest="extra", action="append", default=[], metavar="--FLAG=VALUE",
                   help="an extra run_atari flag for every game (an A/B variant; use with --tag)")
    p.add_argument("--tag", default="", help="suffix of the run names and of the default --out")
    args = p.parse_args(argv)

    envs = [env_id(g.strip()) for g in args.games.split(",") if g.strip()]
    tag = f"-{args.tag}" if args.tag else ""
    seed = f"-seed{args.seed}" if args.seed else ""
    out = os.path.abspath(args.out or os.path.join(REPO, "assets", "games",
                                                   f"{args.preset}-{args.steps / 1e6:g}M{seed}{tag}"))
    published = load_published()
    if args.only != "report":
        for env, name in ((e, label(e)) for e in envs):
            run_name = f"{args.preset}-{name}-seed{args.seed}{tag}"
            code = run_game(env, args, run_name, os.path.join(out, name))
            if code != 0:
                return code
            report(out, _game_dirs(out), published)
            print(f"bench.games: {name} done: {out}/{name}", flush=True)
    table = report(out, _game_dirs(out), published)
    if table:
        with open(table) as f:
            print(f.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
