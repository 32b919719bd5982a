"""Import speed and memory against floors: ``python benchmarks/bench_import.py [--rows N]``.

Generates N comparison rows ``{"prompt", "chosen", "rejected", "labeler"}`` into a temporary
JSONL file (``--per-item K``: each item judged by K raters, its records spread over the file, as
in a project where several raters label each pair; default 1, every record a new item), then runs each part in its own fresh child process (timed, CPU seconds and peak RSS
read):

- **baseline**: ``orjson.loads`` every line + ``executemany`` of the four strings into a bare
  SQLite table (no indexes, no validation), chunks of 2,000 rows;
- **floor**: SQLite alone writing the rows the importer writes for this file into preflab's
  schema: the rows built and staged in an unjournaled file before the clock starts, then one
  ``INSERT ... SELECT`` per table, commit and close (SQLite's B-trees, foreign-key checks and
  WAL checkpoint, no Python). What no importer of this schema can beat (issue 10: keep the
  import within 1.3x of it; the experiment behind it: ``docs/experiments/bench_import_floor.py``);
- **import**: :func:`preflab.io.importer.import_files` into a fresh SQLite database (validation,
  content hashes, idempotency lookups; each row becomes an item, two candidates and a pairwise
  judgment);
- with PostgreSQL (``--pg-url``, default ``$PREFLAB_TEST_PG_URL``; a fresh database each, dropped
  afterwards): **pg copy**, the baseline's parse + a bare ``COPY`` of the four strings into an
  unindexed table, and **pg import**, ``import_files`` there (bulk rows through ``COPY``).

CPU seconds are of the timed part (all threads and finished children, ``getrusage``): other
processes loading the machine stretch the wall time much more than the CPU time.

Prints the ratios (import / floor, PostgreSQL import / bare COPY and / SQLite import), then one
JSON line of results last (``--json`` prints only that).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def generate(path: Path, rows: int, raters: int = 200, per_item: int = 1) -> None:
    """``rows`` comparisons; ``per_item`` > 1: each item (prompt and answers) judged by that many
    raters, in records spread at random over the file (fixed seed): most repeats land in a later
    chunk of the import, some in the same chunk. ``per_item=1``: each record a new item."""
    n_items = -(-rows // per_item)
    if per_item == 1:
        order: list[int] = list(range(rows))
    else:
        order = [k for k in range(n_items) for _ in range(per_item)][:rows]
        random.Random(20261201).shuffle(order)
    seen = [0] * n_items
    step = max(1, raters // per_item)  # the raters of one item: all different
    with open(path, "wb") as f:
        for i, k in enumerate(order):
            rater = i % raters if per_item == 1 else (k + seen[k] * step) % raters
            seen[k] += 1
            record = {
                "prompt": f"Question {k}: explain step {k % 997} of the procedure in two sentences, please.",
                "chosen": f"Step {k % 997} prepares the input; it checks the size and splits it into parts ({k}).",
                "rejected": f"I am not sure what step {k % 997} does, maybe it does something with the data ({k}).",
                "labeler": f"rater-{rater}",
            }
            f.write(orjson.dumps(record) + b"\n")


def _cpu() -> float:
    """CPU seconds of this process so far, all threads, and of its finished children (the
    importer converts large files in a second process)."""
    return sum(
        u.ru_utime + u.ru_stime
        for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    )


def _own_cpu() -> float:
    """CPU seconds of this process alone (the import's writing process, without its converting
    process): the part of an import that cannot overlap, so what bounds its wall time when a
    core is free for the converting process."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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


def _stage(db: Path, tables: list[tuple[str, list[tuple]]]) -> Path:
    """The rows in an unjournaled staging file beside ``db``, one plain table each."""
    import sqlite3

    stage_path = db.with_name(db.stem + "-stage.db")
    stage = sqlite3.connect(stage_path, isolation_level=None)
    stage.execute("PRAGMA journal_mode=OFF")
    stage.execute("PRAGMA synchronous=OFF")
    stage.execute("BEGIN")
    for n, (_, rows) in enumerate(tables):
        width = len(rows[0])
        stage.execute(f"CREATE TABLE t{n} ({', '.join(f'c{i}' for i in range(width))})")
        stage.executemany(f"INSERT INTO t{n} VALUES ({', '.join('?' * width)})", rows)
    stage.execute("COMMIT")
    stage.close()
    return stage_path


