"""The truth gate: what a verifier failed never trains as a positive (issue 13, section 2).

A candidate's verifier verdict is the RLHF-2026.11 ``verifier`` block found in its
``metadata.verifier`` or, for an imported trajectory (candidate ``trajectory``), in the item's
``metadata.trajectory.verifier``. It *failed* when ``harness_sha256_verified`` is false,
``f2p_exit`` or ``p2p_exit`` is non-zero, or ``terminal_reward`` is at most 0. A failed
candidate is then never ``chosen`` (the pair is dropped), never a positive KTO label, never an
all-correct process label (its step labels are dropped unless they mark the error) and never an
SFT row; each drop is counted in the manifest under gate ``truth`` with its reason. Human labels
that prefer a failed answer are outvoted by the oracle, not by other people.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...schema import Item
from .base import ExportData

GATE = "truth"
TRAJECTORY_CANDIDATE = "trajectory"


def verifier_block(item: Item, candidate_id: str) -> Mapping[str, Any] | None:
    for candidate in item.candidates:
        if candidate.id == candidate_id and isinstance(candidate.metadata.get("verifier"), Mapping):
            return candidate.metadata["verifier"]
    trajectory = (item.metadata or {}).get("trajectory")
    if candidate_id == TRAJECTORY_CANDIDATE and isinstance(trajectory, Mapping):
        block = trajectory.get("verifier")
        return block if isinstance(block, Mapping) else None
    return None


def verifier_failure(block: Mapping[str, Any] | None) -> str | None:
    """Why a verifier block counts as failed, or ``None`` when it passed or is absent."""
    if not block:
        return None
    if block.get("harness_sha256_verified") is False:
        return "harness check failed"
    for key, what in (("f2p_exit", "fail-to-pass"), ("p2p_exit", "pass-to-pass")):
        if block.get(key) not in (None, 0):
            return f"{what} tests failed"
    reward = block.get("terminal_reward")
    if reward is not None and reward <= 0:
        return "verifier reward 0"
    return None


def candidate_failure(item: Item, candidate_id: str) -> str | None:
    return verifier_failure(verifier_block(item, candidate_id))


def truth_gate(data: ExportData) -> None:
    """Drop, in place, every resolved label that would train a failed candidate as good."""
    items = data.items

    def failed(item_id: str, candidate_id: str) -> str | None:
        return candidate_failure(items[item_id], candidate_id)

    kept_pairs = []
    for pair in data.pairs:
        if reason := failed(pair.item_id, pair.chosen_id):
            data.drops.drop(GATE, f"chosen answer: {reason}", pair.item_id)
        else:
            kept_pairs.append(pair)
    data.pairs = kept_pairs
    kept_unary = []
    for unary in data.unary:
        if unary.label and (reason := failed(unary.item_id, unary.candidate_id)):
            data.drops.drop(GATE, f"positive label: {reason}", unary.item_id)
        else:
            kept_unary.append(unary)
    data.unary = kept_unary
    kept_steps = []
    for steps in data.steps:
        if all(steps.labels) and (reason := failed(steps.item_id, steps.candidate_id)):
            data.drops.drop(GATE, f"every step labelled correct: {reason}", steps.item_id)
        else:
            kept_steps.append(steps)
    data.steps = kept_steps
