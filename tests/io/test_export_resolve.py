"""Label resolution (preflab.io.export.resolve): which labels count, and how they combine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from preflab.io.export.resolve import (
    DropLog,
    aggregate_pairwise,
    effective_judgments,
    pair_votes,
    resolve_steps,
    resolve_unary,
    rubric_pairs,
)
from preflab.schema import (
    Dimension,
    Item,
    PairwiseJudgment,
    RankingJudgment,
    Rubric,
    RubricJudgment,
    StepsJudgment,
    UnaryJudgment,
    VerbosityPenalty,
    Veto,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def pw(shown, winner, strength, rater, *, review_pass=0, at=None, item="i"):
    return PairwiseJudgment(
        item_id=item,
        shown_order=shown,
        winner=winner,
        strength=strength,
        provenance={
            "rater_id": rater,
            "rater_hash": f"h-{rater}",
            "review_pass": review_pass,
            "submitted_at": at,
        },
    )


def resolve(judgments):
    drops = DropLog()
    pairs = aggregate_pairwise(pair_votes(effective_judgments(judgments)), drops)
    return pairs, drops


def test_reversed_shown_order_still_yields_the_right_chosen():
    # r1 saw (y, x) and picked A (= y); r2 saw (x, y) and picked B (= y): both prefer y.
    pairs, _ = resolve([pw(("y", "x"), "a", 2, "r1"), pw(("x", "y"), "b", 3, "r2")])
    assert [(p.chosen_id, p.rejected_id, p.strength, p.n_raters, p.agreement) for p in pairs] == [
        ("y", "x", 2.5, 2, 1.0)
    ]
    assert pairs[0].rater_hashes == ("h-r1", "h-r2")


def test_latest_revision_per_rater_counts_by_time_then_row_order():
    early, late = T0, T0 + timedelta(minutes=5)
    # submitted_at decides when every revision has one, even against row order
    pairs, _ = resolve(
        [pw(("x", "y"), "b", 1, "r1", at=late), pw(("x", "y"), "a", 2, "r1", at=early)]
    )
    assert (pairs[0].chosen_id, pairs[0].n_raters) == ("y", 1)
    # without times: the later row wins
    pairs, _ = resolve([pw(("x", "y"), "b", 1, "r1"), pw(("x", "y"), "a", 2, "r1")])
    assert (pairs[0].chosen_id, pairs[0].strength) == ("x", 2.0)


def test_review_pass_beats_submission_time():
    pairs, _ = resolve(
        [
            pw(("x", "y"), "b", 1, "r1", review_pass=1, at=T0),
            pw(("x", "y"), "a", 2, "r1", at=T0 + timedelta(1)),
        ]
    )
    assert pairs[0].chosen_id == "y"


def test_adjudication_overrides_every_production_label_of_the_pair():
    production = [pw(("x", "y"), "a", 3, f"r{k}") for k in range(3)]
    adjudicated = pw(("y", "x"), "a", 1, "senior", review_pass=2)
    pairs, _ = resolve([*production, adjudicated])
    assert [(p.chosen_id, p.n_raters, p.strength, p.rater_hashes) for p in pairs] == [
        ("y", 1, 1.0, ("h-senior",))
    ]


def test_adjudication_of_a_pair_overrides_a_production_ranking():
    ranking = RankingJudgment(
        item_id="i", order=[["x"], ["y"], ["z"]], provenance={"rater_id": "r1"}
    )
    adjudicated = pw(("x", "y"), "b", 2, "senior", review_pass=2)
    pairs, _ = resolve([ranking, adjudicated])
    got = {(p.chosen_id, p.rejected_id): p.origin for p in pairs}
    assert got == {("y", "x"): "pairwise", ("x", "z"): "ranking", ("y", "z"): "ranking"}


def test_plurality_ties_and_no_majority_are_dropped_with_reasons():
    # 2 ties vs 1 vote: the tie wins -> dropped as "tie"
    pairs, drops = resolve(
        [
            pw(("x", "y"), "tie", 0, "r1"),
            pw(("x", "y"), "tie", 0, "r2"),
            pw(("x", "y"), "a", 2, "r3"),
        ]
    )
    assert pairs == [] and drops.summary()["aggregation"]["reasons"] == {"tie": 1}
    # 1 / 1 / 1: no majority
    pairs, drops = resolve(
        [pw(("x", "y"), "tie", 0, "r1"), pw(("x", "y"), "b", 1, "r2"), pw(("x", "y"), "a", 2, "r3")]
    )
    assert pairs == [] and drops.summary()["aggregation"]["reasons"] == {"no-majority": 1}
    assert drops.summary()["aggregation"]["sample_item_ids"] == {"no-majority": ["i"]}


def test_strength_is_the_median_of_the_winning_side():
    votes = [pw(("x", "y"), "a", s, f"r{k}") for k, s in enumerate([1, 3, 3])] + [
        pw(("x", "y"), "b", 1, "r9")
    ]
    (pair,), _ = resolve(votes)
    assert (pair.chosen_id, pair.strength, pair.n_raters, pair.agreement) == ("x", 3.0, 4, 0.75)


def test_rankings_expand_to_induced_pairs_and_drop_ties():
    ranking = RankingJudgment(
        item_id="i", order=[["b"], ["a", "c"], ["d"]], provenance={"rater_id": "r1"}
    )
    pairs, drops = resolve([ranking])
    got = sorted((p.chosen_id, p.rejected_id, p.strength) for p in pairs)
    assert got == [
        ("a", "d", 1.0),
        ("b", "a", 1.0),
        ("b", "c", 1.0),
        ("b", "d", 2.0),
        ("c", "d", 1.0),
    ]
    assert drops.summary()["aggregation"]["reasons"] == {"tie": 1}  # (a, c)


def test_a_rater_votes_once_per_pair_across_kinds():
    ranking = RankingJudgment(item_id="i", order=[["x"], ["y"]], provenance={"rater_id": "r1"})
    later = pw(("x", "y"), "b", 2, "r1")
    (pair,), _ = resolve([ranking, later])
    assert (pair.chosen_id, pair.n_raters) == ("y", 1)


RUBRIC = Rubric(
    id="helpful",
    version=2,
    dimensions=[
        Dimension(name="accuracy", scale="ordinal", points=5, weight=2),
        Dimension(name="style", scale="binary"),
    ],
    vetoes=[Veto(name="harmful")],
)
ITEM = Item(
    id="i",
    prompt="p",
    candidates=[
        {"id": "x", "text": "one two"},
        {"id": "y", "text": "one"},
        {"id": "z", "text": "three four five six"},
    ],
)


def grade(cand, scores, rater, vetoes=(), rubric=RUBRIC):
    return RubricJudgment(
        item_id="i",
        candidate_id=cand,
        scores=scores,
        vetoes_failed=list(vetoes),
        provenance={"rater_id": rater, "rubric_id": rubric.id, "rubric_version": rubric.version},
    )


def lookup(rubric):
    return lambda key, version: rubric if (key, version) == (rubric.id, rubric.version) else None


def test_rubric_grades_vote_per_rater_and_a_veto_is_final():
    judgments = [
        grade("x", {"accuracy": 5, "style": 1}, "r1", vetoes=["harmful"]),  # reward 0 (veto)
        grade("x", {"accuracy": 5, "style": 1}, "r2"),  # reward 1
        grade("y", {"accuracy": 4, "style": 1}, "r1"),  # (2*.75 + 1)/3 = 0.8333
        grade("y", {"accuracy": 4, "style": 0}, "r2"),  # 0.5
        grade("z", {"accuracy": 1, "style": 0}, "r1"),  # 0, but passed its vetoes
    ]
    drops = DropLog()
    pairs = {
        (p.chosen_id, p.rejected_id): p
        for p in rubric_pairs(ITEM, judgments, lookup(RUBRIC), drops=drops)
    }
    # x vs y: r1 prefers y (x failed a veto), r2 prefers x -> no majority, not a mean-reward winner
    # x vs z: only r1 graded both: the vetoed x loses to z although both rewards are 0
    assert set(pairs) == {("z", "x"), ("y", "z")}
    assert drops.summary()["aggregation"]["reasons"] == {"no-majority": 1}
    assert pairs[("z", "x")].strength == 3.0 and pairs[("z", "x")].n_raters == 1
    assert (
        pairs[("y", "z")].strength == pytest.approx(3 * 0.8333333)
        and pairs[("y", "z")].origin == "rubric"
    )


def test_rubric_candidates_graded_by_different_raters_are_ordered_by_vetoes_then_mean_reward():
    judgments = [
        grade("x", {"accuracy": 5, "style": 1}, "r1", vetoes=["harmful"]),  # 0, vetoed
        grade("x", {"accuracy": 5, "style": 1}, "r2"),  # 1
        grade("y", {"accuracy": 2, "style": 0}, "r3"),  # 1/6
        grade("z", {"accuracy": 3, "style": 0}, "r4"),  # 1/3
    ]
    pairs = {(p.chosen_id, p.rejected_id): p for p in rubric_pairs(ITEM, judgments, lookup(RUBRIC))}
    # x passed for one rater of two: below y and z (passed for all), whatever its mean reward
    assert set(pairs) == {("y", "x"), ("z", "x"), ("z", "y")}
    assert pairs[("z", "y")].strength == pytest.approx(3 * (1 / 3 - 1 / 6))
    assert pairs[("y", "x")].strength == 3.0 and pairs[("y", "x")].agreement is None
    assert pairs[("y", "x")].n_raters == 3


def test_rubric_verbosity_penalty_and_equal_means():
    rubric = RUBRIC.model_copy(
        update={"verbosity_penalty": VerbosityPenalty(free_length=1, per_unit=0.1)}
    )
    judgments = [
        grade(c, {"accuracy": 5, "style": 1}, "r1", rubric=rubric) for c in ("x", "y", "z")
    ]
    drops = DropLog()
    pairs = rubric_pairs(ITEM, judgments, lookup(rubric), drops=drops)
    # rewards: y 1.0 (1 word), x 0.9 (2 words), z 0.7 (4 words)
    assert [(p.chosen_id, p.rejected_id) for p in pairs] == [("y", "x"), ("x", "z"), ("y", "z")]
    same = [grade(c, {"accuracy": 3, "style": 0}, "r1") for c in ("x", "y")]
    assert rubric_pairs(ITEM, same, lookup(RUBRIC), drops=drops) == []
    assert drops.summary()["aggregation"]["reasons"] == {"tie": 1}


def test_rubric_with_unknown_version_is_dropped():
    drops = DropLog()
    j = grade(
        "x", {"accuracy": 5, "style": 1}, "r1", rubric=RUBRIC.model_copy(update={"version": 9})
    )
    assert (
        rubric_pairs(
            ITEM, [j, grade("y", {"accuracy": 1, "style": 1}, "r1")], lookup(RUBRIC), drops=drops
        )
        == []
    )
    assert drops.summary()["rubric"]["reasons"] == {"unknown-rubric": 1}


def test_unary_majority_and_split():
    def up(r, label, c="x"):
        return UnaryJudgment(item_id="i", candidate_id=c, label=label, provenance={"rater_id": r})

    drops = DropLog()
    got = resolve_unary(
        [
            j
            for _, j in effective_judgments(
                [
                    up("r1", True),
                    up("r2", True),
                    up("r3", False),
                    up("r1", True, "y"),
                    up("r2", False, "y"),
                ]
            )
        ],
        drops,
    )
    assert [(u.candidate_id, u.label, u.n_raters) for u in got] == [("x", True, 3)]
    assert drops.summary()["aggregation"]["reasons"] == {"no-majority": 1}


def steps(verdicts, rater, review_pass=0):
    return StepsJudgment(
        item_id="i",
        candidate_id="x",
        steps=["s1", "s2", "s3", "s4"],
        verdicts=verdicts,
        provenance={"rater_id": rater, "review_pass": review_pass},
    )


def test_steps_up_to_and_including_the_first_error_neutral_is_correct():
    (one,) = resolve_steps([steps([1, 0, -1], "r1")])
    assert one.steps == ("s1", "s2", "s3") and one.labels == (True, True, False)
    # per step, the raters who labelled it vote (r1 stopped at its error on step 2)
    (maj,) = resolve_steps(
        [
            steps([1, -1], "r1"),
            steps([1, 1, 1, 1], "r2"),
            steps([1, 1, -1], "r3"),
            steps([1, 1, -1], "r4"),
        ]
    )
    assert (
        maj.labels == (True, True, False) and maj.steps == ("s1", "s2", "s3") and maj.n_raters == 4
    )
    drops = DropLog()
    assert resolve_steps([steps([1, -1], "r1"), steps([1, 1, 1, 1], "r2")], drops) == []
    assert drops.summary()["aggregation"]["reasons"] == {"no-majority": 1}


def test_steps_adjudication_overrides():
    effective = [
        j
        for _, j in effective_judgments(
            [steps([1, -1], "r1"), steps([1, 1, 1, 1], "r2", review_pass=2)]
        )
    ]
    (res,) = resolve_steps(effective)
    assert res.labels == (True, True, True, True) and res.n_raters == 1


def test_dawid_skene_aggregator_trusts_the_reliable_rater():
    """Two careless raters who answer at random outvote a careful one under plurality; Dawid-Skene
    learns their confusion matrices from the other items and follows the careful rater."""
    import random

    from preflab.io.export import aggregate_pairwise, aggregate_pairwise_dawid_skene
    from preflab.io.export.resolve import PairVote

    rng = random.Random(7)
    truth = {f"i{n}": rng.choice([-2, 2]) for n in range(300)}
    votes = []
    for item, score in truth.items():
        votes.append(
            PairVote(item, "a", "b", "careful", "h-careful", score, "pairwise", 0, (0, None, 0))
        )
        for r in ("careless1", "careless2"):
            votes.append(
                PairVote(
                    item, "a", "b", r, "h-" + r, rng.choice([-2, 2]), "pairwise", 0, (0, None, 0)
                )
            )
        # a fourth rater, right 80% of the time
        honest = score if rng.random() < 0.8 else -score
        votes.append(
            PairVote(item, "a", "b", "honest", "h-honest", honest, "pairwise", 0, (0, None, 0))
        )

    def accuracy(pairs):
        right = sum((p.chosen_id == "a") == (truth[p.item_id] < 0) for p in pairs)
        return right / len(truth)

    plurality = accuracy(aggregate_pairwise(votes))
    ds = accuracy(aggregate_pairwise_dawid_skene(votes))
    # measured: plurality 0.71, Dawid-Skene 0.95 (EM finds the careful rater, if not perfectly)
    assert ds > 0.9 and ds > plurality + 0.15, (ds, plurality)


@pytest.mark.parametrize("export_unit", ["words", "chars"])
def test_rubric_verbosity_penalty_is_measured_in_the_rubric_unit_whatever_the_export_unit(
    export_unit,
):
    # Before: the penalty was measured in the export's unit (the same data gave margin 0.27 in
    # words and 1.5 in characters). A rubric that says words is measured in words.
    from preflab.quality.bias import length_function

    rubric = RUBRIC.model_copy(
        update={"verbosity_penalty": VerbosityPenalty(free_length=1, per_unit=0.1)}
    )
    judgments = [
        grade(c, {"accuracy": 5, "style": 1}, "r1", rubric=rubric) for c in ("x", "y", "z")
    ]
    pairs = rubric_pairs(ITEM, judgments, lookup(rubric), length_fn=length_function(export_unit))
    by_pair = {(p.chosen_id, p.rejected_id): p.strength for p in pairs}
    # rewards in words: y 1.0, x 0.9, z 0.7 (as in test_rubric_verbosity_penalty_and_equal_means)
    assert by_pair[("y", "x")] == pytest.approx(3 * 0.1)
    assert by_pair[("y", "z")] == pytest.approx(3 * 0.3)


def test_rubric_in_tokens_uses_the_default_tokenizer_when_the_export_counts_words():
    from preflab.quality.bias import default_token_length

    tokens = default_token_length()
    rubric = RUBRIC.model_copy(
        update={"verbosity_penalty": VerbosityPenalty(free_length=0, per_unit=0.01, unit="tokens")}
    )
    judgments = [grade(c, {"accuracy": 5, "style": 1}, "r1", rubric=rubric) for c in ("x", "z")]
    (pair,) = rubric_pairs(ITEM, judgments, lookup(rubric))
    texts = {c.id: c.as_text() for c in ITEM.candidates}
    assert pair.strength == pytest.approx(3 * 0.01 * abs(tokens(texts["z"]) - tokens(texts["x"])))


def test_the_drop_log_samples_follow_the_pipeline_steps_not_the_call_order():
    """A streamed export runs the steps chunk after chunk; the samples come out as the
    whole-project pipeline would drop them: every item of an earlier step first."""
    chunked, whole = DropLog(sample_size=3), DropLog(sample_size=3)
    for chunk in (["a", "b"], ["c", "d"]):
        chunked.at("read")
        for item in chunk:
            chunked.drop("aggregation", "no-majority", f"thumb-{item}")
        chunked.at("aggregate")
        for item in chunk:
            chunked.drop("aggregation", "no-majority", f"pair-{item}")
    for phase, kind in (("read", "thumb"), ("aggregate", "pair")):
        whole.at(phase)
        for item in "abcd":
            whole.drop("aggregation", "no-majority", f"{kind}-{item}")
    assert chunked.summary() == whole.summary()
    sample = chunked.summary()["aggregation"]["sample_item_ids"]["no-majority"]
    assert sample == ["thumb-a", "thumb-b", "thumb-c"]
    assert chunked.summary()["aggregation"]["dropped"] == 8
