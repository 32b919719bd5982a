"""Statistics and the unary (KTO) export over Parquet shards: in-process vs a Dask LocalCluster.

    python benchmarks/bench_scale_distributed.py --labels 10m            # 64 shards, local:2
    python benchmarks/bench_scale_distributed.py --labels 1m --dawid-skene --json out.json

What is timed, on ``--labels`` synthetic production thumbs (``preflab scale generate``: 1-5
thumbs per candidate, two candidates per prompt, 100,000 raters) in ``--shards`` shards:

1. **baseline**: pyarrow reading each shard's ``unit`` (dictionary-encoded) and ``value``
   columns and two numpy ``bincount`` (labels and thumbs up per candidate): the floor of one
   pass over the data, in this process.
2. **stats**: ``run_stats`` without Dawid-Skene (alpha, percent agreement, per-rater counts and
   up-rates, the thumbs resolution's counts, Bradley-Terry when there are winner rows), with
   ``--scheduler sync`` and with ``local:N`` (``--workers``, default 2). The figures of both
   must be equal (checked; the run fails otherwise). ``--no-sync``: the cluster only, unchecked.
3. **dawid-skene** (``--dawid-skene``): the EM on the thumbs, one pass per iteration.
4. **export**: the distributed unary export, sync and ``local:N``; the SHA-256 of every output
   file must be equal (checked). ``--no-export`` skips it (the 100M run's statistics alone).

``--in-flight N`` bounds the unfinished tasks of a reduction on the cluster (default: 2 per
worker; ``preflab.scale.engine.Runner``).

CPU is this process's plus its reaped children's (the cluster's worker processes, counted once
the cluster is closed; the start of the cluster is inside the figure). Peak RSS during each step
(psutil, sampled every 0.1 s): this process, and the largest child (a worker). The machine's load average is printed with every figure: on a shared 2-core
box wall time is what the neighbours leave.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from preflab.scale.cli import parse_count
from preflab.scale.engine import Runner
from preflab.scale.export import export_unary
from preflab.scale.shards import generate_unary, open_shards
from preflab.scale.stats import run_stats


def cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class PeakRSS:
    """Peak RSS of this process and of its largest descendant (a cluster worker) during a step,
    sampled every 0.1 s with psutil (``ru_maxrss`` only ever grows over the whole run)."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.own = self.child = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def sample(self) -> None:
        self.own = max(self.own, self.me.memory_info().rss)
        for kid in self.me.children(recursive=True):
            try:
                self.child = max(self.child, kid.memory_info().rss)
            except psutil.Error:
                pass

    def run(self) -> None:
        while not self.stop.wait(0.1):
            self.sample()

    def __enter__(self) -> PeakRSS:
        self.sample()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def measure(name: str, fn: Callable[[], Any], rows: int) -> tuple[dict[str, Any], Any]:
    c0, w0 = cpu(), time.perf_counter()
    with PeakRSS() as peak:
        result = fn()
    wall, used = time.perf_counter() - w0, cpu() - c0
    figure = {
        "step": name,
        "wall_s": round(wall, 2),
        "cpu_s": round(used, 2),
        "rows_per_cpu_s": round(rows / used) if used > 0 else None,
        "peak_rss_mb": round(peak.own / 2**20),
        "child_peak_rss_mb": round(peak.child / 2**20),
        "load_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(figure), flush=True)
    return figure, result


def baseline(paths: list[Path]) -> int:
    labels = 0
    for path in paths:
        t = pq.read_table(path, columns=["unit", "value"], read_dictionary=["unit"])
        unit = t.column("unit").unify_dictionaries().combine_chunks()
        codes = unit.indices.to_numpy()
        up = np.bincount(
            codes, weights=t.column("value").to_numpy(), minlength=len(unit.dictionary)
        )
        n = np.bincount(codes, minlength=len(unit.dictionary))
        labels += int(n.sum())
        assert up.sum() <= n.sum()
    return labels


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labels", default="10m", help="thumbs to generate (10m, 100m, ...)")
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    parser.add_argument("--dawid-skene", action="store_true", help="also time the EM (slow)")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temp dir, removed")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--in-flight",
        type=int,
        default=None,
        help="the most unfinished tasks of a reduction on the cluster (default: 2 per worker)",
    )
    parser.add_argument("--no-export", action="store_true", help="skip the export steps")
    parser.add_argument(
        "--no-sync",
        action="store_true",
        help="statistics on the cluster only (no in-process run, so no identity check)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the pyarrow floor")
    parser.add_argument(
        "--cluster-first",
        action="store_true",
        help="the cluster's statistics before the in-process run (its figure first)",
    )
    args = parser.parse_args(argv)
    n = parse_count(args.labels)
    work = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=args.workdir))
    figures: list[dict[str, Any]] = []
    try:
        fig, layout = measure(
            "generate", lambda: generate_unary(work / "shards", n, args.shards), n
        )
        fig["disk_mb"] = round(
            sum(p.stat().st_size for p in (work / "shards").iterdir()) / 2**20, 1
        )
        figures.append(fig)
        shards = open_shards(work / "shards")
        if not args.no_baseline:
            fig, counted = measure(
                "baseline: pyarrow read + numpy bincount", lambda: baseline(shards.shards), n
            )
            assert counted == n
            figures.append(fig)
        local = f"local:{args.workers}"
        results: dict[str, Any] = {}
        order = ("sync", local) if not args.cluster_first else (local, "sync")
        for scheduler in (local,) if args.no_sync else order:

            def stats(s: str = scheduler) -> Any:
                with Runner(s, in_flight=args.in_flight) as r:
                    return run_stats(shards, r, dawid_skene=None)

            fig, results[scheduler] = measure(f"stats {scheduler}", stats, n)
            figures.append(fig)
        if "sync" in results and results["sync"] != results[local]:
            raise SystemExit("stats differ between sync and the cluster")
        if args.dawid_skene:
            for scheduler in ("sync", local):

                def ds(s: str = scheduler) -> Any:
                    with Runner(s, in_flight=args.in_flight) as r:
                        return run_stats(shards, r)["dawid_skene"]

                fig, out = measure(f"dawid-skene {scheduler}", ds, n)
                fig["n_iter"] = out["n_iter"]
                fig["passes"] = out["n_iter"] + 2  # counts, start, iterations
                figures.append(fig)
        manifests = {}
        for scheduler in () if args.no_export else ("sync", local):

            def export(s: str = scheduler) -> Any:
                with Runner(s, in_flight=args.in_flight) as r:
                    return export_unary(shards, work / f"out-{s.replace(':', '-')}", r)

            fig, manifests[scheduler] = measure(f"export {scheduler}", export, n)
            figures.append(fig)
        if manifests and manifests["sync"]["files"] != manifests[local]["files"]:
            raise SystemExit("export files differ between sync and the cluster")
        summary = {
            "labels": n,
            "shards": args.shards,
            "rows_per_shard": n // args.shards,
            "workers": args.workers,
            "cpus": os.cpu_count(),
            "identical_stats": True if "sync" in results else None,
            "in_flight": args.in_flight or 2 * args.workers,
            "identical_export_files": True if manifests else None,
            "thumbs": results[local]["thumbs"],
            "figures": figures,
        }
        print(json.dumps({k: v for k, v in summary.items() if k != "figures"}), flush=True)
        print(
            "\n| step | wall s | CPU s | labels / CPU s | peak RSS MB (self / largest worker) | load |"
        )
        print("|---|---|---|---|---|---|")
        for f in figures:
            print(
                f"| {f['step']} | {f['wall_s']} | {f['cpu_s']} | {f['rows_per_cpu_s']:,} | "
                f"{f['peak_rss_mb']} / {f['child_peak_rss_mb']} | {f['load_1m']} |"
            )
        if args.json:
            args.json.write_text(json.dumps(summary, indent=2))
        return summary
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
