"""A k-times larger imported project, built from a smaller one in the database (issue 27).

    python benchmarks/bench_tile.py SOURCE.db TARGET.db K

Generating 10M judgments and importing them takes about two hours on a small machine;
:func:`tile_database` makes the same project from the 1M one in minutes. It copies the source
database and appends ``K - 1`` tiles of its items, candidates (with their stored text
statistics), item aliases and judgments with
disjoint primary keys (tile ``t`` adds ``t x`` the largest pk of each table) and distinct
content: tile ``t >= 1`` appends :func:`marker` to each prompt (so every tiled item is a new
item) and :func:`suffix` to every id given in the files (explicit item ids and aliases), and
every derived column is recomputed as the importer computes it from the tiled records
(:func:`tile_records`): item keys that are content hashes, item content hashes, alias keys,
judgment content hashes (they cover the item id). Each recomputation is first checked against
the stored value of the source row (the same rule must give the stored hash there), so a rule
that does not hold raises instead of writing a wrong hash. Raters and import batches stay (the
batches' counts and the import audit events' counts times ``K``); quality snapshots are dropped
(the server recomputes them). Server state tied to items (pool, leases, reviews, ...) is not
tiled: a source holding any is refused.

``tests/io/test_bench_tile.py`` holds a tiled database equal, table by table, to what
``preflab import`` makes of the tiled files.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from preflab.schema import content_hash
from preflab.schema.identity import candidate_key, item_content, item_key
from preflab.schema.judgments import parse_judgment
from preflab.store.rows import judgment_rows

#: the tables whose rows are tiled, in insert order
TILED = ("items", "candidates", "item_aliases", "judgments")
#: tiled too, keyed by a candidate's pk: the stored text statistics (a tile's candidate texts
#: are the source's, so are their statistics)
CANDIDATE_STATS = "candidate_text_stats"


def marker(t: int) -> str:
    """What tile ``t`` appends to each prompt (tile 0 is the source, unchanged)."""
    return f" [tile {t}]" if t else ""


def suffix(t: int) -> str:
    """What tile ``t`` appends to each id given in the files."""
    return f"~t{t}" if t else ""


def tiled_prompt(prompt: Any, t: int) -> Any:
    """The prompt of tile ``t``: a string with :func:`marker` appended, or chat messages with it
    appended to the last text message."""
    if not t:
        return prompt
    if isinstance(prompt, str):
        return prompt + marker(t)
    messages = [dict(m) for m in prompt]
    for m in reversed(messages):
        if isinstance(m.get("content"), str):
            m["content"] += marker(t)
            return messages
    raise ValueError("a prompt without a text message cannot be tiled")


def tile_records(records: Iterator[dict[str, Any]], t: int) -> Iterator[dict[str, Any]]:
    """The import records of tile ``t``: what :func:`tile_database` makes equals the import of
    these (the test's reference)."""
    for rec in records:
        rec = dict(rec)
        if "prompt" in rec:
            rec["prompt"] = tiled_prompt(rec["prompt"], t)
        for key in ("id", "item_id"):
            if key in rec:
                rec[key] += suffix(t)
        yield rec


def _scaled(value: Any, k: int) -> Any:
    """Every count in ``value`` times ``k`` (an import's counts of the tiled files)."""
    if isinstance(value, dict):
        return {key: _scaled(v, k) for key, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool):
        return value * k
    return value


def _timestamp(value: str | None) -> str | None:
    """A stored timestamp as the wire form's JSON has it (UTC, ``Z``)."""
    if value is None:
        return None
    dt = datetime.fromisoformat(value)
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return dt.replace(tzinfo=None).isoformat() + "Z"


def _loads(value: str | None) -> Any:
    return None if value is None else orjson.loads(value)


class JudgmentHasher:
    """The content hash of a stored judgment under another item id (a SQLite function).

    The wire form is rebuilt from the columns (as ``repo.judgment_from_row`` does); the hash with
    the source item's id must be the stored one, else the full pydantic path is tried, else it
    raises."""

    slow = 0

    def __call__(
        self,
        stored: str,
        old_key: str,
        new_key: str,
        kind: str,
        body: str,
        rationale: str | None,
        rater_key: str,
        rubric_key: str | None,
        rubric_version: int | None,
        guideline_version: int | None,
        review_pass: int,
        source: str,
        started_at: str | None,
        submitted_at: str | None,
        telemetry: str | None,
        judge: str | None,
        assisted_by: str | None,
    ) -> str:
        prov = {
            "rater_id": rater_key,
            "rubric_id": rubric_key,
            "rubric_version": rubric_version,
            "guideline_version": guideline_version,
            "review_pass": review_pass,
            "source": source,
            "started_at": _timestamp(started_at),
            "submitted_at": _timestamp(submitted_at),
            "telemetry": _loads(telemetry),
            "judge": _loads(judge),
            "assisted_by": _loads(assisted_by),
        }
        data = {
            **orjson.loads(body),
            "kind": kind,
            "item_id": old_key,
            "provenance": {k: v for k, v in prov.items() if v is not None},
        }
        if rationale is not None:
            data["rationale"] = rationale
        if content_hash(data, length=64) == stored:
            data["item_id"] = new_key
            return content_hash(data, length=64)
        # the full path: validate the wire form and hash it as every writer does
        self.slow += 1
        if judgment_rows(parse_judgment(data)).content_hash != stored:
            raise ValueError(
                f"judgment {stored[:12]} of item {old_key!r}: its content hash cannot be "
                "recomputed from its columns; this database cannot be tiled"
            )
        data["item_id"] = new_key
        return judgment_rows(parse_judgment(data)).content_hash


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in con.execute(f'PRAGMA table_info("{table}")')]


