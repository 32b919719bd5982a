"""Telemetry gate of an export: labels with a telemetry flag stay out unless ``include_flagged``.

The flags and their thresholds are :func:`preflab.quality.telemetry.judgment_flags` with the
project's ``policy.telemetry`` settings, the same rule the quality report applies. The manifest's
``gates.telemetry`` counts dropped labels by their flags (a label with two flags is counted once,
under ``flag_a+flag_b``). ``near_duplicate_rationale`` compares raters with each other and stays a
report finding for a reviewer, not an export gate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...quality.bias import word_length
from ...quality.telemetry import TelemetrySettings, judgment_flags
from ...schema import Item, JudgmentBase
from .resolve import DropLog


def project_telemetry_settings(project_settings: dict[str, Any] | None) -> TelemetrySettings:
    """The project's thresholds (read raw: io does not import the server's policy model)."""
    policy = (project_settings or {}).get("policy") or {}
    return TelemetrySettings.from_policy(policy.get("telemetry"))


def telemetry_filter(
    settings: TelemetrySettings, drops: DropLog
) -> Callable[[Item, JudgmentBase], bool]:
    """``keep(item, judgment)``: False (and the drop logged) when the judgment has a flag."""
    words: dict[tuple[str, str], int] = {}

    def words_to_read(item: Item, j: JudgmentBase) -> int:
        total = 0
        for c in item.candidates:
            if c.id in j.candidate_ids():
                total += words.setdefault((item.id, c.id), word_length(c.as_text()))
        return total

    def keep(item: Item, j: JudgmentBase) -> bool:
        tel = j.provenance.telemetry
        if tel is None:
            return True
        n_words = words_to_read(item, j) if tel.active_ms is not None else None
        flags = sorted(name for name, _ in judgment_flags(j, n_words, settings))
        if flags:
            drops.drop("telemetry", "+".join(flags), item.id)
        return not flags

    return keep
