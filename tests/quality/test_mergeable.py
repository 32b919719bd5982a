"""Mergeable statistics equal the single-process functions, whatever the chunking.

Reference functions: krippendorff_alpha / percent_agreement / dawid_skene / bradley_terry of
preflab.quality, resolve_unary of the exports, and the reference packages the existing tests use
(krippendorff, crowd-kit). Data: PandaLM and Tulu-1 labels (tests/data) and generated tables.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import DawidSkene
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflab.io.export.resolve import resolve_unary
from preflab.quality import mergeable as m
from preflab.quality.aggregation import bradley_terry, comparisons_from_winner_rows, dawid_skene
from preflab.quality.agreement import krippendorff_alpha, percent_agreement
from preflab.quality.agreement.preference import agreement_summary
from preflab.quality.table import LabelTable
from preflab.schema import UnaryJudgment

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_aggregation_real import pandalm_table, tulu1_table  # noqa: E402

PROP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def chunks_by_unit(table: LabelTable, n: int, salt: str = "") -> list[LabelTable]:
    """``table`` cut into ``n`` chunks, every label of a unit in one chunk (as shards are)."""
    h = np.array(
        [int(hashlib.sha256(f"{salt}{u}".encode()).hexdigest()[:8], 16) % n for u in table.units]
    )
    return [table.where(h == i) for i in range(n)]


def real_table(name: str) -> LabelTable:
    if name == "pandalm":
        units, raters, labels = pandalm_table(DATA / "pandalm-labels.jsonl.gz")
        units = [f"p{u}::a|b" for u in units]
    else:
        units, raters, labels = tulu1_table(DATA / "tulu1-labels.jsonl.gz")
        # instance:model_a:model_b -> the label table's pair unit item::lo|hi
        units = [f"{u.split(':', 1)[0]}::{u.split(':', 1)[1].replace(':', '|', 1)}" for u in units]
    return LabelTable.from_arrays(
        units, raters, np.asarray(labels, dtype=float), dimensions=["winner"] * len(units)
    )


def generated(seed: int, n_units: int = 400, n_raters: int = 30, k: int = 4) -> LabelTable:
    rng = np.random.default_rng(seed)
    units = rng.integers(0, n_units, n_units * 3)
    raters = rng.integers(0, n_raters, len(units))
    values = rng.integers(0, k, len(units)).astype(float)
    values[rng.random(len(units)) < 0.02] = np.nan
    batch = np.where(units % 3 == 0, "b1", "b2")
    dims = np.where(units % 2 == 0, "x", "y")
    return LabelTable.from_arrays(
        [f"i{u}::c" for u in units],
        [f"r{r}" for r in raters],
        values,
        items=[f"i{u}" for u in units],
        dimensions=dims,
        batches=batch,
    )


@pytest.fixture(scope="module", params=["pandalm", "tulu1"])
def real(request):
    return real_table(request.param)


# -- agreement ------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_alpha_and_percent_agreement_on_real_data(real, level):
    state = m.chunks_map_reduce(chunks_by_unit(real, 7))(m.agreement_from_chunk, m.merge_agreement)
    (row,) = m.agreement_figures(state, {"winner": level})
    assert row["alpha"] == pytest.approx(
        krippendorff_alpha(real.units, real.values, level), abs=1e-12
    )
    assert row["percent_agreement"] == pytest.approx(
        percent_agreement(real.units, real.values), abs=1e-12
    )


def test_agreement_rows_match_agreement_summary_on_generated_data():
    table = generated(3)
    state = m.chunks_map_reduce(chunks_by_unit(table, 5))(m.agreement_from_chunk, m.merge_agreement)
    ours = m.agreement_figures(state)
    ref = agreement_summary(table, n_boot=1)
    assert len(ours) == len(ref) == 4
    for a, b in zip(ours, ref):
        for key in ("batch", "kind", "dimension", "level", "n_labels", "n_units"):
            assert a[key] == b[key], key
        assert a["n_pairable_units"] == b["n_pairable_units"]
        assert a["n_raters"] == b["n_raters"]
        assert a["alpha"] == pytest.approx(b["alpha"], abs=1e-12)
        assert a["percent_agreement"] == pytest.approx(b["percent_agreement"], abs=1e-12)


@PROP
@given(st.integers(0, 2**31 - 1), st.sampled_from(["nominal", "ordinal", "interval"]))
def test_alpha_matches_krippendorff_package(seed, level):
    rng = np.random.default_rng(seed)
    mat = rng.integers(1, 5, size=(rng.integers(2, 6), rng.integers(3, 30))).astype(float)
    mat[rng.random(mat.shape) < 0.3] = np.nan
    r, u = np.nonzero(~np.isnan(mat))
    table = LabelTable.from_arrays(u, r, mat[r, u], dimensions=["d"] * len(r))
    state = m.chunks_map_reduce(chunks_by_unit(table, 3))(m.agreement_from_chunk, m.merge_agreement)
    (row,) = m.agreement_figures(state, {"d": level})
    pairable = (~np.isnan(mat)).sum(axis=0) >= 2
    vals = mat[:, pairable]
    if not pairable.any() or len(np.unique(vals[~np.isnan(vals)])) < 2:
        assert np.isnan(row["alpha"])  # undefined: both say so (the package raises)
        return
    ref = krippendorff.alpha(reliability_data=mat, level_of_measurement=level)
    assert row["alpha"] == pytest.approx(ref, abs=1e-9)


# -- raters, thumbs, Bradley-Terry ----------------------------------------------------------


def test_rater_counts_and_up_rates():
    table = generated(5)
    state = m.chunks_map_reduce(chunks_by_unit(table, 4))(m.raters_from_chunk, m.merge_raters)
    rows = m.rater_figures(state)
    keep = ~np.isnan(table.values)
    for row in rows:
        mask = keep & (table.raters == row["rater"]) & (table.dimensions == row["dimension"])
        assert row["n_labels"] == int(mask.sum())
        assert row["n_up"] == int((table.values[mask] > 0).sum())
        assert row["up_rate"] == int((table.values[mask] > 0).sum()) / int(mask.sum())
    assert sum(r["n_labels"] for r in rows) == int(keep.sum())


def thumbs(seed: int, n: int = 600) -> list[UnaryJudgment]:
    rng = np.random.default_rng(seed)
    out = []
    seen = set()
    for _ in range(n):
        item, cand, rater = f"q{rng.integers(0, 60)}", "ab"[rng.integers(0, 2)], rng.integers(0, 9)
        if (item, cand, rater) in seen:  # the resolved label set: one label per rater and unit
            continue
        seen.add((item, cand, rater))
        out.append(
            UnaryJudgment(
                item_id=item,
                candidate_id=cand,
                label=bool(rng.random() < 0.6),
                provenance={"rater_id": f"rater{rater}"},
            )
        )
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_thumbs_resolution_is_resolve_unary(seed):
    js = thumbs(seed)
    table = LabelTable.from_judgments(js)
    chunks = [m.Chunk.from_table(t) for t in chunks_by_unit(table, 4)]
    state = m.tree_reduce([m.thumbs_from_chunk(c) for c in chunks], m.merge_thumbs)
    rows, drops = m.resolve_thumbs(state)
    ref = resolve_unary(js)
    assert [
        (r.item_id, r.candidate_id, r.label, r.n_raters, r.agreement, r.rater_hashes) for r in rows
    ] == [
        (r.item_id, r.candidate_id, r.label, r.n_raters, r.agreement, r.rater_hashes) for r in ref
    ]
    n_units = len({(j.item_id, j.candidate_id) for j in js})
    assert drops["no-majority"] == n_units - len(ref) > 0
    summary = m.tree_reduce([m.thumb_summary_from_chunk(c) for c in chunks], m.merge_thumb_summary)
    assert summary["resolved_up"] == sum(r.label for r in ref)
    assert summary["resolved_down"] == sum(not r.label for r in ref)
    assert summary["no_majority"] == drops["no-majority"]
    assert summary["labels"] == len(js)


def test_thumbs_of_a_unit_split_over_chunks_still_add_up():
    js = thumbs(4)
    table = LabelTable.from_judgments(js)
    halves = [table.where(np.arange(len(table)) % 2 == i) for i in range(2)]  # units cut in two
    state = m.merge_thumbs(*(m.thumbs_from_chunk(m.Chunk.from_table(t)) for t in halves))
    assert (
        m.resolve_thumbs(state)[0]
        == m.resolve_thumbs(m.thumbs_from_chunk(m.Chunk.from_table(table)))[0]
    )


def test_bradley_terry_on_merged_win_counts_is_the_fit_on_every_comparison():
    table = real_table("tulu1")
    wins = m.chunks_map_reduce(chunks_by_unit(table, 6))(m.wins_from_chunk, m.merge_wins)
    ours = m.bradley_terry_from_wins(wins, n_boot=20)
    ref = bradley_terry(*comparisons_from_winner_rows(table.units, table.values), n_boot=20)
    assert ours.items.tolist() == ref.items.tolist()
    assert ours.n_comparisons == ref.n_comparisons
    np.testing.assert_array_equal(ours.strengths, ref.strengths)  # the same cells: the same bits
    np.testing.assert_array_equal(ours.low, ref.low)


# -- Dawid-Skene ----------------------------------------------------------------------------


def assert_same_fit(fit: m.DSFit, ref, chunks) -> None:
    r = fit.result
    assert r.n_iter == ref.n_iter
    assert r.raters.tolist() == ref.raters.tolist()
    np.testing.assert_allclose(r.log_likelihood, ref.log_likelihood, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.confusion, ref.confusion, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.priors, ref.priors, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.reliability, ref.reliability, rtol=0, atol=1e-12)
    post = {}
    for c in chunks:
        units, p = m.ds_posteriors(m.Chunk.from_table(c), fit.final)
        post.update(zip(units.tolist(), p))
    ours = np.array([post[u] for u in ref.units.tolist()])
    np.testing.assert_allclose(ours, ref.posteriors, rtol=0, atol=1e-12)


def test_dawid_skene_merged_equals_dawid_skene_on_real_data(real):
    chunks = chunks_by_unit(real, 5)
    fit = m.dawid_skene_merged(m.chunks_map_reduce(chunks), mirror={-1.0: 1.0, 0.0: 0.0, 1.0: -1.0})
    ref = dawid_skene(real.units, real.raters, real.values, mirror={-1: 1, 0: 0, 1: -1})
    assert_same_fit(fit, ref, chunks)


def test_dawid_skene_merged_equals_dawid_skene_with_pooled_raters():
    table = generated(7, n_units=300, n_raters=60)
    table = table.where(~np.isnan(table.values))
    chunks = chunks_by_unit(table, 4)
    fit = m.dawid_skene_merged(m.chunks_map_reduce(chunks), min_labels=20)
    ref = dawid_skene(table.units, table.raters, table.values, min_labels=20)
    assert ref.n_iter > 3
    assert_same_fit(fit, ref, chunks)


def test_dawid_skene_merged_matches_crowdkit():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 800)
    units = np.repeat(np.arange(800), 5)
    raters = rng.integers(0, 30, len(units))
    ok = rng.random(len(units)) < rng.uniform(0.35, 0.95, 30)[raters]
    labels = np.where(ok, truth[units], rng.integers(0, 3, len(units)))
    df = pd.DataFrame({"task": units, "worker": raters, "label": labels})
    ref = DawidSkene(n_iter=30, tol=0).fit(df)
    table = LabelTable.from_arrays(units, raters, labels.astype(float))
    chunks = chunks_by_unit(table, 3)
    fit = m.dawid_skene_merged(
        m.chunks_map_reduce(chunks),
        n_iter=len(ref.loss_history_),
        tol=-np.inf,
        confusion_prior=0,
        class_prior=0,
    )
    post = {}
    for c in chunks:
        u, p = m.ds_posteriors(m.Chunk.from_table(c), fit.final)
        post.update(zip(u.tolist(), p))
    ours = np.array([post[u] for u in range(800)])
    ref_post = ref.probas_.reindex(index=range(800), columns=[0, 1, 2]).to_numpy()
    np.testing.assert_allclose(ours, ref_post, atol=1e-8)


# -- the algebra: associative, commutative, independent of the chunking --------------------

STATS = {
    "agreement": (m.agreement_from_chunk, m.merge_agreement),
    "raters": (m.raters_from_chunk, m.merge_raters),
    "thumbs": (m.thumbs_from_chunk, m.merge_thumbs),
    "thumb_summary": (m.thumb_summary_from_chunk, m.merge_thumb_summary),
    "wins": (m.wins_from_chunk, m.merge_wins),
    "ds_counts": (m.ds_counts_from_chunk, m.merge_ds_counts),
}


def mixed(seed: int) -> LabelTable:
    """Thumbs and pairwise winners together (every statistic has something to count)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    item = rng.integers(0, 25, n)
    unary = rng.random(n) < 0.5
    units = np.where(unary, [f"i{i}::c{i % 2}" for i in item], [f"i{i}::a|b" for i in item])
    values = np.where(unary, rng.integers(0, 2, n), rng.integers(-1, 2, n)).astype(float)
    return LabelTable.from_arrays(
        units,
        [f"r{r}" for r in rng.integers(0, 8, n)],
        values,
        items=[f"i{i}" for i in item],
        kinds=np.where(unary, "unary", "pairwise"),
        dimensions=np.where(unary, "thumb", "winner"),
    )


