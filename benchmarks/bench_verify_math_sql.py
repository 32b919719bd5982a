"""Math and SQL verifier speed: seconds per honest answer, medians, on the bundled set.

    python benchmarks/bench_verify_math_sql.py                  # 20 repeats
    python benchmarks/bench_verify_math_sql.py --repeats 50 --json out.json

Every math and SQL solution of ``examples/verify`` (correct and wrong, no hacks) goes through
``verify`` one at a time, ``--repeats`` times, on the main thread and then from a worker thread
(as verl calls it). The first pass is timed apart (``first_pass_s``: imports, and since the
judge workers, starting them); the medians are of the passes after it. math-verify caches the
last 20 parsed answers, so a repeated answer is cheap: ``math_fresh_*`` also times answers that
are new each time (``\\frac{7k}{12k}`` for the task ``math/fraction``). Run it on two commits to
get the overhead of a change (``git stash`` the change, run, unstash, run).

Where the judge workers exist (``preflab.verify.worker``), it also times the round trip alone:
the same small job (math: ``\\frac{1}{2}`` against ``0.5``, parsed from math-verify's cache;
SQL: ``SELECT 1`` on the bundled fixture) called in this process and through a worker,
``--roundtrips`` times each, alternately (``*_roundtrip_overhead_ms``: the medians' difference).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from preflab.verify import verify  # noqa: E402
from preflab.verify.pool import load_solutions  # noqa: E402
from preflab.verify.tasks import load_tasks  # noqa: E402

EXAMPLES = ROOT / "examples" / "verify"


def timed(task, completion) -> float:
    started = time.perf_counter()
    verify(task, completion)
    return time.perf_counter() - started


def roundtrips(n: int) -> dict[str, float]:
    """The same job in this process and through a judge worker, alternately; medians in ms."""
    from preflab.verify import _math_judge, _sql_judge
    from preflab.verify.worker import run_job

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout disabled", as in a worker
    fixture = str(EXAMPLES / "shop.sqlite")
    jobs = {
        "math": (
            lambda: _math_judge.run({"gold": r"\frac{1}{2}", "answer": "0.5"}),
            lambda: run_job(
                "math", {"gold": r"\frac{1}{2}", "answer": "0.5"}, timeout_s=5, memory_mb=1024
            ),
        ),
        "sql": (
            lambda: _sql_judge.query(fixture, "SELECT 1", 5, 10),
            lambda: run_job(
                "sql",
                {"fixture": fixture, "query": "SELECT 1", "deadline_s": 5, "max_rows": 10},
                timeout_s=5.5,
                memory_mb=1024,
            ),
        ),
    }
    out = {}
    for kind, (here, there) in jobs.items():
        here(), there()  # warm: imports, caches, a started worker
        times: dict[str, list[float]] = {"here": [], "there": []}
        for _ in range(n):
            for where, call in (("here", here), ("there", there)):
                started = time.perf_counter()
                call()
                times[where].append(time.perf_counter() - started)
        out[f"{kind}_judge_in_process_ms"] = 1000 * statistics.median(times["here"])
        out[f"{kind}_judge_in_worker_ms"] = 1000 * statistics.median(times["there"])
        out[f"{kind}_roundtrip_overhead_ms"] = (
            out[f"{kind}_judge_in_worker_ms"] - out[f"{kind}_judge_in_process_ms"]
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--roundtrips", type=int, default=300)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    honest = [
        (tasks[s.task_id], s.completion)
        for s in load_solutions(EXAMPLES / "solutions.jsonl", tasks)
        if tasks[s.task_id].kind in ("math", "sql") and s.solution_id in ("correct", "wrong")
    ]
    started = time.perf_counter()
    for task, completion in honest:
        verify(task, completion)
    first_pass_s = time.perf_counter() - started

    result: dict[str, object] = {"answers": len(honest), "first_pass_s": first_pass_s}
    fraction, fresh_from = tasks["math/fraction"], 2
    with ThreadPoolExecutor(max_workers=1) as executor:
        for where in ("main_thread", "worker_thread"):
            times: dict[str, list[float]] = {"math": [], "sql": []}
            for _ in range(args.repeats):
                for task, completion in honest:
                    if where == "main_thread":
                        times[task.kind].append(timed(task, completion))
                    else:
                        times[task.kind].append(executor.submit(timed, task, completion).result())
            fresh = []
            for k in range(fresh_from, fresh_from + args.repeats):
                completion = rf"\boxed{{\frac{{{7 * k}}}{{{12 * k}}}}}"
                if where == "main_thread":
                    fresh.append(timed(fraction, completion))
                else:
                    fresh.append(executor.submit(timed, fraction, completion).result())
            fresh_from += args.repeats
            times["math_fresh"] = fresh
            for kind, values in times.items():
                result[f"{kind}_{where}_median_ms"] = 1000 * statistics.median(values)
    try:
        result.update(roundtrips(args.roundtrips))
    except ImportError:
        pass  # a commit before the judge workers
    result["cpus"] = os.cpu_count()
    result["load_avg_1m"] = os.getloadavg()[0]
    for key, value in result.items():
        print(f"{key:36s} {value:.2f}" if isinstance(value, float) else f"{key:36s} {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
