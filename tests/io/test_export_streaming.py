"""The streamed export writes the same bytes as today's in-memory pipeline (issue 27 item 1).

The reference is main's pipeline at 93c9a20, copied into ``export_reference.py``. Every export
format x JSONL / Parquet / ``hf`` x the options that change what is read or gated, on the
fixtures in ``tests/data`` and on generated projects (revisions, adjudications, AI labels, gold
items, several import batches, telemetry flags): every file of the export, manifest and card
included (their clock frozen), is byte-identical (``hf``: but ``state.json``'s ``_fingerprint``,
and so that file's digest in the manifest; the rows, features and info load the same). Chunks
of 3 items make every chunk boundary
fall inside the project. Also: batched token lengths equal one-at-a-time ones, and the Parquet
re-cutting keeps row groups as the in-memory writer cuts them.
"""

from __future__ import annotations

import importlib.util
import random
import re
import sys
from pathlib import Path

import datasets
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select, update

from preflab.io.export import (
    AGGREGATORS,
    EXPORT_FORMATS,
    ExportError,
    ExportOptions,
    agreement_gate,
    export_project,
    stream,
    writers,
)
from preflab.io.export import seen as export_seen
from preflab.io.export.base import chunked
from preflab.io.export.resolve import aggregate_pairwise
from preflab.io.export.token_cache import CachedLength
from preflab.io.export.writers import MANIFEST, write_parquet
from preflab.io.importer import ImportOptions, import_files
from preflab.quality.bias import default_token_length
from preflab.store import ItemRow, JudgmentRow, db, repo, session_factory, transaction
from preflab.store.repo import get_project, iter_items_with_judgments

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"


def _module(name: str, file: str):
    """A helper module beside this file (``tests/io`` is not a package)."""
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_reference = _module("export_reference", "export_reference.py")
export_reference = _reference.export_reference
_oracle = _module("export_oracle_generator", "test_export_oracle.py")
KINDS, generate, load = _oracle.KINDS, _oracle.generate, _oracle.load
FIXTURES = {
    "panda": "pandalm-170.json",
    "tulu": "tulu1-sample.jsonl",
    "hh": "hh-rlhf-300.jsonl.gz",
    "squality": "squality-sample.jsonl",
    "traj": "trajectory-rlhf-2026.11.json",
}
ALL_KINDS = [*KINDS, "rubric"]
STREAMED = ("trl-preference", "trl-reward", "openrlhf")
#: the formats whose rows are not pairs: thumbs (and pairs unpaired), judgments, demonstrations,
#: steps, items; they stream too, through the same two passes
ROW_FORMATS = ("trl-kto", "raw", "trl-sft", "trl-stepwise", "verl", "to-label", "rollouts")
#: option sets: (label, ExportOptions keywords, aggregator)
OPTIONS = [
    ("default", {}, "majority"),
    ("dawid-skene", {}, "dawid-skene"),
    ("no-length-gate", {"length_gate": None}, "majority"),
    (
        "include-ai-gold-flagged",
        {"include_ai": True, "include_gold": True, "include_flagged": True},
        "majority",
    ),
    ("min-raters-2", {"min_raters": 2}, "majority"),
    ("provenance", {"provenance_columns": True, "include_ai": True}, "majority"),
    ("drop-disagreement", {"drop_disagreement": 0.7}, "majority"),
    ("words", {"length_unit": "words"}, "majority"),
]


@pytest.fixture
def fewer_replicates(monkeypatch):
    """A 20-replicate agreement bootstrap in both pipelines (the 200 of an export are most of
    its time here); the interval is still compared byte for byte. The tests of the pairs
    formats keep 200."""
    ours, theirs = agreement_gate.agreement_figures, _reference.agreement_figures
    monkeypatch.setattr(agreement_gate, "agreement_figures", lambda labels: ours(labels, n_boot=20))
    monkeypatch.setattr(_reference, "agreement_figures", lambda labels: theirs(labels, n_boot=20))


