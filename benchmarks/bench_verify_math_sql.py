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
"""

from __future__ import annotations

import argparse
import json
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
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
    result["cpus"] = os.cpu_count()
    result["load_avg_1m"] = os.getloadavg()[0]
    for key, value in result.items():
        print(f"{key:36s} {value:.2f}" if isinstance(value, float) else f"{key:36s} {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
