import os

import pytest
import torch

from conftest import passed_on_both_ranks
from ppo1.distributed import Comm, parameter_digest
from ppo1.policies import build


def test_two_rank_gradient_average_equals_union_batch_and_ranks_stay_identical(mpi_checks):
    assert passed_on_both_ranks(mpi_checks, "grad_average"), mpi_checks  # tests/mpi/grad_average.py


def test_single_process_comm_is_a_no_op_that_still_works():
    comm = Comm(None)
    policy = build("small", 4)
    digest = parameter_digest(policy)
    comm.broadcast_parameters(policy)
    comm.check_synced(policy)
    assert parameter_digest(policy) == digest
    assert comm.allgather(3) == [3] and comm.mean([1.0, 2.0]).tolist() == [1.0, 2.0]


def test_agree_raises_on_every_rank_when_one_failed():
    from ppo1 import PPO1Error
    with pytest.raises(PPO1Error, match="boom") as info:
        Comm(None).agree(PPO1Error("boom"))
    assert info.value.all_ranks
    Comm(None).agree(None)


def test_parameter_digest_sees_a_one_ulp_change():
    policy = build("small", 4)
    d = parameter_digest(policy)
    with torch.no_grad():
        p = next(policy.parameters()).view(-1)
        p[0] = torch.nextafter(p[0], torch.tensor(1.0))
    assert parameter_digest(policy) != d


def test_waiting_for_the_launcher_returns_once_the_pipe_is_read_and_gives_up_when_it_is_not(tmp_path):
    # Comm.abort waits for this before MPI_Abort: hydra's proxy forwarded an abort read in the same
    # poll as the rank's last stderr lines ahead of them, and mpiexec could end before printing them
    import threading
    import time

    from ppo1.launch import wait_for_launcher_to_read
    r, w = os.pipe()
    try:
        os.write(w, b"ppo1: unexpected error on rank 1\n")
        t0 = time.monotonic()
        assert wait_for_launcher_to_read((w,), timeout=0.2) is False  # nobody reads: bounded wait
        assert time.monotonic() - t0 >= 0.2  # it waited its timeout before giving up
        t0 = time.monotonic()  # before the timer starts: the read comes >= 0.3 s after t0
        threading.Timer(0.3, os.read, (r, 4096)).start()
        assert wait_for_launcher_to_read((w,), timeout=5.0) is True
        assert time.monotonic() - t0 >= 0.3  # it returned when the read came, not before
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "log", "w") as f:  # not a pipe (a file, a terminal): no wait
        f.write("x" * 100)
        f.flush()
        assert wait_for_launcher_to_read((f.fileno(),), timeout=5.0) is True


def test_target_kl_stops_both_ranks_at_the_same_minibatch_from_the_averaged_kl(mpi_checks):
    assert passed_on_both_ranks(mpi_checks, "kl_stop"), mpi_checks  # tests/mpi/kl_stop.py


def test_say_line_writes_a_line_and_its_newline_in_one_write_when_the_console_is_unbuffered():
    # With PYTHONUNBUFFERED (write_through), print() writes a line and its newline separately, and under
    # mpirun another rank's line can land between them (seen in a games benchmark's play.txt).
    import io
    from ppo1.distributed import say_line

    class Console(io.RawIOBase):  # a real raw stream that keeps each write it gets
        def __init__(self):
            self.writes = []

        def writable(self):
            return True

        def write(self, b):
            self.writes.append(bytes(b))
            return len(b)

    raw = Console()
    console = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    print("game 1/2: score 20 (rank 1)", file=console, flush=True)
    assert raw.writes == [b"game 1/2: score 20 (rank 1)", b"\n"]  # what say_line avoids
    raw.writes.clear()
    say_line("game 2/2: score 21 (rank 1)", console)
    assert raw.writes == [b"game 2/2: score 21 (rank 1)\n"]
