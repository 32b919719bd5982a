"""Verifiable tasks (code, SQL, math) and their JSONL file format.

One task per line, ``kind`` chooses the verifier::

    {"task_id": "add", "kind": "code", "files": {"tests/test_add.py": "..."},
     "f2p": ["tests/test_add.py::test_add"], "p2p": [], "solution_path": "solution.py"}
    {"task_id": "top", "kind": "sql", "fixture": "shop.sqlite",
     "reference_query": "SELECT ...", "ordered": false}
    {"task_id": "half", "kind": "math", "answer": "\\\\frac{1}{2}", "tolerance": 1e-6}
    {"task_id": "sum", "kind": "stdio", "cases": [{"input": "2 3\\n", "output": "5\\n"}]}

Any task may carry ``author``, ``approver`` (someone else) and ``version`` (>= 1): provenance the
verifier ignores and the reports and exports carry.

Paths (``fixture``, ``harness_dir``) are relative to the tasks file.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from preflab.schema.authorship import check_approver


class _Task(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_id: str = Field(min_length=1)
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    #: provenance (optional; :mod:`preflab.schema.authorship`): who wrote the task, who approved
    #: it (someone else), which version. The verifier never reads them; they travel with the task
    author: str | None = Field(default=None, min_length=1, max_length=200)
    approver: str | None = Field(default=None, min_length=1, max_length=200)
    version: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _approver_is_someone_else(self):
        check_approver(self.author, self.approver)
        return self

    def provenance(self) -> dict[str, Any]:
        """``author``, ``approver``, ``version`` where given."""
        return {
            k: v
            for k, v in (
                ("author", self.author),
                ("approver", self.approver),
                ("version", self.version),
            )
            if v is not None
        }


def _safe_relative(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"{path!r} must be a relative path inside the task, without '..'")
    return str(pure)


class CodeTask(_Task):
    """``mode``: ``function`` (the default) runs the candidate in a process of its own that the
    tests reach only through plain-data calls; ``repo`` lets the tests import the candidate's
    files in their own process (SWE-style patches), behind a static screen whose findings
    ``screen_allow`` may waive by rule name (see ``docs/verify.md``)."""

    kind: Literal["code"]
    files: dict[str, str] = Field(default_factory=dict)
    harness_dir: str | None = None
    f2p: list[str] = Field(min_length=1)
    p2p: list[str] = Field(default_factory=list)
    solution_path: str = "solution.py"
    mode: Literal["function", "repo"] = "function"
    screen_allow: list[str] = Field(default_factory=list)

    @field_validator("screen_allow")
    @classmethod
    def _rules(cls, names: list[str]) -> list[str]:
        from .screen import RULES

        unknown = sorted(set(names) - set(RULES))
        if unknown:
            raise ValueError(f"unknown screen rules {unknown}; known: {sorted(RULES)}")
        return names

    @field_validator("files")
    @classmethod
    def _files(cls, files: dict[str, str]) -> dict[str, str]:
        return {_safe_relative(k): v for k, v in files.items()}

    @field_validator("solution_path")
    @classmethod
    def _solution(cls, path: str) -> str:
        return _safe_relative(path)

    @field_validator("f2p", "p2p")
    @classmethod
    def _nodeids(cls, ids: list[str]) -> list[str]:
        for nodeid in ids:
            _safe_relative(nodeid.split("::", 1)[0])
        return ids


class StdioCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: str = ""
    output: str


class StdioTask(_Task):
    """A program read on stdin and judged on stdout (the competitive-programming shape): each
    case runs the candidate afresh; the expected output never enters its sandbox."""

    kind: Literal["stdio"]
    cases: list[StdioCase] = Field(min_length=1)
    solution_path: str = "solution.py"
    #: ``tokens``: whitespace-separated tokens equal; ``lines``: lines equal after trailing
    #: whitespace is stripped; ``exact``: byte for byte
    compare: Literal["tokens", "lines", "exact"] = "tokens"
    timeout_s: float = Field(default=10.0, gt=0, le=600)

    @field_validator("solution_path")
    @classmethod
    def _solution(cls, path: str) -> str:
        return _safe_relative(path)


class SqlTask(_Task):
    kind: Literal["sql"]
    fixture: str
    reference_query: str | None = None
    expected_rows: list[list[Any]] | None = None
    ordered: bool = False


class MathTask(_Task):
    kind: Literal["math"]
    answer: str = Field(min_length=1)
    tolerance: float | None = Field(default=None, ge=0)
    timeout_s: float = Field(default=5.0, gt=0, le=60)


Task = Annotated[CodeTask | StdioTask | SqlTask | MathTask, Field(discriminator="kind")]
TASK = TypeAdapter(Task)


class TaskFileError(ValueError):
    """Bad input, with ``file:line: field: reason`` for every problem found."""


AnyTask = CodeTask | StdioTask | SqlTask | MathTask


def parse_task(data: dict[str, Any], *, base_dir: Path | None = None) -> AnyTask:
    task = TASK.validate_python(data)
    if base_dir is not None:
        task = _resolve_paths(task, base_dir)
    if isinstance(task, SqlTask) and (task.reference_query is None) == (task.expected_rows is None):
        raise ValueError("sql task needs exactly one of reference_query or expected_rows")
    return task


def _resolve_paths(task, base_dir: Path):
    if isinstance(task, SqlTask):
        return task.model_copy(update={"fixture": str((base_dir / task.fixture).resolve())})
    if isinstance(task, CodeTask) and task.harness_dir:
        return task.model_copy(update={"harness_dir": str((base_dir / task.harness_dir).resolve())})
    return task


def _errors(where: str, exc: ValidationError | ValueError) -> list[str]:
    if isinstance(exc, ValidationError):
        return [
            f"{where}: {'.'.join(str(p) for p in e['loc']) or '(record)'}: {e['msg']}"
            for e in exc.errors()
        ]
    return [f"{where}: (record): {exc}"]


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    rows, errors = [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                errors.append(f"{path}:{number}: (line): invalid JSON: {e.msg}")
                continue
            if not isinstance(value, dict):
                errors.append(f"{path}:{number}: (line): expected a JSON object")
                continue
            rows.append((number, value))
    if errors:
        raise TaskFileError("\n".join(errors))
    return rows


def load_tasks(path: Path) -> dict[str, AnyTask]:
    """All tasks of a JSONL file, or a :class:`TaskFileError` listing every bad line."""
    tasks, errors = {}, []
    for number, data in read_jsonl(path):
        where = f"{path}:{number}"
        try:
            task = parse_task(data, base_dir=path.parent)
        except (ValidationError, ValueError) as e:
            errors.extend(_errors(where, e))
            continue
        if task.task_id in tasks:
            errors.append(f"{where}: task_id: duplicate task id {task.task_id!r}")
        tasks[task.task_id] = task
    if errors:
        raise TaskFileError(
            "\n".join(errors) + "\nfix these lines and run again; nothing was verified"
        )
    return tasks
