"""The quality report's finish with the pair state of a 10M-judgment feed, from a 1M project.

    PYTHONPATH=src python benchmarks/bench_report_finish.py DB [--pairs-sample N]

Feeds project ``bench`` of the SQLite database ``DB`` (e.g. ``bench_scale.py``'s 1m project)
into a :class:`~preflab.quality.accumulate.ReportAccumulator`, then puts in what a feed ten
times larger ends with for the length pairs (a ``--pairs-sample`` pair sample, 2,000,000 by
default: ``Bounds.pairs``; the 1M project's pairs repeated) and measures ``finish_report``:
peak RSS over the fed state (``VmHWM`` after writing 5 to ``/proc/self/clear_refs``) and its
CPU. Run it with another checkout's ``src`` on ``PYTHONPATH`` for the baseline (a 10M report
takes ~1,400 s CPU; this takes ~100 s at 1M). docs/benchmarks.md, "The report's peak at 10M".
"""

from __future__ import annotations

import argparse
import gc
import time
from array import array

import numpy as np

from preflab.io.quality_source import accumulate_in
from preflab.quality.accumulate import Reservoir
from preflab.quality.report import finish_report
from preflab.store import transaction
from preflab.store.db import open_db


def memory() -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of this process, in MB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                out[line.split(":")[0]] = int(line.split()[1]) // 1024
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("db", help="a SQLite database with project 'bench'")
    parser.add_argument("--pairs-sample", type=int, default=2_000_000)
    args = parser.parse_args()
    engine = open_db(f"sqlite:///{args.db}")
    with transaction(engine) as session:
        acc = accumulate_in(session, "bench")
    acc._pairs()
    n = args.pairs_sample
    chosen = np.resize(np.asarray(acc.pairs_c, dtype=np.int64), n)
    rejected = np.resize(np.asarray(acc.pairs_r, dtype=np.int64), n)
    acc.pair_sample = Reservoir(n, typecode="q")
    acc.pair_sample.items = array("q", (chosen << 32 | rejected).tolist())
    acc.pair_sample.seen = 10 * len(acc.pairs_c)
    acc.pair_sums = [10 * x for x in acc.pair_sums]
    acc.pairs_c, acc.pairs_r = array("q"), array("q")
    del chosen, rejected
    gc.collect()
    before = memory()["VmRSS"]
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    start = time.process_time()
    report = finish_report(acc)
    peak = memory()["VmHWM"]
    print(
        f"before finish {before} MB, finish peak {peak} MB (+{peak - before}), "
        f"CPU {time.process_time() - start:.1f} s, sample {report['length_bias'].get('sample')}, "
        f"slope {report['length_bias']['logistic']['slope']!r}"
    )


if __name__ == "__main__":
    main()
