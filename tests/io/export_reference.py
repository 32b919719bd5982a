"""Today's export pipeline (main at 93c9a20), kept as the reference the streamed export is
held byte-identical to (``test_export_streaming.py``): the whole project read into one
``ExportData``, the length gate tokenizing one text at a time, the agreement figures from one
label table. Copied, not imported, so that a change to ``src/`` cannot move the reference;
exporters, writers, resolvers and readers are the project's own, except the code the streamed
export changed (``verl``'s rows and notes, ``rollouts``' rows, the Dawid-Skene aggregator, the
``hf`` writer: one table handed to ``datasets``' ``save_to_disk``), copied below as it was.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from preflab.io.export import EXPORT_FORMATS
from preflab.io.export.aggregators import (
    MIRROR,
    aggregate_pairwise_dawid_skene,
    posterior_gap,
    separates,
)
from preflab.io.export.agreement_gate import (
    NOT_GATED,
    _level,
    agreement_card,
    drop_disagreement,
    labels_dropped,
)
from preflab.io.export.base import (
    BATCH_ROWS,
    Batch,
    ExportData,
    Exporter,
    ExportError,
    ExportOptions,
    TextCache,
    chunked,
    project_policy,
    prompt_value,
)
from preflab.io.export.length_gate import (
    VerbosityPenalty,
    export_length,
)
from preflab.io.export.manifest import build_manifest, dump_manifest, render_card
from preflab.io.export.pipeline import _name, check_options
from preflab.io.export.resolve import (
    DropLog,
    LengthFn,
    PairAggregator,
    PairVote,
    ResolvedPair,
    accepted_demonstrations,
    aggregate_pairwise,
    counts_as_label,
    effective_judgments,
    item_pair_votes,
    resolve_steps,
    resolve_unary,
    resolved_pair,
    word_length,
)
from preflab.io.export.rollouts import Rollouts, _reward
from preflab.io.export.routing import (
    VERIFIER_ORIGIN,
    verifier_pairs,
    verifier_reward,
    verifier_unary,
    without_people_preferences,
)
from preflab.io.export.telemetry_gate import (
    TelemetryCounts,
    kept_by_reviewers,
    project_telemetry_settings,
    telemetry_filter,
)
from preflab.io.export.truth import truth_gate
from preflab.io.export.verl import (
    CONFIG_LINES,
    Verl,
    _extra_info,
    _reward_model,
    is_verl_builtin,
    left_out,
)
from preflab.io.export.writers import CARD, MANIFEST, batch_table, file_hashes, gc_paused
from preflab.io.export.writers import write_data as project_write_data
from preflab.quality.aggregation.dawid_skene import dawid_skene
from preflab.quality.agreement import krippendorff_alpha_ci
from preflab.quality.bias import length_parity_gate as quality_length_parity_gate
from preflab.quality.gold import gold_accuracy, gold_outcomes
from preflab.quality.table import LabelTable
from preflab.schema import Item, JudgmentBase, Rubric
from preflab.schema.routing import (
    scored_by_verifier,
    verifiable_route,
    verify_task,
)
from preflab.store import session_factory
from preflab.store.repo import get_project, get_rubric, iter_items_with_judgments


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
    data.policy = project_policy(project.settings)
    to_raters = data.policy.verifiable_to_raters
    verifier_resolved = []
    data.telemetry = TelemetryCounts()
    flag_filter = (
        None
        if options.include_flagged
        else telemetry_filter(
            project_telemetry_settings(data.policy),
            data.drops,
            data.telemetry,
            kept_by_reviewers(session, project.pk),
        )
    )
    gold_labels: list = []
    gold_of: dict[str, dict[str, Any]] = {}
    for iwj in iter_items_with_judgments(session, project, include_excluded=True):
        item = iwj.item
        stats["items_in"] += 1
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
        data.verbosity = apply_verbosity_penalty(data, data.policy.verbosity_penalty)


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


def write_hf(directory: Path, batches: Iterator[Batch], schema: pa.Schema, split: str) -> int:
    """A ``DatasetDict({split: ...})`` saved with ``save_to_disk`` (main's writer before the
    streamed one, :mod:`preflab.io.export.hf_writer`)."""
    import datasets

    tables = [batch_table(b, schema) for b in batches]
    if not tables:  # one empty chunk: ``datasets`` cannot wrap a table with no chunks
        tables = [pa.Table.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)]
    table = pa.concat_tables(tables)
    dataset = datasets.Dataset(table, split=datasets.NamedSplit(split))
    shards = max(1, -(-table.nbytes // (500 << 20)))
    datasets.DatasetDict({split: dataset}).save_to_disk(str(directory), num_shards={split: shards})
    return table.num_rows


def write_data(
    exporter: Exporter, data: ExportData, options: ExportOptions, directory: Path
) -> dict[str, int]:
    if options.file_format != "hf":
        return project_write_data(exporter, data, options, directory)
    with gc_paused():
        schema = exporter.schema(data, options)
        rows = write_hf(directory, exporter.batches(data, options), schema, options.split)
    return {options.split: rows}


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


def cohort_field(data: ExportData) -> str:
    """``difficulty`` when any exported item has ``metadata.difficulty``, else ``domain``."""
    if any("difficulty" in item.metadata for item in data.items.values()):
        return "difficulty"
    return "domain"


def cohort_of(data: ExportData, item_id: str, by: str) -> str:
    item = data.items[item_id]
    if by == "difficulty":
        value = item.metadata.get("difficulty")
        return "(none)" if value is None else str(value)
    return "+".join(item.domains) or "(no domain)"


def pair_lengths(data: ExportData, pairs: list) -> tuple[list[int], list[int]]:
    length = data.length_fn
    chosen, rejected = [], []
    for p in pairs:
        item = data.items[p.item_id]
        chosen.append(length(item.candidate(p.chosen_id).as_text()))
        rejected.append(length(item.candidate(p.rejected_id).as_text()))
    return chosen, rejected


def _ratio(c: int, r: int) -> float:
    return c / r if r else math.nan


def _median(values: list[float]) -> float | None:
    finite = [v for v in values if math.isfinite(v)]
    return round(statistics.median(finite), 4) if finite else None


def length_parity_gate(data: ExportData, bounds: tuple[float, float]) -> list:
    """Keep pairs with ``min_ratio <= len(chosen) / len(rejected) <= max_ratio`` (lengths from
    ``data.length_fn``); drops go to ``data.drops``, the per-cohort report to
    ``data.length_cohorts``. A zero-length rejected answer passes only against an empty chosen.
    """
    lo, hi = bounds
    chosen, rejected = pair_lengths(data, data.pairs)
    # One gate for audits and exports: the quality engine decides, the manifest records why.
    result = quality_length_parity_gate(chosen, rejected, low=lo, high=hi)
    by = cohort_field(data)
    ratios: dict[str, list[float]] = defaultdict(list)
    kept_ratios: dict[str, list[float]] = defaultdict(list)
    dropped: Counter[str] = Counter()
    kept = []
    for p, c, r, keep, reason in zip(
        data.pairs, chosen, rejected, result.keep, result.reasons, strict=True
    ):
        cohort = cohort_of(data, p.item_id, by)
        ratios[cohort].append(_ratio(c, r))
        if keep:
            kept.append(p)
            kept_ratios[cohort].append(_ratio(c, r))
        else:
            dropped[cohort] += 1
            data.drops.drop("length_parity", str(reason).split(":")[0], p.item_id)
    data.length_cohorts = {
        "by": by,
        "cohorts": {
            cohort: {
                "pairs": len(ratios[cohort]),
                "dropped": dropped[cohort],
                "kept": len(ratios[cohort]) - dropped[cohort],
                "parity_share": round(
                    (len(ratios[cohort]) - dropped[cohort]) / len(ratios[cohort]), 4
                ),
                "median_ratio_before": _median(ratios[cohort]),
                "median_ratio_after": _median(kept_ratios[cohort]),
                "removed_wholesale": dropped[cohort] == len(ratios[cohort]),
            }
            for cohort in sorted(ratios)
        },
    }
    return kept


# -- the verbosity penalty on margins ------------------------------------------------------


def apply_verbosity_penalty(data: ExportData, penalty: VerbosityPenalty) -> dict[str, Any]:
    """Subtract ``penalty(token ratio)`` from each pair's strength (the margin an exporter
    writes); pairs without a strength stay without one. Returns the manifest's summary."""
    with_margin = [p for p in data.pairs if p.strength is not None]
    chosen, rejected = pair_lengths(data, with_margin)
    new = {}
    total = 0.0
    for p, c, r in zip(with_margin, chosen, rejected, strict=True):
        amount = penalty(_ratio(c, r))
        if amount > 0 and p.strength is not None:
            new[id(p)] = replace(p, strength=max(0.0, p.strength - amount))
            total += amount
    data.pairs = [new.get(id(p), p) for p in data.pairs]
    return {
        "function": "min(max_penalty, per_log_ratio * max(0, ln(ratio / free_ratio))), "
        "ratio = len(chosen) / len(rejected); margin = max(0, strength - penalty)",
        "free_ratio": penalty.free_ratio,
        "per_log_ratio": penalty.per_log_ratio,
        "max_penalty": penalty.max_penalty,
        "pairs_with_margin": len(with_margin),
        "pairs_penalized": len(new),
        "mean_penalty": round(total / len(with_margin), 4) if with_margin else 0.0,
    }


