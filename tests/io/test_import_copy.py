"""PostgreSQL imports through ``COPY`` and ends with the very rows SQLite's import writes: the
same files into both databases, every table compared value by value (ids, content hashes, JSON
columns, aliases, raters, batch counts)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from sqlalchemy import select

from preflab.io.importer import ImportOptions, import_files
from preflab.io.importer.writer import Writer
from preflab.store import db, repo, transaction
from preflab.store.models import (
    CandidateRow,
    ImportBatch,
    ItemAlias,
    ItemRow,
    JudgmentRow,
    Rater,
)
from preflab.store.rows import as_utc

FIXTURES = Path(__file__).resolve().parent.parent / "data"
ALL_KINDS = ("pairwise", "ranking", "rubric", "unary", "steps", "demonstration")
PROV = {"rater_id": "r1"}


def jsonl(path: Path, *records) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def first_files(tmp_path: Path) -> list[Path]:
    """Real data sets and every path of the importer: lean comparisons, generic records, an
    item under two ids (an alias), judgments naming the alias, unknown strengths, chats, NUL-free
    unicode, timestamps, idempotency keys."""
    mixed = [
        {"prompt": "Q1", "chosen": "A", "rejected": "B", "labeler": "alice", "strength": 2},
        {"prompt": "Q1", "chosen": "B", "rejected": "A", "labeler": "bob"},  # same item
        {"prompt": " Q2\u0301 ", "chosen": "é", "rejected": "e\u0301x", "labeler": "carol"},
        {"id": "c1", "prompt": "Which?", "chosen": "One.", "rejected": "Two.", "labeler": "dan"},
        {"id": "c2", "prompt": "Which?", "chosen": "Two.", "rejected": "One.", "labeler": "eve"},
        {
            "id": "q",
            "prompt": [{"role": "user", "content": "hi"}],
            "candidates": [{"id": "a", "text": "A", "model": "m1"}, {"id": "b", "text": "B"}],
            "domains": ["Code"],
            "metadata": {"origin": "test", "n": 1.5},
        },
        {
            "kind": "pairwise",
            "item_id": "q",
            "shown_order": ["b", "a"],
            "winner": "a",
            "strength": 3,
            "rationale": "A is right",
            "provenance": {
                **PROV,
                "idempotency_key": "k-1",
                "started_at": "2026-11-30T10:00:00+02:00",
                "submitted_at": "2026-11-30T10:00:05+02:00",
                "telemetry": {"active_ms": 4000},
            },
        },
        {"kind": "unary", "item_id": "q", "candidate_id": "a", "label": True, "provenance": PROV},
        {"kind": "ranking", "item_id": "q", "order": [["a"], ["b"]], "provenance": PROV},
        {"prompt": "rate me", "completion": "ok", "label": False},
    ]
    return [
        jsonl(tmp_path / "mixed.jsonl", *mixed),
        FIXTURES / "pandalm-60.json",
        FIXTURES / "hh-rlhf-sample.jsonl.gz",
        FIXTURES / "squality-sample.jsonl",
        FIXTURES / "trajectory-rlhf-2026.11.json",
    ]


def second_files(tmp_path: Path) -> list[Path]:
    """Against what the first import stored: repeats, the alias named again, a new judgment of
    the aliased item, a new comparison."""
    return [
        jsonl(
            tmp_path / "again.jsonl",
            {"prompt": "Q1", "chosen": "A", "rejected": "B", "labeler": "alice", "strength": 2},
            {
                "id": "c2",
                "prompt": "Which?",
                "chosen": "Two.",
                "rejected": "One.",
                "labeler": "fay",
            },
            {
                "id": "c3",
                "prompt": "Which?",
                "chosen": "One.",
                "rejected": "Two.",
                "labeler": "gus",
            },
            {"prompt": "Q9", "chosen": "yes", "rejected": "no", "labeler": "alice"},
        )
    ]


def imported(url: str, tmp_path: Path) -> dict[str, list]:
    engine = db.open_db(url)
    try:
        with transaction(engine) as s:
            repo.create_project(s, "p", kinds=ALL_KINDS)
            s.flush()
        import_files(
            engine, "p", first_files(tmp_path), ImportOptions(keep_extra=True, skip_invalid=True)
        )
        import_files(engine, "p", second_files(tmp_path))
        return snapshot(engine)
    finally:
        engine.dispose()


def snapshot(engine) -> dict[str, list]:
    """Every imported value, keyed by names (pks differ between databases only by sequence)."""
    with transaction(engine) as s:
        items = {pk: key for pk, key in s.execute(select(ItemRow.pk, ItemRow.item_key))}
        raters = {pk: key for pk, key in s.execute(select(Rater.pk, Rater.rater_key))}
        return {
            "items": [
                (i.item_key, i.content_hash, i.prompt, i.domains, i.reference, i.gold, i.meta)
                for i in s.scalars(select(ItemRow).order_by(ItemRow.pk))
            ],
            "candidates": [
                (
                    items[c.item_pk],
                    c.candidate_key,
                    c.position,
                    c.text,
                    c.messages,
                    c.model,
                    c.source,
                    c.meta,
                )
                for c in s.scalars(
                    select(CandidateRow).order_by(CandidateRow.item_pk, CandidateRow.position)
                )
            ],
            "judgments": [
                (
                    items[j.item_pk],
                    raters[j.rater_pk],
                    j.kind,
                    j.body,
                    j.rationale,
                    j.pair_lo,
                    j.pair_hi,
                    j.score,
                    j.shown_order,
                    j.rubric_key,
                    j.rubric_version,
                    j.review_pass,
                    j.source,
                    as_utc(j.started_at),
                    as_utc(j.submitted_at),
                    j.telemetry,
                    j.idempotency_key,
                    j.content_hash,
                    j.excluded,
                )
                for j in s.scalars(select(JudgmentRow).order_by(JudgmentRow.pk))
            ],
            "aliases": sorted(
                (a.alias_key, items[a.item_pk]) for a in s.scalars(select(ItemAlias))
            ),
            "raters": sorted((r.rater_key, r.rater_hash) for r in s.scalars(select(Rater))),
            "batches": [b.counts for b in s.scalars(select(ImportBatch).order_by(ImportBatch.pk))],
        }


@pytest.mark.postgres
def test_postgresql_import_writes_what_sqlite_import_writes(
    sqlite_url, pg_url, tmp_path, monkeypatch
):
    copied: list[str] = []
    copy = Writer._copy

    def spy(self, table, columns, rows):
        copied.append(table.name)
        copy(self, table, columns, rows)

    monkeypatch.setattr(Writer, "_copy", spy)
    on_sqlite = imported(sqlite_url, tmp_path)
    assert copied == []
    on_postgres = imported(pg_url, tmp_path)
    assert {"items", "candidates", "judgments", "raters", "item_aliases"} <= set(copied)
    # the secrets differ per project, so rater hashes do; everything else is the same
    on_sqlite.pop("raters"), on_postgres.pop("raters")
    for table, rows in on_sqlite.items():
        assert rows, table
        assert on_postgres[table] == rows, table
    assert ("c2", "c1") in on_sqlite["aliases"] and ("c3", "c1") in on_sqlite["aliases"]


def test_a_driver_without_copy_is_refused_with_what_to_use():
    class Dialect:
        name, driver = "postgresql", "psycopg2"

    class Conn:
        dialect = Dialect()

    with pytest.raises(ValueError, match="postgresql\\+psycopg://"):
        Writer(Conn())  # type: ignore[arg-type]
