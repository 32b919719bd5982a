"""Gold: scoring answers against gold, qualification, drift suspension and reinstatement.

Gold is scored on submit: during qualification at once (the response explains the expected
answer, :func:`score_qualification`, a step of the submit flow); in production after the
response, by a per-process scorer thread (:class:`GoldScorer`), and a rolling accuracy credibly
below the bar suspends the rater (evidence kept, their labels excluded with the reason, their
items returned to the pool).
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

from ...schema.policy import Policy, settings_of
from ...store import repo
from ...store.models import ItemRow, JudgmentRow, Project, Rater, utcnow
from ...store.server_models import Assignment, GoldOutcome, PoolEntry, RaterStatus
from ..database import Database, must_get
from ..errors import ServiceError
from ..gold import qualification_record, score_gold
from ..quality_adapter import drift_alarm, qualification_decision, wilson_interval
from .leases import lock_rater_status
from .results import judgment_result


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
    project = must_get(session, Project, project_pk)
    policy = settings_of(project.settings).policy
    status = lock_rater_status(session, project_pk, user_pk, policy)
    row = must_get(session, JudgmentRow, judgment_pk)
    item_row = must_get(session, ItemRow, row.item_pk)
    if item_row.gold:
        _score(
            session, project, policy, status, user_pk, item_row, row, parsed, "qualification", now
        )
    session.flush()
    return judgment_result(session, row, created=True, status=status)


def after_submit(db: Database, pool_role: str, judgment_pk: int) -> None:
    """Every submit path calls this after its commit: production gold goes to the scorer."""
    if pool_role == "gold":
        defer_gold_scoring(db, judgment_pk)


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
    if not item_row.gold:  # the callers score gold items only
        return
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
log = logging.getLogger(__name__)


def score_production_gold(db: Database, judgment_pk: int) -> bool:
    """Score one production gold judgment (idempotent); whether an outcome was recorded."""
    with db.writing() as session:
        row = session.get(JudgmentRow, judgment_pk)
        lease = session.scalar(select(Assignment).where(Assignment.judgment_pk == judgment_pk))
        if row is None or lease is None or lease.role != "gold":
            return False
        project = must_get(session, Project, row.project_pk)
        policy = settings_of(project.settings or {}).policy
        status = lock_rater_status(session, project.pk, lease.user_pk, policy)
        if (
            session.scalar(select(GoldOutcome.pk).where(GoldOutcome.judgment_pk == judgment_pk))
            is not None
        ):
            return False  # another process scored it first
        item_row = must_get(session, ItemRow, row.item_pk)
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
        self.db = db
        self.jobs: queue.Queue[int | None] = queue.Queue()

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
        raise ServiceError(404, "this user has no rater record in the project")
    status.status, status.reason, status.updated_at = "qualified", f"reinstated: {note}", utcnow()
    return status
