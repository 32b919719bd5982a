"""preflab.quality: pure statistics over the long label table (numpy/scipy, no database).

Agreement (Krippendorff, Cohen, Fleiss, Gwet, percent), aggregation (majority vote,
Dawid-Skene, one-coin DS, MACE, Bradley-Terry, Plackett-Luce), gold checks and drift,
adjudication routing, Goodhart bias audits, telemetry flags, simulation and the report. The
resolved label set every consumer measures (latest label per rater, source rule,
adjudication) is :mod:`.labels`.

The names below are imported on first use (module ``__getattr__``, PEP 562): an export
imports a few of these modules (``labels``, ``gold``, ``bias``, one aggregator), not every
aggregator, the report and the simulator. ``from preflab.quality import X`` and
``preflab.quality.X`` work as before.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: each public name, and the submodule it lives in
_NAMES: dict[str, str] = {
    **dict.fromkeys(
        ("AdjudicationSettings", "disagreement_scores", "route_for_adjudication"), "adjudication"
    ),
    **dict.fromkeys(
        (
            "AggregationResult",
            "BTResult",
            "arena_ratings",
            "bradley_terry",
            "comparisons_from_winner_rows",
            "dawid_skene",
            "mace",
            "majority_vote",
            "one_coin_dawid_skene",
            "plackett_luce",
        ),
        "aggregation",
    ),
    **dict.fromkeys(
        (
            "BootstrapCI",
            "agreement_summary",
            "alpha_from_matrix",
            "cohens_kappa",
            "cohens_kappa_table",
            "fleiss_kappa",
            "fleiss_kappa_long",
            "gwet_ac",
            "intransitive_triads",
            "krippendorff_alpha",
            "krippendorff_alpha_ci",
            "mean_pairwise_kappa",
            "pairwise_cohens_kappa",
            "percent_agreement",
        ),
        "agreement",
    ),
    **dict.fromkeys(
        (
            "formatting_bias",
            "length_bias",
            "length_function",
            "length_parity_gate",
            "position_bias",
        ),
        "bias",
    ),
    **dict.fromkeys(
        (
            "cusum_drift",
            "gold_accuracy",
            "leave_one_out_agreement",
            "qualification_decision",
            "rolling_accuracy",
            "wilson_interval",
        ),
        "gold",
    ),
    **dict.fromkeys(("LABEL_SET_RULE", "LabelSet", "resolve_labels"), "labels"),
    **dict.fromkeys(
        ("agreement_by_guideline_version", "build_report", "load_judgments_jsonl", "render_html"),
        "report",
    ),
    **dict.fromkeys(
        (
            "RaterProfile",
            "overlap_items_for_alpha_ci",
            "simulate_class_labels",
            "simulate_gold_stream",
            "simulate_pairwise",
        ),
        "simulate",
    ),
    "LabelTable": "table",
    **dict.fromkeys(("TelemetrySettings", "near_duplicate_pairs", "telemetry_flags"), "telemetry"),
}

#: the submodules the eager ``__init__`` used to leave as attributes (``from preflab.quality
#: import *`` imports them too)
_SUBMODULES = (
    "accumulate",
    "adjudication",
    "aggregation",
    "agreement",
    "anchoring",
    "bias",
    "gold",
    "html_parts",
    "labels",
    "mergeable",
    "report",
    "simulate",
    "spans",
    "table",
    "telemetry",
    "token_count",
)

__all__ = sorted({*_NAMES, *_SUBMODULES})


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # once: later lookups do not come here
        return value
    if name in _SUBMODULES:  # importing a submodule sets it as this package's attribute
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what a type checker sees: the names, eagerly
    from .adjudication import AdjudicationSettings, disagreement_scores, route_for_adjudication
    from .aggregation import (
        AggregationResult,
        BTResult,
        arena_ratings,
        bradley_terry,
        comparisons_from_winner_rows,
        dawid_skene,
        mace,
        majority_vote,
        one_coin_dawid_skene,
        plackett_luce,
    )
    from .agreement import (
        BootstrapCI,
        agreement_summary,
        alpha_from_matrix,
        cohens_kappa,
        cohens_kappa_table,
        fleiss_kappa,
        fleiss_kappa_long,
        gwet_ac,
        intransitive_triads,
        krippendorff_alpha,
        krippendorff_alpha_ci,
        mean_pairwise_kappa,
        pairwise_cohens_kappa,
        percent_agreement,
    )
    from .bias import (
        formatting_bias,
        length_bias,
        length_function,
        length_parity_gate,
        position_bias,
    )
    from .gold import (
        cusum_drift,
        gold_accuracy,
        leave_one_out_agreement,
        qualification_decision,
        rolling_accuracy,
        wilson_interval,
    )
    from .labels import LABEL_SET_RULE, LabelSet, resolve_labels
    from .report import (
        agreement_by_guideline_version,
        build_report,
        load_judgments_jsonl,
        render_html,
    )
    from .simulate import (
        RaterProfile,
        overlap_items_for_alpha_ci,
        simulate_class_labels,
        simulate_gold_stream,
        simulate_pairwise,
    )
    from .table import LabelTable
    from .telemetry import TelemetrySettings, near_duplicate_pairs, telemetry_flags
