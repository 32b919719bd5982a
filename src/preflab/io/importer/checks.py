"""The checks of one record against what is known: the one rule set of ``import`` and ``validate``.

:func:`check_record` decides a record against a :class:`CheckState` (what the database answered
for the chunk, what earlier records accepted) and the project's :class:`ProjectRules`. The import
runs it against the database, chunk by chunk; ``validate`` against the files alone
(:data:`NO_PROJECT`: what only a project can tell, its kinds, rubrics and stored items, is not
checked), so both report a problem with the same ``field: reason``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...schema import CritiqueSpan, Rubric, unfit_item_reason
from ...schema.spans import span_category_problems, span_offset_problems
from ...store.rows import (
    ItemRows,
    JudgmentRows,
    PairRows,
    derived_candidate_keys,
    pair_key,
    rekeyed,
)
from ..formats import FORMATS
from .convert import Record


@dataclass(frozen=True)
class ProjectRules:
    """What the checks know of the project; ``None``: no project (``validate``), not checked."""

    name: str | None
    kinds: Collection[str] | None
    #: ``(rubric key, version or None)`` -> the project's rubric, or ``None`` if it has none.
    rubric: Callable[[str, int | None], Rubric | None] | None
    #: the project's kinds when its items go to raters (the server's routes): an item none of
    #: them can label is refused (:func:`preflab.schema.unfit_item_reason`); ``None``: not checked
    labelled_by: Collection[str] | None = None
    #: ``policy.span_categories`` (docs/critiques.md); ``None``: not checked
    span_categories: Sequence[str] | None = None


#: ``validate``: the files alone. Judgments of items outside the files may name items a project has.
NO_PROJECT = ProjectRules(name=None, kinds=None, rubric=None)


@dataclass(slots=True)
class CheckState:
    """What the checks of one chunk share: the database's answers and what the chunk accepted so far."""

    existing_items: dict[str, tuple[int, str]] = field(default_factory=dict)
    outside_candidates: dict[str, set[str]] = field(default_factory=dict)
    existing_hashes: set[str] = field(default_factory=set)
    #: (rater, idempotency key): a key is a rater's own
    existing_idem: set[tuple[str, str]] = field(default_factory=set)
    #: alias -> item key: the database's aliases named in this chunk, and the chunk's new ones
    aliases: dict[str, str] = field(default_factory=dict)
    #: content hash -> item key: the database's items this chunk may join, and the chunk's own
    by_content: dict[str, str] = field(default_factory=dict)
    #: item key -> (content hash, candidate keys) of the items seen in this chunk
    known: dict[str, tuple[str, Collection[str]]] = field(default_factory=dict)
    accepted_items: dict[str, ItemRows | PairRows] = field(default_factory=dict)
    new_judgments: list[JudgmentRows | PairRows] = field(default_factory=list)
    seen_hashes: set[str] = field(default_factory=set)
    seen_idem: set[tuple[str, str]] = field(default_factory=set)
    #: alias -> item key, to write with the chunk
    new_aliases: dict[str, str] = field(default_factory=dict)
    #: item key -> candidate key -> ``len(Candidate.as_text())`` of a stored item, read only for
    #: a judgment with critique spans (their offsets are checked against the answers); ``None``:
    #: no database (``validate``)
    stored_lengths: Callable[[str], Mapping[str, int]] | None = None


@dataclass(slots=True)
class Checked:
    """One record's verdict: its problems (then nothing of it was accepted), else its counts."""

    problems: list[tuple[str, str]] = field(default_factory=list)
    items_added: int = 0
    items_existing: int = 0
    judgments_added: int = 0
    judgments_existing: int = 0
    #: judgments of a kind the project does not collect that their format marks optional
    not_collected: int = 0


_PAIR_FIELD = {"pairwise": "shown_order", "ranking": "order"}


