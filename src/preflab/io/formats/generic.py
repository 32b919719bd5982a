"""Generic record shapes: items to label, existing comparisons (TRL and friends), trajectories,
and preflab's own item and judgment records.

| format | record | becomes |
|---|---|---|
| ``trajectory`` | ``{"schema_version": "RLHF-2026.11", "trajectory_id", "turns", ...}`` | item (prompt = turns before the first assistant turn; one candidate with the rest as ``messages``; the record verbatim in ``metadata.trajectory``) + a ``steps`` judgment from the ``prm_steps`` verdicts |
| ``judgment`` | ``{"kind": "pairwise", "item_id", "provenance", ...}`` (any kind) | a judgment of an item imported before or earlier in the same import |
| ``item`` | ``{"prompt", "candidates": [str or Candidate, ...], "id"?, "domains"?, "reference"?, "gold"?, "metadata"?}`` | an item to label |
| ``pair`` | ``{"prompt", "answer_a", "answer_b", "model_a"?, "model_b"?, ...}`` | an item with two candidates |
| ``comparison`` | ``{"prompt", "chosen", "rejected", "labeler"?, "source"?, "strength"?, "margin"?}``; TRL standard (strings) and conversational (message lists, also without ``prompt``: the shared prefix of ``chosen`` and ``rejected``) | an item + a pairwise judgment |
| ``unpaired`` | TRL ``{"prompt", "completion", "label": bool}`` | an item + a unary judgment |

Sources: a record's own ``source`` always wins. Without one, a ``labeler`` (or a judgment
record's ``provenance.rater_id``) the admin declared a
model (an exact name in ``--ai-labeler`` / ``policy.ai_labelers``, or a glob in
``--ai-labeler-pattern`` / ``policy.ai_labeler_patterns``; :func:`ai_labeler_rule`) is an AI
label, stored as ``source: ai`` and never as a human rater; any other name is a person, however
much it looks like a model's (the import report lists those, :func:`model_like`).

Choices where the source says nothing: a comparison without ``strength`` (or ``margin``) is
stored with strength unknown (``None``: exports write no margin for it); a TRL ``margin`` becomes the strength ``round(|margin|)`` clipped to 1..3; the
rater is ``labeler``, else ``--default-rater``, else a rater of the row's own
(:func:`anonymous_rater`: ``anonymous:`` + a hash of the row), so two unlabeled rows of the same
pair are two votes, not one rater's revision (the same row twice is the same vote, and importing a
file again adds nothing). The pair of a comparison is
stored in sorted candidate-id order (no order was shown to anyone), so position-bias audits on
imported comparisons measure nothing.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from pydantic import ValidationError

from ...schema import (
    JUDGMENT_KINDS,
    TRAJECTORY_SCHEMA_VERSION,
    Dimension,
    Item,
    PairwiseJudgment,
    Rubric,
    RubricJudgment,
    StepsJudgment,
    Trajectory,
    UnaryJudgment,
    parse_judgment,
)
from ...schema.common import content_hash
from ...schema.identity import normal_answer
from ...store.rows import PairRows, check_identifier, pair_rows, pairwise_rows, text_item_rows
from . import (
    Converted,
    ConvertOptions,
    RecordError,
    RecordFormat,
    check_unknown,
    from_validation_error,
    register,
    require,
)

#: a comparison that gives no strength: stored as unknown, never as a made-up number
UNKNOWN_STRENGTH = None
IDENTICAL = (
    "identical to 'chosen' (compared after normalisation: Unicode NFC, surrounding whitespace, "
    "one assistant message = its text); a comparison needs two different answers"
)
#: prefix of the rater of a row without ``labeler`` (:func:`anonymous_rater`)
ANONYMOUS = "anonymous:"
SOURCES = ("human", "ai", "ai_assisted")


def anonymous_rater(record: dict[str, Any]) -> str:
    """The rater of a row that names none (and no ``--default-rater``): a rater of its own,
    ``anonymous:`` + a hash of the row (every key but ``labeler``).

    Rows without a labeler are usually different people's (TRL and hh-rlhf data sets name
    nobody); one shared "anonymous" rater made every later row of a pair a *revision* of the
    earlier ones, so two unlabeled rows of one pair collapsed into one verdict (issue 28). A hash
    of the row, not its line, keeps the import idempotent: the same row again is the same rater
    and the same judgment. ``human_eval`` verdicts follow the same rule.
    """
    row = {k: v for k, v in record.items() if k != "labeler"}
    try:
        return content_hash(row, prefix=ANONYMOUS, length=16)
    except TypeError:  # a value JSON cannot hold (a Parquet binary column): its repr decides
        return content_hash(repr(sorted(row.items(), key=lambda kv: kv[0])), ANONYMOUS, 16)


def _identifier(value: Any, field: str) -> str:
    try:
        return check_identifier(value, field)
    except ValueError as exc:
        raise RecordError(field, str(exc).split(": ", 1)[1]) from None


def _rater(record: dict[str, Any], options: ConvertOptions, key: str = "labeler") -> str:
    value = record.get(key)
    if value is None:
        return options.default_rater or anonymous_rater(record)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return _identifier(value, key)


#: Names that *look like* model names (in lower case: exactly one of :data:`MODEL_LIKE_NAMES`
#: or starting with one of :data:`MODEL_LIKE_PREFIXES`). Never evidence on their own: people are
#: called ``gemma`` or ``claude.dupont``. The import report lists such labelers it kept as people,
#: so an admin can declare the ones that are models (:func:`model_like`).
MODEL_LIKE_NAMES = frozenset({"ai", "model", "llm", "gpt4", "gpt-4", "chatgpt"})
MODEL_LIKE_PREFIXES = (
    "model:",
    "ai:",
    "llm:",
    "gpt-",
    "gpt4",
    "chatgpt",
    "claude",
    "gemini",
    "palm-",
    "llama",
    "mistral",
    "mixtral",
    "qwen",
    "deepseek",
    "phi-",
    "gemma",
    "command-r",
    "o1-",
    "o3-",
    "o4-",
)


def model_like(labeler: str) -> bool:
    """Whether ``labeler`` looks like a model's name (a hint for the import report, never a rule)."""
    name = labeler.lower()
    return name in MODEL_LIKE_NAMES or name.startswith(MODEL_LIKE_PREFIXES)


