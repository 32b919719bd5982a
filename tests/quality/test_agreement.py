"""Agreement measures: published reference values and property tests against reference packages."""

from __future__ import annotations

import math
from itertools import combinations

import krippendorff
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats import inter_rater

from preflab.quality.agreement import (
    alpha_from_matrix,
    cohens_kappa,
    cohens_kappa_table,
    fleiss_kappa,
    fleiss_kappa_long,
    gwet_ac,
    krippendorff_alpha,
    krippendorff_alpha_ci,
    mean_pairwise_kappa,
    pairwise_cohens_kappa,
    percent_agreement,
)
from preflab.quality.table import matrix_to_long

n = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section E (4 observers x 12
# units, missing values): nominal 0.743 (= 113/152), ordinal 0.815, interval 0.849, ratio 0.797.
K2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
    [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
]

# Wikipedia, "Krippendorff's alpha", worked example (3 coders x 15 units):
# nominal 0.691358, interval 0.810845.
WIKI = [
    [n, n, n, n, n, 3, 4, 1, 2, 1, 1, 3, 3, n, 3],
    [1, n, 2, 1, 3, 3, 4, 3, n, n, n, n, n, n, n],
    [n, n, 2, 1, 3, 4, 4, n, 2, 1, 1, 3, 3, n, 4],
]

# Fleiss (1971) / Wikipedia "Fleiss' kappa" worked example: 10 subjects, 14 raters -> 0.20993.
FLEISS = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


class TestKrippendorffReference:
    def test_krippendorff_2011_nominal_is_113_over_152(self):
        assert alpha_from_matrix(K2011, "nominal") == pytest.approx(113 / 152, abs=1e-12)

    @pytest.mark.parametrize(
        "level,expected", [("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
    )
    def test_krippendorff_2011_other_levels(self, level, expected):
        assert alpha_from_matrix(K2011, level) == pytest.approx(expected, abs=5e-4)

    @pytest.mark.parametrize("level,expected", [("nominal", 0.691358), ("interval", 0.810845)])
    def test_wikipedia_example(self, level, expected):
        assert alpha_from_matrix(WIKI, level) == pytest.approx(expected, abs=5e-7)

    def test_long_table_with_string_ids_equals_matrix_form(self):
        u, r, v = matrix_to_long(K2011)
        units = np.array([f"unit-{x}" for x in u], dtype=object)
        raters = np.array([f"rater-{x}" for x in r], dtype=object)
        assert krippendorff_alpha(units, v, "ordinal") == alpha_from_matrix(K2011, "ordinal")
        del raters

    def test_nan_rows_and_single_label_units_are_ignored(self):
        u, _, v = matrix_to_long(K2011)
        u2 = np.concatenate([u, [100, 101, 101]])
        v2 = np.concatenate([v, [3.0, 1.0, n]])
        assert krippendorff_alpha(u2, v2) == pytest.approx(113 / 152, abs=1e-12)

    def test_undefined_alpha_is_nan(self):
        assert math.isnan(krippendorff_alpha([1, 1, 2, 2], [3, 3, 3, 3]))
        assert math.isnan(krippendorff_alpha([1, 2], [3, 4]))

    def test_wrong_length_column_is_reported(self):
        with pytest.raises(ValueError, match="units has 3 entries but the label table has 2"):
            krippendorff_alpha([1, 2, 3], [1.0, 2.0])

    def test_unknown_level_is_reported(self):
        with pytest.raises(ValueError, match="unknown level 'nominall'"):
            krippendorff_alpha([1, 1], [1, 2], "nominall")

    @pytest.mark.slow
    def test_many_distinct_values_use_the_moment_path(self, monkeypatch):
        from preflab.quality.agreement import krippendorff as K

        rng = np.random.default_rng(3)
        u = rng.integers(0, 300, 2000)
        v = np.round(rng.normal(size=2000) + (u % 5), 2)
        dense = {lvl: krippendorff_alpha(u, v, lvl) for lvl in ("nominal", "interval")}
        # the dense path is the one checked against the krippendorff package above
        ref = krippendorff.alpha(reliability_data=_matrix(u, v)[0], level_of_measurement="interval")
        assert dense["interval"] == pytest.approx(ref, abs=1e-9)
        monkeypatch.setattr(K, "MAX_DENSE_DOMAIN", 10)
        for level, value in dense.items():
            assert krippendorff_alpha(u, v, level) == pytest.approx(value, abs=1e-9)
        with pytest.raises(ValueError, match="too many for ordinal alpha"):
            krippendorff_alpha(u, v, "ordinal")


def _matrix(units, values):
    """Long table -> raters x units matrix where each unit's labels fill slots 0..m-1."""
    units = np.asarray(units)
    order = np.argsort(units, kind="stable")
    u_sorted = units[order]
    uniq, start, counts = np.unique(u_sorted, return_index=True, return_counts=True)
    slot = np.arange(len(units)) - np.repeat(start, counts)
    mat = np.full((counts.max(), len(uniq)), np.nan)
    mat[slot, np.searchsorted(uniq, u_sorted)] = np.asarray(values, float)[order]
    return mat, uniq


class TestAlphaCI:
    def test_interval_contains_estimate_and_is_seeded(self):
        a = krippendorff_alpha_ci(*_long(WIKI), "nominal", n_boot=300, seed=1)
        b = krippendorff_alpha_ci(*_long(WIKI), "nominal", n_boot=300, seed=1)
        assert a == b
        assert a.low <= a.estimate <= a.high
        assert a.estimate == pytest.approx(0.691358, abs=5e-7)

    def test_interval_narrows_with_more_units(self):
        rng = np.random.default_rng(0)

        def sim(n_units):
            truth = rng.integers(1, 4, n_units)
            units = np.repeat(np.arange(n_units), 3)
            vals = np.repeat(truth, 3).astype(float)
            noise = rng.random(len(vals)) < 0.3
            vals[noise] = rng.integers(1, 4, noise.sum())
            ci = krippendorff_alpha_ci(units, vals, "nominal", n_boot=200)
            return ci.high - ci.low

        assert sim(2000) < sim(100)


def _long(mat):
    u, _, v = matrix_to_long(mat)
    return u, v


class TestFleiss:
    def test_fleiss_1971_wikipedia_example(self):
        assert fleiss_kappa(FLEISS) == pytest.approx(0.20993, abs=5e-6)

    def test_long_form_equals_count_form(self):
        units, values = [], []
        for i, row in enumerate(FLEISS):
            for cat, count in enumerate(row):
                units += [i] * count
                values += [cat] * count
        assert fleiss_kappa_long(units, values) == pytest.approx(fleiss_kappa(FLEISS), abs=1e-12)


class TestCohen:
    def test_artstein_poesio_2x2(self):
        # Artstein & Poesio (2008), Computational Linguistics 34(4): kappa = 8/23.
        assert cohens_kappa_table([[20, 20], [10, 50]]) == pytest.approx(8 / 23, abs=1e-12)

    # Artstein & Poesio (2008), weighted example: coder A 46/44/10, coder B 50/40/10 with the
    # 4 disagreements being A=1, B=0. Unweighted 0.931507, linear 0.941176, quadratic 0.954128.
    Y1 = [0] * 46 + [1] * 4 + [1] * 40 + [2] * 10
    Y2 = [0] * 46 + [0] * 4 + [1] * 40 + [2] * 10

    @pytest.mark.parametrize(
        "weights,expected", [(None, 0.931507), ("linear", 0.941176), ("quadratic", 0.954128)]
    )
    def test_weighted_reference(self, weights, expected):
        ours = cohens_kappa(self.Y1, self.Y2, weights)
        assert ours == pytest.approx(expected, abs=5e-7)
        assert ours == pytest.approx(
            cohen_kappa_score(self.Y1, self.Y2, weights=weights), abs=1e-12
        )

    def test_pairwise_and_mean(self):
        units = [0, 0, 1, 1, 2, 2, 0, 1, 2]
        raters = ["a", "b", "a", "b", "a", "b", "c", "c", "c"]
        values = [1, 1, 0, 1, 2, 2, 1, 0, 0]
        pairs = pairwise_cohens_kappa(units, raters, values)
        assert set(pairs) == {("a", "b"), ("a", "c"), ("b", "c")}
        assert pairs[("a", "b")]["n"] == 3
        assert pairs[("a", "b")]["agreement"] == pytest.approx(2 / 3)
        expected = cohen_kappa_score([1, 0, 2], [1, 1, 2], labels=[0, 1, 2])
        assert pairs[("a", "b")]["kappa"] == pytest.approx(expected, abs=1e-12)
        mean = mean_pairwise_kappa(units, raters, values)
        assert mean == pytest.approx(np.mean([p["kappa"] for p in pairs.values()]))


class TestPercentAndGwet:
    def test_percent_agreement(self):
        # unit 0: 3 agree -> 1; unit 1: 2 of 3 -> 2/6 ordered pairs agree = 1/3
        assert percent_agreement([0, 0, 0, 1, 1, 1], [1, 1, 1, 1, 1, 2]) == pytest.approx(2 / 3)

    def test_gwet_kappa_paradox(self):
        # Gwet (2008) formula worked by hand: p_a = 118/125, pi_1 = 243/250,
        # p_e = 2 * 0.972 * 0.028 = 0.054432, AC1 = (0.944 - 0.054432) / (1 - 0.054432).
        y1 = [1] * 118 + [1] * 5 + [2] * 2
        y2 = [1] * 118 + [2] * 5 + [1] * 2
        units = list(range(125)) * 2
        expected = (118 / 125 - 0.054432) / (1 - 0.054432)
        assert gwet_ac(units, y1 + y2) == pytest.approx(expected, abs=1e-12)
        assert cohens_kappa(y1, y2) < 0 < 0.9 < gwet_ac(units, y1 + y2)

    def test_gwet_ac2_with_identity_weights_equals_ac1_and_quadratic_rewards_near_misses(self):
        units = [0, 0, 1, 1, 2, 2, 3, 3]
        vals = [1, 2, 2, 3, 1, 1, 3, 3]
        ac1 = gwet_ac(units, vals)
        assert gwet_ac(units, vals, "quadratic") > ac1
        with pytest.raises(ValueError, match="weights must be"):
            gwet_ac(units, vals, "cubic")


# ---------------------------------------------------------------- property tests vs packages

PROP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def reliability_data(draw, max_raters=5, max_units=25, max_value=5, p_missing=0.3):
    r = draw(st.integers(2, max_raters))
    u = draw(st.integers(2, max_units))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    mat = rng.integers(1, max_value + 1, size=(r, u)).astype(float)
    mat[rng.random((r, u)) < p_missing] = np.nan
    return mat


@PROP
@given(reliability_data(), st.sampled_from(["nominal", "ordinal", "interval", "ratio"]))
def test_alpha_matches_krippendorff_package(mat, level):
    pairable = (~np.isnan(mat)).sum(axis=0) >= 2
    values = mat[:, pairable]
    assume(pairable.any() and len(np.unique(values[~np.isnan(values)])) > 1)
    ref = krippendorff.alpha(reliability_data=mat, level_of_measurement=level)
    assert alpha_from_matrix(mat, level) == pytest.approx(ref, abs=1e-9)


@PROP
@given(st.integers(0, 2**31 - 1), st.integers(2, 6), st.integers(3, 30), st.integers(2, 5))
def test_fleiss_matches_statsmodels(seed, n_raters, n_subjects, n_cats):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_cats, size=(n_subjects, n_raters))
    table, _ = inter_rater.aggregate_raters(labels, n_cat=n_cats)
    assume(np.count_nonzero(table.sum(axis=0)) > 1)
    ref = inter_rater.fleiss_kappa(table, method="fleiss")
    ours = fleiss_kappa_long(np.repeat(np.arange(n_subjects), n_raters), labels.ravel())
    assert ours == pytest.approx(ref, abs=1e-9)


@PROP
@given(
    st.integers(0, 2**31 - 1),
    st.integers(5, 60),
    st.integers(2, 5),
    st.sampled_from([None, "linear", "quadratic"]),
)
def test_cohen_matches_sklearn_and_statsmodels(seed, n_items, n_cats, weights):
    rng = np.random.default_rng(seed)
    y1 = rng.integers(0, n_cats, n_items).astype(float)
    y2 = np.where(rng.random(n_items) < 0.5, y1, rng.integers(0, n_cats, n_items)).astype(float)
    missing = rng.random(n_items) < 0.2
    y1_missing = y1.copy()
    y1_missing[missing] = np.nan
    a, b = y1[~missing], y2[~missing]
    assume(len(a) >= 2 and len(np.unique(np.concatenate([a, b]))) > 1)
    ref = cohen_kappa_score(a, b, weights=weights)
    assume(np.isfinite(ref))
    assert cohens_kappa(y1_missing, y2, weights) == pytest.approx(ref, abs=1e-9)
    table, _ = __import__(
        "preflab.quality.agreement", fromlist=["confusion_table"]
    ).confusion_table(a, b)
    sm = (
        inter_rater.cohens_kappa(table, wt=weights or None, return_results=False)
        if weights is None
        else (
            inter_rater.cohens_kappa(
                table, wt={"linear": "linear", "quadratic": "quadratic"}[weights]
            ).kappa
        )
    )
    assert cohens_kappa(a, b, weights) == pytest.approx(float(sm), abs=1e-9)


# ---------------------------------------------------------------- audit regressions (issue 16 §5)


def pandalm_annotators() -> dict[str, list[int]]:
    """PandaLM testset-v1 labels (0 tie, 1 response1, 2 response2), tests/data/pandalm-labels.jsonl.gz."""
    import gzip
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "pandalm-labels.jsonl.gz"
    rows = [json.loads(line) for line in gzip.open(path, "rt")]
    return {k: [r[k] for r in rows] for k in ("annotator1", "annotator2", "annotator3")}


@pytest.mark.parametrize("labels", [[2, 0, 1], [1, 0], [0, 2], [1, 2, 0], [2, 1]])
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_with_unsorted_or_partial_labels_equals_sklearn_on_real_data(labels, weights):
    # The caller's label list was searched as if sorted: labels=[2, 0, 1] gave 1.0 and
    # labels=[1, 0] NaN where scikit-learn gives finite kappas. scikit-learn keeps the given
    # order (weights by position) and drops pairs outside the list.
    ann = pandalm_annotators()
    for a, b in combinations(ann, 2):
        ref = cohen_kappa_score(ann[a], ann[b], labels=labels, weights=weights)
        assert cohens_kappa(ann[a], ann[b], weights, labels=labels) == pytest.approx(
            ref, abs=1e-12
        ), (a, b)


def test_cohen_rejects_repeated_labels():
    with pytest.raises(ValueError, match="labels must be distinct"):
        cohens_kappa([0, 1], [0, 1], labels=[0, 1, 0])


def test_gwet_is_one_when_every_rating_falls_in_one_category():
    # irrCAC (Gwet's reference; Python irrcac 0.4.4, CAC(df).gwet()) gives AC1 = 1.0 here.
    units = [0, 0, 1, 1, 2, 2, 2]
    assert gwet_ac(units, [1] * 7) == 1.0
    assert gwet_ac(units, [1] * 7, categories=[1, 2, 3]) == 1.0
    assert math.isnan(gwet_ac([0, 1], [1, 1]))  # no unit with two ratings: undefined
