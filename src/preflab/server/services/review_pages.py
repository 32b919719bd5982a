"""One page of the review queues (issue 27 item 2): what the review page and
``GET /api/v1/projects/{project}/review/queues`` answer, never assessing the whole project in the
request.

A small project (at most ``PREFLAB_SNAPSHOT_INLINE_LABELS`` judgments, the dashboard's rule) has
its queues computed now (:func:`.review.review_queues`), always current. A larger one's come from
the quality snapshot's process, which stores them whole (:mod:`.review_store`) under the
snapshot's freshness rule (:func:`preflab.server.snapshot.current`: a refresh is started when none
is stored or it is stale, one at a time); until one is stored the answer says ``computing``.

Paging: every queue is paged together. The cursor (``after``, opaque) names the snapshot it
belongs to and, per queue, the position of the last entry shown; the page holds the next
``limit`` entries of each queue. ``next`` is ``None`` once every queue is through, ``previous``
gives each queue's ``limit`` entries before this page's first. A cursor of an earlier snapshot is
refused (409: its positions rank other entries); start again from the first page.

Live re-check of a stored page: an item of the page adjudicated since the snapshot shows as
adjudicated in its place (it moves to the queue's end at the next refresh); a held-out label a
reviewer decided since, and a demonstration reviewed or revised since, leave the page. Everything
else is as of the snapshot, whose time the answer states.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ...schema import ReviewPass
from ...schema.policy import settings_of
from ...store.models import ItemRow, JudgmentRow, utcnow
from ...store.server_models import ReviewQueueEntry
from .. import snapshot
from ..database import Database
from ..errors import ServiceError
from ..permissions import ProjectRef
from . import review
from .review_scan import not_revised
from .review_store import QUEUES, MemorySource, Source, StoredSource, entries

#: Entries per queue on a page unless ``limit`` says otherwise, and the most it may say.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_CURSOR = re.compile(r"^(\d{1,20})((?:\.-?\d{1,19}){" + str(len(QUEUES)) + "})$")
_FIRST = (-1,) * len(QUEUES)


@dataclass(frozen=True)
class Cursor:
    """Where a page starts: the snapshot it belongs to (``0``: queues computed in the request)
    and, per queue of :data:`QUEUES`, the position of the last entry already shown."""

    generation: int
    after: tuple[int, ...] = _FIRST

    def __str__(self) -> str:
        return ".".join(str(n) for n in (self.generation, *self.after))

    @classmethod
    def parse(cls, text: str) -> Cursor:
        found = _CURSOR.match(text)
        after = tuple(int(n) for n in found.group(2)[1:].split(".")) if found else ()
        if found is None or any(n < -1 for n in after):
            raise ServiceError(
                422,
                f"after: {text[:80]!r} is not a cursor of the review queues; pass the `next` or "
                "`previous` value of an answer, or leave `after` out for the first page",
                [
                    {
                        "loc": ["query", "after"],
                        "msg": "not a review-queue cursor",
                        "type": "value_error",
                    }
                ],
            )
        return cls(int(found.group(1)), after)


def generation_of(computed_at: datetime | None) -> int:
    """The stored snapshot's generation: its time in microseconds (``1``: no time recorded)."""
    return 1 if computed_at is None else max(1, round(computed_at.timestamp() * 1_000_000))


def _empty(share: float | None) -> dict[str, Any]:
    return {
        "adjudication": [],
        "spot": [],
        "spot_share": share,
        "demonstrations": [],
        "telemetry": {"held_out": [], "weak_by_rater": [], "decided": 0},
    }


