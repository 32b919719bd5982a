"""The bounded Dawid-Skene of a streamed export writes the files of the one-call fit (issue 27).

Pass 0 numbers each chunk's units in reading order, writes their keys to sorted runs on disk and
merges them to give each unit its rank in the keys' sorted order (the fit's order); passes 1 and
2 find a chunk's units again by a digest of its keys; the EM runs on a CSR matrix built from one
int64 key a vote, its E-step a block of units at a time. Held here: every file byte-identical to
the reference pipeline (``tests/io/export_reference.py``: the fit on the strings, in one call),
on a project whose item ids sort differently as text than in reading order (digits, case,
non-ASCII), with chunks of a few items (every chunk boundary inside the project), runs of a
couple of keys (many runs merged) and E-step blocks of a few units, on SQLite and PostgreSQL;
and the design matrix and EM on codes equal :func:`dawid_skene`'s to the bit.
"""

from __future__ import annotations

import importlib
import importlib.util
import random
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse

from preflab.io.export import AGGREGATORS, ExportOptions, aggregators, export_project, stream
from preflab.io.export import manifest as export_manifest
from preflab.io.export import spill as export_spill
from preflab.schema import Item, PairwiseJudgment
from preflab.store import db, repo, transaction

ds = importlib.import_module("preflab.quality.aggregation.dawid_skene")
HERE = Path(__file__).resolve().parent


def _reference():
    name = "export_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class _Clock(datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


#: item ids whose text order is not their reading order
STEMS = ["b", "B", "a10", "a9", "é", "z", "Ω", "item 2", "item 10"]
ANSWERS = ["Short.", "A longer answer here.", "Another answer, of some length.", "Fine."]


def build(engine, seed: int, n_items: int = 40) -> None:
    rng = random.Random(seed)
    raters = [f"r{i}" for i in range(6)] + [f"rare{i}" for i in range(10)]
    with transaction(engine) as s:
        p = repo.create_project(s, "dsb")
        for n in range(n_items):
            item_id = f"{STEMS[n % len(STEMS)]}-{n_items - n}"
            cands = sorted(rng.sample(["A", "b", "c10", "c9", "ü"], 3))
            repo.add_item(
                s,
                p,
                Item(
                    id=item_id,
                    prompt=f"Question {n}?",
                    candidates=[{"id": c, "text": rng.choice(ANSWERS) + f" ({c})"} for c in cands],
                ),
            )
            for lo, hi in [(cands[0], cands[1]), (cands[1], cands[2])]:
                for rater in rng.sample(raters, rng.randrange(1, 6)):
                    winner = rng.choice(["a", "a", "b", "tie"])
                    repo.add_judgment(
                        s,
                        p,
                        PairwiseJudgment(
                            item_id=item_id,
                            shown_order=(lo, hi) if rng.random() < 0.5 else (hi, lo),
                            winner=winner,
                            strength=0 if winner == "tie" else rng.choice([1, 2, 3]),
                            provenance={"rater_id": rater},
                        ),
                    )