def _files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()
    }


def _run(fn, *args, **kw):
    try:
        return fn(*args, **kw), None
    except ExportError as exc:
        return None, str(exc)


def assert_identical(
    engine, project: str, fmt: str, file_format: str, kw: dict, agg: str, tmp: Path
):
    """Export with the reference and with ``export_project``; every file byte-identical (or the
    same refusal)."""
    tag = f"{project}-{fmt}-{file_format}-{len(list(tmp.rglob('*')))}"
    ref_out, new_out = tmp / "ref" / tag, tmp / "new" / tag  # the manifest names the directory
    options = {"format": fmt, "file_format": file_format, "force": True, **kw}
    aggregator = AGGREGATORS[agg]
    ref, ref_error = _run(
        export_reference,
        engine,
        project,
        ExportOptions(out=ref_out, **options),
        aggregator=aggregator,
    )
    new, new_error = _run(
        export_project,
        engine,
        project,
        ExportOptions(out=new_out, **options),
        aggregator=aggregator,
    )
    assert new_error == ref_error, (tag, options)
    if ref_error is not None:
        assert not new_out.exists()
        return False
    ref_files, new_files = _files(ref_out), _files(new_out)
    assert sorted(new_files) == sorted(ref_files), (tag, options)
    if file_format == "hf":
        assert_same_dataset(ref_out, new_out)
        ref, new = _fingerprint_free(ref_files, ref), _fingerprint_free(new_files, new)
    for name, content in ref_files.items():
        assert new_files[name] == content, (tag, options, name)
    assert new == ref
    return True


def _fingerprint_free(files: dict[str, bytes], manifest: dict) -> dict:
    """An ``hf`` export's files and manifest less ``state.json``'s ``_fingerprint`` (``datasets``
    hashes a pickle of the whole in-memory table; the streamed writer the shards' bytes,
    :mod:`preflab.io.export.hf_writer`) and the digest of that file, which is all it changes;
    ``files`` in place (the manifest file parsed), the returned manifest likewise."""
    states = [n for n in files if n.endswith("/state.json")]
    assert states

    def without(manifest: dict) -> dict:
        return {
            **manifest,
            "files": {
                name: ({"bytes": info["bytes"]} if name in states else info)
                for name, info in manifest["files"].items()
            },
        }

    for name in states:
        state = orjson.loads(files[name])
        assert re.fullmatch(r"[0-9a-f]{16}", state.pop("_fingerprint"))
        files[name] = orjson.dumps(state, option=orjson.OPT_SORT_KEYS)
    files[MANIFEST] = orjson.dumps(without(orjson.loads(files[MANIFEST])))
    return without(manifest)


def assert_same_dataset(ref_out: Path, new_out: Path) -> None:
    """``datasets.load_from_disk`` reads the same splits, rows, features and info from both."""
    ref, new = datasets.load_from_disk(str(ref_out)), datasets.load_from_disk(str(new_out))
    assert list(new) == list(ref)
    for split in ref:
        assert new[split].features == ref[split].features
        assert new[split].to_list() == ref[split].to_list()
        assert new[split].info == ref[split].info
        assert new[split].split == ref[split].split
        assert new[split].num_rows == ref[split].num_rows


@pytest.fixture
def fixtures_engine(db_url, tmp_path):
    engine = db.open_db(db_url)
    for name, file in FIXTURES.items():
        with transaction(engine) as s:
            repo.create_project(s, name, kinds=ALL_KINDS)
        import_files(engine, name, [DATA / file], ImportOptions(skip_invalid=True))
    yield engine
    engine.dispose()


def flag_some_labels(engine, every: int = 5) -> None:
    """Strong telemetry evidence (a pasted answer) on every ``every``-th judgment."""
    with transaction(engine) as s:
        pks = s.scalars(select(JudgmentRow.pk).order_by(JudgmentRow.pk)).all()
        flagged = pks[::every]
        s.execute(
            update(JudgmentRow)
            .where(JudgmentRow.pk.in_(flagged))
            .values(telemetry={"untrusted_paste_chars": 1500, "iki_cv": 0.02})
        )


