"""Dawid-Skene decides only from reliabilities it can know (issue 28 section 3).

With raters seen on two or three items each, the export under ``--aggregation dawid-skene`` wrote
a 2-2 split as ``Y > X`` with margin 2.0 and an X / Y / tie split as ``Y > X`` with margin 1.0
(majority vote drops both): confusion matrices estimated from a handful of labels (and a class
prior over an arbitrary canonical order) were reported as a confident preference. Now raters
below ``MIN_LABELS`` labels share one confusion matrix, the model is symmetric in the canonical
order, and the margin is scaled by the posterior gap.
"""

from __future__ import annotations

import random

import numpy as np
import orjson
import pytest

from preflab.io.export import AGGREGATORS, ExportOptions, export_project
from preflab.io.export.aggregators import aggregate_pairwise_dawid_skene
from preflab.io.export.resolve import DropLog, PairVote
from preflab.quality.aggregation import dawid_skene
from preflab.schema import Item, PairwiseJudgment
from preflab.store import db, repo, transaction

X, Y = "The answer X.", "The answer Y."

#: (item, rater, winner: "x" / "y" / "tie"); every rater is seen on two or three items
VOTES = [
    ("i1", "r1", "x"),
    ("i1", "r2", "x"),
    ("i1", "r3", "y"),
    ("i1", "r4", "y"),  # a 2-2 split
    ("i2", "r1", "x"),
    ("i2", "r5", "y"),
    ("i2", "r6", "tie"),  # X / Y / tie
    ("i3", "r3", "y"),
    ("i3", "r4", "y"),
    ("i3", "r5", "y"),
    ("i4", "r2", "x"),
    ("i4", "r6", "y"),
    ("i4", "r3", "y"),
    ("i5", "r4", "y"),
    ("i5", "r5", "y"),
    ("i5", "r6", "y"),
]


def build(engine, ids=("x", "y")) -> None:
    """The project: items i1..i5, each the same two answers under candidate ids ``ids``."""
    cx, cy = ids
    with transaction(engine) as s:
        p = repo.create_project(s, "ds")
        for n in range(1, 6):
            repo.add_item(
                s,
                p,
                Item(
                    id=f"i{n}",
                    prompt=f"Question {n}?",
                    candidates=[{"id": cx, "text": X}, {"id": cy, "text": Y}],
                ),
            )
        for item, rater, winner in VOTES:
            repo.add_judgment(
                s,
                p,
                PairwiseJudgment(
                    item_id=item,
                    shown_order=(cx, cy),
                    winner={"x": "a", "y": "b", "tie": "tie"}[winner],
                    strength=0 if winner == "tie" else 2,
                    provenance={"rater_id": rater},
                ),
            )


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    yield engine
    engine.dispose()


def exported(engine, tmp_path, aggregation: str, sub: str) -> tuple[dict, dict]:
    out = tmp_path / sub
    manifest = export_project(
        engine,
        "ds",
        ExportOptions(format="trl-reward", out=out, length_gate=None, force=True),
        aggregator=AGGREGATORS[aggregation],
    )
    rows = [orjson.loads(x) for x in (out / "train.jsonl").read_bytes().splitlines()]
    return {r["prompt"]: r for r in rows}, manifest


def test_splits_among_raters_seen_on_a_few_items_are_not_decided(engine, tmp_path):
    build(engine)
    rows, manifest = exported(engine, tmp_path, "dawid-skene", "ds")
    # before: "Question 1?" (2-2) and "Question 2?" (X / Y / tie) exported as Y > X, margin 2.0
    assert "Question 1?" not in rows and "Question 2?" not in rows
    assert manifest["gates"]["aggregation"]["reasons"] == {"no-majority": 2}
    majority, _ = exported(engine, tmp_path, "majority", "maj")
    assert set(rows) == set(majority)  # with equal weights, the same units as majority vote
    for prompt, row in rows.items():
        assert row["chosen"] == majority[prompt]["chosen"] == Y
        # the margin is the raters' strength scaled by the posterior gap, never above it
        assert 0 < row["margin"] <= majority[prompt]["margin"] == 2.0


