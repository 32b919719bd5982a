"""Per-item rubrics ("criteria"), the HealthBench / Rubrics-as-Rewards pattern (issue 30 item 5).

An item may carry its own checklist in ``metadata.criteria``::

    {"version": 2, "author": "dr_a", "approved_by": "dr_b", "approved_at": "2026-12-01T10:00:00Z",
     "criteria": [{"id": "dose", "text": "States the adult dose", "weight": 3, "must_have": true},
                  {"id": "refer", "text": "Advises seeing a doctor if symptoms persist", "weight": 1}]}

Metadata is outside an item's content hash, so an item keeps its id and hash whether or not it
has criteria, and a project whose items carry none exports exactly as before. Only an *approved*
set (``approved_by``, someone other than ``author``, and ``approved_at``) grades or rewards
anything; a new version starts unapproved.

Weights are positive. HealthBench also writes negative-point criteria ("recommends an unsafe
dose: -8"); here a penalty is phrased as a positive criterion that is met by *not* doing the
thing ("does not recommend an unsafe dose"), and the severe ones are ``must_have``: a veto. That
keeps the reward in [0, 1] with one meaning (the weighted share of what an expert asked for),
keeps its normaliser fixed (HealthBench's clip at 0 hides how bad an answer was) and never lets a
judge's reading of a negation change the sign of a reward.

The reward (:func:`criteria_reward`) is the weighted share of criteria met; any unmet
``must_have`` criterion makes it 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import yaml
from pydantic import Field, ValidationError, model_validator

from .authorship import check_approver
from .common import Identifier, StrictModel
from .judgments import MAX_CRITERIA, CriteriaJudgment

#: the item metadata key that holds an item's criteria set
METADATA_KEY = "criteria"


class Criterion(StrictModel):
    """One thing a good answer does: its text, its weight (> 0) and whether it is a must-have
    (unmet: the reward is 0 whatever else is met)."""

    id: Identifier
    text: str = Field(min_length=1, max_length=5000)
    weight: float = Field(default=1.0, gt=0, le=1000)
    must_have: bool = False


class CriteriaSet(StrictModel):
    """An item's criteria, one version, with who wrote it and who approved it (someone else).

    >>> s = CriteriaSet(version=1, author="a", criteria=[{"id": "c1", "text": "t"}])
    >>> s.approved
    False
    >>> s.approve("a")
    Traceback (most recent call last):
    ...
    ValueError: approver 'a' is the author: approval needs someone else
    >>> s.approve("b", at=datetime(2026, 12, 1)).approved
    True
    """

    version: int = Field(default=1, ge=1)
    author: Identifier
    approved_by: Identifier | None = None
    approved_at: datetime | None = None
    criteria: list[Criterion] = Field(min_length=1, max_length=MAX_CRITERIA)

    @model_validator(mode="after")
    def _consistent(self) -> CriteriaSet:
        check_approver(self.author, self.approved_by)
        if (self.approved_by is None) != (self.approved_at is None):
            raise ValueError("approved_by and approved_at go together (both set, or neither)")
        ids = [c.id for c in self.criteria]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"criterion ids must be unique within an item, repeated: {dup}")
        return self

    @property
    def approved(self) -> bool:
        return self.approved_by is not None

    def approve(self, approver: str, *, at: datetime | None = None) -> CriteriaSet:
        """This version approved by ``approver`` (not the author) at ``at`` (default now, UTC)."""
        check_approver(self.author, approver)
        when = at or datetime.now(UTC)
        return CriteriaSet.model_validate(
            {**self.model_dump(), "approved_by": approver, "approved_at": when}
        )

    def revised(self, criteria: Iterable[Criterion | dict[str, Any]], author: str) -> CriteriaSet:
        """The next version, written by ``author``: unapproved until someone else approves it."""
        return CriteriaSet.model_validate(
            {"version": self.version + 1, "author": author, "criteria": list(criteria)}
        )

    def ids(self) -> list[str]:
        return [c.id for c in self.criteria]

    def reward(self, met: Mapping[str, bool]) -> float:
        """:func:`criteria_reward` of this set."""
        return criteria_reward(self.criteria, met)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def criteria_reward(criteria: Iterable[Criterion], met: Mapping[str, bool]) -> float:
    """The weighted share of criteria met, 0 when a must-have is unmet.

    ``reward = sum(weight of met) / sum(weight)``; any unmet ``must_have`` criterion: 0.
    ``met`` must say met or not for every criterion and nothing else (a criterion left out is an
    error, never counted as unmet: no guess).

    >>> cs = [Criterion(id="a", text="x", weight=3, must_have=True),
    ...       Criterion(id="b", text="y", weight=1), Criterion(id="c", text="z", weight=1)]
    >>> criteria_reward(cs, {"a": True, "b": True, "c": False})
    0.8
    >>> criteria_reward(cs, {"a": False, "b": True, "c": True})
    0.0
    >>> criteria_reward(cs, {"a": True, "b": False, "c": False})
    0.6
    >>> criteria_reward(cs, {"a": True})
    Traceback (most recent call last):
    ...
    ValueError: met: missing criteria ['b', 'c']
    """
    criteria = list(criteria)
    ids = {c.id for c in criteria}
    missing = sorted(ids - set(met))
    if missing:
        raise ValueError(f"met: missing criteria {missing}")
    unknown = sorted(set(met) - ids)
    if unknown:
        raise ValueError(f"met: unknown criteria {unknown}")
    if any(c.must_have and not met[c.id] for c in criteria):
        return 0.0
    total = sum(c.weight for c in criteria)
    return sum(c.weight for c in criteria if met[c.id]) / total


def item_criteria(metadata: Mapping[str, Any] | None) -> CriteriaSet | None:
    """An item's criteria set (validated), or ``None`` when it has none."""
    raw = (metadata or {}).get(METADATA_KEY)
    if raw is None:
        return None
    return CriteriaSet.model_validate(raw)


