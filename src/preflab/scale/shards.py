"""The Parquet shard layout of the label table (docs/scale.md) and its writers and reader.

A shard directory holds ``labels-00000.parquet`` .. ``labels-NNNNN.parquet`` and
``layout.json``. One row per label of the **resolved label set** (:mod:`preflab.quality.labels`:
latest label per rater and unit, adjudication, source rule), with the columns of
:data:`SCHEMA`. A label goes to shard ``fnv1a64(item_id) % n_shards``, so every label of an item
(hence of every unit of the item: its pairs, candidates and steps) lands in one shard: alpha's
per-unit coincidences, percent agreement and the unary resolution are then sums over shards,
and the label-set rule (itself per item) can run while writing.

Writers keep one open :class:`pyarrow.parquet.ParquetWriter` per shard and flush a row group
when a shard's buffer reaches ``ROW_GROUP`` rows, or the fullest buffer when all of them hold
``BUFFER_ROWS``: memory is bounded by ``BUFFER_ROWS`` rows plus one item's judgments (or one
generated block), whatever the size of the project.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import __version__
from ..quality.labels import resolve_labels
from ..quality.mergeable import Chunk, Column
from ..schema import JudgmentBase, parse_judgment
from ..store import repo, transaction

LAYOUT = "layout.json"
LAYOUT_VERSION = 1
SHARD_GLOB = "labels-*.parquet"
ROW_GROUP = 65_536
BUFFER_ROWS = 1_000_000  # rows held across all shards' buffers before the fullest is flushed
DEFAULT_SHARDS = 64

SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("unit", pa.string()),  # what was labelled: item::candidate, item::lo|hi, ...
        ("kind", pa.string()),  # judgment kind: pairwise, ranking, rubric, unary, steps, ...
        ("rater", pa.string()),  # the rater's pseudonymous hash (the exports' rater_hashes)
        ("dimension", pa.string()),
        ("value", pa.float64()),
        ("batch", pa.string()),  # the agreement batch ("batch <pk>", "none", or "all")
        ("source", pa.string()),  # human, ai_assisted, ai (ai only with include_ai)
        ("submitted_at", pa.timestamp("us", tz="UTC")),
    ]
)


class ShardError(ValueError):
    """A shard directory that cannot be read: the message says which file and why."""


# -- the shard of an item -------------------------------------------------------------------

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a of ``data`` (the shard hash: stable across processes and machines)."""
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def shard_of(item_id: str, n_shards: int) -> int:
    return fnv1a64(item_id.encode()) % n_shards


