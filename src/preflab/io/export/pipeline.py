"""From the database to an export directory: read, filter, resolve, gate, write, record.

:func:`collect` reads a project once (item by item, in item order) into :class:`ExportData`;
:func:`apply_gates` applies the pair/row gates; :func:`write_export` writes data files,
card and manifest into a directory; :func:`export_project` does all of it atomically and
records an :class:`~preflab.store.ExportLog` row.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from ...schema.policy import Policy
from ...store import ExportLog, session_factory, transaction
from ...store.repo import get_project, iter_items_with_judgments
from .aggregators import AGGREGATORS, aggregate_pairwise_dawid_skene
from .agreement_gate import agreement_gate
from .base import (
    FILE_FORMATS,
    ExportData,
    Exporter,
    ExportError,
    ExportOptions,
    project_policy,
)
from .collector import Collector
from .length_gate import (  # noqa: F401 - length_parity_gate, tokenizer_identity re-exported
    apply_verbosity_penalty,
    export_length,
    length_parity_gate,
    tokenizer_identity,
)
from .manifest import write_manifest
from .resolve import (
    LengthFn,
    PairAggregator,
    aggregate_pairwise,
    word_length,
)
from .row_cache import RowCache
from .spill import Spill
from .stream import (
    Figures,
    FittedDawidSkene,
    Progress,
    Reporter,
    VoteTable,
    count_items,
    disagreement_gate,
    figures_and_rows,
    finish_figures,
    fit_dawid_skene,
    raters_behind,
    read_figures,
    resolved_counts,
    row_batches,
    row_gates,
    streamable,
    summary_data,
    write_streamed,
)
from .token_cache import cached
from .writers import AtomicDir, gc_paused, write_data

log = logging.getLogger(__name__)

SPLIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_options(options: ExportOptions, formats: dict[str, Exporter]) -> Exporter:
    if options.format not in formats:
        raise ExportError(
            f"unknown export format {options.format!r}; choose one of: {', '.join(sorted(formats))}"
        )
    if options.file_format not in FILE_FORMATS:
        raise ExportError(
            f"unknown file format {options.file_format!r}; choose one of: {', '.join(FILE_FORMATS)}"
        )
    if options.min_raters < 1:
        raise ExportError(f"min_raters must be at least 1, got {options.min_raters}")
    if options.length_gate is not None:
        lo, hi = options.length_gate
        if not 0 < lo <= hi:
            raise ExportError(f"length gate needs 0 < min_ratio <= max_ratio, got {lo}, {hi}")
    if options.length_unit not in ("tokens", "words", "chars"):
        raise ExportError(
            f"length unit {options.length_unit!r}: choose tokens (default), words or chars"
        )
    if not SPLIT_NAME.match(options.split):
        raise ExportError(f"split {options.split!r}: use letters, digits, '_', '-' or '.'")
    if options.aggregation not in AGGREGATORS:
        raise ExportError(
            f"aggregation {options.aggregation!r}: choose from {', '.join(AGGREGATORS)}"
        )
    exporter = formats[options.format]
    exporter.check_params(options)
    return exporter


# Reading keeps every item and judgment of the project alive: without the pause, the cyclic
# collector's full passes walk all of them again and again (a third of the time at 10,000 items).
@gc_paused()
def collect(
    session: Any,
    project_name: str,
    exporter: Exporter,
    options: ExportOptions,
    *,
    aggregator: PairAggregator = aggregate_pairwise,
    length_fn: LengthFn = word_length,
) -> tuple[ExportData, dict[str, Any]]:
    """Read a project and resolve what ``exporter`` needs; ``(data, stats)``."""
    project = get_project(session, project_name)
    collector = Collector(
        session, project, exporter, options, aggregator=aggregator, length_fn=length_fn
    )
    data = collector.read(iter_items_with_judgments(session, project, include_excluded=True))
    return data, collector.finish()


def apply_gates(data: ExportData, options: ExportOptions) -> None:
    """Truth (verifier failures), min-raters (pairs, thumbs, steps), length parity (pairs, on
    by default) and the verbosity penalty on the margins of the pairs that are left."""
    row_gates(data, options)
    data.drops.at("length")
    if options.length_gate is not None and data.pairs:
        data.pairs = length_parity_gate(data, options.length_gate)
    if data.pairs:
        data.verbosity = apply_verbosity_penalty(data, data.policy.verbosity_penalty)


def output_stats(data: ExportData, exporter: Exporter, options: ExportOptions) -> dict[str, Any]:
    return {
        "raters_out": len(raters_behind(data, exporter.needs)),
        "resolved": resolved_counts(data),
    }


def write_export(
    exporter: Exporter,
    data: ExportData,
    options: ExportOptions,
    directory: Path,
    stats: dict[str, Any],
    *,
    aggregator_name: str = "aggregate_pairwise",
    length_fn_name: str = "word_length",
    agreement: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write data files, ``README.md`` and ``manifest.json`` into an existing ``directory``."""
    rows_out = write_data(exporter, data, options, directory)
    for name, content in exporter.side_files(data, options).items():
        (directory / name).write_bytes(content)
    stats = {**stats, **output_stats(data, exporter, options)}
    sources = Counter(str(i.metadata.get("source") or data.project) for i in data.items.values())
    return write_manifest(
        exporter,
        data,
        options,
        directory,
        stats,
        rows_out,
        sources,
        aggregator_name=aggregator_name,
        length_fn_name=length_fn_name,
        agreement=agreement,
    )


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def export_project(
    engine: Engine,
    project_name: str,
    options: ExportOptions,
    *,
    aggregator: PairAggregator | None = None,
    length_fn: LengthFn | None = None,
    formats: dict[str, Exporter] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Export a project to ``options.out`` (a directory) atomically; returns the manifest.

    Writes the data file(s), ``README.md`` (dataset card) and ``manifest.json``, then records
    an ``ExportLog`` row. On any error nothing is left at ``options.out`` (a previous export
    there is kept) and no log row is written. ``progress(phase, done, total)``, when given, is
    called at each phase and every few thousand items (``done`` of ``total`` items).

    Every format streams (:mod:`.stream`: one or two passes, a third first for Dawid-Skene,
    one chunk of items at a time), to JSONL, Parquet or ``hf``; another aggregator than those
    two reads the project into memory (:func:`collect`). The files are the same.
    ``aggregator``: the pair aggregator (default: ``options.aggregation``'s, of
    :data:`~.aggregators.AGGREGATORS`).
    """
    from . import EXPORT_FORMATS

    exporter = check_options(options, formats or EXPORT_FORMATS)
    if aggregator is None:
        aggregator = AGGREGATORS[options.aggregation]
    with session_factory(engine)() as session:
        if engine.dialect.name == "postgresql":
            # one snapshot for every chunked read (SQLite WAL readers see committed pages only)
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        if length_fn is not None:
            length_name = _name(length_fn)
        elif "pairs" in exporter.needs:  # lengths matter only to pairs (gate and margins)
            policy = project_policy(get_project(session, project_name).settings)
            length_fn, length_name = export_length(options, policy)
        else:
            length_fn, length_name = word_length, "words"
        length_fn = cached(length_fn)  # tokens: measured in batches, each text once
        project = get_project(session, project_name)
        if streamable(exporter, options, aggregator):
            return _export_streamed(
                engine,
                session,
                project,
                exporter,
                options,
                aggregator=aggregator,
                length_fn=length_fn,
                length_name=length_name,
                progress=progress,
            )
        report = Reporter(progress, count_items(session, project) if progress else 0)
        report.phase("read", 0)
        data, stats = collect(
            session, project_name, exporter, options, aggregator=aggregator, length_fn=length_fn
        )
        session.rollback()
    report.phase("gates", 0)
    apply_gates(data, options)
    if options.drop_disagreement is not None:
        disagreement_gate(data, options.drop_disagreement, stats)
    agreement = _agreement(data.labels_with_batch, options, data.policy, exporter)
    report.phase("write", 0)
    data.drops.at("rows")
    return _publish(
        engine,
        project_name,
        exporter,
        options,
        lambda directory: write_export(
            exporter,
            data,
            options,
            directory,
            stats,
            aggregator_name=_name(aggregator),
            length_fn_name=length_name,
            agreement=agreement,
        ),
    )


def _export_streamed(
    engine: Engine,
    session: Any,
    project: Any,
    exporter: Exporter,
    options: ExportOptions,
    *,
    aggregator: PairAggregator,
    length_fn: LengthFn,
    length_name: str,
    progress: Progress | None,
) -> dict[str, Any]:
    """:func:`export_project` in two passes (:mod:`.stream`), inside ``session``'s snapshot;
    what pass 1 keeps per pair past its bound lies in a temporary directory (:mod:`.spill`)
    removed when the export ends, whichever way it ends."""
    with Spill(near=options.out) as spill:
        report = Reporter(progress, count_items(session, project) if progress else 0)

        def collector(decide: PairAggregator) -> Collector:
            return Collector(
                session, project, exporter, options, aggregator=decide, length_fn=length_fn
            )

        decide = aggregator
        fitted = None
        if aggregator is aggregate_pairwise_dawid_skene and "pairs" in exporter.needs:
            with gc_paused():  # pass 0: the model, fitted once on every vote
                fitted = fit_dawid_skene(collector(VoteTable(spill)), session, report)
            if fitted is not None:
                decide = FittedDawidSkene(fitted)
        with gc_paused():
            first = collector(decide)
            if fitted is not None:  # what the aggregation drops, in the whole project's order
                first.shared.drops.at("aggregate")
                fitted.drops(first.shared.drops)
                del fitted
            if exporter.one_pass:
                return _export_one_pass(
                    engine, session, first, exporter, report, aggregator, length_name, spill
                )
            # pass 1 builds the rows of a format that can (the pair formats): pass 2 reads them
            cache = RowCache(exporter, options, spill) if exporter.rows_in_pass_1 else None
            figures, stats = read_figures(first, session, report, spill, cache)
            if cache is not None:
                cache.close()  # written: pass 2 reads it, or the agreement gate refuses
        summary = summary_data(first, figures)
        agreement = _agreement(figures.agreement, options, summary.policy, exporter)

        def write(directory: Path) -> dict[str, Any]:
            batches = row_batches(
                collector(decide), session, exporter, figures, summary, directory, report, cache
            )
            rows_out = write_streamed(exporter, options, directory, batches, summary)
            session.rollback()
            return write_manifest(
                exporter,
                summary,
                options,
                directory,
                stats,
                rows_out,
                figures.card_sources,
                aggregator_name=_name(aggregator),
                length_fn_name=length_name,
                agreement=agreement,
            )

        return _publish(engine, project.name, exporter, options, write)


def _export_one_pass(
    engine: Engine,
    session: Any,
    collector: Collector,
    exporter: Exporter,
    report: Reporter,
    aggregator: PairAggregator,
    length_name: str,
    spill: Spill,
) -> dict[str, Any]:
    """A format whose rows need nothing of the whole export (:attr:`.Exporter.one_pass`): the
    rows are written as the figures are counted; the agreement gate decides once every chunk
    is read (a refusal leaves nothing: the directory is not published)."""
    options = collector.options

    def write(directory: Path) -> dict[str, Any]:
        figures = Figures(options, collector.shared.policy, collector.needs, spill)
        figures.stats = collector.stats  # --drop-disagreement takes labels out of its counts
        schema_of = ExportData(project=collector.project.name, items={})  # a fixed schema
        with gc_paused():
            chunks = figures_and_rows(collector, session, exporter, figures, report)
            rows_out = write_streamed(
                exporter, options, directory, exporter.rows(chunks, options), schema_of
            )
        stats = finish_figures(collector, figures)
        session.rollback()
        summary = summary_data(collector, figures)
        summary.format_notes = (
            exporter.notes_from_counts(figures.notes, options)
            if figures.notes is not None
            else None
        )
        agreement = _agreement(figures.agreement, options, summary.policy, exporter)
        return write_manifest(
            exporter,
            summary,
            options,
            directory,
            stats,
            rows_out,
            figures.card_sources,
            aggregator_name=_name(aggregator),
            length_fn_name=length_name,
            agreement=agreement,
        )

    return _publish(engine, collector.project.name, exporter, options, write)


def _agreement(
    labels: Any, options: ExportOptions, policy: Policy, exporter: Exporter
) -> dict[str, Any]:
    """The agreement gate at the export's floor: ``--min-alpha`` when given, else the project's
    ``policy.min_alpha`` (one rule for the in-memory, streamed and one-pass paths)."""
    min_alpha = options.min_alpha if options.min_alpha is not None else policy.min_alpha
    return agreement_gate(labels, min_alpha, options.force, refuse=exporter.training)


def _publish(
    engine: Engine,
    project_name: str,
    exporter: Exporter,
    options: ExportOptions,
    write: Callable[[Path], dict[str, Any]],
) -> dict[str, Any]:
    """Run ``write`` into a temporary directory, record the ``ExportLog`` row and swap the
    directory into ``options.out``; on any error neither is left behind."""
    target = AtomicDir(Path(options.out))
    try:
        manifest = write(target.tmp)
        # the project's pk read in a transaction of its own, so that the log's transaction
        # writes first: on SQLite a transaction that has read holds a WAL snapshot, and its
        # write fails at once ("database is locked", SQLITE_BUSY_SNAPSHOT, no busy wait) when
        # another connection committed since (an export job's progress, the snapshot's
        # refresh); one whose first statement writes waits under the busy timeout
        with transaction(engine) as session:
            project_pk = get_project(session, project_name).pk
        with transaction(engine) as session:
            session.add(
                ExportLog(
                    project_pk=project_pk,
                    format=exporter.name,
                    path=str(target.target),
                    manifest=manifest,
                )
            )
            session.flush()
            target.publish()
    except BaseException:
        target.abort()
        raise
    target.finish()
    log.info(
        "export written",
        extra={"project": project_name, "format": exporter.name, "out": str(target.target)},
    )
    return manifest


def formats_table(formats: Iterable[Exporter]) -> list[tuple[str, str]]:
    return [(e.name, e.description) for e in formats]
