"""What a streamed export's per-pair state costs (issue 27 item 1): ``python
benchmarks/bench_spill.py 3000000 spill`` (or ``memory``).

Feeds N synthetic pairs, 2,000 at a time in 6 cohorts, to the length gate's tally
(:class:`~preflab.io.export.length_gate.LengthTally`: ratio, verdict, cohort codes) and a margin
:class:`~preflab.io.export.spill.Tape`, as pass 1 of a streamed export does; then the manifest's
cohort figures and pass 2's replay. ``spill``: past the default bound
(:data:`~preflab.io.export.spill.MEMORY_VALUES`) on disk; ``memory``: every pair held. Prints the
process's peak RSS over what it was before the pairs, and the CPU of each step.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from preflab.io.export.length_gate import LengthTally
from preflab.io.export.spill import Spill, Tape

CHUNK = 2_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=int)
    parser.add_argument("mode", choices=["spill", "memory"])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    spill = Spill() if args.mode == "spill" else None
    tally, margins = LengthTally(spill=spill), Tape("d", spill)
    for cohort in range(6):
        tally._code(f"c{cohort}")
    start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.process_time()
    for _ in range(0, args.pairs, CHUNK):
        ratios = (rng.integers(20, 200, CHUNK) / rng.integers(20, 200, CHUNK)).tolist()
        keep = [0.85 <= r <= 1.2 for r in ratios]
        codes = rng.integers(0, 6, CHUNK).tolist()
        tally.by_difficulty.extend(codes)
        tally.by_domain.extend(codes)
        tally.ratios.extend(ratios)
        tally.keep.extend(keep)
        tally.verdicts.extend(keep)
        tally.full()
        margins.extend(rng.random(CHUNK).tolist())
    t1 = time.process_time()
    cohorts = tally.cohorts()
    t2 = time.process_time()
    verdicts, margin = tally.verdicts.reader(), margins.reader()
    for _ in range(0, args.pairs, CHUNK):
        verdicts.take(CHUNK)
        margin.take(CHUNK)
    t3 = time.process_time()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if spill is not None:
        spill.close()
    print(
        f"{args.pairs} pairs, {args.mode}: peak RSS +{(peak - start) / 1024:.1f} MB, "
        f"add {t1 - t0:.1f} s, cohorts {t2 - t1:.2f} s, replay {t3 - t2:.2f} s "
        f"(median c0 {cohorts['cohorts']['c0']['median_ratio_before']})"
    )


if __name__ == "__main__":
    main()
