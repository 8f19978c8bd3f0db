"""Hang-ups (SIGHUP): a closed terminal or SSH session, `kill -HUP`, a launcher passing it on. Every rank stops
after the same iteration with a checkpoint and exit status 129, and says so in one line; under nohup training goes
on. Real processes, a real pty, real `mpirun -np 2`. (The resume from a stop's checkpoint: test_resume's
test_sigterm_under_mpirun_checkpoints_and_the_rerun_resumes_bit_identical_to_an_uninterrupted_run.)"""
import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import FAST, REPO, killed_on_failure, mpirun_command, rows, signalled, start, wait_for_rows
from ppo1.launch import descendants


def launched_ranks(pid):
    """{rank: pid} of the MPI processes an mpirun (`pid`) started, from their launcher's environment (the
    processes that run run_atari: what a rank starts, as its envs' reaper, inherits that environment)."""
    ranks = {}
    for child in descendants(pid):
        with contextlib.suppress(OSError):
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"run_atari" not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{child}/environ", "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
            for var in (b"PMI_RANK", b"OMPI_COMM_WORLD_RANK", b"PMIX_RANK"):
                if var in env:
                    ranks[int(env[var])] = child
    return ranks


def signal_mask(pid, field):
    """The signals in /proc/PID/status's `field` (SigCgt: caught, SigIgn: ignored)."""
    with open(f"/proc/{pid}/status") as f:
        mask = int(next(line for line in f if line.startswith(field + ":")).split()[1], 16)
    return {signal.Signals(n) for n in range(1, 32) if mask >> (n - 1) & 1 and n in signal.Signals._value2member_map_}


def stopped_by_hangup(run, out, err, code):
    """The run stopped for SIGHUP after an iteration, checkpointed it, said so in one line, exit 129."""
    assert code == 129, (code, out, err)
    assert "UCX" not in out + err and "Traceback" not in out + err, (out, err)
    done = len(rows(run / "progress.csv"))
    assert torch.load(run / "latest.pt", weights_only=True)["iteration"] == done
    return done


def test_sighup_stops_a_single_process_after_the_iteration_with_a_checkpoint_and_no_ucx_output(tmp_path):
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "h"]
    def caught(proc):
        assert signal.SIGHUP in signal_mask(proc.pid, "SigCgt")
    # a hang-up may come twice (shell, kernel): not "exit at once"
    code, out, err = signalled(args, tmp_path / "h" / "progress.csv", signal.SIGHUP, twice=True, check=caught)
    done = stopped_by_hangup(tmp_path / "h", out, err, code)
    assert f"ppo1: stopped by SIGHUP (a hang-up) at iteration {done} " in out and "second" not in err, (out, err)



def test_sighup_to_one_rank_under_mpirun_stops_every_rank_after_the_same_iteration_with_a_checkpoint(tmp_path):
    # what a launcher or a batch system that passes a hang-up on to the ranks delivers (MPICH's mpirun does not:
    # it dies of SIGHUP and its proxy SIGKILLs the ranks)
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "m"]
    proc = start(args, np_=2)
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "m" / "progress.csv", 2, proc)
        ranks = launched_ranks(proc.pid)
        assert sorted(ranks) == [0, 1], ranks
        for pid in ranks.values():
            assert signal.SIGHUP in signal_mask(pid, "SigCgt")
        os.kill(ranks[1], signal.SIGHUP)
        out, err = proc.communicate(timeout=120)
    done = stopped_by_hangup(tmp_path / "m", out, err, proc.returncode)
    assert out.count("stopped by SIGHUP") == 1 and f"at iteration {done} " in out, (out, err)