def _refuse_server_state(con: sqlite3.Connection) -> None:
    """Rows of other tables that point at tiled rows would need tiling too: refuse them."""
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        if table in TILED or table == CANDIDATE_STATS:
            continue
        refs = {r[2] for r in con.execute(f'PRAGMA foreign_key_list("{table}")')}
        if refs & set(TILED) and con.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone():
            raise SystemExit(
                f"table {table} has rows that point at items or judgments (server state); "
                "tiling copies imported projects only: tile a database before serving it"
            )


def _item_stream(con: sqlite3.Connection, max_pk: int) -> Iterator[tuple[Any, ...]]:
    """``(pk, item_key, content_hash, prompt, domains, reference, gold, candidates)`` of the
    source items in pk order, candidates as ``(key, text, messages)`` in position order."""
    items = con.execute(
        "SELECT pk, item_key, content_hash, prompt, domains, reference, gold FROM items "
        "WHERE pk <= ? ORDER BY pk",
        (max_pk,),
    )
    cands = con.cursor().execute(
        "SELECT item_pk, candidate_key, text, messages FROM candidates WHERE item_pk <= ? "
        "ORDER BY item_pk, position",
        (max_pk,),
    )
    pending = cands.fetchone()
    for row in items:
        mine = []
        while pending is not None and pending[0] < row[0]:
            pending = cands.fetchone()
        while pending is not None and pending[0] == row[0]:
            mine.append((pending[1], pending[2], _loads(pending[3])))
            pending = cands.fetchone()
        yield (*row, mine)


def _item_keys(prompt: Any, cands: list[tuple[str, str | None, Any]]) -> tuple[str, str, list[Any]]:
    """The key of the item without ids, its key with its candidate ids, and the bodies."""
    bodies = [text if text is not None else messages for _, text, messages in cands]
    derived = item_key(prompt, zip([candidate_key(b) for b in bodies], bodies, strict=True))
    own = item_key(prompt, zip([c[0] for c in cands], bodies, strict=True))
    return derived, own, bodies