@pytest.fixture
def generated_engine(db_url, tmp_path):
    """Three generated projects: revisions, adjudications, AI labels, gold items, refused
    records, several import batches; every fifth judgment carries strong telemetry evidence."""
    engine = db.open_db(db_url)
    for seed in (3, 11, 17):
        load(engine, f"g{seed}", generate(seed), tmp_path)
    flag_some_labels(engine)
    yield engine
    engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("file_format", ["jsonl", "parquet", "hf"])
def test_every_format_on_the_fixtures_is_byte_identical(
    fixtures_engine, file_format, frozen_clock, small_chunks, fewer_replicates, tmp_path
):
    written = 0
    for project in FIXTURES:
        for fmt in EXPORT_FORMATS:
            written += assert_identical(
                fixtures_engine, project, fmt, file_format, {}, "majority", tmp_path
            )
    assert written >= 2 * len(EXPORT_FORMATS)  # most formats write something on some fixture


@pytest.mark.slow
@pytest.mark.parametrize("label,kw,agg", OPTIONS, ids=[o[0] for o in OPTIONS])
def test_pairs_formats_on_generated_projects_are_byte_identical(
    generated_engine, label, kw, agg, frozen_clock, small_chunks, tmp_path
):
    written = 0
    for project in ("g3", "g11", "g17"):
        for fmt in STREAMED:
            for file_format in ("jsonl", "parquet"):
                written += assert_identical(
                    generated_engine, project, fmt, file_format, kw, agg, tmp_path
                )
    assert written >= len(STREAMED) * 2  # not every export refused


@pytest.mark.slow
@pytest.mark.parametrize("label,kw,agg", OPTIONS[1:], ids=[o[0] for o in OPTIONS[1:]])
def test_row_formats_on_generated_projects_are_byte_identical(
    generated_engine, label, kw, agg, frozen_clock, small_chunks, fewer_replicates, tmp_path
):
    """Every option that changes what is read, aggregated or gated, on the formats whose rows
    are not pairs (the default set runs in the test below)."""
    written = 0
    for project in ("g3", "g17"):
        for fmt in ROW_FORMATS:
            file_format = "parquet" if fmt in ("trl-kto", "raw") else "jsonl"
            written += assert_identical(
                generated_engine, project, fmt, file_format, kw, agg, tmp_path
            )
    assert written >= len(ROW_FORMATS)


@pytest.mark.slow
@pytest.mark.parametrize("file_format", ["jsonl", "parquet", "hf"])
def test_every_format_on_a_generated_project_is_byte_identical(
    generated_engine, file_format, frozen_clock, small_chunks, fewer_replicates, tmp_path
):
    written = 0
    for fmt in EXPORT_FORMATS:
        for _label, kw, agg in OPTIONS[:1] + OPTIONS[3:5]:
            written += assert_identical(
                generated_engine, "g11", fmt, file_format, kw, agg, tmp_path
            )
    assert written >= len(EXPORT_FORMATS)


@pytest.mark.slow
def test_hf_exports_are_byte_identical(fixtures_engine, frozen_clock, small_chunks, tmp_path):
    for fmt in STREAMED:
        assert assert_identical(fixtures_engine, "panda", fmt, "hf", {}, "majority", tmp_path)


def test_a_refusal_below_the_agreement_floor_is_the_same(
    db_url, tmp_path, frozen_clock, small_chunks
):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "split", kinds=["pairwise"])
    records = [
        {"id": f"d{n}", "prompt": f"Q{n}", "chosen": c, "rejected": r, "labeler": rater}
        for n in range(8)
        for rater, (c, r) in (("x", ("A", "B")), ("y", ("B", "A")))
    ]
    path = tmp_path / "split.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    import_files(engine, "split", [path])
    options = {"format": "trl-preference", "length_gate": None}
    _, ref_error = _run(
        export_reference, engine, "split", ExportOptions(out=tmp_path / "r", **options)
    )
    _, new_error = _run(
        export_project, engine, "split", ExportOptions(out=tmp_path / "n", **options)
    )
    assert ref_error is not None and "agreement below policy.min_alpha" in ref_error
    assert new_error == ref_error
    assert not (tmp_path / "n").exists()
    assert assert_identical(
        engine, "split", "trl-preference", "jsonl", {"length_gate": None}, "majority", tmp_path
    )
    engine.dispose()


