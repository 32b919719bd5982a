"""What an import is asked to do and what it reports: options, problems, reports, the failure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..readers import DEFAULT_MAX_LINE_BYTES

#: Skipped-record problems kept in the batch's ``counts`` (the report keeps up to MAX_SKIPPED).
SKIPPED_IN_COUNTS = 200
MAX_SKIPPED = 10_000


@dataclass
class ImportOptions:
    #: Unknown fields go into the item's metadata instead of failing the record.
    keep_extra: bool = False
    #: Leave bad records out (listed in the report) instead of failing the whole import.
    skip_invalid: bool = False
    #: Force a record format by name (see :data:`preflab.io.formats.FORMATS`); default: detect.
    format: str | None = None
    #: Source of imported judgments whose record does not say: ``human``, ``ai`` or ``ai_assisted``.
    default_source: str = "human"
    #: Problems listed in the :class:`ImportFailed` message (all are counted).
    max_errors: int = 50
    #: Longest JSONL line accepted.
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    #: ``labeler`` names that are models (stored as ``source: ai`` unless the record states its
    #: source), matched exactly; :func:`import_files` adds the project's ``policy.ai_labelers``.
    ai_labelers: tuple[str, ...] = ()
    #: Shell-style globs of model ``labeler`` names (case-insensitive, whole name);
    #: :func:`import_files` adds the project's ``policy.ai_labeler_patterns``.
    ai_labeler_patterns: tuple[str, ...] = ()
    #: What an imported trajectory's ``prm_steps`` verdicts become: ``label`` (a steps judgment)
    #: or ``suggestion`` (kept in the item's record only, for raters to check);
    #: :func:`import_files` takes the project's ``policy.imported_step_verdicts`` setting.
    step_verdicts: str = "label"


@dataclass
class Problem:
    file: str
    line: int | None
    field: str
    reason: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field}: {self.reason}"


@dataclass
class ImportReport:
    batch_pk: int | None
    files: list[str]
    formats: dict[str, int]
    items_added: int = 0
    items_existing: int = 0
    judgments_added: int = 0
    judgments_existing: int = 0
    skipped: list[Problem] = field(default_factory=list)
    already_imported: bool = False
    #: All skipped records (``skipped`` keeps the first MAX_SKIPPED).
    skipped_count: int = 0
    #: Judgments of a kind the project does not collect that their format marks optional
    #: (:attr:`RecordFormat.optional_kinds`), left out.
    judgments_not_collected: int = 0
    #: What imported ``prm_steps`` verdicts became (``label`` or ``suggestion``; recorded in the
    #: import batch's counts).
    step_verdicts: str = "label"
    #: Labelers the import stored as AI because the admin declared them models, each with the
    #: rule (``--ai-labeler`` / ``policy.ai_labelers`` name, or which pattern) and its judgments
    #: (``ai``; ``as_stated``: records whose own ``source`` won): :func:`ai_labeler_summary`.
    ai_labelers: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Labelers whose names look like models' (``gemma``, ``claude.dupont``) that no rule
    #: declared models: imported as stated (people, unless the record says otherwise).
    model_like_people: list[str] = field(default_factory=list)


def labeler_lines(report: ImportReport) -> list[str]:
    """What the import made of its labelers' names, in words (the CLI and the web import say it).

    Always the number of labelers classified as AI and, for each, the rule; then the labelers
    whose names look like models' but that no rule declared (kept as people)."""
    if report.already_imported or not (report.judgments_added or report.ai_labelers):
        return []
    declared = report.ai_labelers
    if not declared:
        lines = [
            "0 labelers classified as AI (no --ai-labeler name, --ai-labeler-pattern or "
            "policy.ai_labelers / policy.ai_labeler_patterns rule matched a labeler)"
        ]
    else:
        parts = []
        for name, d in declared.items():
            n_ai = d["judgments"].get("ai", 0)
            stated = {s: n for s, n in d["judgments"].items() if s != "ai"}
            said = (
                "; records that stated their source kept it: "
                + ", ".join(f"{n} {s}" for s, n in stated.items())
                if stated
                else ""
            )
            parts.append(f"{name} ({d['rule']}; {n_ai} judgment(s) stored as AI{said})")
        lines = [
            f"{len(declared)} labeler(s) classified as AI, their labels stored as source 'ai': "
            + ", ".join(parts)
        ]
    if report.model_like_people:
        lines.append(
            f"{len(report.model_like_people)} labeler(s) with names like models' kept as the "
            f"records state (people unless a record says otherwise): "
            f"{', '.join(report.model_like_people)}; a name alone is no evidence: declare models "
            "with --ai-labeler NAME, --ai-labeler-pattern GLOB or policy.ai_labelers"
        )
    return lines


class ImportFailed(Exception):
    """The import changed nothing. ``problems``: the first ``max_errors``; ``total``: all of them."""

    def __init__(self, problems: list[Problem], total: int, max_errors: int = 50) -> None:
        self.problems = problems
        self.total = total
        shown = problems[:max_errors]
        lines = [str(p) for p in shown]
        if total > len(shown):
            lines.append(f"... and {total - len(shown)} more")
        hint = "nothing was imported; fix these records, or pass --skip-invalid to import the rest"
        super().__init__(
            f"{total} problem{'s' if total != 1 else ''} ({hint}):\n" + "\n".join(lines)
        )


@dataclass
class ValidationReport:
    files: list[str]
    formats: dict[str, int]
    records: int = 0
    items: int = 0
    judgments: int = 0
    problems: list[Problem] = field(default_factory=list)
    total_problems: int = 0

    @property
    def ok(self) -> bool:
        return self.total_problems == 0