def joined_item(
    item: ItemRows,
    is_item: Callable[[str], bool],
    aliases: Callable[[str], str | None],
    by_content: Callable[[str], str | None],
    fmt: str | None,
) -> tuple[str, bool]:
    """The key the item of a record is stored under, and whether its own key is a new alias.

    An item is its content (:mod:`preflab.schema.identity`), also when a record names it: its own
    key if an item has it; else the item that key is an alias of; else the item with the same
    content hash (the record's key becomes an alias of it); else its own key (a new item). The
    one rule of :func:`import_files` and :func:`validate_files`.

    The items of a format of model samples (:attr:`RecordFormat.samples`: rollouts, trajectories,
    human_eval verdicts) keep their own id: each is one output with its outcome (a reward, a
    verifier's result) or a battle of two named models, which the content hash does not cover, so
    two samples with the same text but different outcomes (a flaky test) stay two instead of one
    losing its outcome, and the same texts from two model pairs two battles.
    """
    if is_item(item.key):
        return item.key, False
    target = aliases(item.key)
    if target is not None:
        return target, False
    if fmt is not None and FORMATS[fmt].samples:
        return item.key, False
    target = by_content(item.content_hash)
    if target is not None and target != item.key:
        return target, True
    return item.key, False


def different_content(key: str, target: str) -> str:
    named = repr(key) if key == target else f"{key!r} (another id of item {target!r})"
    return (
        f"item {named} already exists with different content; give the new version another id "
        "(or leave 'id' out to derive one from the content)"
    )


def _ids(candidates: Collection[str] | None) -> str:
    return f" ({', '.join(repr(c) for c in sorted(candidates))})" if candidates else ""


def same_pair_named(key: str, candidates: Collection[str] | None) -> str:
    """A record without candidate ids whose prompt and answers are an item whose candidates have
    their own ids: joining would rename the candidates inside its judgments, so it is refused."""
    return (
        f"the same prompt and answers are item {key!r}, whose candidates have their own "
        f"ids{_ids(candidates)}; one pair is one item, and this record cannot name them: write its "
        f'labels as judgments of item {key!r} ("item_id": {key!r} with those candidate ids), '
        "or import that item without candidate ids (leave out each candidate's 'id')"
    )


def same_pair_other_ids(other: str, candidates: Collection[str] | None) -> str:
    """An item whose prompt and answers are another item's, under other candidate ids."""
    return (
        f"the same prompt and answers are already item {other!r}, with other candidate "
        f"ids{_ids(candidates)}; one pair is one item: give these candidates the ids item "
        f"{other!r} has, so the record joins it, or write its labels as judgments of item {other!r}"
    )


def check_record(rec: Record, state: CheckState, rules: ProjectRules) -> Checked:
    """Check one record against ``state`` and ``rules``; accept it into ``state`` when it has no
    problems (its new items, aliases and judgments), else leave ``state`` as it was."""
    if rec.problems:
        return Checked(problems=list(rec.problems))
    items = _RecordItems(state)
    checked = Checked()
    for item in rec.items:
        items.check(item, rec.format, checked)
    if checked.problems:  # the judgments of a refused item: nothing to check them against
        return checked
    judgments = _check_judgments(rec, state, rules, items, checked)
    if rules.labelled_by is not None and not checked.problems:
        # an item no kind of the project can label, where items go to raters (the server's
        # import routes; after the judgments, whose kind the project does not collect is the
        # more telling problem). The CLI's import takes them: a verl task with one reference
        # answer, or a three-answer item `to-label` splits into pairs, are not for raters.
        for item in items.new:
            reason = unfit_item_reason(
                list(rules.labelled_by), item.key, len(item.candidates), item.values.get("meta")
            )
            if reason is not None:
                checked.problems.append(("candidates", reason))
    if checked.problems:
        return checked
    for item in items.new:
        state.accepted_items[item.key] = item
    state.known.update(items.known)
    state.by_content.update(items.by_content)
    state.aliases.update(items.new_aliases)
    state.new_aliases.update(items.new_aliases)
    state.new_judgments.extend(judgments)
    state.seen_hashes.update(j.content_hash for j in judgments)
    state.seen_idem.update((j.rater_key, j.idempotency_key) for j in judgments if j.idempotency_key)
    checked.items_added = len(items.new)
    checked.judgments_added = len(judgments)
    return checked


