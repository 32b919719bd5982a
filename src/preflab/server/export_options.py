"""The export options the web app takes (those of ``preflab export``), checked with the CLI's
rules and turned into :class:`~preflab.io.export.ExportOptions`: one place for the synchronous
export route and the export jobs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..io.export import AGGREGATORS, EXPORT_FORMATS, ExportOptions
from ..io.export.base import ExportError
from ..io.export.pipeline import check_options
from ..io.export.resolve import PairAggregator


def check_choices(aggregation: str, length_gate: Sequence[float] | None) -> None:
    """The aggregation's name and the length gate's bounds (``preflab export --length-gate``'s
    rule, ``0 < min <= 1 <= max``); :class:`ExportError` saying what to give instead."""
    if aggregation not in AGGREGATORS:
        raise ExportError(f"aggregation {aggregation!r}: choose from {', '.join(AGGREGATORS)}")
    if length_gate is not None and not 0 < length_gate[0] <= 1 <= length_gate[1]:
        raise ExportError(
            f"length_gate {list(length_gate)}: need 0 < min <= 1 <= max, e.g. [0.85, 1.2]"
        )


def exporter_params(options: dict[str, Any]) -> dict[str, Any]:
    """``require_reference`` / ``data_source`` (verl) and ``kto_conflicts`` (trl-kto) as the
    exporter's params, as ``preflab export`` passes them (another format refuses them)."""
    params: dict[str, Any] = {}
    if options.get("require_reference"):
        params["require_reference"] = True
    if options.get("data_source") is not None:
        params["data_source"] = options["data_source"]
    if options.get("kto_conflicts") is not None:
        params["kto_conflicts"] = options["kto_conflicts"]
    return params


def build(options: dict[str, Any], out: Path) -> tuple[ExportOptions, PairAggregator]:
    """An export job's stored options as the exporter's, with the aggregator they name; checked
    as ``preflab export`` checks them (:func:`check_options`): :class:`ExportError` if not."""
    gate = options.get("length_gate")
    aggregation = options.get("aggregation", "majority")
    check_choices(aggregation, gate)
    built = ExportOptions(
        format=options["format"],
        out=out,
        file_format=options.get("file_format", "jsonl"),
        conversational=options.get("conversational"),
        include_ai=bool(options.get("include_ai")),
        include_gold=bool(options.get("include_gold")),
        include_rater_ids=bool(options.get("include_rater_ids")),
        length_gate=(float(gate[0]), float(gate[1])) if gate is not None else None,
        length_unit=options.get("length_unit", "tokens"),
        min_raters=int(options.get("min_raters", 1)),
        split=options.get("split", "train"),
        params=exporter_params(options),
        include_flagged=bool(options.get("include_flagged")),
        min_alpha=options.get("min_alpha"),
        force=bool(options.get("force")),
        drop_disagreement=options.get("drop_disagreement"),
        provenance_columns=bool(options.get("provenance_columns")),
    )
    check_options(built, EXPORT_FORMATS)
    return built, AGGREGATORS[aggregation]
