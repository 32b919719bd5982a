"""Quality report at scale: ``python benchmarks/bench_report.py generate --judgments N OUT.jsonl``
writes a comparison project (each prompt and its two answers judged by three of 200 raters, so
items repeat and agreement is measurable; a tenth of the answers carry markdown), and
``python benchmarks/bench_report.py measure DB PROJECT [--src DIR]`` times ``preflab quality
report`` in a fresh child process (CPU seconds of the child, wall seconds, peak RSS from
``getrusage(RUSAGE_CHILDREN)``, and the load average before and after). ``--src`` points at
another checkout's ``src`` (the "before" of docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def generate(path: Path, judgments: int, raters: int = 200, per_item: int = 3) -> None:
    """``judgments`` rows of ``{"prompt", "chosen", "rejected", "labeler"}``, ``per_item`` raters
    per prompt; a rater prefers the first answer with a probability set per item."""
    rng = random.Random(0)
    with open(path, "wb") as f:
        for n in range(judgments):
            i, k = divmod(n, per_item)
            a = f"Step {i % 997} prepares the input; it checks the size and splits it ({i})."
            b = f"I am not sure what step {i % 997} does, maybe something with the data ({i})."
            if i % 10 == 0:
                a = f"## Answer\n- **Step {i % 997}** prepares the input\n- it checks ({i})"
            p = 0.5 + 0.45 * ((i * 7919) % 11 - 5) / 5
            first = rng.random() < p
            record = {
                "prompt": f"Question {i}: explain step {i % 997} of the procedure, please.",
                "chosen": a if first else b,
                "rejected": b if first else a,
                "labeler": f"rater-{(i * 37 + k * 71) % raters}",
            }
            f.write(orjson.dumps(record) + b"\n")


def measure(db: str, project: str, src: Path, out: Path | None) -> dict[str, float]:
    """One ``preflab quality report`` in a fresh child: CPU, wall, peak RSS, load average."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-c", "from preflab.cli import app; app()"]
    cmd += ["quality", "report", project, "--db", db]
    if out is not None:
        cmd += ["--out", str(out)]
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(ru.ru_maxrss / 1024),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--judgments", type=int, default=100_000)
    gen.add_argument("out", type=Path)
    mea = sub.add_parser("measure")
    mea.add_argument("db")
    mea.add_argument("project")
    mea.add_argument("--src", type=Path, default=SRC)
    mea.add_argument("--html", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.cmd == "generate":
        generate(args.out, args.judgments)
    else:
        print(json.dumps(measure(args.db, args.project, args.src, args.html)))


if __name__ == "__main__":
    main()