class _RecordItems:
    """The items of one record as it is checked: where each is stored, which are new."""

    def __init__(self, state: CheckState) -> None:
        self.state = state
        self.new: list[ItemRows] = []
        self.known: dict[str, tuple[str, Collection[str]]] = {}
        #: this record's ids of items stored under another key
        self.aliases: dict[str, str] = {}
        self.new_aliases: dict[str, str] = {}
        self.by_content: dict[str, str] = {}

    def is_item(self, key: str) -> bool:
        return key in self.state.known or key in self.known or key in self.state.existing_items

    def alias(self, key: str) -> str | None:
        return self.aliases.get(key) or self.state.aliases.get(key)

    def with_content(self, digest: str) -> str | None:
        return self.by_content.get(digest) or self.state.by_content.get(digest)

    def entry(self, key: str) -> tuple[str, Collection[str]] | None:
        return self.known.get(key) or self.state.known.get(key)

    def candidate_ids(self, key: str) -> Collection[str] | None:
        """The candidate ids of item ``key`` when this import knows them (else ``None``)."""
        entry = self.entry(key)
        if entry is not None and key not in self.state.existing_items:
            return entry[1]
        return self.state.outside_candidates.get(key)

    def pair_problem(self, item: ItemRows, key: str) -> tuple[str, str] | None:
        """The same pair in the shape without candidate ids (docs/item-identity.md): an item with
        its own candidate ids keeps that shape's key as an alias, and is refused when that key is
        an item of the other shape; an item with derived candidate ids under an id of its own is
        refused when that key is an alias of an item with its own candidate ids."""
        pair, own_ids = pair_key(item)
        if pair is None:
            return None
        other = pair if self.is_item(pair) else self.alias(pair)
        if other is None or other == key:
            if other is None and own_ids:
                self.aliases[pair] = key
                self.new_aliases[pair] = key
            return None
        ids = self.candidate_ids(other)
        # the other item has derived ids: it is the shape without ids (also when an item of it is
        # stored under an id of its own); ids unknown: an item stored under that key is that shape
        other_derived = (
            set(ids) == derived_candidate_keys(item) if ids is not None else other == pair
        )
        if own_ids and other_derived:
            return ("candidates", same_pair_other_ids(other, ids))
        if not own_ids and not other_derived:
            return ("id", same_pair_named(other, ids))
        return None  # two items with ids of their own: as before, two items

    def check(self, item: ItemRows, fmt: str | None, checked: Checked) -> None:
        key, new_alias = joined_item(item, self.is_item, self.alias, self.with_content, fmt)
        if key != item.key:
            self.aliases[item.key] = key
            if new_alias:
                self.new_aliases[item.key] = key
        prior = self.entry(key)
        existing = self.state.existing_items.get(key)
        if prior is None and existing is not None:
            prior = (existing[1], set(item.candidate_keys))
            self.known[key] = prior
        if prior is not None and prior[0] != item.content_hash:
            if key != item.key and pair_key(item) == (None, False):
                # a record without ids met the pair key of an item with its own candidate ids
                reason = same_pair_named(key, self.candidate_ids(key))
            else:
                reason = different_content(item.key, key)
            checked.problems.append(("id", reason))
            return
        if not (fmt is not None and FORMATS[fmt].keeps_pair_ids):
            problem = self.pair_problem(item, key)
            if problem is not None:
                checked.problems.append(problem)
                return
        if prior is not None:
            checked.items_existing += 1
            return
        self.new.append(item)
        self.known[key] = (item.content_hash, set(item.candidate_keys))
        self.by_content[item.content_hash] = key


