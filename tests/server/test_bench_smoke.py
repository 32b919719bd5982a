"""Smoke run of ``benchmarks/bench_server.py`` (small, SQLite): it runs and reports figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_server_smoke():
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_server.py"),
            "--raters",
            "10",
            "--submissions",
            "40",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    rows = json.loads(out.stdout)
    assert rows[0]["submissions"] == 40 and rows[0]["errors"] == 0
    assert rows[0]["submissions_per_s"] > 0 and rows[0]["submit_p99_ms"] > 0
