"""Smoke test of the import benchmark (the full run: ``python benchmarks/bench_import.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_import.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_import", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.slow
def test_benchmark_runs_on_20000_rows():
    result = load_bench().main(["--rows", "20000", "--json"])
    assert result["rows"] == 20000
    assert result["import_rows_per_s"] > 0 and result["baseline_rows_per_s"] > 0
    assert result["ratio_to_baseline"] > 0
    assert result["import_peak_rss_mb"] < 500


@pytest.mark.slow
def test_peak_rss_is_the_imports_own_not_its_parents():
    # A parent larger than the import (a test worker that has loaded torch, here 600 MiB of
    # touched pages): Linux's getrusage reported the parent's peak for the child.
    ballast = bytearray(600 * 2**20)
    ballast[::4096] = b"\x01" * len(range(0, len(ballast), 4096))
    result = load_bench().main(["--rows", "2000", "--json"])
    assert result["import_peak_rss_mb"] < 400 and result["baseline_peak_rss_mb"] < 400
    del ballast
