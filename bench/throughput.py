"""Throughput of ppo1's real training loop on this machine: `python -m bench.throughput [--preset P]`.

Each training scenario runs `mpirun -np R python -m bench.worker` (the real `ppo1.trainer.train`, a
fresh run in a temporary checkpoint dir, no intermediate checkpoints) for `--warmup` + `--iterations`
iterations and reports, over the timed iterations only:

    SPS                    agent steps per second summed over all actors
    env / infer / update   rank 0's share of the wall time stepping games, in batched inference and
                           in the PPO update
    stats                  the observation statistics and their allreduce (--frame_norm center, the
                           MLP), where a rank first waits for the slower one after the rollout
    other                  every other part of the loop, each timed by the trainer (progress.csv's
                           time_* columns) and listed below the table: the rollout's own bookkeeping,
                           advantages, logging, checkpoint, evaluation, and what lies outside them all
    allred/upd             time in the gradient allreduces as a share of the update, per rank
                           (min..max): the transfer plus waiting for the slowest rank to arrive
    xfer/upd               the transfer alone: one allreduce of the gradient buffer timed after a
                           barrier (bench.worker), times the minibatches, over the update time
    peak RSS               per rank, MB (getrusage ru_maxrss at the end of the run)
    ideal, ratio           1 / (1/env + 1/fwd + epochs/train) per rank from the limits measured with
                           ppo1's own stack at 1 torch thread (bench.limits), in min(ranks, cores)
                           processes at once (as the ranks share the machine), times min(ranks, cores);
                           ratio = SPS / ideal

Presets (8 actors, T=128 and minibatch 32 per actor throughout):
    train          `make train`'s setting: --preset fast on Pong (small CNN, 4 epochs, frames centred,
                   per-minibatch advantages, gradient clipping), 2 ranks x 4 envs
    paper          small CNN, 3 epochs, 2 ranks x 4 envs
    equal          large (Nature) CNN, 4 epochs, 2 ranks x 4 envs
    scaling        small, 3 epochs: 1 rank x 8 envs vs 2 ranks x 4 envs, and the ratio
    oversubscribe  small, 3 epochs: 4 ranks x 2 envs vs 2 ranks x 4 envs (4 ranks on 2 cores)
    recurrent      paper vs the same with --rnn lstm (issue 63: the update's seconds per iteration, at most
                   1.5x the feed-forward's at the same batch)
    all            every scenario above but recurrent
Without --preset one scenario is built from --ranks, --envs_per_rank, --model_type, ... (defaults:
paper). `--compare sb3` also times Stable-Baselines3 PPO at its usual Atari settings (bench.sb3).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import shutil
import resource
import signal
import subprocess
import sys
import tempfile
import time

from ppo1.config import PRECISIONS, RNN_CHOICES

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Targets of issue 5 (this 2-core machine, Pong)
TARGET_PAPER_SPS = 650.0
TARGET_PAPER_VS_SB3 = 2.0
TARGET_EQUAL_VS_SB3 = 1.0
TARGET_SCALING = 1.7
TARGET_ALLREDUCE_SHARE = 0.05
TARGET_RSS_MB = 600.0
TARGET_RECURRENT_UPDATE = 1.5  # a recurrent update's seconds / the feed-forward update's, same batch
NO_COLLAPSE = 0.5   # 4 ranks on 2 cores: a collapse is the multi-x slowdown of oversubscribed threads


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    ranks: int = 2
    envs_per_rank: int = 4
    model_type: str = "small"
    epochs: int = 3
    minibatch: int = 32      # per actor
    horizon: int = 128       # T per actor
    rnn: str = "none"        # --rnn
    preset: str = ""         # the config of `--preset` (its values must match the fields above); "": the paper's

    @property
    def actors(self) -> int:
        return self.ranks * self.envs_per_rank

    @property
    def label(self) -> str:
        return (f"{self.ranks}x{self.envs_per_rank} {self.model_type} e{self.epochs} "
                f"mb{self.minibatch}/actor T{self.horizon}" + ("" if self.rnn == "none" else f" {self.rnn}"))


PAPER = Scenario("paper")
TRAIN = Scenario("train", epochs=4, preset="fast")
EQUAL = Scenario("equal", model_type="large", epochs=4)
ONE_RANK = Scenario("1 rank", ranks=1, envs_per_rank=8)
FOUR_RANKS = Scenario("4 ranks", ranks=4, envs_per_rank=2)
LSTM = Scenario("lstm", rnn="lstm")
PRESETS = {
    "train": [TRAIN],
    "paper": [PAPER],
    "equal": [EQUAL],
    "scaling": [ONE_RANK, PAPER],
    "oversubscribe": [PAPER, FOUR_RANKS],
    "recurrent": [PAPER, LSTM],
    "all": [PAPER, EQUAL, ONE_RANK, FOUR_RANKS],
}


def mpirun(ranks: int) -> list[str]:
    """ppo1's mpirun command (ppo1.distributed.mpirun_command); an error where there is none."""
    from ppo1.distributed import mpirun_command
    cmd = mpirun_command(ranks)
    if cmd is None:
        raise SystemExit("bench.throughput: error: no mpirun found (pip install mpich mpi4py)")
    return cmd


