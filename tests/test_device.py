"""--device, one GPU per local rank, device-free checkpoints, --compile and its fallback.

CPU-only CI runs everything but the tests marked `cuda`, which need a GPU and run where torch sees one.
"""
import dataclasses
import json
import os
import re

import numpy as np
import pytest
import torch

from conftest import TINY, copy_run, run_cli, run_script
from ppo1 import PPO1Error, checkpoint
from ppo1.config import Config
from ppo1.device import (bf16_capable, cuda_count, device_for_rank, devices_line,
                         parse_device, resolve_precision, to_cpu)
from ppo1.distributed import Comm
from ppo1.observations import Obs
from ppo1.policies import build
from ppo1.rollout import batched_act

HERE = os.path.dirname(os.path.abspath(__file__))
cuda = pytest.mark.skipif(cuda_count() == 0, reason="needs a CUDA GPU")


def error_lines(r):
    return [line for line in r.stderr.splitlines() if line.strip()]


def test_threads_and_determinism_are_set_for_each_run_without_importing_inductor_when_off():
    """torch.use_deterministic_algorithms imports Inductor (about a second of CPU per process); a run that
    is not --deterministic skips it, and one after a --deterministic run in the same process turns it off."""
    code = ("import sys, torch; from ppo1.config import Config; from ppo1.distributed import Comm; "
            "from ppo1.device import configure_threads; "
            "configure_threads(Config(), Comm()); print('torch._inductor' in sys.modules); "
            "configure_threads(Config(deterministic=True), Comm()); print(torch.are_deterministic_algorithms_enabled()); "
            "configure_threads(Config(), Comm()); print(torch.are_deterministic_algorithms_enabled())")
    r = run_script("-c", 1, code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True", "False"]


@pytest.mark.parametrize("fields, cores, ranks, threads", [
    ({"model_type": "small"}, 16, 2, 8), ({"model_type": "small"}, 2, 1, 2), ({"model_type": "small"}, 2, 4, 1),
    ({"model_type": "mlp"}, 16, 1, 1),                       # a feed-forward MLP: one thread, whatever the cores
    ({"model_type": "mlp", "rnn": "lstm"}, 16, 2, 8),       # a recurrent core shares out as the CNNs do
    ({"model_type": "mlp", "num_threads": 3}, 16, 1, 3),    # what the user gives stands
    ({"model_type": "small", "deterministic": True}, 16, 1, 1)])
def test_torch_threads_per_rank_by_default_and_as_given(fields, cores, ranks, threads):
    from ppo1.device import default_threads
    assert default_threads(Config(**fields), cores, ranks) == threads


# ------------------------------------------------------------------ pure: parsing and mapping
@pytest.mark.parametrize("text, parsed", [("auto", ("auto", None)), ("cpu", ("cpu", None)),
                                          ("cuda", ("cuda", None)), ("cuda:0", ("cuda", 0)),
                                          ("cuda:12", ("cuda", 12)), (" CUDA:1 ", ("cuda", 1))])
def test_parse_device(text, parsed):
    assert parse_device(text) == parsed


@pytest.mark.parametrize("text", ["tpu", "gpu", "", "cuda:", "cuda:-1", "cuda:x", "cuda0", "mps", "cpu:0", 3])
def test_parse_device_refuses_anything_else_naming_the_value(text):
    with pytest.raises(PPO1Error, match=r"--device=.* is invalid: must be one of auto, cpu, cuda, cuda:N"):
        parse_device(text)


@pytest.mark.parametrize("spec, gpus, expected", [
    ("auto", 0, ["cpu"] * 4),
    ("cpu", 2, ["cpu"] * 4),
    ("auto", 1, ["cuda:0"] * 4),
    ("auto", 2, ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]),
    ("cuda", 4, ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]),
    ("cuda", 3, ["cuda:0", "cuda:1", "cuda:2", "cuda:0"]),
    ("cuda:1", 2, ["cuda:1"] * 4),
])
def test_local_rank_to_device(spec, gpus, expected):
    assert [device_for_rank(spec, local_rank, gpus) for local_rank in range(4)] == expected