def test_a_run_started_under_nohup_keeps_ignoring_sighup(tmp_path):
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "n"]
    env = dict(os.environ, PYTHONPATH=REPO)  # nohup's ignored SIGHUP, inherited through a fresh interpreter
    proc = subprocess.Popen(["nohup", sys.executable, "-m", "run_atari", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO, start_new_session=True)
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "n" / "progress.csv", 1, proc)
        assert signal.SIGHUP in signal_mask(proc.pid, "SigIgn")   # MPI's UCX did not take it over
        assert signal.SIGHUP not in signal_mask(proc.pid, "SigCgt")
        for _ in range(3):
            proc.send_signal(signal.SIGHUP)
            time.sleep(0.2)
        before = len(rows(tmp_path / "n" / "progress.csv"))
        wait_for_rows(tmp_path / "n" / "progress.csv", before + 2, proc)  # training goes on
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "stopped by SIGTERM" in out, (out, err)
    assert "UCX" not in out + err and "SIGHUP" not in out + err



def test_a_hang_up_with_stdout_and_stderr_gone_still_checkpoints(tmp_path):
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "p"]
    proc = start(args, fresh=True)  # its stdout and stderr: pipes to close
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "p" / "progress.csv", 2, proc)
        proc.stdout.close()  # every later write: EPIPE
        proc.stderr.close()
        n = len(rows(tmp_path / "p" / "progress.csv"))
        wait_for_rows(tmp_path / "p" / "progress.csv", n + 1, proc)  # a row printed into the closed pipe
        proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=120)
    stopped_by_hangup(tmp_path / "p", "", "", proc.returncode)



@pytest.mark.parametrize("np_", [1, 2], ids=["single process", "--np 2"])
def test_closing_the_terminal_stops_training_with_a_checkpoint(tmp_path, np_):
    """A real terminal (a pty whose master is closed): the kernel sends SIGHUP and SIGCONT to the
    session leader (the process, or --np's launcher), and every later write to the terminal fails (EIO)."""
    import fcntl
    import pty
    import select
    import termios
    import threading

    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "t"]
    if np_ > 1:
        mpirun_command(np_)
    master, slave = pty.openpty()
    launch = ["--np", str(np_)] if np_ > 1 else []

    def terminal_session():  # SIGHUP at its default (as a terminal starts a program), the pty as its terminal
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    proc = subprocess.Popen([sys.executable, "-m", "run_atari", *launch, *args], stdin=slave, stdout=slave,
                            stderr=slave, env=dict(os.environ, PYTHONPATH=REPO), cwd=REPO, start_new_session=True,
                            preexec_fn=terminal_session)
    os.close(slave)
    output, done_reading = [], threading.Event()

    def drain():  # a terminal that is not read fills up and blocks the writer
        while not done_reading.is_set():
            if select.select([master], [], [], 0.1)[0]:
                try:
                    output.append(os.read(master, 65536))
                except OSError:
                    return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    with killed_on_failure(proc):
        wait_for_rows(tmp_path / "t" / "progress.csv", 2, proc)
        done_reading.set()
        reader.join()
        os.close(master)  # the terminal closes
        proc.wait(timeout=120)
    text = b"".join(output).decode(errors="replace")
    stopped_by_hangup(tmp_path / "t", text, "", proc.returncode)


def test_sighup_to_the_np_launcher_stops_every_rank_with_a_checkpoint_and_exit_129(tmp_path):
    # `python -m run_atari --np 2` stays as mpirun's parent: mpirun runs with SIGHUP ignored (MPICH's would
    # die and its proxy SIGKILL the ranks), and a hang-up here reaches the ranks as mpirun's SIGTERM
    mpirun_command(2)
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "w"]
    def launcher_ignores_it(proc):
        launcher = descendants(proc.pid)
        assert launcher and all(signal.SIGHUP in signal_mask(pid, "SigIgn") for pid in launcher)
    # a hang-up often comes twice
    code, out, err = signalled(["--np", "2", *args], tmp_path / "w" / "progress.csv", signal.SIGHUP, twice=True,
                               check=launcher_ignores_it, fresh=True)
    stopped_by_hangup(tmp_path / "w", out, err, code)
    assert err.count("ppo1: hang-up: every rank stops") == 1 and "stopped by SIGTERM" in out, (out, err)
