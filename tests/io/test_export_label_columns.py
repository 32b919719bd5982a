"""The agreement tally's label columns equal the label table's (issue 27, the export's CPU):
:func:`preflab.io.export.agreement_gate.label_columns` writes a pairwise judgment's rows out
without a ``LabelRow`` each; every kind gives the rows of ``LabelTable.from_judgments``."""

from __future__ import annotations

import numpy as np

from preflab.io.export.agreement_gate import label_columns
from preflab.quality.table import LabelTable
from preflab.schema import PairwiseJudgment, RankingJudgment, UnaryJudgment


def _judgments():
    p = {"rater_id": "r1"}
    return [
        (
            PairwiseJudgment(
                item_id="i", shown_order=("y", "x"), winner="a", strength=2, provenance=p
            ),
            3,
        ),
        (
            PairwiseJudgment(
                item_id="i", shown_order=("x", "y"), winner="a", strength=1, provenance=p
            ),
            None,
        ),
        (PairwiseJudgment(item_id="j", shown_order=("a", "b"), winner="b", provenance=p), 4),
        (
            PairwiseJudgment(
                item_id="j", shown_order=("b", "a"), winner="tie", strength=0, provenance=p
            ),
            4,
        ),
        (RankingJudgment(item_id="k", order=[["b"], ["a", "c"]], provenance=p), 4),
        (UnaryJudgment(item_id="k", candidate_id="c", label=True, provenance=p), None),
    ]


def test_label_columns_equal_the_label_table():
    labels = _judgments()
    batch = {id(j): "unbatched" if b is None else f"batch-{b}" for j, b in labels}
    table = LabelTable.from_judgments([j for j, _ in labels], lambda j: batch[id(j)])
    ours = label_columns(labels)
    assert len(ours.units) == len(table.units) == 11
    for name in ("units", "dimensions", "batches"):
        assert getattr(ours, name).tolist() == getattr(table, name).tolist(), name
        assert getattr(ours, name).dtype == object
    assert ours.values.dtype == table.values.dtype == np.float64
    assert ours.values.tolist() == table.values.tolist()
    assert {-1.0, 0.0, 2.0} <= set(ours.values.tolist())  # both directions, a tie, a strength
