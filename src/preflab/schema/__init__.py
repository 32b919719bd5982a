"""Wire formats of preflab (pydantic v2). Imports nothing else of preflab."""

from .common import (
    Message,
    Prompt,
    canonical_json,
    content_hash,
    prompt_as_messages,
    prompt_as_text,
)
from .item import Candidate, GoldAnswer, Item
from .judgments import (
    JUDGMENT_KINDS,
    DemonstrationJudgment,
    Judgment,
    JudgmentBase,
    LabelRow,
    PairwiseJudgment,
    RankingJudgment,
    RubricJudgment,
    StepsJudgment,
    UnaryJudgment,
    dump_judgment,
    pair_unit,
    parse_judgment,
)
from .provenance import LabelSource, Provenance, ReviewPass, Telemetry, rater_hash
from .rubric import Dimension, Rubric, VerbosityPenalty, Veto
from .trajectory import TRAJECTORY_SCHEMA_VERSION, Trajectory

__all__ = [
    "JUDGMENT_KINDS",
    "TRAJECTORY_SCHEMA_VERSION",
    "Candidate",
    "DemonstrationJudgment",
    "Dimension",
    "GoldAnswer",
    "Item",
    "Judgment",
    "JudgmentBase",
    "LabelRow",
    "LabelSource",
    "Message",
    "PairwiseJudgment",
    "Prompt",
    "Provenance",
    "RankingJudgment",
    "ReviewPass",
    "Rubric",
    "RubricJudgment",
    "StepsJudgment",
    "Telemetry",
    "Trajectory",
    "UnaryJudgment",
    "VerbosityPenalty",
    "Veto",
    "canonical_json",
    "content_hash",
    "dump_judgment",
    "pair_unit",
    "parse_judgment",
    "prompt_as_messages",
    "prompt_as_text",
    "rater_hash",
]
