"""The distributed unary (KTO) export: per-shard resolution, Parquet output shards, a manifest.

Each shard's thumbs are resolved where they lie (plurality per candidate; an even split is
dropped, ``resolve_unary``'s rule) and written to ``kto-NNNNN.parquet`` beside the others, one
output file per input shard, so the files are the same whichever scheduler ran them (workers
write into the output's temporary directory: on a multi-machine cluster it must be on a
filesystem every worker sees). The manifest follows :mod:`preflab.io.export.manifest`: counts,
drops per gate with reasons and sample item ids, the schema and SHA-256 of every file; it is
written last and the directory appears complete or not at all (``AtomicDir``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import __version__
from ..io.export.manifest import dump_manifest
from ..io.export.writers import MANIFEST, AtomicDir, file_hashes
from ..quality.labels import LABEL_SET_RULE
from ..quality.mergeable import thumb_columns
from .engine import Runner
from .shards import ShardDir, read_shard

FORMAT = "kto-unary"
OUT_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("candidate_id", pa.string()),
        ("label", pa.bool_()),
        ("n_raters", pa.int64()),
        ("agreement", pa.float64()),
        ("rater_hashes", pa.list_(pa.string())),
    ]
)
SAMPLE = 10


def out_name(index: int) -> str:
    return f"kto-{index:05d}.parquet"


@dataclass
class ShardResult:
    rows: int
    labels: int
    units: int
    no_majority: int
    sample: list[str] = field(default_factory=list)  # item ids of dropped units, first few


def export_shard(tmp: Path, index: int, path: Path) -> ShardResult:
    """Resolve one shard's thumbs and write its output file (columnar: no object per row)."""
    c = thumb_columns(read_shard(path))
    keep = c.up != c.down
    n = c.up + c.down
    lengths = np.diff(c.offsets)
    raters = c.raters[np.repeat(keep, lengths)]  # the kept candidates' raters, in order
    hashes = pa.ListArray.from_arrays(
        pa.array(np.concatenate([[0], np.cumsum(lengths[keep])]), pa.int32()),
        pa.array(raters.tolist(), pa.string()),
    )
    table = pa.table(
        {
            "item_id": pa.array(c.item[keep].tolist(), pa.string()),
            "candidate_id": pa.array(c.candidate[keep].tolist(), pa.string()),
            "label": c.up[keep] > c.down[keep],
            "n_raters": n[keep],
            "agreement": np.maximum(c.up, c.down)[keep] / n[keep],
            "rater_hashes": hashes,
        },
        schema=OUT_SCHEMA,
    )
    pq.write_table(table, tmp / out_name(index), compression="zstd")
    dropped = c.item[~keep]
    sample = list(dict.fromkeys(str(i) for i in dropped[: SAMPLE * 4].tolist()))[:SAMPLE]
    return ShardResult(int(keep.sum()), int(n.sum()), len(n), int((~keep).sum()), sample)


def export_unary(
    shards: ShardDir, out: Path, runner: Runner, created_at: datetime | None = None
) -> dict[str, Any]:
    """Write the resolved thumbs of every shard to ``out``; returns the manifest."""
    target = AtomicDir(Path(out))
    try:
        results = runner.map(partial(export_shard, target.tmp), shards.shards)
        dropped = sum(r.no_majority for r in results)
        sample = list(dict.fromkeys(i for r in results for i in r.sample))[:SAMPLE]
        gates = {  # the shape of DropLog.summary() in the exports' manifests
            "aggregation": {
                "dropped": dropped,
                "reasons": {"no-majority": dropped} if dropped else {},
                "sample_item_ids": {"no-majority": sample} if dropped else {},
            }
        }
        rows_by_file = {out_name(i): r.rows for i, r in enumerate(results)}
        manifest = {
            "preflab_version": __version__,
            "project": shards.layout.get("source"),
            "format": FORMAT,
            "format_reference": "https://huggingface.co/docs/trl/dataset_formats#unpaired-preference",
            "file_format": "parquet",
            "created_at": (created_at or datetime.now(UTC)).isoformat(),
            "options": {"format": FORMAT, "out": Path(out).name, "shards": len(shards.shards)},
            "label_set": LABEL_SET_RULE,
            "aggregation": {
                "function": "plurality",
                "policy": "per candidate the thumb most raters gave; an even split is dropped",
            },
            "counts": {
                "labels_in": sum(r.labels for r in results),
                "units_in": sum(r.units for r in results),
                "rows_out": sum(rows_by_file.values()),
                "rows_out_by_file": rows_by_file,
                "resolved": sum(rows_by_file.values()),
            },
            "gates": gates,
            "schema": {f.name: str(f.type) for f in OUT_SCHEMA},
            "files": file_hashes(target.tmp),
        }
        (target.tmp / MANIFEST).write_bytes(dump_manifest(manifest))
        target.publish()
    except BaseException:
        target.abort()
        raise
    target.finish()
    return manifest
