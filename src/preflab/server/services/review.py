"""Review services: the adjudication and spot-review queues, one item under review, the
adjudicated (review pass 2) final label, the data browser, skips, demonstrations accepted or
rejected, and the reviewer's list of judgments. The REST routes (:mod:`preflab.server.routes.review`),
the pages and the CLI call these; none of them holds review logic of its own.

Disagreement and telemetry flags come from the quality engine (:mod:`preflab.quality`), the
same rules as ``preflab quality report``.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeGuard, cast

from pydantic import ValidationError
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session, selectinload

from ... import audit
from ...quality.adjudication import route_for_adjudication
from ...quality.bias import word_length
from ...quality.table import LabelTable
from ...quality.telemetry import Assessment, TelemetrySettings, assess
from ...quality.telemetry import telemetry_flags as quality_telemetry_flags
from ...schema import JudgmentBase, ReviewPass
from ...schema.authorship import ReferenceProvenance
from ...schema.judgments import DemonstrationJudgment
from ...schema.policy import settings_of
from ...store import repo
from ...store.models import ItemRow, JudgmentRow, Project, Rater, utcnow
from ...store.server_models import (
    SKIP_REASONS,
    TELEMETRY_DECISIONS,
    TELEMETRY_EXCLUDED,
    TELEMETRY_KEPT,
    Assignment,
    GoldOutcome,
    ItemSkip,
    PoolEntry,
    RaterStatus,
    ReviewRequest,
    User,
)
from ...verify.references import reference_status
from ..database import Database, must_get
from ..errors import ServiceError
from ..flow.submit import build_judgment
from ..permissions import ProjectRef
from ..quality_adapter import wilson_interval
from . import extra_raters
from .leases import expired_leases
from .review_scan import ScanRow, item_answers, item_chunks, near_duplicate_partners, not_revised

# -- judgments under review -----------------------------------------------------------------------


def active_judgments(
    session: Session, project_pk: int, item_pk: int | None = None
) -> list[JudgmentRow]:
    """Judgments that count: not excluded, not replaced by a revision; oldest first."""
    revised = select(JudgmentRow.supersedes_pk).where(
        JudgmentRow.project_pk == project_pk, JudgmentRow.supersedes_pk.is_not(None)
    )
    stmt = (
        select(JudgmentRow)
        .where(
            JudgmentRow.project_pk == project_pk,
            JudgmentRow.excluded.is_(False),
            JudgmentRow.pk.not_in(revised),
        )
        .options(
            selectinload(JudgmentRow.rater),
            selectinload(JudgmentRow.item).selectinload(ItemRow.candidates),
        )
        .order_by(JudgmentRow.pk)
    )
    if item_pk is not None:
        stmt = stmt.where(JudgmentRow.item_pk == item_pk)
    return list(session.scalars(stmt))


def parsed_judgments(rows: Sequence[JudgmentRow | ScanRow]) -> list[Any]:
    """Each row as its judgment model (``None`` for a row that no longer parses); a
    :class:`.review_scan.ScanRow` has the attributes ``judgment_from_row`` reads."""
    out: list[JudgmentBase | None] = []
    for r in rows:
        try:
            out.append(repo.judgment_from_row(cast(JudgmentRow, r)))
        except ValidationError:  # pragma: no cover - stored rows were validated on the way in
            out.append(None)
    return out


def disagreement_reasons(judgments: list[Any]) -> dict[str, list[str]]:
    """item id -> reasons its production labels disagree (pass 0 only), by the quality engine's
    routing rule (:func:`preflab.quality.route_for_adjudication`)."""
    production = [j for j in judgments if j is not None and int(j.provenance.review_pass) == 0]
    table = LabelTable.from_judgments(production)
    out: dict[str, list[str]] = defaultdict(list)
    for row in route_for_adjudication(table):
        out[str(row["item_id"])] += [f"low agreement: {r}" for r in row["reasons"]]
    return dict(out)


def telemetry_flags(judgments: list[Any]) -> dict[int, dict[str, list[int]]]:
    """Index in ``judgments`` -> {flag: indices of the other judgments it pairs with} (evidence for
    a reviewer, not verdicts), by :func:`preflab.quality.telemetry_flags`. A judgment whose
    rationale nearly duplicates five others has the flag once, naming the five; pair flags are
    never counted per pair."""
    present = [(i, j) for i, j in enumerate(judgments) if j is not None]
    out: dict[int, dict[str, list[int]]] = defaultdict(dict)
    for f in quality_telemetry_flags([j for _, j in present]):
        others = out[present[f["index"]][0]].setdefault(f["flag"], [])
        other = (f.get("evidence") or {}).get("other_index")
        if other is not None and present[other][0] not in others:
            others.append(present[other][0])
    return dict(out)


def telemetry_settings(project: ProjectRef | Project) -> TelemetrySettings:
    """The project's ``policy.telemetry`` thresholds (the export reads the same setting)."""
    return TelemetrySettings.from_policy(
        settings_of(project.settings).policy.telemetry.model_dump()
    )


