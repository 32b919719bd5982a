"""The agreement gate's kept labels are bounded (issue 27): a batch x dimension keeps the labels
of up to ``KEPT_UNITS`` pairable units; past it alpha comes from its integer sums over every unit
and the interval from a seeded sample of that many units, stated as ``ci_sample``."""

from __future__ import annotations

import random

import numpy as np

from preflab.io.export import agreement_gate
from preflab.io.export.agreement_gate import AgreementTally, _patterns, agreement_card
from preflab.quality.agreement import krippendorff_alpha_ci
from preflab.schema import PairwiseJudgment


def _chunks(seed: int = 5, n_chunks: int = 6, per_chunk: int = 30):
    """Labels with their batch, a chunk of items at a time: 2-4 raters a pair, mostly agreeing,
    some items labelled once (not pairable), two batches."""
    rng = random.Random(seed)
    out = []
    for c in range(n_chunks):
        labels = []
        for i in range(per_chunk):
            item = f"c{c}-i{i:03d}"
            favourite = rng.choice("ab")
            for r in range(rng.choice((1, 2, 3, 3, 4))):
                winner = favourite if rng.random() < 0.8 else rng.choice("ab")
                j = PairwiseJudgment(
                    item_id=item,
                    shown_order=("x", "y"),
                    winner=winner,
                    strength=rng.choice((1, 2, 3)),
                    provenance={"rater_id": f"r{r}"},
                )
                labels.append((j, i % 2))
        out.append(labels)
    return out


def _tally(bound: int) -> AgreementTally:
    tally = AgreementTally(bound=bound)
    for labels in _chunks():
        tally.add(labels)
    return tally


def _winner(figures):
    return {f["batch"]: f for f in figures if f["dimension"] == "winner"}


def test_below_the_bound_the_figures_are_the_exact_ones():
    exact = _tally(10**9).figures(n_boot=50)
    pairable = max(f["items_with_2plus_raters"] for f in exact)
    assert _tally(pairable).figures(n_boot=50) == exact  # at the bound: still exact
    assert not any("ci_sample" in f for f in exact)


def test_past_the_bound_alpha_is_exact_and_the_interval_a_stated_sample():
    exact_tally = _tally(10**9)
    exact = _winner(exact_tally.figures(n_boot=50))
    bound = 20
    sampled = _winner(_tally(bound).figures(n_boot=50))
    assert sampled.keys() == exact.keys()
    for batch, entry in sampled.items():
        cell = exact_tally.cells[(batch, "winner")]
        # the sample the bounded tally should hold: algorithm R over the pairable units in the
        # order they came (chunk by chunk, a chunk's units in id order), seed 0
        patterns = [
            p
            for codes, values in zip(cell.code_parts, cell.value_parts, strict=True)
            for p in _patterns(codes, values)
        ]
        assert len(patterns) > bound
        rng, kept = random.Random(0), []
        for seen, p in enumerate(patterns, start=1):
            if len(kept) < bound:
                kept.append(p)
            elif (k := rng.randrange(seen)) < bound:
                kept[k] = p
        units = np.repeat(np.arange(bound), [len(p) for p in kept])
        values = np.array([x for p in kept for x in p])
        ci = krippendorff_alpha_ci(units, values, "nominal", n_boot=50)
        assert entry["ci_sample"] == {"units": bound, "of": len(patterns)}
        assert entry["ci95"] == [round(float(ci.low), 4), round(float(ci.high), 4)]
        assert entry["alpha"] == exact[batch]["alpha"]  # sums over every unit
        rest = {k: v for k, v in entry.items() if k not in ("ci95", "ci_sample")}
        assert rest == {k: v for k, v in exact[batch].items() if k != "ci95"}
        assert not exact_tally.cells[(batch, "winner")].sample
        assert _tally(bound).cells[(batch, "winner")].unit_parts == []  # no label kept


def test_the_card_states_the_sample(monkeypatch):
    monkeypatch.setattr(agreement_gate, "KEPT_UNITS", 20)
    tally = AgreementTally()
    for labels in _chunks():
        tally.add(labels)
    gate = agreement_gate.agreement_gate(tally, 0.0, force=False)
    (entry, *_) = [f for f in gate["by_batch_dimension"] if f["dimension"] == "winner"]
    card = agreement_card(gate)
    assert f"interval on 20 of {entry['ci_sample']['of']} units" in card
