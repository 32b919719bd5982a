"""Records read from files and converted into rows, each with its ``file:line`` and problems."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from pydantic import ValidationError

from ...store.rows import ItemRows, JudgmentRows, PairRows, item_rows, judgment_rows
from ..formats import (
    FORMATS,
    ConvertOptions,
    RecordError,
    RecordFormat,
    detect_format,
    from_validation_error,
)
from ..formats.generic import COMPARISON, comparison_pair
from ..readers import ReadProblem, read_records
from .options import ImportOptions


@dataclass(slots=True)
class Record:
    file: str
    line: int | None
    format: str | None = None
    items: list[ItemRows] = field(default_factory=list)
    judgments: list[JudgmentRows] = field(default_factory=list)
    #: ``(field, reason)`` found while reading or converting.
    problems: list[tuple[str, str]] = field(default_factory=list)


def convert_options(options: ImportOptions) -> ConvertOptions:
    return ConvertOptions(
        keep_extra=options.keep_extra,
        default_source=options.default_source,
        ai_labelers=frozenset(options.ai_labelers),
        ai_labeler_patterns=tuple(options.ai_labeler_patterns),
        step_verdicts=options.step_verdicts,
    )


def forced_format(options: ImportOptions) -> RecordFormat | None:
    if options.format is None:
        return None
    if options.format not in FORMATS:
        raise ValueError(
            f"unknown record format {options.format!r}; choose from {', '.join(FORMATS)}"
        )
    return FORMATS[options.format]


class Pair:
    """A plain-text comparison record on the lean path: its rows without dicts or pydantic.

    Bulk imports are mostly this shape (TRL-style ``{"prompt", "chosen", "rejected"}`` rows), so it
    skips format detection, :class:`Record` and the generic row objects; anything unusual about
    it in the database (its item exists, the project does not collect pairwise judgments) turns it
    back into a :class:`Record` (:meth:`as_record`) for the generic checks.
    """

    __slots__ = ("file", "line", "rows")
    format = COMPARISON.name
    problems: tuple[tuple[str, str], ...] = ()

    def __init__(self, file: str, line: int | None, rows: PairRows) -> None:
        self.file = file
        self.line = line
        self.rows = rows

    def as_record(self) -> Record:
        return Record(
            self.file, self.line, self.format, [self.rows.item_rows()], [self.rows.judgment_rows()]
        )


def records(
    paths: Sequence[Path],
    options: ImportOptions,
    progress: Callable[[int], None] | None,
    lean: bool = True,
    skip: int = 0,
) -> Generator[Record | Pair, None, None]:
    """Every record converted, or with its problems; ``lean``: plain comparisons as :class:`Pair`;
    ``skip``: the first ``skip`` records are read but neither converted nor yielded (another
    process converts them; each record read, a problem included, yields one result here)."""
    forced = forced_format(options)
    copts = convert_options(options)
    # No format before ``comparison`` recognises the shape comparison_pair takes, so it may run
    # before detection.
    lean = lean and (forced is None or forced is COMPARISON)
    for path in paths:
        name = str(path)
        read = read_records(path, max_line_bytes=options.max_line_bytes, progress=progress)
        if skip:
            skipped = sum(1 for _ in islice(read, skip))
            skip -= skipped
        for line, raw in read:
            if isinstance(raw, ReadProblem):
                yield Record(name, raw.line, problems=[(raw.field, raw.reason)])
                continue
            if lean:
                try:
                    pair = comparison_pair(raw, copts)
                except RecordError as exc:
                    yield Record(name, line, COMPARISON.name, problems=[(exc.field, exc.reason)])
                    continue
                if pair is not None:
                    yield Pair(name, line, pair)
                    continue
            rec = Record(name, line)
            try:
                fmt = forced or detect_format(raw)
                rec.format = fmt.name
                converted = fmt.convert(raw, copts)
                rec.items = [
                    i if isinstance(i, ItemRows) else item_rows(i) for i in converted.items
                ]
                rec.judgments = [
                    j if isinstance(j, JudgmentRows) else judgment_rows(j)
                    for j in converted.judgments
                ]
            except RecordError as exc:
                rec.problems.append((exc.field, exc.reason))
            except ValidationError as exc:
                err = from_validation_error(exc)
                rec.problems.append((err.field, err.reason))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                rec.problems.append(("(record)", f"{type(exc).__name__}: {exc}"))
            yield rec
