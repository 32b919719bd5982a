"""The export's lean read (issue 27, branch ``expcol``): the plainness of a judgment decided in
SQL and on the fields SQL takes out of its body (:func:`~preflab.io.export.plain_read.plain_sql`
and :func:`~preflab.io.export.plain_read.lean_values`) equals its Python statement
(:func:`~preflab.io.export.plain_read.python_plain`) on every twist of a stored row, the fields
equal the parsed body's, and the files of an export of a project
with those twists are the bytes of the general path's (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import select, text, update

from preflab.io.export import columnar, plain_read
from preflab.io.importer import ImportOptions, import_files
from preflab.store import JudgmentRow, db, repo, transaction


def _files(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()
    }


#: body twists: ``fn(body) -> body`` of a stored plain label (a dict), or a JSON text stored
#: as is (a JSON ``null``, an array, a string)
BODY_TWISTS: list[Any] = [
    lambda b: b,
    lambda b: {**b, "strength": None},  # JSON null
    lambda b: {k: v for k, v in b.items() if k != "strength"},  # missing: unknown
    lambda b: {k: v for k, v in b.items() if k != "kind"},
    lambda b: {**b, "strength": 2.0},  # a float strength
    lambda b: {**b, "strength": 1.5},
    lambda b: {**b, "strength": "2"},
    lambda b: {**b, "strength": True},
    lambda b: {**b, "strength": 0},
    lambda b: {**b, "winner": "tie"},
    lambda b: {**b, "winner": "c"},
    lambda b: {**b, "winner": None},
    lambda b: {**b, "winner": 1},
    lambda b: {**b, "spans": []},
    lambda b: {**b, "spans": None},
    lambda b: {**b, "spans": [{"candidate": "x", "start": 0, "end": 1, "label": "l"}]},
    lambda b: {**b, "nöte": "ünïcode"},  # a non-ASCII key beyond the plain ones
    lambda b: {**b, "shown_order": [*b["shown_order"], "z"]},
    lambda b: {**b, "shown_order": b["shown_order"][:1]},
    lambda b: {**b, "shown_order": [1, 2]},
    lambda b: {**b, "shown_order": {"a": 1}},
    lambda b: {**b, "shown_order": None},
    lambda b: {k: v for k, v in b.items() if k != "winner"},
    "null",
    '["kind", "winner"]',
    '"pairwise"',
    "{}",
]
#: column twists: ``(column, value)``, or ``(column, None, raw SQL value)``
COLUMN_TWISTS: list[Any] = [
    ("kind", "ranking"),
    ("review_pass", 2),
    ("review_pass", 1),
    ("source", "ai"),
    ("excluded", True),
    ("rubric_key", "r"),
    ("telemetry", {"keystrokes": 3}),
    ("judge", {"model": "m"}),
    ("assisted_by", {"model": "m"}),
    ("telemetry", None, "null"),  # a stored JSON null: not SQL NULL
    ("judge", None, "null"),
]


def _project(engine, tmp_path: Path, name: str, items: int) -> list[int]:
    """``items`` items of three raters' plain labels; the judgments' pks in pk order."""
    rows = [
        {
            "prompt": f"Question {n}?",
            "chosen": f"a fine answer {n} " + "wörd " * (n % 4),
            "rejected": f"a poor answer {n}",
            "labeler": rater,
            "strength": 1 + (n + k) % 3,
        }
        for n in range(items)
        for k, rater in enumerate(("ann", "bob", "cyd"))
    ]
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    with transaction(engine) as s:
        repo.create_project(s, name, kinds=["pairwise"])
    import_files(engine, name, [path], ImportOptions())
    with transaction(engine) as s:
        project = repo.get_project(s, name)
        return list(
            s.scalars(
                select(JudgmentRow.pk)
                .where(JudgmentRow.project_pk == project.pk)
                .order_by(JudgmentRow.pk)
            )
        )


def _set_raw(s, pk: int, column: str, json_text: str) -> None:
    cast = "::jsonb" if s.get_bind().dialect.name == "postgresql" else ""
    s.execute(
        text(f"UPDATE judgments SET {column} = CAST(:v AS TEXT){cast} WHERE pk = :pk"),
        {"v": json_text, "pk": pk},
    )


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    yield engine
    engine.dispose()


def _full_and_lean(engine, project: str):
    """Per judgment: its full row (``JUDGMENT_COLUMNS``), its lean row, the chunk's raw flag."""
    with transaction(engine) as s:
        p = repo.get_project(s, project)
        lean = {
            j[0]: j
            for part in plain_read.lean_chunks(s, p, size=7)
            for _, _, listed, _ in part
            for j in listed
        }
        out = []
        for part in repo.iter_raw_chunks(s, p, include_excluded=True):
            for row in part.items:
                for j in part.judgments[row[0]]:
                    out.append((j, lean.pop(j[0]), part.raw_json))
        assert not lean
        return out