def _files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("seed", [1, 2])
def test_bounded_fit_writes_the_reference_files(db_url, tmp_path, monkeypatch, seed):
    monkeypatch.setattr(export_manifest, "datetime", _Clock)
    engine = db.open_db(db_url)
    try:
        build(engine, seed)
        reference = _reference().export_reference
        for fmt, file_format in [
            ("trl-preference", "jsonl"),
            ("trl-reward", "parquet"),
            ("openrlhf", "jsonl"),
        ]:
            options = {"format": fmt, "file_format": file_format, "force": True}
            ref_out = tmp_path / "ref" / f"{fmt}-{file_format}"
            ref = reference(
                engine,
                "dsb",
                ExportOptions(out=ref_out, **options),
                aggregator=AGGREGATORS["dawid-skene"],
            )
            ref_files = _files(ref_out)
            assert any(name.startswith("train") for name in ref_files)
            for chunk, run_keys, rows in [(3, 2, 4), (1, 1, 1), (1000, None, None)]:
                monkeypatch.setattr(stream, "CHUNK_ITEMS", chunk)
                if run_keys is not None:
                    monkeypatch.setattr(aggregators, "RUN_KEYS", run_keys)
                    monkeypatch.setattr(export_spill, "MEMORY_VALUES", 2 * run_keys + 1)
                    monkeypatch.setattr(ds, "E_STEP_ROWS", rows)
                else:
                    monkeypatch.undo()
                    monkeypatch.setattr(export_manifest, "datetime", _Clock)
                runs: list[int] = []
                fit = aggregators.DawidSkeneFit.__init__

                def spy(self, votes, rows=None, _fit=fit, runs=runs):
                    _fit(self, votes, rows)
                    runs.append(len(votes.runs))

                monkeypatch.setattr(aggregators.DawidSkeneFit, "__init__", spy)
                new_out = ref_out.parent.parent / "new" / ref_out.name
                new = export_project(
                    engine,
                    "dsb",
                    ExportOptions(out=new_out, **options),
                    aggregator=AGGREGATORS["dawid-skene"],
                )
                monkeypatch.setattr(aggregators.DawidSkeneFit, "__init__", fit)
                assert runs, "the streamed path fitted"
                if run_keys is not None:
                    assert runs[0] > 3, "several runs merged"
                assert _files(new_out) == ref_files, (fmt, file_format, chunk)
                assert new == ref
                assert not list(new_out.parent.glob(".*tmp-spill*")), "the spill is removed"
    finally:
        engine.dispose()


@pytest.mark.parametrize("kernel", ["blocks", "whole"])
@pytest.mark.parametrize("seed", range(8))
def test_design_and_em_on_codes_equal_the_fit_on_labels(seed, kernel, monkeypatch):
    """:func:`design_from_keys` equals the COO-built matrix array for array (duplicate votes
    summed, indices sorted); :func:`dawid_skene_design`'s posteriors, modes and iterations equal
    :func:`dawid_skene`'s bit for bit, with and without ties, pooled raters and E-step blocks;
    ``whole``: the M-step's product without scipy's private kernel (a scipy that lacks it)."""
    if kernel == "whole":
        assert ds._csc_matvecs is not None  # this scipy has it: the fallback is a choice here
        monkeypatch.setattr(ds, "_csc_matvecs", None)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 3000))
    n_u, n_r = int(rng.integers(5, 400)), int(rng.integers(2, 60))
    u, r = rng.integers(0, n_u, n), rng.integers(0, n_r, n)
    r = np.where(rng.random(n) < 0.05, rng.integers(n_r, n_r + 20, n), r)  # rare raters
    classes = [-1, 0, 1] if seed % 2 else [-1, 1]
    labels = rng.choice(classes, n)
    mirror = {-1: 1, 0: 0, 1: -1}
    ref = ds.dawid_skene(u, r, labels, classes=classes, mirror=mirror)
    uu = np.unique(u, return_inverse=True)[1]
    rr = np.unique(r, return_inverse=True)[1]
    cl = np.array(sorted(classes))
    c = np.searchsorted(cl, labels)
    k = len(cl)
    fit_of, n_fit = ds.pooled_raters(rr, int(rr.max()) + 1, ds.MIN_LABELS)
    assert (np.bincount(rr) < ds.MIN_LABELS).any()  # some raters share the pooled matrix
    n_units = int(uu.max()) + 1
    coo = sparse.csr_matrix((np.ones(n), (uu, fit_of[rr] * k + c)), shape=(n_units, n_fit * k))
    key = uu.astype(np.int64) * (n_fit * k) + fit_of[rr] * k + c
    design = ds.design_from_keys(key, n_units, n_fit * k)
    assert design.data.max() > 1  # some duplicate votes summed
    assert design.indices.dtype == np.uint16 and design.data.dtype == np.uint8  # compact
    assert design.shape == coo.shape
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(design, name), getattr(coo, name)), name
    for rows in (1, int(rng.integers(2, 50)), ds.E_STEP_ROWS):
        post, modes, it = ds.dawid_skene_design(
            design, fit_of, n_fit, cl, n, mirror=mirror, rows=rows
        )
        assert np.array_equal(post, ref.posteriors)
        assert np.array_equal(modes, ref.labels)
        assert it == ref.n_iter
