"""Profile fetch+submit cycles in-process: SQL statements per cycle and CPU ms per cycle.

    python benchmarks/profile_cycle.py [--cycles 300] [--raters 20] [--cprofile]

Runs the real app (TestClient, SQLite file) without a network or load generator in the way,
so the numbers are the server's own cost per cycle (auth + next + submit).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def direct(app, tokens: list[str], cycles: int, prof: cProfile.Profile) -> int:  # noqa: ANN001
    """The hot path without HTTP: guard (auth + project) -> next task -> submit."""
    from types import SimpleNamespace

    from preflab.server import assign, judging
    from preflab.server.permissions import guard

    dep = guard("project.label").dependency
    prof.enable()
    for i in range(cycles):
        req = SimpleNamespace(app=app, headers={"authorization": f"Bearer {tokens[i % len(tokens)]}"}, cookies={},
                              path_params={"project": "bench"}, method="POST")
        ctx = dep(req)
        task = assign.next_task_fast(app.state.db, ctx.project, ctx.user.user_pk)["task"]
        ctx = dep(req)
        judging.submit(app.state.db, ctx.project, ctx.user.user_pk, ctx.user.username,
                       assignment_id=task["assignment_id"], idempotency_key=uuid.uuid4().hex,
                       judgment={"kind": "pairwise", "winner": "a", "strength": 2,
                                 "rationale": "The chosen answer is correct and more concise."},
                       telemetry={"active_ms": 5000, "typed_chars": 46})
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(40)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=300)
    ap.add_argument("--raters", type=int, default=20)
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--db", default=None)
    args = ap.parse_args()
    from bench_server import seed
    from fastapi.testclient import TestClient
    from sqlalchemy import event

    from preflab.server.app import create_app

    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'p.db'}"
        tokens = seed(url, args.raters, items=args.cycles * 2 + 100)
        app = create_app(url)
        count = [0]
        for engine in {app.state.db.engine, app.state.db.write_engine}:
            event.listen(engine, "before_cursor_execute", lambda *a, **k: count.__setitem__(0, count[0] + 1))
        with TestClient(app) as c:
            def cycle(i: int) -> None:
                h = {"Authorization": f"Bearer {tokens[i % len(tokens)]}"}
                r = c.post("/api/v1/projects/bench/assignments/next", headers=h)
                task = r.json()["task"]
                body = {"assignment_id": task["assignment_id"], "idempotency_key": uuid.uuid4().hex,
                        "judgment": {"kind": "pairwise", "winner": "a", "strength": 2,
                                     "rationale": "The chosen answer is correct and more concise."},
                        "telemetry": {"active_ms": 5000, "typed_chars": 46}}
                s = c.post("/api/v1/projects/bench/judgments", json=body, headers=h)
                assert s.status_code == 201, s.text

            for i in range(20):  # warm up
                cycle(i)
            count[0] = 0
            prof = cProfile.Profile() if args.cprofile else None
            if prof:  # the app runs handlers in worker threads: profile the engine calls directly
                return direct(app, tokens, args.cycles, prof)
            t0, c0 = time.perf_counter(), time.process_time()
            if prof:
                prof.enable()
            for i in range(args.cycles):
                cycle(i)
            if prof:
                prof.disable()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"statements/cycle {count[0] / args.cycles:.1f}  CPU ms/cycle {cpu / args.cycles * 1000:.2f}  "
              f"wall ms/cycle {wall / args.cycles * 1000:.2f} (incl. TestClient overhead)")
        if prof:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
    return 0


if __name__ == "__main__":
    sys.exit(main())
