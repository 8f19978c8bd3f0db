"""Torn records (issue 12): a kill or a power loss in the middle of an append leaves a last CSV line without its
line end, or a next run's row appended onto it; before a run appends again, the torn record is cut with one
warning naming the file. The cuts in this process against safeio (what every log's AppendFile runs at a start);
one real `mpirun -np 2` resume shows every rank dropping its own files' torn records before it appends."""
import csv

import pytest

from conftest import FAST, copy_run, rows, run_cli
from ppo1.safeio import AppendFile, csv_width, torn_tail

EPISODES = b"return,length,time,timesteps\r\n-21.0,812,3.512,128\r\n-20.0,905,4.01,256\r\n-21.0,790,3.3,256\r\n"


def widths(path):
    """The set of row widths of a CSV file (one width: it parses as one table)."""
    with open(path, newline="") as f:
        return {len(row) for row in csv.reader(f)}


def test_a_csv_file_cut_at_any_byte_keeps_exactly_its_whole_records():
    width = csv_width(EPISODES.split(b"\n")[0])
    for end in range(len(EPISODES) + 1):
        data = EPISODES[:end]
        cut, why = torn_tail(data, width)
        whole = data[:data.rfind(b"\n") + 1]
        assert data[:len(data) - cut] == whole, (end, cut)
        assert bool(cut) == bool(why) == (data != whole)
    merged = b"-21.0,790,3.3," + b"-20.0,905,4.01,256\r\n"  # a record appended onto a torn one
    assert torn_tail(EPISODES + merged, width) == (len(merged), "a last line of 7 fields, not 4")


@pytest.mark.parametrize("cut", [1, 2, 7, "all but 1 byte of the last line", "into the line before"])
@pytest.mark.parametrize("log", ["progress.csv", "episodes.rank0.csv"])
def test_a_torn_last_record_of_a_log_is_dropped_with_one_warning_naming_the_file(small_run, tmp_path, log, cut):
    path = copy_run(small_run, tmp_path) / log
    if log.startswith("episodes"):
        path.write_bytes(EPISODES)
    data = path.read_bytes()
    last = len(data) - (data.rfind(b"\n", 0, len(data) - 1) + 1)  # the last line, with its \r\n
    n = {"all but 1 byte of the last line": last - 1, "into the line before": last + 2}.get(cut, cut)
    torn = data[:-n]
    whole, left = torn[:torn.rfind(b"\n") + 1], len(torn) - (torn.rfind(b"\n") + 1)
    path.write_bytes(torn)
    said = []
    assert AppendFile(str(path), warn=said.append).drop_torn_record()
    assert said == [f"ppo1: warning: dropped the torn last record of {path} (a last line of {left} bytes without a "
                    f"line end; an earlier run ended while writing it)"]
    assert path.read_bytes() == whole and len(widths(path)) == 1


def test_a_log_cut_at_a_record_boundary_is_left_as_it_is(small_run, tmp_path):
    run = copy_run(small_run, tmp_path)
    (run / "episodes.rank0.csv").write_bytes(EPISODES)
    for name in ("progress.csv", "episodes.rank0.csv"):
        before, said = (run / name).read_bytes(), []
        assert not AppendFile(str(run / name), warn=said.append).drop_torn_record()
        assert said == [] and (run / name).read_bytes() == before


def test_a_torn_last_line_of_every_log_is_dropped_on_every_rank_before_the_resumed_run_appends(small_run, tmp_path):
    # progress.csv: what an earlier version left, the next run's first row appended onto a torn one (about twice
    # the header's fields); each rank's episode log: a last line cut short
    args = [a if a != "2" else "1" for a in FAST]  # 2 ranks x 1 env: the checkpoint's 2 actors
    run = copy_run(small_run, tmp_path)
    progress = (run / "progress.csv").read_bytes()
    row2 = progress.rstrip(b"\r\n").rsplit(b"\n", 1)[1]
    merged = progress[:-9] + row2 + b"\r\n"
    (run / "progress.csv").write_bytes(merged)
    header = len(progress.split(b"\n", 1)[0].split(b","))  # 20 columns since `epochs` came
    fields = max(widths(run / "progress.csv"))
    assert fields > header
    for rank in (0, 1):
        (run / f"episodes.rank{rank}.csv").write_bytes(EPISODES[:-5])
    r = run_cli([*args, "--checkpoint_dir", str(tmp_path), "--model_name", "r", "--env_steps", "512"], np_=2)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stderr
    assert f"dropped the torn last record of {run / 'progress.csv'} (a last line of {fields} fields, " \
           f"not {header};" in r.stdout
    assert f"dropped the torn last record of {run / 'episodes.rank0.csv'} (a last line of " in r.stdout
    assert f"dropped the torn last record of {run / 'episodes.rank1.csv'} (a last line of " in r.stderr
    assert r.stderr.strip().endswith("(rank 1)") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for name in ("progress.csv", "episodes.rank0.csv", "episodes.rank1.csv"):
        assert len(widths(run / name)) == 1, name
        assert (run / name).read_bytes().endswith(b"\r\n")
    assert (run / "episodes.rank0.csv").read_bytes().startswith(EPISODES[:EPISODES.rfind(b"\n", 0, -5) + 1])
    assert [int(row["iteration"]) for row in rows(run / "progress.csv")] == [1, 3, 4]