def assessments(
    rows: Sequence[JudgmentRow | ScanRow],
    parsed: list[Any],
    settings: TelemetrySettings,
    item_of: Callable[[int], ItemRow] | None = None,
) -> dict[int, Assessment]:
    """Index in ``rows`` -> the :class:`~preflab.quality.telemetry.Assessment` of each judgment
    with a telemetry flag: the export's rule (:func:`preflab.quality.telemetry.assess`, words to
    read counted on the item's answers the judgment names, as the export counts them).
    ``item_of``: an item (with its answers) by pk, for rows that do not carry theirs."""
    items: dict[int, dict[str, int]] = {}
    out: dict[int, Assessment] = {}
    for i, (row, j) in enumerate(zip(rows, parsed, strict=True)):
        tel = j.provenance.telemetry if j is not None else None
        if tel is None:
            continue
        words = None
        if tel.active_ms is not None:
            if row.item_pk not in items:
                loaded = item_of(row.item_pk) if item_of is not None else row.item
                assert isinstance(loaded, ItemRow)
                item = repo.item_from_row(loaded)
                items[row.item_pk] = {c.key: word_length(c.as_text()) for c in item.candidates}
            lengths = items[row.item_pk]
            words = sum(lengths.get(c, 0) for c in j.candidate_ids())
        found = assess(j, words, settings)
        if found.flags:
            out[i] = found
    return out


def telemetry_decisions(
    session: Session, project_pk: int, judgment_pks: list[int] | None = None
) -> dict[int, dict[str, Any]]:
    """Judgment pk -> a reviewer's decision on its telemetry flags (``kept`` / ``excluded``),
    with who, when and the note; the latest decision of a judgment wins. ``judgment_pks``: only
    those judgments' decisions (a page's)."""
    stmt = (
        select(ReviewRequest, User.username)
        .outerjoin(User, User.pk == ReviewRequest.reviewer_pk)
        .where(
            ReviewRequest.project_pk == project_pk,
            ReviewRequest.status.in_(TELEMETRY_DECISIONS),
        )
        .order_by(ReviewRequest.pk)
    )
    if judgment_pks is not None:
        stmt = stmt.where(ReviewRequest.judgment_pk.in_(judgment_pks))
    rows = session.execute(stmt).all()
    return {
        req.judgment_pk: {
            "decision": req.status,
            "by": username,
            "note": req.note,
            "at": req.resolved_at.isoformat() if req.resolved_at else None,
        }
        for req, username in rows
    }


def is_held_out(
    a: Assessment | None, row: JudgmentRow | ScanRow, decided: dict[int, Any]
) -> TypeGuard[Assessment]:
    """A production label its telemetry keeps out of exports, no reviewer having decided it."""
    return a is not None and a.exclude and row.review_pass == 0 and row.pk not in decided


class QueueSink(Protocol):
    """Where :func:`scan_queues` puts each entry as it is computed (item pk order): a list
    (:func:`review_queues`) or the snapshot's spool (:class:`.review_store.Spool`)."""

    def adjudication(self, entry: dict[str, Any]) -> None:
        """An item queued for adjudication (the queue is ordered afterwards)."""

    def spot(self, entry: dict[str, Any]) -> None:
        """A production judgment drawn for spot review."""

    def held_out(self, entry: dict[str, Any]) -> None:
        """A production label held out by telemetry, no reviewer having decided it."""


@dataclass
class ListSink:
    """The entries in lists, as computed."""

    queue: list[dict[str, Any]] = field(default_factory=list)
    spots: list[dict[str, Any]] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)

    def adjudication(self, entry: dict[str, Any]) -> None:
        self.queue.append(entry)

    def spot(self, entry: dict[str, Any]) -> None:
        self.spots.append(entry)

    def held_out(self, entry: dict[str, Any]) -> None:
        self.held.append(entry)


@dataclass
class Tally:
    """What :func:`scan_queues` answers beside the entries: the weak signals per rater (in the
    queue's order), the reviewer's decisions counted, the spot share, and per ``rater_key`` the
    production labels held out by telemetry whatever the item's adjudication (the dashboard's
    per-rater figure, :func:`preflab.server.snapshot.rater_activity`)."""

    weak_by_rater: list[dict[str, Any]]
    decided: int
    share: float
    held_by_rater: dict[str, int]


def adjudication_order(entry: dict[str, Any]) -> tuple[bool, int, str]:
    """The adjudication queue's order: adjudicated last, then more reasons first, then item id."""
    return (bool(entry["adjudicated"]), -len(entry["reasons"]), str(entry["item_id"]))


