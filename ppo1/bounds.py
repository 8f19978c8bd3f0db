"""Upper bounds on the flags that could hurt the machine, and a RAM check of one iteration's batch.

--num_threads is clamped to the cores available (device.configure_threads, play.load_trained);
counts and sizes are refused above these bounds with one line.
"""
from __future__ import annotations


from ppo1.errors import PPO1Error

MAX_ENVS_PER_RANK = 256     # envs stepped by one process; more belong on more ranks
MAX_FRAMES = 108_000        # 30 minutes of game at 60 fps: the ALE's own episode limit
MAX_EPISODES = 10_000       # games one `--mode play` plays


def available_ram() -> int | None:
    """Bytes of RAM available for new allocations (MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_batch_ram(horizon: int, envs: int, obs_bytes: int, ranks_on_node: int) -> None:
    """Raise PPO1Error if one iteration's batch (T x k observations of `obs_bytes` each and their per-step numbers)
    of every rank on this node would not fit in the RAM available."""
    per_step = obs_bytes + 64  # observation + actions, log-probs, values, ...
    need = horizon * envs * per_step * ranks_on_node
    have = available_ram()
    if have is not None and need > 0.8 * have:
        raise PPO1Error(
            f"one iteration's batch needs {need / 1e9:.1f} GB on this node ({ranks_on_node} rank(s) x "
            f"{envs} envs x {horizon} steps), only {have / 1e9:.1f} GB is available: lower "
            f"--timesteps_per_actorbatch or --envs_per_rank")