def _tile_items(con: sqlite3.Connection, maxima: dict[str, int], t: int) -> dict[str, int]:
    """Fill ``_tile_items`` (pk, key, content hash, prompt JSON) and ``_tile_aliases`` (alias pk,
    key) for tile ``t``, each checked against the source row; counts of what was recomputed."""
    con.execute("DELETE FROM _tile_items")
    con.execute("DELETE FROM _tile_aliases")
    aliases: dict[int, list[tuple[int, str]]] = {}
    for item_pk, alias, alias_pk in con.execute(
        "SELECT item_pk, alias_key, pk FROM item_aliases WHERE pk <= ? ORDER BY pk",
        (maxima["item_aliases"],),
    ).fetchall():
        aliases.setdefault(item_pk, []).append((alias_pk, alias))
    counts = {"derived_keys": 0, "given_keys": 0, "derived_aliases": 0, "given_aliases": 0}
    rows, alias_rows = [], []
    write = "INSERT INTO _tile_items VALUES (?, ?, ?, ?)"
    for pk, key, stored, prompt_json, domains, reference, gold, cands in _item_stream(
        con, maxima["items"]
    ):
        prompt = orjson.loads(prompt_json)
        data = {
            "candidates": [{"id": c, "text": x, "messages": m} for c, x, m in cands],
            "domains": _loads(domains) or [],
            "reference": reference,
            "gold": _loads(gold),
        }
        if content_hash(item_content({**data, "prompt": prompt}), length=64) != stored:
            raise ValueError(f"item {key!r}: its content hash cannot be recomputed; not tiled")
        new_prompt = tiled_prompt(prompt, t)
        new_hash = content_hash(item_content({**data, "prompt": new_prompt}), length=64)
        derived, own, bodies = _item_keys(prompt, cands)
        new_derived, new_own, _ = _item_keys(new_prompt, cands)
        if key == own:  # an item the files gave no id: its key is its content's
            new_key, counts["derived_keys"] = new_own, counts["derived_keys"] + 1
        else:
            new_key, counts["given_keys"] = key + suffix(t), counts["given_keys"] + 1
        rows.append((pk, new_key, new_hash, orjson.dumps(new_prompt).decode()))
        for alias_pk, alias in aliases.get(pk, ()):
            if alias in (derived, own):
                new_alias = new_derived if alias == derived else new_own
                counts["derived_aliases"] += 1
            else:
                new_alias = alias + suffix(t)
                counts["given_aliases"] += 1
            alias_rows.append((alias_pk, new_alias))
        if len(rows) >= 5000:
            con.executemany(write, rows)
            rows.clear()
    con.executemany(write, rows)
    con.executemany("INSERT INTO _tile_aliases VALUES (?, ?)", alias_rows)
    return counts


def _copy(
    con: sqlite3.Connection,
    table: str,
    overrides: dict[str, str],
    source: str,
    params: dict[str, Any],
) -> int:
    cols = _columns(con, table)
    select = ", ".join(overrides.get(c, f't."{c}"') for c in cols)
    names = ", ".join(f'"{c}"' for c in cols)
    cur = con.execute(f'INSERT INTO "{table}" ({names}) SELECT {select} FROM {source}', params)
    return cur.rowcount


JUDGMENT_HASH = (
    "tile_jhash(t.content_hash, i.item_key, m.item_key, t.kind, t.body, t.rationale, "
    "r.rater_key, t.rubric_key, t.rubric_version, t.guideline_version, t.review_pass, t.source, "
    "t.started_at, t.submitted_at, t.telemetry, t.judge, t.assisted_by)"
)