def test_cuda_without_a_gpu_and_a_gpu_number_out_of_range_are_errors():
    with pytest.raises(PPO1Error, match="--device=cuda is invalid here: torch sees no CUDA device"):
        device_for_rank("cuda", 0, 0)
    with pytest.raises(PPO1Error, match="--device=cuda:0 is invalid here: torch sees no CUDA device"):
        device_for_rank("cuda:0", 0, 0)
    with pytest.raises(PPO1Error, match=r"--device=cuda:3 is invalid on .*: it has 1 visible GPU\(s\), cuda:0 to cuda:0"):
        device_for_rank("cuda:3", 0, 1)


def test_devices_line():
    assert devices_line([("a", "cpu")]) == "ppo1: device cpu"
    assert devices_line([("a", "cpu")] * 3) == "ppo1: device cpu on all 3 ranks"
    assert devices_line([("a", "cuda:0 (G)"), ("a", "cuda:1 (G)")]) == \
        "ppo1: devices: rank 0 cuda:0 (G), rank 1 cuda:1 (G)"
    assert devices_line([("a", "cuda:0 (G)"), ("b", "cuda:0 (G)")]) == \
        "ppo1: devices: rank 0 cuda:0 (G) on a, rank 1 cuda:0 (G) on b"


def test_to_cpu_keeps_structure_and_does_not_copy_cpu_tensors():
    t = torch.arange(3.0)
    state = {"a": t, "b": [t, (1, t)], "c": {"d": None, "e": "x"}}
    out = to_cpu(state)
    assert out["a"] is t and out["b"][0] is t and out["b"][1] == (1, t) and out["c"] == {"d": None, "e": "x"}


def test_comm_exposes_the_local_rank(mpi_checks):
    c = Comm(None)
    assert (c.local_rank, c.local_size) == (0, 1)
    found = sorted(re.findall(r"rank (\d) local_rank (\d) local_size (\d)", mpi_checks))  # tests/mpi/local_rank.py
    assert found == [("0", "0", "2"), ("1", "1", "2")], mpi_checks


def test_cpu_batched_act_is_policy_act_on_the_same_arrays():
    policy = build("small", 6)
    obs = Obs({"image": np.random.default_rng(0).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)})
    act = batched_act(policy, torch.device("cpu"), obs)
    torch.manual_seed(1)
    a, lp, v, state = act(obs)
    torch.manual_seed(1)
    a2, lp2, v2, _ = policy.act(obs.map(torch.from_numpy))
    assert state is None  # a feed-forward policy carries no state
    assert a.dtype == np.int64 and lp.dtype == v.dtype == np.float32
    np.testing.assert_array_equal(a, a2.numpy())
    np.testing.assert_array_equal(lp, lp2.numpy())
    np.testing.assert_array_equal(v, v2.numpy())


def test_bf16_capable_reads_the_cpu_flags_and_auto_needs_every_rank_and_a_cnn(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile\n")
    assert bf16_capable(torch.device("cpu"), str(info))
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n")
    assert not bf16_capable(torch.device("cpu"), str(info))
    assert not bf16_capable(torch.device("cpu"), str(tmp_path / "missing"))
    assert resolve_precision("auto", "small", [True, True]) == "bf16"
    assert resolve_precision("auto", "small", [True, False]) == "fp32"  # mixed hosts: fp32 unless every rank can
    assert resolve_precision("auto", "mlp", [True]) == "fp32"
    assert resolve_precision("fp32", "small", [False]) == "fp32" and resolve_precision("bf16", "small", [True]) == "bf16"
    with pytest.raises(PPO1Error, match=r"^--precision bf16 is invalid here: rank 1's device computes no bfloat16 in "
                                        r"hardware .*; use --precision auto \(fp32 here\) or fp32$") as refused:
        resolve_precision("bf16", "small", [True, False])
    assert refused.value.all_ranks  # every rank resolves the same gathered list: rank 0 says the line for all


def test_precision_auto_resolves_on_this_machine_is_saved_and_is_a_setting_of_the_machine(tmp_path):
    common = [*TINY, "--checkpoint_dir", str(tmp_path), "--model_name", "b"]
    r = run_cli([*common, "--precision", "auto", "--stop_after_iterations", "1"])
    assert r.returncode == 0, r.stderr
    here = "bf16" if bf16_capable(torch.device("cpu")) else "fp32"
    assert f"ppo1: --precision auto: {here}" in r.stdout.splitlines()
    assert json.loads((tmp_path / "b" / "config.json").read_text())["precision"] == here
    r = run_cli(common)  # resumed without the flag: fp32, as for --device
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "b" / "config.json").read_text())["precision"] == "fp32"
    assert "ppo1: done: 512 steps in 2 iterations" in r.stdout


