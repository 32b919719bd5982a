"""Agreement gate of an export: Krippendorff's alpha per batch and label dimension, with a floor.

The specification's floor for preference data is alpha >= 0.84 (Krippendorff 2004, *Content
Analysis*, 2nd ed., section 11.4: "rely on variables with alpha >= .800"; preflab's specification
sets 0.84 for preference data). A project sets it as ``policy.min_alpha`` (default 0.84:
:class:`preflab.schema.policy.Policy`); an export refuses when any batch x dimension with
measurable agreement is below it, or with ``force`` writes and marks the card. The figures (alpha with a 95% unit-bootstrap interval, items with 2+ raters, raters
per item) go into the manifest's ``agreement`` and the dataset card, for every delivery.

Memory is bounded as the quality report's agreement rows are (:mod:`preflab.quality.accumulate`):
a batch x dimension keeps the labels of up to :data:`KEPT_UNITS` pairable units (50,000); past
that, alpha is computed from its integer sums over every unit (exact, as for ``strength``) and
the interval from a seeded uniform sample of that many units (reservoir sampling, each unit's
values as an interned pattern id, 4 bytes a unit), and the entry says so:
``"ci_sample": {"units", "of"}``. The labels kept whole cost ~100 bytes a unit (its id, a code
and a value a label), so all batches together keep at most :data:`EXACT_UNITS` (200,000) of
them: past that budget the batch x dimension holding the most starts sampling, so a project of
many batches does not keep a bound's worth of labels per batch.

Only production labels count (review and adjudication passes are not independent raters). The
``strength`` dimension of a pairwise label refines its ``winner`` and is not gated separately. A
batch x dimension without any item labelled twice cannot be measured: it is reported as such, and
does not refuse the export (a project that collects no overlap has no agreement to gate on).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...quality.accumulate import Patterns, Reservoir
from ...quality.agreement import krippendorff_alpha_ci
from ...quality.agreement.krippendorff import Level
from ...quality.mergeable import GroupAgreement, alpha_figures, fold_unit_values
from ...schema import (
    Item,
    JudgmentBase,
    PairwiseJudgment,
    RankingJudgment,
    RubricJudgment,
    UnaryJudgment,
    pair_unit,
)
from .base import ExportError
from .columnar import PlainLabel

NOT_GATED = frozenset({"strength"})
#: pairable units a batch x dimension keeps whole, and the size of its sample past them (the
#: quality report's bound, :class:`preflab.quality.accumulate.Bounds` ``units``): reached by a
#: few hundred thousand judgments, so an export's memory is flat from there (docs/gates.md)
KEPT_UNITS = 50_000
#: pairable units kept whole over all batch x dimensions together (~100 bytes each, ~20 MB)
EXACT_UNITS = 200_000


def _level(dimension: str) -> Level:
    return "nominal" if dimension == "winner" else "ordinal"


def _compact(units: np.ndarray) -> np.ndarray:
    """Unit ids as UTF-8 bytes (about half the memory of ``str`` objects). Bytes sort as the
    strings do (UTF-8 keeps code point order), so alpha's units are numbered alike; NumPy drops
    trailing NUL bytes, so a unit id ending in one stays a string."""
    strings = units.astype(str)
    if any(u.endswith("\x00") for u in strings.tolist()):
        return units
    return np.char.encode(strings, "utf-8")


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return np.array([], dtype=object)
    if len({p.dtype.kind for p in parts}) > 1:  # a NUL-ending id kept some parts as strings
        parts = [
            p if p.dtype.kind == "O" else np.char.decode(p, "utf-8").astype(object) for p in parts
        ]
    return np.concatenate(parts)


@dataclass
class _Cell:
    """One batch x dimension: unit counts, and the labels of its pairable units: each unit's id
    once (per chunk, ``unit_parts``), each label's value and the index of its unit in that
    chunk's ids (``code_parts``)."""

    units: int = 0
    units_2plus: int = 0
    rows: int = 0
    #: a dimension that is not gated (no interval): alpha's integer sums over the pairable
    #: units (:func:`~preflab.quality.mergeable.fold_unit_values`) instead of their labels
    pairable: int = 0
    coincidence: dict[int, dict[tuple[float, float], int]] = field(default_factory=dict)
    agree: dict[int, tuple[int, int]] = field(default_factory=dict)
    unit_parts: list[np.ndarray] = field(default_factory=list)
    code_parts: list[np.ndarray] = field(default_factory=list)
    value_parts: list[np.ndarray] = field(default_factory=list)
    kept: int = 0  # pairable units in unit_parts
    #: past :data:`KEPT_UNITS` pairable units: alpha's sums over every unit (``coincidence``,
    #: ``agree``, ``pairable``) and a seeded sample of the units' patterns for the interval
    sample: Reservoir | None = None
    sample_patterns: Patterns = field(default_factory=Patterns)

    def start_sampling(self, bound: int) -> None:
        """Fold the kept units into alpha's sums and the sample (in the order they came: chunk
        by chunk, a chunk's units in id order), then drop them."""
        self.sample = Reservoir(bound, seed=0, typecode="I")
        for codes, values in zip(self.code_parts, self.value_parts, strict=True):
            self.add_sampled(codes, values)
        self.unit_parts, self.code_parts, self.value_parts, self.kept = [], [], [], 0

    def add_sampled(self, units: np.ndarray, values: np.ndarray) -> None:
        """One chunk's pairable units (each label's unit index and value), once sampling."""
        assert self.sample is not None
        patterns = _patterns(units, values)
        _fold_patterns(self, patterns)
        for pattern in patterns:
            self.sample.add(self.sample_patterns.id(pattern))
        if len(self.sample_patterns) > 2 * self.sample.bound:
            self.sample_patterns = self.sample_patterns.compacted(self.sample.items)

    def sampled_labels(self) -> tuple[np.ndarray, np.ndarray]:
        """``(units, values)`` of the sample: unit k is the k-th unit kept."""
        assert self.sample is not None
        table = self.sample_patterns.values
        patterns = [table[i] for i in self.sample.items]
        lengths = np.fromiter((len(p) for p in patterns), dtype=np.int64, count=len(patterns))
        values = np.fromiter(
            (x for p in patterns for x in p), dtype=float, count=int(lengths.sum())
        )
        return np.repeat(np.arange(len(patterns), dtype=np.int64), lengths), values

    def labels(self) -> tuple[np.ndarray, np.ndarray]:
        """``(units, values)`` of the pairable units, a unit as its rank in the sorted unit ids:
        alpha numbers units in that order (``np.unique``), so the integer codes give the same
        coincidences and the same bootstrap draws as the ids would, without sorting a copy of
        an id per label."""
        ids = _joined(self.unit_parts)
        rank = np.empty(len(ids), dtype=np.int64)
        rank[np.argsort(ids, kind="stable")] = np.arange(len(ids))
        offsets = np.cumsum([0] + [len(p) for p in self.unit_parts[:-1]])
        codes = [c + int(o) for c, o in zip(self.code_parts, offsets, strict=True)]
        units = rank[np.concatenate(codes)] if codes else np.zeros(0, dtype=np.int64)
        values = np.concatenate(self.value_parts) if self.value_parts else np.zeros(0)
        return units, values


