"""Scoring, reviewing and revising judgments, and the submit flow's ORM steps.

Submitting is :func:`preflab.server.flow.lane.run_submit` (one flow on every executor): a
submission must match the rater's live lease; it is validated against the project's kinds,
the item's candidates, the shown order and the current rubric version; retried submissions
(same idempotency key, or the same lease) return the first result and store nothing twice —
the replays, a first label's rater row and a qualification answer's scoring are this module's
session steps (:func:`replay_by_key`, :func:`replay_of_lease`, :func:`rater_pk_for`,
:func:`score_qualification`). Gold is scored on submit: during qualification the response explains the expected answer;
in production it is silent, and a rolling accuracy credibly below the bar suspends the rater
(evidence kept, their labels excluded with the reason, their items returned to the pool).
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..store import repo
from ..store.models import ItemRow, JudgmentRow, Project, Rater, utcnow
from ..store.server_models import (
    Assignment,
    GoldOutcome,
    PoolEntry,
    RaterStatus,
    ReviewRequest,
    User,
)
from .assign import lock_rater_status
from .database import Database
from .flow.common import aware
from .flow.submit import (
    SCORED_LATER,
    JudgingError,
    build_judgment,
)
from .gold import expected_judgment, qualification_record, score_gold
from .permissions import ProjectRef
from .policy import Policy, settings_of
from .quality_adapter import drift_alarm, qualification_decision, wilson_interval

__all__ = ["SCORED_LATER", "JudgingError", "after_submit", "build_judgment"]


def _result(
    session: Session,
    row: JudgmentRow,
    *,
    created: bool,
    status: RaterStatus | None = None,
    gold_possible: bool = True,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "judgment_id": row.pk,
        "item_id": session.get(ItemRow, row.item_pk).item_key,
        "kind": row.kind,
        "created": created,
        "replayed": not created,
        "submitted_at": aware(row.submitted_at).isoformat() if row.submitted_at else None,
    }
    outcome = (
        session.scalar(select(GoldOutcome).where(GoldOutcome.judgment_pk == row.pk))
        if gold_possible
        else None
    )
    if outcome is not None and outcome.phase == "qualification":
        item = session.get(ItemRow, row.item_pk)
        expected = expected_judgment(item.item_key, item.gold)
        body = expected.model_dump(
            mode="json",
            by_alias=True,
            exclude_none=True,
            exclude={"provenance", "item_id", "rationale"},
        )
        out["gold"] = {
            "correct": outcome.correct,
            "expected": body,
            "explanation": (item.gold or {}).get("explanation"),
            # the order an explanation's "response 1, 2 ..." refers to; the page maps it to the shown order
            "item_order": [c.candidate_key for c in item.candidates],
        }
        record = qualification_record(session, row.project_pk, outcome.user_pk)
        st = status or session.scalar(
            select(RaterStatus).where(
                RaterStatus.project_pk == row.project_pk, RaterStatus.user_pk == outcome.user_pk
            )
        )
        out["qualification"] = {
            "status": st.status if st else "qualifying",
            "answered": len(record),
            "correct": sum(record),
        }
    return out


# -- the submit flow's session steps (:func:`preflab.server.flow.lane.run_submit`, framework's
# executor only: rare cases, in the flow's own transaction) ------------------------------------


def replay_by_key(
    session: Session,
    project_name: str,
    user_pk: int,
    key: str,
    judgment: dict[str, Any],
    lease_id: str,
) -> dict[str, Any] | None:
    """The first result when this request repeats the one stored under idempotency ``key``;
    None when the key is new; 409 when it was used for another request."""
    project_pk = session.scalar(select(Project.pk).where(Project.name == project_name))
    username = session.scalar(select(User.username).where(User.pk == user_pk))
    first = _replay_of(session, project_pk, username, key, judgment, lease_id=lease_id)
    return None if first is None else _result(session, first, created=False)


def replay_of_lease(
    session: Session, lease_pk: int, judgment: dict[str, Any]
) -> dict[str, Any] | None:
    """The first result when a submitted lease gets the same answer again, else None (the
    flow then refuses: 409)."""
    lease = session.get(Assignment, lease_pk)
    first = session.get(JudgmentRow, lease.judgment_pk) if lease.judgment_pk else None
    if first is not None and _same_answer(first, judgment):
        return _result(session, first, created=False)
    return None


def rater_pk_for(session: Session, project_pk: int, username: str, user_pk: int) -> int:
    """The caller's rater row in the project, made on their first label."""
    rater = repo.get_or_create_rater(session, session.get(Project, project_pk), username)
    if rater.user_pk is None:
        rater.user_pk = user_pk
    session.flush()
    return rater.pk


