"""Review and administration services the web UI needs beyond the core API, with their REST
routes (same ``/api/v1`` prefix, same guards): the adjudication and spot-review queues, the
adjudicated (review pass 2) final label, file imports with line-by-line problems, rubric files.

The pages (:mod:`preflab.server.pages`) call these functions; so do the routes below; neither
holds logic of its own. Statistics come from :mod:`preflab.quality` when it is installed (the
quality branch); until then the small fallbacks marked ``QUALITY HOOK`` follow its defaults.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import yaml
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import exists, select
from sqlalchemy.orm import Session, aliased, selectinload

from ..schema import Item, ReviewPass, Rubric
from ..store import repo
from ..store.models import ItemRow, JudgmentRow, Project, Rater, utcnow
from ..store.server_models import (
    SKIP_REASONS,
    Assignment,
    Credential,
    GoldOutcome,
    ItemSkip,
    PoolDomain,
    PoolEntry,
    ReviewRequest,
    User,
)
from . import projects
from .api import DbId
from .assign import _domain_filter, release_lease
from .auth import verified_domains
from .judging import JudgingError, build_judgment
from .permissions import Ctx, ProjectRef, guard
from .policy import settings_of
from .wire import WireModel, jsonl_problems

router = APIRouter(prefix="/api/v1")


def _ok(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


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
        .options(selectinload(JudgmentRow.rater), selectinload(JudgmentRow.item))
        .order_by(JudgmentRow.pk)
    )
    if item_pk is not None:
        stmt = stmt.where(JudgmentRow.item_pk == item_pk)
    return list(session.scalars(stmt))


def _parsed(rows: list[JudgmentRow]) -> list[Any]:
    out = []
    for r in rows:
        try:
            out.append(repo.judgment_from_row(r))
        except ValidationError:  # pragma: no cover - stored rows were validated on the way in
            out.append(None)
    return out


def disagreement_reasons(judgments: list[Any]) -> dict[str, list[str]]:
    """item id -> reasons its production labels disagree (pass 0 only)."""
    production = [j for j in judgments if j is not None and int(j.provenance.review_pass) == 0]
    try:  # QUALITY HOOK: the quality engine's routing, when installed
        from ..quality import LabelTable, route_for_adjudication  # type: ignore[attr-defined]

        table = LabelTable.from_judgments(production)
        out: dict[str, list[str]] = defaultdict(list)
        for row in route_for_adjudication(table):
            out[str(row["item_id"])] += [f"low agreement: {r}" for r in row["reasons"]]
        return dict(out)
    except ImportError:
        pass
    # fallback until preflab.quality is merged: any split vote on a unit and dimension
    values: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
    for j in production:
        for row in j.label_rows():
            if row.dimension in ("strength",):
                continue
            values[(row.item_id, row.unit, row.dimension)][row.rater] = row.value
    out = defaultdict(list)
    for (item_id, _unit, dim), by_rater in sorted(values.items()):
        if len(by_rater) >= 2 and len(set(by_rater.values())) > 1:
            reason = f"low agreement: raters disagree on {dim}"
            if reason not in out[item_id]:
                out[item_id].append(reason)
    return dict(out)


def telemetry_flags(judgments: list[Any]) -> dict[int, dict[str, list[int]]]:
    """Index in ``judgments`` -> {flag: indices of the other judgments it pairs with} (evidence for
    a reviewer, not verdicts). A judgment whose rationale nearly duplicates five others has the
    flag once, naming the five; pair flags are never counted per pair."""
    present = [(i, j) for i, j in enumerate(judgments) if j is not None]
    out: dict[int, dict[str, list[int]]] = defaultdict(dict)
    try:  # QUALITY HOOK
        from ..quality import telemetry_flags as q_flags  # type: ignore[attr-defined]
    except ImportError:
        q_flags = None
    if q_flags is not None:
        for f in q_flags([j for _, j in present]):
            others = out[present[f["index"]][0]].setdefault(f["flag"], [])
            other = (f.get("evidence") or {}).get("other_index")
            if other is not None and present[other][0] not in others:
                others.append(present[other][0])
        return dict(out)
    # fallback with the quality engine's default thresholds (TelemetrySettings)
    for i, j in present:
        tel = j.provenance.telemetry
        if tel is None:
            continue
        pasted, typed = tel.pasted_chars or 0, tel.typed_chars or 0
        if pasted + typed > 0 and pasted / (pasted + typed) >= 0.8:
            out[i]["paste_dominant"] = []
        if tel.iki_cv is not None and typed >= 20 and tel.iki_cv < 0.15:
            out[i]["machine_typing"] = []
    return dict(out)


def review_queues(
    session: Session, project: ProjectRef, *, share: float | None = None
) -> dict[str, Any]:
    """The adjudication queue (low agreement, failed gold, telemetry flags) and the spot-review
    queue (a stable pseudo-random ``share`` of the other production judgments)."""
    p = session.get(Project, project.pk)
    policy = settings_of(project.settings).policy
    share = policy.spot_review_share if share is None else share
    rows = active_judgments(session, project.pk)
    parsed = _parsed(rows)
    flags = telemetry_flags(parsed)
    disagree = disagreement_reasons(parsed)
    failed_gold = set(
        session.scalars(
            select(GoldOutcome.judgment_pk).where(
                GoldOutcome.project_pk == project.pk,
                GoldOutcome.correct.is_(False),
                GoldOutcome.phase == "production",
            )
        )
    )
    adjudicated = {r.item.item_key for r in rows if r.review_pass == int(ReviewPass.ADJUDICATION)}
    queue: dict[str, dict[str, Any]] = {}

    def entry(item_id: str) -> dict[str, Any]:
        return queue.setdefault(
            item_id,
            {
                "item_id": item_id,
                "reasons": [],
                "judgments": 0,
                "adjudicated": item_id in adjudicated,
            },
        )

    for item_id, reasons in disagree.items():
        entry(item_id)["reasons"] += reasons
    flagged_pks = set()
    for i, row in enumerate(rows):
        key = row.item.item_key
        if row.pk in failed_gold:
            entry(key)["reasons"].append(f"failed gold (judgment {row.pk})")
            flagged_pks.add(row.pk)
        for f, others in flags.get(i, {}).items():
            like = (
                f", like judgment{'s' if len(others) > 1 else ''} {', '.join(str(rows[o].pk) for o in others)}"
                if others
                else ""
            )
            entry(key)["reasons"].append(f"telemetry: {f} (judgment {row.pk}{like})")
            flagged_pks.add(row.pk)
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        if r.review_pass == 0:
            counts[r.item.item_key] += 1
    for item_id, e in queue.items():
        e["judgments"] = counts.get(item_id, 0)
    ordered = sorted(
        queue.values(), key=lambda e: (e["adjudicated"], -len(e["reasons"]), e["item_id"])
    )
    spot = []
    for r in rows:
        if r.review_pass != 0 or r.pk in flagged_pks or r.item.item_key in queue:
            continue
        if _unit_hash(p.secret, r.pk) < share:
            spot.append({"judgment_id": r.pk, "item_id": r.item.item_key, "kind": r.kind})
    return {
        "adjudication": ordered,
        "spot": spot,
        "spot_share": share,
        "demonstrations": pending_demonstrations(session, project),
    }


def _unit_hash(secret: str, pk: int) -> float:
    return int(hashlib.sha256(f"{secret}:{pk}".encode()).hexdigest()[:8], 16) / 2**32


def item_review(session: Session, project: ProjectRef, item_key: str) -> dict[str, Any]:
    """Everything a reviewer sees about one item: the full item (gold and reference included),
    every counting judgment with its rater (a hash when the project is blind), rationale,
    telemetry, flags and open review requests."""
    p = session.get(Project, project.pk)
    blind = settings_of(project.settings).policy.blind
    row = repo.get_item(session, p, item_key)
    rows = active_judgments(session, project.pk, row.pk)
    parsed = _parsed(rows)
    flags = telemetry_flags(parsed)
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
                "gold_correct": gold.get(j.pk),
                "submitted_at": j.submitted_at.isoformat() if j.submitted_at else None,
                "shown_order": j.shown_order,
                "revision_of": j.supersedes_pk,
                "sent_back": {"note": req.note, "by": reviewers.get(req.reviewer_pk)}
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


def adjudicate(
    db,
    project: ProjectRef,
    reviewer_pk: int,
    reviewer: str,
    item_key: str,  # noqa: ANN001
    judgment: dict[str, Any],
    note: str,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """Record the final label of an item (review pass 2) with the reviewer's note.

    The judgment is validated like a rater's (kind, candidates, rubric); the note is its
    rationale. Exports take the adjudicated label over the production labels."""
    if not note.strip():
        raise JudgingError(
            422,
            "an adjudication needs a note",
            [{"loc": ["body", "note"], "msg": "required", "type": "value_error"}],
        )
    with db.writing() as s:
        p = s.get(Project, project.pk)
        item_row = repo.get_item(s, p, item_key)
        data = {**judgment, "rationale": note}
        parsed = build_judgment(
            s,
            p,
            item_row,
            reviewer,
            data,
            shown_order=None,
            started_at=None,
            idempotency_key=idempotency_key,
            telemetry=None,
        )
        parsed.provenance.review_pass = ReviewPass.ADJUDICATION
        row, created = repo.add_judgment(s, p, parsed, item_row=item_row)
        rater = s.get(Rater, row.rater_pk)
        if rater.user_pk is None:
            rater.user_pk = reviewer_pk
        return {
            "judgment_id": row.pk,
            "item_id": item_key,
            "kind": row.kind,
            "review_pass": row.review_pass,
            "created": created,
        }


# -- the data browser ---------------------------------------------------------------------------------


def browse_items(
    session: Session,
    project: ProjectRef,
    *,
    kind: str | None = None,
    rater: str | None = None,
    domain: str | None = None,
    flagged: bool = False,
    disagreement: bool = False,
    q: str | None = None,
    offset: int = 0,
    limit: int = 50,
) -> dict[str, Any]:
    """Items with their counting labels, filtered by kind, rater, domain, telemetry flags,
    disagreement (the adjudication rule) and a text search over prompt and answers."""
    from ..schema import prompt_as_text

    rows = active_judgments(session, project.pk)
    parsed = _parsed(rows)
    flags = telemetry_flags(parsed)
    disagree = disagreement_reasons(parsed)
    blind = settings_of(project.settings).policy.blind
    per_item: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        per_item[r.item_pk].append(i)
    stmt = (
        select(ItemRow)
        .where(ItemRow.project_pk == project.pk)
        .options(selectinload(ItemRow.candidates))
        .order_by(ItemRow.pk)
    )
    needle = (q or "").strip().lower()
    out = []
    for item in session.scalars(stmt):
        idx = per_item.get(item.pk, [])
        who = {i: rows[i].rater.rater_hash[:24] if blind else rows[i].rater.rater_key for i in idx}
        if kind and not any(rows[i].kind == kind for i in idx):
            continue
        if rater and rater not in who.values():
            continue
        if domain and domain not in (item.domains or []):
            continue
        if flagged and not any(flags.get(i) for i in idx):
            continue
        if disagreement and item.item_key not in disagree:
            continue
        if needle:
            text = (
                prompt_as_text(item.prompt) + " " + " ".join(c.text or "" for c in item.candidates)
            )
            if needle not in text.lower() and needle not in item.item_key.lower():
                continue
        out.append(
            {
                "item_id": item.item_key,
                "domains": item.domains or [],
                "answers": len(item.candidates),
                "labels": len(idx),
                "kinds": sorted({rows[i].kind for i in idx}),
                "raters": sorted(set(who.values())),
                "flags": sorted({f for i in idx for f in flags.get(i, {})}),
                "disagreement": disagree.get(item.item_key, []),
            }
        )
    return {"total": len(out), "offset": offset, "items": out[offset : offset + limit]}


# -- why a rater gets no item ----------------------------------------------------------------------


def withheld_by_domain(session: Session, project: ProjectRef, user_pk: int) -> dict[str, int]:
    """Open production items this rater has not seen that the assignment engine's own domain
    rule (:func:`preflab.server.assign._domain_filter`) withholds: missing domain -> items."""
    policy = settings_of(project.settings).policy
    mine = verified_domains(session, user_pk)
    seen = exists().where(Assignment.item_pk == PoolEntry.item_pk, Assignment.user_pk == user_pk)
    needs = aliased(PoolDomain)  # the rule's own subqueries correlate on PoolDomain itself
    rows = session.execute(
        select(PoolEntry.item_pk, needs.domain)
        .join(needs, needs.item_pk == PoolEntry.item_pk)
        .where(
            PoolEntry.project_pk == project.pk,
            PoolEntry.role == "production",
            PoolEntry.filled < PoolEntry.target,
            ~seen,
            ~_domain_filter(mine, policy.domain_match),
        )
    ).all()
    items: dict[str, set[int]] = defaultdict(set)
    for item_pk, domain in rows:
        if domain not in mine:
            items[domain].add(item_pk)
    return {d: len(pks) for d, pks in sorted(items.items())}


def no_items_detail(session: Session, project: ProjectRef, user_pk: int) -> str | None:
    """ "4 items need a verified `code` credential: claim it on your Account page", or ``None``
    when no item is withheld for a credential."""
    withheld = withheld_by_domain(session, project, user_pk)
    if not withheld:
        return None
    claimed = set(
        session.scalars(
            select(Credential.domain).where(
                Credential.user_pk == user_pk, Credential.verified.is_(False)
            )
        )
    )
    parts = []
    for domain, n in withheld.items():
        what = f"{n} item{'s' if n != 1 else ''} need{'s' if n == 1 else ''} a verified `{domain}` credential"
        how = (
            "your claim waits for an admin to verify it"
            if domain in claimed
            else "claim it on your Account page (/account)"
        )
        parts.append(f"{what}: {how}")
    return "No more items for you right now. " + "; ".join(parts) + "."


# -- skip / flag an item ----------------------------------------------------------------------------


def skip_task(
    db, project: ProjectRef, user_pk: int, lease_id: str, reason: str, note: str
) -> dict[str, Any]:  # noqa: ANN001
    """The rater gives the task back with a reason: the lease is released (the item goes to
    another rater; never again to this one) and the reason recorded, in one transaction."""
    if reason not in SKIP_REASONS:
        raise JudgingError(
            422,
            f"reason must be one of {list(SKIP_REASONS)}, not {reason!r}",
            [{"loc": ["body", "reason"], "msg": "unknown reason", "type": "value_error"}],
        )
    if reason == "other" and not note.strip():
        raise JudgingError(
            422,
            "say why in the note when the reason is 'other'",
            [
                {
                    "loc": ["body", "note"],
                    "msg": "required with reason 'other'",
                    "type": "value_error",
                }
            ],
        )
    with db.writing() as s:
        lease = release_lease(s, project, user_pk, lease_id)
        if lease is None or lease.status != "released" or lease.judgment_pk is not None:
            raise JudgingError(
                404 if lease is None else 409,
                "no live task of yours with this id"
                if lease is None
                else f"this task is {lease.status}; only a task you hold can be skipped",
            )
        s.add(
            ItemSkip(
                project_pk=project.pk,
                item_pk=lease.item_pk,
                user_pk=user_pk,
                reason=reason,
                note=note.strip(),
            )
        )
        return {"skipped": True, "reason": reason, "flag": SKIP_REASONS[reason]["flag"]}


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


def pending_demonstrations(session: Session, project: ProjectRef) -> list[dict[str, Any]]:
    """Demonstrations waiting for a reviewer's decision, oldest first."""
    blind = settings_of(project.settings).policy.blind
    return [
        {
            "judgment_id": r.pk,
            "item_id": r.item.item_key,
            "rater": r.rater.rater_hash[:24] if blind else r.rater.rater_key,
            "submitted_at": r.submitted_at.isoformat() if r.submitted_at else None,
        }
        for r in active_judgments(session, project.pk)
        if r.kind == "demonstration" and (r.body or {}).get("status", "pending") == "pending"
    ]