def review_queues(
    session: Session, project: ProjectRef | Project, *, share: float | None = None
) -> dict[str, Any]:
    """The adjudication queue (low agreement, failed gold, near-duplicate rationales, disputed
    references, labels a machine check sent back), the labels held out by telemetry waiting for
    a reviewer's decision, weak telemetry signals per rater, and the spot-review queue (a stable
    pseudo-random ``share`` of the other production judgments).

    A weak telemetry flag (one signal, such as a clean sentence typed without a deletion) does
    not queue its item: most honest labels carry one, and a queue of them hides what needs a
    reviewer. A reviewer sees weak flags where they help: per rater (a pattern over many
    labels), on the item page with their evidence, and beside the other reasons of a queued item.
    The entries are computed by :func:`scan_queues` (which the snapshot streams to its table).
    """
    sink = ListSink()
    tally = scan_queues(session, project, sink, share=share)
    sink.held.sort(key=lambda h: h["judgment_id"])
    sink.spots.sort(key=lambda s: s["judgment_id"])
    return {
        "adjudication": sorted(sink.queue, key=adjudication_order),
        "spot": sink.spots,
        "spot_share": tally.share,
        "demonstrations": pending_demonstrations(session, project),
        "telemetry": {
            "held_out": sink.held,
            "weak_by_rater": tally.weak_by_rater,
            "decided": tally.decided,
        },
    }


def scan_queues(
    session: Session,
    project: ProjectRef | Project,
    sink: QueueSink,
    *,
    share: float | None = None,
    partners: dict[int, list[int]] | None = None,
) -> Tally:
    """:func:`review_queues`' entries, each handed to ``sink`` as it is computed (items in pk
    order, ``CHUNK`` items a query: memory bounded by a chunk, not the project; the
    adjudication queue and the spot and held-out entries unsorted). ``partners``: the
    near-duplicate rationales (:func:`.review_scan.near_duplicate_partners`' answer) when the
    caller searched them already."""
    p = must_get(session, Project, project.pk)
    policy = settings_of(project.settings).policy
    share = policy.spot_review_share if share is None else share
    settings = telemetry_settings(project)
    decided = telemetry_decisions(session, project.pk)
    blind = policy.blind
    waiting = set(extra_raters.waiting_items(session, project.pk))  # Policy.adaptive_overlap
    failed_gold = set(
        session.scalars(
            select(GoldOutcome.judgment_pk).where(
                GoldOutcome.project_pk == project.pk,
                GoldOutcome.correct.is_(False),
                GoldOutcome.phase == "production",
            )
        )
    )
    references = reference_disagreements(session, project.pk)
    # labels a machine check sent back (no reviewer: ``preflab verify steps --send-back``)
    sent_back: dict[int, list[tuple[int, str]]] = defaultdict(list)  # (request pk, first line)
    for req in session.scalars(
        select(ReviewRequest)
        .where(
            ReviewRequest.project_pk == project.pk,
            ReviewRequest.status == "open",
            ReviewRequest.reviewer_pk.is_(None),
        )
        .order_by(ReviewRequest.pk)
    ):
        first = req.note.splitlines()[0] if req.note else "sent back"
        sent_back[req.judgment_pk].append((req.pk, first))
    if partners is None:
        partners = near_duplicate_partners(session, project.pk)
    held_by_rater: dict[str, int] = defaultdict(int)
    weak_by_rater: dict[str, dict[str, Any]] = {}
    first_seen: dict[str, dict[str, int]] = defaultdict(dict)  # rater -> reason -> first pk
    for chunk, rows in item_chunks(session, project.pk):
        parsed = parsed_judgments(rows)
        assessed = assessments(rows, parsed, settings, partial(item_answers, session))
        disagree = disagreement_reasons(parsed)
        for item_id in waiting & disagree.keys():
            disagree.pop(item_id)  # one more rater first (Policy.adaptive_overlap)
        per_item: dict[int, list[int]] = defaultdict(list)
        for i, r in enumerate(rows):
            per_item[r.item_pk].append(i)
        for item_pk, item_key in chunk:
            idx = per_item.get(item_pk, [])
            adjudicated = any(rows[i].review_pass == int(ReviewPass.ADJUDICATION) for i in idx)
            reasons = list(disagree.get(item_key, []))
            flagged: set[int] = set()
            for i in idx:
                row = rows[i]
                if row.pk in failed_gold:
                    reasons.append(f"failed gold (judgment {row.pk})")
                    flagged.add(row.pk)
                others = partners.get(row.pk)
                if others is not None:
                    like = f", like judgment{'s' if len(others) > 1 else ''} " + ", ".join(
                        str(o) for o in others
                    )
                    reasons.append(f"telemetry: near_duplicate_rationale (judgment {row.pk}{like})")
                    flagged.add(row.pk)
            if item_key in references:
                reasons.append(references[item_key])
            # in the order the requests were made
            sent = sorted(
                (req, rows[i].pk, first)
                for i in idx
                for req, first in sent_back.get(rows[i].pk, ())
            )
            for _req, pk, first in sent:
                reasons.append(f"{first} (judgment {pk})")
                flagged.add(pk)
            queued = item_key in disagree or bool(reasons)
            production = [i for i in idx if rows[i].review_pass == 0]
            for i in production:
                row = rows[i]
                a = assessed.get(i)
                if a is not None and a.exclude and row.pk not in decided:
                    held_by_rater[row.rater.rater_key] += 1  # the dashboard's count
                who = row.rater.rater_hash[:24] if blind else row.rater.rater_key
                per = weak_by_rater.setdefault(
                    who, {"rater": who, "labels": 0, "weak": 0, "flags": {}}
                )
                per["labels"] += 1
                if adjudicated:  # the final label replaced the raters' labels
                    continue
                if is_held_out(a, row, decided):
                    sink.held_out(
                        {
                            "judgment_id": row.pk,
                            "item_id": item_key,
                            "rater": who,
                            "flags": a.names,
                            "why": a.why,
                            "evidence": {n: e for n, e in a.flags},
                        }
                    )
                    flagged.add(row.pk)
                elif a is not None and a.weak and row.pk not in decided:
                    per["weak"] += 1
                    per["flags"][a.reason] = per["flags"].get(a.reason, 0) + 1
                    seen = first_seen[who]
                    seen[a.reason] = min(seen.get(a.reason, row.pk), row.pk)
            if queued:
                entry: dict[str, Any] = {
                    "item_id": item_key,
                    "reasons": reasons,
                    "judgments": len(production),
                    "adjudicated": adjudicated,
                }
                # weak telemetry flags as context of items queued for another reason
                for i in idx:
                    a = assessed.get(i)
                    if a is not None and a.weak and rows[i].pk not in decided:
                        entry.setdefault("evidence", []).append(
                            f"weak telemetry signals on judgment {rows[i].pk} (exported): "
                            f"{', '.join(a.names)}"
                        )
                sink.adjudication(entry)
                continue
            for i in production:
                row = rows[i]
                if row.pk not in flagged and unit_hash(p.secret, row.pk) < share:
                    sink.spot({"judgment_id": row.pk, "item_id": item_key, "kind": row.kind})
    # a rater's weak flags in the order they first occur (judgment pk order)
    for who, per in weak_by_rater.items():
        seen = first_seen[who]
        per["flags"] = dict(sorted(per["flags"].items(), key=lambda kv: seen[kv[0]]))
    weak_rows = sorted(
        (r for r in weak_by_rater.values() if r["weak"]),
        key=lambda r: (-r["weak"] / r["labels"], r["rater"]),
    )
    return Tally(weak_rows, len(decided), share, dict(held_by_rater))


