"""Exporters: resolved human labels in the formats real trainers read.

>>> from preflab.io.export import EXPORT_FORMATS, ExportOptions, export_project
>>> sorted(EXPORT_FORMATS)
['critiques', 'openrlhf', 'raw', 'rlhf-2026.11', 'rollouts', 'to-label', 'trl-kto', 'trl-preference', 'trl-reward', 'trl-sft', 'trl-sft-agent', 'trl-stepwise', 'verl']

``export_project(engine, "my-project", ExportOptions(format="trl-preference", out=Path("out")))``
writes ``out/train.jsonl``, ``out/README.md`` (dataset card) and ``out/manifest.json`` atomically
and returns the manifest. Label resolution (revisions, adjudication, aggregation) is in
:mod:`.resolve`; one module per target format; writers in :mod:`.writers`.
"""

from __future__ import annotations

from ...schema.export_options import DEFAULT_LENGTH_GATE
from .aggregators import AGGREGATORS, aggregate_pairwise_dawid_skene
from .base import (
    FILE_FORMATS,
    ExportData,
    Exporter,
    ExportError,
    ExportOptions,
)
from .critiques import Critiques
from .openrlhf import OpenRLHF
from .pipeline import apply_gates, collect, export_project, length_parity_gate, write_export
from .raw import Raw
from .resolve import (
    DropLog,
    PairAggregator,
    PairVote,
    ResolvedPair,
    ResolvedSteps,
    ResolvedUnary,
    aggregate_pairwise,
    effective_judgments,
    pair_votes,
    rubric_pairs,
    word_length,
)
from .rlhf_trajectory import RLHFTrajectory
from .rollouts import Rollouts
from .to_label import ToLabel
from .trl_kto import TRLKTO
from .trl_preference import TRLPreference
from .trl_reward import TRLReward
from .trl_sft import TRLSFT
from .trl_sft_agent import TRLSFTAgent
from .trl_stepwise import TRLStepwise
from .verl import Verl

EXPORT_FORMATS: dict[str, Exporter] = {
    e.name: e
    for e in (
        TRLPreference(),
        TRLReward(),
        TRLKTO(),
        TRLSFT(),
        TRLStepwise(),
        OpenRLHF(),
        Verl(),
        Raw(),
        Critiques(),
        ToLabel(),
        Rollouts(),
    )
}
EXPORT_FORMATS[RLHFTrajectory.name] = RLHFTrajectory()
EXPORT_FORMATS[TRLSFTAgent.name] = TRLSFTAgent()

__all__ = [
    "AGGREGATORS",
    "aggregate_pairwise_dawid_skene",
    "DEFAULT_LENGTH_GATE",
    "EXPORT_FORMATS",
    "FILE_FORMATS",
    "DropLog",
    "ExportData",
    "ExportError",
    "ExportOptions",
    "Exporter",
    "PairAggregator",
    "PairVote",
    "ResolvedPair",
    "ResolvedSteps",
    "ResolvedUnary",
    "aggregate_pairwise",
    "apply_gates",
    "collect",
    "effective_judgments",
    "export_project",
    "length_parity_gate",
    "pair_votes",
    "rubric_pairs",
    "word_length",
    "write_export",
]
