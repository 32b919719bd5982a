"""A Dask LocalCluster of 3 worker processes gives the figures and files of ``--scheduler sync``
and of the single-process functions (slow: starting the workers takes seconds)."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflab.quality import mergeable as m
from preflab.quality.aggregation import dawid_skene
from preflab.quality.agreement import krippendorff_alpha, percent_agreement
from preflab.quality.table import LabelTable
from preflab.scale.engine import Runner
from preflab.scale.export import export_unary
from preflab.scale.shards import ShardError, generate_unary, open_shards, read_shard, shard_name
from preflab.scale.stats import run_stats

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    with Runner("local:3") as runner:
        assert runner.workers == 3
        yield runner


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    out = tmp_path_factory.mktemp("scale") / "shards"
    generate_unary(out, 30_000, n_shards=7, seed=11, n_raters=300, block=8_000)
    return open_shards(out)


def whole_table(shards) -> LabelTable:
    t = pa.concat_tables(pq.read_table(p) for p in shards.shards)
    return LabelTable.from_arrays(
        t.column("unit").to_numpy(zero_copy_only=False),
        t.column("rater").to_numpy(zero_copy_only=False),
        t.column("value").to_numpy(),
        items=t.column("item_id").to_numpy(zero_copy_only=False),
        kinds=t.column("kind").to_numpy(zero_copy_only=False),
        dimensions=t.column("dimension").to_numpy(zero_copy_only=False),
    )


def test_stats_on_the_cluster_are_the_sync_figures_to_the_bit(cluster, shards):
    with Runner("sync") as sync:
        ref = run_stats(shards, sync)
    ours = run_stats(shards, cluster)
    assert ours == ref  # floats included: the same merge tree, the same bits
    assert ref["dawid_skene"]["n_iter"] > 2


def test_stats_on_the_cluster_are_the_single_process_functions(cluster, shards):
    figures = run_stats(shards, cluster)
    table = whole_table(shards)
    (row,) = figures["agreement"]
    assert row["n_labels"] == 30_000
    assert row["alpha"] == pytest.approx(krippendorff_alpha(table.units, table.values), abs=1e-12)
    assert row["percent_agreement"] == pytest.approx(
        percent_agreement(table.units, table.values), abs=1e-12
    )
    ref = dawid_skene(table.units, table.raters, table.values)
    ds = figures["dawid_skene"]
    assert ds["n_iter"] == ref.n_iter
    assert ds["raters"] == ref.raters.tolist()
    np.testing.assert_allclose(ds["accuracy"], ref.reliability, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ds["priors"], ref.priors, rtol=0, atol=1e-12)
    rows, drops = m.resolve_thumbs(m.thumbs_from_chunk(m.Chunk.from_table(table)))
    assert figures["thumbs"]["no_majority"] == drops["no-majority"]
    assert figures["thumbs"]["resolved_up"] == sum(r.label for r in rows)
    raters = {(r["rater"], r["n_labels"], r["n_up"]) for r in figures["raters"]}
    names, counts = np.unique(table.raters, return_counts=True)
    ups = {n: int((table.values[table.raters == n] > 0).sum()) for n in names.tolist()}
    assert raters == {(n, int(c), ups[n]) for n, c in zip(names.tolist(), counts)}


def test_export_on_the_cluster_writes_the_sync_files(cluster, shards, tmp_path):
    with Runner("sync") as sync:
        ref = export_unary(shards, tmp_path / "sync", sync)
    ours = export_unary(shards, tmp_path / "cluster", cluster)
    assert ours["files"] == ref["files"]  # SHA-256 of every file
    for name in ref["files"]:
        assert (tmp_path / "cluster" / name).read_bytes() == (tmp_path / "sync" / name).read_bytes()
    assert {k: v for k, v in ours.items() if k != "created_at" and k != "options"} == {
        k: v for k, v in ref.items() if k != "created_at" and k != "options"
    }
    got = pa.concat_tables(pq.read_table(tmp_path / "cluster" / n) for n in sorted(ref["files"]))
    rows, drops = m.resolve_thumbs(m.thumbs_from_chunk(m.Chunk.from_table(whole_table(shards))))
    assert sorted(
        zip(
            got.column("item_id").to_pylist(),
            got.column("candidate_id").to_pylist(),
            got.column("label").to_pylist(),
            got.column("n_raters").to_pylist(),
            got.column("agreement").to_pylist(),
            map(tuple, got.column("rater_hashes").to_pylist()),
        )
    ) == [
        (r.item_id, r.candidate_id, r.label, r.n_raters, r.agreement, r.rater_hashes) for r in rows
    ]
    assert ours["gates"]["aggregation"]["reasons"] == {"no-majority": drops["no-majority"]}


def test_a_shard_broken_under_the_cluster_fails_the_run_with_its_name(cluster, shards, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(shards.path, copy)
    checked = open_shards(copy)
    (copy / shard_name(3)).write_bytes(b"broken after the check")
    with pytest.raises(ShardError, match=r"labels-00003.parquet: not a readable Parquet file"):
        run_stats(checked, cluster, dawid_skene=None)
    with pytest.raises(ShardError, match=r"labels-00003.parquet"):
        export_unary(checked, tmp_path / "out", cluster)
    assert not (tmp_path / "out").exists()


def first_unit(chunk: m.Chunk) -> str:
    return str(chunk.unit.labels[chunk.unit.codes[0]])


def bracket(a: str, b: str) -> str:
    return f"({a} {b})"


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory):
    """13 shards (odd, not a power of two, more than any in-flight bound tried)."""
    out = tmp_path_factory.mktemp("scale13") / "shards"
    generate_unary(out, 26_000, n_shards=13, seed=5, n_raters=200, block=4_000)
    return open_shards(out)


@pytest.mark.parametrize("in_flight", [1, 2, 5, None])
def test_the_bounded_cluster_merges_in_the_fixed_tree(cluster, many_shards, in_flight):
    """Submitted in waves of at most ``in_flight`` unfinished tasks, the merges still follow
    ``tree_reduce``'s tree over the shard order (the bracketing of the shards' names)."""
    leaves = [first_unit(read_shard(p)) for p in many_shards.shards]
    expected = m.tree_reduce(leaves, bracket)
    assert expected.count("(") == 12
    cluster.in_flight, cluster.peak_in_flight = in_flight, 0
    try:
        got = cluster.map_reduce(many_shards.shards, first_unit, bracket)
    finally:
        cluster.in_flight = None
    assert got == expected
    with Runner("sync") as sync:
        assert sync.map_reduce(many_shards.shards, first_unit, bracket) == expected
    limit = in_flight or 2 * 3
    # below the bound before each shard's task, then that task and its merges (log2 13 < 4)
    assert 1 <= cluster.peak_in_flight <= limit + 4
    if in_flight == 1:
        assert cluster.peak_in_flight <= 4


@pytest.mark.parametrize("in_flight", [1, 3])
def test_bounded_cluster_stats_are_the_sync_figures_to_the_bit(cluster, many_shards, in_flight):
    with Runner("sync") as sync:
        ref = run_stats(many_shards, sync)
    cluster.in_flight = in_flight
    try:
        ours = run_stats(many_shards, cluster)
    finally:
        cluster.in_flight = None
    assert ours == ref  # Dawid-Skene's float sums included
    assert ref["n_shards"] == 13 and ref["dawid_skene"]["n_iter"] > 2


def test_a_broken_shard_fails_a_bounded_run_with_its_name(cluster, many_shards, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(many_shards.path, copy)
    checked = open_shards(copy)
    (copy / shard_name(1)).write_bytes(b"broken after the check")
    cluster.in_flight = 1
    try:
        with pytest.raises(ShardError, match=r"labels-00001.parquet: not a readable Parquet"):
            cluster.map_reduce(checked.shards, first_unit, bracket)
    finally:
        cluster.in_flight = None


def test_in_flight_must_be_positive():
    with pytest.raises(ValueError, match="in_flight"):
        Runner("local:1", in_flight=0)
