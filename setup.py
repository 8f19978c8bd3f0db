"""ppo1: MPI-parallel PPO for Atari in PyTorch (a port of OpenAI baselines' ppo1)."""
from setuptools import find_packages, setup

setup(
    name="ppo1",
    version="0.1.0",
    description="MPI-parallel PPO (Schulman et al., 2017) for Atari in PyTorch",
    long_description=open("README.md", encoding="utf-8").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["ppo1", "ppo1.*"]),  # bench/ runs from the clone: python -m bench.games
    py_modules=["run_atari"],
    install_requires=[
        # The Makefile installs torch==2.13.0 (CPU build) first; this range must admit it.
        "torch>=2.2,<3",
        "numpy>=1.24,<3",
        "mpi4py>=4.0,<5",
        # MPI from PyPI, so no system package is needed; a system MPI works too.
        "mpich>=4.2; sys_platform == 'linux'",
        "gymnasium[atari,classic-control]>=1.0,<2",  # classic-control: pygame, to render CartPole & co.
        "ale-py>=0.10,<1",
        "opencv-python-headless>=4.8",
        "moviepy>=2.0,<3",
        "tensorboard>=2.14,<3",
        "matplotlib>=3.7",  # --mode plot (Agg backend: no display needed)
    ],
    extras_require={
        "test": ["pytest>=8", "pytest-timeout>=2.3", "pytest-xdist>=3.5"],
        "mujoco": ["gymnasium[mujoco]>=1.0,<2"],
        # --env_name procgen:<game>: the original Procgen games behind gymnasium (Python 3.13+ only)
        "procgen": ["procgen-gym>=0.1.1,<0.2; python_version >= '3.13'"],
        # --env_name Vizdoom<Scenario>-v1: ViZDoom's gymnasium ids (its wheels ship the engine and scenarios)
        "vizdoom": ["vizdoom>=1.2.3,<2"],
        # examples/pokemon_emerald.py: a GBA emulator (mGBA) with pygba's game wrappers; the mgba wheel
        # needs Debian's libmgba0.10 (apt-get install libmgba0.10) and exists for Python 3.10 and 3.11 only
        # (elsewhere the extra installs without it, so `make venv` works on 3.12 and 3.13, and tests/test_gba.py
        # skips there with a reason)
        "gba": ["pygba>=0.2", "mgba>=0.10; python_version < '3.12'", "pillow"],
        # --env_name stable_retro:make --env_kwargs '{"game": "Airstriker-Genesis-v0", ...}': Genesis, SNES,
        # NES, Atari 2600 ... emulators (libretro cores in the wheel) with the free Airstriker ROM; from 1.0 its
        # import name is stable_retro (retro is a deprecated alias) and its game names end in -v0
        "retro": ["stable-retro>=1.0,<2"],
        # --wandb: training logs to Weights & Biases (offline into the run directory without credentials)
        "wandb": ["wandb>=0.19,<1"],
        # `python -m bench.throughput --compare sb3`, bench.reference (sb3-contrib: its --rnn side), POPGym's memory
        # tasks for bench.learning; needs no other torch than the one installed
        "bench": ["stable-baselines3>=2.3,<3", "sb3-contrib>=2.3,<3", "popgym>=1.0,<2"],
    },
    # `ppo1 ARGS`, as `python -m ppo1 ARGS` and `python -m run_atari ARGS`
    entry_points={"console_scripts": ["ppo1=ppo1.__main__:main"]},
)