def agreement_figures(
    labels: list[tuple[JudgmentBase, Any]], n_boot: int = 200
) -> list[dict[str, Any]]:
    """One entry per (batch, dimension): alpha, its interval, items with 2+ raters, raters per item."""
    production = [(j, b) for j, b in labels if int(j.provenance.review_pass) == 0]
    batch_of = {id(j): ("unbatched" if b is None else f"batch-{b}") for j, b in production}
    table = LabelTable.from_judgments([j for j, _ in production], lambda j: batch_of[id(j)])
    out = []
    for batch in sorted(set(table.batches.tolist())):
        for dim in sorted(set(table.dimensions[table.batches == batch].tolist())):
            mask = (table.batches == batch) & (table.dimensions == dim)
            units, values = table.units[mask], table.values[mask].astype(float)
            _, per_unit = np.unique(units, return_counts=True)
            entry = {
                "batch": batch,
                "dimension": dim,
                "level": _level(dim),
                "items": int(len(per_unit)),
                "items_with_2plus_raters": int((per_unit >= 2).sum()),
                "raters_per_item": round(float(per_unit.mean()), 3),
                "alpha": None,
                "ci95": None,
            }
            if entry["items_with_2plus_raters"]:
                # no interval for dimensions that are not gated (the bootstrap is most of the cost)
                ci = krippendorff_alpha_ci(
                    units, values, _level(dim), n_boot=0 if dim in NOT_GATED else n_boot
                )
                if np.isfinite(ci.estimate):
                    entry["alpha"] = round(float(ci.estimate), 4)
                    if np.isfinite(ci.low) and np.isfinite(ci.high):
                        entry["ci95"] = [round(float(ci.low), 4), round(float(ci.high), 4)]
            out.append(entry)
    return out


