"""A streamed export's per-pair state in bounded memory (issue 27 item 1): the length gate's
verdicts and the margins on a temporary file read back in order, the cohort medians exact from
per-cohort files, the files gone when the export ends. With the bound forced tiny, every
streamed export equals main's in-memory pipeline byte for byte."""

from __future__ import annotations

import importlib.util
import math
import random
import statistics
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest
from sqlalchemy import select

from preflab.io.export import ExportOptions, export_project, stream
from preflab.io.export import spill as export_spill
from preflab.io.export.length_gate import LengthTally
from preflab.io.export.median import FloatFile, file_median, kth
from preflab.io.export.spill import Spill, Tape
from preflab.io.importer import import_files
from preflab.server.export_jobs import remove_partial
from preflab.store import ItemRow, db, repo, transaction

HERE = Path(__file__).resolve().parent


def _module(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_streaming = _module("export_streaming_harness", "test_export_streaming.py")
assert_identical = _streaming.assert_identical


@pytest.fixture
def tiny_bound(monkeypatch):
    """Two values in memory before they go to disk; every spill file made is recorded."""
    monkeypatch.setattr(export_spill, "MEMORY_VALUES", 2)
    made: list[Path] = []
    file = Spill.file

    def recording(self, stem):
        path = file(self, stem)
        made.append(path)
        return path

    monkeypatch.setattr(Spill, "file", recording)
    return made


# -- the tape -------------------------------------------------------------------------------


def test_a_tape_under_its_bound_never_touches_the_disk():
    with Spill() as spill:
        tape = Tape("d", spill, memory=10)
        tape.extend([1.5, math.nan, 3.0])
        assert not spill.used and tape.path is None
        reader = tape.reader()
        got = reader.take(2).tolist() + reader.take(1).tolist()
        assert got[0] == 1.5 and math.isnan(got[1]) and got[2] == 3.0
        with pytest.raises(IndexError):
            reader.take(1)


def test_a_spilled_tape_reads_back_in_order_and_its_directory_goes():
    values = [float(v) for v in range(1, 50)]
    with Spill() as spill:
        tape = Tape("d", spill, memory=4)
        for at in range(0, len(values), 7):
            tape.extend(values[at : at + 7])
        assert spill.used and tape.path is not None and tape.on_disk > 0
        assert len(tape.buffer) < 4 + 7 and len(tape) == len(values)
        directory = tape.path.parent
        reader = tape.reader()
        got = []
        for n in (0, 1, 5, 4, 13, 26):
            got.extend(reader.take(n))
        assert got == values
        reader.close()
    assert not directory.exists()


def test_a_spill_lies_beside_the_output_where_a_cancelled_job_is_cleaned(tmp_path):
    out = tmp_path / "exports" / "run1"
    spill = Spill(near=out)
    path = spill.file("x")
    path.write_bytes(b"x")
    assert path.parent.parent == out.parent and path.parent.name.startswith(".run1.tmp-spill-")
    remove_partial(out)  # what the web app does after a killed job's process
    assert not path.parent.exists()
    spill.close()  # gone already: nothing to do


# -- exact medians --------------------------------------------------------------------------


def _adversarial(rng: np.random.Generator) -> list[np.ndarray]:
    return [
        np.array([1.25]),  # one value
        np.array([2.0, 1.0]),  # even
        np.array([3.0, 1.0, 2.0]),  # odd
        np.full(41, 0.9),  # all tied
        np.array([0.0] * 20 + [1.0] * 20),  # even, the middle between two tie runs
        np.array([0.0] * 20 + [1.0] * 21),
        rng.integers(0, 5, 301) / rng.integers(1, 5, 301),  # ratios of small counts: ties
        rng.integers(0, 5, 300) / rng.integers(1, 5, 300),
        np.array([5e-324, 1e308, 1.7976931348623157e308, 0.0, 1.0, 1.0 + 2**-52]),
        np.concatenate([rng.normal(size=99) * 1e-300, -rng.random(50), rng.random(50) * 1e300]),
        np.nextafter(1.0, 2.0, dtype=np.float64) * np.ones(9) - np.arange(9) * 2**-52,
    ]


@pytest.mark.parametrize("memory", [1, 2, 3, 8, 10_000])
def test_file_medians_equal_statistics_and_numpy(tmp_path, memory):
    rng = np.random.default_rng(27)
    with Spill(near=tmp_path / "o") as spill:
        for values in _adversarial(rng):
            values = values + 0.0  # no -0.0 beside 0.0 (a ratio is never -0.0)
            ratios = FloatFile(spill, "r")
            for at in range(0, len(values), 5):
                ratios.append(values[at : at + 5])
            expected = statistics.median(values.tolist())
            got = ratios.median(memory)
            assert got == expected == float(np.median(values)), (values, memory)
            assert np.float64(got).tobytes() == np.float64(expected).tobytes()
            order = np.sort(values)
            assert ratios.path is not None
            for k in {0, len(values) // 2, len(values) - 1}:
                assert kth(ratios.path, k, memory) == order[k]
    assert FloatFile(Spill(), "none").median() is None
    assert file_median(tmp_path / "unused", 0) is None


def _tally_figures(ratios, keeps, difficulty, domain, spill=None, memory=None):
    tally = LengthTally(spill=spill, memory=memory)
    tally.any_difficulty = any(d is not None for d in difficulty)
    for ratio, keep, d, m in zip(ratios, keeps, difficulty, domain, strict=True):
        tally.by_difficulty.append(tally._code("(none)" if d is None else d))
        tally.by_domain.append(tally._code(m))
        tally.ratios.append(ratio)
        tally.keep.append(keep)
        tally.full()
    return tally, tally.cohorts()


@pytest.mark.parametrize("with_difficulty", [True, False])
def test_cohort_figures_from_disk_equal_the_in_memory_ones(tmp_path, with_difficulty):
    """NaN ratios (a zero-length rejected answer) count as pairs and stay out of the medians;
    a cohort whose kept pairs are all NaN, or that keeps none, has no median after."""
    rng = np.random.default_rng(5)
    n = 500
    counts = zip(rng.integers(0, 6, n).tolist(), rng.integers(0, 6, n).tolist(), strict=True)
    ratios = [c / r if r else math.nan for c, r in counts]  # as the gate's ratio
    keeps = [bool(0.85 <= r <= 1.2) for r in ratios]
    difficulty = [(["easy", "hard", None][i % 3] if with_difficulty else None) for i in range(n)]
    domain = ["math" if i % 4 else "code+math" for i in range(n)]
    # a cohort of NaN ratios only, and one whose every pair is dropped
    ratios += [math.nan, math.nan, 4.0, 5.0]
    keeps += [True, False, False, False]
    difficulty += ["nan-only", "nan-only", "gone", "gone"] if with_difficulty else [None] * 4
    domain += ["nan-only", "nan-only", "gone", "gone"]
    _, expected = _tally_figures(ratios, keeps, difficulty, domain)
    for memory in (1, 3, 64):
        with Spill(near=tmp_path / "o") as spill:
            tally, got = _tally_figures(ratios, keeps, difficulty, domain, spill, memory)
            assert tally.spilled and spill.used
            assert len(tally.keep) < memory
        assert got == expected
    assert expected["by"] == ("difficulty" if with_difficulty else "domain")
    cohort_of = ["(none)" if d is None else d for d in difficulty] if with_difficulty else domain
    for name, figures in expected["cohorts"].items():  # main's rule, written out
        mine = [(r, k) for r, k, c in zip(ratios, keeps, cohort_of, strict=True) if c == name]
        before = [r for r, _ in mine if math.isfinite(r)]
        after = [r for r, k in mine if k and math.isfinite(r)]
        assert figures["pairs"] == len(mine)
        assert figures["dropped"] == sum(not k for _, k in mine)
        assert figures["median_ratio_before"] == (
            round(statistics.median(before), 4) if before else None
        )
        assert figures["median_ratio_after"] == (
            round(statistics.median(after), 4) if after else None
        )
    assert expected["cohorts"]["nan-only"]["median_ratio_before"] is None
    assert expected["cohorts"]["gone"]["median_ratio_after"] is None


# -- whole exports ----------------------------------------------------------------------------


def _pairs_project(engine, tmp_path: Path, name: str, n: int = 90, seed: int = 7) -> None:
    """``n`` items, one or two raters each, answers of 1 to 12 words (length ratios far in and
    out of parity, many ties), strengths 1..3 or none; difficulties on every fifth item and
    domains on most (cohorts both ways)."""
    rng = random.Random(seed)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    records = []
    for i in range(n):
        chosen = " ".join(rng.choices(words, k=rng.randint(1, 12)))
        rejected = " ".join(rng.choices(words, k=rng.randint(1, 12)))
        if chosen == rejected:
            rejected += " nu"
        for rater in ("u", "v")[: rng.choice([1, 2, 2])]:
            record = {"prompt": f"Q{i}?", "chosen": chosen, "rejected": rejected}
            record["labeler"] = rater
            strength = rng.choice([1, 2, 3, None])
            if strength is not None:
                record["strength"] = strength
            records.append(record)
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    with transaction(engine) as s:
        repo.create_project(s, name, kinds=["pairwise"])
    import_files(engine, name, [path])
    with transaction(engine) as s:
        for k, item in enumerate(s.scalars(select(ItemRow).order_by(ItemRow.pk))):
            item.domains = [["math"], ["code"], ["code", "math"], []][k % 4]
            if k % 5 == 0:
                item.meta = {**(item.meta or {}), "difficulty": ["easy", "hard"][k % 2]}


@pytest.fixture
def spilled_engine(db_url, tmp_path):
    engine = db.open_db(db_url)
    _pairs_project(engine, tmp_path, "s7")
    yield engine
    engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize(
    "kw",
    [{}, {"length_gate": (0.5, 3.0)}, {"length_gate": None}, {"min_raters": 2}],
    ids=["default-gate", "wide-gate", "no-gate", "min-raters-2"],
)
def test_streamed_exports_with_a_tiny_bound_are_byte_identical(
    spilled_engine, tiny_bound, kw, frozen_clock, small_chunks, tmp_path
):
    written = 0
    for fmt in ("trl-preference", "trl-kto", "openrlhf"):
        file_format = "parquet" if fmt == "openrlhf" else "jsonl"
        tiny_bound.clear()
        written += assert_identical(
            spilled_engine, "s7", fmt, file_format, kw, "majority", tmp_path
        )
        if fmt != "trl-kto":  # pairs: verdicts (with a gate), margins and ratios went to disk
            assert tiny_bound, fmt
            assert all(not p.parent.exists() for p in tiny_bound)
    assert written == 3
    manifests = list((tmp_path / "new").glob("*/manifest.json"))
    assert manifests
    assert not list(tmp_path.glob("new/.*"))  # no spill directory left beside the outputs


@pytest.mark.slow
def test_margins_and_cohorts_differ_from_the_raw_ones_in_the_tested_project(
    spilled_engine, tiny_bound, monkeypatch, tmp_path
):
    """The byte-identity above is not vacuous: the verbosity penalty changed margins, the
    gate dropped pairs, and the cohorts are by difficulty with several of them."""

    monkeypatch.setattr(stream, "CHUNK_ITEMS", 3)
    manifest = export_project(
        spilled_engine,
        "s7",
        ExportOptions(format="trl-preference", out=tmp_path / "o", force=True),
    )
    gate = orjson.loads(orjson.dumps(manifest["gates"]))
    cohorts = gate["length_parity"]["cohorts"]
    assert cohorts["by"] == "difficulty" and len(cohorts["cohorts"]) >= 3
    assert sum(c["dropped"] for c in cohorts["cohorts"].values()) > 0
    assert sum(c["pairs"] for c in cohorts["cohorts"].values()) > 20
    verbosity = manifest["verbosity_penalty"]
    assert verbosity["pairs_penalized"] > 0


def test_an_export_that_fails_after_spilling_leaves_no_files(
    db_url, tmp_path, tiny_bound, monkeypatch
):
    monkeypatch.setattr(stream, "CHUNK_ITEMS", 3)
    engine = db.open_db(db_url)
    _pairs_project(engine, tmp_path, "f3")

    class Stop(Exception):
        pass

    def progress(phase, done, total):
        if phase == "write":
            raise Stop

    out = tmp_path / "exports" / "f3"
    with pytest.raises(Stop):
        export_project(
            engine,
            "f3",
            ExportOptions(format="trl-preference", out=out, force=True),
            progress=progress,
        )
    assert tiny_bound  # pass 1 spilled before pass 2 stopped
    assert all(not p.exists() for p in tiny_bound)
    assert list(out.parent.iterdir()) == []
    engine.dispose()


def test_the_in_memory_gate_keeps_every_pair_in_memory():
    """Without a spill (the in-memory path holds every pair anyway) nothing goes to disk."""
    tally = LengthTally(memory=1)
    tally.ratios.extend([1.0, 2.0])
    tally.keep.extend([1, 0])
    tally.by_difficulty.extend([0, 0])
    tally.by_domain.extend([0, 0])
    tally.names["x"] = 0
    tally.full()
    assert not tally.spilled and len(tally.keep) == 2