def score_qualification(
    session: Session,
    project_pk: int,
    user_pk: int,
    judgment_pk: int,
    parsed: Any,
    now: Any,
) -> dict[str, Any]:
    """A qualification answer, just stored, scored at once (the rater knows these are tests):
    the outcome, the qualification decision, and the answer with the expected judgment."""
    project = session.get(Project, project_pk)
    policy = settings_of(project.settings).policy
    status = lock_rater_status(session, project_pk, user_pk, policy)
    row = session.get(JudgmentRow, judgment_pk)
    item_row = session.get(ItemRow, row.item_pk)
    if item_row.gold:
        _score(
            session, project, policy, status, user_pk, item_row, row, parsed, "qualification", now
        )
    session.flush()
    return _result(session, row, created=True, status=status)


def after_submit(db: Database, pool_role: str, judgment_pk: int) -> None:
    """Every submit path calls this after its commit: production gold goes to the scorer."""
    if pool_role == "gold":
        defer_gold_scoring(db, judgment_pk)


def _replay_of(
    session: Session,
    project_pk: int,
    username: str,
    key: str,
    data: dict[str, Any],
    *,
    lease_id: str | None = None,
    revises: int | None = None,
) -> JudgmentRow | None:
    """The judgment this rater stored under idempotency ``key`` if this request repeats it,
    ``None`` if the key is new to them (keys are per rater: another rater's equal key is not
    theirs, 0015); 409 if they used it for another request (another assignment or judgment, or
    a different answer): a retry must send the same body."""
    first = session.scalar(
        select(JudgmentRow)
        .join(Rater, Rater.pk == JudgmentRow.rater_pk)
        .where(
            JudgmentRow.project_pk == project_pk,
            Rater.rater_key == username,
            JudgmentRow.idempotency_key == key,
        )
    )
    if first is None:
        return None
    if lease_id is not None:
        same_target = (
            session.scalar(select(Assignment.lease_id).where(Assignment.judgment_pk == first.pk))
            == lease_id
        )
    else:
        same_target = first.supersedes_pk == revises
    if not same_target or not _same_answer(first, data):
        raise JudgingError(
            409,
            f"idempotency key {key!r} was already used for a different submission; "
            "send the same body to get the first result again, or a fresh key for a new answer",
            [
                {
                    "loc": ["body", "idempotency_key"],
                    "msg": "already used with a different body",
                    "type": "idempotency_conflict",
                }
            ],
        )
    return first


def _same_answer(row: JudgmentRow, data: dict[str, Any]) -> bool:
    body = {
        k: v for k, v in (data or {}).items() if k not in ("item_id", "rationale", "provenance")
    }
    stored = {k: v for k, v in row.body.items() if k in body}
    return stored == body and (data or {}).get("rationale") == row.rationale


