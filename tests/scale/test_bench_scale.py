"""Smoke run of ``benchmarks/bench_scale_distributed.py`` at a small size (the real run: 10M)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scale_distributed.py"


@pytest.mark.slow
def test_bench_scale_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_scale_distributed", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    summary = bench.main(
        [
            "--labels",
            "20k",
            "--shards",
            "3",
            "--workers",
            "2",
            "--workdir",
            str(tmp_path),
            "--json",
            str(tmp_path / "r.json"),
        ]
    )
    assert summary["identical_stats"] and summary["identical_export_files"]
    steps = [f["step"] for f in summary["figures"]]
    assert steps == [
        "generate",
        "baseline: pyarrow read + numpy bincount",
        "stats sync",
        "stats local:2",
        "export sync",
        "export local:2",
    ]
    assert all(f["cpu_s"] > 0 and f["peak_rss_mb"] > 0 for f in summary["figures"])
    assert json.loads((tmp_path / "r.json").read_text())["labels"] == 20_000
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # the shards are removed


def test_bench_scale_switches(tmp_path):
    """``--cluster-first``, ``--in-flight``, ``--no-export``, ``--no-baseline``: the steps
    asked for, the cluster still checked against ``sync``."""
    spec = importlib.util.spec_from_file_location("bench_scale_distributed", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    args = ["--labels", "20k", "--shards", "5", "--workers", "2", "--workdir", str(tmp_path)]
    summary = bench.main(
        [*args, "--no-export", "--no-baseline", "--cluster-first", "--in-flight", "1"]
    )
    assert [f["step"] for f in summary["figures"]] == ["generate", "stats local:2", "stats sync"]
    assert summary["identical_stats"] is True
    assert summary["identical_export_files"] is None
    assert summary["in_flight"] == 1
    assert summary["thumbs"]["labels"] == 20_000
