"""Record formats the importer reads. One :class:`RecordFormat` per shape, in :data:`FORMATS`.

A format turns one input record (a dict from a JSONL line, a JSON array element or a Parquet
row) into items and judgments. Problems are raised as :class:`RecordError` with the field that
is wrong, so the importer can report ``file:line: field: reason``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ...schema import Item, JudgmentBase, Rubric
from ...schema.common import FieldProblem
from ...store.rows import ItemRows, JudgmentRows


class RecordError(ValueError):
    """What is wrong with one record: ``field`` (dotted path) and ``reason``."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass
class Converted:
    """What one record holds. Fast paths may give pre-built rows (:mod:`preflab.store.rows`)."""

    items: list[Item | ItemRows] = field(default_factory=list)
    judgments: list[JudgmentBase | JudgmentRows] = field(default_factory=list)


@dataclass(frozen=True)
class RecordFormat:
    name: str
    description: str
    #: True when a record has this format's shape (checked in registry order).
    detect: Callable[[dict[str, Any]], bool]
    convert: Callable[[dict[str, Any], ConvertOptions], Converted]
    #: Rubrics the judgments of this format refer to; the importer stores them in the project.
    rubrics: tuple[Rubric, ...] = ()
    #: Judgment kinds this format derives from data the stored item keeps anyway: left out (and
    #: counted in ``judgments_not_collected``) when the project does not collect the kind, instead
    #: of failing the import.
    optional_kinds: frozenset[str] = frozenset()
    #: Its items are samples of a model (one output with its outcome: a reward, a verifier's
    #: result) or verdicts on two named models' answers (``human_eval``), identified by their id:
    #: not joined to an item of equal content under another id (:mod:`preflab.io.importer`), so
    #: two samples with the same text keep their own outcomes, and a battle its models.
    samples: bool = False
    #: Its candidates are named by the data set (a model, a system, a position such as PandaLM's
    #: ``response1``), not by whoever wrote the record: the same prompt and answers in a shape
    #: without candidate ids is not checked against it (``docs/item-identity.md``). Formats of
    #: :attr:`samples` are not checked either.
    dataset_ids: bool = False

    @property
    def keeps_pair_ids(self) -> bool:
        """Whether its items are exempt from the same-pair check (:func:`preflab.store.rows.pair_key`)."""
        return self.samples or self.dataset_ids


@dataclass(frozen=True)
class ConvertOptions:
    """Options every format receives."""

    #: Unknown fields go into ``metadata`` instead of being an error.
    keep_extra: bool = False
    #: Source stated for imported judgments when the record does not say (``human``/``ai``).
    default_source: str = "human"
    #: Rater id for judgments whose record names none.
    default_rater: str | None = None
    #: ``labeler`` names stored as ``source: ai`` when the record states no source, matched
    #: exactly (:func:`preflab.io.formats.generic.ai_labeler_rule`): ``--ai-labeler`` and the
    #: project's ``policy.ai_labelers`` setting.
    ai_labelers: frozenset[str] = frozenset()
    #: Shell-style globs of such names, matched case-insensitively against the whole name:
    #: ``--ai-labeler-pattern`` and ``policy.ai_labeler_patterns``.
    ai_labeler_patterns: tuple[str, ...] = ()
    #: A trajectory's ``prm_steps`` verdicts: ``label`` makes them a steps judgment,
    #: ``suggestion`` leaves them in the item's record for raters to check (the project's
    #: ``policy.imported_step_verdicts``).
    step_verdicts: str = "label"


FORMATS: dict[str, RecordFormat] = {}


def register(fmt: RecordFormat) -> RecordFormat:
    if fmt.name in FORMATS:
        raise ValueError(f"record format {fmt.name!r} registered twice")
    FORMATS[fmt.name] = fmt
    return fmt


def detect_format(record: dict[str, Any]) -> RecordFormat:
    for fmt in FORMATS.values():
        if fmt.detect(record):
            return fmt
    keys = ", ".join(sorted(record)[:12])
    raise RecordError(
        "(record)",
        f"unrecognised record shape (keys: {keys}); expected one of: "
        + "; ".join(f"{f.name} ({f.description})" for f in FORMATS.values()),
    )


def require(
    record: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str = ""
) -> Any:
    """``record[key]`` checked for presence and type, else a :class:`RecordError`."""
    path = f"{where}{key}"
    if key not in record or record[key] is None:
        raise RecordError(path, "missing")
    value = record[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise RecordError(path, f"expected {_type_names(kind)}, got a boolean ({value!r})")
    if not isinstance(value, kind):
        raise RecordError(path, f"expected {_type_names(kind)}, got {type(value).__name__}")
    return value


def _type_names(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {
        str: "a string",
        int: "an integer",
        float: "a number",
        list: "a list",
        dict: "an object",
        bool: "a boolean",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def check_unknown(
    record: dict[str, Any], known: set[str], options: ConvertOptions
) -> dict[str, Any]:
    """Unknown keys: an error, or (with ``keep_extra``) returned for the item's metadata."""
    extra = {k: v for k, v in record.items() if k not in known}
    if extra and not options.keep_extra:
        first = sorted(extra)[0]
        raise RecordError(
            first,
            f"unknown field (known: {', '.join(sorted(known))}); pass --keep-extra to keep "
            "unknown fields in the item's metadata",
        )
    return extra


def error_path(loc: tuple[Any, ...], prefix: str = "") -> str:
    """A pydantic error location as a dotted path: ``candidates[1].text``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f"{'.' if out else ''}{part}"
    return out or "(record)"


def from_validation_error(exc: ValidationError, prefix: str = "") -> RecordError:
    """The first problem of a pydantic error as a :class:`RecordError` (with a count of the rest)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    problem = (first.get("ctx") or {}).get("error")
    if isinstance(problem, FieldProblem):  # a model validator that names its field
        reason = problem.reason
        if len(errors) > 1:
            reason += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} in this record)"
        return RecordError(error_path(first["loc"] + problem.field, prefix), reason)
    # Discriminated unions and model validators put the model name in the path; drop it.
    loc = tuple(
        p
        for p in first["loc"]
        if not (isinstance(p, str) and p[:1].isupper() or p in JUDGMENT_TAGS)
    )
    reason = first["msg"]
    if first["type"] == "extra_forbidden":
        reason = "unknown field; remove it (or check its spelling)"
    if (
        "input" in first
        and first["type"] not in ("missing", "extra_forbidden")
        and not isinstance(first["input"], dict | list)
    ):
        reason += f" (got {first['input']!r:.60})"
    if len(errors) > 1:
        reason += (
            f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} in this record)"
        )
    return RecordError(error_path(loc, prefix), reason)


JUDGMENT_TAGS = {"pairwise", "ranking", "rubric", "unary", "steps", "demonstration"}

# Registration order is detection order: specific shapes before generic ones.
from . import evaluation as _evaluation  # noqa: E402
from . import generic as _generic  # noqa: E402
from . import shared_datasets as _shared_datasets  # noqa: E402
