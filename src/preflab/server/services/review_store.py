"""The review queues as rows (issue 27 item 2): what the snapshot process stores of
:func:`preflab.server.services.review.review_queues` (table ``review_queue_entries``, counts in
``quality_snapshots.review``) and the keyset reads of one page of each queue, from that table or
from queues computed in the request (a small project's).

Each queue keeps the order ``review_queues`` gives it, as ``position``: the rank for the
adjudication queue (its order, adjudicated last, then more reasons first, then item id, needs
every item assessed, so it is stored ranked: no SQL collation re-sorts item ids) and the weak
signals per rater; the judgment pk for spot review, the held-out labels and the demonstrations
(their order). A page of a queue is the entries with ``position > after``, ``limit`` of them.
"""

from __future__ import annotations

import heapq
import pickle
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from ...store.server_models import ReviewQueueEntry
from .review import Tally, adjudication_order, unit_hash

#: The queues, in the order a cursor lists their positions.
QUEUES = ("adjudication", "spot", "held_out", "weak_by_rater", "demonstrations")
#: Rows inserted per statement when the snapshot stores the queues.
BATCH = 5000
#: Adjudication sort keys :class:`Spool` holds at most (~200 bytes each); past it each full run
#: is sorted and written to its file, and :meth:`Spool.finish` merges the runs
RUN = 50_000
#: (key, offset) pairs pickled together in a run's file (what the merge holds of each run)
RUN_BLOCK = 2_000


@dataclass(frozen=True)
class Entry:
    """One stored entry: its queue, place, the spot draw, the adjudicated mark, the entry."""

    queue: str
    position: int
    entry: dict[str, Any]
    draw: float | None = None
    done: bool = False


def entries(queues: dict[str, Any], secret: str | None) -> list[Entry]:
    """The rows of ``review_queues``' answer, each queue in its order. ``secret``: the project's,
    to store each spot entry's draw (a smaller share is then a filter); ``None``: no draw."""
    tel = queues["telemetry"]
    out = [
        Entry("adjudication", i, e, done=bool(e["adjudicated"]))
        for i, e in enumerate(queues["adjudication"])
    ]
    out += [
        Entry(
            "spot",
            s["judgment_id"],
            s,
            draw=None if secret is None else unit_hash(secret, s["judgment_id"]),
        )
        for s in queues["spot"]
    ]
    out += [Entry("held_out", h["judgment_id"], h) for h in tel["held_out"]]
    out += [Entry("weak_by_rater", i, w) for i, w in enumerate(tel["weak_by_rater"])]
    out += [Entry("demonstrations", d["judgment_id"], d) for d in queues["demonstrations"]]
    return out


def summary(queues: dict[str, Any]) -> dict[str, Any]:
    """The counts a page shows beside its entries, and the share spot review was drawn at."""
    tel = queues["telemetry"]
    return {
        "counts": {
            "adjudication": len(queues["adjudication"]),
            "adjudication_open": sum(1 for e in queues["adjudication"] if not e["adjudicated"]),
            "spot": len(queues["spot"]),
            "held_out": len(tel["held_out"]),
            "weak_by_rater": len(tel["weak_by_rater"]),
            "demonstrations": len(queues["demonstrations"]),
        },
        "spot_share": queues["spot_share"],
        "decided": tel["decided"],
    }


def replace(session: Session, project_pk: int, rows: Iterable[Entry]) -> None:
    """The project's stored entries become ``rows`` (in the caller's write transaction),
    inserted ``BATCH`` at a time as they are read from ``rows``."""
    session.execute(delete(ReviewQueueEntry).where(ReviewQueueEntry.project_pk == project_pk))
    it = iter(rows)
    while batch := list(islice(it, BATCH)):
        session.execute(
            insert(ReviewQueueEntry),
            [
                {
                    "project_pk": project_pk,
                    "queue": r.queue,
                    "position": r.position,
                    "item_key": r.entry.get("item_id"),
                    "judgment_pk": r.entry.get("judgment_id"),
                    "draw": r.draw,
                    "done": r.done,
                    "entry": r.entry,
                }
                for r in batch
            ],
        )


