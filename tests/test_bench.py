"""bench.throughput end to end on a tiny scenario: real games, real `mpirun -np 2`, no timed assertions."""
import json
import subprocess
import sys

from conftest import REPO, run_cli


def test_throughput_reports_sps_time_split_rss_and_limits(tmp_path):
    out = tmp_path / "report.json"
    r = run_cli(["--ranks", "2", "--envs_per_rank", "1", "--horizon", "16", "--minibatch", "8", "--warmup", "1",
                 "--iterations", "1", "--limit_seconds", "0.05", "--json", str(out), "--quiet"],
                module="bench.throughput")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SPS" in r.stdout and "allred/upd" in r.stdout and "ideal" in r.stdout
    report = json.loads(out.read_text())
    (run,) = report["runs"]
    assert run["scenario"]["ranks"] == 2 and run["actors"] == 2
    assert run["steps"] == 32 and run["sps"] > 0
    assert set(run["share"]) == {"env", "inference", "update", "other"}
    assert 0 < run["share"]["update"] < 1 and 0 <= run["allreduce_share_of_update"] < 1
    assert len(run["peak_rss_mb"]) == 2 and all(m > 0 for m in run["peak_rss_mb"])
    assert len(run["allreduce_share_of_update_per_rank"]) == 2
    assert run["allreduce_transfer_ms"] > 0 and run["allreduce_transfer_share_of_update"] >= 0
    assert run["torch_threads"] == [1, 1]
    for key in ("env_sps", "forward_sps", "train_sps"):
        assert run["limits"][key] > 0
    assert run["ideal_sps"] > 0 and run["ratio_to_ideal"] > 0
    assert any(c["what"].endswith("peak RSS per rank, MB (max)") for c in report["comparisons"])


def test_throughput_rejects_a_bad_preset():
    r = subprocess.run([sys.executable, "-m", "bench.throughput", "--preset", "nope"], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice" in r.stderr
