"""Profile fetch+submit cycles in-process: SQL statements per cycle and CPU ms per cycle.

    python benchmarks/profile_cycle.py [--cycles 300] [--raters 20] [--cprofile] [--driver asgi|testclient]
    python benchmarks/profile_cycle.py --db postgres   # needs PREFLAB_TEST_PG_URL (an admin URL)

Runs the real app on a SQLite file without a network or load generator in the way, so the
numbers are the server's own cost per cycle (auth + next + submit), HTTP parsing excluded.

``--driver asgi`` (default) calls the ASGI app directly with prepared scopes on one event loop
(what uvicorn does after parsing a request); ``--driver testclient`` goes through Starlette's
TestClient, whose own overhead (httpx, a thread portal) is counted in the CPU figure.

Statements are counted by SQLite itself on the framework's connections (``set_trace_callback``),
so BEGIN/COMMIT count too. SQLite reports each trigger program a statement runs to the callback
again, with the statement's own text (its bound values expanded): such a repeat is part of the
statement that fired it, not a statement of its own, and is not counted (:func:`folding`). The
fast lane's SQLite statements are counted at its cursor, its BEGIN IMMEDIATE and COMMIT
included (the trace callback would expand each statement's SQL with its values, once more per
trigger program: a cost of the counting, not of the server). On PostgreSQL the lane's
statements are counted at its cursor, its explicit BEGIN and COMMIT included (its connections
are in autocommit: psycopg would otherwise send BEGIN as a round trip of its own, uncounted),
and the framework's at the DBAPI cursor (SQLAlchemy's ``before_cursor_execute``) plus one
COMMIT or ROLLBACK per transaction. A transaction is counted at each BEGIN, and at each write
statement run on its own (autocommit: the submit's guarded store, on both backends). On
PostgreSQL the tables are analysed after 200 warm-up cycles (``bench_server.analyze``) and the
backends' CPU a cycle is printed too (``bench_server.pg_backends_cpu_s``; a server on this machine).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

BODY = {
    "kind": "pairwise",
    "winner": "a",
    "strength": 2,
    "rationale": "The chosen answer is correct and more concise.",
}


def asgi_driver(app, tokens: list[str]):
    """``cycle(i)`` through the ASGI app on a private event loop."""
    loop = asyncio.new_event_loop()

    async def call(path: str, token: str, body: bytes) -> tuple[int, bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 5000),
            "headers": [
                (b"host", b"127.0.0.1:8000"),
                (b"authorization", f"Bearer {token}".encode()),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
        sent = False
        out: dict = {"status": 0, "body": b""}

        async def receive():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        async def send(message) -> None:
            if message["type"] == "http.response.start":
                out["status"] = message["status"]
            elif message["type"] == "http.response.body":
                out["body"] += message.get("body", b"")

        await app(scope, receive, send)
        return out["status"], out["body"]

    async def acycle(i: int) -> None:
        token = tokens[i % len(tokens)]
        status, body = await call("/api/v1/projects/bench/assignments/next", token, b"")
        assert status == 200, body
        task = orjson.loads(body)["task"]
        payload = orjson.dumps(
            {
                "assignment_id": task["assignment_id"],
                "idempotency_key": uuid.uuid4().hex,
                "judgment": BODY,
                "telemetry": {"active_ms": 5000, "typed_chars": 46},
            }
        )
        status, body = await call("/api/v1/projects/bench/judgments", token, payload)
        assert status == 201, body

    async def lifespan(kind: str) -> None:
        msgs = [{"type": f"lifespan.{kind}"}]

        async def receive():
            return msgs.pop() if msgs else (await asyncio.sleep(3600))

        async def send(message) -> None:
            raise _Done

        class _Done(Exception):
            pass

        try:
            await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
        except _Done:
            pass

    loop.run_until_complete(lifespan("startup"))
    return (lambda i: loop.run_until_complete(acycle(i))), loop


def testclient_driver(app, tokens: list[str]):
    from fastapi.testclient import TestClient

    c = TestClient(app)
    c.__enter__()

    def cycle(i: int) -> None:
        h = {"Authorization": f"Bearer {tokens[i % len(tokens)]}"}
        r = c.post("/api/v1/projects/bench/assignments/next", headers=h)
        task = r.json()["task"]
        body = {
            "assignment_id": task["assignment_id"],
            "idempotency_key": uuid.uuid4().hex,
            "judgment": BODY,
            "telemetry": {"active_ms": 5000, "typed_chars": 46},
        }
        s = c.post("/api/v1/projects/bench/judgments", json=body, headers=h)
        assert s.status_code == 201, s.text

    return cycle, c


def folding(trace):
    """``trace`` for one SQLite connection, skipping SQLite's repeat of a statement at the start
    of each trigger program it runs (same text, bound values included, straight after it)."""
    last = [None]

    def callback(sql: str) -> None:
        if sql != last[0]:
            trace(sql)
        last[0] = sql

    return callback


def _count_sqlite_lane(trace) -> None:
    """Count the SQLite lane's statements at its cursor (see the module's docstring)."""
    from preflab.server.exec import TracingCursor
    from preflab.server.exec.sqlite import SqliteExecutor

    begin = SqliteExecutor.begin
    SqliteExecutor.begin = lambda self: TracingCursor(begin(self), trace)


def _count_pg(engine, count: list[int], txns: list[int]) -> None:
    """Statements and transactions of a PostgreSQL engine (the server's own CPU is measured
    in-process; PostgreSQL's is not, see ``bench_server.py`` for the whole machine)."""
    from sqlalchemy import event

    def statement(*_args) -> None:
        count[0] += 1

    def end(*_args) -> None:
        count[0] += 1  # COMMIT / ROLLBACK is a round trip of its own
        txns[0] += 1

    event.listen(engine, "before_cursor_execute", statement)
    event.listen(engine, "commit", end)
    event.listen(engine, "rollback", end)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=300)
    ap.add_argument("--raters", type=int, default=20)
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--driver", choices=["asgi", "testclient"], default="asgi")
    ap.add_argument(
        "--no-fastlane", action="store_true", help="the framework path only (for comparison)"
    )
    ap.add_argument(
        "--repeat", type=int, default=3, help="measure this many times, report the median"
    )
    ap.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument(
        "--no-count",
        action="store_true",
        help="CPU without the counting's own cost (SQLite expands every traced statement's SQL "
        "with its values, once more for each trigger program it runs); no statement figures",
    )
    args = ap.parse_args()
    from bench_server import analyze, fresh_pg_database, pg_backends_cpu_s, pg_cpu_between, seed
    from sqlalchemy import event

    from preflab.server import fastlane
    from preflab.server.app import create_app

    count, txns, in_tx = [0], [0], [False]

    def trace(sql: str) -> None:
        """Every statement is a round trip (BEGIN and COMMIT included). Transactions: each
        BEGIN, and each write run on its own (autocommit: the submit's guarded store); an
        autocommit read (the submit's read, no locks) writes nothing and is not counted."""
        count[0] += 1
        head = sql.lstrip()[:6].upper()
        if head.startswith("BEGIN"):
            txns[0] += 1
            in_tx[0] = True
        elif head.startswith("COMMIT"):
            in_tx[0] = False
        elif not in_tx[0] and head.startswith(("WITH S", "INSERT", "UPDATE")):
            txns[0] += 1

    if not args.no_count and args.db == "postgres":
        fastlane.TRACE = trace
    elif not args.no_count:
        _count_sqlite_lane(trace)
    with tempfile.TemporaryDirectory() as tmp:
        if args.db == "postgres":
            admin = os.environ.get("PREFLAB_TEST_PG_URL")
            if not admin:
                raise SystemExit(
                    "--db postgres needs PREFLAB_TEST_PG_URL (an admin URL of a throwaway server)"
                )
            url = fresh_pg_database(admin)
        else:
            url = f"sqlite:///{Path(tmp) / 'p.db'}"
        total = args.cycles * args.repeat + 300
        tokens = seed(url, args.raters, items=total + 100)
        app = create_app(url)
        if args.no_fastlane:
            fastlane.ENABLED = False
        for engine in {app.state.db.engine, app.state.db.write_engine} - (
            {app.state.db.engine, app.state.db.write_engine} if args.no_count else set()
        ):
            if engine.dialect.name == "sqlite":
                event.listen(
                    engine,
                    "connect",
                    lambda dbapi, _rec: (
                        dbapi.set_trace_callback(folding(trace))
                        if isinstance(dbapi, sqlite3.Connection)
                        else None
                    ),
                )
            else:
                _count_pg(engine, count, txns)
        cycle, handle = (asgi_driver if args.driver == "asgi" else testclient_driver)(app, tokens)
        warm = 200 if args.db == "postgres" else 40
        for i in range(warm):  # warm up: connections, statement caches, item views
            cycle(i)
        if args.db == "postgres":  # planner statistics as a live database has them
            analyze(url)  # (bench_server.analyze: a few hundred leases and judgments)
        figures = []
        for rep in range(args.repeat):
            count[0] = txns[0] = 0
            fastlane.STATS.clear()
            prof = cProfile.Profile() if args.cprofile and rep == args.repeat - 1 else None
            pg0 = pg_backends_cpu_s(url) if args.db == "postgres" else None
            t0, c0 = time.perf_counter(), time.process_time()
            if prof:
                prof.enable()
            for i in range(args.cycles):
                cycle(warm + rep * args.cycles + i)
            if prof:
                prof.disable()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            pg_cpu = pg_cpu_between(pg0, pg_backends_cpu_s(url)) if pg0 is not None else 0.0
            figures.append(
                (
                    cpu / args.cycles * 1000,
                    wall / args.cycles * 1000,
                    count[0] / args.cycles,
                    txns[0] / args.cycles,
                    pg_cpu / args.cycles * 1000,
                )
            )
        figures.sort()
        cpu_ms, wall_ms, stmts, per_cycle_txns, pg_ms = figures[len(figures) // 2]
        print(
            f"{args.db} driver {args.driver}{' (no fast lane)' if args.no_fastlane else ''}: "
            f"statements/cycle {stmts:.1f}  transactions/cycle {per_cycle_txns:.1f}  "
            f"CPU ms/cycle {cpu_ms:.3f} (median of {args.repeat}: {', '.join(f'{f[0]:.3f}' for f in figures)})  "
            f"wall ms/cycle {wall_ms:.3f}"
            + (f"  PostgreSQL backends CPU ms/cycle {pg_ms:.3f}" if args.db == "postgres" else "")
            + f"  fast lane: {dict(fastlane.STATS)}"
        )
        if prof:
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        if args.driver == "testclient":
            handle.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