def busy_cpu_seconds() -> float | None:
    """CPU seconds all processes of the machine have used since boot (/proc/stat; None if absent)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU seconds of this process's finished descendants (mpirun, its proxies, the ranks, ...)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _run(cmd: list[str], log_path: str, timeout: float) -> None:
    with open(log_path, "w", encoding="utf-8") as log:
        r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=_env(), timeout=timeout)
    if r.returncode != 0:
        with open(log_path, encoding="utf-8") as f:
            tail = f.read()[-4000:]
        raise SystemExit(f"bench.throughput: error: {' '.join(cmd[:6])} ... exited {r.returncode}:\n{tail}")


def _json_subprocess(module: str, args: dict, log_path: str, timeout: float) -> dict:
    """Run `python -m module JSON` and parse the last line it prints."""
    _run([sys.executable, "-m", module, json.dumps(args)], log_path, timeout)
    with open(log_path, encoding="utf-8") as f:
        return json.loads(f.read().strip().splitlines()[-1])


def concurrent_limits(config: dict, seconds: float, copies: int, log_dir: str) -> dict:
    """bench.limits of `config` in `copies` processes at once (1 torch thread each), as the scenario's ranks run
    side by side on the machine's cores (sharing its caches and memory bandwidth): each limit's mean over them."""
    procs = []
    for i in range(copies):
        log = open(os.path.join(log_dir, f"limits-{i}.log"), "w", encoding="utf-8")
        procs.append((subprocess.Popen([sys.executable, "-m", "bench.limits", json.dumps(
            {"config": config, "seconds": seconds})], stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=_env()), log))
    results = []
    for proc, log in procs:
        code = proc.wait(timeout=600)
        log.close()
        with open(log.name, encoding="utf-8") as f:
            text = f.read().strip()
        if code != 0:
            raise SystemExit(f"bench.throughput: error: bench.limits exited {code}:\n{text[-4000:]}")
        results.append(json.loads(text.splitlines()[-1]))
    out = dict(results[0])
    for key in ("env_sps", "forward_sps", "train_sps"):
        out[key] = sum(r[key] for r in results) / copies
    out["processes"] = copies
    return out


# ---------------------------------------------------------------------------------------------- training
def scenario_config(s: Scenario, args: argparse.Namespace, workdir: str, run: str) -> dict:
    """The Config fields of a scenario's run: its preset's (checked against the scenario) or the paper's with the
    scenario's settings, and the bench's own (a fresh run in `workdir`, no intermediate checkpoints)."""
    from ppo1.config import Config
    bench = {"num_threads": args.num_threads, "seed": 0, "checkpoint_dir": workdir, "model_name": run,
             "save_interval": 10**9, "device": args.device, "compile": args.compile, "rnn": s.rnn, "wandb": args.wandb,
             **({"precision": args.precision} if args.precision else {})}  # else the preset's (fast: auto) or fp32
    if s.preset:
        config = Config.for_preset(s.preset, n_ranks=s.ranks, env_name=args.env_name, **bench)
        made = (config.envs_per_rank, config.model_type, config.optim_epochs, config.optim_batchsize,
                config.timesteps_per_actorbatch)
        if made != (s.envs_per_rank, s.model_type, s.epochs, s.minibatch, s.horizon):
            raise SystemExit(f"bench.throughput: error: --preset {s.preset} on {args.env_name} gives (envs per rank, "
                             f"model, epochs, minibatch per actor, T) {made}, not scenario {s.name}'s")
        return config.to_dict()
    return {"env_name": args.env_name, "env_steps": 10_000_000, "timesteps_per_actorbatch": s.horizon,
            "optim_epochs": s.epochs, "optim_batchsize": s.minibatch, "model_type": s.model_type,
            "envs_per_rank": s.envs_per_rank, **bench}


# The parts of `other` (progress.csv's time_* columns; an older ppo1 lacks them, its `other` is not split)
OTHER_PARTS = ("advantages", "logging", "checkpoint", "evaluation")


def shares(d: dict, wall: float) -> dict:
    """Each part's share of the wall time from the differences `d` of progress.csv's time_* columns."""
    out = {"env": d["time_env"] / wall, "inference": d["time_inference"] / wall, "update": d["time_update"] / wall}
    if "time_rollout" not in d:  # an older ppo1: statistics and every other part together
        out["other"] = 1.0 - sum(out.values())
        return out
    out["statistics"] = d["time_statistics"] / wall
    parts = {"bookkeeping": (d["time_rollout"] - d["time_env"] - d["time_inference"]) / wall,
             **{k: d[f"time_{k}"] / wall for k in OTHER_PARTS}}
    parts["outside"] = 1.0 - sum(out.values()) - sum(parts.values())
    out["other"] = sum(parts.values())
    out["other_parts"] = parts
    return out


def run_training(s: Scenario, args: argparse.Namespace, workdir: str) -> dict:
    """Time one scenario's real training loop. Returns the measured numbers (see module docstring)."""
    run = f"{s.name.replace(' ', '-')}-{s.ranks}x{s.envs_per_rank}-{s.model_type}-{time.monotonic_ns()}"
    spec = {"warmup": args.warmup, "iterations": args.iterations, "config": scenario_config(s, args, workdir, run)}
    spec_path, out_path = os.path.join(workdir, run + ".spec.json"), os.path.join(workdir, run + ".out.json")
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    load_before, t_before = os.getloadavg(), time.monotonic()
    busy_before, own_before = busy_cpu_seconds(), children_cpu_seconds()
    _run(mpirun(s.ranks) + [sys.executable, "-m", "bench.worker", spec_path, out_path],
         os.path.join(workdir, run + ".log"), timeout=300 + 60 * (args.warmup + args.iterations) * s.epochs)
    busy_after, own_after, t_after = busy_cpu_seconds(), children_cpu_seconds(), time.monotonic()
    with open(out_path, encoding="utf-8") as f:
        out = json.load(f)
    with open(os.path.join(workdir, run, "progress.csv"), newline="", encoding="utf-8") as f:
        rows = [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]
    with open(os.path.join(workdir, run, "config.json"), encoding="utf-8") as f:
        precision = json.load(f)["precision"]  # what the run trained in (auto resolved on this machine)
    end = rows[args.warmup + args.iterations - 1]
    begin = rows[args.warmup - 1] if args.warmup > 0 else {k: 0.0 for k in end}
    d = {k: end[k] - begin[k] for k in end if k == "timesteps" or k.startswith("time_")}
    wall = d["time_elapsed"]
    ranks = out["ranks"]
    comm_shares = [r["window_comm_seconds"] / d["time_update"] for r in ranks
                   if r.get("window_comm_seconds") is not None and d["time_update"] > 0]
    minibatches = args.iterations * s.epochs * -(-s.horizon // s.minibatch)
    transfer = ranks[0].get("allreduce_transfer_seconds")
    return {
        "scenario": dataclasses.asdict(s), "label": s.label + (" bf16" if precision == "bf16" else ""),
        "precision": precision, "actors": s.actors,
        "warmup": args.warmup, "iterations": args.iterations, "steps": d["timesteps"], "seconds": wall,
        "sps": d["timesteps"] / wall,
        "share": shares(d, wall),
        "seconds_per_iteration": {k.removeprefix("time_"): v / args.iterations for k, v in d.items()
                                  if k.startswith("time_")},
        "allreduce_share_of_update": d["time_comm"] / d["time_update"] if d["time_update"] > 0 else 0.0,
        "allreduce_share_of_update_per_rank": comm_shares,
        "allreduce_transfer_ms": None if transfer is None else 1e3 * transfer,
        "allreduce_transfer_share_of_update": None if transfer is None or d["time_update"] <= 0
        else transfer * minibatches / d["time_update"],
        "peak_rss_mb": [r["peak_rss_mb"] for r in ranks],
        "torch_threads": [r["torch_threads"] for r in ranks],
        "cpu_seconds": [r["cpu_seconds"] for r in ranks],
        "involuntary_switches": [r["involuntary_switches"] for r in ranks],
        "load_before": load_before, "load_after": os.getloadavg(),
        # cores used by other processes meanwhile: the machine's CPU time minus that of mpirun and the ranks
        "foreign_cores": None if busy_before is None else max(
            0.0, (busy_after - busy_before - (own_after - own_before)) / (t_after - t_before)),
    }


DISTURBED = 0.2  # cores used by other processes during a run that make it count as disturbed


def median_run(s: Scenario, args: argparse.Namespace, workdir: str, say) -> dict:
    """run_training `--repeat` times; the run of median SPS among the undisturbed runs (all runs if
    every one was disturbed), with every run's SPS in `sps_runs`."""
    runs = []
    for i in range(args.repeat):
        say(f"  {s.name}: {s.label}, run {i + 1}/{args.repeat} ...")
        runs.append(run_training(s, args, workdir))
        foreign = runs[-1]["foreign_cores"]
        say(f"    {runs[-1]['sps']:.0f} SPS" + ("" if foreign is None else
            f" (other processes used {foreign:.2f} cores meanwhile{'' if foreign < DISTURBED else ': disturbed'})"))
    quiet = [r for r in runs if r["foreign_cores"] is None or r["foreign_cores"] < DISTURBED] or runs
    quiet.sort(key=lambda r: r["sps"])
    best = dict(quiet[(len(quiet) - 1) // 2])
    best["sps_runs"] = [r["sps"] for r in runs]
    best["disturbed_runs"] = sum(r["foreign_cores"] is not None and r["foreign_cores"] >= DISTURBED for r in runs)
    return best


# ---------------------------------------------------------------------------------------------- report
def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def format_report(report: dict) -> str:
    lines = [f"ppo1 throughput: {report['env_name']}, {report['cores']} cores, torch {report['torch']}, "
             f"--device {report.get('device', 'auto')}{' --compile' if report.get('compile') else ''}"
             f"{' --precision ' + report['precision'] if report.get('precision') else ''}, "
             f"{report['warmup']} warm-up + {report['iterations']} timed iterations, "
             f"load {report['load_start'][0]:.2f} at start, {report['load_end'][0]:.2f} at end", ""]
    head = (f"{'scenario':<9} {'setting':<34} {'SPS':>6} {'env':>4} {'infer':>5} {'update':>6} {'stats':>5} {'other':>5} "
            f"{'allred/upd':>10} {'xfer/upd':>8} {'RSS MB/rank':>12} {'ideal':>6} {'ratio':>5} {'runs (SPS)':>16} {'other load':>10}")
    lines += [head, "-" * len(head)]
    for r in report["runs"]:
        sh, lim = r["share"], r.get("limits")
        per_rank = r["allreduce_share_of_update_per_rank"]
        allred = (f"{_pct(min(per_rank))}..{_pct(max(per_rank))}" if len(per_rank) > 1
                  else _pct(r["allreduce_share_of_update"]))
        rss = "/".join(f"{m:.0f}" for m in r["peak_rss_mb"])
        xfer = "-" if r["allreduce_transfer_share_of_update"] is None else _pct(r["allreduce_transfer_share_of_update"])
        ideal = f"{r['ideal_sps']:.0f}" if lim else "-"
        ratio = f"{r['sps'] / r['ideal_sps']:.2f}" if lim else "-"
        lines.append(f"{r['scenario']['name']:<9} {r['label']:<34} {r['sps']:>6.0f} {_pct(sh['env']):>4} "
                     f"{_pct(sh['inference']):>5} {_pct(sh['update']):>6} {_pct(sh['statistics']) if 'statistics' in sh else '-':>5} "
                     f"{_pct(sh['other']):>5} {allred:>10} {xfer:>8} "
                     f"{rss:>12} {ideal:>6} {ratio:>5} {'/'.join(f'{x:.0f}' for x in r['sps_runs']):>16} "
                     f"{'-' if r['foreign_cores'] is None else format(r['foreign_cores'], '.2f'):>10}")
    split = [r for r in report["runs"] if "other_parts" in r["share"]]
    if split:
        lines += ["", "other, part by part (share of the wall time):"]
        for r in split:
            parts = r["share"]["other_parts"]
            lines.append(f"  {r['scenario']['name']:<9} " + ", ".join(
                f"{name} {100 * parts[name]:.1f}%" for name in ("bookkeeping", *OTHER_PARTS, "outside")))
    if any("limits" in r for r in report["runs"]):
        lines += ["", "limits per rank (1 torch thread, ppo1's own stack; the mean of as many processes at once as "
                      "the scenario's ranks run on the cores):"]
        for r in report["runs"]:
            if "limits" in r:
                lim = r["limits"]
                lines.append(f"  {r['scenario']['name']:<9} env {lim['env_sps']:.0f} steps/s (k={r['scenario']['envs_per_rank']}), "
                             f"forward {lim['forward_sps']:.0f} samples/s (batch {lim['forward_batch']}), "
                             f"train {lim['train_sps']:.0f} samples/s (minibatch {lim['train_minibatch']}) "
                             f"-> ideal {r['ideal_sps_per_rank']:.0f}/rank x {r['ideal_slots']}")
    if "sb3" in report:
        sb = report["sb3"]
        lines += ["", f"Stable-Baselines3 {sb['version']} PPO: {sb['policy']}, {sb['n_envs']} envs ({sb['vec_env']}), "
                      f"n_steps {sb['n_steps']}, {sb['n_epochs']} epochs, batch {sb['batch_size']}, "
                      f"{sb['torch_threads']} torch threads, device {sb.get('device', 'cpu')}: {sb['sps']:.0f} SPS over {sb['steps']} steps, "
                      f"peak RSS {sb['peak_rss_mb']:.0f} MB, other load "
                      f"{'-' if sb['foreign_cores'] is None else format(sb['foreign_cores'], '.2f')} cores"]
    if report["comparisons"]:
        lines += ["", "comparisons:"]
        lines += [f"  {c['what']:<52} {c['value']:>7.2f}  (target {c['op']} {c['target']:g}: "
                  f"{'met' if c['met'] else 'MISSED'})" for c in report["comparisons"]]
    return "\n".join(lines)


def comparisons(runs: dict[str, dict], sb3: dict | None) -> list[dict]:
    out = []

    def add(what, value, op, target):
        out.append({"what": what, "value": value, "op": op, "target": target,
                    "met": value >= target if op == ">=" else value <= target})

    if "paper" in runs:
        add("paper SPS", runs["paper"]["sps"], ">=", TARGET_PAPER_SPS)
        if sb3:
            add("paper SPS / SB3 SPS", runs["paper"]["sps"] / sb3["sps"], ">=", TARGET_PAPER_VS_SB3)
    if "equal" in runs and sb3:
        add("equal work (large, 4 epochs) SPS / SB3 SPS", runs["equal"]["sps"] / sb3["sps"], ">=", TARGET_EQUAL_VS_SB3)
    if "lstm" in runs and "paper" in runs:
        add("recurrent: update seconds / feed-forward's", runs["lstm"]["seconds_per_iteration"]["update"]
            / runs["paper"]["seconds_per_iteration"]["update"], "<=", TARGET_RECURRENT_UPDATE)
    if "1 rank" in runs and "paper" in runs:
        add("scaling: 2 ranks x 4 / 1 rank x 8 SPS", runs["paper"]["sps"] / runs["1 rank"]["sps"], ">=", TARGET_SCALING)
    if "4 ranks" in runs and "paper" in runs:
        add(f"oversubscribed: 4 ranks x 2 / 2 ranks x 4 SPS", runs["4 ranks"]["sps"] / runs["paper"]["sps"], ">=",
            NO_COLLAPSE)
    for name, r in runs.items():
        if r["scenario"]["ranks"] > 1:
            add(f"{name}: time in allreduce / update (rank 0)", r["allreduce_share_of_update"], "<=",
                TARGET_ALLREDUCE_SHARE)
            if r["allreduce_transfer_share_of_update"] is not None:
                add(f"{name}: allreduce transfer alone / update", r["allreduce_transfer_share_of_update"], "<=",
                    TARGET_ALLREDUCE_SHARE)
        add(f"{name}: peak RSS per rank, MB (max)", max(r["peak_rss_mb"]), "<=", TARGET_RSS_MB)
    return out


# ---------------------------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), help="the scenarios of issue 5 (overrides the "
                   "scenario flags below)")
    p.add_argument("--ranks", type=int, default=PAPER.ranks, help="MPI ranks (default: %(default)s)")
    p.add_argument("--envs_per_rank", type=int, default=PAPER.envs_per_rank, help="envs per rank (default: %(default)s)")
    p.add_argument("--model_type", choices=("small", "large", "impala"), default=PAPER.model_type)
    p.add_argument("--epochs", type=int, default=PAPER.epochs, help="optim epochs (default: %(default)s)")
    p.add_argument("--minibatch", type=int, default=PAPER.minibatch, help="minibatch per actor (default: %(default)s)")
    p.add_argument("--horizon", type=int, default=PAPER.horizon, help="T per actor (default: %(default)s)")
    p.add_argument("--env_name", default="PongNoFrameskip-v4")
    p.add_argument("--num_threads", type=int, default=0, help="torch threads per rank; 0 = ppo1's default")
    p.add_argument("--device", default="auto", help="ppo1's --device for every rank (default: %(default)s)")
    p.add_argument("--compile", action="store_true", help="ppo1's --compile (torch.compile the training forward)")
    p.add_argument("--rnn", choices=RNN_CHOICES, default="none", help="ppo1's --rnn (default: %(default)s)")
    p.add_argument("--precision", choices=PRECISIONS, default=None,
                   help="ppo1's --precision (bf16: the update's CNN torso in bfloat16; default: the scenario's preset's, "
                        "train's auto, else fp32)")
    p.add_argument("--wandb", action="store_true", help="ppo1's --wandb (offline without W&B credentials): its cost "
                   "is the SPS beside a run without, and in `other`")
    p.add_argument("--iterations", type=int, default=10, help="timed iterations (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations first (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=1, help="runs per scenario; the median SPS of those that "
                   f"other processes did not disturb (< {DISTURBED} cores) is kept")
    p.add_argument("--no_limits", action="store_true", help="skip the machine-limit measurements")
    p.add_argument("--limit_seconds", type=float, default=3.0, help="seconds per limit measurement")
    p.add_argument("--compare", choices=("sb3",), help="also time Stable-Baselines3 PPO (pip install -e '.[bench]') on --device "
                   "(SB3's own device setting: auto = CUDA where there is a GPU)")
    p.add_argument("--sb3_steps", type=int, default=16384, help="SB3 timed agent steps (default: %(default)s)")
    p.add_argument("--sb3_warmup", type=int, default=2048, help="SB3 untimed agent steps first")
    p.add_argument("--sb3_vec", choices=("dummy", "subproc"), default="dummy",
                   help="SB3's VecEnv: dummy (its default, envs in the learner) or subproc")
    p.add_argument("--json", metavar="PATH", help="also write the whole report as JSON")
    p.add_argument("--keep", action="store_true", help="keep the temporary run directories and logs")
    p.add_argument("--quiet", action="store_true", help="print only the report")
    return p


def add_limits(scenarios: list[Scenario], by_name: dict[str, dict], args: argparse.Namespace, cores: int,
               workdir: str, say) -> None:
    """Each scenario's limits (bench.limits, in as many processes at once as its ranks share the cores), its ideal
    SPS and the ratio of its measured SPS to it, into its run's report."""
    from bench.limits import ideal_sps
    cache: dict[str, dict] = {}
    for s in scenarios:
        config = scenario_config(dataclasses.replace(s, rnn="none"), args, workdir, "limits")
        key = json.dumps(config, sort_keys=True)
        if key not in cache:
            say(f"  limits: k={s.envs_per_rank}, {s.model_type}, minibatch {s.minibatch * s.envs_per_rank} ...")
            cache[key] = concurrent_limits(config, args.limit_seconds, min(s.ranks, cores), workdir)
        r = by_name[s.name]
        r["limits"] = cache[key]
        r["ideal_sps_per_rank"] = ideal_sps(cache[key], s.epochs)
        r["ideal_slots"] = min(s.ranks, cores)
        r["ideal_sps"] = r["ideal_sps_per_rank"] * r["ideal_slots"]
        r["ratio_to_ideal"] = r["sps"] / r["ideal_sps"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # SIGTERM as an exception: the running mpirun is killed and the temporary directory removed
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.iterations < 1 or args.warmup < 0 or args.repeat < 1:
        raise SystemExit("bench.throughput: error: need --iterations >= 1, --warmup >= 0, --repeat >= 1")
    if args.preset:
        scenarios = PRESETS[args.preset]
    else:
        scenarios = [Scenario("custom", args.ranks, args.envs_per_rank, args.model_type, args.epochs,
                              args.minibatch, args.horizon, args.rnn)]
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    import torch

    from ppo1.errors import PPO1Error
    from ppo1 import device as devices

    try:  # rank 0's device, named as ppo1's first console line names it; a bad --device stops here
        where = devices.describe(devices.select_device(args.device, 0))
    except PPO1Error as e:
        raise SystemExit(f"bench.throughput: error: {e}")
    workdir = tempfile.mkdtemp(prefix="ppo1-bench-")
    report = {"env_name": args.env_name, "cores": devices.cpu_count(), "torch": torch.__version__, "warmup": args.warmup,
              "device": args.device if where == args.device else f"{args.device}: {where}", "compile": args.compile,
              "precision": args.precision, "iterations": args.iterations, "load_start": os.getloadavg(), "runs": [], "comparisons": []}
    try:
        by_name: dict[str, dict] = {}
        for s in scenarios:
            by_name[s.name] = median_run(s, args, workdir, say)
        if args.compare == "sb3":
            say(f"  SB3 PPO: {args.sb3_warmup} + {args.sb3_steps} steps ({args.sb3_vec}) ...")
            busy_before, own_before, t_before = busy_cpu_seconds(), children_cpu_seconds(), time.monotonic()
            sb3 = report["sb3"] = _json_subprocess(
                "bench.sb3", {"env_name": args.env_name, "steps": args.sb3_steps, "warmup": args.sb3_warmup,
                              "vec": args.sb3_vec, "device": args.device}, os.path.join(workdir, "sb3.log"), timeout=3600)
            busy_after, own_after, t_after = busy_cpu_seconds(), children_cpu_seconds(), time.monotonic()
            sb3["foreign_cores"] = None if busy_before is None else max(
                0.0, (busy_after - busy_before - (own_after - own_before)) / (t_after - t_before))
            say(f"    {sb3['sps']:.0f} SPS")
        if not args.no_limits:
            add_limits(scenarios, by_name, args, report["cores"], workdir, say)
        report["runs"] = list(by_name.values())
        report["comparisons"] = comparisons(by_name, report.get("sb3"))
        report["load_end"] = os.getloadavg()
    finally:
        if args.keep:
            say(f"  run directories and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(format_report(report), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