def review_demonstration(
    db,
    project: ProjectRef,
    reviewer: str,
    judgment_pk: int,
    decision: str,  # noqa: ANN001
    note: str,
) -> dict[str, Any]:
    """:func:`decide_demonstration` in one write transaction of the server's database."""
    with db.writing() as s:
        return decide_demonstration(s, project.pk, reviewer, judgment_pk, decision, note)


def decide_demonstration(
    session: Session, project_pk: int, reviewer: str, judgment_pk: int, decision: str, note: str
) -> dict[str, Any]:
    """Accept or reject a demonstration: a revision of it with the status, the reviewer, the time
    and the note (the author's text unchanged, the original row kept). Only accepted ones reach
    ``trl-sft``; its manifest counts the pending and rejected ones it left out. The web UI, the
    API and ``preflab review-demo`` all call this."""
    if decision not in DEMO_DECISIONS:
        raise JudgingError(422, f"decision must be one of {list(DEMO_DECISIONS)}, not {decision!r}")
    if decision == "rejected" and not note.strip():
        raise JudgingError(
            422,
            "a rejection needs a note saying why",
            [{"loc": ["body", "note"], "msg": "required to reject", "type": "value_error"}],
        )
    old = session.get(JudgmentRow, judgment_pk)
    if old is None or old.project_pk != project_pk or old.kind != "demonstration":
        raise JudgingError(404, f"no demonstration {judgment_pk} in this project")
    newer = session.scalar(select(JudgmentRow.pk).where(JudgmentRow.supersedes_pk == judgment_pk))
    if newer is not None:
        raise JudgingError(
            409,
            f"demonstration {judgment_pk} was already reviewed or revised: "
            f"review judgment {newer} instead",
        )
    demo = repo.judgment_from_row(old)
    reviewed = demo.model_copy(
        update={
            "status": decision,
            "reviewed_by": reviewer,
            "reviewed_at": utcnow(),
            "review_note": note.strip() or None,
            # the key belongs to the author's submission; the decision is a new row
            "provenance": demo.provenance.model_copy(update={"idempotency_key": None}),
        }
    )
    item_row = session.get(ItemRow, old.item_pk)
    row = repo.judgment_row_from_judgment(
        session.get(Project, project_pk), item_row, session.get(Rater, old.rater_pk), reviewed
    )
    row.supersedes_pk = old.pk
    session.add(row)
    session.flush()
    return {
        "judgment_id": row.pk,
        "revision_of": old.pk,
        "item_id": item_row.item_key,
        "status": decision,
        "reviewed_by": reviewer,
        "reviewed_at": reviewed.reviewed_at.isoformat(),
        "note": reviewed.review_note,
    }