def shards_of(item_ids: pa.Array | pa.ChunkedArray, n_shards: int) -> np.ndarray:
    """:func:`shard_of` of every id, vectorized (FNV-1a over a fixed-width byte matrix)."""
    ids = pa.chunked_array([item_ids]) if isinstance(item_ids, pa.Array) else item_ids
    raw = np.asarray(ids.cast(pa.binary()).to_numpy(zero_copy_only=False), dtype=np.bytes_)
    if not len(raw):
        return np.zeros(0, dtype=np.int64)
    width = raw.dtype.itemsize
    lengths = np.char.str_len(raw)
    matrix = raw.view(np.uint8).reshape(len(raw), width)
    h = np.full(len(raw), _FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(width):
            live = lengths > j
            h = np.where(live, (h ^ matrix[:, j].astype(np.uint64)) * _FNV_PRIME, h)
    return (h % np.uint64(n_shards)).astype(np.int64)


# -- writing --------------------------------------------------------------------------------


def shard_name(index: int) -> str:
    return f"labels-{index:05d}.parquet"


@dataclass
class ShardWriter:
    """One Parquet writer per shard, buffered; :meth:`close` writes ``layout.json`` last (a
    directory without it is an unfinished write, and the reader says so)."""

    out: Path
    n_shards: int = DEFAULT_SHARDS
    source: str = ""
    buffers: list[list[pa.RecordBatch]] = field(default_factory=list)
    buffered: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    writers: list[pq.ParquetWriter | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.n_shards < 1:
            raise ValueError(f"--shards must be at least 1, got {self.n_shards}")
        self.out = Path(self.out).absolute()
        if self.out.exists() and (not self.out.is_dir() or any(self.out.iterdir())):
            raise ShardError(f"{self.out}: not empty; choose a new or empty directory for --out")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        # written aside, renamed into place by close(): never a half-written shard directory
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.tmp-", dir=self.out.parent))
        self.buffers = [[] for _ in range(self.n_shards)]
        self.buffered = [0] * self.n_shards
        self.rows = [0] * self.n_shards
        self.writers = [None] * self.n_shards

    def write(self, table: pa.Table) -> None:
        """Rows of :data:`SCHEMA` (any shards): each goes to the shard of its item."""
        table = table.cast(SCHEMA)
        if not table.num_rows:
            return
        shard = shards_of(table.column("item_id"), self.n_shards)
        order = np.argsort(shard, kind="stable")
        bounds = np.searchsorted(shard[order], np.arange(self.n_shards + 1))
        for s in np.flatnonzero(np.diff(bounds)).tolist():
            part = table.take(pa.array(order[bounds[s] : bounds[s + 1]]))
            self.buffers[s].extend(part.to_batches())
            self.buffered[s] += part.num_rows
            if self.buffered[s] >= ROW_GROUP:
                self._flush(s)
        while sum(self.buffered) > BUFFER_ROWS:  # many shards: smaller row groups, same memory
            self._flush(int(np.argmax(self.buffered)))

    def _flush(self, s: int) -> None:
        if not self.buffered[s]:
            return
        writer = self.writers[s]
        if writer is None:
            writer = pq.ParquetWriter(self.tmp / shard_name(s), SCHEMA, compression="zstd")
            self.writers[s] = writer
        writer.write_table(pa.Table.from_batches(self.buffers[s], SCHEMA), ROW_GROUP)
        self.rows[s] += self.buffered[s]
        self.buffers[s], self.buffered[s] = [], 0

    def close(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        for s in range(self.n_shards):
            self._flush(s)
            writer = self.writers[s]
            if writer is None:  # an empty shard is still a file: the layout has no holes
                writer = pq.ParquetWriter(self.tmp / shard_name(s), SCHEMA, compression="zstd")
            writer.close()
        layout = {
            "layout_version": LAYOUT_VERSION,
            "preflab_version": __version__,
            "n_shards": self.n_shards,
            "shard_hash": "fnv1a64(utf-8 item_id) mod n_shards",
            "source": self.source,
            "created_at": datetime.now(UTC).isoformat(),
            "rows": sum(self.rows),
            "rows_by_shard": self.rows,
            **(extra or {}),
        }
        (self.tmp / LAYOUT).write_bytes(orjson.dumps(layout, option=orjson.OPT_INDENT_2) + b"\n")
        if self.out.exists():
            self.out.rmdir()  # empty, checked above
        self.tmp.rename(self.out)
        return layout

    def abort(self) -> None:
        """Drop everything written (the target is left as it was)."""
        for writer in self.writers:
            if writer is not None:
                writer.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _ts(j: JudgmentBase) -> datetime | None:
    at = j.provenance.submitted_at
    return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at


def label_rows(judgments: Iterable[JudgmentBase], batch: str) -> dict[str, list[Any]]:
    """Columns of :data:`SCHEMA` for judgments already resolved (:func:`resolve_labels`)."""
    cols: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for j in judgments:
        rater = j.provenance.rater_hash or j.provenance.rater_id
        at = _ts(j)
        for row in j.label_rows():
            cols["item_id"].append(row.item_id)
            cols["unit"].append(row.unit)
            cols["kind"].append(row.kind)
            cols["rater"].append(rater)
            cols["dimension"].append(row.dimension)
            cols["value"].append(row.value)
            cols["batch"].append(batch)
            cols["source"].append(j.provenance.source)
            cols["submitted_at"].append(at)
    return cols


def write_items(
    groups: Iterable[tuple[list[JudgmentBase], str]],
    out: Path,
    n_shards: int = DEFAULT_SHARDS,
    source: str = "",
    include_ai: bool = False,
    flush_rows: int = ROW_GROUP,
) -> dict[str, Any]:
    """Shards from ``(judgments of one item, batch)`` groups: the label-set rule per item,
    then its label rows. Returns the layout written."""
    writer = ShardWriter(out, n_shards, source)
    pending: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    judgments_in = judgments_used = 0

    def flush() -> None:
        writer.write(pa.table(pending, schema=SCHEMA))
        for col in pending.values():
            col.clear()

    try:
        for judgments, batch in groups:
            resolved = resolve_labels(judgments, include_ai=include_ai).judgments
            judgments_in += len(judgments)
            judgments_used += len(resolved)
            for name, values in label_rows(resolved, batch).items():
                pending[name].extend(values)
            if len(pending["item_id"]) >= flush_rows:
                flush()
        flush()
        return writer.close({"judgments_in": judgments_in, "judgments_used": judgments_used})
    except BaseException:
        writer.abort()
        raise


def write_from_project(
    engine: Any,
    project: str,
    out: Path,
    n_shards: int = DEFAULT_SHARDS,
    include_ai: bool = False,
) -> dict[str, Any]:
    """Shards of a project in the store, streamed item by item in keyset (primary key) order
    (:func:`preflab.store.repo.iter_items_with_judgments`); batch as the quality report's."""
    with transaction(engine) as session:
        proj = repo.get_project(session, project)
        groups = (
            (
                list(record.judgments),
                f"batch {record.batch_pk}" if record.batch_pk is not None else "none",
            )
            for record in repo.iter_items_with_judgments(session, proj)
        )
        return write_items(groups, out, n_shards, f"project {project}", include_ai)


def _raw_groups(path: Path) -> Iterator[tuple[list[JudgmentBase], str]]:
    """Judgments of a raw export grouped by item (the raw export writes them item by item)."""
    current: list[JudgmentBase] = []
    seen: set[str] = set()
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                data = orjson.loads(line)
                data.pop("item", None)
                j = parse_judgment(data)
            except Exception as exc:
                raise ShardError(f"{path}:{n}: {exc}") from exc
            if current and j.item_id != current[0].item_id:
                seen.add(current[0].item_id)
                yield current, "all"
                current = []
            if j.item_id in seen:
                raise ShardError(
                    f"{path}:{n}: item_id: {j.item_id!r} appears again after other items; a raw "
                    "export lists each item's judgments together (export it again with preflab "
                    "export --format raw)"
                )
            current.append(j)
    if current:
        yield current, "all"


def write_from_raw(
    path: Path, out: Path, n_shards: int = DEFAULT_SHARDS, include_ai: bool = False
) -> dict[str, Any]:
    """Shards of a raw export (``preflab export --format raw``, JSONL), read line by line."""
    return write_items(_raw_groups(Path(path)), out, n_shards, f"raw {Path(path).name}", include_ai)


# -- synthetic thumbs (the benchmark) -------------------------------------------------------


def generate_unary(
    out: Path,
    n_labels: int,
    n_shards: int = DEFAULT_SHARDS,
    seed: int = 0,
    n_raters: int = 100_000,
    block: int = 1_000_000,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """``n_labels`` production thumbs in the layout: candidates of quality ``q`` get 1 to 5
    thumbs (an even split is possible) from a pool of raters, each with a bias; ``block``
    labels at a time, so memory does not grow with ``n_labels``."""
    rng = np.random.default_rng(seed)
    bias = rng.normal(0.0, 0.5, n_raters)
    writer = ShardWriter(out, n_shards, f"synthetic unary seed {seed}")
    try:
        return _generate(writer, rng, bias, n_labels, n_raters, block, seed, progress)
    except BaseException:
        writer.abort()
        raise


def _generate(
    writer: ShardWriter,
    rng: np.random.Generator,
    bias: np.ndarray,
    n_labels: int,
    n_raters: int,
    block: int,
    seed: int,
    progress: Callable[[int], None] | None,
) -> dict[str, Any]:
    start = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    done = 0
    unit = 0
    while done < n_labels:
        want = min(block, n_labels - done)
        per = rng.integers(1, 6, want)  # thumbs per candidate
        per = per[np.cumsum(per) <= want]
        if per.sum() < want:
            per = np.append(per, want - per.sum())
        cand = np.repeat(np.arange(unit, unit + len(per), dtype=np.int64), per)
        unit += len(per)
        quality = rng.normal(0.0, 1.0, len(per))[cand - cand[0]]
        rater = rng.integers(0, n_raters, want)
        p_up = 1.0 / (1.0 + np.exp(-(quality + bias[rater])))
        value = (rng.random(want) < p_up).astype(np.float64)
        item = cand // 2  # two candidates per prompt
        item_ids = pc.binary_join_element_wise(
            "t", pc.utf8_lpad(pa.array(item).cast(pa.string()), 10, "0"), ""
        )
        cand_ids = pc.if_else(pa.array(cand % 2 == 0), "a", "b")
        units = pc.binary_join_element_wise(item_ids, cand_ids, "::")
        raters = pc.binary_join_element_wise(
            "r", pc.utf8_lpad(pa.array(rater).cast(pa.string()), 6, "0"), ""
        )
        when = (int(start) + rng.integers(0, 86400 * 30, want)) * 1_000_000
        writer.write(
            pa.table(
                {
                    "item_id": item_ids,
                    "unit": units,
                    "kind": pa.repeat("unary", want),
                    "rater": raters,
                    "dimension": pa.repeat("thumb", want),
                    "value": value,
                    "batch": pa.repeat("all", want),
                    "source": pa.repeat("human", want),
                    "submitted_at": pa.array(when, pa.timestamp("us", tz="UTC")),
                }
            )
        )
        done += want
        if progress is not None:
            progress(done)
    return writer.close({"synthetic": {"labels": n_labels, "seed": seed, "raters": n_raters}})


# -- reading --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardDir:
    """A checked shard directory: its layout and the shard files in order."""

    path: Path
    layout: dict[str, Any]
    shards: list[Path]


_SHARD_RE = re.compile(r"labels-(\d{5})\.parquet$")


def open_shards(directory: Path) -> ShardDir:
    """The shards of ``directory``, checked: ``layout.json`` present and readable, every shard
    of the layout present with the layout's columns. Errors name the file and the fix."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ShardError(f"{directory}: no such directory (make one with preflab scale shards)")
    layout_path = directory / LAYOUT
    if not layout_path.is_file():
        raise ShardError(
            f"{layout_path}: missing: not a shard directory, or its writing did not finish "
            "(write it again with preflab scale shards)"
        )
    try:
        layout = orjson.loads(layout_path.read_bytes())
        n = int(layout["n_shards"])
        version = int(layout["layout_version"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ShardError(
            f"{layout_path}: unreadable layout ({exc}); write the shards again"
        ) from None
    if version != LAYOUT_VERSION:
        raise ShardError(
            f"{layout_path}: layout_version {version}, this preflab reads {LAYOUT_VERSION}; "
            "write the shards again"
        )
    found = {int(m.group(1)): p for p in directory.iterdir() if (m := _SHARD_RE.match(p.name))}
    missing = [shard_name(i) for i in range(n) if i not in found]
    if missing:
        raise ShardError(
            f"{directory}: {len(missing)} of {n} shards missing ({', '.join(missing[:3])}); "
            "copy the whole directory or write the shards again"
        )
    extra = sorted(p.name for i, p in found.items() if i >= n)
    if extra:
        raise ShardError(f"{directory}: {extra[0]}: not in the layout of {n} shards; remove it")
    shards = [found[i] for i in range(n)]
    for path in shards:
        try:
            schema = pq.read_schema(path)
        except (OSError, pa.ArrowInvalid) as exc:
            raise ShardError(f"{path}: not a readable Parquet file ({exc})") from None
        absent = [name for name in SCHEMA.names if name not in schema.names]
        if absent:
            raise ShardError(f"{path}: columns {', '.join(absent)} missing; write the shards again")
    return ShardDir(directory, layout, shards)


COLUMNS = ("item_id", "unit", "kind", "rater", "dimension", "batch")


def _column(array: pa.ChunkedArray) -> Column:
    """A dictionary-encoded Arrow column (one dictionary) as codes and distinct labels: no
    Python string per cell."""
    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    if array.num_chunks == 0:
        return Column(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
    combined = array.combine_chunks()
    codes = combined.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    labels = np.asarray(combined.dictionary.to_numpy(zero_copy_only=False), dtype=object)
    return Column(codes, labels)


def chunk_of(table: pa.Table) -> Chunk:
    """Rows of :data:`SCHEMA` as the statistics' :class:`~preflab.quality.mergeable.Chunk`."""
    table = table.unify_dictionaries()
    cols = {name: _column(table.column(name)) for name in COLUMNS}
    return Chunk(
        cols["item_id"],
        cols["unit"],
        cols["rater"],
        cols["kind"],
        cols["dimension"],
        cols["batch"],
        table.column("value").to_numpy().astype(float),
    )


def read_shard(path: Path) -> Chunk:
    """One shard, its string columns read dictionary-encoded (rater = the pseudonymous hash)."""
    try:
        table = pq.read_table(path, columns=[*COLUMNS, "value"], read_dictionary=list(COLUMNS))
    except (OSError, pa.ArrowInvalid) as exc:
        raise ShardError(f"{path}: not a readable Parquet file ({exc})") from None
    return chunk_of(table)
