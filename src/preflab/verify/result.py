"""The outcome of one verification, and the RLHF-2026.11 ``verifier`` block it fills."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from preflab.schema.trajectory import Trajectory, Verifier


@dataclass
class Verdict:
    """``reward`` is 1.0 only when every check passed; ``reason`` says why it is 0 otherwise."""

    task_id: str
    kind: str
    reward: float
    reason: str
    f2p_exit: int | None = None
    p2p_exit: int | None = None
    harness_sha256_verified: bool | None = None
    tests: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.reward > 0

    def verifier_block(self) -> dict[str, Any]:
        block = {
            "f2p_exit": self.f2p_exit,
            "p2p_exit": self.p2p_exit,
            "harness_sha256_verified": self.harness_sha256_verified,
            "terminal_reward": self.reward,
        }
        return {k: v for k, v in block.items() if v is not None}

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def fill_verifier_block(trajectory: Trajectory, verdict: Verdict) -> Trajectory:
    """The trajectory with its ``verifier`` block replaced by what preflab measured.

    Keys of the old block that preflab does not measure (extras) are kept."""
    old = trajectory.verifier.model_dump(exclude_unset=True) if trajectory.verifier else {}
    block = Verifier(**{**old, **verdict.verifier_block()})
    return trajectory.model_copy(update={"verifier": block})
