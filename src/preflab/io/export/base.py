"""What every exporter shares: options, the resolved data it reads, the exporter interface.

An exporter is a small object with a ``name``, a ``description``, the resolved data it
``needs`` and two methods: :meth:`Exporter.schema` (an explicit Arrow schema) and
:meth:`Exporter.batches` (columns, ``{name: list}``, a batch at a time). Writers
(:mod:`.writers`) turn batches into JSONL, Parquet or a Hugging Face ``datasets`` directory;
building columns rather than row dicts keeps the Parquet path close to raw pyarrow speed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, ClassVar, Literal, overload

import pyarrow as pa

from ...schema import (
    Candidate,
    DemonstrationJudgment,
    Item,
    JudgmentBase,
    Rubric,
    prompt_as_text,
)
from ...schema.export_options import ExportOptions
from ...schema.policy import Policy, PolicyError, stored_policy
from .provenance import LabelIndex, provenance_columns, provenance_fields
from .resolve import (
    DropLog,
    LengthFn,
    ResolvedPair,
    ResolvedSteps,
    ResolvedUnary,
    word_length,
)

FILE_FORMATS = ("jsonl", "parquet", "hf")
BATCH_ROWS = 65_536

#: Columns of one batch: Python lists, or Arrow arrays of the schema's type.
Batch = dict[str, "list[Any] | pa.Array"]

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
MESSAGES = pa.list_(MESSAGE)


class ExportError(Exception):
    """An export that cannot be done as asked; the message says what to do instead."""


def project_policy(project_settings: dict[str, Any] | None) -> Policy:
    """A project's policy from its stored settings, typed (:func:`stored_policy`); a stored
    value the policy refuses is an :class:`ExportError` naming the setting."""
    try:
        return stored_policy(project_settings)
    except PolicyError as exc:
        raise ExportError(str(exc)) from None


@dataclass
class ExportData:
    """Resolved labels of one project, ready for an exporter (built by :mod:`.pipeline`)."""

    project: str
    items: dict[str, Item]
    conversational: bool = False
    pairs: list[ResolvedPair] = field(default_factory=list)
    unary: list[ResolvedUnary] = field(default_factory=list)
    steps: list[ResolvedSteps] = field(default_factory=list)
    #: accepted demonstrations (item order)
    demonstrations: list[DemonstrationJudgment] = field(default_factory=list)
    #: every judgment passing the source/exclusion filters, with its rater hash (raw export)
    judgments: list[JudgmentBase] = field(default_factory=list)
    rubrics: dict[tuple[str, int], Rubric] = field(default_factory=dict)
    drops: DropLog = field(default_factory=DropLog)
    length_fn: LengthFn = word_length
    #: every label kept by the source/exclusion/telemetry filters with its batch pk (agreement gate)
    labels_with_batch: list[tuple[JudgmentBase, int | None]] = field(default_factory=list)
    #: the project's policy (:func:`preflab.schema.policy.stored_policy` of its settings)
    policy: Policy = field(default_factory=Policy)
    #: the length-parity gate per cohort (:mod:`.length_gate`); None when the gate did not run
    length_cohorts: dict[str, Any] | None = None
    #: the labels kept, by item and rater (``source`` and provenance columns, :mod:`.provenance`)
    label_index: LabelIndex = field(default_factory=LabelIndex)
    #: the verbosity penalty applied to margins (:mod:`.length_gate`)
    verbosity: dict[str, Any] | None = None
    #: flagged labels the telemetry gate kept (:class:`.telemetry_gate.TelemetryCounts`)
    telemetry: Any = None
    #: ``(pairs with a known strength, pairs)`` of the whole export, when ``pairs`` holds only
    #: some of them (a streamed export's chunk, or its summary for the manifest)
    pair_tally: tuple[int, int] | None = None
    #: the manifest's ``format_notes`` when already summed over a streamed export's chunks
    #: (:meth:`Exporter.note_counts`); None: :meth:`Exporter.notes` of this data
    format_notes: dict[str, Any] | None = None
    #: the length gate's measures, ``{id(pair): (pair, chosen length, rejected length)}``, for
    #: the verbosity penalty that follows it on the same pairs (:func:`.length_gate.pair_lengths`)
    measured: dict[int, tuple[Any, int, int]] | None = field(
        default=None, repr=False, compare=False
    )


class Exporter:
    """Base of every export target. Subclasses set the class attributes and ``batches``."""

    name: ClassVar[str]
    description: ClassVar[str]
    #: resolved data the pipeline must build: "pairs", "unary", "steps", "demonstrations", "judgments"
    needs: ClassVar[frozenset[str]] = frozenset()
    #: where the format is documented (cited in the dataset card)
    reference: ClassVar[str] = ""
    #: format-specific options accepted in ``ExportOptions.params``, with their defaults
    params: ClassVar[dict[str, Any]] = {}
    #: training data: gold items stay out unless ``include_gold`` (the raw export is not)
    training: ClassVar[bool] = True
    #: Hugging Face task categories for the dataset card
    task_categories: ClassVar[tuple[str, ...]] = ("text-generation",)
    #: A streamed export's Parquet file is re-cut into row groups of exactly
    #: :data:`BATCH_ROWS` rows, as :meth:`batches` cuts a whole export; False when :meth:`rows`
    #: already cuts the stream as :meth:`batches` cuts the whole (rollouts: at item boundaries)
    recut: ClassVar[bool] = True
    #: The rows need nothing of the whole export (a fixed schema; no pairs, so no length gate,
    #: no margin or ``source`` column): a streamed export writes them in the pass that counts
    #: the manifest's figures, reading the project once instead of twice
    one_pass: ClassVar[bool] = False
    #: A two-pass streamed export builds the rows in pass 1 (:meth:`chunk_rows`, kept on disk
    #: by :mod:`.row_cache`) and pass 2 writes them without reading the project again
    rows_in_pass_1: ClassVar[bool] = False

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        raise NotImplementedError

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        raise NotImplementedError

    def rows(self, chunks: Iterable[ExportData], options: ExportOptions) -> Iterator[Batch]:
        """The batches of an export handed over as consecutive chunks of items (a streamed
        export, :mod:`.stream`): each chunk's :meth:`batches`. A format whose rows depend on
        earlier chunks (a running row index, repeats left out) overrides it, and its
        :meth:`batches` is ``rows([data])``."""
        for data in chunks:
            yield from self.batches(data, options)

    def chunk_rows(self, data: ExportData, options: ExportOptions) -> Iterator[Batch] | None:
        """A streamed export's chunk rows built in pass 1 (:mod:`.row_cache`), or None (the
        default: pass 2 reads the project again). Only for a format whose :meth:`rows` are each
        chunk's :meth:`batches`, that drops nothing while writing, has no
        :meth:`note_counts`, and whose :meth:`side_files` of a chunk need nothing of the whole
        export: the batches carry every column the whole export's :meth:`schema` may name,
        of the types it would give them with this chunk's ``conversational`` and label
        sources; pass 2 keeps the schema's columns, or reads the project again when a chunk's
        batches lack one or differ in type."""
        return None

    def notes(self, data: ExportData, options: ExportOptions) -> dict[str, Any]:
        """Format-specific facts for the manifest's ``format_notes`` (e.g. which rows carry a
        margin, and ``warnings`` the CLI prints)."""
        return {}

    def note_counts(self, data: ExportData, options: ExportOptions) -> dict[str, Any] | None:
        """One chunk's share of :meth:`notes` in a streamed export, summed over the chunks
        (numbers added, mappings merged, lists joined, anything else equal in every chunk) and
        turned into the notes by :meth:`notes_from_counts`. None: the notes need only the
        whole export's summary (counts, sources), and :meth:`notes` reads it."""
        return None

    def notes_from_counts(self, counts: dict[str, Any], options: ExportOptions) -> dict[str, Any]:
        """The notes from :meth:`note_counts` summed over every chunk."""
        return counts

    def side_files(self, data: ExportData, options: ExportOptions) -> dict[str, bytes]:
        """Extra files written beside the data (name -> content), hashed in the manifest."""
        return {}

    def usage(self, manifest: dict[str, Any]) -> list[str]:
        """Dataset-card lines: how to train on this export with the consumer's current release."""
        return []

    def json_record(self, batch: Batch, names: list[str], i: int) -> dict[str, Any]:
        """One JSONL record of a batch (raw overrides this to nest the item)."""
        return {name: batch[name][i] for name in names}

    def param(self, options: ExportOptions, name: str) -> Any:
        return options.params.get(name, self.params[name])

    def check_params(self, options: ExportOptions) -> None:
        unknown = sorted(set(options.params) - set(self.params))
        if unknown:
            known = ", ".join(sorted(self.params)) or "none"
            raise ExportError(
                f"format {self.name!r} takes no option {unknown[0]!r} (options: {known})"
            )