# -- files: items and rubrics ------------------------------------------------------------------------


def _problem(file: str, line: int | None, field: str, reason: str) -> dict[str, Any]:
    where = file if line is None else f"{file}:{line}"
    return {
        "file": file,
        "line": line,
        "field": field,
        "reason": reason,
        "text": f"{where}: {field}: {reason}",
    }


def _validate_lines(name: str, raw: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fallback reader (JSONL or a JSON array) with ``file:line: field: reason`` problems."""
    text = raw.decode("utf-8", errors="replace")
    records: list[tuple[int, Any]] = []
    problems: list[dict[str, Any]] = []
    if text.lstrip().startswith("["):
        try:
            records = [(i + 1, r) for i, r in enumerate(json.loads(text))]
        except json.JSONDecodeError as exc:
            return [], [_problem(name, exc.lineno, "json", exc.msg)]
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                problems.append(
                    _problem(name, n, "json", f"not valid JSON: {exc.msg} at column {exc.colno}")
                )
    items, seen = [], {}
    for n, rec in records:
        if not isinstance(rec, dict):
            problems.append(_problem(name, n, "record", "expected a JSON object"))
            continue
        try:
            item = Item.model_validate(rec)
        except ValidationError as exc:
            for e in exc.errors(include_url=False, include_input=False):
                field = ".".join(str(p) for p in e["loc"]) or "record"
                problems.append(_problem(name, n, field, e["msg"]))
            continue
        if item.id in seen:
            problems.append(
                _problem(name, n, "id", f"item {item.id!r} already on line {seen[item.id]}")
            )
            continue
        seen[item.id] = n
        items.append(rec)
    return items, problems


def import_file(db, project_name: str, filename: str, raw: bytes) -> dict[str, Any]:  # noqa: ANN001
    """Import one uploaded file, all or nothing. ``{"ok": False, "problems": [...]}`` lists every
    bad line as ``file:line: field: reason``; nothing is imported then."""
    name = Path(filename or "upload.jsonl").name or "upload.jsonl"
    if Path(name).suffix.lower() in (
        ".jsonl",
        ".json",
        ".ndjson",
    ):  # the wire rules (preflab.server.wire)
        bad = [_problem(name, n, field, reason) for n, field, reason in jsonl_problems(raw)]
        if bad:
            return {"ok": False, "total": len(bad), "problems": bad}
    try:  # the importer branch: every record format, streamed, idempotent
        from ..io.importer import ImportFailed, import_files  # type: ignore[attr-defined]
    except ImportError:
        import_files = None
    if import_files is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_bytes(raw)
            try:
                report = import_files(db.write_engine, project_name, [path])
            except ImportFailed as exc:
                return {
                    "ok": False,
                    "total": exc.total,
                    "problems": [_problem(name, p.line, p.field, p.reason) for p in exc.problems],
                }
        with db.writing() as s:
            p = repo.get_project(s, project_name)
            pooled = projects.sync_pool(s, p.pk, projects.current_settings(p).policy)
        return {
            "ok": True,
            "items_added": report.items_added,
            "items_existing": report.items_existing,
            "judgments_added": report.judgments_added,
            "already_imported": report.already_imported,
            "formats": report.formats,
            "pooled": pooled,
        }
    # IMPORTER HOOK: until preflab.io.importer is merged, items only (preflab item JSONL/JSON)
    items, problems = _validate_lines(name, raw)
    if problems:
        return {"ok": False, "total": len(problems), "problems": problems}
    if not items:
        return {"ok": False, "total": 1, "problems": [_problem(name, None, "file", "no records")]}
    summary = projects.import_items(db, project_name, items)
    return {
        "ok": True,
        "items_added": summary.get("created", 0),
        "items_existing": summary.get("unchanged", 0),
        "judgments_added": 0,
        "pooled": summary.get("pooled", 0),
    }


def parse_rubric_file(filename: str, raw: bytes) -> Rubric:
    """A rubric from an uploaded YAML or JSON file (``ValidationError`` -> 422 field by field)."""
    suffix = Path(filename or "").suffix.lower()
    try:
        data = yaml.safe_load(raw) if suffix in (".yaml", ".yml") else json.loads(raw)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise JudgingError(
            422, f"{filename}: not valid {'YAML' if suffix in ('.yaml', '.yml') else 'JSON'}: {exc}"
        ) from exc
    return Rubric.model_validate(data)


def rubric_versions(session: Session, project_pk: int) -> list[dict[str, Any]]:
    from ..store.models import RubricVersion

    rows = session.scalars(
        select(RubricVersion)
        .where(RubricVersion.project_pk == project_pk)
        .order_by(RubricVersion.rubric_key, RubricVersion.version.desc())
    )
    return [
        {
            "id": r.rubric_key,
            "version": r.version,
            "created_at": r.created_at.isoformat() if getattr(r, "created_at", None) else None,
            "dimensions": len((r.content or {}).get("dimensions", [])),
        }
        for r in rows
    ]


# -- REST routes -------------------------------------------------------------------------------------------


class AdjudicateIn(WireModel):  # the wire rules of every request body (preflab.server.wire)
    judgment: dict[str, Any]
    note: str = Field(min_length=1, max_length=5000)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


@router.get("/projects/{project}/review/queues", tags=["review"])
def get_review_queues(
    request: Request,
    project: str,
    share: float | None = Query(default=None, ge=0, le=1),
    ctx: Ctx = guard("project.review"),
) -> Response:
    """The adjudication queue and the spot-review queue."""
    with request.app.state.db.reading() as s:
        return _ok(review_queues(s, ctx.project, share=share))


@router.get("/projects/{project}/review/items/{item_id}", tags=["review"])
def get_item_review(
    request: Request, project: str, item_id: str, ctx: Ctx = guard("project.review")
) -> Response:
    with request.app.state.db.reading() as s:
        return _ok(item_review(s, ctx.project, item_id))


@router.post("/projects/{project}/items/{item_id}/adjudicate", tags=["review"], status_code=201)
def post_adjudication(
    request: Request,
    project: str,
    item_id: str,
    body: AdjudicateIn,
    ctx: Ctx = guard("project.review"),
) -> Response:
    """Record the item's final label (review pass 2) with a note."""
    out = adjudicate(
        request.app.state.db,
        ctx.project,
        ctx.user.user_pk,
        ctx.user.username,
        item_id,
        body.judgment,
        body.note,
        body.idempotency_key,
    )
    return _ok(out, 201 if out["created"] else 200)


class DemonstrationReviewIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: str = Field(pattern="^(accepted|rejected)$")
    note: str = Field(default="", max_length=5000)


@router.get("/projects/{project}/browse", tags=["review"])
def get_browse(
    request: Request,
    project: str,
    kind: str | None = Query(default=None, max_length=40),
    rater: str | None = Query(default=None, max_length=200),
    domain: str | None = Query(default=None, max_length=100),
    flagged: bool = False,
    disagreement: bool = False,
    q: str | None = Query(default=None, max_length=200),
    offset: int = Query(default=0, ge=0, le=10**9),
    limit: int = Query(default=50, ge=1, le=500),
    ctx: Ctx = guard("project.review"),
) -> Response:
    """Items and their labels, filtered (the admin's data browser)."""
    with request.app.state.db.reading() as s:
        return _ok(
            browse_items(
                s,
                ctx.project,
                kind=kind,
                rater=rater,
                domain=domain,
                flagged=flagged,
                disagreement=disagreement,
                q=q,
                offset=offset,
                limit=limit,
            )
        )


# POST .../assignments/{id}/skip: preflab.server.routes.labelling


@router.get("/projects/{project}/skips", tags=["review"])
def get_skips(request: Request, project: str, ctx: Ctx = guard("project.review")) -> Response:
    """Skips per reason and the items raters flagged."""
    with request.app.state.db.reading() as s:
        return _ok(skip_summary(s, ctx.project))


class MarkdownIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(max_length=100_000)


@router.post("/markdown/preview", tags=["labelling"])
def post_markdown_preview(body: MarkdownIn, ctx: Ctx = guard("authenticated")) -> Response:
    """The HTML a text renders to on every page (the same sanitising renderer as model answers),
    for the demonstration editor's preview."""
    from .pages.render import markdown

    return _ok({"html": str(markdown(body.text))})


@router.get("/projects/{project}/demonstrations/pending", tags=["review"])
def get_pending_demonstrations(
    request: Request, project: str, ctx: Ctx = guard("project.review")
) -> Response:
    """Demonstrations waiting for a reviewer's decision."""
    with request.app.state.db.reading() as s:
        return _ok(pending_demonstrations(s, ctx.project))


@router.post(
    "/projects/{project}/demonstrations/{judgment_id}/review", tags=["review"], status_code=201
)
def post_demonstration_review(
    request: Request,
    project: str,
    judgment_id: DbId,
    body: DemonstrationReviewIn,
    ctx: Ctx = guard("project.review"),
) -> Response:
    """Accept or reject a demonstration (a note is required to reject). Stored as a revision with
    the reviewer and the time; only accepted demonstrations are exported by ``trl-sft``."""
    return _ok(
        review_demonstration(
            request.app.state.db,
            ctx.project,
            ctx.user.username,
            judgment_id,
            body.decision,
            body.note,
        ),
        201,
    )


@router.post("/projects/{project}/items/file", tags=["items"])
async def post_items_file(
    request: Request,
    project: str,
    filename: str = Query(default="upload.jsonl", max_length=200),
    ctx: Ctx = guard("project.manage"),
) -> Response:
    """Import an uploaded file (raw request body). 422 with every bad line when it fails."""
    from starlette.concurrency import run_in_threadpool

    raw = await request.body()
    out = await run_in_threadpool(
        import_file, request.app.state.db, ctx.project.name, filename, raw
    )
    return _ok(out, 200 if out["ok"] else 422)


@router.post("/projects/{project}/rubrics/file", tags=["rubrics"], status_code=201)
async def post_rubric_file(
    request: Request,
    project: str,
    filename: str = Query(default="rubric.yaml", max_length=200),
    ctx: Ctx = guard("project.manage"),
) -> Response:
    """Upload a rubric as YAML or JSON; changed content becomes a new version."""
    rubric = parse_rubric_file(filename, await request.body())
    with request.app.state.db.writing() as s:
        row = repo.add_rubric(s, s.get(Project, ctx.project.pk), rubric)
        return _ok({"id": row.rubric_key, "version": row.version}, 201)


@router.get("/projects/{project}/rubrics", tags=["rubrics"])
def list_rubric_versions(
    request: Request, project: str, ctx: Ctx = guard("project.view")
) -> Response:
    with request.app.state.db.reading() as s:
        return _ok(rubric_versions(s, ctx.project.pk))


_ = ItemRow  # re-exported for the pages' type hints


# -- passwords ------------------------------------------------------------------------------------


class PasswordChangeIn(WireModel):
    current_password: str = Field(min_length=1, max_length=1000)
    new_password: str = Field(min_length=1, max_length=1000)
    revoke_api_tokens: bool = Field(
        default=True, description="Also revoke your API tokens (as an admin reset does)."
    )


@router.post("/me/password", tags=["users"])
def change_my_password(
    request: Request, body: PasswordChangeIn, ctx: Ctx = guard("authenticated")
) -> Response:
    """Change your own password, proving the current one. Like an admin reset
    (:func:`preflab.server.auth.set_password`, the one rule) it ends every browser session of the
    account, this one too: log in again with the new password."""
    from . import auth

    db = request.app.state.db
    with db.reading() as s:
        stored = s.get(User, ctx.user.user_pk).password_hash
    with request.app.state.password_gate.slot():  # argon2 checks share the login's concurrency cap
        right = auth.verify_password(stored, body.current_password)  # outside the write transaction
    if not right:
        raise auth.NotAllowed("current_password: wrong password; nothing was changed")
    with db.writing() as s:
        user = s.get(User, ctx.user.user_pk)
        if user.password_hash != stored:
            raise auth.Gone("the password was changed meanwhile; log in again")
        auth.set_password(s, user, body.new_password, keep_api_tokens=not body.revoke_api_tokens)
    return _ok(
        {
            "changed": True,
            "api_tokens_revoked": body.revoke_api_tokens,
            "next": "your sessions have ended: log in with the new password",
        }
    )


class ResetLinkIn(WireModel):
    ttl_hours: int = Field(default=24, ge=1, le=24 * 7)


class ResetClaimIn(WireModel):
    password: str = Field(min_length=1, max_length=1000)


@router.post("/users/{username}/reset-link", tags=["users"], status_code=201)
def create_reset_link(
    request: Request, username: str, body: ResetLinkIn, ctx: Ctx = guard("site.admin")
) -> Response:
    """A one-time password reset link for a user (shown once; hand it over yourself). The user
    sets a new password with it; that ends their sessions and revokes their API tokens."""
    from datetime import timedelta

    from . import auth

    with request.app.state.db.writing() as s:
        user = auth.get_user(s, username)
        token = auth.create_reset_link(
            s, user, created_by=s.get(User, ctx.user.user_pk), ttl=timedelta(hours=body.ttl_hours)
        )
    return _ok(
        {"username": username, "path": f"/reset/{token}", "expires_in_hours": body.ttl_hours}, 201
    )


@router.post("/password-resets/{token}", tags=["auth"])
def claim_reset_link(
    request: Request, token: str, body: ResetClaimIn, ctx: Ctx = guard("public")
) -> Response:
    """Set a new password with a reset link (single use, expiring)."""
    from . import auth

    with request.app.state.db.writing() as s:
        user = auth.claim_reset_link(s, token, body.password)
        return _ok({"username": user.username, "changed": True})