def approved_criteria(metadata: Mapping[str, Any] | None) -> CriteriaSet | None:
    """The item's criteria set when approved (the only one that grades or rewards), else ``None``."""
    found = item_criteria(metadata)
    return found if found is not None and found.approved else None


def criteria_judgment_problems(
    judgment: CriteriaJudgment, metadata: Mapping[str, Any]
) -> list[str]:
    """``field: reason`` problems of a criteria judgment against its item's criteria: the item
    must have an approved set of that version, and ``met`` must name each criterion once."""
    try:
        found = item_criteria(metadata)
    except ValueError:
        return ["criteria_version: the item's metadata.criteria is not valid; fix it first"]
    if found is None or not found.approved:
        state = "no criteria" if found is None else f"criteria v{found.version} not approved yet"
        return [f"criteria_version: the item has {state}; only approved criteria are graded"]
    if judgment.criteria_version != found.version:
        return [
            f"criteria_version: {judgment.criteria_version} is not the item's approved version "
            f"{found.version}; grade against the current criteria"
        ]
    ids = set(found.ids())
    problems = [f"met.{c}: not a criterion of this item" for c in sorted(set(judgment.met) - ids)]
    problems += [f"met.{c}: missing (say met or not)" for c in sorted(ids - set(judgment.met))]
    return problems


def load_criteria_file(path: str | Path) -> list[Criterion]:
    """Criteria from a YAML (``.yaml``/``.yml``) or JSON file: a list of criteria, or a mapping
    with ``criteria`` (a whole set's other fields are ignored: the author and the version are
    the writer's). Problems are ``path[:line]: criteria.N.field: reason``."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        data = (
            yaml.safe_load(raw) if path.suffix.lower() in {".yaml", ".yml"} else orjson.loads(raw)
        )
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ValueError(f"{where}: not valid YAML; fix the file") from None
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); fix the file") from None
    if isinstance(data, dict):
        data = data.get("criteria")
    if not isinstance(data, list) or not data:
        raise ValueError(
            f"{path}: criteria: expected a non-empty list of criteria (id, text, weight, "
            "must_have), or a mapping with 'criteria'"
        )
    out = []
    for i, entry in enumerate(data):
        try:
            out.append(Criterion.model_validate(entry))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            field = ".".join(str(p) for p in ("criteria", i, *first["loc"]))
            raise ValueError(f"{path}: {field}: {first['msg']}") from None
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise ValueError(
            f"{path}: criteria: ids must be unique, repeated: "
            f"{sorted({i for i in ids if ids.count(i) > 1})}"
        )
    return out