def _patterns(units: np.ndarray, values: np.ndarray) -> list[tuple[float, ...]]:
    """Each unit's sorted values (its pattern), in unit index order, of one chunk's labels
    (each label's unit index and value)."""
    order = np.lexsort((values, units))
    units, values = units[order], values[order]
    starts = np.flatnonzero(np.r_[True, units[1:] != units[:-1]])
    return [tuple(part.tolist()) for part in np.split(values, starts[1:])]


def _fold(cell: _Cell, units: np.ndarray, values: np.ndarray) -> None:
    """Add the pairable units of one chunk (each label's unit index and value) to the cell's
    integer sums of alpha: each unit's values counted, a pattern folded once per unit."""
    _fold_patterns(cell, _patterns(units, values))


def _fold_patterns(cell: _Cell, patterns: list[tuple[float, ...]]) -> None:
    """Add units (their patterns) to the cell's integer sums of alpha."""
    for pattern, times in Counter(patterns).items():
        fold_unit_values(cell.coincidence, cell.agree, Counter(pattern), times)
    cell.pairable += len(patterns)


#: a pairwise label: a judgment, or a plain label read from its row (:mod:`.columnar`)
_PAIRWISE = (PairwiseJudgment, PlainLabel)


@dataclass
class LabelColumns:
    """The columns of :class:`~preflab.quality.table.LabelTable` that the tally reads."""

    units: np.ndarray
    values: np.ndarray
    dimensions: np.ndarray
    batches: np.ndarray