def test_the_verdicts_do_not_depend_on_the_canonical_order(tmp_path, sqlite_url):
    results = []
    for n, ids in enumerate([("x", "y"), ("y", "x")]):  # X sorts first, then second
        engine = db.open_db(f"{sqlite_url[:-3]}{n}.db")
        build(engine, ids)
        rows, _ = exported(engine, tmp_path, "dawid-skene", f"ds{n}")
        engine.dispose()
        results.append(
            {p: (r["chosen"], r["rejected"], round(r["margin"], 6)) for p, r in rows.items()}
        )
    assert results[0] == results[1]


def vote(item, rater, score):
    return PairVote(item, "a", "b", rater, "h" + rater, score, "pairwise", 0, (0, None, 0))


def test_raters_below_the_evidence_threshold_share_one_confusion_matrix():
    rng = random.Random(3)
    units, raters, labels = [], [], []
    for n in range(200):
        truth = rng.choice([-1, 1])
        for r in ("expert", "guesser"):  # 200 labels each: their own matrices
            units.append(n)
            raters.append(r)
            labels.append(truth if r == "expert" else rng.choice([-1, 1]))
        if n < 60:  # twenty newcomers with three labels each
            units.append(n)
            raters.append(f"new{n // 3}")
            labels.append(truth)
    fit = dawid_skene(units, raters, labels)
    conf = dict(zip(fit.raters.tolist(), fit.confusion, strict=True))
    newcomers = [conf[f"new{k}"] for k in range(20)]
    assert all(np.array_equal(c, newcomers[0]) for c in newcomers)
    assert fit.reliability_of()["expert"] > 0.9 > 0.6 > fit.reliability_of()["guesser"]
    # min_labels=0: every rater their own matrix again (the 1979 model)
    own = dawid_skene(units, raters, labels, min_labels=0)
    own_conf = dict(zip(own.raters.tolist(), own.confusion, strict=True))
    assert not all(np.allclose(own_conf[f"new{k}"], own_conf["new0"]) for k in range(20))
    from preflab.quality.aggregation.dawid_skene import MIN_LABELS

    assert MIN_LABELS == 20


def test_the_margin_follows_the_posterior():
    # established raters: two careful, one who guesses; the careful pair decides confidently
    rng = random.Random(5)
    votes = []
    for n in range(100):
        truth = rng.choice([-2, 2])
        votes += [vote(f"u{n}", "c1", truth), vote(f"u{n}", "c2", truth)]
        votes.append(vote(f"u{n}", "g", rng.choice([-2, 2])))
    drops = DropLog()
    pairs = aggregate_pairwise_dawid_skene(votes, drops)
    assert len(pairs) == 100 and not drops.counts
    assert all(1.9 < p.strength <= 2.0 for p in pairs)
    # one unit where the guesser alone spoke: the model is unsure, the margin small or dropped
    lone = aggregate_pairwise_dawid_skene([*votes, vote("lone", "g", 2)], DropLog())
    by_item = {p.item_id: p for p in lone}
    assert "lone" not in by_item or by_item["lone"].strength < 1.0


def test_judgments_used_leaves_out_what_adjudication_set_aside(engine, tmp_path):
    # issue 28 section 7: three production labels and one adjudication were counted as 4 used;
    # one decides
    with transaction(engine) as s:
        p = repo.create_project(s, "ds")
        repo.add_item(
            s,
            p,
            Item(id="i1", prompt="Q?", candidates=[{"id": "x", "text": X}, {"id": "y", "text": Y}]),
        )
        for rater, winner, review_pass in (
            ("r1", "a", 0),
            ("r2", "b", 0),
            ("r3", "b", 0),
            ("adj", "a", 2),
        ):
            repo.add_judgment(
                s,
                p,
                PairwiseJudgment(
                    item_id="i1",
                    shown_order=("x", "y"),
                    winner=winner,
                    strength=2,
                    provenance={"rater_id": rater, "review_pass": review_pass},
                ),
            )
    rows, manifest = exported(engine, tmp_path, "majority", "adj")
    assert rows["Q?"]["chosen"] == X
    assert manifest["counts"]["judgments_in"] == 4
    assert manifest["counts"]["judgments_used"] == 1
