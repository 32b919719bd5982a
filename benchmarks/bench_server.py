"""Load benchmark of the collection server (one command).

    python benchmarks/bench_server.py                       # SQLite, 50 and 200 raters
    python benchmarks/bench_server.py --db postgres         # needs PREFLAB_TEST_PG_URL (admin URL)
    python benchmarks/bench_server.py --raters 50 200 --submissions 2000 --workers 1

A real ``preflab serve`` on 127.0.0.1 and N concurrent simulated raters (asyncio + httpx) on
the same machine; each fetches a task and submits a pairwise judgment with a rationale, until
a fixed number of submissions is reached. Reports submissions/s and p50/p99 latency of the
submit request and of the whole fetch+submit cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


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
    from preflab.server import projects as P
    from preflab.server.auth import create_api_token, set_membership
    from preflab.server.database import Database, init_schema
    from preflab.store.server_models import User

    init_schema(url)
    db = Database(url, pool_size=2, max_overflow=2)
    tokens = []
    with db.writing() as s:
        proj = P.create_project(s, "bench", kinds=["pairwise"], policy={"overlap_share": 0.2, "overlap_k": 3})
        for i in range(raters):
            user = User(username=f"bench{i:04d}", display_name="bench")
            s.add(user)
            s.flush()
            set_membership(s, proj, user, "rater")
            tokens.append(create_api_token(s, user)[0])
    P.import_items(db, "bench", [
        {"id": f"b{i:06d}", "prompt": f"Prompt {i}", "candidates": [{"id": "x", "text": f"x{i}"}, {"id": "y", "text": f"y{i}"}]}
        for i in range(items)
    ])
    db.dispose()
    return tokens


async def rater(base: str, token: str, state: dict, lat_submit: list, lat_cycle: list, rng: random.Random) -> None:
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
        while state["left"] > 0:
            state["left"] -= 1
            t0 = time.perf_counter()
            r = await c.post("/api/v1/projects/bench/assignments/next")
            task = r.json().get("task") if r.status_code == 200 else None
            if task is None:
                state["errors"] += r.status_code != 200
                state["empty"] += 1
                return
            body = {"assignment_id": task["assignment_id"], "idempotency_key": uuid.uuid4().hex,
                    "judgment": {"kind": "pairwise", "winner": rng.choice("ab"), "strength": rng.randint(1, 3),
                                 "rationale": "The chosen answer is correct and more concise."},
                    "telemetry": {"active_ms": rng.randint(2000, 60000), "typed_chars": 46}}
            t1 = time.perf_counter()
            s = await c.post("/api/v1/projects/bench/judgments", json=body)
            t2 = time.perf_counter()
            if s.status_code in (200, 201):
                state["ok"] += 1
                lat_submit.append(t2 - t1)
                lat_cycle.append(t2 - t0)
            else:
                state["errors"] += 1


def server_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of the server process and its worker processes."""
    try:
        import psutil
    except ImportError:
        return float("nan")
    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] * 1000


async def drive(base: str, tokens: list[str], submissions: int) -> dict:
    state = {"left": submissions, "ok": 0, "errors": 0, "empty": 0}
    lat_submit: list[float] = []
    lat_cycle: list[float] = []
    t0 = time.perf_counter()
    await asyncio.gather(*(rater(base, t, state, lat_submit, lat_cycle, random.Random(i)) for i, t in enumerate(tokens)))
    elapsed = time.perf_counter() - t0
    return {"submissions": state["ok"], "errors": state["errors"], "seconds": round(elapsed, 2),
            "submissions_per_s": round(state["ok"] / elapsed, 1),
            "submit_p50_ms": round(pct(lat_submit, 0.5), 1), "submit_p99_ms": round(pct(lat_submit, 0.99), 1),
            "cycle_p50_ms": round(pct(lat_cycle, 0.5), 1), "cycle_p99_ms": round(pct(lat_cycle, 0.99), 1),
            "mean_submit_ms": round(statistics.fmean(lat_submit) * 1000, 1) if lat_submit else None}


def run_one(db: str, raters: int, submissions: int, workers: int, tmp: Path) -> dict:
    if db == "sqlite":
        url = f"sqlite:///{tmp / f'bench-{raters}.db'}"
    elif db == "postgres":
        admin = os.environ.get("PREFLAB_TEST_PG_URL")
        if not admin:
            raise SystemExit("--db postgres needs PREFLAB_TEST_PG_URL (run under scripts/with-postgres.sh)")
        url = fresh_pg_database(admin)
    else:
        url = db
    tokens = seed(url, raters, items=max(submissions, 100))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    log = open(tmp / f"server-{port}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "preflab.server", "serve", "--db", url, "--host", "127.0.0.1",
                             "--port", str(port), "--workers", str(workers)], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(base + "/api/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        time.sleep(0.5 * workers)
        server_cpu0, client_cpu0 = server_cpu_s(proc.pid), time.process_time()
        figures = asyncio.run(drive(base, tokens, submissions))
        server_cpu, client_cpu = server_cpu_s(proc.pid) - server_cpu0, time.process_time() - client_cpu0
        if figures["submissions"]:
            # CPU per fetch+submit cycle: wall figures on a shared 2-core box depend on what else
            # runs; CPU time per cycle does much less.
            figures["server_cpu_ms_per_cycle"] = round(server_cpu / figures["submissions"] * 1000, 2)
            figures["client_cpu_ms_per_cycle"] = round(client_cpu / figures["submissions"] * 1000, 2)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
        log.close()
    return {"db": db.split("://")[0], "raters": raters, "workers": workers, **figures}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default="sqlite", help="sqlite, postgres, or a database URL")
    ap.add_argument("--raters", type=int, nargs="+", default=[50, 200])
    ap.add_argument("--submissions", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=None, help="default: 1 on SQLite, 2 on PostgreSQL")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    workers = args.workers or (1 if args.db == "sqlite" else 2)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.raters:
            rows.append(run_one(args.db, n, args.submissions, workers, Path(tmp)))
            if not args.json:
                r = rows[-1]
                print(f"{r['db']:>10} raters={r['raters']:>4} workers={r['workers']} "
                      f"{r['submissions']} submissions in {r['seconds']} s: {r['submissions_per_s']}/s, "
                      f"submit p50 {r['submit_p50_ms']} ms p99 {r['submit_p99_ms']} ms, "
                      f"cycle p50 {r['cycle_p50_ms']} ms p99 {r['cycle_p99_ms']} ms, errors {r['errors']}, "
                      f"CPU ms/cycle server {r.get('server_cpu_ms_per_cycle')} client {r.get('client_cpu_ms_per_cycle')}",
                      flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
