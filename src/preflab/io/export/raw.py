"""``raw``: every judgment with full provenance, one JSON object per judgment with its item.

This is the input format of the quality report: each JSONL line is a judgment dict exactly as
:func:`preflab.schema.parse_judgment` accepts it, plus an ``"item"`` key holding the
:class:`~preflab.schema.Item` (reference and gold included: this export is for data teams)::

    rec = orjson.loads(line); item = Item.model_validate(rec.pop("item")); j = parse_judgment(rec)

It also re-imports as written (``preflab import`` reads the shape as the ``raw-export`` record
format): export, import into a fresh project, export again gives identical files (pseudonymous
raters keep their hash; with ``include_rater_ids`` the fresh project's hashes are its own).
Gold items are kept: this export is not training data.

Raters appear only as ``rater_hash`` (HMAC-SHA256 under the project secret): ``rater_id`` is
replaced by the hash unless ``include_rater_ids``. Labels are not resolved (revisions and
production labels under adjudication are all present); excluded judgments are left out, AI
labels too unless ``include_ai``. ``ai_assisted`` labels are kept and flagged by their
``provenance.source`` (counted in the manifest). In Parquet and ``datasets`` output the
judgment and the item are JSON strings beside flat provenance columns.

Loading the JSONL with ``datasets.load_dataset("json", ...)``: the JSON builder takes the columns
and types of the file's first block (10 MB), so a large file whose later lines bring another kind
or an optional field fails to load. :func:`raw_jsonl_features` (written out in the dataset card)
declares every key a line can have, ``kind`` and ``item_id`` as strings and the rest as
``datasets.Json`` values, which load whatever their shape; the lines stay exactly as written, so
the file still re-imports as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson
import pyarrow as pa

from ...schema import JUDGMENT_KINDS, dump_judgment
from .base import BATCH_ROWS, Batch, ExportData, Exporter, ExportOptions

#: Kinds whose keys a raw export's card lists only when the export holds one (a kind added
#: later: exports without it keep their card byte for byte).
LATER_KINDS = frozenset({"criteria"})


def raw_jsonl_keys(kinds: Iterable[str] | None = None) -> list[str]:
    """Every top-level key of a raw JSONL line: the fields of every judgment kind (with
    ``kinds``, a later kind's only when ``kinds`` names it), and ``item``."""
    wanted = set(JUDGMENT_KINDS)
    if kinds is not None:
        wanted = (wanted - LATER_KINDS) | (set(kinds) & LATER_KINDS)
    return sorted(
        {
            f.alias or name
            for kind, cls in JUDGMENT_KINDS.items()
            if kind in wanted
            for name, f in cls.model_fields.items()
        }
        | {"item"}
    )


#: Every top-level key of a raw JSONL line of any kind, and ``item``.
RAW_JSONL_KEYS = raw_jsonl_keys()
#: Keys that are always a string; the others load as ``datasets.Json``.
RAW_STRING_KEYS = ("kind", "item_id")


def raw_jsonl_features(kinds: Iterable[str] | None = None):
    """``datasets.Features`` that load a raw JSONL export of any size and mix of kinds."""
    from datasets import Features, Json, Value

    return Features(
        {k: Value("string") if k in RAW_STRING_KEYS else Json() for k in raw_jsonl_keys(kinds)}
    )


def features_snippet(path: str, kinds: Iterable[str] = ()) -> list[str]:
    """The card's code: :func:`raw_jsonl_features` written out, then the load call."""
    others = [k for k in raw_jsonl_keys(kinds) if k not in RAW_STRING_KEYS]
    return [
        "from datasets import Features, Json, Value, load_dataset",
        "",
        "# every key a line can have: a file of any size and mix of kinds loads",
        f"others = {others!r}",
        "features = Features(",
        '    {"kind": Value("string"), "item_id": Value("string"), **{k: Json() for k in others}}',
        ")",
        f'ds = load_dataset("json", data_files="{path}", split="train", features=features)',
    ]


class Raw(Exporter):
    name = "raw"
    description = "every judgment with provenance and its item (quality-report input)"
    needs = frozenset({"judgments"})
    one_pass = True
    training = False
    reference = "preflab.schema.parse_judgment (one judgment per line, plus 'item')"

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        return pa.schema(
            [
                ("kind", pa.string()),
                ("item_id", pa.string()),
                ("rater_hash", pa.string()),
                ("source", pa.string()),
                ("review_pass", pa.int8()),
                ("judgment", pa.string()),
                ("item", pa.string()),
            ]
        )

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        item_cache: dict[str, tuple[dict[str, Any], str]] = {}
        names = [
            "kind",
            "item_id",
            "rater_hash",
            "source",
            "review_pass",
            "judgment",
            "item",
            "_judgment",
            "_item",
        ]
        batch: Batch = {n: [] for n in names}
        for j in data.judgments:
            record = dump_judgment(j)
            prov = record["provenance"]
            rater_hash = prov.get("rater_hash") or ""
            if not options.include_rater_ids and rater_hash:
                prov["rater_id"] = rater_hash
            if j.item_id not in item_cache:
                item_dict = data.items[j.item_id].model_dump(mode="json")
                item_cache = {j.item_id: (item_dict, orjson.dumps(item_dict).decode())}
            item_dict, item_json = item_cache[j.item_id]
            batch["kind"].append(j.kind)
            batch["item_id"].append(j.item_id)
            batch["rater_hash"].append(rater_hash)
            batch["source"].append(prov.get("source", "human"))
            batch["review_pass"].append(int(prov.get("review_pass", 0)))
            batch["judgment"].append(orjson.dumps(record).decode())
            batch["item"].append(item_json)
            batch["_judgment"].append(record)
            batch["_item"].append(item_dict)
            if len(batch["kind"]) >= BATCH_ROWS:
                yield batch
                batch = {n: [] for n in names}
        if batch["kind"]:
            yield batch

    def usage(self, manifest: dict[str, Any]) -> list[str]:
        if manifest["file_format"] != "jsonl":
            return []
        return [
            "## Loading a large or mixed raw JSONL",
            "",
            "`datasets` infers the columns of a JSONL file from its first 10 MB; declare them "
            "(needs a `datasets` release with the `Json` feature, 5.2 checked):",
            "",
            "```python",
            *features_snippet(
                f"path/to/export/{manifest['split']}.jsonl",
                manifest.get("counts", {}).get("judgments_in_by_kind", {}),
            ),
            "```",
            "",
        ]

    def json_record(self, batch: Batch, names: list[str], i: int) -> dict[str, Any]:
        return {**batch["_judgment"][i], "item": batch["_item"][i]}