def agreement_gate(
    labels: list[tuple[JudgmentBase, Any]], min_alpha: float, force: bool, refuse: bool = True
) -> dict[str, Any]:
    """The manifest's ``agreement`` block; raises :class:`ExportError` below the floor unless ``force``.

    ``refuse=False`` (exports that are not training data: ``raw``, ``to-label``) measures and
    reports without refusing: the floor is a promise to a trainer, and the raw export is how
    low-agreement labels are taken out for adjudication."""
    figures = agreement_figures(labels)
    below = [
        f
        for f in figures
        if f["dimension"] not in NOT_GATED and f["alpha"] is not None and f["alpha"] < min_alpha
    ]
    if below and refuse and not force:
        worst = ", ".join(f"{f['batch']}/{f['dimension']}: alpha {f['alpha']}" for f in below[:5])
        raise ExportError(
            f"agreement below policy.min_alpha {min_alpha}: {worst}. Adjudicate the disagreements, "
            "lower policy.min_alpha, or pass --force (the web export's 'force' option) to write the "
            "export marked as below the floor"
        )
    return {
        "min_alpha": min_alpha,
        "passed": not below,
        "forced": bool(below and refuse and force),
        "below": [[f["batch"], f["dimension"]] for f in below],
        "by_batch_dimension": figures,
    }


def _discount(counts: Counter[str], key: str) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]


def export_reference(
    engine: Any,
    project_name: str,
    options: ExportOptions,
    *,
    aggregator: PairAggregator = aggregate_pairwise,
) -> dict[str, Any]:
    """Today's ``export_project`` into ``options.out`` (no atomic swap, no ``ExportLog`` row)."""
    exporter = check_options(options, REFERENCE_FORMATS)
    aggregator = REFERENCE_AGGREGATORS.get(aggregator, aggregator)
    with session_factory(engine)() as session:
        if "pairs" in exporter.needs:
            policy = project_policy(get_project(session, project_name).settings)
            length_fn, length_name = export_length(options, policy)
        else:
            length_fn, length_name = word_length, "words"
        data, stats = collect(
            session, project_name, exporter, options, aggregator=aggregator, length_fn=length_fn
        )
        session.rollback()
    apply_gates(data, options)
    if options.drop_disagreement is not None:
        dropped = drop_disagreement(data, options.drop_disagreement)
        labels = (j for j, _ in data.labels_with_batch)
        for j in labels_dropped(labels, dropped, data.items) if dropped else ():
            stats["judgments_used"] -= 1
            _discount(stats["judgments_used_by_kind"], j.kind)
            _discount(stats["judgments_used_by_source"], j.provenance.source)
    min_alpha = options.min_alpha if options.min_alpha is not None else data.policy.min_alpha
    agreement = agreement_gate(
        data.labels_with_batch, min_alpha, options.force, refuse=exporter.training
    )
    out = Path(options.out)
    out.mkdir(parents=True)
    return write_export(
        exporter,
        data,
        options,
        out,
        stats,
        aggregator_name=_name(aggregator),
        length_fn_name=length_name,
        agreement=agreement,
    )


