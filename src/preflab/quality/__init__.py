"""preflab.quality: pure statistics over the long label table (numpy/scipy, no database).

Agreement (Krippendorff, Cohen, Fleiss, Gwet, percent), aggregation (majority vote,
Dawid-Skene, one-coin DS, MACE, Bradley-Terry, Plackett-Luce), gold checks and drift,
adjudication routing, Goodhart bias audits, telemetry flags, simulation and the report. The
resolved label set every consumer measures (latest label per rater, source rule,
adjudication) is :mod:`.labels`.
"""

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
from .bias import formatting_bias, length_bias, length_function, length_parity_gate, position_bias
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

__all__ = [name for name in dir() if not name.startswith("_")]