def _score(
    session,
    project,
    policy: Policy,
    status: RaterStatus,
    user_pk: int,
    item_row: ItemRow,
    row: JudgmentRow,
    parsed,
    role: str,
    now,
) -> None:
    correct = score_gold(parsed, item_row.item_key, item_row.gold)
    if correct is None:
        return
    phase = "qualification" if role == "qualification" else "production"
    session.add(
        GoldOutcome(
            project_pk=project.pk,
            user_pk=user_pk,
            item_pk=item_row.pk,
            judgment_pk=row.pk,
            phase=phase,
            correct=correct,
        )
    )
    session.flush()
    if phase == "qualification":
        if status.status != "qualifying":
            return
        q = policy.qualification
        record = qualification_record(session, project.pk, user_pk)
        decision = qualification_decision(record, q.pass_bar, q.min_items, q.confidence)
        if decision != "continue":
            status.status = "qualified" if decision == "pass" else "failed"
            lo, hi = wilson_interval(sum(record), len(record), q.confidence)
            status.reason = f"qualification: {sum(record)}/{len(record)} correct, Wilson [{lo:.3f}, {hi:.3f}] vs bar {q.pass_bar}"
            status.evidence = {
                "phase": "qualification",
                "outcomes": record,
                "wilson": [lo, hi],
                "bar": q.pass_bar,
            }
            status.updated_at = now
        return
    d = policy.drift
    if not d.enabled or status.status != "qualified":
        return
    recent = list(
        reversed(
            session.scalars(
                select(GoldOutcome.correct)
                .where(
                    GoldOutcome.project_pk == project.pk,
                    GoldOutcome.user_pk == user_pk,
                    GoldOutcome.phase == "production",
                )
                .order_by(GoldOutcome.pk.desc())
                .limit(d.window)
            ).all()
        )
    )
    evidence = drift_alarm(
        recent, d.bar or policy.qualification.pass_bar, d.min_items, d.confidence
    )
    if evidence is not None:
        suspend(session, project, user_pk, status, evidence, now)


def suspend(
    session: Session, project: Project, user_pk: int, status: RaterStatus, evidence: dict, now
) -> int:
    """Suspend a rater: keep the evidence, exclude their labels (with the reason), free their leases."""
    reason = (
        f"gold accuracy drift: {evidence['correct']}/{evidence['n']} correct in the last "
        f"{evidence['n']} production gold items, below the bar {evidence['bar']}"
    )
    status.status, status.reason, status.updated_at = "suspended", reason, now
    status.evidence = {**evidence, "suspended_at": now.isoformat()}
    rater_pks = list(
        session.scalars(
            select(Rater.pk).where(Rater.project_pk == project.pk, Rater.user_pk == user_pk)
        )
    )
    excluded = list(
        session.execute(
            select(JudgmentRow.pk, JudgmentRow.item_pk).where(
                JudgmentRow.project_pk == project.pk,
                JudgmentRow.rater_pk.in_(rater_pks),
                JudgmentRow.excluded.is_(False),
            )
        ).all()
    )
    if excluded:
        # Excluded production labels no longer count towards their item's target: the
        # database takes them off (store.triggers). Lock the pool rows first, in item order,
        # so two suspensions never lock them in opposite orders (PostgreSQL: a deadlock).
        session.execute(
            select(PoolEntry.pk)
            .where(PoolEntry.item_pk.in_(sorted({j.item_pk for j in excluded})))
            .order_by(PoolEntry.item_pk)
            .with_for_update()
        ).all()
        session.execute(
            update(JudgmentRow)
            .where(JudgmentRow.pk.in_([j.pk for j in excluded]))
            .values(excluded=True, exclusion_reason=f"rater suspended: {reason}")
        )
        for obj in list(session.identity_map.values()):
            if isinstance(obj, PoolEntry):
                session.expire(obj, ["filled"])  # changed under the session
    session.execute(
        update(Assignment)
        .where(
            Assignment.project_pk == project.pk,
            Assignment.user_pk == user_pk,
            Assignment.status == "active",
        )
        .values(status="released")
    )
    return len(excluded)


# -- production gold, scored after the response ------------------------------------------------------
#
# A submission for a production gold item must not be told apart from any other: same
# statements, same answer, same time. So every submit path stores it like a production label
# and hands the judgment to a per-process scorer thread after its commit; the scorer records
# the outcome and runs the drift rule (suspension) in its own short transaction, under the
# rater's status lock. Nothing is lost in a crash: a gold judgment without an outcome is found
# again by the sweep at start-up and whenever the scorer is idle.

SWEEP_EVERY_S = 30.0
#: A production gold judgment is scored this many seconds (uniformly random) after it arrives.
SCORING_DELAY_S = (0.2, 1.0)
_RNG = random.SystemRandom()
log = logging.getLogger("preflab.server.judging")


