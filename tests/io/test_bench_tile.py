"""The scale benchmark's tiler (``benchmarks/bench_tile.py``, issue 27): a project tiled k times
in the database equals, table by table, what ``preflab import`` makes of the tiled files."""

from __future__ import annotations

import importlib.util
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: columns that differ between two imports of the same content: surrogate keys, clocks, the
#: project's HMAC secret (and the rater hashes made with it), the imported files' paths and bytes
VOLATILE = {
    "pk",
    "created_at",
    "at",
    "secret",
    "rater_hash",
    "sources",
    "content_hash@import_batches",
}


def _value(v: Any) -> Any:
    if isinstance(v, str) and v[:1] in ("{", "["):
        return orjson.loads(v)  # JSON columns: the same values, whatever their key order
    return v


def normalised(path: Path) -> dict[str, list[bytes]]:
    """Every table's rows without surrogate keys: a row that points at another by pk names it by
    its natural key (an item by its key, a rater by its key, a judgment by its content hash);
    rows sorted; ``audit_events`` in order, without the file names."""
    con = sqlite3.connect(path)
    con.row_factory = sqlite3.Row
    with closing(con):
        items = dict(con.execute("SELECT pk, item_key FROM items").fetchall())
        raters = dict(con.execute("SELECT pk, rater_key FROM raters").fetchall())
        judgments = dict(con.execute("SELECT pk, content_hash FROM judgments").fetchall())
        candidates = {
            pk: f"{items[item_pk]}/{key}"
            for pk, item_pk, key in con.execute("SELECT pk, item_pk, candidate_key FROM candidates")
        }
        refs = {
            "item_pk": items,
            "rater_pk": raters,
            "supersedes_pk": judgments,
            "candidate_pk": candidates,  # a candidate's stored text statistics
        }
        out = {}
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            rows = []
            for row in con.execute(f'SELECT * FROM "{table}" ORDER BY rowid'):
                rec = {
                    k: refs[k].get(row[k]) if k in refs and row[k] is not None else _value(row[k])
                    for k in row.keys()
                    if k not in VOLATILE and f"{k}@{table}" not in VOLATILE
                }
                if table == "audit_events" and isinstance(rec.get("details"), dict):
                    rec["details"].pop("files", None)
                rows.append(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS))
            out[table] = rows if table == "audit_events" else sorted(rows)
    return out


@pytest.mark.slow
def test_a_tiled_database_equals_the_import_of_the_tiled_files(tmp_path):
    bench, tile = load("bench_scale"), load("bench_tile")
    env = bench._env()
    files = bench.generate(tmp_path / "data", 1800, seed=5, raters=20, per_item=3, batches=3)
    source = tmp_path / "source.db"
    assert bench.step_import(f"sqlite:///{source}", files, 300, env)["status"] == "ok"

    k = 3
    tiled_files = []
    for f in files:  # each batch file k times over: tile 0 (as it was), 1, 2
        records = [orjson.loads(line) for line in f.read_bytes().splitlines()]
        out = tmp_path / "tiled" / f.name
        out.parent.mkdir(exist_ok=True)
        out.write_bytes(
            b"".join(
                orjson.dumps(r) + b"\n" for t in range(k) for r in tile.tile_records(records, t)
            )
        )
        tiled_files.append(out)
    reference = tmp_path / "reference.db"
    assert bench.step_import(f"sqlite:///{reference}", tiled_files, 300, env)["status"] == "ok"

    built = tmp_path / "tiled.db"
    counts = tile.tile_database(source, built, k, say=lambda _: None)
    # both ways an item gets its key occur, and aliases (the items with candidate ids)
    assert counts["derived_keys"] == 2 * 400 and counts["given_keys"] == 2 * 200
    assert counts["derived_aliases"] == 2 * 200

    want, got, before = normalised(reference), normalised(built), normalised(source)
    assert want.keys() == got.keys()
    for table in want:
        assert got[table] == want[table], table
    # the tiles are new items and judgments: k times the source's
    for table in ("items", "candidates", "candidate_text_stats", "item_aliases", "judgments"):
        assert len(got[table]) == k * len(before[table]) > 0, table
    with closing(sqlite3.connect(built)) as con:
        # the secondary indexes are back, and the database is what a server opens (WAL)
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert {"uq_judgments_item_content", "ix_judgments_project_item"} <= names
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_judgment_whose_hash_cannot_be_recomputed_is_refused(tmp_path):
    tile = load("bench_tile")
    hasher = tile.JudgmentHasher()
    args = dict(
        kind="pairwise",
        body='{"kind":"pairwise","shown_order":["a","b"],"winner":"a","strength":2}',
        rationale=None,
        rater_key="r1",
        rubric_key=None,
        rubric_version=None,
        guideline_version=None,
        review_pass=0,
        source="human",
        started_at=None,
        submitted_at="2026-11-02 00:47:39.000000",
        telemetry=None,
        judge=None,
        assisted_by=None,
    )
    right = tile.content_hash(
        {
            "kind": "pairwise",
            "item_id": "x",
            "shown_order": ["a", "b"],
            "winner": "a",
            "strength": 2,
            "provenance": {
                "rater_id": "r1",
                "review_pass": 0,
                "source": "human",
                "submitted_at": "2026-11-02T00:47:39Z",
            },
        },
        length=64,
    )
    moved = hasher(right, "x", "y", **args)
    assert moved != right and len(moved) == 64 and hasher.slow == 0
    with pytest.raises(ValueError, match="cannot be recomputed"):
        hasher("0" * 64, "x", "y", **args)
