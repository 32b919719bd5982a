"""Uploaded files: items (every import format, all or nothing, through
:func:`preflab.io.importer.import_files`, the one import rule) and rubrics (YAML or JSON)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..io.importer import ImportFailed, import_files, labeler_lines
from ..schema import Rubric
from ..store import repo
from ..store.models import RubricVersion
from . import projects
from .database import Database
from .judging import JudgingError
from .wire import jsonl_problems


def problem(file: str, line: int | None, field: str, reason: str) -> dict[str, Any]:
    """One bad record as the API reports it, with the ``file:line: field: reason`` text."""
    where = file if line is None else f"{file}:{line}"
    return {
        "file": file,
        "line": line,
        "field": field,
        "reason": reason,
        "text": f"{where}: {field}: {reason}",
    }


def import_file(db: Database, project_name: str, filename: str, raw: bytes) -> dict[str, Any]:
    """Import one uploaded file, all or nothing. ``{"ok": False, "problems": [...]}`` lists every
    bad line as ``file:line: field: reason``; nothing is imported then."""
    name = Path(filename or "upload.jsonl").name or "upload.jsonl"
    if Path(name).suffix.lower() in (".jsonl", ".json", ".ndjson"):
        bad = [problem(name, n, field, reason) for n, field, reason in jsonl_problems(raw)]
        if bad:  # the wire rules (preflab.server.wire): NUL bytes, integers past 64 bits
            return {"ok": False, "total": len(bad), "problems": bad}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(raw)
        try:
            report = import_files(db.write_engine, project_name, [path])
        except ImportFailed as exc:
            return {
                "ok": False,
                "total": exc.total,
                "problems": [problem(name, p.line, p.field, p.reason) for p in exc.problems],
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
        "ai_labelers": report.ai_labelers,
        "model_like_people": report.model_like_people,
        "notes": labeler_lines(report),
    }


def parse_rubric_file(filename: str, raw: bytes) -> Rubric:
    """A rubric from an uploaded YAML or JSON file (``ValidationError`` -> 422 field by field)."""
    suffix = Path(filename or "").suffix.lower()
    is_yaml = suffix in (".yaml", ".yml")
    try:
        data = yaml.safe_load(raw) if is_yaml else json.loads(raw)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise JudgingError(
            422, f"{filename}: not valid {'YAML' if is_yaml else 'JSON'}: {exc}"
        ) from exc
    return Rubric.model_validate(data)


def rubric_versions(session: Session, project_pk: int) -> list[dict[str, Any]]:
    """Every version of every rubric of the project, newest version first per rubric."""
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
