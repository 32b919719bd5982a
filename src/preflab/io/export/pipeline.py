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

from sqlalchemy import Engine, func, select

from ...quality.gold import gold_accuracy, gold_outcomes
from ...schema import Item, Rubric
from ...schema.routing import scored_by_verifier, verifiable_to_raters
from ...store import ExportLog, session_factory, transaction
from ...store.models import ItemRow
from ...store.repo import get_project, get_rubric, iter_items_with_judgments
from .agreement_gate import (
    agreement_card,
    agreement_gate,
    drop_disagreement,
    labels_dropped,
    project_min_alpha,
)
from .base import (
    FILE_FORMATS,
    ExportData,
    Exporter,
    ExportError,
    ExportOptions,
)
from .length_gate import (  # noqa: F401 - length_parity_gate, tokenizer_identity re-exported
    apply_verbosity_penalty,
    export_length,
    length_parity_gate,
    project_verbosity_penalty,
    tokenizer_identity,
)
from .manifest import build_manifest, dump_manifest, render_card
from .resolve import (
    LengthFn,
    PairAggregator,
    accepted_demonstrations,
    aggregate_pairwise,
    counts_as_label,
    effective_judgments,
    item_pair_votes,
    resolve_steps,
    resolve_unary,
    word_length,
)
from .routing import VERIFIER_ORIGIN, verifier_pairs, verifier_unary, without_people_preferences
from .telemetry_gate import (
    TelemetryCounts,
    kept_by_reviewers,
    project_telemetry_settings,
    telemetry_filter,
)
from .truth import truth_gate
from .writers import CARD, MANIFEST, AtomicDir, file_hashes, gc_paused, write_data

log = logging.getLogger(__name__)

SPLIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

#: ``progress(phase, done, total)``: where an export is (the web app's export jobs); it may
#: raise to stop the export (nothing is left behind).
Progress = Callable[[str, int, int], None]
#: items read between two ``collect`` progress calls
PROGRESS_EVERY = 2000


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
    exporter = formats[options.format]
    exporter.check_params(options)
    return exporter