def unit_hash(secret: str, pk: int) -> float:
    """A judgment's stable pseudo-random number in [0, 1) (the spot-review draw)."""
    return int(hashlib.sha256(f"{secret}:{pk}".encode()).hexdigest()[:8], 16) / 2**32


def item_review(session: Session, project: ProjectRef, item_key: str) -> dict[str, Any]:
    """Everything a reviewer sees about one item: the full item (gold and reference included),
    every counting judgment with its rater (a hash when the project is blind), rationale,
    telemetry, flags and open review requests."""
    p = must_get(session, Project, project.pk)
    blind = settings_of(project.settings).policy.blind
    row = repo.get_item(session, p, item_key)
    rows = active_judgments(session, project.pk, row.pk)
    parsed = parsed_judgments(rows)
    flags = telemetry_flags(parsed)
    assessed = assessments(rows, parsed, telemetry_settings(project))
    decided = telemetry_decisions(session, project.pk)
    gold = dict(
        session.execute(
            select(GoldOutcome.judgment_pk, GoldOutcome.correct).where(
                GoldOutcome.item_pk == row.pk
            )
        ).all()
    )
    open_reqs = {
        r.judgment_pk: r
        for r in session.scalars(
            select(ReviewRequest).where(
                ReviewRequest.project_pk == project.pk, ReviewRequest.status == "open"
            )
        )
    }
    reviewers = dict(session.execute(select(User.pk, User.username)).all())
    out = []
    for i, (j, pj) in enumerate(zip(rows, parsed)):
        req = open_reqs.get(j.pk)
        out.append(
            {
                "judgment_id": j.pk,
                "kind": j.kind,
                "body": j.body,
                "rationale": j.rationale,
                "rater": j.rater.rater_hash[:24] if blind else j.rater.rater_key,
                "review_pass": j.review_pass,
                "source": j.source,
                "telemetry": j.telemetry or {},
                "flags": list(flags.get(i, {})),
                "telemetry_assessment": _assessment_out(assessed.get(i), j, decided),
                "gold_correct": gold.get(j.pk),
                "submitted_at": j.submitted_at.isoformat() if j.submitted_at else None,
                "shown_order": j.shown_order,
                "revision_of": j.supersedes_pk,
                "sent_back": {
                    "note": req.note,
                    "by": reviewers.get(req.reviewer_pk) if req.reviewer_pk is not None else None,
                }
                if req
                else None,
                "label_rows": [r.model_dump() for r in pj.label_rows()] if pj is not None else [],
            }
        )
    item = repo.item_from_row(row)
    return {
        "item": item.model_dump(mode="json"),
        "judgments": out,
        "reasons": disagreement_reasons(parsed).get(item_key, []),
    }