# -- the exporters' methods as they were (main at e968715) -----------------------------------
# The streamed export changed how these formats build rows and notes (a running row index, notes
# summed over chunks, repeats named by a digest); the reference keeps the old code.


class _VerlReference(Verl):
    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        items = self._items(data, options)
        for rows in chunked(len(items)):
            part = items[rows.start : rows.stop]
            yield {
                "data_source": [self._data_source(i, data, options) for i in part],
                "prompt": [prompt_value(i.prompt, True) for i in part],
                "ability": [i.domains[0] if i.domains else "general" for i in part],
                "reward_model": [_reward_model(i) for i in part],
                "extra_info": [
                    _extra_info(i, options.split, rows.start + k) for k, i in enumerate(part)
                ],
            }

    def notes(self, data: ExportData, options: ExportOptions) -> dict[str, Any]:
        """Which ``data_source`` values verl's default reward would refuse (``warnings``)."""
        items = self._items(data, options)
        styles = {"rule": 0, "model": 0}
        unknown: dict[str, int] = {}
        model_rows_builtin = 0
        repo_level = 0
        for item in items:
            if verifiable_route(item) == "code" and (verify_task(item) or {}).get("mode") == "repo":
                repo_level += 1
            style = _reward_model(item)["style"]
            styles[style] += 1
            source = self._data_source(item, data, options)
            if not is_verl_builtin(source):
                unknown[source] = unknown.get(source, 0) + 1
            elif style == "model":
                model_rows_builtin += 1
        warnings = [
            f"data_source {source!r} ({n} rows) is not one of verl's built-in keys: verl's default reward raises "
            "NotImplementedError for it; train with the shipped reward function ("
            + " ".join(CONFIG_LINES)
            + ")"
            for source, n in sorted(unknown.items())
        ]
        if model_rows_builtin:
            warnings.append(
                f"{model_rows_builtin} preference rows (style 'model') carry a built-in data_source: verl's "
                "default reward would score them with a rule; use the shipped reward function"
            )
        if repo_level:
            warnings.append(
                f"{repo_level} rows are repo-level code tasks (mode 'repo'): their tests import the "
                "candidate's code into the process that judges it, so their reward is trusted only "
                "as far as the static screen and the in-process checks reach (a policy may learn "
                "what they miss); function-level tasks run the candidate in a process of its own. "
                "See docs/verify.md, 'Trust limit'"
            )
        dropped: dict[str, list[str]] = {}
        for item in data.items.values():
            why = left_out(item)
            if why is not None:
                dropped.setdefault(why, []).append(str(item.id))
        if dropped.get("guessable"):
            warnings.append(
                f"{len(dropped['guessable'])} verifiable items left out as guessable (a trivial "
                "answer passes their verifier; `preflab verify project` flags them): "
                + ", ".join(sorted(dropped["guessable"])[:20])
            )
        if dropped.get("reference_unsettled"):
            warnings.append(
                f"{len(dropped['reference_unsettled'])} items left out: their reference needs two "
                "independent experts who agree, or an adjudication (metadata.reference_provenance): "
                + ", ".join(sorted(dropped["reference_unsettled"])[:20])
            )
        tasks = [verify_task(i) for i in items if verifiable_route(i) is not None]
        provenance = {
            "tasks": len(tasks),
            "with_author": sum(1 for t in tasks if t and t.get("author")),
            "with_approver": sum(1 for t in tasks if t and t.get("approver")),
        }
        return {
            "rows_by_style": styles,
            "warnings": warnings,
            "repo_level_code_rows": repo_level,
            "left_out": {k: sorted(v) for k, v in sorted(dropped.items())},
            "task_provenance": provenance,
        }


