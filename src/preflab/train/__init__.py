"""Reward model training and evaluation, scoring, best-of-N and RL, through TRL + accelerate.

May import :mod:`preflab.schema`, :mod:`preflab.quality` and :mod:`preflab.io` (DESIGN.md).
Heavy dependencies (torch, transformers, trl) are imported inside the functions that need them,
so ``import preflab.train`` stays cheap and works without the ``train`` extra.
"""

from .data import Pair, PairDataError, PairSource, read_export, split_by_prompt
from .encode import Encoded, encode

__all__ = [
    "Encoded",
    "Pair",
    "PairDataError",
    "PairSource",
    "encode",
    "read_export",
    "split_by_prompt",
]
