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


def _kept(tally: AgreementTally) -> dict[tuple[str, str], int]:
    return {key: c.kept for key, c in tally.cells.items() if c.sample is None and c.kept}


def test_past_the_budget_over_all_batches_the_fullest_samples_first():
    """Labels kept whole are bounded over every batch x dimension together: past the budget the
    cell holding the most starts sampling (so a project of many batches keeps at most the budget,
    not a bound's worth per batch); the cells left whole give the exact figures."""
    exact_tally = _tally(10**9)
    exact = _winner(exact_tally.figures(n_boot=50))
    sizes = {b: exact_tally.cells[(b, "winner")].kept for b in exact}
    assert len(set(sizes.values())) == 2  # two batches of different sizes
    budget = max(sizes.values())  # both together do not fit; the larger alone does
    tally = AgreementTally(bound=10**9, budget=budget)
    for labels in _chunks():
        tally.add(labels)
        assert sum(_kept(tally).values()) <= budget  # after every chunk
    got = _winner(tally.figures(n_boot=50))
    fullest = max(sizes, key=sizes.get)
    (smaller,) = set(sizes) - {fullest}
    assert "ci_sample" in got[fullest] and got[fullest]["alpha"] == exact[fullest]["alpha"]
    assert got[smaller] == exact[smaller]  # kept whole: the exact figures, no sample stated
    # without a budget problem nothing changes
    roomy = AgreementTally(bound=10**9, budget=sum(sizes.values()) + 10**6)
    for labels in _chunks():
        roomy.add(labels)
    assert _winner(roomy.figures(n_boot=50)) == exact


def test_many_batches_keep_at_most_the_budget():
    """Twenty batches of a few units each: with a budget of 25 units, the labels kept whole
    never exceed it, and every batch's alpha is still the exact one (its sums over every unit)."""
    rng = random.Random(3)
    chunks = []
    for c in range(5):
        labels = []
        for b in range(20):
            for i in range(4):
                for r in range(3):
                    j = PairwiseJudgment(
                        item_id=f"b{b}-c{c}-i{i}",
                        shown_order=("x", "y"),
                        winner="a" if rng.random() < 0.7 else "b",
                        strength=2,
                        provenance={"rater_id": f"r{r}"},
                    )
                    labels.append((j, f"batch {b:02d}"))
        chunks.append(labels)
    tally, whole = AgreementTally(bound=10**9, budget=25), AgreementTally(bound=10**9)
    for labels in chunks:
        tally.add(labels)
        whole.add(labels)
        assert sum(_kept(tally).values()) <= 25
    figures, exact = _winner(tally.figures(n_boot=20)), _winner(whole.figures(n_boot=20))
    assert len(figures) == 20
    assert [f["alpha"] for f in figures.values()] == [f["alpha"] for f in exact.values()]
    assert sum("ci_sample" in f for f in figures.values()) >= 15
    assert not any("ci_sample" in f for f in exact.values())