# -- shared column helpers ------------------------------------------------------------------


class TextCache:
    """Prompt and candidate bodies per item, converted once (a pair shares its item's prompt)."""

    def __init__(self, items: dict[str, Item], conversational: bool) -> None:
        self.items = items
        self.conversational = conversational
        self._prompts: dict[str, Any] = {}
        self._cands: dict[tuple[str, str], Any] = {}

    def prompt(self, item_id: str) -> Any:
        value = self._prompts.get(item_id)
        if value is None:
            value = self._prompts[item_id] = prompt_value(
                self.items[item_id].prompt, self.conversational
            )
        return value

    def completion(self, item_id: str, candidate_id: str) -> Any:
        key = (item_id, candidate_id)
        value = self._cands.get(key)
        if value is None:
            cand = self.items[item_id].candidate(candidate_id)
            value = self._cands[key] = completion_value(cand, self.conversational)
        return value


def _messages(messages: Any) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


@overload
def prompt_value(prompt: Any, conversational: Literal[True]) -> list[dict[str, str]]: ...
@overload
def prompt_value(prompt: Any, conversational: Literal[False]) -> str: ...
@overload
def prompt_value(prompt: Any, conversational: bool) -> str | list[dict[str, str]]: ...
def prompt_value(prompt: Any, conversational: bool) -> str | list[dict[str, str]]:
    """A prompt as text (standard) or a list of ``{role, content}`` messages (conversational)."""
    if conversational:
        return (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else _messages(prompt)
        )
    return prompt_as_text(prompt)  # one rule: "Q" and [user: Q] are the same prompt, exported alike


