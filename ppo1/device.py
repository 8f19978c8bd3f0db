"""Where the policy runs: `--device` parsing and selection, one GPU per local rank, device-free checkpoint state,
Adam's choice, and the precision `--precision auto` picks (the rollout's host<->device transfers:
ppo1.rollout.batched_act).

    spec = parse_device("cuda:1")                 # ("cuda", 1); PPO1Error for anything else
    dev = select_device("auto", local_rank)       # torch.device: cuda:<local_rank % gpus> or cpu
    configure(dev, deterministic)                 # cuDNN / cuBLAS settings of --deterministic
    state = to_cpu(optimizer.state_dict())        # checkpoints hold CPU tensors only
    precision = resolve_precision("auto", model_type, capable)  # fp32 or bf16 (ppo1.update_pass applies it)

On the CPU nothing here copies or moves anything: to_cpu returns CPU tensors as they are.
"""
from __future__ import annotations

import os
import socket
from typing import Any, Callable

import torch

from ppo1.errors import PPO1Error, RanksError
from ppo1.adam import Adam

DEVICE_KINDS = ("auto", "cpu", "cuda", "cuda:N")


def parse_device(text: str) -> tuple[str, int | None]:
    """`auto`, `cpu`, `cuda` or `cuda:N` as (kind, index or None). Raises PPO1Error for anything else."""
    if not isinstance(text, str):
        raise PPO1Error(f"--device={text!r} is invalid: must be one of {', '.join(DEVICE_KINDS)}")
    t = text.strip().lower()
    if t in ("auto", "cpu", "cuda"):
        return t, None
    if t.startswith("cuda:") and t[5:].isdigit():
        return "cuda", int(t[5:])
    raise PPO1Error(f"--device={text!r} is invalid: must be one of {', '.join(DEVICE_KINDS)} "
                    "(N: a GPU number on this node)")


def device_for_rank(text: str, local_rank: int, gpus: int) -> str:
    """The device rank `local_rank` of a node with `gpus` visible GPUs uses for `--device text`.

    auto: cuda:<local_rank % gpus> when there is a GPU, else cpu. cuda: the same, but an error
    without a GPU. cuda:N: GPU N on every rank (an error unless N < gpus). cpu: cpu.
    Returns a torch device string; raises PPO1Error.
    """
    kind, index = parse_device(text)
    if kind == "cpu" or (kind == "auto" and gpus == 0):
        return "cpu"
    if gpus == 0:
        raise PPO1Error(f"--device={text} is invalid here: torch sees no CUDA device "
                        f"(torch {torch.__version__}, CUDA {torch.version.cuda or 'not built in'}); "
                        "use --device cpu or auto")
    if index is None:
        return f"cuda:{local_rank % gpus}"
    if index >= gpus:
        raise PPO1Error(f"--device={text} is invalid on {socket.gethostname()}: it has {gpus} visible "
                        f"GPU(s), cuda:0 to cuda:{gpus - 1}")
    return f"cuda:{index}"


def cuda_count() -> int:
    """Visible CUDA devices (0 on a CPU build of torch or without a driver)."""
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken driver counts as no GPU
        return 0


def select_device(text: str, local_rank: int) -> torch.device:
    """The torch.device this rank uses for `--device text` (see device_for_rank). Raises PPO1Error."""
    return torch.device(device_for_rank(text, local_rank, cuda_count()))


def configure(device: torch.device, deterministic: bool) -> None:
    """Make `device` current; on CUDA with `deterministic`, ask torch for deterministic kernels
    (cuBLAS workspace, cuDNN deterministic and not benchmarking). Call before any CUDA work."""
    if device.type != "cuda":
        return
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic
    torch.cuda.set_device(device)


def describe(device: torch.device) -> str:
    """e.g. `cpu`, or `cuda:0 (NVIDIA H100 80GB HBM3)`."""
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def devices_line(per_rank: list[tuple[str, str]]) -> str:
    """The console line naming each rank's device, from every rank's (host, description).

    `ppo1: device cpu on all 2 ranks`, or `ppo1: devices: rank 0 cuda:0 (...), rank 1 cuda:1 (...)`,
    with the host names when the ranks run on more than one host.
    """
    hosts = {h for h, _ in per_rank}
    names = [d for _, d in per_rank]
    if len(set(names)) == 1 and len(hosts) == 1:
        return f"ppo1: device {names[0]}" + (f" on all {len(names)} ranks" if len(names) > 1 else "")
    parts = [f"rank {r} {d}" + (f" on {h}" if len(hosts) > 1 else "") for r, (h, d) in enumerate(per_rank)]
    return "ppo1: devices: " + ", ".join(parts)


