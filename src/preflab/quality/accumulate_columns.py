"""The report's store path for plain pairwise items: the accumulator fed from stored columns.

:func:`preflab.io.quality_source.accumulate_in` reads a project lean
(:func:`preflab.io.quality_read.iter_lean_chunks`: a judgment's few fields the report reads, its
shown order, winner and strength taken out of its body in SQL, a candidate's key and text; no
schema object). Building a ``PairwiseJudgment``, its ``Provenance`` and the ``Item`` with its
``Candidate`` s for every judgment cost ~17 % of the report at 1M judgments, and
:meth:`ReportAccumulator.add <preflab.quality.accumulate.ReportAccumulator.add>` then reads back
only a few of their fields. :func:`add_plain_item` folds a **plain pairwise** item straight from
its lean judgments into the same
sums, through the same helpers ``add`` calls (``_item_units``, ``_agreement_of_units``,
``_main``, ``_item_tables``, the text cache, ``_pairs``), in the same order, so the
accumulator's state ends exactly as ``add`` leaves it; any other item is left to the caller,
which builds its objects and calls ``add`` unchanged.

Plain (the reader's per-judgment test in SQL, then :func:`plain_item`; each condition is where
``add`` or one of its helpers would do something this path does not):

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

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .accumulate import (
    AgreementGroup,
    ItemUnits,
    ReportAccumulator,
    _item_units,
    _triads,
    _unit_groups,
)
from .adjudication import reasons_for, unit_scores
from .bias import FEATURE_NAMES

# positions in a lean judgment (preflab.io.quality_read.LeanJudgment: 13 columns, the first
# eight these)
_RATER, _A, _B, _WINNER, _STRENGTH, _VERSION, _RATIONALE, _MS = range(8)


def columns_apply(acc: ReportAccumulator) -> bool:
    """Whether ``acc`` can take plain items from columns at all (its batches are per item)."""
    return not callable(acc.batches)


def plain_item(judgments: list[Any], candidates: list[Any], has_gold: bool) -> bool:
    """Whether an item whose every judgment the reader found plain (pairwise, no telemetry, no
    adjudication, no model's unless those count, no spans: ``preflab.io.quality_read``) is plain
    pairwise (the module docstring): no gold, every candidate a text, no two judgments of one
    (pair, rater); ``judgments`` its lean judgments, ``candidates`` its ``(key, text, stored)``."""
    if has_gold:
        return False
    for c in candidates:
        if c[1] is None:  # a message list: as_text joins its assistant turns
            return False
    n = len(judgments)
    if n < 2:
        return True
    # no rater twice: no (pair, rater) twice (two or three judgments compared in place)
    if n == 2:
        if judgments[0][_RATER] != judgments[1][_RATER]:
            return True
    elif n == 3:
        r0, r1, r2 = judgments[0][_RATER], judgments[1][_RATER], judgments[2][_RATER]
        if r0 != r1 and r0 != r2 and r1 != r2:
            return True
    elif len({j[_RATER] for j in judgments}) == n:
        return True
    seen: set[tuple[str, str, str]] = set()
    for j in judgments:
        rater, a, b = j[_RATER], j[_A], j[_B]
        key = (a, b, rater) if a <= b else (b, a, rater)
        if key in seen:
            return False
        seen.add(key)
    return True


def _decode(item_key: str, j: Sequence[Any]) -> tuple[str, str, int]:
    """A lean judgment's canonical first candidate ``lo``, its agreement unit
    (``item::lo|hi``) and direction (-1: ``lo`` won, 1: the other, 0: a tie)."""
    a, b, winner = j[_A], j[_B], j[_WINNER]
    lo, hi = (a, b) if a <= b else (b, a)
    direction = 0 if winner == "tie" else (-1 if (a if winner == "a" else b) == lo else 1)
    return lo, f"{item_key}::{lo}|{hi}", direction


def add_plain_item(
    acc: ReportAccumulator,
    item_key: str,
    judgments: list[Any],
    candidates: list[Any],
    batch: str,
    scores_cache: ScoresCache | None = None,
) -> None:
    """``acc.add(judgments, item)`` of a plain pairwise item (:func:`plain_item`) from its lean
    judgments and ``(key, text, stored)`` candidates: ``batch`` what ``acc._batch`` gives its
    judgments; ``scores_cache`` (:class:`ScoresCache`, one per accumulator) saves the
    adjudication scores of value patterns already seen."""
    n = len(judgments)
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
    for j in judgments:
        rater = j[_RATER]
        labels[rater] += 1
        rater_order.setdefault(rater, None)
        gv = j[_VERSION]
        if gv is not None:
            acc.any_version = True
        version = "unrecorded" if gv is None else f"v{gv}"
        _, unit, direction = _decode(item_key, j)
        strength = j[_STRENGTH]
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
        if j[_MS] is not None:
            times.add(rater, j[_MS])
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
    for key, text, stored in candidates:
        lens[key] = (text, entry(text) if stored is None else _stored_entry(stored))
    _bias(acc, judgments, lens)
    # _telemetry: no telemetry, so only the rationales kept for the near-duplicate search
    for k, j in enumerate(judgments):
        rationale = j[_RATIONALE]
        if rationale and len(rationale) >= 20:
            acc.n_rationales += 1
            if len(acc.rationales) < acc.bounds.rationales:
                acc.rationales.append((base + k, item_key, j[_RATER], rationale))


def _stored_entry(stored: tuple[int, tuple[int, ...]]) -> list[Any]:
    """:meth:`TextFeatures.entry <.accumulate.TextFeatures.entry>` of a text whose statistics
    are stored (a lean candidate's ``(words, features)``): what it makes of the memo's."""
    return [stored[0], dict(zip(FEATURE_NAMES, stored[1], strict=True))]


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
        acc.queue_push(row, kind, unit)


def _bias(
    acc: ReportAccumulator,
    judgments: list[Any],
    lens: Mapping[Any, tuple[str, list[Any]]],
) -> None:
    """``_gold_and_bias`` of an item without gold: position and the length and formatting pairs."""
    chosen: list[int] = []
    rejected: list[int] = []
    features_of = acc.texts.features_of
    for j in judgments:
        acc.any_pairwise = True
        winner = j[_WINNER]
        if winner == "tie":
            continue  # first_shown_chosen None, no chosen or rejected
        pos = acc.position[j[_RATER]]
        pos[0] += int(winner == "a")
        pos[1] += 1
        a, b = j[_A], j[_B]
        c_id, r_id = (a, b) if winner == "a" else (b, a)
        if c_id not in lens or r_id not in lens:
            continue
        (text_c, entry_c), (text_r, entry_r) = lens[c_id], lens[r_id]
        chosen.append(entry_c[0])
        rejected.append(entry_r[0])
        acc.formatting.add(features_of(entry_c, text_c), features_of(entry_r, text_r))
    acc._queue_pairs(chosen, rejected)


#: a candidate's text in a run (:func:`_fold_run`): its word length, its formatting features in
#: FEATURE_NAMES order when stored (else None), its text and its text cache entry (None when
#: stored)
_Text = tuple[int, Any, Any, Any]

#: one plain item of a run (:func:`add_plain_items`): its key, lean judgments
#: (``preflab.io.quality_read.LeanJudgment``), ``(key, text, stored)`` candidates and batch, as
#: :func:`add_plain_item` takes them
PlainItem = tuple[str, list[Any], list[Any], str]


def add_plain_items(
    acc: ReportAccumulator,
    run: Sequence[PlainItem],
    scores_cache: ScoresCache | None = None,
) -> None:
    """:func:`add_plain_item` of each item of ``run`` (consecutive plain items, in order), the
    accumulator's state left exactly as those calls leave it, with the per-item work done once
    for the run: each helper's state depends only on the order of its own updates, so the run is
    folded helper by helper (label counts, times, rationales and the text cache in one pass over
    the judgments; the agreement rows' units in bulk per row; leave-one-out and confusion from
    per-unit value counts with numpy; the adjudication queue, position and formatting counts
    and length pairs per run). An item whose judgments carry more than one guideline version
    (``_item_units`` is ``None`` there) goes through :func:`add_plain_item` between the runs
    around it."""
    cache = scores_cache if scores_cache is not None else ScoresCache()
    start = 0
    for k, item in enumerate(run):
        js = item[1]
        if len(js) < 2:
            continue
        gv = js[0][_VERSION]
        for j in js:
            if j[_VERSION] != gv:
                _fold_run(acc, run[start:k], cache)
                add_plain_item(acc, *item, cache)
                start = k + 1
                break
    _fold_run(acc, run[start:], cache)


def _fold_run(acc: ReportAccumulator, run: Sequence[PlainItem], cache: ScoresCache) -> None:
    """:func:`add_plain_items` of a run whose items each have one guideline version."""
    if not run:
        return
    labels, rater_order, times = acc.labels, acc.rater_order, acc.times
    entry = acc.texts.entry
    max_rationales = acc.bounds.rationales
    rationales = acc.rationales
    acc.any_item = True
    # the agreement rows' units per row, in the order add would give them
    pending: dict[tuple[int, tuple[str, str, str]], tuple[list[Any], ...]] = {}
    # (batch, version, dimension): its two rows' lists in pending (made at its first unit)
    targets: dict[tuple[str, str, str], tuple[tuple[list[Any], ...], ...]] = {}
    # the winner rows for _main: unit code, rater code, direction + 1
    m_unit: list[int] = []
    m_rater: list[int] = []
    m_value: list[int] = []
    rater_code: dict[str, int] = {}
    run_raters: list[str] = []  # every judgment's rater, in order
    # the adjudication queue's units: (item key, unit, winner values, strength values)
    queue_units: list[tuple[str, str, list[float], list[float]]] = []
    triad_items: list[tuple[str, list[Any]]] = []
    # position counts and the decided pairs' candidates (_Text s)
    first_shown: list[int] = []
    decided_rater: list[int] = []
    chosen_entries: list[_Text] = []
    rejected_entries: list[_Text] = []
    n_unit = 0
    for item_key, judgments, candidates, batch in run:
        n = len(judgments)
        acc.judgments_in += n
        base = acc.n_used
        acc.n_used += n
        if not n:
            continue
        acc.kinds.add("pairwise")
        gv = judgments[0][_VERSION]
        if gv is not None:
            acc.any_version = True
        version = "unrecorded" if gv is None else f"v{gv}"
        # per unit of the item (first-appearance order): winner values and raters; the units
        # with a strength in the order of their first strength
        w_units: dict[str, tuple[list[float], list[Any], int]] = {}
        s_units: dict[str, tuple[list[float], list[Any]]] = {}
        n_rows = 0
        lens: dict[Any, _Text] = {}
        for c_key, text, stored in candidates:
            if stored is None:
                made = entry(text)  # the text cache's entry, in the order add makes them
                lens[c_key] = (made[0], None, text, made)
            else:
                lens[c_key] = (stored[0], stored[1], text, None)
        for k, j in enumerate(judgments):
            # a lean judgment's 13 columns (io/quality_read.py), the last five the reader's
            rater, a, b, winner, strength, _, rationale, ms, _, _, _, _, _ = j
            lo, hi = (a, b) if a <= b else (b, a)
            unit = f"{item_key}::{lo}|{hi}"
            direction = 0 if winner == "tie" else (-1 if (a if winner == "a" else b) == lo else 1)
            won = w_units.get(unit)
            if won is None:
                won = w_units[unit] = ([], [], n_unit + len(w_units))
            won[0].append(float(direction))
            won[1].append(rater)
            n_rows += 1
            if strength is not None:
                got = s_units.get(unit)
                if got is None:
                    got = s_units[unit] = ([], [])
                got[0].append(float(direction * strength))
                got[1].append(rater)
                n_rows += 1
            run_raters.append(rater)
            code = rater_code.get(rater)
            if code is None:
                code = rater_code[rater] = len(rater_code)
            m_unit.append(won[2])
            m_rater.append(code)
            m_value.append(direction + 1)
            if ms is not None:
                times.add(rater, ms)
            if winner != "tie":
                first_shown.append(int(winner == "a"))
                decided_rater.append(code)
                c_id, r_id = (a, b) if winner == "a" else (b, a)
                if c_id in lens and r_id in lens:
                    chosen_entries.append(lens[c_id])
                    rejected_entries.append(lens[r_id])
            if rationale and len(rationale) >= 20:
                acc.n_rationales += 1
                if len(rationales) < max_rationales:
                    rationales.append((base + k, item_key, rater, rationale))
        acc.n_labels += n_rows
        n_unit += len(w_units)
        # the agreement rows (_agreement_of_units: each unit to its batch's row and its
        # version's; a row's state depends only on the order of its own units: the winner
        # units in the order of their first row, the strength units of their first strength)
        # (a plain item's values are finite: _finite_sorted is their sorted tuple)
        for dim, units in (("winner", w_units), ("strength", s_units)):
            if not units:
                continue
            pair = targets.get((batch, version, dim))
            if pair is None:
                pair = targets[(batch, version, dim)] = tuple(
                    pending.setdefault((which, (key, "pairwise", dim)), ([], [], [], []))
                    for which, key in ((0, batch), (1, version))
                )
            for unit, (vals, unit_raters, *_) in units.items():
                finite = tuple(sorted(vals))
                for listed in pair:
                    listed[0].append(unit)
                    listed[1].append(len(vals))
                    listed[2].append(finite)
                    listed[3].extend(unit_raters)
        for unit, (vals, *_) in w_units.items():
            s = s_units.get(unit)
            queue_units.append((item_key, unit, vals, s[0] if s is not None else []))
        if len(w_units) >= 3:
            triad_items.append((item_key, judgments))
    # label counts and first-seen rater order: nothing reads them within a run
    labels.update(run_raters)
    rater_order.update(dict.fromkeys(run_raters))
    acc.any_pairwise = acc.any_pairwise or bool(m_unit)
    _agreement_rows(acc, pending)
    _main_of_run(acc, m_unit, m_rater, m_value, list(rater_code), n_unit)
    for item_key, judgments in triad_items:
        cols = _winner_cols(item_key, judgments)
        for rater, t in _triads(cols).items():
            tally = acc.triads.setdefault(rater, [0, 0])
            tally[0] += t[0]
            tally[1] += t[1]
    _queue_of_run(acc, queue_units, cache)
    if first_shown:
        names = list(rater_code)
        codes = np.asarray(decided_rater, dtype=np.int64)
        firsts = np.bincount(codes[np.asarray(first_shown, dtype=bool)], minlength=len(names))
        decided = np.bincount(codes, minlength=len(names))
        for code in np.flatnonzero(decided).tolist():
            pos = acc.position[names[code]]
            pos[0] += int(firsts[code])
            pos[1] += int(decided[code])
    if chosen_entries:
        features_of = acc.texts.features_of

        def features(c: _Text) -> tuple[int, ...]:
            stored: tuple[int, ...] | None = c[1]
            if stored is not None:
                return stored
            made = features_of(c[3], c[2])
            return tuple(made[name] for name in FEATURE_NAMES)

        acc.formatting.add_rows(
            [features(c) for c in chosen_entries], [features(c) for c in rejected_entries]
        )
        acc._queue_pairs([c[0] for c in chosen_entries], [c[0] for c in rejected_entries])


def _agreement_rows(
    acc: ReportAccumulator, pending: Mapping[tuple[int, tuple[str, str, str]], Sequence[Any]]
) -> None:
    """A run's units into their agreement rows (0: the batch's, 1: the guideline version's),
    each row's units in bulk (:meth:`~.accumulate.AgreementGroup.add_sorted_many`)."""
    bound = acc.bounds.units
    for (which, key), (units, n_values, finites, raters) in pending.items():
        rows = acc.groups if which == 0 else acc.by_version
        group = rows.get(key)
        if group is None:
            group = rows[key] = AgreementGroup(bound, acc.kept_names)
        group.add_sorted_many(units, n_values, finites, raters)


def _main_of_run(
    acc: ReportAccumulator,
    m_unit: list[int],
    m_rater: list[int],
    m_value: list[int],
    names: list[str],
    n_unit: int,
) -> None:
    """``acc._main`` of a run's winner rows (``m_unit``: the unit's code, in first-appearance
    order; ``m_rater``: the rater's code in ``names``; ``m_value``: the direction + 1). In a
    plain item every unit's raters are distinct and no value is missing (``_main``'s simple
    unit): per row, the others' counts are the unit's counts less the row's own value, the
    leave-one-out score is 1 (the row's value the others' one top), 0.5 (among tied tops) or
    0, and the confusion table counts (value, the others' top) where the top is unique. The
    scores are multiples of 0.5, so their sums are exact in any order; the confusion tables are
    made in the order ``_main`` makes them (unit by unit, rows in order)."""
    if not m_unit:
        return
    u = np.asarray(m_unit, dtype=np.int64)
    r = np.asarray(m_rater, dtype=np.int64)
    v = np.asarray(m_value, dtype=np.int64)
    counts = np.bincount(u * 3 + v, minlength=3 * n_unit).reshape(n_unit, 3)
    acc.main_values.update(float(x - 1) for x in np.flatnonzero(counts.sum(axis=0)).tolist())
    loo, confusion = acc.loo, acc.confusion
    for name in names:
        if name not in loo:
            loo[name] = [0.0, 0]
    rows = np.arange(len(u))
    others = counts[u]
    others[rows, v] -= 1
    valid = others.sum(axis=1) >= 1  # someone else labelled the unit
    top = others.max(axis=1)
    n_top = (others == top[:, None]).sum(axis=1)
    mine_top = others[rows, v] == top
    score = np.where(mine_top, np.where(n_top == 1, 1.0, 0.5), 0.0)
    k = len(names)
    sums = np.bincount(r[valid], weights=score[valid], minlength=k)
    ns = np.bincount(r[valid], minlength=k)
    for code in np.flatnonzero(ns).tolist():
        tally = loo[names[code]]
        tally[0] += float(sums[code])
        tally[1] += int(ns[code])
    decided = valid & (n_top == 1)
    if not decided.any():
        return
    order = np.argsort(u, kind="stable")
    order = order[decided[order]]
    # new raters' tables in the order of their first decided row
    raters_in_order = r[order]
    _, first = np.unique(raters_in_order, return_index=True)
    for code in raters_in_order[np.sort(first)].tolist():
        if names[code] not in confusion:
            confusion[names[code]] = Counter()
    tops = others.argmax(axis=1)
    cell = (r * 3 + v) * 3 + tops
    cells, n_cells = np.unique(cell[decided], return_counts=True)
    for c, n in zip(cells.tolist(), n_cells.tolist()):
        code, rest = divmod(c, 9)
        mine, cons = divmod(rest, 3)
        confusion[names[code]][(float(mine - 1), float(cons - 1))] += n


def _queue_of_run(
    acc: ReportAccumulator,
    queue_units: list[tuple[str, str, list[float], list[float]]],
    cache: ScoresCache,
) -> None:
    """The adjudication queue's rows of a run's units, in order (:func:`_item_tables`)."""
    settings = acc.adjudication
    entries = cache.entries
    for item_key, unit, winners, strengths in queue_units:
        # the cache's key (ScoresCache.scores) made in place: a hit needs no dims
        if strengths:
            hit = entries.get(("pairwise", ("winner", *winners), ("strength", *strengths)))
        else:
            hit = entries.get(("pairwise", ("winner", *winners)))
        if hit is None:
            dims = {"winner": winners, "strength": strengths} if strengths else {"winner": winners}
            hit = cache.scores("pairwise", dims, settings)
        scores, reasons = hit
        if not reasons:
            continue
        row = {"item_id": item_key, "unit": unit, "kind": "pairwise", **scores}
        row["reasons"] = list(reasons)
        acc.queue_push(row, "pairwise", unit)


def _winner_cols(item_key: str, judgments: list[Any]) -> dict[str, list[Any]]:
    """The winner rows of a plain item's label columns (what :func:`_triads` reads)."""
    cols: dict[str, list[Any]] = {"u": [], "r": [], "v": [], "d": []}
    for j in judgments:
        _, unit, direction = _decode(item_key, j)
        cols["u"].append(unit)
        cols["r"].append(j[_RATER])
        cols["v"].append(float(direction))
        cols["d"].append("winner")
    return cols
