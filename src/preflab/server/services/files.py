"""Uploaded files: items (every import format, all or nothing, through
:func:`preflab.io.importer.import_files`, the one import rule) and rubrics (YAML or JSON)."""

from __future__ import annotations

import json
import tempfile
import zlib
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...io.importer import ImportFailed, import_files, labeler_lines, validate_files
from ...schema import Rubric
from ...settings import get_settings
from ...store import repo
from ...store.models import RubricVersion
from ..database import Database
from ..errors import ServiceError
from ..wire import jsonl_problems
from . import projects


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


class TooLarge(Exception):
    """A gzipped upload that decompresses past the limit."""


def gunzip_bounded(raw: bytes, limit: int) -> bytes:
    """``raw`` decompressed, stopping as soon as the output passes ``limit`` bytes (a few KiB
    of gzip can hold gigabytes: the body limit bounds only what was sent)."""
    inflate = zlib.decompressobj(wbits=31)  # gzip framing
    out = bytearray()
    data = raw
    while data:
        out += inflate.decompress(data, limit + 1 - len(out))
        if len(out) > limit:
            raise TooLarge
        data = inflate.unconsumed_tail
        if inflate.eof:
            if inflate.unused_data.strip(b"\0"):  # another gzip member follows
                inflate, data = zlib.decompressobj(wbits=31), inflate.unused_data
            else:
                break
    if not inflate.eof:
        raise zlib.error("the gzip data ends early")
    return bytes(out)


def import_file(db: Database, project_name: str, filename: str, raw: bytes) -> dict[str, Any]:
    """Import one uploaded file, all or nothing. ``{"ok": False, "problems": [...]}`` lists every
    bad line as ``file:line: field: reason``; nothing is imported then.

    Everything that can refuse a file without the database runs before the write transaction
    (issue 31: a tiny gzip of empty lines held SQLite's write lock, and so every project's
    writes, for seconds to minutes): decompression, bounded by ``max_upload_decompressed_mb``;
    the wire rules; reading and converting every record (:func:`validate_files`); a file with
    no record at all. Only a file that passes takes the lock."""
    name = Path(filename or "upload.jsonl").name or "upload.jsonl"
    if name.lower().endswith(".gz"):
        limit = int(get_settings().max_upload_decompressed_mb * 1024 * 1024)
        try:
            raw = gunzip_bounded(raw, limit)
        except TooLarge:
            return _refused(
                name,
                f"over {limit // (1024 * 1024)} MiB once decompressed; split the file, or raise "
                "PREFLAB_MAX_UPLOAD_DECOMPRESSED_MB on the server",
            )
        except zlib.error as exc:
            return _refused(name, f"not valid gzip data ({exc}); send the file as it was written")
        name = name[:-3] or "upload.jsonl"
    if Path(name).suffix.lower() in (".jsonl", ".json", ".ndjson"):
        bad = [problem(name, n, field, reason) for n, field, reason in jsonl_problems(raw)]
        if bad:  # the wire rules (preflab.server.wire): NUL bytes, integers past 64 bits
            return {"ok": False, "total": len(bad), "problems": bad}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(raw)
        del raw
        with db.reading() as s:  # items go to raters: one none of its kinds fits is refused
            kinds = list(repo.get_project(s, project_name).kinds)
        checked = validate_files([path], labelled_by=kinds)  # no write transaction, no lock
        if checked.total_problems:
            return {
                "ok": False,
                "total": checked.total_problems,
                "problems": [problem(name, p.line, p.field, p.reason) for p in checked.problems],
            }
        if not checked.records:
            return _refused(name, "no records in the file (only blank lines?); nothing to import")
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


def _refused(name: str, reason: str) -> dict[str, Any]:
    return {"ok": False, "total": 1, "problems": [problem(name, None, "(file)", reason)]}


def parse_rubric_file(filename: str, raw: bytes) -> Rubric:
    """A rubric from an uploaded YAML or JSON file (``ValidationError`` -> 422 field by field)."""
    suffix = Path(filename or "").suffix.lower()
    is_yaml = suffix in (".yaml", ".yml")
    try:
        data = yaml.safe_load(raw) if is_yaml else json.loads(raw)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ServiceError(
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