def cpu_count() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def fit_threads(n: int, log: Callable[[str], None] = print) -> int:
    """`n` torch threads, or the cores this process may use when fewer (saying so through `log`)."""
    cores = cpu_count()
    if n > cores:
        log(f"ppo1: note: --num_threads={n} is more than the {cores} cores this process may use; using {cores}")
        return cores
    return n


def to_cpu(obj: Any) -> Any:
    """`obj` (a state dict, nested dicts/lists) with every tensor on the CPU; CPU tensors are not copied."""
    if isinstance(obj, torch.Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def rng_state(device: torch.device) -> torch.Tensor | None:
    """The CUDA generator state of `device` (the rollout samples actions there), None on the CPU."""
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else None


def set_rng_state(device: torch.device, state: torch.Tensor | None) -> None:
    """Restore a state from rng_state, when both the checkpoint and this run are on CUDA."""
    if device.type == "cuda" and state is not None:
        torch.cuda.set_rng_state(state, device)


def make_adam(params, device: torch.device, lr: float, eps: float, compiled: bool = False):
    """Adam with the parameters' state on `device`: torch's fused kernels on CUDA; on the CPU ppo1's own
    (ppo1.adam: torch's CPU arithmetic without the import of torch._dynamo that torch's optimizers make,
    over a second of CPU per process), stepping with torch's fused CPU kernel where the update is `compiled`
    (--compile: its arithmetic is the compiler's already). Both keep torch.optim.Adam's state_dict layout."""
    if device.type == "cuda":
        return torch.optim.Adam(params, lr=lr, eps=eps, fused=True)
    return Adam(params, lr=lr, eps=eps, fused=compiled)




def bf16_capable(device: torch.device, cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether `device` computes bfloat16 in hardware: a GPU that torch says supports it, or a CPU whose flags
    name AMX-BF16 or AVX512-BF16 (read from `cpuinfo`; False where it cannot be read)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    try:
        with open(cpuinfo) as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def resolve_precision(requested: str, model_type: str, capable: list[bool]) -> str:
    """The precision a run trains in: `requested` (fp32, bf16), or for `auto` bf16 when the policy has a CNN
    torso and every rank's device computes bfloat16 in hardware (`capable`, one per rank), else fp32. Raises
    PPO1Error (the same on every rank, which all pass the same `capable`) for bf16 where a rank's device does not
    compute it in hardware."""
    if requested == "bf16" and not all(capable):
        raise RanksError(f"--precision bf16 is invalid here: rank {capable.index(False)}'s device computes no "
                         "bfloat16 in hardware (a CPU needs AVX512-BF16 or AMX-BF16, a GPU bfloat16 support); use "
                         "--precision auto (fp32 here) or fp32")
    if requested != "auto":
        return requested
    return "bf16" if model_type != "mlp" and all(capable) else "fp32"


def host_name() -> str:
    return socket.gethostname()


def default_threads(config, cores: int, local_ranks: int) -> int:
    """torch threads per rank of a run of `config` (its Config): 1 if --deterministic, else --num_threads, else 1 for a feed-forward MLP (its
    tensors are too small to share out: a second thread only waits on the first, and where another process holds a
    core the two wait on each other, 3.7x slower in docs/throughput.md), else the node's cores / its ranks."""
    if config.deterministic:
        return 1
    if config.num_threads:
        return config.num_threads
    if config.model_type == "mlp" and config.rnn == "none":
        return 1
    return max(1, cores // local_ranks)


def configure_threads(config, comm, log=print) -> int:
    """Set this rank's torch threads (default_threads, at most the cores this process may use); returns them."""
    n = fit_threads(default_threads(config, cpu_count(), comm.local_size), log)
    torch.set_num_threads(n)
    if config.deterministic or torch.are_deterministic_algorithms_enabled():
        torch.use_deterministic_algorithms(config.deterministic)  # imports Inductor: ~1 s of CPU per process
    return n


def setup_rank(spec: str, deterministic: bool, comm, log: Callable[[str], None] = print) -> torch.device:
    """Collective: every rank selects and configures its device for `--device spec`; a bad or
    unavailable device on any rank raises PPO1Error on every rank. Rank 0 then logs the line naming
    each rank's device. Returns this rank's torch.device."""
    error, device = None, None
    try:
        device = select_device(spec, comm.local_rank)
        configure(device, deterministic)
    except PPO1Error as e:
        error = e
    comm.agree(error)
    per_rank = comm.gather((host_name(), describe(device)))
    if comm.is_root:
        log(devices_line(per_rank))
    return device
