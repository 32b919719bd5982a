"""Projects on the server: creation with a policy, versioned settings, the task pool, and the
adapters to the importer and exporter (owned by :mod:`preflab.io`)."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from ...io.export import ExportOptions
from ...io.export import export_project as run_export
from ...io.export.base import ExportError
from ...io.importer import ImportFailed, ImportOptions, import_files
from ...schema import Item, kinds_for_item, unfit_item_reason
from ...schema.policy import Policy, Settings, settings_of
from ...schema.routing import scored_by_verifier
from ...store import repo
from ...store.models import CandidateRow, ExportLog, ItemRow, JudgmentRow, Project
from ...store.server_models import PoolDomain, PoolEntry, SettingsVersion
from ..database import Database, insert_ignore
from ..errors import ServiceError
from ..export_options import check_choices


def create_project(
    session: Session,
    name: str,
    *,
    title: str = "",
    kinds: list[str] | None = None,
    guidelines: str = "",
    policy: Policy | dict | None = None,
    created_by: int | None = None,
) -> Project:
    pol = policy if isinstance(policy, Policy) else Policy.model_validate(policy or {})
    settings = Settings(title=title or name, guidelines=guidelines, policy=pol)
    project = repo.create_project(
        session, name, title=title, kinds=kinds or ["pairwise"], settings=_stored(settings, 1)
    )
    session.add(
        SettingsVersion(
            project_pk=project.pk,
            version=1,
            changed_by=created_by,
            before=None,
            after=_stored(settings, 1),
            note="created",
        )
    )
    session.flush()
    return project


def _stored(settings: Settings, version: int) -> dict[str, Any]:
    data = settings.model_dump(mode="json")
    data.pop("title", None)
    return {"version": version, **data}


def current_settings(project: Project) -> Settings:
    s = settings_of(project.settings or {})
    return s.model_copy(update={"title": project.title})


def update_settings(
    session: Session,
    project: Project,
    changes: dict[str, Any],
    *,
    changed_by: int | None,
    note: str = "",
) -> tuple[int, Settings]:
    """Apply a partial change (``policy`` merged key by key); audited as a new version."""
    before = current_settings(project)
    merged = before.model_dump(mode="json")
    for key, value in changes.items():
        if key == "policy" and isinstance(value, dict):
            policy = merged["policy"]
            for pkey, pvalue in value.items():
                if isinstance(pvalue, dict) and isinstance(policy.get(pkey), dict):
                    policy[pkey] = {**policy[pkey], **pvalue}
                else:
                    policy[pkey] = pvalue
        else:
            merged[key] = value
    after = Settings.model_validate(merged)
    version = int((project.settings or {}).get("version", 1)) + 1
    before_stored = {"title": project.title, **(project.settings or {})}
    project.title = after.title or project.name
    project.settings = _stored(after, version)
    session.add(
        SettingsVersion(
            project_pk=project.pk,
            version=version,
            changed_by=changed_by,
            before=before_stored,
            after={"title": project.title, **project.settings},
            note=note,
        )
    )
    if (
        before.policy.overlap_share != after.policy.overlap_share
        or before.policy.overlap_k != after.policy.overlap_k
    ):
        retarget_pool(session, project, after.policy)
    session.flush()
    return version, after


def settings_history(session: Session, project_pk: int) -> list[SettingsVersion]:
    return list(
        session.scalars(
            select(SettingsVersion)
            .where(SettingsVersion.project_pk == project_pk)
            .order_by(SettingsVersion.version)
        )
    )


# -- the task pool ---------------------------------------------------------------------------


def _unit(content_hash: str, offset: int) -> float:
    return int(content_hash[offset : offset + 8], 16) / 2**32


def production_target(content_hash: str, policy: Policy, meta: dict | None = None) -> int:
    """k for the overlap share of items (chosen by content hash: stable, reproducible), else 1;
    0 for items a verifier scores (the routing rule) unless the project sends them to raters."""
    if scored_by_verifier(meta, policy.verifiable_to_raters):
        return 0
    return policy.overlap_k if _unit(content_hash, 0) < policy.overlap_share else 1


def sync_pool(session: Session, project_pk: int, policy: Policy) -> int:
    """Add pool rows for items that have none (imported by any route); returns how many."""
    n_candidates = select(func.count()).where(CandidateRow.item_pk == ItemRow.pk).scalar_subquery()
    rows = session.execute(
        select(
            ItemRow.pk,
            ItemRow.content_hash,
            ItemRow.gold,
            ItemRow.meta,
            ItemRow.domains,
            n_candidates.label("n_candidates"),
        )
        .outerjoin(PoolEntry, PoolEntry.item_pk == ItemRow.pk)
        .where(ItemRow.project_pk == project_pk, PoolEntry.pk.is_(None))
        .order_by(ItemRow.pk)
    ).all()
    # never hand out an item no kind of the project fits (imported by a route that could not
    # refuse it, e.g. a file in another format): every submission for it would be refused
    kinds = list(session.scalar(select(Project.kinds).where(Project.pk == project_pk)) or [])
    rows = [r for r in rows if item_kinds(kinds, r.n_candidates, r.meta)]
    if not rows:
        return 0
    n_qual = (
        session.scalar(
            select(func.count())
            .select_from(PoolEntry)
            .where(PoolEntry.project_pk == project_pk, PoolEntry.role == "qualification")
        )
        or 0
    )  # COUNT(*): never NULL
    existing = dict(
        session.execute(
            select(JudgmentRow.item_pk, func.count())
            .where(
                JudgmentRow.item_pk.in_([r.pk for r in rows]),
                JudgmentRow.excluded.is_(False),
                JudgmentRow.supersedes_pk.is_(None),
                JudgmentRow.review_pass == 0,  # production labels, as store.triggers counts
                # a model judge's labels (``preflab judge run``) are not people's: they never
                # take a rater's place in the overlap (``ai_assisted`` ones are a person's)
                JudgmentRow.source != "ai",
            )
            .group_by(JudgmentRow.item_pk)
        ).all()
    )
    entries, domains = [], []
    for r in rows:
        if r.gold:
            flagged = bool((r.meta or {}).get("qualification"))
            if flagged or n_qual < policy.qualification.n_items:
                role, n_qual = "qualification", n_qual + 1
            else:
                role = "gold"
            target = 0
        else:
            role, target = "production", production_target(r.content_hash, policy, r.meta)
        entries.append(
            {
                "project_pk": project_pk,
                "item_pk": r.pk,
                "role": role,
                "target": target,
                "filled": int(existing.get(r.pk, 0)),
                "order_key": int(r.content_hash[8:15], 16),
            }
        )
        domains += [{"item_pk": r.pk, "domain": d} for d in (r.domains or [])]
    insert_ignore(session, PoolEntry.__table__, entries, ["item_pk"])
    insert_ignore(session, PoolDomain.__table__, domains, ["item_pk", "domain"])
    return len(entries)


def retarget_pool(session: Session, project: Project, policy: Policy) -> None:
    rows = session.execute(
        select(PoolEntry.pk, ItemRow.content_hash, ItemRow.meta, PoolEntry.extra)
        .join(ItemRow, ItemRow.pk == PoolEntry.item_pk)
        .where(PoolEntry.project_pk == project.pk, PoolEntry.role == "production")
    ).all()
    for pk, digest, meta, extra in rows:
        target = production_target(digest, policy, meta)
        # extra raters granted (Policy.adaptive_overlap) stay on an item that is still overlapped
        values: dict[str, Any] = {"target": target + extra if target >= 2 else target}
        if extra and target < 2:
            values.update(extra=0, extra_state=None)
        session.execute(update(PoolEntry).where(PoolEntry.pk == pk).values(**values))


# -- importer / exporter adapters ----------------------------------------------------------------


def import_items(db: Database, project_name: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """Import items through :func:`preflab.io.importer.import_files` (all or nothing,
    idempotent) and add the new ones to the task pool."""
    validated = [Item.model_validate(d) for d in items]  # ValidationError -> 422 upstream
    with db.reading() as session:
        kinds = list(repo.get_project(session, project_name).kinds)
    check_items_fit(validated, kinds)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "items.jsonl"
        with path.open("w") as fh:
            for item in validated:
                fh.write(json.dumps(item.model_dump(mode="json")) + "\n")
        try:
            with db.write_lock:
                report = import_files(db.write_engine, project_name, [path], ImportOptions())
        except ImportFailed as exc:
            raise ServiceError(422, str(exc).replace(str(path), "items")) from None
    summary = dataclasses.asdict(report)
    summary.pop("files", None)
    with db.writing() as session:
        project = repo.get_project(session, project_name)
        summary["pooled"] = sync_pool(session, project.pk, current_settings(project).policy)
    return _jsonable(summary)


def item_kinds(kinds: list[str], n_candidates: int, metadata: dict[str, Any] | None) -> list[str]:
    """The project's kinds this item can be labelled with (the schema's rule, ``kinds_for_item``)."""
    declared = (metadata or {}).get("kinds")
    return kinds_for_item(kinds, n_candidates, declared if isinstance(declared, list) else None)


def check_items_fit(items: list[Item], kinds: list[str]) -> None:
    """422 listing every item no kind of the project fits (a one-answer item in a pairwise-only
    project was handed to raters, whose every submission was then refused), as
    ``items:LINE: candidates: reason``; nothing is imported then."""
    problems = []
    for line, item in enumerate(items, start=1):
        reason = unfit_item_reason(kinds, str(item.id), len(item.candidates), item.metadata)
        if (
            reason is not None
        ):  # the importer's own check (io/importer/checks.py), in the API's shape
            problems.append(
                {
                    "loc": ["body", "items", line - 1, "candidates"],
                    "type": "value_error",
                    "msg": f"items:{line}: candidates: {reason}",
                }
            )
    if problems:
        raise ServiceError(
            422,
            f"{len(problems)} item(s) cannot be labelled in this project; nothing was imported",
            problems,
        )


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def export_project(
    db: Database,
    project_name: str,
    fmt: str,
    out_dir: Path,
    aggregation: str = "majority",
    **options: Any,
) -> tuple[int | None, dict[str, Any]]:
    """Run :func:`preflab.io.export.export_project` (it writes the files, the manifest and the
    ``ExportLog`` row) with ``options`` of :class:`ExportOptions`; returns ``(export log pk, manifest)``."""
    try:
        check_choices(aggregation, options.get("length_gate"))
    except ExportError as exc:
        raise ServiceError(422, str(exc)) from None
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        manifest = run_export(
            db.engine,
            project_name,
            ExportOptions(format=fmt, out=out_dir, aggregation=aggregation, **options),
        )
    except ExportError as exc:
        raise ServiceError(422, str(exc)) from None
    with db.reading() as session:
        log_pk = session.scalar(
            select(ExportLog.pk).where(ExportLog.path == str(out_dir)).order_by(ExportLog.pk.desc())
        )
    return log_pk, _jsonable(manifest)