def _is_chat(item: Item) -> bool:
    return isinstance(item.prompt, list) or any(c.messages is not None for c in item.candidates)


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
    progress: Progress | None = None,
) -> tuple[ExportData, dict[str, Any]]:
    """Read a project and resolve what ``exporter`` needs; ``(data, stats)``."""
    project = get_project(session, project_name)
    needs = exporter.needs
    data = ExportData(project=project.name, items={}, length_fn=length_fn)
    rubric_cache: dict[tuple[str | None, int | None], Rubric | None] = {}

    def rubric_for(key: str | None, version: int | None) -> Rubric | None:
        if (key, version) not in rubric_cache:
            rubric = get_rubric(session, project, key, version) if key else None
            rubric_cache[(key, version)] = rubric
            if rubric is not None:
                data.rubrics[(rubric.id, rubric.version)] = rubric
        return rubric_cache[(key, version)]

    stats: dict[str, Any] = {
        "items_in": 0,
        "judgments_in": 0,
        "judgments_in_by_kind": Counter(),
        "judgments_used": 0,
        "judgments_used_by_kind": Counter(),
        "judgments_used_by_source": Counter(),
    }
    raters_in: set[str] = set()
    votes = []
    rubric_resolved = []
    chat = False
    # locals, not stats[...] lookups: this loop runs once per judgment of the project
    in_by_kind: Counter[str] = stats["judgments_in_by_kind"]
    used_by_kind: Counter[str] = stats["judgments_used_by_kind"]
    used_by_source: Counter[str] = stats["judgments_used_by_source"]
    resolving = bool(needs - {"judgments"})
    include_ai = options.include_ai
    keep_gold = options.include_gold or not exporter.training
    stats["gold_items"] = 0
    stats["aggregation_margin"] = getattr(aggregator, "margin", None)
    to_raters = verifiable_to_raters(project.settings)
    verifier_resolved = []
    data.policy = dict((project.settings or {}).get("policy") or {})
    data.telemetry = TelemetryCounts()
    flag_filter = (
        None
        if options.include_flagged
        else telemetry_filter(
            project_telemetry_settings(project.settings),
            data.drops,
            data.telemetry,
            kept_by_reviewers(session, project.pk),
        )
    )
    gold_labels: list = []
    gold_of: dict[str, dict[str, Any]] = {}
    if progress is not None:
        total = session.scalar(select(func.count()).where(ItemRow.project_pk == project.pk)) or 0
        progress("collect", 0, total)
    for iwj in iter_items_with_judgments(session, project, include_excluded=True):
        item = iwj.item
        stats["items_in"] += 1
        if progress is not None and stats["items_in"] % PROGRESS_EVERY == 0:
            progress("collect", stats["items_in"], total)
        if item.gold is not None:
            stats["gold_items"] += 1
            gold_of[item.id] = item.gold.model_dump()
            gold_labels.extend(
                j
                for j, meta in zip(iwj.judgments, iwj.meta, strict=True)
                if not meta.get("excluded") and counts_as_label(j, include_ai)
            )
            if (
                not keep_gold
            ):  # qualification / honeypot items are tests of raters, not training data
                data.drops.drop("gold", "gold-item", item.id)
                in_by_kind.update(j.kind for j in iwj.judgments)
                stats["gold_judgments"] = stats.get("gold_judgments", 0) + len(iwj.judgments)
                continue
        data.items[item.id] = item
        chat = chat or _is_chat(item)
        routed = scored_by_verifier(item.metadata, to_raters)
        if routed and "pairs" in needs:
            verifier_resolved.extend(verifier_pairs(item, data.drops))
        if routed and "unary" in needs:
            data.unary.extend(verifier_unary(item, data.drops))
        kept, order, batch_of = [], [], {}
        for j, meta in zip(iwj.judgments, iwj.meta, strict=True):
            in_by_kind[j.kind] += 1
            if meta.get("excluded"):
                data.drops.drop("excluded", meta.get("exclusion_reason") or "excluded", item.id)
                continue
            if not counts_as_label(j, include_ai):
                data.drops.drop("source", "ai", item.id)
                continue
            if flag_filter is not None and not flag_filter(item, j, meta["pk"]):
                continue
            kept.append(j)
            order.append(meta["pk"])
            batch_of[meta["pk"]] = meta.get("batch_pk")
            raters_in.add(j.provenance.rater_id)
        if "judgments" in needs:
            data.judgments.extend(kept)
        if not kept:
            continue
        # the label set every measure uses (quality.labels): a revised label counts once
        effective = effective_judgments(kept, order)
        # "used": what the export reads. A resolving export reads the resolved label set, so the
        # labels a revision or an adjudication set aside are not counted (issue 28 section 7).
        for j in (j for _, j in effective) if resolving else kept:
            used_by_kind[j.kind] += 1
            used_by_source[j.provenance.source] += 1
        data.labels_with_batch.extend((j, batch_of[pos]) for pos, j in effective)
        for _, j in effective:
            data.label_index.add(j)
        if not resolving:
            continue
        if routed:  # the verifier's call, not people's (see .routing)
            effective = without_people_preferences(effective, item.id, data.drops)
        plain = [j for _, j in effective]
        if "pairs" in needs:
            item_votes, rubric_only = item_pair_votes(
                item, effective, rubric_for, length_fn, data.drops
            )
            votes.extend(item_votes)
            rubric_resolved.extend(rubric_only)
        if "unary" in needs:
            data.unary.extend(resolve_unary(plain, data.drops))
        if "steps" in needs:
            data.steps.extend(resolve_steps(plain, data.drops))
        if "demonstrations" in needs:
            demos = accepted_demonstrations(plain, data.drops)
            data.demonstrations.extend(demos)
            chat = chat or any(d.messages is not None for d in demos)
    if "pairs" in needs:
        position = {item_id: i for i, item_id in enumerate(data.items)}
        pairs = list(aggregator(votes, data.drops)) + rubric_resolved + verifier_resolved
        pairs.sort(
            key=lambda p: (
                position[p.item_id],
                min(p.chosen_id, p.rejected_id),
                max(p.chosen_id, p.rejected_id),
            )
        )
        data.pairs = pairs
    # Rubric versions used: also those of rubric judgments not resolved into pairs (raw export).
    for j in data.judgments:
        if j.provenance.rubric_id:
            rubric_for(j.provenance.rubric_id, j.provenance.rubric_version)
    data.conversational = chat if options.conversational is None else options.conversational
    stats["judgments_in"] = sum(in_by_kind.values())
    stats["judgments_used"] = sum(used_by_kind.values())
    stats["raters_in"] = len(raters_in)
    stats["gold_accuracy"] = gold_figures(gold_labels, gold_of)
    return data, stats