def test_progress_reports_phases_and_items(db_url, tmp_path):
    engine = db.open_db(db_url)
    load(engine, "g5", generate(5), tmp_path)
    calls: list[tuple[str, int, int]] = []
    export_project(
        engine,
        "g5",
        ExportOptions(format="trl-preference", out=tmp_path / "o", force=True),
        progress=lambda phase, done, total: calls.append((phase, done, total)),
    )
    with session_factory(engine)() as s:
        items = sum(1 for _ in iter_items_with_judgments(s, get_project(s, "g5")))
    assert [c[0] for c in calls] == ["read", "write"]
    assert all(total == items for _, _, total in calls)
    calls.clear()
    export_project(  # Dawid-Skene: a first pass fits the model on every vote
        engine,
        "g5",
        ExportOptions(format="trl-kto", out=tmp_path / "ds", force=True),
        aggregator=AGGREGATORS["dawid-skene"],
        progress=lambda phase, done, total: calls.append((phase, done, total)),
    )
    assert [c[0] for c in calls] == ["fit", "read", "write"]
    assert all(total == items for _, _, total in calls)
    calls.clear()
    export_project(  # a `datasets` directory streams too (issue 27)
        engine,
        "g5",
        ExportOptions(format="trl-kto", out=tmp_path / "hf", file_format="hf", force=True),
        progress=lambda phase, done, total: calls.append((phase, done, total)),
    )
    assert [c[0] for c in calls] == ["read", "write"]
    calls.clear()
    export_project(  # another aggregator may look at every pair: read into memory
        engine,
        "g5",
        ExportOptions(format="trl-kto", out=tmp_path / "custom", file_format="hf", force=True),
        aggregator=lambda votes, drops=None: aggregate_pairwise(votes, drops),
        progress=lambda phase, done, total: calls.append((phase, done, total)),
    )
    assert [c[0] for c in calls] == ["read", "gates", "write"]
    engine.dispose()


def test_batched_token_lengths_equal_one_at_a_time(tmp_path):
    """Every candidate text of the fixtures (and some edge cases), measured through the cache in
    batches, has the length the one-at-a-time tokenizer gives."""
    engine = db.open_db(f"sqlite:///{tmp_path}/t.db")
    texts: list[str] = ["", " ", "a" * 5000, "naïve café 東京 🙂", "\x00odd\u200b", "word " * 700]
    for name, file in FIXTURES.items():
        with transaction(engine) as s:
            repo.create_project(s, name, kinds=ALL_KINDS)
        import_files(engine, name, [DATA / file], ImportOptions(skip_invalid=True))
        with session_factory(engine)() as s:
            for iwj in iter_items_with_judgments(s, get_project(s, name)):
                texts += [c.as_text() for c in iwj.item.candidates]
    one = default_token_length()
    expected = [one(t) for t in texts]
    cached = CachedLength(one, size=50)  # smaller than the texts: entries leave as it goes
    assert cached.lengths(texts) == expected
    assert cached.lengths(texts[::-1]) == expected[::-1]
    assert [cached(t) for t in texts] == expected
    assert len(cached._lengths) <= 50
    assert len(texts) > 500
    engine.dispose()


