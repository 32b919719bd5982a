"""``import`` and ``validate``: the pipeline of :mod:`preflab.io.importer` put together."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, func, select, update

from ...schema.policy import stored_policy
from ...settings import get_settings
from ...store import repo
from ...store.bulk import bulk_transaction
from ...store.models import CandidateRow, ImportBatch, JudgmentRow, Project
from .. import text_stats
from ..formats.generic import ai_labeler_rule, model_like
from .checks import NO_PROJECT, CheckState, check_record
from .convert import Record, forced_format, records
from .loader import Loader
from .options import (
    SKIPPED_IN_COUNTS,
    ImportFailed,
    ImportOptions,
    ImportReport,
    Problem,
    ValidationReport,
)
from .worker import StartConverting, chunks


def files_hash(paths: Sequence[Path]) -> str:
    """SHA-256 over the files' bytes (each prefixed by its length), in the order given."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.stat().st_size.to_bytes(8, "big"))
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


#: SQLite page cache for an import (KiB). A large import inserts into two indexes at random
#: places (items by key, judgments by content hash); once they outgrow the default 2 MB cache,
#: every insert reads and rewrites a page. The cache is allocated as it fills, so small imports
#: do not pay for it, and a large one fills it: it is the import's memory that grows with the
#: project, so it is bounded (32 MiB by default; 160 MiB filled at 1M judgments, the writer's peak
#: RSS 389 against 249 MB, issue 27 §4); past it SQLite spills dirty pages into the WAL before
#: the commit (``tests/io/test_import_cache.py``).
#: ``$PREFLAB_IMPORT_CACHE_KIB`` (:mod:`preflab.settings`), read per import.


@contextmanager
def _import_cache(conn: Connection) -> Iterator[None]:
    """SQLite: a larger page cache for this import's connection, restored afterwards."""
    if conn.dialect.name != "sqlite":
        yield
        return
    before = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
    conn.exec_driver_sql(f"PRAGMA cache_size = -{get_settings().import_cache_kib}")
    try:
        yield
    finally:
        conn.exec_driver_sql(f"PRAGMA cache_size = {int(before)}")


# -- the public API ------------------------------------------------------------------------------