class _RolloutsReference(Rollouts):
    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        text = TextCache(data.items, data.conversational)
        names = ("prompt", "response", "reward", "model")
        batch: Batch = {n: [] for n in names}
        seen: set[tuple[str, str, str | None]] = set()
        for item_id, item in data.items.items():
            reward = _reward(item.metadata, len(item.candidates))
            for cand in item.candidates:
                key = (
                    orjson.dumps(item.model_dump(mode="json")["prompt"]).decode(),
                    orjson.dumps(cand.body_json()).decode(),
                    cand.model,
                )
                if key in seen:  # the same model's same answer on two items: one row
                    continue
                seen.add(key)
                batch["prompt"].append(text.prompt(item_id))
                batch["response"].append(text.completion(item_id, cand.id))
                verified = verifier_reward(item, cand.id)
                batch["reward"].append(reward if verified is None else verified)
                batch["model"].append(cand.model)
            if len(batch["prompt"]) >= BATCH_ROWS:
                yield batch
                batch = {n: [] for n in names}
        if batch["prompt"]:
            yield batch


REFERENCE_FORMATS = {
    **EXPORT_FORMATS,
    Verl.name: _VerlReference(),
    Rollouts.name: _RolloutsReference(),
}


def _dawid_skene_reference(
    votes: Iterable[PairVote], drops: DropLog | None = None
) -> list[ResolvedPair]:
    """Winner per pair = the Dawid-Skene posterior mode; strength = the median strength of the
    winning votes times the posterior gap between the two sides (:func:`posterior_gap`).

    The model is fitted with :data:`MIRROR` symmetry and the library's evidence rule (raters with
    fewer than :data:`~preflab.quality.aggregation.dawid_skene.MIN_LABELS` labels share one
    confusion matrix, so they weigh alike). ``agreement`` reports the posterior probability of
    the winning side. Units whose posterior
    does not separate the sides by :data:`POSTERIOR_MARGIN` are dropped as ``no-majority``;
    units whose mode is a tie as ``tie``, like the plurality rule.
    """
    votes = list(votes)
    if not votes:
        return []
    units = [f"{v.item_id}\x1f{v.lo}\x1f{v.hi}" for v in votes]
    signs = [int((v.score > 0) - (v.score < 0)) for v in votes]
    # Only the classes that occur: an unused class (e.g. no rater ever said "tie") gives EM a
    # degenerate direction to absorb probability mass into.
    # "first better" and "second better" are sides of a canonical order (sorted ids) that says
    # nothing about the answers: the model is symmetric under swapping them (``mirror``).
    classes = sorted({*signs, *(-s for s in signs)})
    result = dawid_skene(units, [v.rater for v in votes], signs, classes=classes, mirror=MIRROR)
    by_unit: dict[str, list[PairVote]] = {}
    for unit, v in zip(units, votes, strict=True):
        by_unit.setdefault(unit, []).append(v)
    out: list[ResolvedPair] = []
    for unit, posterior, label in zip(
        result.units.tolist(), result.posteriors, result.labels.tolist(), strict=True
    ):
        vs = by_unit[unit]
        item_id, lo, hi = unit.split("\x1f")
        if not separates(posterior):
            if drops is not None:
                drops.drop("aggregation", "no-majority", item_id)
            continue
        side = int(label)
        if side == 0:
            if drops is not None:
                drops.drop("aggregation", "tie", item_id)
            continue
        strengths = [abs(v.score) for v in vs if (v.score > 0) - (v.score < 0) == side]
        if not strengths:  # the model overrode every vote on this unit: no strength to report
            if drops is not None:
                drops.drop("aggregation", "no-supporting-vote", item_id)
            continue
        pair = resolved_pair(
            item_id, lo, hi, side, vs, strengths, agreement=float(np.max(posterior))
        )
        if pair.strength is not None:
            pair = replace(
                pair, strength=pair.strength * posterior_gap(posterior, result.classes, side)
            )
        out.append(pair)
    return out


_dawid_skene_reference.margin = aggregate_pairwise_dawid_skene.margin  # type: ignore[attr-defined]
# the manifest names the aggregator
_dawid_skene_reference.__name__ = _dawid_skene_reference.__qualname__ = (
    "aggregate_pairwise_dawid_skene"
)
#: the aggregators as they were: the streamed export fits Dawid-Skene once and decides chunk by
#: chunk (``DawidSkeneFit``); the reference keeps the one-call version
REFERENCE_AGGREGATORS = {aggregate_pairwise_dawid_skene: _dawid_skene_reference}
