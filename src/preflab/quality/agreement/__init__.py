"""Agreement measures, one per module (crowd-kit style)."""

from .cohen import (
    cohens_kappa,
    cohens_kappa_table,
    confusion_table,
    mean_pairwise_kappa,
    pairwise_cohens_kappa,
)
from .fleiss import category_counts, fleiss_kappa, fleiss_kappa_long
from .gwet import gwet_ac
from .krippendorff import (
    BootstrapCI,
    alpha_from_matrix,
    krippendorff_alpha,
    krippendorff_alpha_ci,
)
from .percent import percent_agreement, unanimous_share, unit_agreement
from .preference import agreement_summary, intransitive_triads, rubric_metrics

__all__ = [
    "BootstrapCI",
    "agreement_summary",
    "alpha_from_matrix",
    "category_counts",
    "cohens_kappa",
    "cohens_kappa_table",
    "confusion_table",
    "fleiss_kappa",
    "fleiss_kappa_long",
    "gwet_ac",
    "intransitive_triads",
    "krippendorff_alpha",
    "krippendorff_alpha_ci",
    "mean_pairwise_kappa",
    "pairwise_cohens_kappa",
    "percent_agreement",
    "rubric_metrics",
    "unanimous_share",
    "unit_agreement",
]