def label_columns(labels: list[tuple[JudgmentBase, Any]]) -> LabelColumns:
    """The rows of ``LabelTable.from_judgments`` over ``(judgment, batch pk)``, batch
    ``batch-PK`` or ``unbatched``: a pairwise judgment's rows written out here as its
    :meth:`~preflab.schema.PairwiseJudgment.label_rows` gives them (without a validated
    ``LabelRow`` each, once per label of the export), any other kind's from ``label_rows``."""
    if all(j.__class__ is PlainLabel for j, _ in labels):
        return _plain_label_columns(labels)  # type: ignore[arg-type]
    units: list[str] = []
    values: list[float] = []
    dims: list[str] = []
    batches: list[str] = []
    for j, b in labels:
        batch = "unbatched" if b is None else f"batch-{b}"
        if type(j) in _PAIRWISE:
            assert isinstance(j, _PAIRWISE)  # narrowed for the type checker
            unit = pair_unit(j.item_id, *j.shown_order)
            direction = j.direction
            units.append(unit)
            values.append(float(direction))
            dims.append("winner")
            batches.append(batch)
            if j.strength is not None:  # an unknown strength is no row
                units.append(unit)
                values.append(float(direction * j.strength))
                dims.append("strength")
                batches.append(batch)
            continue
        for row in j.label_rows():
            units.append(row.unit)
            values.append(row.value)
            dims.append(row.dimension)
            batches.append(batch)
    return LabelColumns(
        units=np.array(units, dtype=object),
        values=np.array(values, dtype=float),
        dimensions=np.array(dims, dtype=object),
        batches=np.array(batches, dtype=object),
    )


def _plain_label_columns(labels: list[tuple[PlainLabel, Any]]) -> LabelColumns:
    """:func:`label_columns` of plain labels only, a column at a time: the ``winner`` rows of
    every label then the ``strength`` rows of those with a known strength. Each (batch,
    dimension) cell reads its rows in label order either way (:meth:`AgreementTally.add`
    masks by both), so the tally is the same."""
    units = [j.unit for j, _ in labels]
    directions = [j.direction for j, _ in labels]
    batches = ["unbatched" if b is None else f"batch-{b}" for _, b in labels]
    known = [(k, j.strength) for k, (j, _) in enumerate(labels) if j.strength is not None]
    n, m = len(labels), len(known)
    return LabelColumns(
        units=np.array(units + [units[k] for k, _ in known], dtype=object),
        values=np.array(
            [float(d) for d in directions] + [float(directions[k] * s) for k, s in known],
            dtype=float,
        ),
        dimensions=np.array(["winner"] * n + ["strength"] * m, dtype=object),
        batches=np.array(batches + [batches[k] for k, _ in known], dtype=object),
    )