def _importer_rows(data: Path, project_pk: int, secret: str) -> tuple[list, dict[str, list[tuple]]]:
    """The raters and the rows the importer writes for ``data`` (its own conversion,
    ``comparison_pair``; the columns that are NULL in every row left out, as it does)."""
    from preflab.io.formats.generic import comparison_pair
    from preflab.io.importer import ImportOptions
    from preflab.io.importer.convert import convert_options
    from preflab.schema import rater_hash

    options = convert_options(ImportOptions())
    raters: dict[str, int] = {}
    item_pks: dict[str, int] = {}
    items, candidates, judgments = [], [], []
    with open(data, "rb") as f:
        for line in f:
            p = comparison_pair(orjson.loads(line), options)
            (c0, c1), (t0, t1) = p.candidate_keys, p.texts
            pk = item_pks.get(p.item_key)
            if pk is None:  # an item judged before (--per-item) is written once
                pk = item_pks[p.item_key] = len(item_pks) + 1
                items.append(
                    (pk, project_pk, p.item_key, p.item_hash, p.prompt_json, "[]", "{}", 1, NOW)
                )
                candidates += [(pk, c0, 0, t0, "model", "{}"), (pk, c1, 1, t1, "model", "{}")]
            rater = raters.setdefault(p.rater_key, len(raters) + 1)
            judgments.append(
                (project_pk, pk, rater, "pairwise", p.body_json, p.pair_lo, p.pair_hi, p.score,
                 p.shown_order_json, 0, p.source, p.content_hash, 1, 0, NOW)
            )  # fmt: skip
    rater_rows = [(pk, project_pk, key, rater_hash(key, secret), NOW) for key, pk in raters.items()]
    return rater_rows, {
        "items (pk, project_pk, item_key, content_hash, prompt, domains, metadata, batch_pk, created_at)": items,
        "candidates (item_pk, candidate_key, position, text, source, metadata)": candidates,
        "judgments (project_pk, item_pk, rater_pk, kind, body, pair_lo, pair_hi, score, shown_order, "
        "review_pass, source, content_hash, batch_pk, excluded, created_at)": judgments,
    }


NOW = "2026-11-30 00:00:00.000000"


