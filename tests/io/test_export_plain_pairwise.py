"""The export's fast path for plain pairwise items (issue 27, the export's CPU): every file
of an export is the same bytes with the fast path as with it switched off (the general label
set, :func:`~preflab.io.export.resolve.pair_votes`' general path), on projects with each twist
the fast path must leave to the general steps (rankings, revisions, adjudications, AI labels,
gold items, thumbs, steps, demonstrations, flagged labels: the generated projects of
``test_export_oracle.py``) and on a project of plain pairwise labels only; both paths run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from preflab.io.export import collector as collector_module
from preflab.io.export import columnar, plain_read, resolve
from preflab.io.importer import ImportOptions, import_files
from preflab.store import db, repo, transaction

HERE = Path(__file__).resolve().parent


def _module(name: str, file: str):
    """A helper module beside this file (``tests/io`` is not a package)."""
    spec = importlib.util.spec_from_file_location(name, HERE / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_streaming = _module("export_streaming_helpers_plain", "test_export_streaming.py")
_files = _streaming._files
generate, load, flag_some_labels = (
    _streaming.generate,
    _streaming.load,
    _streaming.flag_some_labels,
)

FORMATS = ("trl-preference", "trl-reward", "openrlhf", "trl-kto", "raw", "verl")


def _plain_project(engine, tmp_path: Path) -> None:
    """Twelve items, three raters each, pairwise labels only (TRL rows with a labeler)."""
    import orjson

    rows = [
        {
            "prompt": f"Question {n}?",
            "chosen": f"a fine answer to question {n} " + "word " * (n % 5),
            "rejected": f"a poor answer to question {n}",
            "labeler": rater,
            "strength": 1 + (n + k) % 3,
        }
        for n in range(12)
        for k, rater in enumerate(("ann", "bob", "cyd"))
    ]
    path = tmp_path / "plain.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    with transaction(engine) as s:
        repo.create_project(s, "plain", kinds=["pairwise"])
    import_files(engine, "plain", [path], ImportOptions())
    # plain items still, with labels the reading sets aside or marks: excluded, AI, AI-assisted
    from sqlalchemy import select, update

    from preflab.store import JudgmentRow

    with transaction(engine) as s:
        project = repo.get_project(s, "plain")
        pks = s.scalars(
            select(JudgmentRow.pk)
            .where(JudgmentRow.project_pk == project.pk)
            .order_by(JudgmentRow.pk)
        ).all()
        s.execute(
            update(JudgmentRow)
            .where(JudgmentRow.pk == pks[0])
            .values(excluded=True, exclusion_reason="spam")
        )
        s.execute(update(JudgmentRow).where(JudgmentRow.pk.in_(pks[4:6])).values(source="ai"))
        s.execute(update(JudgmentRow).where(JudgmentRow.pk == pks[9]).values(source="ai_assisted"))
        # plurality's outcomes on plain items: no majority (item 4: a, b, tie), a tie (item 5:
        # two ties), a split vote (item 6: 2 to 1) and an unknown strength (item 7)
        flip = {"a": "b", "b": "a"}
        for pk, change in ((13, "flip"), (14, "tie"), (15, "tie"), (16, "tie"), (18, "flip")):
            body = dict(s.get(JudgmentRow, pks[pk]).body)
            body["winner"] = flip[body["winner"]] if change == "flip" else "tie"
            s.execute(update(JudgmentRow).where(JudgmentRow.pk == pks[pk]).values(body=body))
        body = {k: v for k, v in s.get(JudgmentRow, pks[21]).body.items() if k != "strength"}
        s.execute(update(JudgmentRow).where(JudgmentRow.pk == pks[21]).values(body=body))


@pytest.fixture
def engine(db_url, tmp_path):
    engine = db.open_db(db_url)
    for seed in (3, 17):
        load(engine, f"g{seed}", generate(seed), tmp_path)
    flag_some_labels(engine)
    _plain_project(engine, tmp_path)
    yield engine
    engine.dispose()


@pytest.fixture
def counted(monkeypatch):
    """How often each fast path served an item and declined one: the label set at once
    (``plain``/``general``) and the item read from its rows (``rows``: lean rows, a
    :class:`~.columnar.PlainItem`; ``objects``: read again in full and built into objects)."""
    seen = {"plain": 0, "general": 0, "rows": 0, "objects": 0}
    real = resolve.plain_pairwise
    real_rows = columnar.plain_item
    real_full = plain_read.item_with_judgments

    def counting(judgments, order):
        out = real(judgments, order)
        seen["plain" if out is not None else "general"] += 1
        return out

    def counting_rows(*args):
        out = real_rows(*args)
        seen["rows"] += out is not None
        return out

    def counting_full(*args):
        seen["objects"] += 1
        return real_full(*args)

    monkeypatch.setattr(collector_module, "plain_pairwise", counting)
    monkeypatch.setattr(columnar, "plain_item", counting_rows)
    monkeypatch.setattr(plain_read, "item_with_judgments", counting_full)
    return seen


def _export(engine, project, fmt, file_format, out: Path, **kw):
    from preflab.io.export import ExportError, ExportOptions, export_project

    options = ExportOptions(out=out, format=fmt, file_format=file_format, force=True, **kw)
    try:
        export_project(engine, project, options)
    except ExportError as exc:
        return str(exc)
    return _files(out)


@pytest.mark.slow
@pytest.mark.parametrize("file_format", ["jsonl", "parquet", "hf"])
def test_the_fast_path_writes_the_general_paths_bytes(
    engine, file_format, counted, frozen_clock, small_chunks, monkeypatch, tmp_path
):
    written = 0
    for project in ("g3", "g17", "plain"):
        for fmt in FORMATS if file_format == "jsonl" else FORMATS[:3]:
            for kw in ({}, {"aggregation": "dawid-skene"}, {"include_ai": True}):
                tag = f"{project}-{fmt}-{file_format}-{sorted(kw)}"
                # the same directory name: the manifest and card name the output
                fast = _export(engine, project, fmt, file_format, tmp_path / "f" / tag, **kw)
                with monkeypatch.context() as m:
                    m.setattr(collector_module, "plain_pairwise", lambda j, o: None)
                    m.setattr(resolve, "_plain_pair_votes", lambda labelled: None)
                    m.setattr(columnar, "plain_item", lambda *args: None)
                    general = _export(engine, project, fmt, file_format, tmp_path / "g" / tag, **kw)
                assert fast == general, tag
                written += not isinstance(fast, str)
    assert written >= 10
    assert counted["plain"] > 0 and counted["general"] > 0  # both paths ran
    assert counted["rows"] > 0 and counted["objects"] > 0


@pytest.mark.parametrize("kw", [{"provenance_columns": True}, {"include_flagged": True}])
def test_the_rows_path_with_provenance_columns_and_flags(
    engine, kw, counted, frozen_clock, small_chunks, monkeypatch, tmp_path
):
    """The provenance columns read the plain labels (:class:`~.columnar.PlainLabel`) as they
    read the judgments; with ``include_flagged`` no telemetry is read (items with telemetry
    still take the objects: the rows path leaves every label with telemetry to them)."""
    for project in ("g3", "plain"):
        for fmt in ("trl-preference", "trl-kto"):
            tag = f"{project}-{fmt}-{sorted(kw)}"
            fast = _export(engine, project, fmt, "jsonl", tmp_path / "f" / tag, **kw)
            with monkeypatch.context() as m:
                m.setattr(columnar, "plain_item", lambda *args: None)
                general = _export(engine, project, fmt, "jsonl", tmp_path / "g" / tag, **kw)
            assert fast == general, tag
            assert not isinstance(fast, str), tag
    assert counted["rows"] > 0 and counted["objects"] > 0


def _raw_items(engine, project: str):
    """Per item: its rows as ``iter_raw_chunks`` reads them, its lean judgment rows and whether
    SQL flagged every one plain (:mod:`~preflab.io.export.plain_read`)."""
    from preflab.io.export import plain_read

    with transaction(engine) as s:
        p = repo.get_project(s, project)
        lean = (item for part in plain_read.lean_chunks(s, p) for item in part)
        for part in repo.iter_raw_chunks(s, p, include_excluded=True):
            for row in part.items:
                lean_row, lean_cands, lean_judgments, flagged = next(lean)
                assert (lean_row, lean_cands) == (row, part.candidates[row[0]])
                full = part.judgments[row[0]]
                assert [j[0] for j in lean_judgments] == [j[0] for j in full]
                yield row, part.candidates[row[0]], full, lean_judgments, flagged, part.raw_json
        assert next(lean, None) is None


def _python_plain(row, raw: bool) -> bool:
    """:func:`~.plain_read.python_plain` of a full judgment row (``JUDGMENT_COLUMNS``)."""
    names = ("kind", "rubric_key", "review_pass", "telemetry", "judge", "assisted_by")
    at = (2, 7, 9, 13, 16, 17)
    columns = {n: row[k] for n, k in zip(names, at, strict=True)}
    body = repo.json_value(row[3]) if raw else row[3]
    return plain_read.python_plain(columns, body, sqlite=raw)


def test_a_plain_item_has_the_objects_votes_and_labels(engine):
    """Every item the rows path takes has the votes of the label set at once
    (:func:`~.resolve.plain_pairwise` on its judgment objects) and a label per judgment with
    the fields the export reads; every item it declines is one the objects show is not
    plain (another kind, a pass-2 label, telemetry, a rater twice on a pair)."""
    from preflab.schema import PairwiseJudgment

    taken = declined = 0
    for project in ("g3", "g17", "plain"):
        for row, cands, judgments, lean, flagged, raw in _raw_items(engine, project):
            plain = columnar.plain_item(row, cands, lean, raw, False) if flagged else None
            full = repo.item_with_judgments(row, cands, judgments, raw)
            # the SQL flag is exactly the columns' and the body's conditions (kind, pass,
            # telemetry, rubric, judge, assist record; the body's keys and values) on every
            # judgment of the item
            assert flagged == all(_python_plain(j, raw) for j in judgments)
            if plain is None:
                declined += 1
                kept = [
                    (m["pk"], j)
                    for j, m in zip(full.judgments, full.meta, strict=True)
                    if not m["excluded"] and j.provenance.source != "ai"
                ]
                assert (
                    any(
                        type(j) is not PairwiseJudgment
                        or j.provenance.telemetry is not None
                        or int(j.provenance.review_pass) >= 2
                        or j.provenance.rubric_id is not None
                        for j in full.judgments
                    )
                    or resolve.plain_pairwise([j for _, j in kept], [pk for pk, _ in kept]) is None
                )
                continue
            taken += 1
            assert plain.item == full.item
            kept = [
                (m["pk"], j)
                for j, m in zip(full.judgments, full.meta, strict=True)
                if not m["excluded"] and j.provenance.source != "ai"
            ]
            expected = resolve.plain_pairwise([j for _, j in kept], [pk for pk, _ in kept])
            assert expected is not None
            assert plain.votes == expected[1]
            for (label, pk, batch, excluded, _), j, m in zip(
                plain.labels, full.judgments, full.meta, strict=True
            ):
                assert (pk, batch, excluded) == (m["pk"], m["batch_pk"], m["excluded"])
                p = j.provenance
                assert (label.item_id, label.shown_order, label.winner, label.strength) == (
                    j.item_id,
                    j.shown_order,
                    j.winner,
                    j.strength,
                )
                assert label.direction == j.direction
                assert label.candidate_ids() == j.candidate_ids()
                assert (
                    label.provenance.rater_id,
                    label.provenance.rater_hash,
                    label.provenance.source,
                    label.provenance.guideline_version,
                    label.provenance.rubric_id,
                    label.provenance.review_pass,
                ) == (
                    p.rater_id,
                    p.rater_hash,
                    p.source,
                    p.guideline_version,
                    p.rubric_id,
                    int(p.review_pass),
                )
    assert taken >= 10 and declined >= 10


def test_a_plain_items_full_objects_read_again(engine):
    """:meth:`~.columnar.PlainItem.full` (the collector's fallback) reads the item's full rows
    again: the objects ``iter_items_with_judgments`` builds."""
    with transaction(engine) as s:
        p = repo.get_project(s, "plain")
        expected = list(repo.iter_items_with_judgments(s, p, include_excluded=True))
        read = list(
            plain_read.read_items(
                s,
                p,
                lambda row, cands, lean, raw: columnar.plain_item(row, cands, lean, raw, False),
                lambda item: False,
            )
        )
        assert [x.__class__ for x in read] == [columnar.PlainItem] * len(expected)
        assert [x.full() for x in read] == expected


def test_the_agreement_tally_of_plain_labels_a_column_at_a_time(engine, monkeypatch):
    """:func:`~.agreement_gate.label_columns` of plain labels only (a column at a time) gives
    each (batch, dimension) cell the rows the label-by-label loop gives it, in the same order:
    the same tally, cell for cell, and the same figures."""
    import numpy as np

    from preflab.io.export import agreement_gate

    labels = []
    with transaction(engine) as s:
        p = repo.get_project(s, "plain")
        for x in plain_read.read_items(
            s,
            p,
            lambda row, cands, lean, raw: columnar.plain_item(row, cands, lean, raw, True),
            lambda item: False,
        ):
            labels.extend((label, batch) for label, _, batch, _, _ in x.labels)
    # every fourth label unbatched: two batches, so more than one cell a dimension
    labels = [(j, b if k % 4 else None) for k, (j, b) in enumerate(labels)]
    assert any(j.strength is None for j, _ in labels) and len(labels) > 30

    def tally():
        t = agreement_gate.AgreementTally()
        for start in range(0, len(labels), 10):
            t.add(labels[start : start + 10])
        return t

    fast = tally()
    with monkeypatch.context() as m:
        m.setattr(agreement_gate, "PlainLabel", type("NotPlain", (), {}))  # the loop instead
        general = tally()
    assert sorted(fast.cells) == sorted(general.cells) and len(fast.cells) >= 4
    for key, cell in general.cells.items():
        other = fast.cells[key]
        for name in ("units", "units_2plus", "rows", "pairable", "coincidence", "agree", "kept"):
            assert getattr(other, name) == getattr(cell, name), (key, name)
        for name in ("unit_parts", "code_parts", "value_parts"):
            got, want = getattr(other, name), getattr(cell, name)
            assert len(got) == len(want)
            for x, y in zip(got, want, strict=True):
                assert x.dtype == y.dtype and np.array_equal(x, y), (key, name)
    assert fast.figures() == general.figures()
