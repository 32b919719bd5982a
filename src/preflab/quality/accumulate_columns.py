"""The report's store path for plain pairwise items: the accumulator fed from stored columns.

:func:`preflab.io.quality_source.accumulate_in` reads a project as
:class:`~preflab.store.repo.RawChunk` s (the stored rows, before any schema object). Building a
``PairwiseJudgment``, its ``Provenance`` and the ``Item`` with its ``Candidate`` s for every
judgment cost ~17 % of the report at 1M judgments, and :meth:`ReportAccumulator.add
<preflab.quality.accumulate.ReportAccumulator.add>` then reads back only a few of their fields.
:func:`add_plain_item` folds a **plain pairwise** item straight from its rows into the same
sums, through the same helpers ``add`` calls (``_item_units``, ``_agreement_of_units``,
``_main``, ``_item_tables``, the text cache, ``_pairs``), in the same order, so the
accumulator's state ends exactly as ``add`` leaves it; any other item is left to the caller,
which builds its objects and calls ``add`` unchanged.

Plain (:func:`plain_item`; each condition is where ``add`` or one of its helpers would do
something this path does not):

* every judgment is pairwise, none by a model unless those count (``include_ai``), none an
  adjudication (review pass 2 or more), and no two of one (pair, rater): ``_resolve``'s shortcut
  holds, the label set is every judgment, nothing set aside, and no item is "already settled";
* no critique spans (``SpanTally.add`` would count them), no telemetry (``_time`` reads its
  ``active_ms``, ``_telemetry`` its flags: only the rationale part is left), no gold on the
  item (``_gold_and_bias`` would score it);
* every candidate stored as text (``Candidate.as_text`` is then the text itself);
* the accumulator batches by item (a dict or none; a time-window function needs the judgment
  object), which the caller checks once (:func:`columns_apply`).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from ..store.rows import as_utc
from .accumulate import (
    ItemUnits,
    ReportAccumulator,
    _Desc,
    _item_units,
    _triads,
    _unit_groups,
)
from .adjudication import queue_order, reasons_for, unit_scores
from .labels import ADJUDICATION

# positions in a RawChunk's judgment row (store.repo.JUDGMENT_COLUMNS)
_KIND, _BODY, _RATIONALE, _RATER = 2, 3, 4, 5
_PASS, _SOURCE, _STARTED, _SUBMITTED, _TELEMETRY, _VERSION = 9, 10, 11, 12, 13, 15


def columns_apply(acc: ReportAccumulator) -> bool:
    """Whether ``acc`` can take plain items from columns at all (its batches are per item)."""
    return not callable(acc.batches)


def plain_item(
    judgment_rows: list[Any],
    bodies: list[dict[str, Any]],
    candidate_rows: list[Any],
    gold: Any,
    include_ai: bool,
) -> bool:
    """Whether an item (its stored rows, the judgments' bodies parsed) is plain pairwise (the
    module docstring): ``add`` on its objects would do exactly what :func:`add_plain_item` does."""
    if gold is not None:
        return False
    for c in candidate_rows:
        if c[1] is None:  # a message list: as_text joins its assistant turns
            return False
    seen: set[tuple[str, str, str]] = set()
    for row, body in zip(judgment_rows, bodies):
        if row[_KIND] != "pairwise" or row[_TELEMETRY] is not None:
            return False
        if (row[_SOURCE] == "ai" and not include_ai) or row[_PASS] >= ADJUDICATION:
            return False
        if body.get("spans"):
            return False
        a, b = body["shown_order"]
        rater = row[_RATER]
        key = (a, b, rater) if a <= b else (b, a, rater)
        if key in seen:
            return False
        seen.add(key)
    return True


def add_plain_item(
    acc: ReportAccumulator,
    item_key: str,
    judgment_rows: list[Any],
    bodies: list[dict[str, Any]],
    candidate_rows: list[Any],
    batch: str,
    scores_cache: ScoresCache | None = None,
) -> None:
    """``acc.add(judgments, item)`` of a plain pairwise item (:func:`plain_item`) from its rows:
    ``bodies`` the judgments' parsed bodies, ``batch`` what ``acc._batch`` gives its judgments;
    ``scores_cache`` (:class:`ScoresCache`, one per accumulator) saves the adjudication scores
    of value patterns already seen."""
    n = len(judgment_rows)
    acc.judgments_in += n  # _resolve: the item is its own label set
    base = acc.n_used
    acc.n_used += n
    acc.any_item = True
    if not n:
        return
    # no spans: SpanTally.add would return at once
    u_col: list[Any] = []
    r_col: list[Any] = []
    v_col: list[Any] = []
    d_col: list[Any] = []
    g_col: list[Any] = []
    labels, rater_order, times = acc.labels, acc.rater_order, acc.times
    acc.kinds.add("pairwise")
    n_rows = 0
    for row, body in zip(judgment_rows, bodies):
        rater = row[_RATER]
        labels[rater] += 1
        rater_order.setdefault(rater, None)
        gv = row[_VERSION]
        if gv is not None:
            acc.any_version = True
        version = "unrecorded" if gv is None else f"v{gv}"
        a, b = body["shown_order"]
        lo, hi = (a, b) if a <= b else (b, a)
        unit = f"{item_key}::{lo}|{hi}"
        winner = body["winner"]
        direction = 0 if winner == "tie" else (-1 if (a if winner == "a" else b) == lo else 1)
        strength = body.get("strength")
        u_col.append(unit)
        r_col.append(rater)
        v_col.append(float(direction))
        d_col.append("winner")
        g_col.append(version)
        n_rows += 1
        if strength is not None:
            u_col.append(unit)
            r_col.append(rater)
            v_col.append(float(direction * strength))
            d_col.append("strength")
            g_col.append(version)
            n_rows += 1
        # _time: no telemetry, so the submission's time after the start, when both are known
        # (a stored time is a datetime, never false: as_utc gives None for NULL only)
        started, submitted = as_utc(row[_STARTED]), as_utc(row[_SUBMITTED])
        if started is not None and submitted is not None:
            times.add(rater, (submitted - started).total_seconds() * 1000)
    cols: dict[str, list[Any]] = {
        "u": u_col,
        "r": r_col,
        "v": v_col,
        "i": [item_key] * n_rows,
        "d": d_col,
        "k": ["pairwise"] * n_rows,
        "b": [batch] * n_rows,
        "g": g_col,
    }
    acc.n_labels += n_rows
    units = _item_units(cols)
    if units is None:
        acc._agreement(cols)
    else:
        acc._agreement_of_units(units, batch, cols["g"][0])
    acc._main(cols)
    if units is None:
        acc._item_tables(cols, (), units)  # no review pass 2: nothing settled
    else:
        _item_tables(acc, cols, units, item_key, scores_cache)
    # _candidate_lengths: every candidate's text and its cache entry, in position order
    entry = acc.texts.entry
    lens: dict[Any, tuple[str, list[Any]]] = {}
    for c in candidate_rows:
        text = c[1]
        lens[c[0]] = (text, entry(text))
    _bias(acc, judgment_rows, bodies, lens)
    # _telemetry: no telemetry, so only the rationales kept for the near-duplicate search
    for k, row in enumerate(judgment_rows):
        rationale = row[_RATIONALE]
        if rationale and len(rationale) >= 20:
            acc.n_rationales += 1
            if len(acc.rationales) < acc.bounds.rationales:
                acc.rationales.append((base + k, item_key, row[_RATER], rationale))


class ScoresCache:
    """A unit's adjudication scores and reasons (:func:`~.adjudication.unit_scores`,
    :func:`~.adjudication.reasons_for`) by its kind and its values per dimension in row order:
    both are functions of those alone (the item and unit only name the row), and a pairwise
    unit's values take few patterns (a few raters' -1/0/1 and -3..3), so most units look up
    what an earlier unit computed. Cleared past ``size`` patterns."""

    def __init__(self, size: int = 65_536) -> None:
        self.size = size
        self.entries: dict[Any, tuple[dict[str, Any], list[str]]] = {}

    def scores(
        self, kind: str, dims: Mapping[str, list[float]], settings: Any
    ) -> tuple[dict[str, Any], list[str]]:
        """``(the row's scores after its item, unit and kind; its reasons)``."""
        key = (kind, *((d, *v) for d, v in dims.items()))
        hit = self.entries.get(key)
        if hit is None:
            row = unit_scores(kind, "", "", dims)
            reasons = reasons_for(row, settings)
            del row["item_id"], row["unit"], row["kind"]
            if len(self.entries) >= self.size:
                self.entries.clear()
            hit = self.entries[key] = (row, reasons)
        return hit


def _item_tables(
    acc: ReportAccumulator,
    cols: Mapping[str, list[Any]],
    units: ItemUnits,
    item_key: str,
    cache: ScoresCache | None,
) -> None:
    """``acc._item_tables(cols, (), units)`` (the triads, the adjudication queue) of a plain
    item, its units' scores looked up in ``cache``."""
    if cache is None:
        acc._item_tables(cols, (), units)
        return
    if len({u for u, d in zip(cols["u"], cols["d"]) if d == "winner"}) >= 3:
        for rater, t in _triads(cols).items():
            tally = acc.triads.setdefault(rater, [0, 0])
            tally[0] += t[0]
            tally[1] += t[1]
    groups, _ = _unit_groups(units, item_key)
    settings = acc.adjudication
    for (kind, unit), dims in groups.items():
        scores, reasons = cache.scores(kind, dims, settings)
        if not reasons:
            continue
        # unit_scores' row (its keys in the same order), then reasons_for's
        row = {"item_id": item_key, "unit": unit, "kind": kind, **scores}
        row["reasons"] = list(reasons)
        acc.queue_total += 1
        most, highest = queue_order(row)
        key = (-most, -highest, _Desc(kind), _Desc(unit))
        entry = (key, acc._queue_seq, row)
        acc._queue_seq += 1
        if len(acc.queue) < acc.max_queue:
            heapq.heappush(acc.queue, entry)
        elif acc.max_queue and key > acc.queue[0][0]:
            heapq.heapreplace(acc.queue, entry)


def _bias(
    acc: ReportAccumulator,
    judgment_rows: list[Any],
    bodies: list[dict[str, Any]],
    lens: Mapping[Any, tuple[str, list[Any]]],
) -> None:
    """``_gold_and_bias`` of an item without gold: position and the length and formatting pairs."""
    chosen: list[int] = []
    rejected: list[int] = []
    features_of = acc.texts.features_of
    for row, body in zip(judgment_rows, bodies):
        acc.any_pairwise = True
        winner = body["winner"]
        if winner == "tie":
            continue  # first_shown_chosen None, no chosen or rejected
        pos = acc.position[row[_RATER]]
        pos[0] += int(winner == "a")
        pos[1] += 1
        a, b = body["shown_order"]
        c_id, r_id = (a, b) if winner == "a" else (b, a)
        if c_id not in lens or r_id not in lens:
            continue
        (text_c, entry_c), (text_r, entry_r) = lens[c_id], lens[r_id]
        chosen.append(entry_c[0])
        rejected.append(entry_r[0])
        acc.formatting.add(features_of(entry_c, text_c), features_of(entry_r, text_r))
    acc._queue_pairs(chosen, rejected)