def test_the_sql_flag_is_the_python_condition_on_every_twist(engine, tmp_path):
    """Each twist on its own label of its own item: the SQL flag equals
    :func:`~.plain_read.python_plain` on the stored row, and a flagged label's shown order,
    winner and strength are the parsed body's, of the same types."""
    twists = len(BODY_TWISTS) + len(COLUMN_TWISTS)
    pks = _project(engine, tmp_path, "twists", twists + 2)
    nulls = set()  # a stored JSON null in a JSON column: not SQL NULL, so not flagged
    with transaction(engine) as s:
        for n, twist in enumerate(BODY_TWISTS):
            pk = pks[3 * n + 1]
            if isinstance(twist, str):
                _set_raw(s, pk, "body", twist)
            else:
                body = twist(dict(s.get(JudgmentRow, pk).body))
                _set_raw(s, pk, "body", orjson.dumps(body).decode())
        for n, twist in enumerate(COLUMN_TWISTS, start=len(BODY_TWISTS)):
            pk = pks[3 * n + 2]
            if len(twist) == 3:
                _set_raw(s, pk, twist[0], twist[2])
                nulls.add(pk)
            else:
                values = {twist[0]: twist[1]}
                s.execute(update(JudgmentRow).where(JudgmentRow.pk == pk).values(values))
    names = ("kind", "rubric_key", "review_pass", "telemetry", "judge", "assisted_by")
    at = (2, 7, 9, 13, 16, 17)
    flagged = unflagged = 0
    for full, lean, raw in _full_and_lean(engine, "twists"):
        body = repo.json_value(full[3]) if raw else full[3]
        columns = {n: full[k] for n, k in zip(names, at, strict=True)}
        expected = plain_read.python_plain(columns, body, sqlite=raw) and full[0] not in nulls
        values = plain_read.lean_values(lean[plain_read.FIELDS], raw)
        assert (bool(lean[plain_read.PLAIN]) and values is not None) is expected, (full, lean)
        assert lean[plain_read.PK] == full[0] and lean[plain_read.ITEM] == full[1]
        if expected:
            flagged += 1
            assert values is not None
            assert values[:3] == (*body["shown_order"], body["winner"])
            strength = body.get("strength")
            assert values[3] == strength and type(values[3]) is type(strength)
        else:
            unflagged += 1
    # not plain: 19 body twists (21 on SQLite: the float strengths) and 8 column twists
    assert unflagged == 19 + 8 + (2 if raw else 0)
    assert flagged == 3 * (twists + 2) - unflagged


VALID_TWISTS: list[Any] = [
    lambda b: {**b, "strength": None},
    lambda b: {k: v for k, v in b.items() if k != "strength"},
    lambda b: {k: v for k, v in b.items() if k != "kind"},
    lambda b: {**b, "strength": 2.0},
    lambda b: {**b, "strength": 0, "winner": "tie"},
    lambda b: {**b, "spans": None},
    lambda b: {**b, "spans": []},
]


@pytest.mark.parametrize("fmt", ["trl-preference", "trl-kto", "verl"])
def test_an_export_of_twisted_bodies_is_the_general_paths(
    engine, fmt, tmp_path, frozen_clock, small_chunks, monkeypatch
):
    """A project of plain labels with the valid twists of a body (a JSON null or no strength,
    no ``kind`` key, a float strength, a tie, empty spans) and of the columns (a stored JSON
    null telemetry, a revision: a rater twice on a pair, an excluded and an AI label): the
    export's files are the bytes of the export with the rows path switched off, and the rows
    path served some items and declined others."""
    from preflab.io.export import ExportOptions, export_project

    pks = _project(engine, tmp_path, "valid", 3 * len(VALID_TWISTS) + 4)
    with transaction(engine) as s:
        for n, twist in enumerate(VALID_TWISTS):
            body = twist(dict(s.get(JudgmentRow, pks[3 * n]).body))
            _set_raw(s, pks[3 * n], "body", orjson.dumps(body).decode())
        last = 3 * len(VALID_TWISTS)
        _set_raw(s, pks[last], "telemetry", "null")
        s.execute(update(JudgmentRow).where(JudgmentRow.pk == pks[last + 3]).values(excluded=True))
        s.execute(update(JudgmentRow).where(JudgmentRow.pk == pks[last + 4]).values(source="ai"))
        # a rater twice on a pair: the third label of an item given to the first's rater
        first = s.get(JudgmentRow, pks[last + 6])
        s.execute(
            update(JudgmentRow)
            .where(JudgmentRow.pk == pks[last + 8])
            .values(rater_pk=first.rater_pk)
        )
    served = {"rows": 0, "none": 0}
    real = columnar.plain_item

    def counting(*args):
        out = real(*args)
        served["rows" if out is not None else "none"] += 1
        return out

    def export(out: Path, **kw) -> dict[str, bytes]:
        options = ExportOptions(out=out, format=fmt, file_format="jsonl", force=True, **kw)
        export_project(engine, "valid", options)
        return _files(out)

    for kw in ({}, {"aggregation": "dawid-skene"}, {"include_ai": True}):
        tag = f"{fmt}-{sorted(kw)}"
        with monkeypatch.context() as m:
            m.setattr(columnar, "plain_item", counting)
            fast = export(tmp_path / "f" / tag, **kw)
        with monkeypatch.context() as m:
            m.setattr(columnar, "plain_item", lambda *args: None)
            general = export(tmp_path / "g" / tag, **kw)
        assert fast == general, tag
    if fmt != "verl":  # verl's rows read the judgment objects: no rows path
        assert served["rows"] > 0 and served["none"] > 0
