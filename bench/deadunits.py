"""How much of a run's CNN is alive: per ReLU layer, how many units are positive on any of N real frames.

    python -m bench.deadunits --model_name pong-fast-warm              # the run's newest checkpoint
    python -m bench.deadunits --model_name pong-fast-warm --frames 2000

A ReLU unit (a filter of a convolution, a unit of the hidden layer) is alive if its output is positive
for at least one of the frames; a dead unit passes no gradient, so no update revives it. If every
filter of the first convolution is dead, the network's outputs are the same for every frame: the
policy cannot depend on the screen and the value explains nothing (explained variance 0.000 in
progress.csv). The frames are those of whole games played with uniformly random actions (the eval
env: real games, seeded by `--seed`), so a unit that fires only in states random play never reaches
counts as dead here. Also printed: the spread of the value and of the logits over the frames.
One process, no mpirun; CNN policies only.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from ppo1 import PPO1Error  # light: ppo1/__init__.py imports nothing


def live_units(torso, frames) -> list[tuple[str, int, int]]:
    """(layer name, live units, units) for each ReLU of `torso` (an nn.Sequential) on `frames` (N, ...)
    float: a unit is live if its output is positive for at least one frame (any position of a filter)."""
    import torch

    out, layer, n = [], None, 0
    h = frames
    with torch.no_grad():
        for module in torso:
            h = module(h)
            if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
                layer = module
            if isinstance(module, torch.nn.ReLU):
                n += 1
                per_unit = (h > 0).reshape(h.shape[0], h.shape[1], -1).any(dim=2).any(dim=0)
                kind = (f"conv {n} ({layer.out_channels} filters)" if isinstance(layer, torch.nn.Conv2d)
                        else f"hidden ({layer.out_features} units)")
                out.append((kind, int(per_unit.sum()), int(per_unit.numel())))
    return out


def random_frames(env_name: str, n: int, seed: int) -> np.ndarray:
    """(n, 4, 84, 84) uint8 observations of real games played with uniformly random actions."""
    from ppo1.envs import make_eval_env

    env = make_eval_env(env_name, np.random.SeedSequence([seed]))
    rng = np.random.default_rng(seed)
    try:
        obs, frames = env.reset(), []
        for _ in range(n):
            obs, _reward, _done, _episode = env.step(int(rng.integers(env.num_actions)))
            frames.append(np.array(obs, copy=True))
    finally:
        env.close()
    return np.stack(frames)


def report(checkpoint_dir: str, model_name: str, n_frames: int, seed: int, out=print) -> list[tuple[str, int, int]]:
    """Load the run's newest checkpoint, print the live units of each layer. Returns live_units()."""
    import torch

    from ppo1.config import Config
    from ppo1.distributed import Comm
    from ppo1.evaluate import load_trained

    trained = load_trained(Config(checkpoint_dir=checkpoint_dir, model_name=model_name), {}, Comm(None))
    policy = trained.policy
    if not hasattr(policy, "torso"):
        raise PPO1Error(f"{model_name} is an MLP policy: bench.deadunits reads CNN policies only")
    obs = torch.from_numpy(random_frames(trained.config.env_name, n_frames, seed))
    x = policy.torso_input(obs)  # as the model reads them: scaled, and centred with --frame_norm center
    layers = live_units(policy.torso, x)
    out(f"{model_name}: {n_frames} frames of random play in {trained.config.env_name}")
    for kind, live, total in layers:
        out(f"  {kind}: {live} alive, {total - live} dead ({100.0 * live / total:.0f}% alive)")
    with torch.no_grad():
        logits, values = policy(obs)
    out(f"  value: mean {values.mean().item():.3f}, std over the frames {values.std().item():.4f}; "
        f"logits: std over the frames {logits.std(dim=0).mean().item():.4f}")
    return layers


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.deadunits", description=__doc__.split("\n\n")[0])
    p.add_argument("--model_name", required=True, help="the run to load (its newest checkpoint)")
    p.add_argument("--checkpoint_dir", default="checkpoints", help="where the run's directory is")
    p.add_argument("--frames", type=int, default=600, help="frames of random play to look at")
    p.add_argument("--seed", type=int, default=0, help="seed of the games and the random actions")
    args = p.parse_args(argv)
    try:
        if args.frames < 2:
            raise PPO1Error("--frames must be a whole number >= 2")
        report(args.checkpoint_dir, args.model_name, args.frames, args.seed)
    except PPO1Error as e:
        print(f"bench.deadunits: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
