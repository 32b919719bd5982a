"""The export options the web app takes (those of ``preflab export``), checked with the CLI's
rules and turned into :class:`~preflab.schema.export_options.ExportOptions`: one place for the
synchronous export route and the export jobs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..io.export import AGGREGATORS, EXPORT_FORMATS
from ..io.export.base import ExportError
from ..io.export.pipeline import check_options
from ..schema.export_options import ExportOptions, export_options_from, length_gate_fits


def check_choices(aggregation: str, length_gate: Sequence[float] | None) -> None:
    """The aggregation's name and the length gate's bounds (``preflab export --length-gate``'s
    rule, :func:`length_gate_fits`); :class:`ExportError` saying what to give instead."""
    if aggregation not in AGGREGATORS:
        raise ExportError(f"aggregation {aggregation!r}: choose from {', '.join(AGGREGATORS)}")
    if length_gate is not None and not length_gate_fits(length_gate):
        raise ExportError(
            f"length_gate {list(length_gate)}: need 0 < min <= 1 <= max, e.g. [0.85, 1.2]"
        )


def build(options: dict[str, Any], out: Path) -> ExportOptions:
    """An export job's stored options as the exporter's (the aggregator is the one
    ``options.aggregation`` names); checked as ``preflab export`` checks them
    (:func:`check_options`): :class:`ExportError` if not."""
    check_choices(options.get("aggregation", "majority"), options.get("length_gate"))
    built = export_options_from(options, out)
    check_options(built, EXPORT_FORMATS)
    return built
