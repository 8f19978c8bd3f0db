"""Stopping a run: a second SIGTERM exits at once, a Ctrl-C while the ranks start is one line, each stop signal's
exit status (128 + its number) with the stop's checkpoint. Real processes and real `mpirun -np 2` where the start
or the second signal is the behaviour; the exit status of each signal in this process."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import FAST, REPO, killed_on_failure, rows, signalled, start


def test_a_second_sigterm_exits_at_once_with_one_line(tmp_path):
    args = [*FAST, "--save_interval", "1000", "--env_steps", "1000000", "--checkpoint_dir", str(tmp_path),
            "--model_name", "s"]
    code, out, err = signalled(args, tmp_path / "s" / "progress.csv", signal.SIGTERM, np_=2, after=1, twice=True,
                               timeout=60)
    assert code == 143, err
    # the second signal lands during the iteration (no checkpoint yet), after the stop's checkpoint
    # (when the first came near an iteration's end: it must not die of the default action, exit 15),
    # after rank 0 has already ended the stop, or first on rank 1, whose exit ends the job before rank 0
    # says anything (a loaded machine): at once, at most one line, no traceback. --save_interval 1000: there is
    # no checkpoint on disk yet, and the line does not claim one
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("ppo1: SIGTERM: stopping")]
    assert lines in ([], ["ppo1: second SIGTERM: exiting now without a checkpoint; none was written yet"],
                     ["ppo1: second SIGTERM: exiting now; the checkpoint of this stop is written"]), (out, err)
    assert "Traceback" not in out + err


@pytest.mark.parametrize("delay", [0.5, 1.5])
def test_ctrl_c_while_starting_is_one_line(tmp_path, delay):
    # 0.4-1.0 s after the start the ranks are importing torch and ale_py: an interrupt there crashed
    # the interpreter's clean-up (SIGSEGV, exit 11) or ended in std::terminate from pybind11
    # (SIGABRT, exit 6); later (1.3-1.6 s here) a rank that left before MPI_Init left the other
    # waiting in it for ever. Now the interrupt is held until every rank is past MPI_Init.
    proc = start([*FAST, "--checkpoint_dir", str(tmp_path)], np_=2)  # ranks importing torch
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    with killed_on_failure(proc):
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "terminate" not in err, err
    assert "Segmentation fault" not in out + err, out


def test_a_held_interrupt_is_recorded_not_raised_and_a_second_one_exits_130(tmp_path):
    from ppo1.launch import HeldInterrupt

    previous = signal.getsignal(signal.SIGINT)
    held = HeldInterrupt().hold()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs at the next bytecode: no KeyboardInterrupt here
        assert held.pending
    finally:
        held.release()
    assert signal.getsignal(signal.SIGINT) is previous
    script = ("import os, signal, time\nfrom ppo1.launch import HeldInterrupt\nHeldInterrupt().hold()\n"
              "os.kill(os.getpid(), signal.SIGINT); time.sleep(0.05)\nos.kill(os.getpid(), signal.SIGINT)\n"
              "time.sleep(5)\nprint('not reached')\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, PYTHONPATH=REPO))
    assert r.returncode == 130 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr == "ppo1: interrupted while starting; nothing was written\n"


def signal_after_the_first_row(sig, progress) -> threading.Thread:
    """A thread that sends `sig` to this process once training's own handler is in place and `progress` holds
    a complete row (the signal comes in the middle of training, as a user's would)."""
    from ppo1.stops import StopRequest

    def send():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            handler = signal.getsignal(sig)
            if isinstance(getattr(handler, "__self__", None), StopRequest) and progress.exists() and rows(progress):
                os.kill(os.getpid(), sig)
                return
            time.sleep(0.01)
    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_stop_signal_ends_training_after_its_iteration_with_a_checkpoint_and_exit_status_128_plus_it(
        tmp_path, capsys, sig):
    # in this process: every stop signal's exit status and checkpoint (the processes' own: test_signals_hangup,
    # test_resume's SIGTERM under mpirun)
    import torch

    from ppo1.config import Config
    from ppo1.distributed import Comm
    from ppo1.trainer import train
    cfg = Config.for_preset("ppo_lstm", env_name="CartPole-v1", rnn="none", envs_per_rank=2,
                            timesteps_per_actorbatch=16, optim_batchsize=16, optim_epochs=1, env_steps=1_000_000,
                            save_interval=1000, num_threads=1, checkpoint_dir=str(tmp_path), model_name="s")
    said = []
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a suite under nohup: its SIGHUP is not ignored here
    try:
        sender = signal_after_the_first_row(sig, tmp_path / "s" / "progress.csv")
        result = train(cfg, Comm(), log=lambda line, *a, **k: said.append(str(line)))
        sender.join()
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert result["exit_code"] == 128 + sig, said
    assert 1 <= result["iteration"] < 1_000_000 // 32
    assert torch.load(tmp_path / "s" / "latest.pt", weights_only=True)["iteration"] == result["iteration"]
    assert f"stopped by {sig.name}" in capsys.readouterr().out + "".join(said)
