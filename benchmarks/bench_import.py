"""Import speed and memory against a floor: ``python benchmarks/bench_import.py [--rows N]``.

Generates N comparison rows ``{"prompt", "chosen", "rejected", "labeler"}`` into a temporary
JSONL file, then in two child processes (each timed, and its peak RSS read with ``wait4``):

- **baseline**: ``orjson.loads`` every line + ``executemany`` of the four strings into a bare
  SQLite table (no indexes, no validation), chunks of 2,000 rows: the floor for reading the
  file and writing the same bytes into SQLite;
- **import**: :func:`preflab.io.importer.import_files` into a fresh SQLite database (validation,
  content hashes, idempotency lookups; each row becomes an item, two candidates and a pairwise
  judgment).

Both children also report the CPU seconds of the timed part (all threads, ``getrusage``): other
processes loading the machine stretch the wall time much more than the CPU time.

Targets (foundation issue): >= 50,000 rows/s, <= 3x the baseline's time, peak RSS <= 500 MB at
1,000,000 rows. Prints one JSON line of results last (``--json`` prints only that).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def generate(path: Path, rows: int, raters: int = 200) -> None:
    with open(path, "wb") as f:
        for i in range(rows):
            record = {
                "prompt": f"Question {i}: explain step {i % 997} of the procedure in two sentences, please.",
                "chosen": f"Step {i % 997} prepares the input; it checks the size and splits it into parts ({i}).",
                "rejected": f"I am not sure what step {i % 997} does, maybe it does something with the data ({i}).",
                "labeler": f"rater-{i % raters}",
            }
            f.write(orjson.dumps(record) + b"\n")


def _cpu() -> float:
    """CPU seconds of this process so far, all threads, and of its finished children (the
    importer converts large files in a second process)."""
    return sum(
        u.ru_utime + u.ru_stime
        for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    )


def _own_peak_rss_kib() -> int:
    """This process's peak RSS (KiB). Not ``getrusage``: on Linux its ``ru_maxrss`` keeps the peak
    of the image before ``exec``, so a child of a large parent (a test worker holding torch)
    reported the parent's peak (3.5 GB for a 20k-row import); ``VmHWM`` starts afresh."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child_baseline(data: Path, db: Path) -> dict:
    import sqlite3

    cpu = _cpu()
    start = time.perf_counter()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE comparisons (prompt TEXT, chosen TEXT, rejected TEXT, labeler TEXT)")
    rows: list[tuple[str, str, str, str]] = []
    n = 0
    with open(data, "rb") as f:
        for line in f:
            r = orjson.loads(line)
            rows.append((r["prompt"], r["chosen"], r["rejected"], r["labeler"]))
            if len(rows) >= 2000:
                conn.executemany("INSERT INTO comparisons VALUES (?, ?, ?, ?)", rows)
                n += len(rows)
                rows = []
    conn.executemany("INSERT INTO comparisons VALUES (?, ?, ?, ?)", rows)
    n += len(rows)
    conn.commit()
    conn.close()
    return {
        "rows": n,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": _cpu() - cpu,
        "main_rss_mb": _own_peak_rss_kib() / 1024,
    }


def child_import(data: Path, db: Path) -> dict:
    from sqlalchemy import event

    from preflab.io.importer import import_files
    from preflab.io.importer.writer import Writer
    from preflab.store import db as store_db
    from preflab.store import repo, transaction

    engine = store_db.open_db(f"sqlite:///{db}")
    with transaction(engine) as s:
        repo.create_project(s, "bench", kinds=["pairwise"])

    # Where the time goes: seconds inside the importer's bulk inserts (SQLite's executemany of
    # the finished rows) and in the final commit; the rest is reading, converting and checking.
    in_sqlite = {"insert": 0.0, "commit_from": 0.0}
    insert = Writer.insert

    def timed_insert(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        t = time.perf_counter()
        insert(self, *args, **kwargs)
        in_sqlite["insert"] += time.perf_counter() - t

    Writer.insert = timed_insert  # type: ignore[method-assign]
    event.listen(
        engine, "commit", lambda conn: in_sqlite.__setitem__("commit_from", time.perf_counter())
    )

    cpu = _cpu()
    start = time.perf_counter()
    report = import_files(engine, "bench", [data])
    seconds = time.perf_counter() - start
    cpu = _cpu() - cpu
    # the commit event fires just before the DBAPI commit; import_files returns right after it
    commit = start + seconds - in_sqlite["commit_from"]
    engine.dispose()
    # Peak RSS of this process and of the converting process (KiB on Linux); their sum bounds
    # what the import held at once.
    self_kib = _own_peak_rss_kib()
    worker_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "rows": report.judgments_added,
        "items": report.items_added,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "sqlite_insert_seconds": in_sqlite["insert"],
        "sqlite_commit_seconds": commit,
        "main_rss_mb": self_kib / 1024,
        "worker_rss_mb": worker_kib / 1024,
    }