@dataclass
class AgreementTally:
    """The agreement figures' inputs, added up one chunk of items at a time.

    A unit (an item's pair, candidate or step) lies in one item, so one chunk: per batch x
    dimension the tally keeps the number of units, of units with 2+ labels and of labels, and
    the labels of the *pairable* units (two or more non-missing values), the only ones alpha
    and its unit bootstrap read: the bootstrap resamples units, so it needs each unit's values
    (a float and a 4-byte unit index a label, the unit's id once). A dimension that is not
    gated (:data:`NOT_GATED`) has no interval: its pairable units are folded into alpha's
    integer sums at once (:func:`_fold`) and nothing of them is kept. A gated dimension keeps
    up to ``bound`` pairable units so; past it, their sums and a sample (module docstring).
    """

    cells: dict[tuple[str, str], _Cell] = field(default_factory=dict)
    bound: int = field(default_factory=lambda: KEPT_UNITS)
    #: pairable units kept whole over every cell (:data:`EXACT_UNITS`)
    budget: int = field(default_factory=lambda: EXACT_UNITS)

    def add(self, labels: Iterable[tuple[JudgmentBase, Any]]) -> None:
        production = [(j, b) for j, b in labels if int(j.provenance.review_pass) == 0]
        if not production:
            return
        table = label_columns(production)
        for batch in sorted(set(table.batches.tolist())):
            for dim in sorted(set(table.dimensions[table.batches == batch].tolist())):
                mask = (table.batches == batch) & (table.dimensions == dim)
                units, values = table.units[mask], table.values[mask].astype(float)
                uniq, inverse, per_unit = np.unique(units, return_inverse=True, return_counts=True)
                inverse = inverse.reshape(-1)
                cell = self.cells.setdefault((batch, dim), _Cell())
                cell.units += len(uniq)
                cell.units_2plus += int((per_unit >= 2).sum())
                cell.rows += len(units)
                known = ~np.isnan(values)
                pairable = known & (np.bincount(inverse[known], minlength=len(uniq))[inverse] >= 2)
                if pairable.any() and dim in NOT_GATED:
                    _fold(cell, inverse[pairable], values[pairable])
                elif pairable.any() and cell.sample is not None:
                    cell.add_sampled(inverse[pairable], values[pairable])
                elif pairable.any():
                    # each pairable unit's id once, each label as the index of its unit
                    kept, local = np.unique(inverse[pairable], return_inverse=True)
                    cell.unit_parts.append(_compact(uniq[kept]))
                    cell.code_parts.append(local.reshape(-1).astype(np.int32))
                    cell.value_parts.append(values[pairable])
                    cell.kept += len(kept)
                    if cell.kept > self.bound:
                        cell.start_sampling(self.bound)
        self._keep_within_budget()

    def _keep_within_budget(self) -> None:
        """Past :attr:`budget` pairable units kept whole over every cell, the cells holding the
        most start sampling (ties: the first in (batch, dimension) order) until the rest fit."""
        exact = [c for _, c in sorted(self.cells.items()) if c.sample is None and c.kept]
        total = sum(c.kept for c in exact)
        while total > self.budget and exact:
            largest = max(exact, key=lambda c: c.kept)
            total -= largest.kept
            largest.start_sampling(self.bound)
            exact.remove(largest)

    def figures(self, n_boot: int = 200) -> list[dict[str, Any]]:
        """One entry per (batch, dimension): alpha, its interval, items with 2+ raters, raters
        per item."""
        out = []
        for (batch, dim), cell in sorted(self.cells.items()):
            entry = {
                "batch": batch,
                "dimension": dim,
                "level": _level(dim),
                "items": cell.units,
                "items_with_2plus_raters": cell.units_2plus,
                "raters_per_item": round(cell.rows / cell.units, 3),
                "alpha": None,
                "ci95": None,
            }
            if entry["items_with_2plus_raters"] and dim in NOT_GATED:
                sums = GroupAgreement(
                    0, 0, cell.pairable, 0, frozenset(), True, cell.coincidence, cell.agree
                )
                estimate = alpha_figures(sums, _level(dim))["alpha"]
                if np.isfinite(estimate):
                    entry["alpha"] = round(float(estimate), 4)
            elif entry["items_with_2plus_raters"] and cell.sample is not None:
                sums = GroupAgreement(
                    0, 0, cell.pairable, 0, frozenset(), True, cell.coincidence, cell.agree
                )
                estimate = alpha_figures(sums, _level(dim))["alpha"]
                units, values = cell.sampled_labels()
                ci = krippendorff_alpha_ci(units, values, _level(dim), n_boot=n_boot)
                if np.isfinite(estimate):
                    entry["alpha"] = round(float(estimate), 4)
                    if np.isfinite(ci.low) and np.isfinite(ci.high):
                        entry["ci95"] = [round(float(ci.low), 4), round(float(ci.high), 4)]
                entry["ci_sample"] = {"units": len(cell.sample.items), "of": cell.sample.seen}
            elif entry["items_with_2plus_raters"]:
                units, values = cell.labels()
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


def agreement_figures(
    labels: list[tuple[JudgmentBase, Any]] | AgreementTally, n_boot: int = 200
) -> list[dict[str, Any]]:
    """One entry per (batch, dimension): alpha, its interval, items with 2+ raters, raters per
    item; of labels with their batch, or of a tally of them (a streamed export's)."""
    if isinstance(labels, AgreementTally):
        return labels.figures(n_boot)
    tally = AgreementTally()
    tally.add(labels)
    return tally.figures(n_boot)


