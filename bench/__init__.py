"""Throughput benchmarks of ppo1 (not tests): `python -m bench.throughput --help`.

    bench.throughput  the launcher: scenarios, presets, the report
    bench.worker      one timed training run (ppo1.train.train) under `mpirun -np R`
    bench.limits      the machine's limits with ppo1's own stack: env-only, forward and train samples/s
    bench.sb3         Stable-Baselines3 PPO at its usual Atari settings, for `--compare sb3`
    bench.learning    learning curves of named benchmarks (see docs/learning.md)
"""
