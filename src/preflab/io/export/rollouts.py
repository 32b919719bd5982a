"""``rollouts``: every answer of a project as ``rollouts.jsonl`` rows, the input of ``preflab rm
score`` and of ``preflab eval create``.

Rows ``{"prompt", "response", "reward", "model"}``, one per candidate of every item (item order,
then candidate order; a model's answer that appears on several items once), labelled or not: ``model`` is the candidate's model (``null`` when
unknown), ``reward`` the item's ``metadata.reward`` for a one-answer item imported from a
``rollouts.jsonl`` (``null`` otherwise, until ``preflab rm score`` fills it in); a candidate with a
stored verifier verdict (``preflab verify project``) gets the verifier's reward instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
import pyarrow as pa

from .base import BATCH_ROWS, Batch, ExportData, Exporter, ExportOptions, TextCache, text_type
from .routing import verifier_reward
from .seen import SeenKeys
from .writers import batch_table

NAMES = ("prompt", "response", "reward", "model")


def _reward(metadata: dict[str, Any], n_candidates: int) -> float | None:
    value = metadata.get("reward")
    if n_candidates != 1 or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class Rollouts(Exporter):
    name = "rollouts"
    description = "every answer as rollouts.jsonl: prompt, response, reward, model (input of rm score / eval create)"
    reference = "preflab rollouts.jsonl: {prompt, response, reward, model}"
    recut = False  # rows() cuts batches at item boundaries, as batches() does

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        t = text_type(data.conversational)
        return pa.schema(
            [("prompt", t), ("response", t), ("reward", pa.float64()), ("model", pa.string())]
        )

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        return self.rows([data], options)

    def rows(self, chunks: Iterable[ExportData], options: ExportOptions) -> Iterator[Batch]:
        """Repeats are left out across the whole export (a digest of each answer seen, not its
        text; :class:`~.seen.SeenKeys` moves them to disk past a bound), and a batch ends at
        the first item boundary at or past :data:`BATCH_ROWS` rows, whichever chunk it falls
        in: a Parquet row group. The rows of a batch wait in Arrow columns (their text in one
        buffer, not a Python string a row), a chunk's at a time; JSONL, whose bytes do not
        depend on where batches end, gets each chunk's rows as they come."""
        seen = SeenKeys()
        try:
            yield from self._rows(chunks, seen, options)
        finally:
            seen.close()

    def _rows(
        self, chunks: Iterable[ExportData], seen: SeenKeys, options: ExportOptions
    ) -> Iterator[Batch]:
        by_chunk = options.file_format == "jsonl"
        pending = _Pending()
        for data in chunks:
            pending.schema = self.schema(data, options)
            text = TextCache(data.items, data.conversational)
            for item_id, item in data.items.items():
                reward = _reward(item.metadata, len(item.candidates))
                prompt = orjson.dumps(item.model_dump(mode="json")["prompt"])
                for cand in item.candidates:
                    key = _digest(prompt, orjson.dumps(cand.body_json()), cand.model)
                    if not seen.add(key):  # the same model's same answer on two items: one row
                        continue
                    verified = verifier_reward(item, cand.key)
                    pending.add(
                        text.prompt(item_id),
                        text.completion(item_id, cand.key),
                        reward if verified is None else verified,
                        cand.model,
                    )
                if pending.rows >= BATCH_ROWS:  # an item boundary
                    yield pending.take()
            if by_chunk and pending.rows:
                yield pending.take()
            else:
                pending.freeze()
        if pending.rows:
            yield pending.take()


class _Pending:
    """The rows of the batch being built: earlier chunks' as Arrow tables, this chunk's as
    lists."""

    def __init__(self) -> None:
        self.schema: pa.Schema | None = None
        self.tables: list[pa.Table] = []
        self.batch: Batch = self._empty()
        self.rows = 0

    @staticmethod
    def _empty() -> Batch:
        return {n: [] for n in NAMES}

    def add(self, prompt: Any, response: Any, reward: float | None, model: str | None) -> None:
        for name, value in zip(NAMES, (prompt, response, reward, model), strict=True):
            self.batch[name].append(value)
        self.rows += 1

    def freeze(self) -> None:
        """This chunk's rows into Arrow columns (the chunk's items are about to go)."""
        if self.batch["prompt"]:
            assert self.schema is not None
            self.tables.append(batch_table(self.batch, self.schema))
            self.batch = self._empty()

    def take(self) -> Batch:
        """The batch: its rows as lists (all of one chunk) or as one contiguous Arrow array a
        column (the same values, hence the same Parquet bytes)."""
        if not self.tables:
            out, self.batch = self.batch, self._empty()
        else:
            self.freeze()
            table = pa.concat_tables(self.tables).combine_chunks()
            self.tables = []
            columns = {n: table.column(n) for n in NAMES}
            out = {n: c.chunk(0) if c.num_chunks == 1 else c for n, c in columns.items()}
        self.rows = 0
        return out


def _digest(prompt: bytes, body: bytes, model: str | None) -> bytes:
    """16 bytes that name ``(prompt, answer, model)``: what a repeat is, without its text."""
    h = hashlib.blake2b(digest_size=16)
    for part in (prompt, body, orjson.dumps(model)):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()