def queues_page(
    db: Database,
    project: ProjectRef,
    *,
    after: str | None = None,
    limit: int = DEFAULT_LIMIT,
    share: float | None = None,
) -> dict[str, Any]:
    """The review queues' page starting at ``after`` (``None``: the first), ``limit`` entries of
    each queue, with ``page``: the cursors, where the entries come from (``current``: computed
    now; ``stored``: the snapshot of ``computed_at``; ``computing``: none stored yet; ``failed``:
    the last run's ``error``) and every queue's size. ``share``: spot review's share (default the
    policy's); with a stored snapshot at most the share it was drawn at."""
    if not 1 <= limit <= MAX_LIMIT:
        raise ServiceError(422, f"limit: between 1 and {MAX_LIMIT}, not {limit}")
    cursor = Cursor.parse(after) if after is not None else None
    with db.reading() as s:
        if snapshot.is_small(s, project.pk):
            queues = review.review_queues(s, project, share=share)
            source: Source = MemorySource(entries(queues, None))
            return _page(
                source,
                cursor,
                Cursor(0),
                limit,
                None,
                {
                    "status": "current",
                    "computed_at": utcnow().isoformat(),
                    "refreshing_since": None,
                    "labels_since": 0,
                    "error": None,
                },
                queues["spot_share"],
                queues["telemetry"]["decided"],
                lambda out: None,
            )
    # starts a refresh when missing or stale, never computes one
    snap = snapshot.current(db, project, panels="none")  # the queues, not the panels
    state = {
        "computed_at": snap.computed_at.isoformat() if snap.computed_at else None,
        "refreshing_since": snap.refreshing_since.isoformat() if snap.refreshing_since else None,
        "labels_since": snap.labels_since,
        "error": snap.error,
    }
    if snap.review is None:
        status = "failed" if snap.error and snap.refreshing_since is None else "computing"
        out = _empty(share if share is not None else _policy_share(project))
        out["page"] = {
            **state,
            "status": status,
            "after": after,
            "limit": limit,
            "next": None,
            "previous": None,
            "counts": None,
        }
        return out
    generation = generation_of(snap.computed_at)
    if cursor is not None and cursor.generation != generation:
        raise ServiceError(
            409,
            "after: the review queues were recomputed since this cursor was given "
            f"(now as of {state['computed_at']}); start again from the first page (leave "
            "`after` out)",
        )
    drawn = float(snap.review["spot_share"])
    if share is not None and share > drawn:
        raise ServiceError(
            422,
            f"share: the stored queues drew spot review at {drawn}; a larger share ({share}) "
            "needs the project's policy.spot_review_share raised (the next snapshot draws it)",
            [{"loc": ["query", "share"], "msg": f"at most {drawn}", "type": "value_error"}],
        )
    below = None if share is None or share == drawn else share
    with db.reading() as s:
        return _page(
            StoredSource(s, project.pk),
            cursor,
            Cursor(generation),
            limit,
            below,
            {**state, "status": "stored"},
            drawn if share is None else share,
            int(snap.review["decided"]),
            lambda out: recheck(s, project.pk, out),
            stored_counts=dict(snap.review["counts"]),
        )


def _policy_share(project: ProjectRef) -> float:
    return float(settings_of(project.settings).policy.spot_review_share)


def _page(
    source: Source,
    cursor: Cursor | None,
    first: Cursor,
    limit: int,
    below: float | None,
    state: dict[str, Any],
    share: float,
    decided: int,
    live: Callable[[dict[str, Any]], None],
    stored_counts: dict[str, int] | None = None,
) -> dict[str, Any]:
    start = cursor.after if cursor is not None else first.after
    lists: dict[str, list[dict[str, Any]]] = {}
    ends: list[int] = []
    more = False
    for queue, at in zip(QUEUES, start, strict=True):
        got = source.after(queue, at, limit + 1, below)
        more = more or len(got) > limit
        got = got[:limit]
        lists[queue] = [e for _, e in got]
        ends.append(got[-1][0] if got else at)
    previous = None
    if any(at >= 0 for at in start):
        previous = Cursor(
            first.generation,
            tuple(
                -1 if at < 0 else source.start_before(q, at, limit, below)
                for q, at in zip(QUEUES, start, strict=True)
            ),
        )
    if stored_counts is not None:
        counts = stored_counts
        if below is not None:
            counts = {**counts, "spot": source.count("spot", below)}
    else:
        counts = {q: source.count(q, None) for q in QUEUES}
        counts["adjudication_open"] = sum(
            1
            for _, e in source.after("adjudication", -1, counts["adjudication"], None)
            if not e["adjudicated"]
        )
    out = {
        "adjudication": lists["adjudication"],
        "spot": lists["spot"],
        "spot_share": share,
        "demonstrations": lists["demonstrations"],
        "telemetry": {
            "held_out": lists["held_out"],
            "weak_by_rater": lists["weak_by_rater"],
            "decided": decided,
        },
    }
    live(out)
    out["page"] = {
        **state,
        "after": None if cursor is None else str(cursor),
        "limit": limit,
        "next": str(Cursor(first.generation, tuple(ends))) if more else None,
        "previous": None if previous is None else str(previous),
        "counts": counts,
    }
    return out


