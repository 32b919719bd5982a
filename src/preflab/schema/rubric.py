"""Rubrics: versioned sets of dimensions, veto criteria and an optional verbosity penalty."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import orjson
import yaml
from pydantic import Field, model_validator

from .common import Identifier, StrictModel

Scale = Literal["binary", "ternary", "ordinal", "interval"]


class Dimension(StrictModel):
    """One graded aspect of an answer.

    Scales: ``binary`` (0/1), ``ternary`` (-1/0/1), ``ordinal`` (``points`` levels 1..k),
    ``interval`` (a real number in ``[min, max]``).
    """

    name: Identifier
    description: str = ""
    scale: Scale
    points: int | None = Field(default=None, ge=2, le=100)
    min: float | None = None
    max: float | None = None
    labels: list[str] | None = None
    weight: float = Field(default=1.0, ge=0)

    @model_validator(mode="after")
    def _scale_bounds(self) -> Dimension:
        if self.scale == "ordinal" and self.points is None:
            raise ValueError(f"dimension {self.name!r}: an ordinal scale needs 'points'")
        if self.scale == "interval":
            if self.min is None or self.max is None or self.min >= self.max:
                raise ValueError(f"dimension {self.name!r}: an interval scale needs min < max")
        expected = {"binary": 2, "ternary": 3, "ordinal": self.points}.get(self.scale)
        if self.labels is not None and expected is not None and len(self.labels) != expected:
            raise ValueError(
                f"dimension {self.name!r}: {len(self.labels)} labels for a scale of {expected} levels"
            )
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        if self.scale == "binary":
            return (0.0, 1.0)
        if self.scale == "ternary":
            return (-1.0, 1.0)
        if self.scale == "ordinal":
            return (1.0, float(self.points or 2))
        return (float(self.min), float(self.max))  # type: ignore[arg-type]

    @property
    def agreement_metric(self) -> Literal["nominal", "ordinal", "interval"]:
        """Krippendorff metric matching this scale."""
        return {"binary": "nominal", "ternary": "ordinal", "ordinal": "ordinal"}.get(
            self.scale, "interval"
        )  # type: ignore[return-value]

    def check(self, value: float) -> str | None:
        """Why ``value`` is not on this scale, or ``None`` if it is."""
        lo, hi = self.bounds
        if not lo <= value <= hi:
            return f"{value} is outside [{lo:g}, {hi:g}]"
        if self.scale != "interval" and value != int(value):
            return f"{value} is not a whole level of a {self.scale} scale"
        return None

    def normalise(self, value: float) -> float:
        """Map a score to [0, 1]."""
        lo, hi = self.bounds
        return (value - lo) / (hi - lo)


class Veto(StrictModel):
    """A criterion that, when failed, gates the reward to 0 whatever else scores."""

    name: Identifier
    description: str = ""


class VerbosityPenalty(StrictModel):
    """Subtract ``per_unit * max(0, length - free_length)`` from the reward (clipped at ``max_penalty``)."""

    free_length: int = Field(ge=0)
    per_unit: float = Field(ge=0)
    max_penalty: float = Field(default=1.0, ge=0)
    unit: Literal["words", "chars", "tokens"] = "words"


class Rubric(StrictModel):
    id: Identifier
    version: int = Field(default=1, ge=1)
    title: str = ""
    description: str = ""
    dimensions: list[Dimension] = Field(min_length=1)
    vetoes: list[Veto] = Field(default_factory=list)
    verbosity_penalty: VerbosityPenalty | None = None
    #: who wrote this version and who approved it (someone else); not part of the content hash
    author: Identifier | None = None
    approver: Identifier | None = None

    @model_validator(mode="after")
    def _unique(self) -> Rubric:
        from .authorship import check_approver

        check_approver(self.author, self.approver)
        names = [d.name for d in self.dimensions]
        if len(set(names)) != len(names):
            raise ValueError(f"dimension names must be unique, got {names}")
        if sum(d.weight for d in self.dimensions) <= 0:
            raise ValueError("at least one dimension needs a positive weight")
        return self

    def dimension(self, name: str) -> Dimension:
        for d in self.dimensions:
            if d.name == name:
                return d
        raise KeyError(f"rubric {self.id!r} v{self.version} has no dimension {name!r}")

    def check_scores(self, scores: dict[str, float], vetoes_failed: list[str]) -> list[str]:
        """Problems with a rubric judgment, as ``field: reason`` strings (empty when valid)."""
        problems = []
        known = {d.name for d in self.dimensions}
        for name in sorted(set(scores) - known):
            problems.append(f"scores.{name}: not a dimension of rubric {self.id} v{self.version}")
        for d in self.dimensions:
            if d.name not in scores:
                problems.append(f"scores.{d.name}: missing")
            elif (why := d.check(scores[d.name])) is not None:
                problems.append(f"scores.{d.name}: {why}")
        veto_names = {v.name for v in self.vetoes}
        for name in vetoes_failed:
            if name not in veto_names:
                problems.append(f"vetoes_failed: {name!r} is not a veto of this rubric")
        return problems

    def reward(
        self,
        scores: dict[str, float],
        vetoes_failed: Sequence[str] = (),
        length: int | None = None,
    ) -> float:
        """Weighted mean of normalised scores in [0, 1]; 0 if a veto failed; minus verbosity.

        Lexicographic truth gating: a failed veto (e.g. a factual error) zeroes the reward
        whatever the style dimensions score.
        """
        if vetoes_failed:
            return 0.0
        total_weight = sum(d.weight for d in self.dimensions)
        value = sum(d.weight * d.normalise(scores[d.name]) for d in self.dimensions) / total_weight
        if self.verbosity_penalty is not None and length is not None:
            vp = self.verbosity_penalty
            value -= min(vp.max_penalty, vp.per_unit * max(0, length - vp.free_length))
        return value

    def content_hash(self) -> str:
        from .common import content_hash

        return content_hash(
            self.model_dump(mode="json", exclude={"version", "author", "approver"}), length=64
        )

    @classmethod
    def load(cls, path: str | Path) -> Rubric:
        """Read a rubric from YAML (``.yaml``/``.yml``) or JSON."""
        path = Path(path)
        raw = path.read_bytes()
        try:
            data = (
                yaml.safe_load(raw)
                if path.suffix.lower() in {".yaml", ".yml"}
                else orjson.loads(raw)
            )
        except yaml.YAMLError as exc:  # file:line: what the parser says, not a traceback
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ValueError(f"{where}: not valid YAML ({problem}); fix the file") from None
        except orjson.JSONDecodeError as exc:
            raise ValueError(
                f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); fix the file"
            ) from None
        if not isinstance(data, dict):
            raise ValueError(
                f"{path}: a rubric is a mapping (id, version, dimensions), not {type(data).__name__}"
            )
        return cls.model_validate(data)
