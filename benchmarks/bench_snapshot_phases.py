"""The dashboard snapshot's memory, phase by phase (issue 27 §2, branch ``snapmem``).

    PYTHONPATH=src python benchmarks/bench_snapshot_phases.py DB [--project bench]

Runs what ``refresh`` computes (``snapshot.compute_snapshot`` into a spool: the per-rater pass
and its near-duplicate search, the review queues, the streamed report, the panels) on project
``bench`` of the SQLite database ``DB``, nothing stored, and prints after each phase its CPU,
``VmRSS`` and the phase's peak (``VmHWM``, reset by writing 5 to ``/proc/self/clear_refs`` at the
phase's start). The phases are the ones ``compute_snapshot`` and ``_panels`` run, in their order;
run it with another checkout's ``src`` on ``PYTHONPATH`` for the baseline.
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

from preflab.io.quality_source import accumulate_in
from preflab.quality.report import finish_report
from preflab.server import snapshot
from preflab.server.database import Database
from preflab.server.pages.panels import quality_panels
from preflab.server.services import review, review_store
from preflab.store import repo


def memory() -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of this process, in MB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                out[line.split(":")[0]] = int(line.split()[1]) // 1024
    return out


class Phases:
    def __init__(self) -> None:
        self.rows: list[tuple[str, float, int, int]] = []
        self._start()

    def _start(self) -> None:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        self.cpu = time.process_time()

    def done(self, name: str) -> None:
        m = memory()
        self.rows.append((name, time.process_time() - self.cpu, m["VmRSS"], m["VmHWM"]))
        print(
            f"{name:<28} CPU {self.rows[-1][1]:7.1f} s  RSS {m['VmRSS']:5d} MB  "
            f"peak {m['VmHWM']:5d} MB",
            flush=True,
        )
        self._start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("db", help="a SQLite database")
    parser.add_argument("--project", default="bench")
    args = parser.parse_args()
    db = Database(f"sqlite:///{args.db}", pool_size=2, max_overflow=0)
    ph = Phases()
    with review_store.Spool(None) as spool, db.reading() as s:
        project = repo.get_project(s, args.project)
        spool.secret = project.secret
        snapshot.watermark(s, project.pk)  # as refresh reads it
        ph.done("start")
        per_rater, searched, partners = snapshot._activity(s, project, held_out=False)
        ph.done("per-rater pass + search")
        tally = review.scan_queues(s, project, spool, partners=partners)
        del partners
        summary = spool.finish(tally, review.pending_demonstrations(s, project))
        ph.done("review queues (spooled)")
        gc.collect()
        fed = [accumulate_in(s, project.name)]
        ph.done("report: feed")
        panels_fn: Any = getattr(snapshot, "_report_panels", None)
        if panels_fn is not None:  # this branch: the report finished and the panels drawn
            panels = panels_fn(fed.pop(), searched)  # the only reference, as _panels passes it
            del searched
            ph.done("report: finish + panels")
        else:
            acc = fed.pop()
            acc.pair_search = searched.pairs
            chosen, rejected = acc.length_pairs()
            report = finish_report(acc)
            ph.done("report: finish")
            panels = quality_panels(report, chosen, rejected)
            del acc, chosen, rejected, searched
            ph.done("panels (curve)")
        rows = sum(1 for _ in spool.rows())
        ph.done("queue rows read back")
    print(f"queues {summary['counts']}, rows {rows}, panels {len(panels)} keys")
    print(
        f"peak over the phases: {max(r[3] for r in ph.rows)} MB, "
        f"CPU {sum(r[1] for r in ph.rows):.1f} s"
    )
    db.dispose()


if __name__ == "__main__":
    main()
