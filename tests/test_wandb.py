"""--wandb: offline W&B runs really written into the run directory, read back record by record with wandb's own
protobuf schema; a resume continues the same W&B run; a stop signal finishes it and leaves no W&B process; a
missing package is one line on every rank; a W&B that cannot start is one warning."""
from __future__ import annotations

import glob
import json
import os
import signal
import struct
import subprocess
import sys
import time
import uuid
import zlib

import pytest

from conftest import REPO, TINY, mpirun_command, rows

pytest.importorskip("wandb", reason="wandb is not installed: pip install -e '.[wandb]'")
from wandb.proto import wandb_internal_pb2  # noqa: E402

from ppo1.config import Config  # noqa: E402
from ppo1.wandb_log import WandbLog  # noqa: E402

PIXELS = [*TINY, "--env_name", "tests.pixelenv:make_env", "--env_kwargs", '{"size": 24}', "--snapshot_interval", "1",
          "--video_interval", "2", "--video_max_frames", "60", "--wandb", "--wandb_tags", "smoke,pixels"]


def records(path: str) -> list:
    """The records of a .wandb file: W&B's header (':W&B', magic 0xBEE1, version 0), then LevelDB's log format
    (32 KiB blocks of chunks: CRC-32 of type and data, length, type full/first/middle/last), each record a
    wandb_internal_pb2.Record. A chunk whose CRC does not match fails the test."""
    with open(path, "rb") as f:
        data = f.read()
    assert struct.unpack("<4sHB", data[:7]) == (b":W&B", 0xBEE1, 0), path
    out, pending, pos, block = [], b"", 7, 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a chunk header is padding
            pos += block - pos % block
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if (crc, length, kind) == (0, 0, 0):  # the zeroed rest of a block
            pos += block - pos % block
            continue
        chunk = data[pos + 7:pos + 7 + length]
        assert zlib.crc32(bytes([kind]) + chunk) == crc, f"{path}: chunk at byte {pos} is corrupt"
        pos += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):  # a whole record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


def offline_runs(run_dir) -> list[dict]:
    """Each offline W&B run file of a run directory, oldest first: its run id, whether it resumes, config, history
    rows (key -> JSON value) and exit code (None without an exit record)."""
    found = []
    for path in sorted(glob.glob(os.path.join(str(run_dir), "wandb", "offline-run-*", "run-*.wandb"))):
        run = {"id": None, "resume": None, "config": {}, "history": [], "exit": None}
        for r in records(path):
            kind = r.WhichOneof("record_type")
            if kind == "run":
                run["id"], run["resume"] = r.run.run_id, r.run.resume
            elif kind == "config":
                run["config"].update({u.key: json.loads(u.value_json) for u in r.config.update})
            elif kind == "history":
                run["history"].append({i.key or ".".join(i.nested_key): json.loads(i.value_json)
                                       for i in r.history.item})
            elif kind == "exit":
                run["exit"] = r.exit.exit_code
        found.append(run)
    return found


