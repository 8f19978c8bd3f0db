"""The watchdog's logic, in one process with threads (the multi-host test cuts a real link)."""
import threading
import time

import pytest

from ppo1 import PPO1Error
from ppo1.cli import build_config, build_parser
from ppo1.config import Config
from ppo1.envs.calls import Call
from ppo1.watchdog import AUTO, EXIT_CODE, FLOOR, MULTIPLE, Watchdog, limit_for


def test_limit_is_as_given_off_at_zero_and_automatic_with_a_floor():
    assert limit_for(12.5, [1.0, 2.0]) == 12.5
    assert limit_for(0, [1.0]) == 0.0
    assert limit_for(AUTO, []) == FLOOR                      # before the first iteration
    assert limit_for(AUTO, [1.0, 2.0, 3.0]) == FLOOR         # 10 x 2 s < the floor
    assert limit_for(AUTO, [40.0, 50.0, 1000.0]) == MULTIPLE * 50.0  # the median, not the outlier


class Recorder:
    """Stands in for stderr, MPI_Abort and os._exit."""

    def __init__(self, abort_hangs: bool = False):
        self.lines, self.calls, self.done, self.release = [], [], threading.Event(), threading.Event()
        self.abort_hangs = abort_hangs

    def write(self, line):
        self.lines.append(line)

    def abort(self, code):
        self.calls.append(("abort", code, time.monotonic()))
        if self.abort_hangs:
            self.release.wait(10)  # MPI_Abort that cannot reach the launcher (until the test releases it)

    def exit(self, code):
        self.calls.append(("exit", code, time.monotonic()))
        self.done.set()


def watchdog(rec: Recorder, timeout: float, grace: float = 0.2) -> Watchdog:
    return Watchdog(timeout, rank=3, abort=rec.abort, exit=rec.exit, grace=grace, write=rec.write)


def test_fires_once_with_one_line_naming_rank_host_and_phase_then_aborts_and_exits():
    rec = Recorder()
    wd = watchdog(rec, timeout=0.4)
    with wd:
        for _ in range(4):  # iterations that finish in time keep it quiet
            time.sleep(0.15)
            wd.beat()
        assert not rec.calls
        wd.phase = "gradient allreduce"
        start = time.monotonic()
        assert rec.done.wait(60)
    assert time.monotonic() - start >= 0.35  # not before its limit
    assert len(rec.lines) == 1 and rec.lines[0].endswith("\n") and rec.lines[0].count("\n") == 1
    line = rec.lines[0]
    assert "rank 3" in line and f"host {wd.host}" in line and "waiting in gradient allreduce" in line
    assert [c[:2] for c in rec.calls] == [("abort", EXIT_CODE), ("exit", EXIT_CODE)]


def test_a_rank_stuck_in_an_env_call_is_named_with_the_env_and_the_call():
    # it said "a rank or host is lost or stuck" and named the phase only (rollout), not the env that hung
    rec = Recorder()
    start = time.monotonic() - 300
    with Watchdog(0.2, rank=0, abort=rec.abort, exit=rec.exit, grace=0.2, write=rec.write,
                  calling=lambda: Call(2, "step", start)):
        assert rec.done.wait(60)
    assert len(rec.lines) == 1 and "rank 0 on host" in rec.lines[0], rec.lines
    assert ": stuck in env 2's step for 300 s (no iteration finished for 0 s, limit 0 s); ending this process" \
        in rec.lines[0], rec.lines
    assert "lost" not in rec.lines[0]


def test_hard_exit_follows_an_abort_that_hangs_after_the_grace_period():
    rec = Recorder(abort_hangs=True)
    with watchdog(rec, timeout=0.2, grace=0.5):
        assert rec.done.wait(60)
        (_, _, t_abort), (kind, code, t_exit) = rec.calls
        rec.release.set()
    assert (kind, code) == ("exit", EXIT_CODE) and t_exit - t_abort >= 0.45


def test_off_at_zero_and_quiet_once_stopped():
    rec = Recorder()
    with watchdog(rec, timeout=0) as wd:
        assert wd._thread is None
        time.sleep(0.2)
    with watchdog(rec, timeout=0.3):
        time.sleep(0.1)
    time.sleep(0.5)  # stopped before its limit: never fires
    assert not rec.calls and not rec.lines


def test_watchdog_timeout_flag_and_validation():
    assert Config().watchdog_timeout == AUTO
    assert build_config(build_parser().parse_args(["--watchdog_timeout", "20"])).watchdog_timeout == 20.0
    assert build_config(build_parser().parse_args(["--watchdog_timeout", "0"])).watchdog_timeout == 0.0
    with pytest.raises(PPO1Error, match="--watchdog_timeout=-5"):
        Config(watchdog_timeout=-5).validate()