@PROP
@given(st.integers(0, 2**31 - 1), st.sampled_from(sorted(STATS)))
def test_merge_is_associative_commutative_and_exact(seed, name):
    from_chunk, merge = STATS[name]
    table = mixed(seed)
    a, b, c = (from_chunk(m.Chunk.from_table(t)) for t in chunks_by_unit(table, 3, str(seed)))
    assert merge(a, b) == merge(b, a)
    assert merge(merge(a, b), c) == merge(a, merge(b, c))
    # integer states: the whole table and any chunking give the same state, to the bit
    whole = from_chunk(m.Chunk.from_table(table))
    parts = [from_chunk(m.Chunk.from_table(t)) for t in chunks_by_unit(table, 5, "other")]
    assert m.tree_reduce(parts, merge) == whole


@PROP
@given(st.integers(0, 2**31 - 1))
def test_ds_sums_merge_commutes_exactly_and_associates_to_rounding(seed):
    rng = np.random.default_rng(seed)
    sums = [m.DSSums(rng.random(3), rng.random((6, 3)), float(rng.normal())) for _ in range(3)]
    a, b, c = sums
    ab, ba = m.merge_ds_sums(a, b), m.merge_ds_sums(b, a)
    assert np.array_equal(ab.mass, ba.mass) and ab.loglik == ba.loglik
    left = m.merge_ds_sums(ab, c)
    right = m.merge_ds_sums(a, m.merge_ds_sums(b, c))
    np.testing.assert_allclose(left.mass, right.mass, rtol=1e-15, atol=0)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 16, 17])
def test_tree_fold_builds_the_same_tree_as_tree_reduce(n):
    def merge(a: str, b: str) -> str:  # neither associative nor commutative: shows the tree
        return f"({a} {b})"

    fold = m.TreeFold(merge)
    for i in range(n):
        fold.add(str(i))
    assert fold.result() == m.tree_reduce([str(i) for i in range(n)], merge)


def test_nothing_to_merge_is_an_error():
    with pytest.raises(ValueError, match="no chunks"):
        m.tree_reduce([], m.merge_wins)
    with pytest.raises(ValueError, match="no chunks"):
        m.TreeFold(m.merge_wins).result()
