"""Model outputs: one model's answers to a set of prompts, read from a ``rollouts.jsonl``-shaped
file (``{"prompt", "response", "reward"?, "model"?, "id"?, "domains"?}``; JSONL, JSON or Parquet).

Every record is checked by the importer's own rule (:func:`preflab.io.formats.evaluation.rollout_fields`),
so ``preflab validate FILE`` and ``preflab eval create`` report the same ``file:line: field: reason``.

Prompts are matched across models by :func:`prompt_key`: Unicode NFC, surrounding whitespace
stripped, and a chat prompt of one user message equal to its text. A model that answers the same
prompt twice is an error (which answer should people see?) unless ``first_answer``: then the
first answer in file order is used and the others are counted (``extra_answers``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..io.formats import RecordError
from ..io.formats.evaluation import (  # noqa: F401 (prompt_key: part of this module's API)
    RolloutFields,
    answer_key,
    prompt_key,
    rollout_fields,
)
from ..io.importer import Problem
from ..io.readers import ReadProblem, read_records


class OutputsInvalid(ValueError):
    """Problems in model-output files, each ``file:line: field: reason``; nothing was written."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        shown = "\n".join(str(p) for p in problems[:50])
        more = f"\n... and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(
            f"{len(problems)} problem(s) in the model outputs; nothing was written:\n{shown}{more}"
        )


@dataclass
class ModelOutputs:
    """One model's answers, by :func:`prompt_key`, in file order."""

    name: str
    path: Path
    answers: dict[str, RolloutFields] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    #: further answers to a prompt already answered, left out (``first_answer``)
    extra_answers: int = 0

    def add(self, key: str, fields: RolloutFields, line: int, first_answer: bool) -> str | None:
        """Keep this answer; the reason it cannot be kept otherwise."""
        if key in self.answers:
            if first_answer:
                self.extra_answers += 1
                return None
            return (
                f"{self.name + ' ' if self.name else ''}answered it already on line {self.lines[key]}; keep one "
                "answer per prompt and model (or pass --first-answer to use the first)"
            )
        self.answers[key], self.lines[key] = fields, line
        return None


def rollout_rows(path: Path, problems: list[Problem]) -> Iterator[tuple[int | None, RolloutFields]]:
    """``(line, fields)`` of every well-formed rollout record of ``path``; a line that cannot be
    read or fails the importer's rule goes to ``problems`` as ``file:line: field: reason``."""
    for line, record in read_records(path):
        if isinstance(record, ReadProblem):
            problems.append(Problem(str(path), record.line, record.field, record.reason))
            continue
        try:
            yield line, rollout_fields(record)
        except RecordError as exc:
            problems.append(Problem(str(path), line, exc.field, exc.reason))


def read_outputs(
    path: Path, name: str | None = None, *, first_answer: bool = False
) -> tuple[ModelOutputs | None, list[Problem]]:
    """Read one model's outputs. The model's name is ``name``, else the records' ``model`` (the same
    on every line), else the file name without its suffixes."""
    path = Path(path)
    problems: list[Problem] = []
    outputs = ModelOutputs(name=name or "", path=path)
    seen_model: tuple[str, int] | None = None

    def problem(line: int | None, fld: str, reason: str) -> None:
        problems.append(Problem(str(path), line, fld, reason))

    for line, fields in rollout_rows(path, problems):
        if name is None and fields.model is not None:
            if seen_model is None:
                seen_model = (fields.model, line or 0)
            elif fields.model != seen_model[0]:
                problem(
                    line,
                    "model",
                    f"{fields.model!r} differs from {seen_model[0]!r} on line {seen_model[1]}; "
                    "one file holds one model's outputs (split it, or name it with --model NAME=FILE)",
                )
                continue
        if not outputs.name and seen_model is not None:
            outputs.name = seen_model[0]
        reason = outputs.add(prompt_key(fields.prompt), fields, line or 0, first_answer)
        if reason:
            problem(line, "prompt", reason)
    if not outputs.name:
        outputs.name = seen_model[0] if seen_model else path.name.split(".")[0]
    return (None if problems else outputs), problems


def read_outputs_by_model(
    path: Path, *, first_answer: bool = False
) -> tuple[list[ModelOutputs], list[Problem]]:
    """Several models' outputs in one file (``export -f rollouts`` writes such files), split by
    each row's ``model`` (required here); one answer per prompt and model."""
    path = Path(path)
    problems: list[Problem] = []
    by_model: dict[str, ModelOutputs] = {}
    for line, fields in rollout_rows(path, problems):
        if fields.model is None:
            problems.append(
                Problem(
                    str(path),
                    line,
                    "model",
                    "missing: rows of a file with several models must "
                    "name theirs (or pass one file per model)",
                )
            )
            continue
        outputs = by_model.setdefault(fields.model, ModelOutputs(name=fields.model, path=path))
        reason = outputs.add(prompt_key(fields.prompt), fields, line or 0, first_answer)
        if reason:
            problems.append(Problem(str(path), line, "prompt", reason))
    return list(by_model.values()), problems


def read_all_outputs(
    sources: list[tuple[str | None, Path]],
    mixed: Sequence[Path] = (),
    *,
    first_answer: bool = False,
) -> list[ModelOutputs]:
    """Read every model's file (``sources``: one model each) and the files holding several models
    (``mixed``); :class:`OutputsInvalid` with all problems of all files."""
    models: list[ModelOutputs] = []
    problems: list[Problem] = []
    for name, path in sources:
        outputs, found = read_outputs(path, name, first_answer=first_answer)
        problems.extend(found)
        if outputs is not None:
            models.append(outputs)
    for path in mixed:
        several, found = read_outputs_by_model(path, first_answer=first_answer)
        problems.extend(found)
        models.extend(several)
    names: dict[str, Path] = {}
    for m in models:
        if m.name in names:
            problems.append(
                Problem(
                    str(m.path),
                    None,
                    "model",
                    f"model name {m.name!r} is also the name of "
                    f"{names[m.name]}; give each file its own name with --model NAME=FILE",
                )
            )
        names[m.name] = m.path
    if problems:
        raise OutputsInvalid(problems)
    if len(models) < 2:
        raise ValueError("an evaluation needs the outputs of at least two models")
    return models