def _assessment_out(
    a: Assessment | None, row: JudgmentRow, decided: dict[int, dict[str, Any]]
) -> dict[str, Any] | None:
    """A judgment's telemetry flags for the item page: each flag's evidence, whether the flags
    keep the label out of exports, why, and a reviewer's decision."""
    if a is None:
        return None
    decision = decided.get(row.pk)
    return {
        "flags": {n: e for n, e in a.flags},
        "strong": a.exclude,
        "held_out": is_held_out(a, row, decided),
        "why": a.why,
        "decision": decision,
    }


def decide_telemetry(
    db: Database,
    project: ProjectRef,
    reviewer: audit.Who,
    judgment_pk: int,
    decision: str,
    note: str,
) -> dict[str, Any]:
    """A reviewer's decision on a label its telemetry flagged (issue 28). ``keep``: the label is
    exported whatever its flags (the export counts it in ``gates.telemetry.kept_by_reviewer``)
    and leaves the review lists; ``exclude`` (a note is required): the label is excluded, with
    the reason, like a suspended rater's (its item goes back to the pool when it needs another
    label). Recorded as a ``review_requests`` row (status ``kept`` / ``excluded``) and an audit
    event; a later decision replaces an earlier one."""
    if decision not in ("keep", "exclude"):
        raise ServiceError(422, f"decision must be 'keep' or 'exclude', not {decision!r}")
    if decision == "exclude" and not note.strip():
        raise ServiceError(
            422,
            "an exclusion needs a note saying why",
            [{"loc": ["body", "note"], "msg": "required to exclude", "type": "value_error"}],
        )
    with db.writing() as s:
        row = s.get(JudgmentRow, judgment_pk)
        if row is None or row.project_pk != project.pk:
            raise ServiceError(404, f"no judgment {judgment_pk} in this project")
        p = must_get(s, Project, project.pk)
        parsed = parsed_judgments([row])
        found = assessments([row], parsed, telemetry_settings(p)).get(0)
        if found is None:
            raise ServiceError(409, f"judgment {judgment_pk} has no telemetry flag to decide")
        if row.excluded:
            raise ServiceError(409, f"judgment {judgment_pk} is excluded already")
        status = TELEMETRY_KEPT if decision == "keep" else TELEMETRY_EXCLUDED
        now = utcnow()
        s.add(
            ReviewRequest(
                project_pk=p.pk,
                judgment_pk=row.pk,
                reviewer_pk=reviewer.user_pk,
                note=note.strip(),
                status=status,
                resolved_at=now,
            )
        )
        if status == TELEMETRY_EXCLUDED:
            # the database takes an excluded production label off its item's count
            # (store.triggers); lock the pool row first, as a suspension does
            s.execute(
                select(PoolEntry.pk).where(PoolEntry.item_pk == row.item_pk).with_for_update()
            ).all()
            row.excluded = True
            row.exclusion_reason = (
                f"reviewer {reviewer.username} excluded it on telemetry ({found.why}): "
                f"{note.strip()}"
            )
        s.flush()
        audit.record(
            s,
            reviewer,
            f"judgment.telemetry_{'kept' if status == TELEMETRY_KEPT else 'excluded'}",
            audit.target(p.name, judgment=row.pk),
            {"flags": found.names, "strong": found.exclude, "note": note.strip()},
        )
        return {
            "judgment_id": row.pk,
            "decision": status,
            "flags": found.names,
            "why": found.why,
            "by": reviewer.username,
            "at": now.isoformat(),
        }