def run_child(kind: str, data: Path, db: Path) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", kind, "--data", str(data), "--db", str(db)],
        stdout=subprocess.PIPE,
        env=env,
    )
    out = proc.stdout.read() if proc.stdout else b""
    proc.wait()
    if proc.returncode != 0:
        raise SystemExit(f"{kind} child failed with exit code {proc.returncode}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    # the child's own peak, plus its converting process's when the import used one: the sum
    # bounds what the import held at once
    result["peak_rss_mb"] = result["main_rss_mb"] + result.get("worker_rss_mb", 0)
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--json", action="store_true", help="print only the JSON result line")
    parser.add_argument("--child", choices=["baseline", "import"], help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        result = (child_baseline if args.child == "baseline" else child_import)(args.data, args.db)
        print(json.dumps(result))
        return result

    say = (lambda *a: None) if args.json else print
    with tempfile.TemporaryDirectory(prefix="preflab-bench-") as tmp:
        data = Path(tmp) / "comparisons.jsonl"
        t = time.perf_counter()
        generate(data, args.rows)
        say(
            f"generated {args.rows:,} rows ({data.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f}s"
        )
        baseline = run_child("baseline", data, Path(tmp) / "baseline.db")
        say(
            f"baseline: {baseline['rows'] / baseline['seconds']:,.0f} rows/s ({baseline['seconds']:.1f}s, "
            f"CPU {baseline['cpu_seconds']:.1f}s)"
        )
        imported = run_child("import", data, Path(tmp) / "preflab.db")
        assert imported["rows"] == args.rows, imported
        rate = imported["rows"] / imported["seconds"]
        ratio = imported["seconds"] / baseline["seconds"]
        cpu_rate = imported["rows"] / imported["cpu_seconds"]
        cpu_ratio = imported["cpu_seconds"] / baseline["cpu_seconds"]
        say(
            f"import:   {rate:,.0f} rows/s ({imported['seconds']:.1f}s), {ratio:.2f}x the baseline's time, "
            f"peak RSS {imported['peak_rss_mb']:.0f} MB"
        )
        say(
            f"          by CPU time: {cpu_rate:,.0f} rows/s ({imported['cpu_seconds']:.1f}s), "
            f"{cpu_ratio:.2f}x the baseline's CPU time"
        )
        in_sqlite = imported["sqlite_insert_seconds"] + imported["sqlite_commit_seconds"]
        say(
            f"          of the wall time, {in_sqlite:.1f}s ({in_sqlite / imported['seconds']:.0%}) in SQLite writing the "
            f"finished rows (executemany {imported['sqlite_insert_seconds']:.1f}s + commit "
            f"{imported['sqlite_commit_seconds']:.1f}s): {args.rows / in_sqlite:,.0f} rows/s is this schema's floor"
        )
        result = {
            "rows": args.rows,
            "import_rows_per_s": round(rate),
            "baseline_rows_per_s": round(baseline["rows"] / baseline["seconds"]),
            "ratio_to_baseline": round(ratio, 2),
            "import_rows_per_cpu_s": round(cpu_rate),
            "baseline_rows_per_cpu_s": round(baseline["rows"] / baseline["cpu_seconds"]),
            "cpu_ratio_to_baseline": round(cpu_ratio, 2),
            "import_peak_rss_mb": round(imported["peak_rss_mb"], 1),
            "import_sqlite_write_seconds": round(
                imported["sqlite_insert_seconds"] + imported["sqlite_commit_seconds"], 2
            ),
            "baseline_peak_rss_mb": round(baseline["peak_rss_mb"], 1),
        }
        print(json.dumps(result))
        return result


if __name__ == "__main__":
    main()
