"""Verifier speed: preflab's sandboxed pytest verifier against a bare pytest subprocess.

    python benchmarks/bench_verify.py                      # bundled set, 3 repeats, 2 workers
    python benchmarks/bench_verify.py --repeats 5 --workers 4 --json out.json

What is timed, in one run, on the bundled task set (``examples/verify``):

1. **code, one at a time**: for every code task and its correct and wrong solution, alternately
   (a) ``verify_code`` — temp dir, harness copy, SHA-256 of harness and pytest's own code before
   and after, namespaces, rlimits, uid drop, pytest through the runner, JUnit over a pipe,
   teardown; and (b) the baseline: the same files in a temp dir and a bare
   ``python -B -m pytest -q -p no:cacheprovider`` subprocess on them (no sandbox, no checks),
   with plugin autoload off as in the sandbox (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``; with the
   dev extras' plugins autoloaded a bare pytest start takes seconds here, which would flatter us).
   Medians per verification; overhead = preflab / bare.
2. **batch**: every solution of the bundled set (code, SQL, math, hacks) through
   ``verify_many`` on ``--workers`` processes, timed once: verifications per second.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from preflab.verify.code import extract_code, verify_code  # noqa: E402
from preflab.verify.pool import load_solutions, verify_many  # noqa: E402
from preflab.verify.tasks import CodeTask, load_tasks  # noqa: E402

EXAMPLES = ROOT / "examples" / "verify"


def bare_pytest(task: CodeTask, solution: str) -> float:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        box = Path(tmp)
        for rel, text in task.files.items():
            (box / rel).parent.mkdir(parents=True, exist_ok=True)
            (box / rel).write_text(text)
        (box / task.solution_path).write_text(solution)
        files = sorted({n.split("::")[0] for n in [*task.f2p, *task.p2p]})
        env = {**os.environ, "PYTHONPATH": str(box), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        subprocess.run(
            [sys.executable, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
            cwd=box,
            capture_output=True,
            env=env,
        )
    return time.perf_counter() - started


def sandboxed(task: CodeTask, solution: str) -> float:
    started = time.perf_counter()
    verify_code(task, solution)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    tasks = load_tasks(EXAMPLES / "tasks.jsonl")
    submissions = load_solutions(EXAMPLES / "solutions.jsonl", tasks)
    code_pairs = [
        (tasks[s.task_id], extract_code(s.completion))
        for s in submissions
        if isinstance(tasks[s.task_id], CodeTask) and isinstance(s.completion, str)
    ]
    ours, bare = [], []
    for _ in range(args.repeats):
        for task, solution in code_pairs:  # alternate, so drift on a shared machine hits both
            bare.append(bare_pytest(task, solution))
            ours.append(sandboxed(task, solution))
    started = time.perf_counter()
    verdicts = verify_many(tasks, submissions, workers=args.workers)
    batch_s = time.perf_counter() - started

    result = {
        "code_verifications": len(ours),
        "preflab_median_s": statistics.median(ours),
        "bare_pytest_median_s": statistics.median(bare),
        "overhead_ratio": statistics.median(ours) / statistics.median(bare),
        "preflab_per_s_sequential": 1 / statistics.median(ours),
        "bare_per_s_sequential": 1 / statistics.median(bare),
        "batch_solutions": len(verdicts),
        "batch_workers": args.workers,
        "batch_s": batch_s,
        "batch_per_s": len(verdicts) / batch_s,
        "cpus": os.cpu_count(),
    }
    for key, value in result.items():
        print(f"{key:28s} {value:.3f}" if isinstance(value, float) else f"{key:28s} {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