def child_floor(data: Path, db: Path) -> dict:
    """SQLite alone writing the importer's rows into preflab's schema (see the module doc)."""
    import sqlite3

    from preflab.settings import get_settings
    from preflab.store import db as store_db
    from preflab.store import repo, transaction

    engine = store_db.open_db(f"sqlite:///{db}")
    with transaction(engine) as s:
        project = repo.create_project(s, "bench", kinds=["pairwise"])
        project_pk, secret = project.pk, project.secret
    engine.dispose()
    raters, tables = _importer_rows(data, project_pk, secret)
    stage = _stage(db, list(tables.items()))
    targets = list(tables)  # "table (columns)"
    del tables
    conn = sqlite3.connect(db, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
        conn.execute(f"PRAGMA {pragma}")
    conn.execute(f"PRAGMA cache_size=-{get_settings().import_cache_kib}")
    conn.execute(
        "INSERT INTO import_batches (pk, project_pk, content_hash, sources, format, counts, created_at) "
        "VALUES (1, ?, 'x', '[]', 'comparison', '{}', ?)",
        (project_pk, NOW),
    )
    conn.executemany(
        "INSERT INTO raters (pk, project_pk, rater_key, rater_hash, created_at) VALUES (?, ?, ?, ?, ?)",
        raters,
    )
    conn.execute("ATTACH DATABASE ? AS stage", (str(stage),))
    cpu, start = _cpu(), time.perf_counter()
    conn.execute("BEGIN")
    for n, target in enumerate(targets):  # a plain table scans in rowid order: the rows' order
        conn.execute(f"INSERT INTO {target} SELECT * FROM stage.t{n}")
    conn.execute("COMMIT")
    conn.execute("DETACH DATABASE stage")
    conn.close()  # checkpoints the WAL into the file, as the importer's connection does
    seconds = time.perf_counter() - start
    with closing(sqlite3.connect(db)) as check:
        rows = check.execute("SELECT count(*) FROM judgments").fetchone()[0]
    return {
        "rows": rows,
        "seconds": seconds,
        "cpu_seconds": _cpu() - cpu,
        "main_rss_mb": _own_peak_rss_kib() / 1024,
    }


def child_pg_copy(data: Path, url: str) -> dict:
    """The baseline on PostgreSQL: parse every line, ``COPY`` the four strings into a bare table."""
    import psycopg

    cpu, start = _cpu(), time.perf_counter()
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute(
            "CREATE TABLE comparisons (prompt TEXT, chosen TEXT, rejected TEXT, labeler TEXT)"
        )
        n = 0
        with (
            conn.cursor() as cur,
            cur.copy("COPY comparisons FROM STDIN") as copy,
            open(data, "rb") as f,
        ):
            for line in f:
                r = orjson.loads(line)
                copy.write_row((r["prompt"], r["chosen"], r["rejected"], r["labeler"]))
                n += 1
    return {
        "rows": n,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": _cpu() - cpu,
        "main_rss_mb": _own_peak_rss_kib() / 1024,
    }


def child_import(data: Path, db: Path | str) -> dict:
    """``import_files`` into ``db``: a SQLite file, or a database URL."""
    from sqlalchemy import event

    from preflab.io.importer import import_files
    from preflab.io.importer.stage import Mover
    from preflab.io.importer.writer import Writer
    from preflab.store import db as store_db
    from preflab.store import repo, transaction

    engine = store_db.open_db(str(db) if "://" in str(db) else f"sqlite:///{db}")
    with transaction(engine) as s:
        repo.create_project(s, "bench", kinds=["pairwise"])

    # Where the time goes: seconds inside the importer's bulk inserts (SQLite's executemany or
    # INSERT ... SELECT of staged rows, PostgreSQL's COPY of the finished rows) and in the final
    # commit; the rest is reading, converting and checking.
    in_sqlite = {"insert": 0.0, "commit_from": 0.0}

    def timed(method):
        def timed_method(self, *args, **kwargs):
            t = time.perf_counter()
            method(self, *args, **kwargs)
            in_sqlite["insert"] += time.perf_counter() - t

        return timed_method

    Writer.insert = timed(Writer.insert)  # type: ignore[method-assign]
    Mover.items = timed(Mover.items)  # type: ignore[method-assign]
    Mover.judgments = timed(Mover.judgments)  # type: ignore[method-assign]
    event.listen(
        engine, "commit", lambda conn: in_sqlite.__setitem__("commit_from", time.perf_counter())
    )

    from preflab.io.importer import worker

    used = []
    use_worker = worker.use_worker
    worker.use_worker = lambda paths: used.append(use_worker(paths)) or used[-1]  # type: ignore[assignment]
    cpu, own_cpu = _cpu(), _own_cpu()
    start = time.perf_counter()
    report = import_files(engine, "bench", [data])
    seconds = time.perf_counter() - start
    cpu, own_cpu = _cpu() - cpu, _own_cpu() - own_cpu
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
        "writer_cpu_seconds": own_cpu,
        "used_worker": bool(used and used[0]),
        "sqlite_insert_seconds": in_sqlite["insert"],
        "sqlite_commit_seconds": commit,
        "main_rss_mb": self_kib / 1024,
        "worker_rss_mb": worker_kib / 1024,
    }


CHILDREN = {
    "baseline": child_baseline,
    "floor": child_floor,
    "import": child_import,
    "pg_copy": child_pg_copy,
    "pg_import": child_import,
}