def recheck(session: Session, project_pk: int, out: dict[str, Any]) -> None:
    """A stored page made current where it matters to a reviewer (in place): its items
    adjudicated since show as adjudicated; held-out labels decided since and demonstrations
    reviewed, revised or excluded since leave it. Three queries over the page's entries."""
    keys = [e["item_id"] for e in out["adjudication"] if not e["adjudicated"]]
    if keys:
        done = set(
            session.scalars(
                select(ItemRow.item_key)
                .join(JudgmentRow, JudgmentRow.item_pk == ItemRow.pk)
                .where(
                    ItemRow.project_pk == project_pk,
                    ItemRow.item_key.in_(keys),
                    JudgmentRow.review_pass == int(ReviewPass.ADJUDICATION),
                    JudgmentRow.excluded.is_(False),
                    not_revised(),
                )
            )
        )
        out["adjudication"] = [
            {**e, "adjudicated": True} if e["item_id"] in done else e for e in out["adjudication"]
        ]
    tel = out["telemetry"]
    held = [h["judgment_id"] for h in tel["held_out"]]
    if held:
        decided = review.telemetry_decisions(session, project_pk, held)
        tel["held_out"] = [h for h in tel["held_out"] if h["judgment_id"] not in decided]
    demos = [d["judgment_id"] for d in out["demonstrations"]]
    if demos:
        gone = set(
            session.scalars(
                select(JudgmentRow.supersedes_pk).where(JudgmentRow.supersedes_pk.in_(demos))
            )
        ) | set(
            session.scalars(
                select(JudgmentRow.pk).where(
                    JudgmentRow.pk.in_(demos), JudgmentRow.excluded.is_(True)
                )
            )
        )
        out["demonstrations"] = [d for d in out["demonstrations"] if d["judgment_id"] not in gone]


def next_open_item(db: Database, project: ProjectRef, item_key: str) -> str | None:
    """The first item of the adjudication queue still open, other than ``item_key`` (the review
    item page's "next item"): the queue computed now for a small project; else the stored queue's
    open entries in order, each re-checked live, ``None`` while none is stored."""
    with db.reading() as s:
        if snapshot.is_small(s, project.pk):
            queue = review.review_queues(s, project)["adjudication"]
            return next(
                (e["item_id"] for e in queue if not e["adjudicated"] and e["item_id"] != item_key),
                None,
            )
    snap = snapshot.current(db, project, panels="none")  # the queues, not the panels
    if snap.review is None:
        return None
    after = -1
    with db.reading() as s:
        while True:
            rows = s.execute(
                select(ReviewQueueEntry.position, ReviewQueueEntry.entry)
                .where(
                    ReviewQueueEntry.project_pk == project.pk,
                    ReviewQueueEntry.queue == "adjudication",
                    ReviewQueueEntry.done.is_(False),
                    ReviewQueueEntry.position > after,
                )
                .order_by(ReviewQueueEntry.position)
                .limit(50)
            ).all()
            if not rows:
                return None
            page: dict[str, Any] = {
                "adjudication": [dict(e) for _, e in rows],
                "telemetry": {"held_out": []},
                "demonstrations": [],
            }
            recheck(s, project.pk, page)
            for e in page["adjudication"]:
                if not e["adjudicated"] and e["item_id"] != item_key:
                    return str(e["item_id"])
            after = int(rows[-1][0])
