"""Aggregation: classification (one label per unit) and pairwise/ranking strengths."""

from .base import AggregationResult
from .bradley_terry import BTResult, arena_ratings, bradley_terry, comparisons_from_winner_rows
from .dawid_skene import dawid_skene
from .mace import mace
from .majority_vote import majority_vote
from .one_coin import one_coin_dawid_skene
from .plackett_luce import plackett_luce

__all__ = [
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
]