class Spool:
    """The snapshot's queues as they are computed (a :class:`.review.QueueSink`), in a temporary
    file rather than in memory: each entry pickled as it comes (the very object, so what is
    stored is what :func:`entries` stores), and in memory only the adjudication queue's sort
    keys with each entry's place in the file. :meth:`rows` reads them back in :func:`entries`'
    order and positions (the adjudication queue ranked; spot, held-out and demonstration entries
    at their judgment pk, which is their order), so the write transaction inserts them in
    batches (:func:`replace`) and readers never see a half-written queue. Close it (or use it
    as a context manager) to remove the file."""

    def __init__(self, secret: str | None) -> None:
        self.secret = secret
        self.file = tempfile.TemporaryFile(prefix="preflab-queues-")
        #: (adjudication order, offset) of each queued item, until :meth:`finish` sorts them
        #: into :attr:`order` (the keys, ~15 MB at 1M judgments, are not kept past it); at most
        #: ``run`` of them: past it each full run is sorted into :attr:`runs`' file
        self.ranked: list[tuple[tuple[bool, int, str], int]] = []
        self.run = RUN
        #: the sorted runs spilled, in blocks of ``RUN_BLOCK``: each run's first block's offset
        self.runs = tempfile.TemporaryFile(prefix="preflab-queue-keys-")
        self._run_starts: list[int] = []
        self.order = array("q")  # the queued items' offsets, ranked
        self.counts = dict.fromkeys(
            ("adjudication", "adjudication_open", "spot", "held_out", "weak_by_rater"), 0
        )
        self.tail: list[Entry] = []  # weak signals per rater and demonstrations (no pass)
        self._others = array("q")  # offsets of the spot and held-out entries

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.file.close()
        self.runs.close()

    def _put(self, queue: str, entry: dict[str, Any]) -> int:
        self.file.seek(0, 2)
        at = self.file.tell()
        pickle.dump((queue, entry), self.file, protocol=pickle.HIGHEST_PROTOCOL)
        return at

    def adjudication(self, entry: dict[str, Any]) -> None:
        self.ranked.append((adjudication_order(entry), self._put("adjudication", entry)))
        self.counts["adjudication"] += 1
        self.counts["adjudication_open"] += not entry["adjudicated"]
        if len(self.ranked) >= self.run:
            self._spill()

    def _spill(self) -> None:
        """The keys held, sorted, written as one run (blocks of ``RUN_BLOCK``, then ``None``)."""
        self.ranked.sort()
        self.runs.seek(0, 2)
        self._run_starts.append(self.runs.tell())
        for start in range(0, len(self.ranked), RUN_BLOCK):
            block = self.ranked[start : start + RUN_BLOCK]
            pickle.dump(block, self.runs, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.dump(None, self.runs, protocol=pickle.HIGHEST_PROTOCOL)
        self.ranked = []

    def _run(self, at: int) -> Iterator[tuple[tuple[bool, int, str], int]]:
        """One spilled run's (key, offset) pairs in order, a block at a time."""
        while True:
            self.runs.seek(at)
            block = pickle.load(self.runs)
            at = self.runs.tell()
            if block is None:
                return
            yield from block

    def _ranked_offsets(self) -> array[int]:
        """The queued items' offsets in adjudication order: the keys sorted (one run in memory)
        or the spilled runs merged (the same order: each (key, offset) is distinct)."""
        if not self._run_starts:
            self.ranked.sort()
            return array("q", (at for _key, at in self.ranked))
        if self.ranked:
            self._spill()
        merged = heapq.merge(*(self._run(at) for at in self._run_starts))
        return array("q", (at for _key, at in merged))

    def spot(self, entry: dict[str, Any]) -> None:
        self._others.append(self._put("spot", entry))
        self.counts["spot"] += 1

    def held_out(self, entry: dict[str, Any]) -> None:
        self._others.append(self._put("held_out", entry))
        self.counts["held_out"] += 1

    def finish(self, tally: Tally, demonstrations: list[dict[str, Any]]) -> dict[str, Any]:
        """The scan is over: the raters' weak signals and the pending demonstrations join the
        entries; answers :func:`summary` of the queues."""
        self.order = self._ranked_offsets()
        self.ranked = []
        self.tail = [Entry("weak_by_rater", i, w) for i, w in enumerate(tally.weak_by_rater)]
        self.tail += [Entry("demonstrations", d["judgment_id"], d) for d in demonstrations]
        self.counts["weak_by_rater"] = len(tally.weak_by_rater)
        return {
            "counts": {**self.counts, "demonstrations": len(demonstrations)},
            "spot_share": tally.share,
            "decided": tally.decided,
        }

    def _read(self, at: int) -> tuple[str, dict[str, Any]]:
        self.file.seek(at)
        queue, entry = pickle.load(self.file)
        return queue, entry

    def rows(self) -> Iterator[Entry]:
        """The entries, as :func:`entries` gives them for the same queues (call :meth:`finish`
        first); read back one at a time."""
        for rank, at in enumerate(self.order):
            _q, e = self._read(at)
            yield Entry("adjudication", rank, e, done=bool(e["adjudicated"]))
        for at in self._others:
            queue, e = self._read(at)
            pk = e["judgment_id"]
            draw = None
            if queue == "spot" and self.secret is not None:
                draw = unit_hash(self.secret, pk)
            yield Entry(queue, pk, e, draw=draw)
        yield from self.tail


class Source(Protocol):
    """Where a page's entries come from: the stored table or queues computed now."""

    def after(
        self, queue: str, after: int, limit: int, below: float | None
    ) -> list[tuple[int, dict[str, Any]]]:
        """Up to ``limit`` entries with ``position > after``, in order; ``below``: only spot
        entries drawn below this share."""

    def start_before(self, queue: str, upto: int, limit: int, below: float | None) -> int:
        """The ``after`` of the page whose last entry is the last one at or before ``upto``
        (``-1``: from the first)."""

    def count(self, queue: str, below: float | None) -> int:
        """Entries of the queue (drawn below ``below``)."""


class StoredSource:
    """The entries the snapshot process stored, read by keyset on ``position``."""

    def __init__(self, session: Session, project_pk: int) -> None:
        self.session, self.project_pk = session, project_pk

    def _where(self, queue: str, below: float | None) -> list[Any]:
        where = [ReviewQueueEntry.project_pk == self.project_pk, ReviewQueueEntry.queue == queue]
        if below is not None and queue == "spot":
            where.append(ReviewQueueEntry.draw < below)
        return where

    def after(
        self, queue: str, after: int, limit: int, below: float | None
    ) -> list[tuple[int, dict[str, Any]]]:
        stmt = (
            select(ReviewQueueEntry.position, ReviewQueueEntry.entry)
            .where(*self._where(queue, below), ReviewQueueEntry.position > after)
            .order_by(ReviewQueueEntry.position)
            .limit(limit)
        )
        return [(int(p), dict(e)) for p, e in self.session.execute(stmt)]

    def start_before(self, queue: str, upto: int, limit: int, below: float | None) -> int:
        stmt = (
            select(ReviewQueueEntry.position)
            .where(*self._where(queue, below), ReviewQueueEntry.position <= upto)
            .order_by(ReviewQueueEntry.position.desc())
            .offset(limit)
            .limit(1)
        )
        found = self.session.scalar(stmt)
        return -1 if found is None else int(found)

    def count(self, queue: str, below: float | None) -> int:
        stmt = select(func.count()).select_from(ReviewQueueEntry).where(*self._where(queue, below))
        return int(self.session.scalar(stmt) or 0)


class MemorySource:
    """Entries of queues computed in the request (a small project), paged the same way."""

    def __init__(self, rows: Iterable[Entry]) -> None:
        self.by_queue: dict[str, list[Entry]] = {q: [] for q in QUEUES}
        for r in rows:
            self.by_queue[r.queue].append(r)

    def _rows(self, queue: str, below: float | None) -> list[Entry]:
        rows = self.by_queue[queue]
        if below is not None and queue == "spot":
            rows = [r for r in rows if r.draw is None or r.draw < below]
        return rows

    def after(
        self, queue: str, after: int, limit: int, below: float | None
    ) -> list[tuple[int, dict[str, Any]]]:
        rows = [r for r in self._rows(queue, below) if r.position > after]
        return [(r.position, r.entry) for r in rows[:limit]]

    def start_before(self, queue: str, upto: int, limit: int, below: float | None) -> int:
        rows = [r for r in self._rows(queue, below) if r.position <= upto]
        return rows[-limit - 1].position if len(rows) > limit else -1

    def count(self, queue: str, below: float | None) -> int:
        return len(self._rows(queue, below))