def adjudicate(
    db: Database,
    project: ProjectRef,
    reviewer: audit.Who,
    item_key: str,
    judgment: dict[str, Any],
    note: str,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Record the final label of an item (review pass 2) with the reviewer's note.

    The judgment is validated like a rater's (kind, candidates, rubric); the note is its
    rationale. Exports take the adjudicated label over the production labels."""
    if not note.strip():
        raise ServiceError(
            422,
            "an adjudication needs a note",
            [{"loc": ["body", "note"], "msg": "required", "type": "value_error"}],
        )
    with db.writing() as s:
        p = must_get(s, Project, project.pk)
        item_row = repo.get_item(s, p, item_key)
        data = {**judgment, "rationale": note}
        parsed = build_judgment(
            s,
            p,
            item_row,
            reviewer.username,
            data,
            shown_order=None,
            started_at=None,
            idempotency_key=idempotency_key,
            telemetry=None,
        )
        parsed.provenance.review_pass = ReviewPass.ADJUDICATION
        row, created = repo.add_judgment(s, p, parsed, item_row=item_row)
        rater = must_get(s, Rater, row.rater_pk)
        if rater.user_pk is None:
            rater.user_pk = reviewer.user_pk
        if created:  # a retry with the same key returns the first result and is no new event
            where = audit.target(p.name, item=item_key)
            audit.record(s, reviewer, "item.adjudicated", where, {"judgment_id": row.pk})
        return {
            "judgment_id": row.pk,
            "item_id": item_key,
            "kind": row.kind,
            "review_pass": row.review_pass,
            "created": created,
        }


def reference_disagreements(session: Session, project_pk: int) -> dict[str, str]:
    """item id -> why its reference waits for adjudication: two experts wrote it independently
    (``metadata.reference_provenance.require_two``) and their answers disagree. The project's
    items streamed (``yield_per``: a buffered result held every item's metadata at once, ~13 MB
    a 100k-judgment project, O(project) in the snapshot's queues' pass)."""
    out: dict[str, str] = {}
    rows = session.execute(
        select(ItemRow.item_key, ItemRow.meta, ItemRow.reference)
        .where(ItemRow.project_pk == project_pk)
        .execution_options(yield_per=2000)
    )
    for item_key, meta, reference in rows:
        raw = (meta or {}).get("reference_provenance")
        if raw is None or reference_status(meta, reference) != "disagree":
            continue
        first, second = (a.get("answer") for a in raw.get("authors", [])[:2])
        out[item_key] = (
            f"references disagree: {str(first)[:60]!r} vs {str(second)[:60]!r} "
            "(two experts; adjudicate the reference)"
        )
    return out


def adjudicate_reference(
    db: Database,
    project: ProjectRef,
    reviewer: audit.Who,
    item_key: str,
    answer: str,
    note: str,
) -> dict[str, Any]:
    """Set the reference two experts disagreed on: the reviewer (neither author) is recorded as
    its adjudicator, the item's ``reference`` becomes ``answer``, and the event is audited with
    the note and the answer it replaced. Re-adjudicating replaces the answer the same way."""
    with db.writing() as s:
        p = must_get(s, Project, project.pk)
        row = repo.get_item(s, p, item_key)
        raw = (row.meta or {}).get("reference_provenance")
        if raw is None or not raw.get("require_two"):
            raise ServiceError(
                409,
                f"item {item_key!r}'s reference does not require two experts: nothing to adjudicate",
            )
        state = reference_status(row.meta, row.reference)
        if state not in ("disagree", "adjudicated"):
            raise ServiceError(409, f"item {item_key!r}'s reference is {state}, not in dispute")
        updated = {**raw, "adjudicator": reviewer.username}
        try:
            ReferenceProvenance.model_validate(updated)
        except ValueError as e:  # the adjudicator is one of the authors
            raise ServiceError(403, f"cannot adjudicate this reference: {e}") from None
        before = row.reference
        row.meta = {**(row.meta or {}), "reference_provenance": updated}
        row.reference = answer
        audit.record(
            s,
            reviewer,
            "item.reference_adjudicated",
            audit.target(p.name, item=item_key),
            {"reference": answer, "replaced": before, "note": note},
        )
        return {
            "item_id": item_key,
            "reference": answer,
            "adjudicator": reviewer.username,
            "status": reference_status(row.meta, answer),
        }


def skip_summary(session: Session, project: ProjectRef) -> dict[str, Any]:
    """Skips counted per reason, and the items raters flagged (broken, harmful) with their notes."""
    rows = session.execute(
        select(ItemSkip.reason, ItemSkip.note, ItemRow.item_key, User.username)
        .join(ItemRow, ItemRow.pk == ItemSkip.item_pk)
        .join(User, User.pk == ItemSkip.user_pk)
        .where(ItemSkip.project_pk == project.pk)
        .order_by(ItemSkip.pk)
    ).all()
    per_reason = {r: 0 for r in SKIP_REASONS}
    flagged: dict[str, dict[str, Any]] = {}
    blind = settings_of(project.settings).policy.blind
    for reason, note, item_key, username in rows:
        per_reason[reason] = per_reason.get(reason, 0) + 1
        if SKIP_REASONS.get(reason, {}).get("flag"):
            entry = flagged.setdefault(
                item_key, {"item_id": item_key, "reasons": defaultdict(int), "notes": []}
            )
            entry["reasons"][reason] += 1
            if note:
                entry["notes"].append(note if blind else f"{username}: {note}")
    return {
        "total": len(rows),
        "per_reason": per_reason,
        "labels": {k: v["label"] for k, v in SKIP_REASONS.items()},
        "flagged": [{**e, "reasons": dict(e["reasons"])} for e in flagged.values()],
    }


# -- demonstrations: a reviewer accepts or rejects them -------------------------------------------------

DEMO_DECISIONS = ("accepted", "rejected")


def pending_demonstrations(session: Session, project: ProjectRef | Project) -> list[dict[str, Any]]:
    """Demonstrations waiting for a reviewer's decision, oldest first: the counting judgments
    (:func:`active_judgments`' rule) of kind ``demonstration`` in SQL, their item id and rater
    joined, the status read from the body of those rows only."""
    blind = settings_of(project.settings).policy.blind
    rows = session.execute(
        select(
            JudgmentRow.pk,
            JudgmentRow.body,
            JudgmentRow.submitted_at,
            ItemRow.item_key,
            Rater.rater_key,
            Rater.rater_hash,
        )
        .join(ItemRow, ItemRow.pk == JudgmentRow.item_pk)
        .join(Rater, Rater.pk == JudgmentRow.rater_pk)
        .where(
            JudgmentRow.project_pk == project.pk,
            JudgmentRow.kind == "demonstration",
            JudgmentRow.excluded.is_(False),
            not_revised(),
        )
        .order_by(JudgmentRow.pk)
    )
    return [
        {
            "judgment_id": pk,
            "item_id": item_key,
            "rater": rater_hash[:24] if blind else rater_key,
            "submitted_at": submitted_at.isoformat() if submitted_at else None,
        }
        for pk, body, submitted_at, item_key, rater_key, rater_hash in rows
        if (body or {}).get("status", "pending") == "pending"
    ]


def review_demonstration(
    db: Database,
    project: ProjectRef,
    reviewer: audit.Who,
    judgment_pk: int,
    decision: str,
    note: str,
) -> dict[str, Any]:
    """:func:`decide_demonstration` in one write transaction of the server's database."""
    with db.writing() as s:
        return decide_demonstration(
            s, project.pk, reviewer.username, judgment_pk, decision, note, actor=reviewer
        )


def decide_demonstration(
    session: Session,
    project_pk: int,
    reviewer: str,
    judgment_pk: int,
    decision: str,
    note: str,
    *,
    actor: audit.Actor | None = None,
) -> dict[str, Any]:
    """Accept or reject a demonstration: a revision of it with the status, the reviewer, the time
    and the note (the author's text unchanged, the original row kept). Only accepted ones reach
    ``trl-sft``; its manifest counts the pending and rejected ones it left out. The web UI, the
    API and ``preflab review-demo`` all call this."""
    if decision not in DEMO_DECISIONS:
        raise ServiceError(422, f"decision must be one of {list(DEMO_DECISIONS)}, not {decision!r}")
    if decision == "rejected" and not note.strip():
        raise ServiceError(
            422,
            "a rejection needs a note saying why",
            [{"loc": ["body", "note"], "msg": "required to reject", "type": "value_error"}],
        )
    old = session.get(JudgmentRow, judgment_pk)
    if old is None or old.project_pk != project_pk or old.kind != "demonstration":
        raise ServiceError(404, f"no demonstration {judgment_pk} in this project")
    newer = session.scalar(select(JudgmentRow.pk).where(JudgmentRow.supersedes_pk == judgment_pk))
    if newer is not None:
        raise ServiceError(
            409,
            f"demonstration {judgment_pk} was already reviewed or revised: "
            f"review judgment {newer} instead",
        )
    demo = repo.judgment_from_row(old)
    assert isinstance(demo, DemonstrationJudgment)  # its row's kind is "demonstration"
    reviewed_at = utcnow()
    reviewed = demo.model_copy(
        update={
            "status": decision,
            "reviewed_by": reviewer,
            "reviewed_at": reviewed_at,
            "review_note": note.strip() or None,
            # the key belongs to the author's submission; the decision is a new row
            "provenance": demo.provenance.model_copy(update={"idempotency_key": None}),
        }
    )
    item_row = must_get(session, ItemRow, old.item_pk)
    project = must_get(session, Project, project_pk)
    row = repo.judgment_row_from_judgment(
        project, item_row, must_get(session, Rater, old.rater_pk), reviewed
    )
    row.supersedes_pk = old.pk
    session.add(row)
    session.flush()
    audit.record(
        session,
        actor if actor is not None else reviewer,
        f"demonstration.{decision}",
        audit.target(project.name, judgment=old.pk),
        {"reviewer": reviewer, "note": reviewed.review_note, "revision": row.pk},
    )
    return {
        "judgment_id": row.pk,
        "revision_of": old.pk,
        "item_id": item_row.item_key,
        "status": decision,
        "reviewed_by": reviewer,
        "reviewed_at": reviewed_at.isoformat(),
        "note": reviewed.review_note,
    }


# -- the reviewer's lists: judgments, raters, quality ---------------------------------------------


def list_judgments(
    session: Session, project: ProjectRef, *, after: int, limit: int, item_key: str | None
) -> list[dict[str, Any]]:
    """Judgments with provenance, oldest first; raters appear as hashes when the project is blind."""
    blind = settings_of(project.settings).policy.blind
    stmt = (
        select(JudgmentRow, ItemRow.item_key, Rater.rater_key, Rater.rater_hash)
        .join(ItemRow, ItemRow.pk == JudgmentRow.item_pk)
        .join(Rater, Rater.pk == JudgmentRow.rater_pk)
        .where(JudgmentRow.project_pk == project.pk, JudgmentRow.pk > after)
    )
    if item_key is not None:
        stmt = stmt.where(ItemRow.item_key == item_key)
    rows = session.execute(stmt.order_by(JudgmentRow.pk).limit(limit)).all()
    return [
        {
            "judgment_id": j.pk,
            "item_id": key,
            "kind": j.kind,
            "body": j.body,
            "rationale": j.rationale,
            "rater": rhash if blind else rkey,
            "review_pass": j.review_pass,
            "source": j.source,
            "telemetry": j.telemetry,
            "excluded": j.excluded,
            "exclusion_reason": j.exclusion_reason,
            "supersedes": j.supersedes_pk,
            "submitted_at": j.submitted_at.isoformat() if j.submitted_at else None,
        }
        for j, key, rkey, rhash in rows
    ]


def rater_figures(session: Session, project: ProjectRef) -> list[dict[str, Any]]:
    """Each rater's status, submitted count and gold accuracy per phase with its Wilson interval
    at the project's qualification confidence (three queries, each O(raters) rows)."""
    q = settings_of(project.settings).policy.qualification
    rows = session.execute(
        select(RaterStatus, User.username)
        .join(User, User.pk == RaterStatus.user_pk)
        .where(RaterStatus.project_pk == project.pk)
        .order_by(User.username)
    ).all()
    gold: dict[tuple[int, str], tuple[int, int]] = {}
    for user_pk, phase, n, correct in session.execute(
        select(
            GoldOutcome.user_pk,
            GoldOutcome.phase,
            func.count(),
            func.sum(case((GoldOutcome.correct.is_(True), 1), else_=0)),
        )
        .where(GoldOutcome.project_pk == project.pk)
        .group_by(GoldOutcome.user_pk, GoldOutcome.phase)
    ):
        gold[(user_pk, phase)] = (int(n), int(correct or 0))
    submitted = dict(
        session.execute(
            select(Assignment.user_pk, func.count())
            .where(Assignment.project_pk == project.pk, Assignment.status == "submitted")
            .group_by(Assignment.user_pk)
        ).all()
    )
    out = []
    for st, username in rows:
        figures = {}
        for phase in ("qualification", "production"):
            n, correct = gold.get((st.user_pk, phase), (0, 0))
            lo, hi = wilson_interval(correct, n, q.confidence)
            figures[phase] = {
                "n": n,
                "correct": correct,
                "accuracy": (correct / n) if n else None,
                "wilson": [lo, hi],
            }
        out.append(
            {
                "username": username,
                "status": st.status,
                "reason": st.reason,
                "evidence": st.evidence,
                "submitted": int(submitted.get(st.user_pk, 0)),
                "gold": figures,
            }
        )
    return out


def quality_summary(
    session: Session, project: ProjectRef, *, counts: bool = True
) -> dict[str, Any]:
    """Counts, pool progress, excluded judgments, expired leases and every rater's figures.
    ``counts=False`` leaves out the two that read every judgment (the counts per kind, rater,
    batch and source, and the excluded judgments): the dashboard takes them from its snapshot."""
    p = must_get(session, Project, project.pk)
    pool = session.execute(
        select(PoolEntry.role, func.count(), func.sum(PoolEntry.target), func.sum(PoolEntry.filled))
        .where(PoolEntry.project_pk == p.pk)
        .group_by(PoolEntry.role)
    ).all()
    excluded = (
        session.scalar(
            select(func.count())
            .select_from(JudgmentRow)
            .where(JudgmentRow.project_pk == p.pk, JudgmentRow.excluded.is_(True))
        )
        if counts
        else None
    )
    return {
        "counts": repo.project_counts(session, p) if counts else None,
        "excluded_judgments": excluded,
        "pool": {
            r: {"items": n, "target": int(t or 0), "filled": int(f or 0)} for r, n, t, f in pool
        },
        "expired_leases": expired_leases(session, p.pk),
        "raters": rater_figures(session, project),
    }