def score_production_gold(db: Database, judgment_pk: int) -> bool:
    """Score one production gold judgment (idempotent); whether an outcome was recorded."""
    with db.writing() as session:
        row = session.get(JudgmentRow, judgment_pk)
        lease = session.scalar(select(Assignment).where(Assignment.judgment_pk == judgment_pk))
        if row is None or lease is None or lease.role != "gold":
            return False
        project = session.get(Project, row.project_pk)
        policy = settings_of(project.settings or {}).policy
        status = lock_rater_status(session, project.pk, lease.user_pk, policy)
        if (
            session.scalar(select(GoldOutcome.pk).where(GoldOutcome.judgment_pk == judgment_pk))
            is not None
        ):
            return False  # another process scored it first
        item_row = session.get(ItemRow, row.item_pk)
        if not item_row.gold:
            return False
        _score(
            session,
            project,
            policy,
            status,
            lease.user_pk,
            item_row,
            row,
            repo.judgment_from_row(row),
            "gold",
            utcnow(),
        )
        return True


def unscored_gold(db: Database) -> list[int]:
    """Production gold judgments with no outcome yet (left by a crash or another process)."""
    with db.reading() as session:
        return list(
            session.scalars(
                select(Assignment.judgment_pk)
                .where(
                    Assignment.role == "gold",
                    Assignment.status == "submitted",
                    Assignment.judgment_pk.is_not(None),
                    ~select(GoldOutcome.pk)
                    .where(GoldOutcome.judgment_pk == Assignment.judgment_pk)
                    .exists(),
                )
                .order_by(Assignment.judgment_pk)
            )
        )


class GoldScorer(threading.Thread):
    """One per database per process: scores what the submit paths hand it, and sweeps."""

    def __init__(self, db: Database) -> None:
        super().__init__(name="preflab-gold-scorer", daemon=True)
        self.db, self.jobs = db, queue.Queue()

    def run(self) -> None:
        self._sweep()
        while True:
            try:
                batch = [self.jobs.get(timeout=SWEEP_EVERY_S)]
            except queue.Empty:
                self._sweep()
                continue
            if batch[0] is not None:
                # Wait a random while, gathering more: the scoring's CPU and write lock then
                # fall at a moment unrelated to the gold submission (scoring at once would slow
                # the response or the rater's next request, which tells gold apart again).
                time.sleep(_RNG.uniform(*SCORING_DELAY_S))
            while True:
                try:
                    batch.append(self.jobs.get_nowait())
                except queue.Empty:
                    break
            try:
                for job in batch:
                    if job is not None:
                        self._score(job)
            finally:
                for _ in batch:
                    self.jobs.task_done()
            if None in batch:
                return

    def _score(self, judgment_pk: int) -> None:
        for attempt in range(3):
            try:
                score_production_gold(self.db, judgment_pk)
                return
            except Exception:
                if attempt == 2:
                    log.exception(
                        "gold scoring of judgment %s failed; the next sweep retries", judgment_pk
                    )
                time.sleep(0.05 * (attempt + 1))

    def _sweep(self) -> None:
        try:
            for judgment_pk in unscored_gold(self.db):
                self._score(judgment_pk)
        except Exception:
            log.exception("gold scoring sweep failed; retrying in %s s", SWEEP_EVERY_S)


_SCORERS: dict[int, GoldScorer] = {}
_SCORERS_LOCK = threading.Lock()


def start_gold_scorer(db: Database) -> GoldScorer:
    """The database's scorer in this process (started on first use; sweeps at once)."""
    with _SCORERS_LOCK:
        scorer = _SCORERS.get(id(db))
        if scorer is None or scorer.db is not db or not scorer.is_alive():
            scorer = _SCORERS[id(db)] = GoldScorer(db)
            scorer.start()
        return scorer


def defer_gold_scoring(db: Database, judgment_pk: int) -> None:
    start_gold_scorer(db).jobs.put(judgment_pk)


def stop_gold_scorer(db: Database, timeout: float = 10.0) -> None:
    """Score what is queued, then stop (the app's shutdown, before the engines close)."""
    with _SCORERS_LOCK:
        scorer = _SCORERS.pop(id(db), None)
    if scorer is not None and scorer.is_alive():
        scorer.jobs.put(None)
        scorer.join(timeout)


