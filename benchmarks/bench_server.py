"""Load benchmark of the collection server (one command).

    python benchmarks/bench_server.py                       # SQLite, 50 and 200 raters
    python benchmarks/bench_server.py --db postgres         # needs PREFLAB_TEST_PG_URL (admin URL)
    python benchmarks/bench_server.py --db sqlite postgres --workers 2 4 --raters 200 --modes closed
                                       # both in one run: prints PostgreSQL/SQLite per worker count
    python benchmarks/bench_server.py --raters 50 200 --submissions 5000 --rate 500 --workers 1

A real ``preflab serve`` on 127.0.0.1 and N simulated raters on the same machine. Each rater
is one keep-alive HTTP/1.1 connection that fetches a task (``POST .../assignments/next``) and
submits a pairwise judgment with a rationale (``POST .../judgments``): one *cycle*. Every
response is checked (status code, the assignment id in the task, the judgment id in the
answer); any other answer counts as an error and the command exits non-zero.

Two runs per rater count, each on a fresh database:

* **open loop** (``mode=open``, wrk2 style): cycles start on a fixed schedule that offers
  ``--rate`` cycles/s across the N raters (rater *i* starts a cycle every N/rate seconds,
  the raters staggered evenly). A rater still busy at its next start time starts late, but
  latency is measured from the *scheduled* start, so a stalled server shows up in the
  percentiles instead of silently lowering the offered load (coordinated omission).
* **closed loop** (``mode=closed``): every rater starts its next cycle as soon as the
  previous one ends (zero think time) — the saturation throughput.

Why both, and why the target is stated on the open loop (Little's law, L = λ·W): with N
raters always in the system (closed loop, zero think time) the mean cycle latency is
W = N / λ. At N = 200 and λ = 500 cycles/s, W = 400 ms — a p99 of 100 ms is arithmetically
impossible in a closed loop at that concurrency, however fast the server. Real raters read
and think between tasks (tens of seconds), so 200 of them offer a rate and only a few
requests are in flight at once; the open loop reproduces that: 200 connections, 500
cycles/s offered, and the latency each cycle sees.

The load generator is lean on purpose (raw asyncio streams, request bytes built once,
a minimal response parser): it shares the machine with the server, and an httpx client cost
8–11 ms CPU per cycle, more than the server itself (now 0.1 ms a cycle).

Placement on the cores: nothing is pinned by default. On a 2-core machine pinning the server to
one core and the load generator to the other (``--pin``) is not fair between the backends:
SQLite's server is one process and loses nothing, while a PostgreSQL run needs the server's
worker processes *and* PostgreSQL's backends, and the pinned workers then share one core
(PostgreSQL itself cannot be pinned from here). Left to the scheduler, every run gets the same
two cores for all of its processes. The output says which placement was used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

RATIONALE = "The chosen answer is correct and more concise."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh_pg_database(admin_url: str) -> str:
    from sqlalchemy import create_engine, text

    name = f"preflab_bench_{uuid.uuid4().hex[:10]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return admin_url.rsplit("/", 1)[0] + "/" + name


def seed(url: str, raters: int, items: int) -> list[str]:
    from preflab.server.auth import create_api_token, set_membership
    from preflab.server.database import Database, init_schema
    from preflab.server.services import projects as P
    from preflab.store.server_models import User

    init_schema(url)
    db = Database(url, pool_size=2, max_overflow=2)
    tokens = []
    with db.writing() as s:
        proj = P.create_project(
            s, "bench", kinds=["pairwise"], policy={"overlap_share": 0.2, "overlap_k": 3}
        )
        for i in range(raters):
            user = User(username=f"bench{i:04d}", display_name="bench")
            s.add(user)
            s.flush()
            set_membership(s, proj, user, "rater")
            tokens.append(create_api_token(s, user)[0])
    P.import_items(
        db,
        "bench",
        [
            {
                "id": f"b{i:06d}",
                "prompt": f"Prompt {i}",
                "candidates": [{"id": "x", "text": f"x{i}"}, {"id": "y", "text": f"y{i}"}],
            }
            for i in range(items)
        ],
    )
    db.dispose()
    return tokens


def analyze(url: str) -> None:
    """Planner statistics, as a live database has them (run after the warm-up cycles, so that
    leases and judgments have rows too).

    The lane plans each statement once per connection (generic plans). Planned against tables
    never analysed, or analysed while empty, a plan is the one for a table of a page or two (a
    scan of the project's leases for one lease id, of its judgments for one idempotency key),
    and it stays while the table grows, until autovacuum's ANALYZE invalidates it (within a
    minute or so on a live server; never in a 10-second run). Without this the benchmark
    measures that transient, O(rows) a request, instead of the server's steady state.
    """
    from sqlalchemy import create_engine, text

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("ANALYZE"))
    finally:
        engine.dispose()


# -- the lean HTTP/1.1 client -----------------------------------------------------------------


class BadResponse(Exception):
    pass


class Rater:
    """One rater: one keep-alive connection, request bytes prepared once."""

    def __init__(self, host: str, port: int, token: str, project: str, rng: random.Random) -> None:
        self.host, self.port, self.rng = host, port, rng
        auth = f"Authorization: Bearer {token}\r\n"
        self.next_req = (
            f"POST /api/v1/projects/{project}/assignments/next HTTP/1.1\r\nHost: {host}\r\n{auth}"
            "Content-Length: 0\r\n\r\n"
        ).encode()
        self.submit_head = (
            f"POST /api/v1/projects/{project}/judgments HTTP/1.1\r\nHost: {host}\r\n{auth}"
            "Content-Type: application/json\r\nContent-Length: "
        ).encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (ConnectionError, OSError):
                pass

    async def _response(self) -> tuple[int, bytes]:
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        i = head.find(b"content-length:")
        if i < 0:
            i = head.lower().find(b"content-length:")
            if i < 0:
                raise BadResponse(f"no content-length: {head[:200]!r}")
        length = int(head[i + 15 : head.index(b"\r\n", i)])
        body = await self.reader.readexactly(length) if length else b""
        return status, body

    async def cycle(self) -> tuple[float, float, float]:
        """Fetch + submit; returns (start, after fetch, end) perf_counter times."""
        t0 = time.perf_counter()
        self.writer.write(self.next_req)
        status, body = await self._response()
        if status != 200:
            raise BadResponse(f"next: {status} {body[:300]!r}")
        i = body.find(b'"assignment_id":"')
        if i < 0:
            raise BadResponse(f"next: no task: {body[:300]!r}")
        lease = body[i + 17 : body.index(b'"', i + 17)]
        t1 = time.perf_counter()
        rng = self.rng
        payload = (
            b'{"assignment_id":"'
            + lease
            + b'","idempotency_key":"'
            + uuid.uuid4().hex.encode()
            + b'","judgment":{"kind":"pairwise","winner":"'
            + rng.choice((b"a", b"b"))
            + b'","strength":'
            + str(rng.randint(1, 3)).encode()
            + b',"rationale":"'
            + RATIONALE.encode()
            + b'"},"telemetry":{"active_ms":'
            + str(rng.randint(2000, 60000)).encode()
            + b',"typed_chars":46}}'
        )
        self.writer.write(self.submit_head + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        status, body = await self._response()
        if status != 201 or not body.startswith(b'{"judgment_id":') or not body[15:16].isdigit():
            raise BadResponse(f"submit: {status} {body[:300]!r}")
        return t0, t1, time.perf_counter()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))] * 1000


def _figures(
    ok: int, elapsed: float, lat_fetch: list, lat_submit: list, lat_cycle: list, errors: list
) -> dict:
    return {
        "submissions": ok,
        "errors": len(errors),
        "seconds": round(elapsed, 2),
        "submissions_per_s": round(ok / elapsed, 1) if elapsed > 0 else 0.0,
        "fetch_p50_ms": round(pct(lat_fetch, 0.5), 1),
        "fetch_p99_ms": round(pct(lat_fetch, 0.99), 1),
        "submit_p50_ms": round(pct(lat_submit, 0.5), 1),
        "submit_p99_ms": round(pct(lat_submit, 0.99), 1),
        "cycle_p50_ms": round(pct(lat_cycle, 0.5), 1),
        "cycle_p99_ms": round(pct(lat_cycle, 0.99), 1),
        "cycle_max_ms": round(max(lat_cycle) * 1000, 1) if lat_cycle else None,
        "first_error": errors[0] if errors else None,
    }


async def drive(
    host: str,
    port: int,
    tokens: list[str],
    submissions: int,
    mode: str,
    rate: float,
    after_warmup: Callable[[], None] | None = None,
    measuring: Callable[[], None] | None = None,
) -> dict:
    """``submissions`` measured cycles after a warm-up cycle per rater, ``after_warmup`` (the
    database's statistics), a second warm-up cycle per rater (statements re-planned with them)
    and ``measuring`` (the CPU counters' start)."""
    raters = [Rater(host, port, t, "bench", random.Random(i)) for i, t in enumerate(tokens)]
    for r in raters:  # connect one at a time (a burst of 200 SYNs can overflow the backlog)
        await r.connect()
    errors: list[str] = []
    for step in (after_warmup, measuring):
        try:  # warm-up: connections, item views, prepared statements
            await asyncio.gather(*(r.cycle() for r in raters))
        except Exception as exc:
            return _figures(0, 0.0, [], [], [], [f"warm-up: {exc!r}"])
        if step is not None:
            step()
    lat_fetch: list[float] = []
    lat_submit: list[float] = []
    lat_cycle: list[float] = []
    n = len(raters)
    per_rater = [submissions // n + (1 if i < submissions % n else 0) for i in range(n)]
    period = n / rate if mode == "open" else 0.0

    async def run(i: int, r: Rater, start: float) -> None:
        for k in range(per_rater[i]):
            scheduled = start + i * (period / n) + k * period
            if mode == "open":
                delay = scheduled - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            try:
                t0, t1, t2 = await r.cycle()
            except (BadResponse, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                errors.append(repr(exc)[:400])
                return
            began = scheduled if mode == "open" else t0
            lat_fetch.append(t1 - began)
            lat_submit.append(t2 - t1)
            lat_cycle.append(t2 - began)

    t_start = time.perf_counter() + 0.05
    await asyncio.gather(*(run(i, r, t_start) for i, r in enumerate(raters)))
    elapsed = time.perf_counter() - t_start
    for r in raters:
        await r.close()
    return _figures(len(lat_cycle), elapsed, lat_fetch, lat_submit, lat_cycle, errors)


def cpu_s(pid: int, children: bool = True) -> float:
    """CPU seconds (user + system) of a process and (optionally) its children."""
    import psutil

    procs = [psutil.Process(pid)]
    if children:
        procs += procs[0].children(recursive=True)
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def pg_backends_cpu_s(url: str) -> dict[int, float] | None:
    """CPU seconds (user + system, whole life so far) of each PostgreSQL backend serving
    ``url``'s database now, other than the one asking: the server's share of PostgreSQL's work.
    Only for a server on this machine whose processes this user may read; otherwise None."""
    import psutil
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            pids = list(
                conn.execute(
                    text(
                        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                        "AND pid <> pg_backend_pid()"
                    )
                ).scalars()
            )
    finally:
        engine.dispose()
    found = {}
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue  # it ended meanwhile
        except psutil.Error:
            return None
        found[pid] = t.user + t.system
    return found


def pg_cpu_between(before: dict[int, float] | None, after: dict[int, float] | None) -> float:
    """PostgreSQL backends' CPU seconds between two readings (a backend opened in between counts
    whole; one closed in between is lost: the lane's and the pool's connections stay open)."""
    if before is None or after is None:
        return float("nan")
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def _wait_healthy(host: str, port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    req = f"GET /api/v1/health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited early")
        try:
            with socket.create_connection((host, port), timeout=1) as s:
                s.sendall(req)
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server did not start")


def run_one(
    db: str,
    raters: int,
    submissions: int,
    workers: int,
    tmp: Path,
    mode: str,
    rate: float,
    pin: bool,
) -> dict:
    if db == "sqlite":
        url = f"sqlite:///{tmp / f'bench-{mode}-{raters}.db'}"
    elif db == "postgres":
        admin = os.environ.get("PREFLAB_TEST_PG_URL")
        if not admin:
            raise SystemExit(
                "--db postgres needs PREFLAB_TEST_PG_URL (run under scripts/with-postgres.sh)"
            )
        url = fresh_pg_database(admin)
    else:
        url = db
    tokens = seed(url, raters, items=submissions + 2 * raters + 100)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cores = sorted(os.sched_getaffinity(0))
    server_cores, client_cores = (
        (cores[:-1], cores[-1:]) if pin and len(cores) > 1 else (cores, cores)
    )
    log = open(tmp / f"server-{port}.log", "w")
    own_affinity = os.sched_getaffinity(0)
    if pin:  # the server (and the workers it forks) inherit this
        os.sched_setaffinity(0, server_cores)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "preflab.server",
            "serve",
            "--db",
            url,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    os.sched_setaffinity(0, own_affinity)
    try:
        _wait_healthy("127.0.0.1", port, proc)
        time.sleep(0.5 * workers)
        if pin:
            os.sched_setaffinity(0, client_cores)
        is_pg = url.startswith("postgresql")
        start: dict = {}

        def measuring() -> None:  # CPU counters from here (the warm-up cycles not counted)
            start.update(server=cpu_s(proc.pid), client=time.process_time())
            start.update(pg=pg_backends_cpu_s(url) if is_pg else None, load=os.getloadavg()[0])

        stats = (lambda: analyze(url)) if is_pg else None
        figures = asyncio.run(
            drive("127.0.0.1", port, tokens, submissions, mode, rate, stats, measuring)
        )
        server_cpu = cpu_s(proc.pid) - start.get("server", 0.0)
        client_cpu = time.process_time() - start.get("client", 0.0)
        pg_cpu = pg_cpu_between(start.get("pg"), pg_backends_cpu_s(url)) if is_pg else None
        done = figures["submissions"]
        if done:
            # CPU per fetch+submit cycle: wall figures on a shared 2-core box depend on what else
            # runs; CPU time per cycle does much less.
            figures["server_cpu_ms_per_cycle"] = round(server_cpu / done * 1000, 3)
            figures["client_cpu_ms_per_cycle"] = round(client_cpu / done * 1000, 3)
            if pg_cpu is not None:
                figures["pg_cpu_ms_per_cycle"] = round(pg_cpu / done * 1000, 3)
        figures["loadavg_1m"] = [round(start.get("load", 0.0), 2), round(os.getloadavg()[0], 2)]
    finally:
        os.sched_setaffinity(0, own_affinity)
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()
    return {
        "db": db.split("://")[0],
        "mode": mode,
        "raters": raters,
        "workers": workers,
        "offered_per_s": rate if mode == "open" else None,
        "pinned": f"server cpus {server_cores}, load generator cpus {client_cores}"
        if pin
        else "no",
        **figures,
    }


def _plan(args) -> list[tuple[str, int, str, int]]:
    """(db, raters, mode, workers) of each run. SQLite: one worker (one writer) unless it is the
    only database asked for; PostgreSQL: each of ``--workers`` (default 2)."""
    out = []
    for db in args.db:
        if db == "sqlite":
            counts = (args.workers or [1])[:1] if args.db == ["sqlite"] else [1]
        else:
            counts = args.workers or [2]
        out += [(db, n, mode, w) for n in args.raters for mode in args.modes for w in counts]
    return out


def print_ratios(rows: list[dict]) -> None:
    """PostgreSQL's closed-loop saturation against SQLite's in the same run (issue 10: >= 0.5x)."""
    base = {
        r["raters"]: r["submissions_per_s"]
        for r in rows
        if r["db"] == "sqlite" and r["mode"] == "closed" and r["submissions_per_s"]
    }
    for r in rows:
        if r["db"] != "sqlite" and r["mode"] == "closed" and r["raters"] in base:
            print(
                f"ratio {r['db']}/sqlite closed loop, raters={r['raters']} workers={r['workers']}: "
                f"{r['submissions_per_s'] / base[r['raters']]:.2f}x"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--db",
        nargs="+",
        default=["sqlite"],
        help="sqlite, postgres, or a database URL; several: run each in turn and print the ratios",
    )
    ap.add_argument("--raters", type=int, nargs="+", default=[50, 200])
    ap.add_argument("--submissions", type=int, default=5000, help="measured cycles per run")
    ap.add_argument(
        "--rate",
        type=float,
        default=525.0,
        help="offered cycles/s of the open-loop run (a little over the 500/s target: a finite "
        "schedule ends with its last cycle in flight, so exactly 500 offered reads 499.9)",
    )
    ap.add_argument("--modes", nargs="+", choices=["open", "closed"], default=["open", "closed"])
    ap.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=None,
        help="default: 1 on SQLite, 2 on PostgreSQL; several: one run each (PostgreSQL)",
    )
    ap.add_argument(
        "--pin",
        action="store_true",
        help="pin the server to all cores but the last and the load generator to the last "
        "(unfair to PostgreSQL on 2 cores, see above)",
    )
    ap.add_argument("--no-pin", dest="pin", action="store_false", help="the default: no pinning")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for db, n, mode, workers in _plan(args):
            if True:  # (one indentation level kept: the printing below is unchanged)
                rows.append(
                    run_one(db, n, args.submissions, workers, Path(tmp), mode, args.rate, args.pin)
                )
                if not args.json:
                    r = rows[-1]
                    offered = f" offered {r['offered_per_s']:.0f}/s" if r["mode"] == "open" else ""
                    print(
                        f"{r['db']:>8} {r['mode']:>6}{offered} raters={r['raters']:>4} workers={r['workers']} "
                        f"{r['submissions']} submissions in {r['seconds']} s: {r['submissions_per_s']}/s, "
                        f"cycle p50 {r['cycle_p50_ms']} ms p99 {r['cycle_p99_ms']} ms max {r['cycle_max_ms']} ms, "
                        f"submit p50 {r['submit_p50_ms']} p99 {r['submit_p99_ms']} ms, errors {r['errors']}, "
                        f"CPU ms/cycle server {r.get('server_cpu_ms_per_cycle')} client {r.get('client_cpu_ms_per_cycle')}"
                        + (
                            f" postgres {r['pg_cpu_ms_per_cycle']}"
                            if "pg_cpu_ms_per_cycle" in r
                            else ""
                        )
                        + ", "
                        f"load {r['loadavg_1m']}, pinned: {r['pinned']}",
                        flush=True,
                    )
                    if r["first_error"]:
                        print(f"    first error: {r['first_error']}", flush=True)
    target = [r for r in rows if r["db"] == "sqlite" and r["mode"] == "open" and r["raters"] == 200]
    if not args.json:
        print_ratios(rows)
    if args.json:
        print(json.dumps(rows, indent=2))
    elif target:
        r = target[0]
        met = r["submissions_per_s"] >= 500 and r["cycle_p99_ms"] <= 100
        print(
            f"target (>= 500 submissions/s with p99 <= 100 ms at 200 raters on SQLite, open loop): "
            f"{r['submissions_per_s']}/s, cycle p99 {r['cycle_p99_ms']} ms, submit p99 {r['submit_p99_ms']} ms: "
            f"{'met' if met else 'NOT met'}"
        )
    return 0 if all(r["errors"] == 0 and r["submissions"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
