"""Smoke run of ``benchmarks/bench_export.py`` at a small size (the real run: 1,000,000 pairs)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_export.py"


@pytest.mark.slow
def test_bench_export_smoke(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_export", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main(
        [
            "--pairs",
            "3000",
            "--repeats",
            "2",
            "--e2e-pairs",
            "200",
            "--json",
            str(tmp_path / "r.json"),
            "--workdir",
            str(tmp_path),
        ]
    )
    writer, e2e = results["writer"], results["end_to_end"]
    assert writer["pairs"] == 3000 and writer["items"] == 500 and writer["ratio"] > 0
    assert len(writer["preflab_s"]) == len(writer["pyarrow_s"]) == 2
    assert e2e["rows_out"] > 0 and e2e["judgments"] == 600
    assert "ratio" in capsys.readouterr().out and (tmp_path / "r.json").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("preflab-bench-")] == []
