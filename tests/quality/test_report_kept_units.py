"""An agreement row's kept units, held compactly (``quality/accumulate.py``: ``KeptUnits``,
``Patterns``): the same units and values in, the same figures out."""

from __future__ import annotations

import random

import numpy as np

from preflab.quality.accumulate import AgreementGroup, KeptUnits, Reservoir
from preflab.quality.agreement.krippendorff import krippendorff_alpha_ci
from preflab.quality.agreement.percent import percent_agreement


def test_kept_units_give_back_names_and_values_in_order():
    kept = KeptUnits()
    units = [("b::x|y", (1.0, 1.0)), ("a::東京|ü", (-1.0, 1.0, 1.0)), ("c::\ud800", (0.5,))]
    for name, values in units:
        kept.add(name, values)
    assert len(kept) == 3
    assert kept.unit_names() == [n for n, _ in units]
    assert list(kept.values()) == [v for _, v in units]
    assert len(kept.patterns) == 3


def _units(rng: random.Random, n: int, continuous: bool) -> list[tuple[str, list[float]]]:
    out = []
    for k in range(n):
        m = rng.choice((1, 2, 3, 3))
        if continuous:
            values = [round(rng.uniform(0, 5), 3) for _ in range(m)]
        else:
            values = [float(rng.choice((-1, 1, 1))) for _ in range(m)]
        out.append((f"item{rng.randrange(10**6)}-{k}::a|b", values))
    return out


def test_an_exact_row_equals_the_reference_on_its_units():
    units = _units(random.Random(3), 60, continuous=False)
    group = AgreementGroup(bound=100)
    for name, values in units:
        group.add_unit(name, values, ["r"])
    row = group.row(("all", "pairwise", "winner"), {}, n_boot=50)
    names = np.array([n for n, vs in units for _ in vs], dtype=object)
    values = np.array([v for _, vs in units for v in vs])
    ci = krippendorff_alpha_ci(names, values, "nominal", n_boot=50, seed=0)
    assert (row["alpha"], row["alpha_low"], row["alpha_high"]) == (ci.estimate, ci.low, ci.high)
    assert row["percent_agreement"] == percent_agreement(names, values)
    assert "ci_sample" not in row


def test_a_sampled_row_draws_its_interval_from_the_seeded_reservoir():
    """Continuous values: nearly every unit its own pattern, so the reservoir's pattern table
    is compacted many times; the interval is the one of the reservoir's units."""
    bound = 5
    units = _units(random.Random(5), 400, continuous=True)
    group = AgreementGroup(bound=bound)
    reference = Reservoir(bound, seed=0)
    for name, values in units:
        group.add_unit(name, values, ["r"])
        finite = tuple(sorted(values))
        if len(finite) >= 2:
            reference.add(finite)
    assert group.sample is not None
    assert len(group.sample_patterns) <= 2 * bound + 1
    row = group.row(("all", "rubric", "score"), {"score": "interval"}, n_boot=40)
    names = np.array([str(k) for k, vs in enumerate(reference.items) for _ in vs], dtype=object)
    values = np.array([v for vs in reference.items for v in vs])
    ci = krippendorff_alpha_ci(names, values, "interval", n_boot=40, seed=0)
    assert (row["alpha_low"], row["alpha_high"]) == (ci.low, ci.high)
    assert row["ci_sample"] == {"units": bound, "of": reference.seen}