def test_parquet_row_groups_are_cut_as_the_in_memory_writer_cuts_them(tmp_path, monkeypatch):
    """The writer cuts row groups itself, whatever batches the rows came in
    (``writers.row_groups``; the streamed export hands it each chunk's rows)."""
    monkeypatch.setattr(writers, "ROW_GROUP_ROWS", 10)
    rng = random.Random(0)
    schema = pa.schema([("prompt", pa.string()), ("margin", pa.float64())])
    rows = [(f"p{rng.randrange(50)}" * rng.randrange(1, 4), rng.random()) for _ in range(103)]

    def batch(part):
        return {"prompt": [r[0] for r in part], "margin": [r[1] for r in part]}

    whole = [batch(rows[r.start : r.stop]) for r in chunked(len(rows), 10)]
    cuts, start, pieces = [0, 1, 9, 9, 30, 61, 62, 103], 0, []
    for stop in cuts[1:]:
        pieces.append(batch(rows[start:stop]))
        start = stop
    write_parquet(tmp_path / "a.parquet", iter(whole), schema)
    write_parquet(tmp_path / "b.parquet", iter(pieces), schema)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert pq.ParquetFile(tmp_path / "b.parquet").num_row_groups == 11


def test_the_length_cohort_field_sees_items_of_chunks_without_pairs(
    db_url, tmp_path, frozen_clock, monkeypatch
):
    """An item with ``metadata.difficulty`` whose chunk keeps no pair (one rater, min_raters 2)
    still makes the manifest's cohorts be by difficulty, as the in-memory gate does."""
    monkeypatch.setattr(stream, "CHUNK_ITEMS", 1)
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "cohorts", kinds=["pairwise"])
    records = [
        {"id": f"x{n}", "prompt": f"Q{n}", "chosen": "a b c", "rejected": "a b d", "labeler": r}
        for n in range(4)
        for r in (("u",) if n == 0 else ("u", "v"))
    ]
    path = tmp_path / "cohorts.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    import_files(engine, "cohorts", [path])
    with transaction(engine) as s:
        first = s.scalars(select(ItemRow).order_by(ItemRow.pk).limit(1)).one()
        first.meta = {**(first.meta or {}), "difficulty": "hard"}
    assert assert_identical(
        engine, "cohorts", "trl-preference", "jsonl", {"min_raters": 2}, "majority", tmp_path
    )
    (out,) = (tmp_path / "new").iterdir()
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["gates"]["length_parity"]["cohorts"]["by"] == "difficulty"
    engine.dispose()


def test_rollouts_leave_out_a_repeat_in_another_chunk(db_url, tmp_path, frozen_clock, monkeypatch):
    """The same answer to the same prompt on items read in different chunks is one row, as in
    the whole-project export (``rollouts`` keeps a digest of every answer it wrote)."""
    monkeypatch.setattr(stream, "CHUNK_ITEMS", 1)
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "repeats", kinds=["pairwise"])
    records = [
        {"id": f"r{n}", "prompt": "Q", "chosen": "A", "rejected": f"B{n}", "labeler": "u"}
        for n in range(4)
    ]
    path = tmp_path / "repeats.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    import_files(engine, "repeats", [path])
    for file_format in ("jsonl", "parquet"):
        assert assert_identical(
            engine, "repeats", "rollouts", file_format, {}, "majority", tmp_path
        )
    (written,) = (tmp_path / "new").rglob("train.jsonl")
    rows = [orjson.loads(line) for line in written.read_bytes().splitlines()]
    assert sorted(r["response"] for r in rows) == ["A", "B0", "B1", "B2", "B3"]
    engine.dispose()