def ai_labeler_rule(
    labeler: str, names: frozenset[str] = frozenset(), patterns: tuple[str, ...] = ()
) -> str | None:
    """The rule by which ``labeler`` is a model, or ``None``: ``name`` when it is one of ``names``
    exactly (``--ai-labeler``, ``policy.ai_labelers``), ``pattern:<glob>`` for the first of
    ``patterns`` (``--ai-labeler-pattern``, ``policy.ai_labeler_patterns``: shell-style globs,
    ``*`` ``?`` ``[...]``, matched against the whole name, case-insensitively) it matches.
    Nothing else makes a name a model: a built-in list of model-like names once classified the
    people ``gemma`` and ``claude.dupont`` as AI and dropped their labels."""
    if labeler in names:
        return "name"
    if patterns:
        lowered = labeler.lower()
        for pattern in patterns:
            if fnmatchcase(lowered, pattern.lower()):
                return f"pattern:{pattern}"
    return None


def is_ai_labeler(
    labeler: str, names: frozenset[str] = frozenset(), patterns: tuple[str, ...] = ()
) -> bool:
    """Whether the admin declared ``labeler`` a model (:func:`ai_labeler_rule`)."""
    return ai_labeler_rule(labeler, names, patterns) is not None


def labeler_source(rater: str, stated: str, options: ConvertOptions, said: bool) -> str:
    """The source of a judgment by ``rater``. ``said``: the record stated ``source`` itself, and
    a stated source always wins (``"source": "human"`` stays human whatever the name). Otherwise
    ``ai`` when the admin declared the rater a model (:func:`ai_labeler_rule`), else ``stated``
    (the import's default source)."""
    if said or stated == "ai":
        return stated
    if is_ai_labeler(rater, options.ai_labelers, options.ai_labeler_patterns):
        return "ai"
    return stated