def offline_env(tmp_path, **extra) -> dict:
    """The suite's environment without any W&B setting or credentials (no key, no netrc): --wandb logs offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    return {**env, "NETRC": str(tmp_path / "no-netrc"), "PYTHONPATH": REPO + os.pathsep + env.get("PYTHONPATH", ""),
            **extra}


def train(args: list[str], env: dict, cwd) -> subprocess.Popen:
    """`python -m run_atari ARGS` in a session of its own (its process group: a terminal's job)."""
    return subprocess.Popen([sys.executable, "-m", "run_atari", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(cwd), env=env, start_new_session=True)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """A 2-iteration --wandb run of tests.pixelenv (snapshots every iteration, a video at iteration 2), offline."""
    tmp = tmp_path_factory.mktemp("wandb")
    p = train([*PIXELS, "--checkpoint_dir", str(tmp), "--model_name", "px"], offline_env(tmp), tmp)
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, err
    return tmp, out, err


def test_training_with_wandb_logs_every_row_the_config_and_the_media_offline_in_the_run_directory(first_run):
    tmp, out, err = first_run
    run_dir = tmp / "px"
    [run] = offline_runs(run_dir)
    assert f"ppo1: W&B run {run['id']} started offline in {run_dir / 'wandb'}" in out
    assert err == "" and "wandb:" not in out, "W&B prints nothing of its own"
    rows = [h for h in run["history"] if "progress/iteration" in h]
    assert [(h["progress/iteration"], h["timesteps"]) for h in rows] == [(1, 256), (2, 512)]
    assert {"progress/ep_return_mean", "progress/pol_loss", "progress/sps", "episodes/return"} <= set(rows[0])
    saved = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    assert {k: run["config"][k] for k in saved} == saved, "config.json is the W&B run's config"
    assert run["config"]["wandb_tags"] == "smoke,pixels"
    snapshots = [h["timesteps"] for h in run["history"] if "snapshot/envs.path" in h]
    videos = [h for h in run["history"] if "videos/game.path" in h]
    assert snapshots == [256, 512] and [v["timesteps"] for v in videos] == [512]
    files = os.path.join(glob.glob(str(run_dir / "wandb" / "offline-run-*"))[0], "files")
    assert os.path.getsize(os.path.join(files, videos[0]["videos/game.path"])) == \
        os.path.getsize(glob.glob(str(run_dir / "videos" / "*.mp4"))[0]), "the training video, copied into the run"
    assert run["exit"] == 0


def test_a_resume_under_np_2_continues_the_same_wandb_run_and_sigterm_finishes_it_leaving_no_wandb_process(
        first_run):
    tmp, _, _ = first_run
    run_dir = tmp / "px"
    mpirun_command(2)  # skips where there is no mpirun
    mark = uuid.uuid4().hex  # in the environment of every process the run starts: none may outlive it
    p = train(["--np", "2", "--envs_per_rank", "1", "--env_steps", "8192", "--checkpoint_dir", str(tmp),
               "--model_name", "px"], offline_env(tmp, PPO1_TEST_MARK=mark), tmp)  # the same 2 actors
    try:
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None:
            if len(rows(run_dir / "progress.csv")) >= 3:  # the first run's 2 rows, a row of this one
                break
            time.sleep(0.2)
        assert wandb_processes(mark), "W&B runs beside the training (wandb-core)"
        os.killpg(p.pid, signal.SIGTERM)  # every process of the job, wandb-core included (kill -TERM -<pgid>)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 128 + signal.SIGTERM, err
    first, resumed = offline_runs(run_dir)
    assert resumed["id"] == first["id"] and resumed["resume"], "the same W&B run, resumed"
    assert f"ppo1: W&B run {first['id']} resumed offline" in out
    steps = [h["timesteps"] for h in resumed["history"] if "progress/iteration" in h]
    assert steps and steps[0] == 768 and steps == sorted(steps), "this process's rows, after the first run's"
    assert resumed["exit"] == 128 + signal.SIGTERM, "the W&B run was finished with the process's exit code"
    deadline = time.time() + 10  # wandb-core ends as the run ends; give the kernel a moment to reap it
    while wandb_processes(mark) and time.time() < deadline:
        time.sleep(0.2)
    assert wandb_processes(mark) == [], "a W&B process of the run outlived it"


def wandb_processes(mark: str) -> list[str]:
    """The command lines of the live W&B processes (wandb-core, wandb-symon) whose environment holds `mark`."""
    found = []
    for proc in glob.glob("/proc/[0-9]*"):
        try:
            with open(os.path.join(proc, "environ"), "rb") as f:
                if f"PPO1_TEST_MARK={mark}".encode() not in f.read().split(b"\0"):
                    continue
            with open(os.path.join(proc, "cmdline"), "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # a process that has gone, or another user's
        if "wandb" in os.path.basename(cmdline.split(" ")[0]):
            found.append(cmdline)
    return found


def test_wandb_missing_is_one_line_naming_the_extra_and_exit_2(tmp_path):
    # one process: rank 0's refusal at the run lock's stage reaching every rank is test_run_lock's (2 ranks)
    shim = tmp_path / "shim" / "wandb"  # an `import wandb` that fails as where the package is not installed
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError(\"No module named 'wandb'\")\n")
    env = offline_env(tmp_path, PYTHONPATH=os.pathsep.join([str(shim.parent), REPO, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "run_atari", *TINY, "--env_name", "CartPole-v1",
                        "--wandb", "--checkpoint_dir", str(tmp_path), "--model_name", "m"], capture_output=True,
                       text=True, timeout=240, cwd=str(tmp_path), env=env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "ppo1: error: --wandb needs the wandb package, which does not import here (ImportError: No module named "
        "'wandb'): pip install -e '.[wandb]', or train without it: --no-wandb"]
    assert not (tmp_path / "m").exists(), "refused before the run directory was made"


def test_a_wandb_that_cannot_start_is_one_warning_and_training_logs_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "no-such-mode")  # W&B refuses it in wandb.init
    said = []
    config = Config(env_name="CartPole-v1", model_type="mlp", checkpoint_dir=str(tmp_path), wandb=True)
    assert WandbLog.start(config, None, warn=said.append) is None
    assert len(said) == 1 and said[0].startswith("ppo1: warning: W&B not started (") and \
        said[0].endswith("; training continues without W&B"), said


def test_wandb_logs_every_numeric_column_a_row_holds_so_new_columns_need_no_code(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    config = Config(env_name="CartPole-v1", model_type="mlp", checkpoint_dir=str(tmp_path), model_name="cols",
                    wandb=True)
    log = WandbLog.start(config, None, warn=lambda line: None)
    log.write({"iteration": 1, "timesteps": 100, "eval_return_mean": 7.5, "ep_return_mean": float("nan"),
               "note": "text"}, [(1.0, 10), (3.0, 30)])
    log.finish()
    [run] = offline_runs(tmp_path / "cols")
    [row] = run["history"]
    assert {k: v for k, v in row.items() if not k.startswith("_")} == {
        "timesteps": 100, "progress/iteration": 1, "progress/eval_return_mean": 7.5, "episodes/return": 2.0,
        "episodes/length": 20.0}, "numbers only, NaN left out as in TensorBoard; the games' means"
