"""The agreement gate's ungated dimension (``strength``) kept as alpha's integer sums
(``io/export/agreement_gate.py: _fold``): the same figure as alpha over every label."""

from __future__ import annotations

import random

import numpy as np

from preflab.io.export.agreement_gate import NOT_GATED, _Cell, _fold
from preflab.quality.agreement import krippendorff_alpha_ci
from preflab.quality.mergeable import GroupAgreement, alpha_figures


def test_strength_sums_give_alpha_over_the_labels():
    assert "strength" in NOT_GATED
    rng = random.Random(11)
    cell = _Cell()
    all_units, all_values = [], []
    for chunk in range(5):  # chunk by chunk, as the tally adds them
        units, values = [], []
        for u in range(40):
            for _ in range(rng.choice((2, 3, 3, 4))):
                units.append(u)
                values.append(rng.choice((0.25, 0.5, 0.75, 1.0, 1.0)))
        _fold(cell, np.array(units), np.array(values))
        all_units += [f"{chunk}-{u}" for u in units]
        all_values += values
    reference = krippendorff_alpha_ci(
        np.array(all_units, dtype=object), np.array(all_values), "ordinal", n_boot=0
    )
    sums = GroupAgreement(0, 0, cell.pairable, 0, frozenset(), True, cell.coincidence, cell.agree)
    assert cell.pairable == 200
    assert abs(alpha_figures(sums, "ordinal")["alpha"] - reference.estimate) < 1e-12
    assert not cell.unit_parts  # no label kept
