"""Agentic / multi-turn trajectories, wire format ``RLHF-2026.11``.

Every model keeps unknown keys (``extra="allow"``) so a record round-trips without loss:
``Trajectory.model_validate(d).dump() == d``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .common import Role

TRAJECTORY_SCHEMA_VERSION = "RLHF-2026.11"


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class PrmStep(_Open):
    step: int = Field(ge=1)
    text: str
    verdict: Literal[-1, 0, 1] | None = None


class ToolCall(_Open):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class Turn(_Open):
    turn: int = Field(ge=0)
    role: Role
    loss_mask: Literal[0, 1]
    content: str | None = None
    prm_steps: list[PrmStep] | None = None
    tool_call: ToolCall | None = None

    @model_validator(mode="after")
    def _mask(self) -> Turn:
        if self.role in ("user", "tool", "system") and self.loss_mask != 0:
            raise ValueError(f"turn {self.turn}: {self.role} turns carry loss_mask 0")
        if self.prm_steps is not None and self.role != "assistant":
            raise ValueError(f"turn {self.turn}: only assistant turns carry prm_steps")
        return self


class Environment(_Open):
    oci_image: str | None = None
    net_ns: str | None = None
    base_commit: str | None = None


class Verifier(_Open):
    f2p_exit: int | None = None
    p2p_exit: int | None = None
    harness_sha256_verified: bool | None = None
    terminal_reward: float | None = None


class TrajectoryTelemetry(_Open):
    annotator_hash: str | None = None
    iki_cv: float | None = None
    revision_ratio: float | None = None
    untrusted_paste_chars: int | None = None


class Trajectory(_Open):
    trajectory_id: str = Field(min_length=1)
    schema_version: Literal["RLHF-2026.11"]
    env: Environment | None = None
    turns: list[Turn] = Field(min_length=1)
    verifier: Verifier | None = None
    rubric: dict[str, float] | None = None
    telemetry: TrajectoryTelemetry | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Trajectory:
        numbers = [t.turn for t in self.turns]
        if numbers != sorted(numbers) or len(set(numbers)) != len(numbers):
            raise ValueError(f"turn numbers must increase strictly, got {numbers}")
        return self

    def dump(self) -> dict[str, Any]:
        """The record as it came in: only the keys that were set, extras included."""
        return self.model_dump(mode="json", exclude_unset=True)

    def prompt_messages(self) -> list[dict[str, Any]]:
        """Turns before the first assistant turn, as chat messages."""
        out = []
        for t in self.turns:
            if t.role == "assistant":
                break
            out.append({"role": t.role, "content": t.content or ""})
        return out

    def step_labels(self) -> list[tuple[int, list[PrmStep]]]:
        """``(turn number, steps)`` for every assistant turn carrying PRM steps."""
        return [(t.turn, t.prm_steps) for t in self.turns if t.prm_steps]
