"""Quality report: one JSON-able dict and a self-contained HTML page (inline SVG, no network).

``build_report(judgments, items=None, batches=None, gold=None)`` resolves the label set (the
labels exports use, :mod:`.labels`), then computes agreement per batch and
dimension (with bootstrap CIs), a rater table (labels, gold accuracy, leave-one-out agreement
with the others' consensus, median active time, flags), confusion matrices of each rater
against the consensus, length and position bias, telemetry flags and the adjudication queue.
``render_html(report)`` draws it; every piece of text is HTML-escaped (model outputs and ids are
untrusted).

``build_report`` holds every judgment (the reference). ``report_from_items`` gives the same dict
from a project given item by item, in memory that does not grow with it
(:mod:`.accumulate`): counts, alpha, percent agreement, Gwet's AC, the rater table and the bias
audits stay exact at any size; above fixed bounds (50,000 units per agreement row, 500,000 length
pairs, 500,000 active times, 250,000 of one rater, 50,000 rationales) the figure that needs per-unit data is
computed on a seeded uniform sample and the report says so (``ci_sample``, ``sample``,
``median_seconds_sample``, ``telemetry_flags_sample``). Below the bounds both give the same
numbers (to 1e-12, the same bootstrap draws).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from preflab.schema import Item, JudgmentBase, PairwiseJudgment, parse_judgment

from .accumulate import Batches, Bounds, ReportAccumulator, guideline_version_of
from .adjudication import AdjudicationSettings, route_for_adjudication
from .agreement.cohen import confusion_table
from .agreement.preference import agreement_summary, intransitive_triads
from .anchoring import anchoring_html
from .bias import formatting_bias, length_bias, position_bias, word_length
from .gold import gold_accuracy, gold_outcomes, leave_one_out_agreement
from .html_parts import axis_ticks as axis_ticks  # re-exported: its name before html_parts
from .html_parts import bar_svg, escape, fmt, hist_svg, html_table
from .labels import resolve_labels
from .spans import SpanTally
from .table import LabelTable
from .telemetry import telemetry_flags


def load_judgments_jsonl(path: str | Path) -> tuple[list[JudgmentBase], dict[str, Item]]:
    """Judgments from JSONL (one judgment dict per line, as ``parse_judgment`` accepts); a line
    may carry its ``"item"`` (an Item dict), collected by id. Errors say ``file:line: reason``."""
    judgments: list[JudgmentBase] = []
    items: dict[str, Item] = {}
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                data = orjson.loads(line)
                item = data.pop("item", None)
                j = parse_judgment(data)
                if item is not None:
                    items.update(_by_id([Item.model_validate(item)]))
            except Exception as exc:  # report where, then re-raise as a clear error
                raise ValueError(f"{path}:{n}: {exc}") from exc
            judgments.append(j)
    return judgments, items


def _by_id(items: Mapping[str, Item] | Iterable[Item] | None) -> dict[str, Item]:
    """Items by id (an empty dict for none); validation gives every item an id."""
    if items is None:
        return {}
    if isinstance(items, Mapping):
        return dict(items)
    return {it.id: it for it in items if it.id is not None}


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (np.floating,)):
        return _clean(float(x))
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def agreement_by_guideline_version(
    judgments: Iterable[JudgmentBase],
    metrics: Mapping[str, str] | None = None,
    n_boot: int = 200,
) -> list[dict[str, Any]]:
    """Agreement (alpha with CI, percent agreement, Gwet's AC) per guideline version and label
    dimension: the rows of :func:`agreement_summary` with ``batch`` renamed
    ``guideline_version``. Did a change of guidelines make raters agree more (or less)?

    Pass the resolved label set (:func:`preflab.quality.labels.resolve_labels`).
    """
    table = LabelTable.from_judgments(judgments, guideline_version_of)
    if not len(table):
        return []
    rows = agreement_summary(table, metrics=metrics, n_boot=n_boot)
    return [{"guideline_version": r.pop("batch"), **r} for r in rows]


def build_report(
    judgments: Iterable[JudgmentBase],
    items: Mapping[str, Item] | Iterable[Item] | None = None,
    batches: Mapping[str, Any] | Callable[[JudgmentBase], Any] | None = None,
    gold: Mapping[str, Iterable[bool]] | None = None,
    metrics: Mapping[str, str] | None = None,
    n_boot: int = 200,
    adjudication: AdjudicationSettings | None = None,
    max_queue: int = 200,
    include_ai: bool = False,
) -> dict[str, Any]:
    """The report dict. ``gold`` maps a rater to their gold outcomes (bools, in time order).

    Measures the resolved label set of :mod:`preflab.quality.labels` (the labels exports are
    made from: latest label per rater and unit, adjudicated units by their adjudication, AI
    labels only with ``include_ai``), given in row order; ``report["label_set"]`` says which.
    """
    label_set = resolve_labels(judgments, include_ai=include_ai)
    js = label_set.judgments
    item_map = _by_id(items)
    table = LabelTable.from_judgments(js, batches)
    agreement = agreement_summary(table, metrics=metrics, n_boot=n_boot) if len(table) else []
    by_guideline = (
        agreement_by_guideline_version(js, metrics=metrics, n_boot=n_boot)
        if any(j.provenance.guideline_version is not None for j in js)
        else []
    )

    # consensus-based rater stats on the main nominal dimension of each kind
    raters: dict[str, dict[str, Any]] = defaultdict(lambda: {"labels": 0})
    for j in js:
        raters[j.provenance.rater_id]["labels"] += 1
    times: dict[str, list[float]] = defaultdict(list)
    for j in js:
        p = j.provenance
        ms: float | None = None
        if p.telemetry is not None and p.telemetry.active_ms is not None:
            ms = p.telemetry.active_ms
        elif p.started_at and p.submitted_at:
            ms = (p.submitted_at - p.started_at).total_seconds() * 1000
        if ms is not None:
            times[p.rater_id].append(ms)
    for r, ts in times.items():
        raters[r]["median_seconds"] = float(np.median(ts)) / 1000
    confusions = {}
    main = table.where(np.isin(table.dimensions.astype(str), ["winner", "thumb"]))
    if len(main):
        loo = leave_one_out_agreement(main.units, main.raters, main.values)
        for r, consensus in loo.items():
            raters[r]["consensus_agreement"] = consensus["agreement"]
            raters[r]["consensus_n"] = consensus["n"]
        # each rater vs the majority of the others
        by_unit: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for u, r, v in zip(main.units, main.raters, main.values):
            by_unit[u].append((r, v))
        pairs: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
        for labels in by_unit.values():
            for r, v in labels:
                others = [w for other, w in labels if other != r]
                if not others:
                    continue
                vals, counts = np.unique(others, return_counts=True)
                if (counts == counts.max()).sum() == 1:
                    pairs[r][0].append(v)
                    pairs[r][1].append(vals[np.argmax(counts)])
        cats = np.unique(main.values[~np.isnan(main.values)])
        for r, (mine, cons) in pairs.items():
            tab, _ = confusion_table(mine, cons, cats)
            confusions[r] = {"categories": cats.tolist(), "table": tab.astype(int).tolist()}
    honeypots = None
    if gold is None and item_map:
        # honeypots imported with a gold answer grade the raters who labelled them
        honeypots = gold = gold_outcomes(
            js, {key: i.gold.model_dump() for key, i in item_map.items() if i.gold is not None}
        )
    if gold:
        for r, outcomes in gold.items():
            raters[r]["gold"] = gold_accuracy(list(outcomes)).as_dict()
    pairwise = [j for j in js if isinstance(j, PairwiseJudgment)]
    pos = position_bias(pairwise) if pairwise else None
    if pos:
        for r, s in pos["per_rater"].items():
            raters[r]["first_shown_share"] = s["share"]
    length = None
    formatting = None  # markdown bloat and sycophancy: chosen vs rejected (issue 16 §1)
    text_len = None
    if items and pairwise:
        lens, texts = {}, {}
        for it in item_map.values():
            for c in it.candidates:
                texts[(it.id, c.id)] = c.as_text()
                lens[(it.id, c.id)] = word_length(texts[(it.id, c.id)])
        ch, rj = [], []
        texts_c, texts_r = [], []
        for j in pairwise:
            if j.chosen is None:
                continue
            key_c, key_r = (j.item_id, j.chosen), (j.item_id, j.rejected)
            if key_c in lens and key_r in lens:
                ch.append(lens[key_c])
                rj.append(lens[key_r])
                texts_c.append(texts[key_c])
                texts_r.append(texts[key_r])
        if ch:
            length = length_bias(ch, rj)
            formatting = formatting_bias(texts_c, texts_r)

        def text_len(j: JudgmentBase) -> int:
            return sum(lens.get((j.item_id, c), 0) for c in j.candidate_ids())

    flags = telemetry_flags(js, text_len)
    for f in flags:
        raters[f["rater"]].setdefault("flags", defaultdict(int))[f["flag"]] += 1
    triads = intransitive_triads(table)
    for r, t in triads.items():
        if t["triads"]:
            raters[r]["intransitive_rate"] = t["rate"]
    # an item an adjudicator already settled is not queued again (as in the server's queue)
    adjudicated = {j.item_id for j in js if int(j.provenance.review_pass) == 2}
    queue = [
        q for q in route_for_adjudication(table, adjudication) if q["item_id"] not in adjudicated
    ]
    report = {
        "label_set": label_set.describe(),
        "n_judgments": len(js),
        "n_labels": len(table),
        "n_raters": len(raters),
        "kinds": sorted({j.kind for j in js}),
        "agreement": agreement,
        "agreement_by_guideline_version": by_guideline,
        "raters": {r: dict(v) for r, v in sorted(raters.items())},
        "confusion": confusions,
        "position_bias": pos,
        "length_bias": length,
        "formatting_bias": formatting,
        "telemetry_flags": flags[:1000],
        "adjudication_queue": queue[:max_queue],
        "adjudication_total": len(queue),
        "gold_accuracy": gold_accuracy([o for outs in honeypots.values() for o in outs]).as_dict()
        if honeypots
        else None,
    }
    spans = SpanTally()
    by_item: dict[str, list[JudgmentBase]] = {}
    for j in js:
        by_item.setdefault(j.item_id, []).append(j)
    for group in by_item.values():
        spans.add(group)
    if spans.any_spans:  # only a project with critique spans has the section
        report["spans"] = spans.result()
    cleaned: dict[str, Any] = _clean(report)
    return cleaned


def report_from_items(
    records: Iterable[tuple[Sequence[JudgmentBase], Item | None]],
    batches: Batches = None,
    metrics: Mapping[str, str] | None = None,
    n_boot: int = 200,
    adjudication: AdjudicationSettings | None = None,
    max_queue: int = 200,
    include_ai: bool = False,
    bounds: Bounds | None = None,
) -> dict[str, Any]:
    """:func:`build_report` of a project given item by item: ``records`` yields each item's
    judgments (all of them, in row order) with the item (or ``None``), and is read once.

    Memory does not grow with the project: each item is folded into sums as it comes
    (:mod:`preflab.quality.accumulate` says what is exact and what is sampled above which
    bound). Below the bounds the dict equals :func:`build_report`'s on the same judgments.
    """
    acc = ReportAccumulator(
        batches=batches,
        metrics=metrics,
        n_boot=n_boot,
        adjudication=adjudication,
        max_queue=max_queue,
        include_ai=include_ai,
        bounds=bounds,
    )
    for judgments, item in records:
        acc.add(judgments, item)
    return finish_report(acc)


def finish_report(acc: ReportAccumulator) -> dict[str, Any]:
    """The report dict of an accumulator every item was folded into (non-finite floats as
    ``None``, numpy scalars as Python ones), as :func:`report_from_items` returns it."""
    cleaned: dict[str, Any] = _clean(acc.result())
    return cleaned


# ---------------------------------------------------------------- HTML


def _label_set_html(label_set: Mapping[str, Any] | None) -> str:
    if not label_set:
        return ""
    aside = ", ".join(f"{k} {v}" for k, v in (label_set.get("set_aside") or {}).items()) or "none"
    return (
        f"<p>Label set: {escape(label_set.get('rule'))}. Used {escape(label_set.get('judgments_used'))} of "
        f"{escape(label_set.get('judgments_in'))} judgments; set aside: {escape(aside)}.</p>"
    )


def _ci_sample_html(rows: list[Mapping[str, Any]], group: str = "batch") -> str:
    """Which rows' intervals come from a sample of units, and how large."""
    notes = [
        f"{escape(a[group])} {escape(a['kind'])}.{escape(a['dimension'])}: {escape(a['ci_sample']['units'])} "
        f"of {escape(a['ci_sample']['of'])} units"
        for a in rows
        if a.get("ci_sample")
    ]
    if not notes:
        return ""
    return (
        "<p>Alpha's interval bootstrapped on a seeded uniform sample of pairable units "
        f"(alpha itself over all units): {'; '.join(notes)}.</p>"
    )


def _ci_text(d: Mapping[str, Any] | None, key: str = "alpha") -> str:
    if not d:
        return "–"
    return f"{fmt(d.get(key))} [{fmt(d.get('low'))}, {fmt(d.get('high'))}]"


def _judges_html(section: Mapping[str, Any]) -> str:
    """The model judges' audit (``quality.judges.judge_audit``; ``docs/judges.md``)."""
    out = [
        "<h2>Model judges</h2><p>Each judge's labels (<code>source: ai</code>) against the "
        "people's on the same units; intervals are percentile bootstraps "
        f"({escape(section.get('n_boot'))} replicates).</p>"
    ]
    for j in section.get("judges", []):
        out.append(f"<h3>{escape(j['judge'])} (family {escape(j['family'])})</h3>")
        out.append(
            f"<p>{escape(j['labels'])} labels; {escape(j['order_inconsistent'])} order-inconsistent "
            "verdicts (stored excluded, never a preference).</p>"
        )
        out.append(
            html_table(
                [
                    "kind",
                    "dimension",
                    "units",
                    "judge-human alpha [CI]",
                    "equal",
                    "human-human alpha [CI]",
                ],
                [
                    [
                        r["kind"],
                        r["dimension"],
                        r["n_units"],
                        _ci_text(r["judge_human"]),
                        r["judge_human_equal_share"],
                        _ci_text(r["human_human"]),
                    ]
                    for r in j.get("agreement", [])
                ],
            )
        )
        pos, lb, lh, sp = (
            j.get("position_consistency"),
            j.get("length_bias"),
            j.get("length_bias_humans_same_pairs"),
            j.get("self_preference"),
        )
        rows = []
        if pos:
            rows.append(
                [
                    "position consistency",
                    f"{pos['consistent']} of {pos['pairs']} pairs",
                    pos["share_consistent"],
                ]
            )
            rows.append(
                [
                    "first shown chosen",
                    f"{pos['verdicts_non_tie']} verdicts",
                    pos["first_shown_share"],
                ]
            )
        if lb:
            rows.append(
                [
                    "chose the longer answer",
                    f"{lb.get('n_differ')} pairs",
                    lb.get("share_chosen_longer"),
                ]
            )
        if lh:
            rows.append(
                [
                    "people: chose the longer",
                    f"{lh.get('n_differ')} pairs",
                    lh.get("share_chosen_longer"),
                ]
            )
        if sp and sp.get("pairs"):
            rows.append(
                [
                    f"self-preference ({sp['family']})",
                    f"{sp['pairs']} pairs: judge {fmt(sp['judge_own_share'])}, people {fmt(sp['human_own_share'])}",
                    _ci_text(sp, "delta"),
                ]
            )
        if rows:
            out.append(html_table(["audit", "on", "value"], rows))
    return "".join(out)


def render_html(report: Mapping[str, Any], title: str = "preflab quality report") -> str:
    """A self-contained HTML page of a :func:`build_report` dict (no scripts, no network)."""
    out = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{escape(title)}</title><style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}"
        "th{background:#eee}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p>{escape(report.get('n_judgments'))} judgments, {escape(report.get('n_labels'))} labels, "
        f"{escape(report.get('n_raters'))} raters; kinds: {escape(', '.join(report.get('kinds', [])))}</p>",
        _label_set_html(report.get("label_set")),
        "<h2>Agreement per batch and dimension</h2>",
    ]
    ag = report.get("agreement") or []
    out.append(
        html_table(
            [
                "batch",
                "kind",
                "dimension",
                "level",
                "alpha",
                "low",
                "high",
                "% agree",
                "Gwet AC",
                "units",
                "raters",
            ],
            [
                [
                    a["batch"],
                    a["kind"],
                    a["dimension"],
                    a["level"],
                    a["alpha"],
                    a["alpha_low"],
                    a["alpha_high"],
                    a["percent_agreement"],
                    a["gwet_ac"],
                    a["n_units"],
                    a["n_raters"],
                ]
                for a in ag
            ],
        )
    )
    out.append(_ci_sample_html(ag))
    by_version = report.get("agreement_by_guideline_version") or []
    if by_version:
        out.append("<h2>Agreement per guideline version</h2>")
        out.append(
            html_table(
                ["guideline version", "kind", "dimension", "alpha", "low", "high", "units"],
                [
                    [
                        a["guideline_version"],
                        a["kind"],
                        a["dimension"],
                        a["alpha"],
                        a["alpha_low"],
                        a["alpha_high"],
                        a["n_units"],
                    ]
                    for a in by_version
                ],
            )
        )
        out.append(_ci_sample_html(by_version, "guideline_version"))
    out.append(
        bar_svg(
            [
                (
                    f"{a['batch']} {a['kind']}.{a['dimension']}",
                    a["alpha"],
                    a["alpha_low"],
                    a["alpha_high"],
                )
                for a in ag
            ]
        )
    )
    spans = report.get("spans")
    if spans:  # only a project with critique spans (docs/critiques.md)
        out.append("<h2>Critique spans: agreement</h2>")
        out.append(
            f"<p>{escape(spans['measure'])}: {fmt(spans['f1'])} over {spans['units']} answer(s) "
            f"marked by 2+ raters ({spans['judgments_with_spans']} judgments with spans).</p>"
        )
        out.append(
            html_table(
                ["category", "F1", "answers"],
                [[c, v["f1"], v["units"]] for c, v in spans["by_category"].items()],
            )
        )
    out.append("<h2>Raters</h2>")
    rows = []
    for r, s in (report.get("raters") or {}).items():
        g = s.get("gold") or {}
        flags = ", ".join(f"{k}×{v}" for k, v in (s.get("flags") or {}).items())
        rows.append(
            [
                r,
                s.get("labels"),
                g.get("accuracy"),
                s.get("consensus_agreement"),
                s.get("median_seconds"),
                s.get("first_shown_share"),
                flags,
            ]
        )
    out.append(
        html_table(
            [
                "rater",
                "labels",
                "gold acc.",
                "agreement w/ others",
                "median s",
                "first-shown share",
                "flags",
            ],
            rows,
        )
    )
    medians = [
        f"{escape(r)}: {escape(s['median_seconds_sample']['labels'])} of {escape(s['median_seconds_sample']['of'])}"
        for r, s in (report.get("raters") or {}).items()
        if s.get("median_seconds_sample")
    ]
    if medians:
        out.append(
            "<p>Median seconds on a seeded uniform sample of a rater's labels (sample of all): "
            f"{'; '.join(medians)}.</p>"
        )
    conf = report.get("confusion") or {}
    if conf:
        out.append("<h2>Confusion vs consensus of the others</h2>")
        for r, c in list(conf.items())[:50]:
            cats = [str(x) for x in c["categories"]]
            out.append(f"<h3>{escape(r)}</h3>")
            out.append(
                html_table(
                    ["rater \\ consensus", *cats],
                    [[cats[i], *row] for i, row in enumerate(c["table"])],
                )
            )
    pos = report.get("position_bias")
    if pos:
        out.append("<h2>Position bias (share of first-shown chosen)</h2>")
        vals = [("overall", pos["overall"]["share"], None, None)] + [
            (r, s["share"], None, None) for r, s in list(pos["per_rater"].items())[:40]
        ]
        out.append(bar_svg(vals, 0.0, 1.0))
        out.append(
            html_table(
                ["rater", "first chosen", "n", "share", "p", "q (BH)", "flagged"],
                [
                    [
                        r,
                        s["first_chosen"],
                        s["n"],
                        s["share"],
                        s["p_value"],
                        s.get("q_value"),
                        s["flagged"],
                    ]
                    for r, s in pos["per_rater"].items()
                ],
            )
        )
    fb = report.get("formatting_bias")
    if fb:
        out.append("<h2>Formatting and sycophancy (chosen vs rejected)</h2>")
        out.append(
            html_table(
                [
                    "feature",
                    "chosen has it",
                    "rejected has it",
                    "pairs differing",
                    "chosen has more",
                ],
                [
                    [
                        name,
                        f["chosen_share"],
                        f["rejected_share"],
                        f["n_differ"],
                        f["chosen_more_share"],
                    ]
                    for name, f in fb.items()
                ],
            )
        )
    lb = report.get("length_bias")
    if lb:
        out.append("<h2>Length bias</h2>")
        out.append(
            f"<p>Chosen longer in {fmt(lb.get('share_chosen_longer'))} of {escape(lb.get('n_differ'))} pairs with different lengths.</p>"
        )
        if lb.get("sample"):
            out.append(
                f"<p>Ratio quantiles and the logistic slope on a seeded uniform sample of "
                f"{escape(lb['sample']['pairs'])} of {escape(lb['sample']['of'])} pairs (counts, share and "
                "histogram over all pairs).</p>"
            )
        if lb.get("ratio_histogram"):
            out.append(hist_svg(lb["ratio_histogram"], "log2(len chosen / len rejected), -3 … 3"))
        if lb.get("logistic"):
            lg = lb["logistic"]
            out.append(
                f"<p>Logistic slope on log length ratio: {fmt(lg['slope'])} [{fmt(lg['slope_low'])}, {fmt(lg['slope_high'])}]</p>"
            )
    if report.get("judges"):
        out.append(_judges_html(report["judges"]))
    if report.get("anchoring"):  # AI assistance (quality/anchoring.py)
        out.append(anchoring_html(report["anchoring"]))
    q = report.get("adjudication_queue") or []
    out.append(f"<h2>Adjudication queue ({escape(report.get('adjudication_total', len(q)))})</h2>")
    out.append(
        html_table(
            ["item", "unit", "kind", "labels", "reasons"],
            [
                [r["item_id"], r["unit"], r["kind"], r["n_labels"], "; ".join(r["reasons"])]
                for r in q
            ],
        )
    )
    fl = report.get("telemetry_flags") or []
    if fl:
        out.append("<h2>Telemetry flags (evidence, not verdicts)</h2>")
        fs = report.get("telemetry_flags_sample")
        if fs:
            out.append(
                f"<p>Near-duplicate rationales compared within the first {escape(fs['rationales'])} "
                f"(a sample of {escape(fs['of'])}) rationales.</p>"
            )
        out.append(
            html_table(
                ["item", "rater", "flag", "evidence"],
                [
                    [f["item_id"], f["rater"], f["flag"], orjson.dumps(f["evidence"]).decode()]
                    for f in fl[:300]
                ],
            )
        )
    out.append("</body></html>")
    return "".join(out)
