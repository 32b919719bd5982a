"""``rlhf-2026.11``: agent trajectories exported as the records themselves.

One RLHF-2026.11 record per line, semantically equal to what was imported (the record is kept
verbatim in the item's ``metadata.trajectory`` at import): turns with ``loss_mask``,
``prm_steps``, ``tool_call`` and tool turns, ``env``, ``rubric``, ``telemetry`` with its
``annotator_hash`` *as given* (never re-hashed: it is the producer's pseudonym, not a preflab
rater id) and the ``verifier`` block — as filled by ``preflab verify trajectories`` where
preflab verified. Keys come out in the schema's order (``Trajectory.dump``), so import → export →
import → export gives identical bytes. Items that are not trajectories are left out (counted in
the manifest's drops). In Parquet and ``datasets`` output the record is a JSON string.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pyarrow as pa

from ...schema.trajectory import TRAJECTORY_SCHEMA_VERSION, Trajectory
from .base import BATCH_ROWS, Batch, ExportData, Exporter, ExportOptions


class RLHFTrajectory(Exporter):
    name = "rlhf-2026.11"
    description = "agent trajectories as RLHF-2026.11 records (round-trips through import)"
    needs = frozenset()
    one_pass = True
    reference = "preflab.schema.Trajectory (wire format RLHF-2026.11)"

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        return pa.schema([("trajectory_id", pa.string()), ("record", pa.string())])

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        batch: Batch = {"trajectory_id": [], "record": [], "_record": []}
        for item in data.items.values():
            stored = (item.metadata or {}).get("trajectory")
            if (
                not isinstance(stored, dict)
                or stored.get("schema_version") != TRAJECTORY_SCHEMA_VERSION
            ):
                data.drops.drop(
                    "not_trajectory", "item is not an RLHF-2026.11 trajectory", item.key
                )
                continue
            record = Trajectory.model_validate(stored).dump()
            batch["trajectory_id"].append(record["trajectory_id"])
            batch["record"].append(orjson.dumps(record).decode())
            batch["_record"].append(record)
            if len(batch["record"]) >= BATCH_ROWS:
                yield batch
                batch = {n: [] for n in batch}
        if batch["record"]:
            yield batch

    def json_record(self, batch: Batch, names: list[str], i: int) -> dict[str, Any]:
        return batch["_record"][i]