def tile_database(
    source: Path, target: Path, k: int, say: Callable[[str], Any] = print
) -> dict[str, Any]:
    """Write ``target``: the project(s) of ``source`` ``k`` times (see the module's doc)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    start = time.perf_counter()
    work = target.with_name(target.name + ".tiling")
    work.unlink(missing_ok=True)
    shutil.copyfile(source, work)
    for ext in ("-wal", "-shm"):  # a source with a write-ahead log: copy it too
        if Path(str(source) + ext).exists():
            shutil.copyfile(str(source) + ext, str(work) + ext)
    con = sqlite3.connect(work, isolation_level=None)
    hasher = JudgmentHasher()
    con.create_function("tile_jhash", 17, hasher, deterministic=True)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA cache_size=-262144")
    _refuse_server_state(con)
    has_stats = con.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (CANDIDATE_STATS,)
    ).fetchone()
    maxima = {
        table: con.execute(f'SELECT coalesce(max(pk), 0) FROM "{table}"').fetchone()[0]
        for table in TILED
    }
    # secondary indexes: dropped while the tiles are appended, made again once at the end
    indexes = con.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
        f"AND tbl_name IN ({', '.join('?' * len(TILED))})",
        TILED,
    ).fetchall()
    con.execute("BEGIN")
    for name, _ in indexes:
        con.execute(f'DROP INDEX "{name}"')
    con.execute(
        "CREATE TEMP TABLE _tile_items (pk INTEGER PRIMARY KEY, item_key TEXT, "
        "content_hash TEXT, prompt TEXT)"
    )
    con.execute("CREATE TEMP TABLE _tile_aliases (pk INTEGER PRIMARY KEY, alias_key TEXT)")
    counts: dict[str, int] = {}
    for t in range(1, k):
        t0 = time.perf_counter()
        for name, n in _tile_items(con, maxima, t).items():
            counts[name] = counts.get(name, 0) + n
        params = {f"{table}_off": t * maxima[table] for table in TILED}
        params.update({f"{table}_max": maxima[table] for table in TILED})
        _copy(
            con,
            "items",
            {
                "pk": "t.pk + :items_off",
                "item_key": "m.item_key",
                "content_hash": "m.content_hash",
                "prompt": "m.prompt",
            },
            "items t JOIN _tile_items m ON m.pk = t.pk WHERE t.pk <= :items_max ORDER BY t.pk",
            params,
        )
        _copy(
            con,
            "candidates",
            {"pk": "t.pk + :candidates_off", "item_pk": "t.item_pk + :items_off"},
            "candidates t WHERE t.pk <= :candidates_max ORDER BY t.pk",
            params,
        )
        if has_stats:
            _copy(
                con,
                CANDIDATE_STATS,
                {"candidate_pk": "t.candidate_pk + :candidates_off"},
                f"{CANDIDATE_STATS} t WHERE t.candidate_pk <= :candidates_max "
                "ORDER BY t.candidate_pk",
                params,
            )
        _copy(
            con,
            "item_aliases",
            {
                "pk": "t.pk + :item_aliases_off",
                "item_pk": "t.item_pk + :items_off",
                "alias_key": "m.alias_key",
            },
            "item_aliases t JOIN _tile_aliases m ON m.pk = t.pk "
            "WHERE t.pk <= :item_aliases_max ORDER BY t.pk",
            params,
        )
        n = _copy(
            con,
            "judgments",
            {
                "pk": "t.pk + :judgments_off",
                "item_pk": "t.item_pk + :items_off",
                "content_hash": JUDGMENT_HASH,
                "supersedes_pk": "t.supersedes_pk + :judgments_off",
            },
            "judgments t JOIN items i ON i.pk = t.item_pk JOIN _tile_items m ON m.pk = t.item_pk "
            "JOIN raters r ON r.pk = t.rater_pk WHERE t.pk <= :judgments_max ORDER BY t.pk",
            params,
        )
        say(f"tile {t}/{k - 1}: {n:,} judgments in {time.perf_counter() - t0:.0f}s")
    # the counts an import of the tiled files records; a snapshot of the source is not this one's
    for pk, value in con.execute("SELECT pk, counts FROM import_batches").fetchall():
        con.execute(
            "UPDATE import_batches SET counts = ? WHERE pk = ?",
            (orjson.dumps(_scaled(orjson.loads(value), k)).decode(), pk),
        )
    for pk, value in con.execute(
        "SELECT pk, details FROM audit_events WHERE action = 'items.imported'"
    ).fetchall():
        con.execute(
            "UPDATE audit_events SET details = ? WHERE pk = ?",
            (orjson.dumps(_scaled(orjson.loads(value), k)).decode(), pk),
        )
    con.execute("DELETE FROM quality_snapshots")
    con.execute("COMMIT")
    t0 = time.perf_counter()
    for _, sql in indexes:
        con.execute(sql)
    say(f"indexes made again in {time.perf_counter() - t0:.0f}s")
    con.execute("PRAGMA journal_mode=WAL")
    con.close()
    for ext in ("-wal", "-shm"):
        Path(str(target) + ext).unlink(missing_ok=True)
    work.replace(target)
    return {
        "tiles": k,
        "seconds": round(time.perf_counter() - start, 1),
        "judgment_hashes_by_the_full_path": hasher.slow,
        **counts,
    }


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__.splitlines()[2].strip())
    print(orjson.dumps(tile_database(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))))