@contextmanager
def pg_database(admin_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database on the server of ``admin_url``, dropped afterwards."""
    from sqlalchemy import create_engine, text

    name = f"preflab_bench_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{admin_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


def run_child(kind: str, data: Path, db: Path | str) -> dict:
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


def run_postgres(admin_url: str, data: Path, rows: int, sqlite: dict, say) -> dict:
    """The bare ``COPY`` and the import on PostgreSQL, each into a fresh database."""
    with pg_database(admin_url) as url:
        copied = run_child("pg_copy", data, url)
    with pg_database(admin_url) as url:
        imported = run_child("pg_import", data, url)
    assert copied["rows"] == rows and imported["rows"] == rows, (copied, imported)
    to_copy = imported["seconds"] / copied["seconds"]
    to_sqlite = imported["seconds"] / sqlite["seconds"]
    say(
        f"pg copy:  {rows / copied['seconds']:,.0f} rows/s ({copied['seconds']:.1f}s, CPU {copied['cpu_seconds']:.1f}s) "
        "parse + bare COPY"
    )
    say(
        f"pg import: {rows / imported['seconds']:,.0f} rows/s ({imported['seconds']:.1f}s, CPU "
        f"{imported['cpu_seconds']:.1f}s of this process, the server's apart): {to_copy:.2f}x the bare COPY, "
        f"{to_sqlite:.2f}x the SQLite import"
    )
    return {
        "pg_copy_seconds": round(copied["seconds"], 2),
        "pg_import_seconds": round(imported["seconds"], 2),
        "pg_import_rows_per_s": round(rows / imported["seconds"]),
        "pg_import_cpu_seconds": round(imported["cpu_seconds"], 2),
        "pg_ratio_to_copy": round(to_copy, 2),
        "pg_ratio_to_sqlite_import": round(to_sqlite, 2),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--per-item",
        type=int,
        default=1,
        help="records per item: each item judged by this many raters, its records spread over "
        "the file (default 1: every record a new item)",
    )
    parser.add_argument("--json", action="store_true", help="print only the JSON result line")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("PREFLAB_TEST_PG_URL"),
        help="a PostgreSQL server (postgresql+psycopg://user@host:port/db) to import into as well; "
        "default $PREFLAB_TEST_PG_URL; without one only SQLite is measured",
    )
    parser.add_argument("--child", choices=list(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        db = args.db if "://" in args.db else Path(args.db)
        result = CHILDREN[args.child](args.data, db)
        print(json.dumps(result))
        return result

    say = (lambda *a: None) if args.json else print
    with tempfile.TemporaryDirectory(prefix="preflab-bench-") as tmp:
        data = Path(tmp) / "comparisons.jsonl"
        t = time.perf_counter()
        generate(data, args.rows, per_item=args.per_item)
        n_items = -(-args.rows // args.per_item)
        say(
            f"generated {args.rows:,} rows ({data.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f}s"
            + (
                f": {n_items:,} items, each judged by {args.per_item} raters"
                if args.per_item > 1
                else ""
            )
        )
        baseline = run_child("baseline", data, Path(tmp) / "baseline.db")
        say(
            f"baseline: {baseline['rows'] / baseline['seconds']:,.0f} rows/s ({baseline['seconds']:.1f}s, "
            f"CPU {baseline['cpu_seconds']:.1f}s)"
        )
        imported = run_child("import", data, Path(tmp) / "preflab.db")
        assert imported["rows"] == args.rows and imported["items"] == n_items, imported
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
            f"{imported['sqlite_commit_seconds']:.1f}s)"
        )
        floor = run_child("floor", data, Path(tmp) / "floor.db")
        assert floor["rows"] == args.rows, floor
        floor_ratio = imported["seconds"] / floor["seconds"]
        writer_cpu_ratio = imported["writer_cpu_seconds"] / floor["cpu_seconds"]
        say(
            f"floor:    SQLite alone writing the importer's rows {floor['seconds']:.1f}s "
            f"(CPU {floor['cpu_seconds']:.1f}s, {args.rows / floor['seconds']:,.0f} rows/s): the import takes "
            f"{floor_ratio:.2f}x the floor's time (target <= 1.3x; on a loaded machine compare the CPU "
            "times, the import's including its converting process)"
        )
        say(
            f"          the import's writing process alone: CPU {imported['writer_cpu_seconds']:.1f}s, "
            f"{writer_cpu_ratio:.2f}x the floor's CPU (its converting process: "
            f"{imported['cpu_seconds'] - imported['writer_cpu_seconds']:.1f}s, on the other core "
            "when one is free)"
            if imported["used_worker"]
            else f"          the import converted in one process (no core idle; "
            f"PREFLAB_IMPORT_WORKER=1 forces the second): CPU {imported['writer_cpu_seconds']:.1f}s"
        )
        result = {
            "rows": args.rows,
            "per_item": args.per_item,
            "items": n_items,
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
            "floor_seconds": round(floor["seconds"], 2),
            "import_seconds": round(imported["seconds"], 2),
            "ratio_to_floor": round(floor_ratio, 2),
            "floor_cpu_seconds": round(floor["cpu_seconds"], 2),
            "import_cpu_seconds": round(imported["cpu_seconds"], 2),
            "import_writer_cpu_seconds": round(imported["writer_cpu_seconds"], 2),
            "writer_cpu_ratio_to_floor_cpu": round(writer_cpu_ratio, 2),
            "import_used_worker": imported["used_worker"],
        }
        if args.pg_url:
            result.update(run_postgres(args.pg_url, data, args.rows, imported, say))
        else:
            say("PostgreSQL: not measured (no --pg-url or $PREFLAB_TEST_PG_URL)")
        print(json.dumps(result))
        return result


if __name__ == "__main__":
    main()