def _check_judgments(
    rec: Record, state: CheckState, rules: ProjectRules, items: _RecordItems, checked: Checked
) -> list[JudgmentRows]:
    """The record's new judgments; problems and counts go to ``checked``."""
    accepted: list[JudgmentRows] = []
    hashes: set[str] = set()
    for j in rec.judgments:
        if rules.kinds is not None and j.kind not in rules.kinds:
            if rec.format and j.kind in FORMATS[rec.format].optional_kinds:
                checked.not_collected += 1
                continue
            checked.problems.append(
                (
                    "kind",
                    f"project {rules.name!r} collects {sorted(rules.kinds)}, not {j.kind!r}; "
                    "add the kind to the project or leave these judgments out",
                )
            )
            continue
        target = items.alias(j.item_key)
        if target is not None:
            j = rekeyed(j, target)
        entry = items.entry(j.item_key)
        candidates = entry[1] if entry else state.outside_candidates.get(j.item_key)
        problem = _judgment_problem(j, candidates, rules)
        if problem is not None:
            checked.problems.append(problem)
            continue
        spans = j.values["body"].get("spans")
        if spans:
            parsed = [CritiqueSpan.model_validate(s) for s in spans]
            span_problems = span_offset_problems(parsed, _answer_lengths(j.item_key, items, state))
            if rules.span_categories is not None:
                span_problems += span_category_problems(parsed, rules.span_categories)
            if span_problems:
                checked.problems.extend(span_problems)
                continue
        if j.rubric is not None and rules.rubric is not None:
            rubric_problems = _rubric_problems(j, rules)
            if rubric_problems:
                checked.problems.extend(rubric_problems)
                continue
        if (
            j.content_hash in state.existing_hashes
            or j.content_hash in state.seen_hashes
            or j.content_hash in hashes
            or (
                j.idempotency_key
                and (
                    (j.rater_key, j.idempotency_key) in state.existing_idem
                    or (j.rater_key, j.idempotency_key) in state.seen_idem
                )
            )
        ):
            checked.judgments_existing += 1
            continue
        hashes.add(j.content_hash)
        accepted.append(j)
    return accepted


def _judgment_problem(
    j: JudgmentRows, candidates: Collection[str] | None, rules: ProjectRules
) -> tuple[str, str] | None:
    """The judgment's item and candidates must be known (without a project, an item outside the
    files may be in the project: not checked)."""
    if candidates is None:
        if rules.name is None:
            return None
        return (
            "item_id",
            f"no item {j.item_key!r} in project {rules.name!r} or earlier in this "
            "import; import the item before its judgments",
        )
    unknown = [c for c in j.candidate_ids if c not in candidates]
    if unknown:
        return (
            _PAIR_FIELD.get(j.kind, "candidate_id"),
            f"{unknown[0]!r} is not a candidate of item {j.item_key!r} (it has {', '.join(sorted(candidates))})",
        )
    return None


def _rubric_problems(j: JudgmentRows, rules: ProjectRules) -> list[tuple[str, str]]:
    assert j.rubric is not None and rules.rubric is not None
    rkey, rversion, scores, vetoes = j.rubric
    rubric = rules.rubric(rkey, rversion)
    if rubric is None:
        return [
            (
                "provenance.rubric_id",
                f"project {rules.name!r} has no rubric {rkey!r}"
                + (f" version {rversion}" if rversion else "")
                + "; add the rubric first",
            )
        ]
    return [
        (fld, reason)
        for fld, _, reason in (p.partition(": ") for p in rubric.check_scores(scores, vetoes))
    ]


def answer_length(candidate: Mapping[str, Any]) -> int:
    """``len(Candidate.as_text())`` from a candidate's column values (``text``, else the
    assistant turns of ``messages`` joined by a blank line): what span offsets index."""
    if candidate.get("text") is not None:
        return len(candidate["text"])
    turns = [m for m in candidate.get("messages") or [] if m.get("role") == "assistant"]
    return len("\n\n".join(str(m.get("content") or "") for m in turns))


def _answer_lengths(key: str, items: _RecordItems, state: CheckState) -> Mapping[str, int]:
    """The answers' lengths of item ``key``: one of this record or chunk, else the stored one
    (an item not found: nothing, its spans are checked by the candidate rule)."""
    for rows in items.new:
        if rows.key == key:
            return {c["candidate_key"]: answer_length(c) for c in rows.candidates}
    accepted = state.accepted_items.get(key)
    if isinstance(accepted, ItemRows):
        return {c["candidate_key"]: answer_length(c) for c in accepted.candidates}
    if accepted is not None:  # a plain pair: two texts
        return {c: len(t) for c, t in zip(accepted.candidate_keys, accepted.texts)}
    if state.stored_lengths is not None and key in state.existing_items:
        return state.stored_lengths(key)
    return {}