def agreement_gate(
    labels: list[tuple[JudgmentBase, Any]] | AgreementTally,
    min_alpha: float,
    force: bool,
    refuse: bool = True,
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


def agreement_card(agreement: dict[str, Any] | None) -> str:
    """The dataset card's agreement section (Markdown)."""
    if not agreement:
        return ""
    lines = ["", "## Agreement", ""]
    if agreement["forced"]:
        lines += [
            f"**Warning: agreement is below the project's floor (alpha >= {agreement['min_alpha']}) "
            "for "
            + ", ".join("/".join(b) for b in agreement["below"])
            + "; exported with --force.**",
            "",
        ]
    else:
        lines += [
            f"Every measured batch and dimension meets the project's floor, Krippendorff's alpha >= "
            f"{agreement['min_alpha']}.",
            "",
        ]
    lines += [
        "| batch | dimension | alpha (95% CI) | items | items with 2+ raters | raters per item |",
        "|---|---|---|---|---|---|",
    ]
    for f in agreement["by_batch_dimension"]:
        alpha = "not measured" if f["alpha"] is None else str(f["alpha"])
        if f["ci95"]:
            alpha += f" ({f['ci95'][0]}, {f['ci95'][1]})"
        if f.get("ci_sample"):
            alpha += f"; interval on {f['ci_sample']['units']} of {f['ci_sample']['of']} units"
        lines.append(
            f"| {f['batch']} | {f['dimension']} | {alpha} | {f['items']} | "
            f"{f['items_with_2plus_raters']} | {f['raters_per_item']} |"
        )
    return "\n".join(lines) + "\n"


def drop_disagreement(data: Any, threshold: float) -> set[tuple[str, frozenset[str]]]:
    """Drop resolved pairs and thumbs whose raters agree less than ``threshold`` (the winning
    share, after revisions and adjudication: an adjudicated item carries the adjudicator's label
    and agrees fully). Counted in the manifest under ``gates.disagreement``. Returns the units
    dropped, ``(item, candidates)``: a pair's two, a thumb's one (see :func:`labels_dropped`)."""
    if not 0 < threshold <= 1:
        raise ExportError(f"--drop-disagreement {threshold}: use a share in (0, 1], e.g. 0.75")
    reason = f"agreement-below-{threshold:g}"
    dropped: set[tuple[str, frozenset[str]]] = set()
    for name in ("pairs", "unary"):
        kept = []
        for row in getattr(data, name):
            if row.n_raters >= 2 and row.agreement is not None and row.agreement < threshold:
                data.drops.drop("disagreement", reason, row.item_id)
                cands = {row.candidate_id} if name == "unary" else {row.chosen_id, row.rejected_id}
                dropped.add((row.item_id, frozenset(cands)))
            else:
                kept.append(row)
        setattr(data, name, kept)
    return dropped


def labels_dropped(
    labels: Iterable[JudgmentBase],
    dropped: set[tuple[str, frozenset[str]]],
    items: dict[str, Item],
) -> list[JudgmentBase]:
    """The labels whose every unit :func:`drop_disagreement` dropped: they reach no row, so the
    manifest's ``judgments_used`` leaves them out (issue 28 section 7). A pairwise label's unit is
    its pair; a ranking's, every pair of its order; a rubric score's, its candidate against each
    other candidate of the item; a thumb's, its candidate. Other kinds are never dropped here."""
    out: list[JudgmentBase] = []
    for j in labels:
        units: set[frozenset[str]]
        if isinstance(j, PairwiseJudgment):
            units = {frozenset(j.shown_order)}
        elif isinstance(j, RankingJudgment):
            units = {frozenset((lo, hi)) for lo, hi, _ in j.induced_pairs()}
        elif isinstance(j, RubricJudgment):
            item, graded = items.get(j.item_id), j.candidate_id
            others = [c.id for c in item.candidates if c.id and c.id != graded] if item else []
            units = {frozenset((graded, o)) for o in others} if graded is not None else set()
        elif isinstance(j, UnaryJudgment):
            units = {frozenset((j.candidate_id,))}
        else:
            continue
        if units and all((j.item_id, u) in dropped for u in units):
            out.append(j)
    return out
