"""Smoke test of the import benchmark (the full run: ``python benchmarks/bench_import.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_import.py"


@pytest.mark.slow
def test_benchmark_runs_on_20000_rows():
    spec = importlib.util.spec_from_file_location("bench_import", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.main(["--rows", "20000", "--json"])
    assert result["rows"] == 20000
    assert result["import_rows_per_s"] > 0 and result["baseline_rows_per_s"] > 0
    assert result["ratio_to_baseline"] > 0
    assert result["import_peak_rss_mb"] < 500
