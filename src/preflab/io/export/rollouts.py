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
        in."""
        names = ("prompt", "response", "reward", "model")
        seen = SeenKeys()
        try:
            yield from self._rows(chunks, seen, names)
        finally:
            seen.close()

    def _rows(
        self, chunks: Iterable[ExportData], seen: SeenKeys, names: tuple[str, ...]
    ) -> Iterator[Batch]:
        batch: Batch = {n: [] for n in names}
        for data in chunks:
            text = TextCache(data.items, data.conversational)
            for item_id, item in data.items.items():
                reward = _reward(item.metadata, len(item.candidates))
                prompt = orjson.dumps(item.model_dump(mode="json")["prompt"])
                for cand in item.candidates:
                    key = _digest(prompt, orjson.dumps(cand.body_json()), cand.model)
                    if not seen.add(key):  # the same model's same answer on two items: one row
                        continue
                    batch["prompt"].append(text.prompt(item_id))
                    batch["response"].append(text.completion(item_id, cand.key))
                    verified = verifier_reward(item, cand.key)
                    batch["reward"].append(reward if verified is None else verified)
                    batch["model"].append(cand.model)
                if len(batch["prompt"]) >= BATCH_ROWS:
                    yield batch
                    batch = {n: [] for n in names}
        if batch["prompt"]:
            yield batch


def _digest(prompt: bytes, body: bytes, model: str | None) -> bytes:
    """16 bytes that name ``(prompt, answer, model)``: what a repeat is, without its text."""
    h = hashlib.blake2b(digest_size=16)
    for part in (prompt, body, orjson.dumps(model)):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()
