"""Benchmarks of ppo1 (not tests): `python -m bench.throughput --help`, `python -m bench.games --help`.

    bench.throughput  the launcher: scenarios, presets, the report
    bench.worker      one timed training run (ppo1.trainer.train) under `mpirun -np R`
    bench.limits      the machine's limits with ppo1's own stack: env-only, forward and train samples/s
    bench.sb3         Stable-Baselines3 PPO at its usual Atari settings, for `--compare sb3`
    bench.learning    learning curves of named benchmarks (Hopper, CartPole; see docs/benchmarks.md)
    bench.games       one preset on several Atari games, as a user runs it (docs/benchmarks.md)
    bench.reference   ppo1 beside Stable-Baselines3 at the same settings (docs/benchmarks.md)

Run from the clone (they are not installed): `python -m bench.games --help`.
"""
