"""Scoring a judgment against a gold item's expected answer (the rule lives in
:mod:`preflab.quality.gold`, shared with the quality report)."""

from __future__ import annotations

from ..quality.gold import expected_judgment, score_gold

__all__ = ["expected_judgment", "score_gold"]
