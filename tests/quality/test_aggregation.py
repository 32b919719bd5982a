"""Aggregators against crowd-kit and choix, and against the truth of simulated raters."""

from __future__ import annotations

import sys

import choix
import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import MACE, BradleyTerry, DawidSkene, OneCoinDawidSkene
from scipy.stats import spearmanr

from preflab.quality.aggregation import (
    bradley_terry,
    comparisons_from_winner_rows,
    dawid_skene,
    mace,
    majority_vote,
    one_coin_dawid_skene,
    plackett_luce,
)


def simulate(n_units=1500, n_raters=40, k=3, per=5, seed=0, spammers=0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n_units)
    units = np.repeat(np.arange(n_units), per)
    raters = rng.integers(0, n_raters, len(units))
    acc = rng.uniform(0.35, 0.95, n_raters)
    acc[:spammers] = 0.0
    ok = rng.random(len(units)) < acc[raters]
    labels = np.where(ok, truth[units], rng.integers(0, k, len(units)))
    return units, raters, labels, truth, acc


def bt_data(n, m, seed=0):
    """``m`` comparisons between random distinct items of ``n`` with N(0, 1) true strengths."""
    rng = np.random.default_rng(seed)
    true = rng.normal(size=n)
    a = rng.integers(0, n, m)
    b = (a + rng.integers(1, n, m)) % n
    win = rng.random(m) < 1 / (1 + np.exp(-(true[a] - true[b])))
    return np.where(win, a, b), np.where(win, b, a), true


def crowd_df(units, raters, labels):
    return pd.DataFrame({"task": units, "worker": raters, "label": labels})


class TestClassification:
    def test_dawid_skene_matches_crowdkit_posteriors(self):
        units, raters, labels, _, _ = simulate()
        ref = DawidSkene(n_iter=30, tol=0).fit(crowd_df(units, raters, labels))
        # crowd-kit stops once its ELBO stops rising; run ours for exactly as many iterations,
        # without priors (crowd-kit fits the 1979 maximum-likelihood model)
        ours = dawid_skene(
            units,
            raters,
            labels,
            n_iter=len(ref.loss_history_),
            tol=-np.inf,
            confusion_prior=0,
            class_prior=0,
        )
        assert ours.n_iter == len(ref.loss_history_) >= 5
        ref_post = ref.probas_.reindex(index=ours.units, columns=ours.classes).to_numpy()
        np.testing.assert_allclose(ours.posteriors, ref_post, atol=1e-8)
        assert np.mean(ref.labels_.reindex(ours.units).to_numpy() == ours.labels) == 1.0

    def test_dawid_skene_rater_accuracy_tracks_truth(self):
        # (DS beating majority vote: see test_gold_bias_sim.py, experts among guessers)
        units, raters, labels, truth, acc = simulate(seed=1, per=3)
        ds = dawid_skene(units, raters, labels)
        assert np.mean(ds.labels == truth) > 0.85
        assert np.corrcoef(ds.reliability, acc)[0, 1] > 0.9

    def test_one_coin_matches_crowdkit_labels(self):
        units, raters, labels, _, acc = simulate(seed=2)
        ours = one_coin_dawid_skene(units, raters, labels)
        ref = OneCoinDawidSkene(n_iter=100, tol=1e-7).fit(crowd_df(units, raters, labels))
        assert np.mean(ref.labels_.reindex(ours.units).to_numpy() == ours.labels) >= 0.995
        assert np.corrcoef(ours.reliability, acc)[0, 1] > 0.9

    @pytest.mark.slow
    def test_mace_finds_spammers_and_agrees_with_crowdkit(self):
        units, raters, labels, truth, _ = simulate(n_units=600, n_raters=30, seed=3, spammers=8)
        ours = mace(units, raters, labels)
        ref = MACE(n_iter=50, random_state=0).fit(crowd_df(units, raters, labels))
        same = np.mean(ref.labels_.reindex(ours.units).to_numpy() == ours.labels)
        assert same >= 0.97
        assert (
            np.mean(ours.labels == truth)
            >= np.mean(ref.labels_.reindex(ours.units).to_numpy() == truth) - 0.01
        )
        rel = ours.reliability_of()
        assert max(rel[r] for r in range(8)) < np.median(list(rel.values()))

    def test_majority_vote_tie_policies(self):
        u, r, v = ["x", "x", "y", "y"], ["a", "b", "a", "b"], [0, 1, 1, 1]
        assert majority_vote(u, r, v, tie="nan").labels.tolist() == [None, 1]
        assert majority_vote(u, r, v, tie="lowest").labels.tolist() == [0, 1]
        picks = {majority_vote(u, r, v, tie="random", seed=s).labels[0] for s in range(20)}
        assert picks == {0, 1}
        with pytest.raises(ValueError, match="tie must be"):
            majority_vote(u, r, v, tie="coin")

    def test_label_column_of_wrong_length_is_reported(self):
        with pytest.raises(ValueError, match="raters has 2 entries but the label table has 3"):
            dawid_skene([1, 2, 3], ["a", "b"], [0, 1, 1])


