"""examples/pokemon_emerald.py: without a ROM, one line; with a minimal ROM the test writes itself (a valid
header and one branch-to-itself instruction: no copyrighted data), the GBA emulator path end to end: train
in one process of 4 emulators, resume, play, movie, snapshot. That part needs the `gba` extra (pygba, mgba,
pillow; mgba needs libmgba0.10); it skips with that reason where they are not installed."""
import functools
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, TINY, run_cli

PROBE = """
import torch  # noqa: F401  (as in every ppo1 process)
import sys
sys.path.insert(0, sys.argv[1])
from examples.pokemon_emerald import make_env
make_env(sys.argv[2], game_wrapper=False, emulator_log=sys.argv[3] == "log").reset()
import mgba.log
print("booted", type(mgba.log.Logger._DEFAULT_LOGGER).__name__)
"""


@functools.lru_cache(maxsize=None)
def gba_extra_missing() -> str | None:
    """None where pygba and mgba import, else why the GBA tests skip."""
    probe = "from examples.pokemon_emerald import GBA_INSTALL; print(GBA_INSTALL); import pygba, mgba.core"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:  # why, and what to do on this Python, as the example says it
        tail = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"the gba extra does not run here ({tail}): {r.stdout.strip()}"
    return None


def minimal_rom() -> bytes:
    """512 bytes that mGBA boots: a branch to 0xC0, a header with its fixed byte and checksum, and at 0xC0 a
    branch to itself."""
    rom = bytearray(512)
    rom[0:4] = (0xEA00002E).to_bytes(4, "little")  # b 0xC0
    rom[0xA0:0xB0] = b"PPO1TEST\0\0\0\0PPOT"          # title, game code
    rom[0xB0:0xB3] = b"01\x96"                         # maker code, the fixed value 0x96
    rom[0xBD] = (-(sum(rom[0xA0:0xBD]) + 0x19)) & 0xFF  # header checksum
    rom[0xC0:0xC4] = (0xEAFFFFFE).to_bytes(4, "little")  # b .
    return bytes(rom)


def test_the_emulator_boots_a_rom_in_a_process_that_imported_torch_with_its_log_silenced_unless_asked(tmp_path):
    """Without untag_capsule_type, mgba's cffi bindings spin for ever at their first frame once torch is
    imported (Python < 3.12). mGBA's own log is silenced (emulator_log False, the default)."""
    if why_not := gba_extra_missing():
        pytest.skip(why_not)
    rom = tmp_path / "probe.gba"
    rom.write_bytes(minimal_rom())
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", PROBE, repo, str(rom), ""], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "booted NullLogger" in r.stdout, r.stderr[-2000:]  # mGBA's log silenced ...
    r = subprocess.run([sys.executable, "-c", PROBE, repo, str(rom), "log"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "booted NoneType" in r.stdout, r.stderr[-2000:]  # ... unless asked for


def test_a_gba_rom_trains_resumes_plays_records_and_snapshots(tmp_path):
    # one process of 4 emulators: the family does not depend on the ranks (a training under mpirun: test_cli)
    if why_not := gba_extra_missing():
        pytest.skip(why_not)
    rom = tmp_path / "test.gba"
    rom.write_bytes(minimal_rom())
    kwargs = json.dumps({"rom": str(rom), "game_wrapper": False, "hold": 4, "max_episode_steps": 40})
    run = ["--env_name", "examples.pokemon_emerald:make_env", "--env_kwargs", kwargs, "--checkpoint_dir",
           str(tmp_path / "ck"), "--model_name", "gba"]
    memory = ["--rnn", "lstm", "--frame_stack", "1"]  # the example's documented command: memory, no stack
    tmp = tmp_path / "tmp"  # where the example copies the ROM for each emulator, and removes the copy again
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    four = [*TINY, "--envs_per_rank", "4", "--timesteps_per_actorbatch", "64"]  # 4 x 64 steps an iteration
    r = run_cli([*four, *run, *memory, "--env_steps", "512", "--stop_after_iterations", "1", "--snapshot_interval",
                 "1"], env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "1 ranks x 4 envs" in r.stdout and (tmp_path / "ck" / "gba" / "snapshot.png").exists()
    saved = json.loads((tmp_path / "ck" / "gba" / "config.json").read_text())
    assert (saved["rnn"], saved["pixels"]["frame_stack"]) == ("lstm", 1)
    r = run_cli([*four, *run, "--env_steps", "512"], env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "resuming from" in r.stdout and "ppo1: done: 512 steps in 2 iterations" in r.stdout
    r = run_cli(["--mode", "play", "--episodes", "2", *run], env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("40 agent steps (cut by the env's time limit)") == 2, r.stdout
    r = run_cli(["--mode", "movie", "--max_frames", "120", *run], env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert list((tmp_path / "ck" / "gba").glob("*.mp4"))
    assert [p.name for p in tmp.iterdir() if p.name.startswith("ppo1-gba-")] == []  # every ROM copy removed


def test_a_file_that_is_no_rom_is_named_in_one_line_and_leaves_no_copy(tmp_path):
    if why_not := gba_extra_missing():
        pytest.skip(why_not)
    rom = tmp_path / "not-a-rom.gba"
    rom.write_bytes(b"\0" * 16)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = run_cli([*TINY, "--env_name", "examples.pokemon_emerald:make_env", "--env_kwargs", json.dumps({"rom": str(rom)}),
                 "--checkpoint_dir", str(tmp_path / "ck")], env={"TMPDIR": str(tmp)})
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"mGBA cannot load {rom}: is it a GBA ROM?" in lines[0], r.stderr
    assert list(tmp.iterdir()) == []


def test_the_example_without_a_rom_says_what_to_supply_in_one_line(tmp_path):
    r = run_cli([*TINY, "--env_name", "examples.pokemon_emerald:make_env", "--checkpoint_dir", str(tmp_path)])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "give the path of your Pokemon Emerald ROM" in lines[0], r.stderr