def test_fast_trains_at_precision_auto_and_a_resumed_fast_run_resolves_it_again(tmp_path):
    from ppo1.cli import build_config, build_parser
    where = ["--checkpoint_dir", str(tmp_path), "--model_name", "f"]
    fresh = build_config(build_parser().parse_args(["--preset", "fast", *where]))
    assert fresh.precision == "auto" and Config.for_preset("paper").precision == "fp32"
    (tmp_path / "f").mkdir()
    saved = dataclasses.replace(fresh, precision="bf16")  # config.json holds what auto resolved to on its machine
    (tmp_path / "f" / "config.json").write_text(saved.to_json())
    assert build_config(build_parser().parse_args(where)).precision == "auto"  # the preset's, resolved anew
    assert build_config(build_parser().parse_args(["--precision", "fp32", *where])).precision == "fp32"


def test_bf16_is_refused_for_mlp_policies():
    with pytest.raises(PPO1Error, match="--precision"):
        Config(env_name="CartPole-v1", model_type="mlp", precision="bf16").validate()


# ------------------------------------------------------------------ the CLI on the CPU
def test_cpu_run_then_resumed_with_another_device_string(tmp_path):
    common = [*TINY, "--checkpoint_dir", str(tmp_path), "--model_name", "d"]
    r = run_cli([*common, "--device", "cpu", "--stop_after_iterations", "1"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "ppo1: device cpu", r.stdout
    state = torch.load(tmp_path / "d" / "latest.pt", weights_only=True)  # no map_location: as saved
    tensors = [t for t in state["model"].values()] + \
        [t for s in state["optimizer"]["state"].values() for t in s.values()]
    assert tensors and all(t.device.type == "cpu" for t in tensors)
    # a run trained on a GPU box: its config.json names a GPU this machine lacks; resuming with the
    # default --device (auto) must not inherit it
    cfg = json.loads((tmp_path / "d" / "config.json").read_text())
    assert cfg["device"] == "cpu"
    cfg["device"] = "cuda:1"
    (tmp_path / "d" / "config.json").write_text(json.dumps(cfg))
    r = run_cli(common)
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stdout and "ppo1: done: 512 steps in 2 iterations" in r.stdout
    expected = "cpu" if cuda_count() == 0 else "cuda:0"
    assert r.stdout.splitlines()[0].startswith(f"ppo1: device {expected}"), r.stdout
    assert json.loads((tmp_path / "d" / "config.json").read_text())["device"] == "auto"
    assert checkpoint.load(str(tmp_path / "d" / "latest.pt")).iteration == 2


NO_CUDA_HERE = [] if cuda_count() else [["--device", "cuda"], ["--device", "cuda:0"]]


@pytest.mark.parametrize("args, message, np_", [  # 2 ranks: each rank's device (a flag's check: test_cli)
    (["--device", "tpu"], "--device='tpu' is invalid: must be one of auto, cpu, cuda, cuda:N", 1),
    (["--device", "cuda:3"], "--device=cuda:3 is invalid", 2),
    *[(a, "torch sees no CUDA device", 1) for a in NO_CUDA_HERE],
    (["--mode", "play", "--device", "tpu"], "--device='tpu' is invalid", 1),
])
def test_bad_device_ends_all_ranks_with_one_line_and_status_2(tmp_path, args, message, np_):
    if args == ["--device", "cuda:3"] and cuda_count() > 3:
        pytest.skip("this node has a cuda:3")
    r = run_cli([*TINY, "--checkpoint_dir", str(tmp_path), *args], np_=np_, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = error_lines(r)
    assert len(lines) == 1 and lines[0].startswith("ppo1: error:") and message in lines[0], r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_movie_on_the_cpu_of_a_run_trained_with_another_device_string(pong_run, tmp_path):
    ck, name, _ = pong_run
    run = copy_run(ck / name, tmp_path / "ck", name)
    cfg = json.loads((run / "config.json").read_text())
    cfg["device"] = "cuda:1"  # as a run trained on a GPU box saves it; this machine may have no such GPU
    (run / "config.json").write_text(json.dumps(cfg))
    r = run_cli(["--mode", "movie", "--device", "cpu", "--max_frames", "40", "--checkpoint_dir", str(run.parent),
                 "--model_name", name, "--asset_dir", str(tmp_path / "assets")])
    assert r.returncode == 0, r.stderr
    assert list((tmp_path / "assets" / name).glob("*_partial.mp4"))


# ------------------------------------------------------------------ on a GPU (skipped without one)
@cuda
def test_cuda_gradient_average_and_fused_adam_keep_two_ranks_bit_identical():
    r = run_script(os.path.join(HERE, "mpi", "grad_average.py"), 2, "cuda", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0: OK" in r.stdout and "rank 1: OK" in r.stdout


@cuda
def test_cuda_batched_act_matches_the_cpu_policy(monkeypatch):
    # compare full float32 with the CPU, not TF32 convolutions (torch's default on the GPU)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    policy = build("small", 6)
    gpu = build("small", 6).cuda()
    gpu.load_state_dict(policy.state_dict())
    obs = Obs({"image": np.random.default_rng(0).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)})
    a, lp, v, _ = batched_act(gpu, torch.device("cuda"), obs)(obs)
    assert a.shape == (3,) and a.dtype == np.int64 and lp.dtype == v.dtype == np.float32
    dist, value, _ = policy.step(obs.map(torch.from_numpy), None)
    np.testing.assert_allclose(v, value.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lp, dist.log_prob(torch.from_numpy(a)).detach().numpy(), rtol=1e-4, atol=1e-5)


@cuda
def test_cuda_run_on_two_ranks_then_resumed_and_played_on_the_cpu(tmp_path):
    common = [*TINY, "--envs_per_rank", "1", "--checkpoint_dir", str(tmp_path), "--model_name", "g"]
    r = run_cli([*common, "--device", "cuda", "--stop_after_iterations", "1"], np_=2)
    assert r.returncode == 0, r.stderr  # the final sync check passed: ranks bit-identical on the GPU
    assert r.stdout.splitlines()[0].startswith("ppo1: device") and "cuda:0" in r.stdout.splitlines()[0]
    state = torch.load(tmp_path / "g" / "latest.pt", weights_only=True)
    assert all(t.device.type == "cpu" for t in state["model"].values())
    assert all(t.device.type == "cpu" for s in state["optimizer"]["state"].values() for t in s.values())
    r = run_cli([*common, "--device", "cpu"], np_=2)
    assert r.returncode == 0, r.stderr
    assert "resuming from" in r.stdout and r.stdout.splitlines()[0] == "ppo1: device cpu on all 2 ranks"
    r = run_cli(["--mode", "movie", "--device", "cpu", "--max_frames", "40", "--checkpoint_dir",
                 str(tmp_path), "--model_name", "g", "--asset_dir", str(tmp_path / "assets")])
    assert r.returncode == 0, r.stderr


@cuda
def test_cuda_deterministic_stopped_and_resumed_run_is_bit_identical(tmp_path):
    common = [*TINY, "--env_steps", "1024", "--envs_per_rank", "1", "--deterministic", "--device", "cuda",
              "--save_interval", "1", "--checkpoint_dir", str(tmp_path)]
    assert run_cli([*common, "--model_name", "full"], np_=2).returncode == 0
    assert run_cli([*common, "--model_name", "part", "--stop_after_iterations", "2"], np_=2).returncode == 0
    r = run_cli([*common, "--model_name", "part"], np_=2)
    assert r.returncode == 0 and "resuming from" in r.stdout, r.stderr
    a = torch.load(tmp_path / "full" / "latest.pt", weights_only=True)
    b = torch.load(tmp_path / "part" / "latest.pt", weights_only=True)
    assert a["iteration"] == b["iteration"] == 4
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key


@cuda
def test_cuda_compile_trains(tmp_path):
    r = run_cli([*TINY, "--checkpoint_dir", str(tmp_path), "--device", "cuda", "--compile"], timeout=600)
    assert r.returncode == 0, r.stderr
    assert "ppo1: done" in r.stdout