class TestBradleyTerry:
    def test_reference_example(self):
        # choix documentation / the issue: [(0,1),(0,1),(1,2),(2,0)] winner first ->
        # strengths [0.419618, -0.419618, 0] up to a shift.
        fit = bradley_terry([0, 0, 1, 2], [1, 1, 2, 0])
        np.testing.assert_allclose(
            fit.strengths - fit.strengths[2], [0.419618, -0.419618, 0], atol=1e-6
        )
        ref = choix.opt_pairwise(3, [(0, 1), (0, 1), (1, 2), (2, 0)])
        np.testing.assert_allclose(fit.strengths, ref - ref.mean(), atol=1e-6)

    def test_arena_scale(self):
        fit = bradley_terry([0, 0, 1, 2], [1, 1, 2, 0])
        np.testing.assert_allclose(fit.ratings, 1000 + 400 / np.log(10) * fit.strengths)

    def test_matches_choix_and_crowdkit_on_simulated_data(self):
        rng = np.random.default_rng(0)
        n, m = 30, 3000
        true = rng.normal(size=n)
        a = rng.integers(0, n, m)
        b = (a + rng.integers(1, n, m)) % n
        win = rng.random(m) < 1 / (1 + np.exp(-(true[a] - true[b])))
        w, lo = np.where(win, a, b), np.where(win, b, a)
        fit = bradley_terry(w, lo, items=np.arange(n))
        ref = choix.ilsr_pairwise(n, np.stack([w, lo], 1), tol=1e-12, max_iter=10000)
        np.testing.assert_allclose(fit.strengths, ref - ref.mean(), atol=1e-5)
        df = pd.DataFrame({"worker": 0, "left": w, "right": lo, "label": w})
        # crowd-kit's BT stops after 2 iterations when tol > 0; tol=0 runs all of them
        ck = BradleyTerry(n_iter=5000, tol=0).fit(df).scores_.reindex(np.arange(n)).to_numpy()
        ck_s = np.log(ck) - np.log(ck).mean()
        np.testing.assert_allclose(fit.strengths, ck_s, atol=1e-4)

    def test_ties_count_half(self):
        # one win each way plus a tie is symmetric; two ties equal one win and one loss
        fit = bradley_terry(["a", "b", "a"], ["b", "a", "b"], [1, 1, 0.5])
        assert fit.strengths == pytest.approx([0, 0], abs=1e-7)
        tie_fit = bradley_terry(["a", "a", "c"], ["b", "b", "a"], [0.5, 0.5, 1], l2=0.1)
        win_fit = bradley_terry(["a", "b", "c"], ["b", "a", "a"], [1, 1, 1], l2=0.1)
        np.testing.assert_allclose(tie_fit.strengths, win_fit.strengths, atol=1e-6)

    def test_l2_shrinks(self):
        fit0 = bradley_terry([0, 0, 1, 2], [1, 1, 2, 0])
        fit1 = bradley_terry([0, 0, 1, 2], [1, 1, 2, 0], l2=1.0)
        assert np.abs(fit1.strengths).max() < np.abs(fit0.strengths).max()

    def test_bootstrap_interval_covers_estimate(self):
        rng = np.random.default_rng(1)
        a = rng.integers(0, 5, 800)
        b = (a + rng.integers(1, 5, 800)) % 5
        fit = bradley_terry(
            a, b, (rng.random(800) < 0.5 + 0.1 * (a - b)).astype(float) * 1.0, n_boot=30
        )
        assert np.all(fit.low <= fit.ratings + 1e-9) and np.all(fit.ratings <= fit.high + 1e-9)

    def test_sparse_graph_matches_choix(self):
        # many items, ~40 comparisons each: the regime where the Newton system's conjugate-gradient
        # solve has the most to do. (The 10^6-comparison check vs choix is in the benchmark.)
        w, lo, _ = bt_data(800, 16_000, seed=2)
        fit = bradley_terry(w, lo, items=np.arange(800))
        ref = choix.ilsr_pairwise(800, np.stack([w, lo], 1), tol=1e-12, max_iter=10000)
        assert fit.converged
        np.testing.assert_allclose(fit.strengths, ref - ref.mean(), atol=1e-6)
        assert spearmanr(fit.strengths, ref)[0] >= 0.9999

    def test_chain_with_ties_matches_choix(self):
        # a path graph is the worst-conditioned connected design; ties count as half wins
        n = 60
        rng = np.random.default_rng(5)
        a = np.repeat(np.arange(n - 1), 6)
        out = rng.choice([0.0, 0.5, 1.0], len(a))
        out[::6], out[1::6] = 1.0, 0.0  # every link has a win each way, so the MLE exists
        fit = bradley_terry(a, a + 1, out)
        # choix has no ties. Doubling every comparison leaves the MLE unchanged; then a doubled
        # tie is one win each way.
        win, loss = np.where(out == 1, a, a + 1), np.where(out == 1, a + 1, a)
        dec = out != 0.5
        ref_data = np.concatenate(
            [
                np.repeat(np.stack([win[dec], loss[dec]], 1), 2, axis=0),
                np.stack([a[~dec], a[~dec] + 1], 1),
                np.stack([a[~dec] + 1, a[~dec]], 1),
            ]
        )
        ref = choix.ilsr_pairwise(n, ref_data, tol=1e-13, max_iter=100_000)
        assert fit.converged
        np.testing.assert_allclose(fit.strengths, ref - ref.mean(), atol=1e-5)

    def test_bootstrap_replicate_equals_fit_on_resampled_comparisons(self):
        # a replicate is a weight vector on the collapsed (pair, outcome) cells; solved from the
        # full-data fit, it must give the fit of the explicitly resampled comparison list
        w, lo, _ = bt_data(12, 600, seed=3)
        out = np.where(np.arange(600) % 7 == 0, 0.5, 1.0)
        rows = np.random.default_rng(9).integers(0, 600, 600)
        explicit = bradley_terry(w[rows], lo[rows], out[rows], items=np.arange(12))

        bt = sys.modules["preflab.quality.aggregation.bradley_terry"]
        pc = bt.aggregate_pairs(w, lo, out, 12)
        cell_keys = (pc.i[pc.cell_pair] * 12 + pc.j[pc.cell_pair]) * 3 + np.rint(
            2 * (1 - pc.cell_score)
        )
        score_of_low = np.where(w < lo, out, 1 - out)  # the score of the lower-numbered item
        row_keys = (np.minimum(w, lo) * 12 + np.maximum(w, lo)) * 3 + np.rint(
            2 * (1 - score_of_low)
        )
        counts = np.bincount(np.searchsorted(cell_keys, row_keys[rows]), minlength=len(cell_keys))
        full = bradley_terry(w, lo, out, items=np.arange(12))
        s, ok, _ = bt._Newton(pc, 0.0).solve(
            *pc.weights(counts.astype(float)), full.strengths, 1e-10
        )
        assert ok
        np.testing.assert_allclose(s - s.mean(), explicit.strengths, atol=1e-8)

    def test_bootstrap_intervals_cover_true_strengths(self):
        # percentile intervals from the fast replicates (warm start, loose tolerance) still have
        # their nominal coverage: >= 90% of 95% intervals cover the true (centred) strengths
        hits = []
        for seed in range(30):
            w, lo, true = bt_data(10, 1000, seed=100 + seed)
            fit = bradley_terry(w, lo, items=np.arange(10), n_boot=200, seed=seed)
            target = 1000 + 400 / np.log(10) * (true - true.mean())
            assert fit.boot_unconverged == 0
            hits.append((fit.low <= target) & (target <= fit.high))
        assert np.mean(hits) >= 0.90

    def test_no_finite_mle_is_reported_not_raised(self):
        # item 0 never loses: its ML strength is infinite without l2
        fit = bradley_terry([0, 0, 1, 2], [1, 2, 2, 1])
        assert not fit.converged and fit.strengths[0] == fit.strengths.max()
        assert bradley_terry([0, 0, 1, 2], [1, 2, 2, 1], l2=0.5).converged
        # two groups never compared: strengths exist but their offset is arbitrary
        assert not bradley_terry([0, 1, 2, 3], [1, 0, 3, 2]).converged
        assert bradley_terry([0, 1, 2, 3, 1], [1, 0, 3, 2, 2], [1, 1, 1, 1, 0.5]).converged

    def test_items_argument(self):
        # an item without comparisons keeps strength 0 under l2; unknown items are an error
        fit = bradley_terry(["a", "b"], ["b", "c"], items=["a", "b", "c", "d"], l2=0.1)
        assert fit.items.tolist() == ["a", "b", "c", "d"] and fit.strengths[3] == 0.0
        with pytest.raises(ValueError, match="not among items"):
            bradley_terry([0, 5], [1, 1], items=[0, 1])
        with pytest.raises(ValueError, match="not among items"):
            bradley_terry(["a", "z"], ["b", "b"], items=["a", "b"])

    def test_bad_outcome_is_reported(self):
        with pytest.raises(ValueError, match="outcome must be"):
            bradley_terry([0], [1], [2])

    def test_winner_rows_to_comparisons(self):
        first, second, outcome = comparisons_from_winner_rows(
            ["i::a|b", "i::a|b", "j::a|c"], [-1, 0, 1]
        )
        assert first.tolist() == ["a", "a", "a"] and second.tolist() == ["b", "b", "c"]
        assert outcome.tolist() == [1.0, 0.5, 0.0]


def test_plackett_luce_matches_choix():
    rng = np.random.default_rng(0)
    rankings = [list(rng.permutation(8)[: rng.integers(2, 9)]) for _ in range(300)]
    fit = plackett_luce(rankings)
    ref = choix.opt_rankings(8, rankings)
    np.testing.assert_allclose(fit.strengths, ref - ref.mean(), atol=1e-5)
    assert spearmanr(fit.strengths, ref)[0] == pytest.approx(1.0)


def test_plackett_luce_rejects_bad_rankings():
    with pytest.raises(ValueError, match="lists an item twice"):
        plackett_luce([[1, 1, 2]])