def wait_for_gold_scoring(db: Database) -> None:
    """Block until every judgment handed to the scorer so far is scored (tests, shutdown)."""
    with _SCORERS_LOCK:
        scorer = _SCORERS.get(id(db))
    if scorer is not None:
        scorer.jobs.join()


def reinstate(session: Session, project_pk: int, user_pk: int, note: str) -> RaterStatus:
    status = session.scalar(
        select(RaterStatus)
        .where(RaterStatus.project_pk == project_pk, RaterStatus.user_pk == user_pk)
        .with_for_update()
    )
    if status is None:
        raise JudgingError(404, "this user has no rater record in the project")
    status.status, status.reason, status.updated_at = "qualified", f"reinstated: {note}", utcnow()
    return status


# -- review -----------------------------------------------------------------------------------


def send_back(
    session: Session, project_pk: int, judgment_pk: int, reviewer_pk: int, note: str
) -> ReviewRequest:
    row = session.get(JudgmentRow, judgment_pk)
    if row is None or row.project_pk != project_pk:
        raise JudgingError(404, f"no judgment {judgment_pk} in this project")
    if (
        session.scalar(select(JudgmentRow.pk).where(JudgmentRow.supersedes_pk == judgment_pk))
        is not None
    ):
        raise JudgingError(409, "this judgment was already revised; send back the revision instead")
    if (
        session.scalar(
            select(ReviewRequest.pk).where(
                ReviewRequest.judgment_pk == judgment_pk, ReviewRequest.status == "open"
            )
        )
        is not None
    ):
        raise JudgingError(409, "this judgment is already waiting for a revision")
    req = ReviewRequest(
        project_pk=project_pk, judgment_pk=judgment_pk, reviewer_pk=reviewer_pk, note=note
    )
    session.add(req)
    session.flush()
    return req


def revise(
    db: Database,
    project_ref: ProjectRef,
    user_pk: int,
    username: str,
    judgment_pk: int,
    data: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    telemetry: dict[str, Any] | None = None,
) -> dict[str, Any]:
    with db.writing() as session:
        return revise_in(
            session,
            project_ref,
            user_pk,
            username,
            judgment_pk,
            data,
            idempotency_key=idempotency_key,
            telemetry=telemetry,
        )


def revise_in(
    session: Session,
    project_ref: ProjectRef,
    user_pk: int,
    username: str,
    judgment_pk: int,
    data: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    telemetry: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`revise` in the caller's transaction (an edit opens its request in the same one)."""
    project = session.get(Project, project_ref.pk)
    if idempotency_key:
        first = _replay_of(
            session, project.pk, username, idempotency_key, data, revises=judgment_pk
        )
        if first is not None:
            return _result(session, first, created=False)
    lock_rater_status(session, project.pk, user_pk, settings_of(project_ref.settings).policy)
    old = session.get(JudgmentRow, judgment_pk)
    if (
        old is None
        or old.project_pk != project.pk
        or session.get(Rater, old.rater_pk).user_pk != user_pk
    ):
        raise JudgingError(404, f"no judgment {judgment_pk} of yours in this project")
    req = session.scalar(
        select(ReviewRequest)
        .where(ReviewRequest.judgment_pk == judgment_pk, ReviewRequest.status == "open")
        .with_for_update()
    )
    if req is None:
        raise JudgingError(
            409,
            "this judgment was not sent back to you; only sent-back judgments can be revised",
        )
    item_row = session.get(ItemRow, old.item_pk)
    parsed = build_judgment(
        session,
        project,
        item_row,
        username,
        data,
        shown_order=old.shown_order,
        started_at=None,
        idempotency_key=idempotency_key,
        telemetry=telemetry,
    )
    row = repo.judgment_row_from_judgment(
        project, item_row, session.get(Rater, old.rater_pk), parsed
    )
    row.supersedes_pk = old.pk
    session.add(row)
    session.flush()
    req.status, req.revision_pk, req.resolved_at = "resolved", row.pk, utcnow()
    return _result(session, row, created=True)