def test_rollouts_row_groups_span_chunks(db_url, tmp_path, frozen_clock, monkeypatch):
    """A ``rollouts`` batch (a Parquet row group) ends at the first item boundary past
    ``BATCH_ROWS`` rows whatever chunk that falls in: the earlier chunks' rows wait as Arrow
    columns, and the files are the whole-project export's, byte for byte, JSONL (a chunk's rows
    at a time) and Parquet (several row groups, each from several chunks)."""
    import pyarrow.parquet as pq

    from preflab.io.export import rollouts as export_rollouts

    monkeypatch.setattr(stream, "CHUNK_ITEMS", 3)
    monkeypatch.setattr(export_rollouts, "BATCH_ROWS", 7)
    monkeypatch.setattr(_reference, "BATCH_ROWS", 7)
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "groups", kinds=["pairwise"])
    records = [
        {"id": f"g{n}", "prompt": f"Q{n}", "chosen": f"A{n}", "rejected": "B", "labeler": "u"}
        for n in range(15)
    ]
    path = tmp_path / "groups.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    import_files(engine, "groups", [path])
    for file_format in ("jsonl", "parquet"):
        assert assert_identical(engine, "groups", "rollouts", file_format, {}, "majority", tmp_path)
    (written,) = (tmp_path / "new").rglob("train.parquet")
    meta = pq.ParquetFile(written).metadata
    # 2 rows an item, 6 a chunk: a group ends inside a chunk, after rows of the chunk before
    assert [meta.row_group(k).num_rows for k in range(meta.num_row_groups)] == [8, 8, 8, 6]
    engine.dispose()


def test_rollouts_leave_out_repeats_once_the_written_answers_are_on_disk(
    db_url, tmp_path, frozen_clock, monkeypatch
):
    """Past ``SEEN_IN_MEMORY`` answers the digests move to a temporary SQLite table: the rows
    are still the whole-project export's, byte for byte."""
    monkeypatch.setattr(stream, "CHUNK_ITEMS", 2)
    monkeypatch.setattr(export_seen, "SEEN_IN_MEMORY", 3)
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "spill", kinds=["pairwise"])
    records = [
        {
            "id": f"r{n}",
            "prompt": f"Q{n % 3}",
            "chosen": "A",
            "rejected": f"B{n % 5}",
            "labeler": "u",
        }
        for n in range(20)
    ]
    path = tmp_path / "spill.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    import_files(engine, "spill", [path])
    for file_format in ("jsonl", "parquet"):
        assert assert_identical(engine, "spill", "rollouts", file_format, {}, "majority", tmp_path)
    (written,) = (tmp_path / "new").rglob("train.jsonl")
    rows = [orjson.loads(line) for line in written.read_bytes().splitlines()]
    expected = {(f"Q{n % 3}", a) for n in range(20) for a in ("A", f"B{n % 5}")}
    assert sorted((r["prompt"], r["response"]) for r in rows) == sorted(expected)
    engine.dispose()


@pytest.mark.slow
def test_row_groups_past_the_byte_bound_hold_the_same_rows(
    fixtures_engine, frozen_clock, small_chunks, tmp_path, monkeypatch
):
    """Past ``writers.ROW_GROUP_BYTES`` a Parquet file has more, smaller row groups: the
    streamed and the in-memory export still write the same bytes, and the rows, values and
    schema are those of the export with the default bound; an ``hf`` directory cut from those
    groups loads the same dataset."""
    unbounded = {}
    for file_format in ("parquet", "hf"):
        out = tmp_path / f"default-{file_format}"
        options = ExportOptions(
            format="trl-preference", out=out, file_format=file_format, force=True
        )
        export_project(fixtures_engine, "panda", options)
        unbounded[file_format] = out
    monkeypatch.setattr(writers, "ROW_GROUP_BYTES", 4096)
    assert assert_identical(
        fixtures_engine, "panda", "trl-preference", "parquet", {}, "majority", tmp_path
    )
    (bounded,) = (tmp_path / "new").rglob("train.parquet")
    meta = pq.ParquetFile(bounded).metadata
    assert (
        meta.num_row_groups > 3
        and pq.ParquetFile(unbounded["parquet"] / "train.parquet").metadata.num_row_groups == 1
    )
    assert pq.read_table(bounded).equals(pq.read_table(unbounded["parquet"] / "train.parquet"))
    out = tmp_path / "bounded-hf"
    options = ExportOptions(format="trl-preference", out=out, file_format="hf", force=True)
    export_project(fixtures_engine, "panda", options)
    assert_same_dataset(unbounded["hf"], out)
