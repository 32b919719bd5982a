"""The votes of plain pairwise labels (issue 27, the export's CPU): ``pair_votes``' fast path
(:func:`preflab.io.export.resolve._plain_pair_votes`) gives exactly the general path's votes,
in its order, and declines every shape it does not cover (a ranking, a rubric grade, an
adjudication, a rater with two labels on one pair), so the general path decides those."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from preflab.io.export import resolve
from preflab.schema import PairwiseJudgment, RankingJudgment


def _pairwise(item, shown, winner, strength, rater, *, review_pass=0, at=None, rater_hash=None):
    prov = {"rater_id": rater, "review_pass": review_pass}
    if at is not None:
        prov["submitted_at"] = at
    if rater_hash is not None:
        prov["rater_hash"] = rater_hash
    return PairwiseJudgment(
        item_id=item, shown_order=shown, winner=winner, strength=strength, provenance=prov
    )


def _random_labels(rng: random.Random, n: int) -> list[tuple[int, PairwiseJudgment]]:
    """Plain pairwise labels: several pairs of one item (both shown orders), every winner and
    strength (unknown too), naive and aware times or none, hashes or none; one per pair x rater."""
    cands = ["a", "b", "c", "B", "é"]
    seen: set[tuple[str, str, str]] = set()
    out = []
    t0 = datetime(2026, 1, 1)
    while len(out) < n:
        x, y = rng.sample(cands, 2)
        rater = rng.choice(["r1", "r2", "r10", "R", "z"])
        key = (min(x, y), max(x, y), rater)
        if key in seen:
            continue
        seen.add(key)
        winner = rng.choice(["a", "b", "tie"])
        strength = 0 if winner == "tie" else rng.choice([None, 1, 2, 3])
        at = rng.choice([None, t0 + timedelta(minutes=rng.randrange(100)), datetime.now(UTC)])
        out.append(
            (
                rng.randrange(1000),
                _pairwise(
                    "item",
                    (x, y),
                    winner,
                    strength,
                    rater,
                    at=at,
                    rater_hash=rng.choice([None, "h-" + rater]),
                ),
            )
        )
    return out


def _general(labelled):
    return resolve.pair_votes(labelled, [])  # any ``extra`` but () takes the general path


@pytest.mark.parametrize("seed", range(40))
def test_the_fast_path_equals_the_general_path(seed):
    rng = random.Random(seed)
    labelled = _random_labels(rng, rng.randrange(0, 12))
    fast = resolve._plain_pair_votes(labelled)
    assert fast is not None
    assert fast == _general(labelled)
    assert resolve.pair_votes(labelled) == fast  # the default call takes it
    if len(labelled) > 1:
        assert [(v.lo, v.hi, v.rater) for v in fast] == sorted((v.lo, v.hi, v.rater) for v in fast)


def test_unknown_strengths_ties_and_directions_are_the_general_paths():
    labelled = [
        (0, _pairwise("i", ("y", "x"), "a", None, "r1")),
        (1, _pairwise("i", ("x", "y"), "b", 2, "r2")),
        (2, _pairwise("i", ("x", "y"), "tie", 0, "r3")),
    ]
    fast = resolve._plain_pair_votes(labelled)
    assert fast == _general(labelled)
    assert [v.score for v in fast] == [float("inf"), 2.0, 0.0]


def test_shapes_it_does_not_cover_go_to_the_general_path():
    one = _pairwise("i", ("x", "y"), "a", 1, "r1")
    twice = [(0, one), (1, _pairwise("i", ("y", "x"), "a", 2, "r1"))]  # r1 twice on one pair
    assert resolve._plain_pair_votes(twice) is None
    assert len(resolve.pair_votes(twice)) == len(_general(twice)) == 1
    assert resolve.pair_votes(twice) == _general(twice)
    adjudicated = [(0, one), (1, _pairwise("i", ("x", "y"), "b", 3, "adj", review_pass=2))]
    assert resolve._plain_pair_votes(adjudicated) is None
    assert [v.rater for v in resolve.pair_votes(adjudicated)] == ["adj"]  # the override
    ranked = [
        (0, one),
        (1, RankingJudgment(item_id="i", order=[["x"], ["y"]], provenance={"rater_id": "r2"})),
    ]
    assert resolve._plain_pair_votes(ranked) is None
    assert resolve.pair_votes(ranked) == _general(ranked)
    assert {v.origin for v in resolve.pair_votes(ranked)} == {"pairwise", "ranking"}


# -- one item's label set and votes at once (Collector.read's plain items) ----------------


def _effective_then_votes(judgments, order):
    effective = resolve.effective_judgments(judgments, order)
    return effective, resolve.pair_votes(effective, [])


@pytest.mark.parametrize("seed", range(30))
def test_plain_pairwise_equals_the_label_set_then_the_votes(seed):
    rng = random.Random(seed)
    labelled = _random_labels(rng, rng.randrange(1, 10))
    judgments = [j for _, j in labelled]
    order = rng.sample(range(100), len(judgments))  # row orders, not in list order
    fast = resolve.plain_pairwise(judgments, order)
    assert fast is not None
    assert fast == _effective_then_votes(judgments, order)


def test_a_revision_or_an_adjudication_is_not_plain():
    first = _pairwise("i", ("x", "y"), "a", 1, "r1", at=datetime(2026, 1, 1))
    revised = _pairwise("i", ("y", "x"), "a", 3, "r1", at=datetime(2026, 1, 2))
    assert resolve.plain_pairwise([first, revised], [1, 2]) is None
    effective, votes = _effective_then_votes([first, revised], [1, 2])
    assert [j for _, j in effective] == [revised] and len(votes) == 1
    adj = _pairwise("i", ("x", "y"), "b", 2, "r9", review_pass=2)
    assert resolve.plain_pairwise([first, adj], [1, 2]) is None


@pytest.mark.parametrize("seed", range(20))
def test_plurality_pair_is_aggregate_pairwises_decision(seed):
    """:func:`~.resolve.plurality_pair` (the rows path's plurality, no vote object) decides a
    unit as :func:`~.resolve.aggregate_pairwise` does: the same pair, or the same drop; scores
    with unknown (infinite) and zero strengths, ties, no majority, repeated hashes."""
    rng = random.Random(seed)
    choices = [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, -resolve.UNKNOWN_VOTE_STRENGTH]
    choices.append(resolve.UNKNOWN_VOTE_STRENGTH)
    outcomes = set()
    for _ in range(200):
        n = rng.randint(1, 6)
        scores = [rng.choice(choices) for _ in range(n)]
        hashes = [rng.choice("hhijk") + str(rng.randint(0, 2)) for _ in range(n)]
        votes = [
            resolve.PairVote("it", "a", "b", f"r{k}", h, s, "pairwise", 0, (0, None, k))
            for k, (s, h) in enumerate(zip(scores, hashes, strict=True))
        ]
        drops = resolve.DropLog()
        expected = resolve.aggregate_pairwise(votes, drops)
        got = resolve.plurality_pair("it", "a", "b", scores, hashes)
        if expected:
            assert [got] == expected
            outcomes.add("pair")
        else:
            assert drops.counts["aggregation"] == {got: 1}
            outcomes.add(got)
    assert outcomes == {"pair", "tie", "no-majority"}