def gold_figures(labels: list, gold_of: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Honeypot (gold) accuracy of the raters, for the manifest and card: overall with its
    Wilson interval, and the raters graded (the quality report's rule, :func:`gold_outcomes`)."""
    outcomes = gold_outcomes(labels, gold_of)
    if not outcomes:
        return None
    overall = gold_accuracy([o for outs in outcomes.values() for o in outs]).as_dict()
    per_rater = [gold_accuracy(outs).accuracy for outs in outcomes.values()]
    return {
        **{k: round(v, 4) if isinstance(v, float) else v for k, v in overall.items()},
        "raters_graded": len(outcomes),
        "raters_below_0.8": sum(a < 0.8 for a in per_rater),
    }


def apply_gates(data: ExportData, options: ExportOptions) -> None:
    """Truth (verifier failures), min-raters (pairs, thumbs, steps), length parity (pairs, on
    by default) and the verbosity penalty on the margins of the pairs that are left."""
    truth_gate(data)
    n = options.min_raters
    if n > 1:
        reason = f"fewer-than-{n}-raters"
        for name in ("pairs", "unary", "steps"):
            rows = getattr(data, name)
            # verifier labels are one oracle's call, not a vote (see .routing)
            kept = [
                r for r in rows if r.n_raters >= n or getattr(r, "origin", None) == VERIFIER_ORIGIN
            ]
            for r in rows:
                if r.n_raters < n and getattr(r, "origin", None) != VERIFIER_ORIGIN:
                    data.drops.drop("min_raters", reason, r.item_id)
            setattr(data, name, kept)
    if options.length_gate is not None and data.pairs:
        data.pairs = length_parity_gate(data, options.length_gate)
    if data.pairs:
        data.verbosity = apply_verbosity_penalty(data, project_verbosity_penalty(data.policy))


def output_stats(data: ExportData, exporter: Exporter, options: ExportOptions) -> dict[str, Any]:
    raters_out: set[str] = set()
    for rows in (
        data.pairs if "pairs" in exporter.needs else (),
        data.unary if "unary" in exporter.needs else (),
        data.steps if "steps" in exporter.needs else (),
    ):
        for r in rows:
            raters_out.update(r.rater_hashes)
    if "demonstrations" in exporter.needs:
        raters_out.update(
            d.provenance.rater_hash or d.provenance.rater_id for d in data.demonstrations
        )
    if "judgments" in exporter.needs:
        raters_out.update(j.provenance.rater_hash or j.provenance.rater_id for j in data.judgments)
    return {
        "raters_out": len(raters_out),
        "resolved": {
            "pairs": len(data.pairs),
            "unary": len(data.unary),
            "steps": len(data.steps),
            "demonstrations": len(data.demonstrations),
        },
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
    manifest = build_manifest(
        exporter=exporter,
        data=data,
        options=options,
        stats=stats,
        rows_out=rows_out,
        files={},
        aggregator_name=aggregator_name,
        length_fn_name=length_fn_name,
    )
    if agreement is not None:
        manifest["agreement"] = agreement
    sources = Counter(str(i.metadata.get("source") or data.project) for i in data.items.values())
    card = render_card(manifest, exporter, sources) + agreement_card(agreement)
    (directory / CARD).write_text(card, encoding="utf-8")
    manifest["files"] = file_hashes(directory)
    (directory / MANIFEST).write_bytes(dump_manifest(manifest))
    return manifest


def _discount(counts: Counter[str], key: str) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


def export_project(
    engine: Engine,
    project_name: str,
    options: ExportOptions,
    *,
    aggregator: PairAggregator = aggregate_pairwise,
    length_fn: LengthFn | None = None,
    formats: dict[str, Exporter] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Export a project to ``options.out`` (a directory) atomically; returns the manifest.

    Writes the data file(s), ``README.md`` (dataset card) and ``manifest.json``, then records
    an ``ExportLog`` row. On any error nothing is left at ``options.out`` (a previous export
    there is kept) and no log row is written.
    """
    from . import EXPORT_FORMATS

    exporter = check_options(options, formats or EXPORT_FORMATS)
    with session_factory(engine)() as session:
        if engine.dialect.name == "postgresql":
            # one snapshot for every chunked read (SQLite WAL readers see committed pages only)
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        if length_fn is not None:
            length_name = _name(length_fn)
        elif "pairs" in exporter.needs:  # lengths matter only to pairs (gate and margins)
            policy = (get_project(session, project_name).settings or {}).get("policy") or {}
            length_fn, length_name = export_length(options, policy)
        else:
            length_fn, length_name = word_length, "words"
        data, stats = collect(
            session,
            project_name,
            exporter,
            options,
            aggregator=aggregator,
            length_fn=length_fn,
            progress=progress,
        )
        session.rollback()
    if progress is not None:
        progress("gates", stats["items_in"], stats["items_in"])
    apply_gates(data, options)
    if options.drop_disagreement is not None:
        dropped = drop_disagreement(data, options.drop_disagreement)
        # the labels of the pairs it dropped reach no row: not "used" (issue 28 section 7)
        labels = (j for j, _ in data.labels_with_batch)
        for j in labels_dropped(labels, dropped, data.items) if dropped else ():
            stats["judgments_used"] -= 1
            _discount(stats["judgments_used_by_kind"], j.kind)
            _discount(stats["judgments_used_by_source"], j.provenance.source)
    min_alpha = (
        options.min_alpha if options.min_alpha is not None else project_min_alpha(data.policy)
    )
    agreement = agreement_gate(
        data.labels_with_batch, min_alpha, options.force, refuse=exporter.training
    )
    if progress is not None:
        progress("write", stats["items_in"], stats["items_in"])
    target = AtomicDir(Path(options.out))
    try:
        manifest = write_export(
            exporter,
            data,
            options,
            target.tmp,
            stats,
            aggregator_name=_name(aggregator),
            length_fn_name=length_name,
            agreement=agreement,
        )
        with transaction(engine) as session:
            project = get_project(session, project_name)
            session.add(
                ExportLog(
                    project_pk=project.pk,
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
