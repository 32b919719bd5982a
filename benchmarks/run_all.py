"""Run every benchmark in turn: ``python benchmarks/run_all.py [--quick]`` (or ``make bench``).

Each benchmark prints its own figures and the ratio to a baseline measured in the same run.
They are not part of the test suite; on a shared 2-core machine quote medians and CPU times.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

FULL = [
    ["bench_import.py"],  # 1,000,000 comparison rows: SQLite vs its floor, PostgreSQL vs COPY
    ["bench_export.py"],  # 1,000,000 pairs to Parquet vs pyarrow
    ["bench_read.py", "--items", "10000"],  # SQLite -> export, before/after the fast reader
    ["bench_quality.py"],  # alpha, Dawid-Skene, Bradley-Terry vs references
    ["bench_server.py"],  # 50 and 200 concurrent raters on SQLite
    ["bench_verify.py"],  # sandboxed verifier vs a bare pytest subprocess
    ["bench_sampling.py"],  # preflab sample vs a sequential loop; verify rollouts throughput
    [
        "bench_rm.py",
        "--speed-pairs",
        "256",
        "--accuracy-pairs",
        "2000",
    ],  # rm train vs TRL; RM accuracy vs baselines
    # every read step at 100k and 1M judgments, SQLite (+ PostgreSQL with PREFLAB_TEST_PG_URL)
    ["bench_scale.py", "--sizes", "100k", "1m"],
]
QUICK = [
    ["bench_import.py", "--rows", "20000"],
    ["bench_export.py", "--pairs", "50000", "--repeats", "1", "--e2e-pairs", "2000"],
    ["bench_quality.py", "--quick"],
    ["bench_server.py", "--raters", "20", "--submissions", "200"],
    ["bench_verify.py", "--repeats", "1"],
    ["bench_sampling.py", "--n", "8"],
    ["bench_rm.py", "--speed-pairs", "32", "--accuracy-pairs", "100", "--skip-parity"],
    ["bench_scale.py", "--sizes", "20k"],
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes: a smoke run of every benchmark"
    )
    args = parser.parse_args()
    failed = []
    for cmd in QUICK if args.quick else FULL:
        print(f"\n=== {' '.join(cmd)}", flush=True)
        rc = subprocess.call([sys.executable, str(HERE / cmd[0]), *cmd[1:]], env=os.environ.copy())
        if rc != 0:
            failed.append(cmd[0])
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