def _source(record: dict[str, Any], options: ConvertOptions, rater: str | None = None) -> str:
    source = record.get("source", options.default_source)
    if source not in SOURCES:
        raise RecordError("source", f"expected one of {', '.join(SOURCES)}, got {source!r}")
    if rater is not None:
        return labeler_source(rater, source, options, "source" in record)
    return source


def _metadata(record: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    meta = record.get("metadata") or {}
    if not isinstance(meta, dict):
        raise RecordError("metadata", f"expected an object, got {type(meta).__name__}")
    return {**meta, **extra} if extra else meta


def _item(data: dict[str, Any]) -> Item:
    try:
        return Item.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


# -- trajectories ------------------------------------------------------------------------

TRAJECTORY_RATER = "trajectory:annotator"


#: The RLHF-2026.11 ``rubric`` block as a preflab rubric. ``verbosity_penalty`` is a score in
#: [-1, 0] the annotator gave; it has weight 0 so :meth:`Rubric.reward` is the mean of the two
#: quality dimensions and a trainer subtracts the penalty itself, as the record states it.
TRAJECTORY_RUBRIC = Rubric(
    id="rlhf-2026.11-trajectory",
    version=1,
    title="RLHF-2026.11 trajectory rubric",
    description="The rubric block of RLHF-2026.11 agent trajectories, scored by the trajectory's annotator.",
    dimensions=[
        Dimension(
            name="reasoning_validity",
            scale="interval",
            min=0,
            max=1,
            description="the reasoning steps are sound, 0-1",
        ),
        Dimension(
            name="constraint_obedience",
            scale="interval",
            min=0,
            max=1,
            description="the task's constraints are obeyed, 0-1",
        ),
        Dimension(
            name="verbosity_penalty",
            scale="interval",
            min=-1,
            max=0,
            weight=0,
            description="penalty for needless length, -1-0 (0 = none)",
        ),
    ],
)


def _trajectory_provenance(traj: Trajectory, options: ConvertOptions) -> dict[str, Any]:
    """Who labelled a trajectory: its telemetry's ``annotator_hash`` (kept as given)."""
    telemetry = traj.telemetry
    rater = (
        (telemetry.annotator_hash if telemetry else None)
        or options.default_rater
        or TRAJECTORY_RATER
    )
    prov: dict[str, Any] = {"rater_id": rater, "source": options.default_source}
    if telemetry is not None:
        summary = {
            "iki_cv": telemetry.iki_cv,
            "revision_ratio": telemetry.revision_ratio,
            "untrusted_paste_chars": telemetry.untrusted_paste_chars,
        }
        summary = {k: v for k, v in summary.items() if v is not None}
        if summary:
            prov["telemetry"] = summary
    return prov


def _trajectory_steps(item_id: str, traj: Trajectory, prov: dict[str, Any]) -> StepsJudgment | None:
    """The ``prm_steps`` verdicts as a steps judgment (labels stop at the first error), or
    ``None`` when the steps are not labelled up to an error or to the end."""
    steps = [s for _, turn_steps in traj.step_labels() for s in turn_steps]
    verdicts = []
    for s in steps:
        if s.verdict is None:
            break
        verdicts.append(s.verdict)
        if s.verdict == -1:  # labels stop at the first error
            break
    if not (steps and verdicts and (verdicts[-1] == -1 or len(verdicts) == len(steps))):
        return None
    try:
        return StepsJudgment(
            item_id=item_id,
            candidate_id="trajectory",
            steps=[s.text for s in steps],
            verdicts=verdicts,
            provenance=prov,
        )
    except ValidationError as exc:
        raise from_validation_error(exc, "prm_steps") from None


def _trajectory_rubric(
    item_id: str, scores: dict[str, float], prov: dict[str, Any]
) -> RubricJudgment:
    """The ``rubric`` block as rubric scores under :data:`TRAJECTORY_RUBRIC` (checked against
    it by the importer, like every rubric judgment)."""
    rubric_prov = {
        **prov,
        "rubric_id": TRAJECTORY_RUBRIC.id,
        "rubric_version": TRAJECTORY_RUBRIC.version,
    }
    try:
        return RubricJudgment(
            item_id=item_id, candidate_id="trajectory", scores=scores, provenance=rubric_prov
        )
    except ValidationError as exc:
        raise from_validation_error(exc, "rubric") from None


def _trajectory_detect(record: dict[str, Any]) -> bool:
    return record.get("schema_version") == TRAJECTORY_SCHEMA_VERSION or (
        "trajectory_id" in record and "turns" in record
    )


def _trajectory_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    try:
        traj = Trajectory.model_validate(record)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    prompt = traj.prompt_messages()
    if not prompt:
        raise RecordError(
            "turns", "no user turn before the first assistant turn: nothing to use as the prompt"
        )
    messages = []
    for turn in traj.turns[len(prompt) :]:
        content = turn.content
        if content is None and turn.prm_steps:
            content = "\n\n".join(s.text for s in turn.prm_steps)
        message: dict[str, Any] = {"role": turn.role, "content": content or ""}
        if turn.tool_call is not None:
            message["tool_call"] = turn.tool_call.model_dump(mode="json", exclude_unset=True)
        messages.append(message)
    if not messages:
        raise RecordError("turns", "no assistant turn: a trajectory needs at least one")
    item = _item(
        {
            "id": traj.trajectory_id,
            "prompt": prompt,
            "candidates": [{"id": "trajectory", "messages": messages}],
            "metadata": {"trajectory": record},
        }
    )
    out = Converted([item], [])
    prov = _trajectory_provenance(traj, options)
    # as a suggestion the verdicts stay in metadata.trajectory only: no label fills the item
    steps = _trajectory_steps(item.key, traj, prov) if options.step_verdicts == "label" else None
    if steps is not None:
        out.judgments.append(steps)
    if traj.rubric:
        out.judgments.append(_trajectory_rubric(item.key, traj.rubric, prov))
    return out


TRAJECTORY = register(
    RecordFormat(
        "trajectory",
        f"trajectory {TRAJECTORY_SCHEMA_VERSION}: trajectory_id, turns, prm_steps",
        _trajectory_detect,
        _trajectory_convert,
        rubrics=(TRAJECTORY_RUBRIC,),
        samples=True,
        # The record is kept whole in the item's metadata; the rubric scores are a view of it
        # for agreement and exports, so a project that collects no rubric still takes the record.
        optional_kinds=frozenset({"rubric"}),
    )
)

# -- preflab judgments ---------------------------------------------------------------------


def _judgment_detect(record: dict[str, Any]) -> bool:
    return record.get("kind") in JUDGMENT_KINDS and "item_id" in record


def _judgment_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    prov = record.get("provenance")
    if isinstance(prov, dict) and "source" not in prov:
        # a rater the admin declared a model is one here too (issue 28): the same name was AI in
        # TRL rows and a person in judgment records, one rater with two sources
        rater = prov.get("rater_id")
        source = options.default_source
        if isinstance(rater, str):
            source = labeler_source(rater, source, options, said=False)
        record = {**record, "provenance": {**prov, "source": source}}
    try:
        return Converted([], [parse_judgment(record)])
    except ValidationError as exc:
        err = from_validation_error(exc)
        if err.reason.startswith("unknown field") and options.keep_extra:
            err = RecordError(
                err.field,
                err.reason + "; judgments have no metadata, so --keep-extra cannot keep it",
            )
        raise err from None


# The raw export (preflab.io.export.raw) writes a judgment with its item under "item"; reading
# that shape back makes a raw export re-importable as written. Registered before "judgment",
# whose shape it extends.


def _raw_export_detect(record: dict[str, Any]) -> bool:
    return _judgment_detect(record) and isinstance(record.get("item"), dict)


def _raw_export_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    judgment = {k: v for k, v in record.items() if k != "item"}
    try:
        item = _item(record["item"])
    except RecordError as err:
        raise RecordError(
            f"item.{err.field}" if err.field != "(record)" else "item", err.reason
        ) from None
    if item.id != judgment["item_id"]:
        raise RecordError(
            "item.id", f"{item.id!r} is not the judgment's item_id {judgment['item_id']!r}"
        )
    return Converted([item], _judgment_convert(judgment, options).judgments)


RAW_EXPORT = register(
    RecordFormat(
        "raw-export",
        "preflab raw export: a judgment with its 'item'",
        _raw_export_detect,
        _raw_export_convert,
    )
)

JUDGMENT = register(
    RecordFormat(
        "judgment",
        "preflab judgment: kind, item_id, provenance, ...",
        _judgment_detect,
        _judgment_convert,
    )
)

# -- items to label ------------------------------------------------------------------------

ITEM_KEYS = {"id", "prompt", "candidates", "domains", "reference", "gold", "metadata"}


def _item_detect(record: dict[str, Any]) -> bool:
    return "prompt" in record and "candidates" in record


def _item_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    extra = check_unknown(record, ITEM_KEYS, options)
    candidates = require(record, "candidates", list)
    data = {k: v for k, v in record.items() if k in ITEM_KEYS}
    data["candidates"] = [{"text": c} if isinstance(c, str) else c for c in candidates]
    data["metadata"] = _metadata(record, extra)
    return Converted([_item(data)], [])


ITEM = register(
    RecordFormat(
        "item",
        "items to label: prompt, candidates (strings or objects), id?, domains?, gold?",
        _item_detect,
        _item_convert,
    )
)

PAIR_KEYS = {
    "id",
    "prompt",
    "answer_a",
    "answer_b",
    "model_a",
    "model_b",
    "domains",
    "reference",
    "gold",
    "metadata",
}


def _pair_detect(record: dict[str, Any]) -> bool:
    return "prompt" in record and "answer_a" in record and "answer_b" in record


def _pair_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    extra = check_unknown(record, PAIR_KEYS, options)
    candidates = []
    for side in ("a", "b"):
        answer = require(record, f"answer_{side}", (str, list))
        body = {"text": answer} if isinstance(answer, str) else {"messages": answer}
        candidates.append({**body, "model": record.get(f"model_{side}")})
    data = {
        k: v
        for k, v in record.items()
        if k in PAIR_KEYS and not k.startswith(("answer_", "model_"))
    }
    data["candidates"] = candidates
    data["metadata"] = _metadata(record, extra)
    return Converted([_item(data)], [])


PAIR = register(
    RecordFormat("pair", "a pair to label: prompt, answer_a, answer_b", _pair_detect, _pair_convert)
)

# -- existing comparisons --------------------------------------------------------------------

COMPARISON_KEYS = {
    "id",
    "prompt",
    "chosen",
    "rejected",
    "labeler",
    "source",
    "strength",
    "margin",
    "rationale",
    "domains",
    "metadata",
}
#: Keys of the plain shape handled by :func:`comparison_pair`.
FAST_COMPARISON_KEYS = frozenset(
    {"prompt", "chosen", "rejected", "labeler", "source", "strength", "margin"}
)
PLAIN_COMPARISON_KEYS = frozenset({"prompt", "chosen", "rejected", "labeler", "source"})


def _comparison_detect(record: dict[str, Any]) -> bool:
    return (
        "chosen" in record
        and "rejected" in record
        and ("prompt" in record or isinstance(record["chosen"], list))
    )


def _strength(record: dict[str, Any]) -> int | None:
    if record.get("strength") is not None:
        strength = require(record, "strength", int)
        if not 1 <= strength <= 3:
            raise RecordError(
                "strength",
                f"expected 1 (slightly better), 2 (better) or 3 (much better), got {strength}",
            )
        return strength
    if record.get("margin") is not None:
        margin = require(record, "margin", (int, float))
        return min(3, max(1, round(abs(margin))))
    return UNKNOWN_STRENGTH


def _shared_prefix(chosen: list[Any], rejected: list[Any]) -> int:
    n = 0
    while n < min(len(chosen), len(rejected)) and chosen[n] == rejected[n]:
        n += 1
    return n


def comparison_pair(record: dict[str, Any], options: ConvertOptions) -> PairRows | None:
    """The rows of a plain-text comparison (the commonest record of a bulk import), or ``None``.

    ``None`` when the record is not of the plain shape (string prompt, chosen and rejected that
    differ; no keys beyond :data:`FAST_COMPARISON_KEYS`): :func:`_comparison_convert` then takes
    the general route. Raises :class:`RecordError` as the general route does (same field, reason
    and order of checks) for a bad labeler, source, strength or margin. No record of this shape is recognised by a format registered
    before ``comparison`` (a test holds that), so the importer may call this before detection.
    """
    prompt, chosen, rejected = record.get("prompt"), record.get("chosen"), record.get("rejected")
    if not (
        type(prompt) is str
        and type(chosen) is str
        and type(rejected) is str
        and record.keys() <= FAST_COMPARISON_KEYS
        and chosen != rejected
    ):
        return None
    labeler = record.get("labeler")
    if type(labeler) is str and 0 < len(labeler) <= 200 and labeler == labeler.strip():
        rater = labeler
    else:
        rater = _rater(record, options)
    source = record.get("source", options.default_source)
    if source not in SOURCES:
        source = _source(record, options)  # raises the general route's error
    if source != "ai" and "source" not in record:
        source = labeler_source(rater, source, options, said=False)
    strength = UNKNOWN_STRENGTH if record.keys() <= PLAIN_COMPARISON_KEYS else _strength(record)
    # store.rows.pair_rows builds exactly what text_item_rows + pairwise_rows (and so the models) would.
    try:
        return pair_rows(prompt, chosen, rejected, rater, strength, source)
    except ValueError:
        return None  # the same answer twice after normalisation: the general route says so


def _comparison_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    pair = comparison_pair(record, options)
    if pair is not None:
        return Converted([pair.item_rows()], [pair.judgment_rows()])
    return _comparison_convert_general(record, options)


def _comparison_convert_general(record: dict[str, Any], options: ConvertOptions) -> Converted:
    extra = check_unknown(record, COMPARISON_KEYS, options)
    chosen, rejected = record.get("chosen"), record.get("rejected")
    prompt = record.get("prompt")
    rater = _rater(record, options)
    source = _source(record, options, rater)
    strength = _strength(record)
    rationale = record.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        raise RecordError("rationale", f"expected a string, got {type(rationale).__name__}")
    item_id = None if record.get("id") is None else _identifier(record["id"], "id")
    meta = _metadata(record, extra)

    if (
        isinstance(prompt, str)
        and isinstance(chosen, str)
        and isinstance(rejected, str)
        and not record.get("domains")
    ):
        # Fast path: plain text, no pydantic (store.rows builds exactly what the models would).
        if normal_answer(chosen) == normal_answer(rejected):
            raise RecordError("rejected", IDENTICAL)
        try:
            rows = text_item_rows(
                prompt, [(None, chosen, None), (None, rejected, None)], meta, item_id
            )
            ids = rows.candidate_keys
            shown = (ids[0], ids[1]) if ids[0] < ids[1] else (ids[1], ids[0])
            judgment_rows = pairwise_rows(
                rows.key,
                shown,
                "a" if shown[0] == ids[0] else "b",
                strength,
                rater,
                source,
                rationale,
            )
        except ValueError as exc:
            raise RecordError("(record)", str(exc)) from None
        return Converted([rows], [judgment_rows])

    # Message lists (TRL conversational), with or without an explicit prompt.
    for key, value in (("chosen", chosen), ("rejected", rejected)):
        if not isinstance(value, str | list):
            raise RecordError(
                key, f"expected a string or a list of messages, got {type(value).__name__}"
            )
    if prompt is None:
        if not (isinstance(chosen, list) and isinstance(rejected, list)):
            raise RecordError(
                "prompt",
                "missing (without a prompt, 'chosen' and 'rejected' must be message lists)",
            )
        n = _shared_prefix(chosen, rejected)
        if n == 0:
            raise RecordError(
                "rejected", "shares no leading messages with 'chosen': cannot tell the prompt"
            )
        prompt, chosen, rejected = chosen[:n], chosen[n:], rejected[n:]
        if not chosen or not rejected:
            raise RecordError("rejected", IDENTICAL)
    elif not isinstance(prompt, str | list):
        raise RecordError(
            "prompt", f"expected a string or a list of messages, got {type(prompt).__name__}"
        )
    if normal_answer(chosen) == normal_answer(rejected):
        raise RecordError("rejected", IDENTICAL)
    bodies = [{"text": c} if isinstance(c, str) else {"messages": c} for c in (chosen, rejected)]
    data = {"id": item_id, "prompt": prompt, "candidates": bodies, "metadata": meta}
    if record.get("domains") is not None:
        data["domains"] = record["domains"]
    item = _item(data)
    good, bad = item.candidates[0].key, item.candidates[1].key
    shown = (good, bad) if good < bad else (bad, good)
    try:
        judgment = PairwiseJudgment(
            item_id=item.id,
            shown_order=shown,
            winner="a" if shown[0] == good else "b",
            strength=strength,
            rationale=rationale,
            provenance={"rater_id": rater, "source": source},
        )
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    return Converted([item], [judgment])


COMPARISON = register(
    RecordFormat(
        "comparison",
        "existing comparisons / TRL preference rows: prompt?, chosen, rejected, labeler?, source?, strength?",
        _comparison_detect,
        _comparison_convert,
    )
)

# -- TRL unpaired preference ------------------------------------------------------------------

UNPAIRED_KEYS = {
    "id",
    "prompt",
    "completion",
    "label",
    "labeler",
    "source",
    "rationale",
    "domains",
    "metadata",
}


def _unpaired_detect(record: dict[str, Any]) -> bool:
    return "prompt" in record and "completion" in record and "label" in record


def _unpaired_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    extra = check_unknown(record, UNPAIRED_KEYS, options)
    label = require(record, "label", bool)
    completion = require(record, "completion", (str, list))
    body = {"text": completion} if isinstance(completion, str) else {"messages": completion}
    data = {
        "id": record.get("id"),
        "prompt": require(record, "prompt", (str, list)),
        "candidates": [body],
        "metadata": _metadata(record, extra),
    }
    if record.get("domains") is not None:
        data["domains"] = record["domains"]
    item = _item(data)
    try:
        judgment = UnaryJudgment(
            item_id=item.id,
            candidate_id=item.candidates[0].id,
            label=label,
            rationale=record.get("rationale"),
            provenance={
                "rater_id": (rater := _rater(record, options)),
                "source": _source(record, options, rater),
            },
        )
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    return Converted([item], [judgment])


UNPAIRED = register(
    RecordFormat(
        "unpaired",
        "TRL unpaired preference: prompt, completion, label (bool)",
        _unpaired_detect,
        _unpaired_convert,
    )
)