def completion_value(
    candidate: Candidate | Any, conversational: bool
) -> str | list[dict[str, str]]:
    """An answer as text, or (conversational) its messages / one assistant message."""
    if not conversational:
        return candidate.as_text()
    if candidate.messages is not None:
        return _messages(candidate.messages)
    return [{"role": "assistant", "content": candidate.as_text()}]  # text: no messages


def text_type(conversational: bool) -> pa.DataType:
    return MESSAGES if conversational else pa.string()


def chunked(n: int, size: int = BATCH_ROWS) -> Iterator[range]:
    for start in range(0, n, size):
        yield range(start, min(n, start + size))


def row_provenance_fields(data: ExportData, options: ExportOptions) -> list[tuple[str, Any]]:
    """``source`` (mixed sources) and, with ``provenance_columns``, the provenance fields."""
    return provenance_fields(data.label_index, options.provenance_columns)


def pair_columns(
    data: ExportData, *, margin: bool, size: int = BATCH_ROWS, extra: Sequence[str] = ()
) -> Iterator[Batch]:
    """``prompt, chosen, rejected`` (+ ``margin``) columns of the resolved pairs, in batches.

    Columnar: one pass over the pairs turns them into integer indices into per-item prompt and
    candidate dictionaries (each text converted once); Arrow's ``take`` then builds each
    batch's columns in C++ instead of a Python object per cell.
    """
    conversational = data.conversational
    pairs = data.pairs
    item_ids = list(map(attrgetter("item_id"), pairs))
    item_index: dict[str, int] = {}
    candidate_index: dict[tuple[str, str], int] = {}
    prompts: list[Any] = []
    completions: list[Any] = []
    for item_id in dict.fromkeys(item_ids):  # first-seen order
        item = data.items[item_id]
        item_index[item_id] = len(prompts)
        prompts.append(prompt_value(item.prompt, conversational))
        for cand in item.candidates:
            candidate_index[(item_id, cand.key)] = len(completions)
            completions.append(completion_value(cand, conversational))
    # index lookups run in C (map over zip), not a Python loop per pair
    p_arr = pa.array(list(map(item_index.__getitem__, item_ids)), type=pa.int64())
    c_arr = pa.array(
        list(map(candidate_index.__getitem__, zip(item_ids, map(attrgetter("chosen_id"), pairs)))),
        type=pa.int64(),
    )
    r_arr = pa.array(
        list(
            map(candidate_index.__getitem__, zip(item_ids, map(attrgetter("rejected_id"), pairs)))
        ),
        type=pa.int64(),
    )
    # an unknown strength is a null margin, never a number (see PairMargins)
    margins = (
        pa.array(list(map(attrgetter("strength"), pairs)), type=pa.float64()) if margin else None
    )
    t = text_type(conversational)
    prompt_dict, completion_dict = pa.array(prompts, type=t), pa.array(completions, type=t)
    provenance = provenance_columns(
        pairs, lambda p: {p.chosen_id, p.rejected_id}, data.label_index, list(extra)
    )
    for rows in chunked(len(pairs), size):
        start, n = rows.start, len(rows)
        batch: Batch = {
            "prompt": prompt_dict.take(p_arr.slice(start, n)),
            "chosen": completion_dict.take(c_arr.slice(start, n)),
            "rejected": completion_dict.take(r_arr.slice(start, n)),
        }
        if margins is not None:
            batch["margin"] = margins.slice(start, n)
        for name, column in provenance.items():
            batch[name] = column.slice(start, n)
        yield batch
