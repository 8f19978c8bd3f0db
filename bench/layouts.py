"""Memory layout and precision per network on this machine's CPU: `python -m bench.layouts`.

For each CNN torso (small, large = Nature, impala) on 84x84 stacks of 4 frames (impala: 64x64x3), one torch
thread, the milliseconds of
    train    forward + backward of a minibatch of 256 frames (the update's work per minibatch)
    infer k  a forward pass without gradients of k frames (the rollout's batch of k envs)
with the frames NCHW or channels-last (NHWC in memory) and the torso in float32 or under bfloat16 autocast.
Each cell is the median of --repeat interleaved rounds (every variant once per round, so a busy machine slows
them alike); the fastest of each row is marked. ppo1 keeps, per network, the layout that is fastest here in
float32 (CnnPolicy.channels_last) and runs bf16 only in the update (--precision bf16 / auto).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from ppo1.policies import CnnPolicy

SHAPES = {"small": (4, 84, 84), "large": (4, 84, 84), "impala": (3, 64, 64)}
VARIANTS = [(layout, precision) for precision in ("fp32", "bf16") for layout in ("NCHW", "NHWC")]


def _time(fn, calls: int) -> float:
    """Milliseconds per call of fn(), after one untimed call."""
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def _variant(policy: CnnPolicy, frames: torch.Tensor, layout: str, precision: str, train: bool):
    x = frames.contiguous(memory_format=torch.channels_last) if layout == "NHWC" else frames.contiguous()
    dtype = torch.bfloat16 if precision == "bf16" else None

    def run():
        with torch.set_grad_enabled(train), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
            h = policy.torso(x.float().div_(255.0))
        if train:
            policy.zero_grad(set_to_none=True)
            h.float().square().mean().backward()
    return run


def measure(model_type: str, batches: list[int], repeat: int, calls: int) -> dict:
    """{(row, layout, precision): median ms} for the train row and an infer row per batch size."""
    torch.manual_seed(0)
    shape = SHAPES[model_type]
    policy = CnnPolicy(6, model_type, obs_shape=shape)
    rows = [("train", 256, True)] + [(f"infer {k}", k, False) for k in batches]
    frames = {n: torch.randint(0, 256, (n, *shape), dtype=torch.uint8) for _, n, _ in rows}
    times: dict = {}
    for _ in range(repeat):
        for row, n, train in rows:
            for layout, precision in VARIANTS:
                ms = _time(_variant(policy, frames[n], layout, precision, train), calls if train else 10 * calls)
                times.setdefault((row, layout, precision), []).append(ms)
    return {key: statistics.median(v) for key, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.layouts", description=__doc__.splitlines()[0])
    p.add_argument("--models", default="small,large,impala")
    p.add_argument("--batches", default="4,16", help="the rollout's batches (envs per rank) to time inference at")
    p.add_argument("--repeat", type=int, default=5, help="interleaved rounds (the median is reported)")
    p.add_argument("--calls", type=int, default=3, help="timed train calls per cell and round (10x for infer)")
    args = p.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        report(args)
    finally:
        torch.set_num_threads(threads)
    return 0


def report(args) -> None:
    """The table of main's arguments, printed row by row."""
    batches = [int(b) for b in args.batches.split(",")]
    print("| network | work | " + " | ".join(f"{lay} {prec}" for lay, prec in VARIANTS) + " |")
    print("| --- | --- |" + " --- |" * len(VARIANTS))
    for model_type in args.models.split(","):
        result = measure(model_type, batches, args.repeat, args.calls)
        for row in ["train"] + [f"infer {k}" for k in batches]:
            cells = [result[(row, lay, prec)] for lay, prec in VARIANTS]
            best = min(cells)
            text = [f"**{c:.2f}**" if c == best else f"{c:.2f}" for c in cells]
            print(f"| {model_type} | {row} | " + " | ".join(text) + " |", flush=True)
    print(f"(ms, median of {args.repeat} interleaved rounds, 1 torch thread; torch {torch.__version__})")


if __name__ == "__main__":
    raise SystemExit(main())