def import_files(
    engine: Any,
    project_name: str,
    paths: Sequence[Path],
    options: ImportOptions = ImportOptions(),  # a frozen-by-convention default
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import ``paths`` into project ``project_name`` in one transaction; see the module doc."""
    paths = [Path(p) for p in paths]
    forced_format(options)
    # A second process for large files starts now, while the files are hashed and the project
    # read; it gets the options (the project's settings added) once they are known.
    with chunks(paths, progress) as start_converting:
        return _import(engine, project_name, paths, options, start_converting)


def _import(
    engine: Any,
    project_name: str,
    paths: list[Path],
    options: ImportOptions,
    start_converting: StartConverting,
) -> ImportReport:
    digest = files_hash(paths)
    report = ImportReport(batch_pk=None, files=[str(p) for p in paths], formats={})
    with bulk_transaction(engine) as session:
        project = repo.get_project(session, project_name)
        previous = session.scalar(
            select(ImportBatch).where(
                ImportBatch.project_pk == project.pk, ImportBatch.content_hash == digest
            )
        )
        if previous is not None:
            report.batch_pk = previous.pk
            report.already_imported = True
            report.formats = dict(previous.counts.get("formats", {}))
            return report
        batch = ImportBatch(
            project_pk=project.pk, content_hash=digest, sources=report.files, format="", counts={}
        )
        session.add(batch)
        session.flush()
        report.batch_pk = batch.pk
        given = options
        options = _with_project_step_verdicts(_with_project_ai_labelers(options, project), project)
        report.step_verdicts = options.step_verdicts
        # the candidates this import adds are those past the largest pk now (text statistics)
        first_new = session.scalar(select(func.coalesce(func.max(CandidateRow.pk), 0)))
        loader = Loader(session, project, batch.pk, options, report)
        gc_was_enabled = gc.isenabled()
        gc.disable()  # millions of short-lived objects, no cycles: the collector only costs time here
        try:
            with _import_cache(loader.conn):
                for chunk in start_converting(options, loader.stages):
                    loader.load(chunk)
                    del chunk  # freed before the collection, not traversed by it
                    gc.collect(
                        0
                    )  # the youngest generation only: frees any cycles, keeps memory flat
        finally:
            loader.close()
            if gc_was_enabled:
                gc.enable()
        if loader.problem_count and not options.skip_invalid:
            raise ImportFailed(loader.problems, loader.problem_count, options.max_errors)
        report.skipped_count = loader.problem_count if options.skip_invalid else 0
        # each added candidate's text statistics, once, in this transaction (io/text_stats.py)
        text_stats.fill(session, after=int(first_new or 0))
        report.ai_labelers, report.model_like_people = ai_labeler_summary(
            loader.conn, batch.pk, loader.rater_pks, given, project
        )
        counts = {
            "items_added": report.items_added,
            "items_existing": report.items_existing,
            "judgments_added": report.judgments_added,
            "judgments_existing": report.judgments_existing,
            "formats": report.formats,
            "skipped": report.skipped_count,
            "judgments_not_collected": report.judgments_not_collected,
            "skipped_problems": [str(p) for p in report.skipped[:SKIPPED_IN_COUNTS]],
            "step_verdicts": report.step_verdicts,
            "ai_labelers": report.ai_labelers,
            "model_like_people": report.model_like_people,
        }
        fmt = ",".join(sorted(report.formats)) or "none"
        session.execute(
            update(ImportBatch)
            .where(ImportBatch.pk == batch.pk)
            .values(format=fmt[:50], counts=counts)
        )
        session.expire(batch)
    return report


def _project_ai_rules(project: Project) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The project's ``policy.ai_labelers`` and ``policy.ai_labeler_patterns``."""
    policy = stored_policy(project.settings)
    return tuple(policy.ai_labelers), tuple(policy.ai_labeler_patterns)


def _with_project_ai_labelers(options: ImportOptions, project: Project) -> ImportOptions:
    """``options`` with the project's ``policy.ai_labelers`` and ``policy.ai_labeler_patterns``
    added."""
    names, patterns = _project_ai_rules(project)
    if not names and not patterns:
        return options
    return dataclasses.replace(
        options,
        ai_labelers=tuple(options.ai_labelers) + names,
        ai_labeler_patterns=tuple(options.ai_labeler_patterns) + patterns,
    )


def ai_labeler_rules(given: ImportOptions, project: Project | None) -> Callable[[str], str | None]:
    """``rule(labeler)``: why the import takes ``labeler`` for a model, in words, or ``None``.
    The order of :func:`preflab.io.formats.generic.ai_labeler_rule`: exact names first (the
    option's, then the project's), then patterns (the option's, then the project's)."""
    names, patterns = _project_ai_rules(project) if project is not None else ((), ())
    given_names, project_names = set(given.ai_labelers), set(names)
    globs = [(p, "--ai-labeler-pattern") for p in given.ai_labeler_patterns]
    globs += [(p, "policy.ai_labeler_patterns") for p in patterns]

    def rule(labeler: str) -> str | None:
        if labeler in given_names:
            return "exact name given with --ai-labeler"
        if labeler in project_names:
            return "exact name in policy.ai_labelers"
        for pattern, origin in globs:
            if ai_labeler_rule(labeler, patterns=(pattern,)):
                return f"pattern {pattern!r} in {origin}"
        return None

    return rule


def ai_labeler_summary(
    conn: Connection,
    batch_pk: int,
    raters: dict[str, int],
    given: ImportOptions,
    project: Project,
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """What the import made of its labelers' names: ``(declared, model_like_people)``.

    ``declared``: each labeler a rule declared a model (:func:`ai_labeler_rules`), with the rule
    and its judgments in this import by source (``ai``: stored as AI; others: records that stated
    their own source, which wins). ``model_like_people``: labelers whose names look like models'
    (:func:`~preflab.io.formats.generic.model_like`) that no rule declared, with judgments stored
    as people's, so an admin can declare the ones that are models. One grouped query over the
    judgments of those few raters (none when no name needs it)."""
    rule = ai_labeler_rules(given, project)
    declared = {key: r for key in raters if (r := rule(key)) is not None}
    looks = {key for key in raters if key not in declared and model_like(key)}
    wanted = {raters[k]: k for k in (*declared, *looks)}
    by_source: dict[str, Counter[str]] = {k: Counter() for k in wanted.values()}
    for part in (sorted(wanted)[i : i + 500] for i in range(0, len(wanted), 500)):
        rows = conn.execute(
            select(JudgmentRow.rater_pk, JudgmentRow.source, func.count())
            .where(JudgmentRow.batch_pk == batch_pk, JudgmentRow.rater_pk.in_(part))
            .group_by(JudgmentRow.rater_pk, JudgmentRow.source)
        )
        for pk, source, n in rows:
            by_source[wanted[pk]][source] += n
    summary = {
        key: {"rule": declared[key], "judgments": dict(sorted(by_source[key].items()))}
        for key in sorted(declared)
        if by_source[key]
    }
    people = sorted(k for k in looks if any(s != "ai" for s in by_source[k]))
    return summary, people


def _with_project_step_verdicts(options: ImportOptions, project: Project) -> ImportOptions:
    """``options`` with the project's ``policy.imported_step_verdicts`` setting."""
    return dataclasses.replace(
        options, step_verdicts=stored_policy(project.settings).imported_step_verdicts
    )


def validate_files(
    paths: Sequence[Path],
    options: ImportOptions = ImportOptions(),  # a frozen-by-convention default
    *,
    labelled_by: Sequence[str] | None = None,
) -> ValidationReport:
    """The record checks of :func:`import_files` without a database: the same
    :func:`~preflab.io.importer.checks.check_record`, against the files alone, so a problem is
    reported in the same words by both.

    Checks everything a file says about itself: reading, formats, types, unknown fields, item ids
    reused with different content, judgments naming candidates their item (when in these files)
    does not have. Not checked: items in the database, judgment kinds a project collects, rubrics.
    With ``labelled_by`` (a project's kinds; the server's upload route), an item none of them can
    label is a problem too, as the items API says it.
    """
    paths = [Path(p) for p in paths]
    forced_format(options)
    report = ValidationReport(files=[str(p) for p in paths], formats={})
    # ``labelled_by``: the project's kinds, when its items go to raters (the server's upload)
    rules = (
        NO_PROJECT
        if labelled_by is None
        else dataclasses.replace(NO_PROJECT, labelled_by=list(labelled_by))
    )
    formats: Counter[str] = Counter()
    state = CheckState()
    for rec in records(paths, options, None, lean=False):
        assert isinstance(rec, Record)
        if not rec.problems:
            report.records += 1
            report.items += len(rec.items)
            report.judgments += len(rec.judgments)
            formats[rec.format or "?"] += 1
        for fld, reason in check_record(rec, state, rules).problems:
            report.total_problems += 1
            if len(report.problems) < max(options.max_errors, 1):
                report.problems.append(Problem(rec.file, rec.line, fld, reason))
        # Nothing is written: only what later records are checked against is kept.
        state.accepted_items.clear()
        state.new_judgments.clear()
    report.formats = dict(formats)
    return report
