"""Read-path speed, end to end: SQLite -> ``export_project`` -> Parquet, before and after.

    python benchmarks/bench_read.py                          # 10,000 and 100,000 items x 3 raters
    python benchmarks/bench_read.py --items 10000 --repeats 5 --json out.json
    python benchmarks/bench_read.py --variants after validated   # only this checkout

For each size, a JSONL of native preflab records is generated (items with a prompt and two
plain-text candidates, three raters' pairwise judgments each: both shown orders, ties, every
strength) and bulk-imported with :func:`preflab.io.importer.import_files` into a fresh SQLite
file (not timed). Then ``export_project(format="trl-reward", file_format="parquet")`` runs
``--repeats`` times per variant, variants alternating (so drifting machine load hits all
alike), each export in a fresh child process; reported: median wall time and median CPU time
(user + system of the child, around ``export_project`` only; library imports, such as the
pandas that pyarrow pulls in on first use, happen before).

Variants:

- ``before``: the code of ``--before-rev`` (default: the commit before the fast reader),
  extracted with ``git archive``: ORM rows, every item and judgment validated by pydantic.
- ``after``: this checkout (:func:`preflab.store.repo.iter_items_with_judgments`: Core selects,
  trusted construction; the cyclic GC paused while the project is read).
- ``validated``: this checkout with the old reader swapped back in
  (:func:`~preflab.store.repo.iter_items_with_judgments_validated`): how much is the reader.

All variants must write byte-identical Parquet files. Target: ``after`` >= 5x faster than
``before``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
RATERS = 3
#: The merge of main into ``export`` right before the fast reader (dcd8ee7).
BEFORE_REV = "dcd8ee7"
VARIANTS = ("before", "after", "validated")


def generate(path: Path, n_items: int, seed: int = 0) -> None:
    """``n_items`` native items (two text candidates) and ``RATERS`` pairwise judgments each."""
    import orjson

    rng = random.Random(seed)
    with open(path, "wb") as f:
        for i in range(n_items):
            f.write(
                orjson.dumps(
                    {
                        "id": f"itm-{i}",
                        "prompt": f"Question {i}: explain step {i % 997} of the procedure in two sentences, please.",
                        "candidates": [
                            {
                                "id": "a",
                                "text": f"Step {i % 997} prepares the input; it checks the size and splits it ({i}).",
                            },
                            {
                                "id": "b",
                                "text": f"I am not sure what step {i % 997} does, maybe something with data ({i}).",
                            },
                        ],
                    }
                )
                + b"\n"
            )
        for i in range(n_items):
            for r in range(RATERS):
                strength = rng.choice((0, 1, 2, 3))
                f.write(
                    orjson.dumps(
                        {
                            "kind": "pairwise",
                            "item_id": f"itm-{i}",
                            "shown_order": rng.choice((["a", "b"], ["b", "a"])),
                            "winner": "tie" if strength == 0 else rng.choice("ab"),
                            "strength": strength,
                            "provenance": {"rater_id": f"rater-{(i + r) % 50}"},
                        }
                    )
                    + b"\n"
                )


def build(workdir: Path, n_items: int) -> tuple[str, float]:
    """A SQLite file with one project ``bench``; ``(url, import seconds)``."""
    sys.path.insert(0, str(SRC))
    from preflab.io.importer import import_files
    from preflab.store import db as store_db
    from preflab.store import repo, transaction

    data = workdir / f"records-{n_items}.jsonl"
    generate(data, n_items)
    url = f"sqlite:///{workdir / f'bench-{n_items}.db'}"
    engine = store_db.open_db(url)
    with transaction(engine) as s:
        repo.create_project(s, "bench", kinds=["pairwise"])
    t = time.perf_counter()
    report = import_files(engine, "bench", [data])
    assert report.items_added == n_items and report.judgments_added == RATERS * n_items
    engine.dispose()
    data.unlink()
    return url, time.perf_counter() - t


def child(src: str, url: str, out: str, reader: str) -> None:
    """One export in this (fresh) process; prints ``{"wall", "cpu", "sha256", "rows_out"}``."""
    sys.path.insert(0, src)
    import pyarrow.compute  # noqa: F401

    try:  # pyarrow imports pandas on first use when it is installed (~0.5 s): a cost of the process
        import pandas  # noqa: F401
    except ImportError:
        pass
    from preflab.io.export import ExportOptions, export_project, pipeline
    from preflab.store import db as store_db
    from preflab.store import repo

    if reader == "validated":
        pipeline.iter_items_with_judgments = repo.iter_items_with_judgments_validated
    engine = store_db.make_engine(url)
    options = ExportOptions(format="trl-reward", out=Path(out), file_format="parquet")
    c0, t0 = time.process_time(), time.perf_counter()
    manifest = export_project(engine, "bench", options)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    engine.dispose()
    digest = hashlib.sha256((Path(out) / "train.parquet").read_bytes()).hexdigest()
    print(
        json.dumps(
            {"wall": wall, "cpu": cpu, "sha256": digest, "rows_out": manifest["counts"]["rows_out"]}
        )
    )


def run_child(src: Path, url: str, out: Path, reader: str) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(src), url, str(out), reader],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        raise SystemExit(f"export ({src}, {reader}) failed:\n{proc.stderr}")
    shutil.rmtree(out, ignore_errors=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def before_src(workdir: Path, rev: str) -> Path:
    """``src/`` of ``rev``, extracted into ``workdir``."""
    target = workdir / f"src-{rev}"
    archive = subprocess.run(
        ["git", "-C", str(HERE.parent), "archive", rev, "src"], capture_output=True, check=True
    )
    target.mkdir()
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target / "src"


def bench(
    workdir: Path, n_items: int, repeats: int, variants: list[str], old_src: Path | None
) -> dict:
    url, import_s = build(workdir, n_items)
    plan = {
        "before": (old_src, "default"),
        "after": (SRC, "default"),
        "validated": (SRC, "validated"),
    }
    runs: dict[str, dict[str, list[float]]] = {v: {"wall": [], "cpu": []} for v in variants}
    digests, rows_out = set(), set()
    for k in range(repeats):
        for variant in variants:
            src, reader = plan[variant]
            r = run_child(src, url, workdir / f"out-{n_items}-{variant}-{k}", reader)
            runs[variant]["wall"].append(r["wall"])
            runs[variant]["cpu"].append(r["cpu"])
            digests.add(r["sha256"])
            rows_out.add(r["rows_out"])
    if len(digests) != 1:
        raise SystemExit(f"variants wrote different Parquet files: {digests}")
    result: dict = {
        "items": n_items,
        "judgments": RATERS * n_items,
        "rows_out": rows_out.pop(),
        "import_s": round(import_s, 2),
        "repeats": repeats,
    }
    for v in variants:
        result[v] = {
            "wall_s": [round(x, 3) for x in runs[v]["wall"]],
            "cpu_s": [round(x, 3) for x in runs[v]["cpu"]],
            "median_wall_s": round(statistics.median(runs[v]["wall"]), 3),
            "median_cpu_s": round(statistics.median(runs[v]["cpu"]), 3),
        }
    if {"before", "after"} <= set(variants):
        result["speedup_wall"] = round(
            result["before"]["median_wall_s"] / result["after"]["median_wall_s"], 2
        )
        result["speedup_cpu"] = round(
            result["before"]["median_cpu_s"] / result["after"]["median_cpu_s"], 2
        )
    return result


def main(argv: list[str] | None = None) -> list[dict]:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        child(*argv[1:5])
        return []
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=["before", "after"], choices=VARIANTS)
    parser.add_argument(
        "--before-rev", default=BEFORE_REV, help=f"git revision of 'before' (default {BEFORE_REV})"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a temporary one)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="preflab-bench-read-", dir=args.workdir))
    results = []
    try:
        old_src = before_src(workdir, args.before_rev) if "before" in args.variants else None
        for n in args.items:
            r = bench(workdir, n, args.repeats, args.variants, old_src)
            results.append(r)
            print(
                f"{n:,} items x {RATERS} raters (SQLite -> export_project -> Parquet, {r['rows_out']:,} rows), "
                f"median of {args.repeats}:"
            )
            for v in args.variants:
                x = r[v]
                print(
                    f"  {v:9s} wall {x['median_wall_s']:8.3f} s  cpu {x['median_cpu_s']:8.3f} s"
                    f"   wall runs {x['wall_s']}  cpu runs {x['cpu_s']}"
                )
            if "speedup_wall" in r:
                print(
                    f"  speedup   wall {r['speedup_wall']:.2f}x  cpu {r['speedup_cpu']:.2f}x   (target >= 5x)",
                    flush=True,
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
