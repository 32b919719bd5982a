"""Read-path speed: SQLite -> ``export_project`` -> Parquet, validated ORM reads against the fast reader.

    python benchmarks/bench_read.py                          # 10,000 and 100,000 items x 3 raters
    python benchmarks/bench_read.py --items 10000 --repeats 3 --json out.json

For each size, a JSONL of native preflab records is generated (items with a prompt and two
plain-text candidates, each with three raters' pairwise judgments: both shown orders, ties,
every strength) and bulk-imported with :func:`preflab.io.importer.import_files` into a fresh
SQLite file (not timed). Then ``export_project(format="trl-reward", file_format="parquet")``
runs ``--repeats`` times with each reader, alternating, and the median wall time and the
median CPU time (user + system of this process) are reported:

- ``validated``: :func:`preflab.store.repo.iter_items_with_judgments_validated`, the ORM rows
  re-validated through pydantic (the read path before the fast reader);
- ``fast``: :func:`preflab.store.repo.iter_items_with_judgments`, Core selects and trusted
  construction (what the exporter uses).

Both exports must produce byte-identical Parquet files. Target: ``fast`` >= 5x faster end to end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from preflab.io.export import ExportOptions, export_project  # noqa: E402
from preflab.io.export import pipeline  # noqa: E402
from preflab.io.importer import import_files  # noqa: E402
from preflab.store import db as store_db  # noqa: E402
from preflab.store import repo, transaction  # noqa: E402

RATERS = 3


def generate(path: Path, n_items: int, seed: int = 0) -> None:
    """``n_items`` native items (two text candidates) and ``RATERS`` pairwise judgments each."""
    rng = random.Random(seed)
    with open(path, "wb") as f:
        for i in range(n_items):
            f.write(orjson.dumps({
                "id": f"itm-{i}",
                "prompt": f"Question {i}: explain step {i % 997} of the procedure in two sentences, please.",
                "candidates": [
                    {"id": "a", "text": f"Step {i % 997} prepares the input; it checks the size and splits it ({i})."},
                    {"id": "b", "text": f"I am not sure what step {i % 997} does, maybe something with data ({i})."},
                ],
            }) + b"\n")
        for i in range(n_items):
            for r in range(RATERS):
                strength = rng.choice((0, 1, 2, 3))
                f.write(orjson.dumps({
                    "kind": "pairwise",
                    "item_id": f"itm-{i}",
                    "shown_order": rng.choice((["a", "b"], ["b", "a"])),
                    "winner": "tie" if strength == 0 else rng.choice("ab"),
                    "strength": strength,
                    "provenance": {"rater_id": f"rater-{(i + r) % 50}"},
                }) + b"\n")


def build(workdir: Path, n_items: int) -> tuple[str, float]:
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


def export_once(url: str, out: Path, reader: str) -> tuple[float, float, dict]:
    """``(wall s, CPU s, manifest)`` of one export with the given reader."""
    original = pipeline.iter_items_with_judgments
    if reader == "validated":
        pipeline.iter_items_with_judgments = repo.iter_items_with_judgments_validated
    engine = store_db.make_engine(url)
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        manifest = export_project(engine, "bench", ExportOptions(format="trl-reward", out=out, file_format="parquet"))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        pipeline.iter_items_with_judgments = original
        engine.dispose()
    return wall, cpu, manifest


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bench(workdir: Path, n_items: int, repeats: int, readers: list[str]) -> dict:
    url, import_s = build(workdir, n_items)
    runs: dict[str, dict[str, list[float]]] = {r: {"wall": [], "cpu": []} for r in readers}
    digests: dict[str, str] = {}
    rows_out = None
    for k in range(repeats):
        for reader in readers:  # alternate, so drifting machine load hits both alike
            out = workdir / f"out-{n_items}-{reader}-{k}"
            wall, cpu, manifest = export_once(url, out, reader)
            runs[reader]["wall"].append(wall)
            runs[reader]["cpu"].append(cpu)
            digest = sha256(out / "train.parquet")
            assert digests.setdefault(reader, digest) == digest
            rows_out = manifest["counts"]["rows_out"]
            shutil.rmtree(out)
    if len(set(digests.values())) != 1:
        raise SystemExit(f"readers disagree: {digests}")
    result: dict = {"items": n_items, "judgments": RATERS * n_items, "rows_out": rows_out,
                    "import_s": round(import_s, 2), "repeats": repeats}
    for reader in readers:
        result[reader] = {
            "wall_s": [round(x, 3) for x in runs[reader]["wall"]],
            "cpu_s": [round(x, 3) for x in runs[reader]["cpu"]],
            "median_wall_s": round(statistics.median(runs[reader]["wall"]), 3),
            "median_cpu_s": round(statistics.median(runs[reader]["cpu"]), 3),
        }
    if {"validated", "fast"} <= set(readers):
        result["speedup_wall"] = round(result["validated"]["median_wall_s"] / result["fast"]["median_wall_s"], 2)
        result["speedup_cpu"] = round(result["validated"]["median_cpu_s"] / result["fast"]["median_cpu_s"], 2)
    return result


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--readers", nargs="+", default=["validated", "fast"], choices=["validated", "fast"])
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a temporary one)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="preflab-bench-read-", dir=args.workdir))
    results = []
    try:
        for n in args.items:
            r = bench(workdir, n, args.repeats, args.readers)
            results.append(r)
            print(f"{n:,} items x {RATERS} raters (SQLite -> export_project -> Parquet), "
                  f"median of {args.repeats}; import {r['import_s']} s")
            for reader in args.readers:
                x = r[reader]
                print(f"  {reader:9s} wall {x['median_wall_s']:8.3f} s  cpu {x['median_cpu_s']:8.3f} s"
                      f"   runs {x['wall_s']}")
            if "speedup_wall" in r:
                print(f"  speedup   wall {r['speedup_wall']:.2f}x  cpu {r['speedup_cpu']:.2f}x   (target >= 5x)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
