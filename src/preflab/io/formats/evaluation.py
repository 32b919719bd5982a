"""Record shapes of model evaluation: model outputs (``rollouts.jsonl``) and people's verdicts on
two models' answers (``human_eval.jsonl``).

| format | record | becomes |
|---|---|---|
| ``rollout`` | ``{"prompt", "response", "reward"?, "model"?, "id"?, "domains"?}`` (written by ``preflab rm score``; one model's answer to one prompt; an empty answer is an answer) | an item with one candidate (its ``model``), id from prompt, response and model unless given; the reward in ``metadata.reward`` |
| ``human_eval`` | ``{"prompt", "answer_1", "answer_2", "human_prefers", "model_1", "model_2", "labeler"?, "id"?, "domains"?}`` (written by ``preflab eval report``) | an item with the two answers (models kept on the candidates, never shown to raters) + a pairwise judgment in the order ``answer_1``, ``answer_2`` |

``human_prefers`` is ``"answer_1"``, ``"answer_2"`` or ``"tie"`` (also accepted: ``1``, ``2``,
``0`` for a tie). A verdict carries no strength: it is stored with strength unknown
(``None``), like any comparison of unknown strength. ``labeler`` (the rater; ``preflab eval report`` writes the rater's
hash) defaults to ``--default-rater``, else a rater of the row's own (``anonymous:`` + a hash of
the row: unnamed people's verdicts are not one rater's revisions). A verdict is an event: a
``human_eval`` item's id is ``id``, else :func:`comparison_id` (prompt, answers *and* models), and
it is kept as imported (:attr:`RecordFormat.samples`), so the same texts from another pair of
models stay another item.

:func:`rollout_fields` is the one check of a model-output record: the importer and
``preflab eval create`` (:mod:`preflab.evaluate.outputs`) both call it.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from ...schema import PairwiseJudgment
from ...schema.common import content_hash
from . import (
    Converted,
    ConvertOptions,
    RecordError,
    RecordFormat,
    check_unknown,
    from_validation_error,
    register,
)
from .generic import UNKNOWN_STRENGTH, _identifier, _item, _rater, _source

ROLLOUT_KEYS = {"id", "prompt", "response", "reward", "model", "domains", "metadata"}
HUMAN_EVAL_KEYS = {
    "id",
    "prompt",
    "answer_1",
    "answer_2",
    "human_prefers",
    "model_1",
    "model_2",
    "labeler",
    "source",
    "domains",
    "rationale",
    "metadata",
}
#: ``human_prefers`` values and the pairwise winner each one means (answer_1 is shown as A).
HUMAN_PREFERS = {"answer_1": "a", "answer_2": "b", "tie": "tie", 1: "a", 2: "b", 0: "tie"}


@dataclass(frozen=True)
class RolloutFields:
    """A checked model-output record."""

    prompt: str | list[dict[str, Any]]
    response: str | list[dict[str, Any]]
    reward: float | None
    model: str | None
    id: str | None
    domains: list[str]
    extra: dict[str, Any]


def _body(value: Any, key: str, *, may_be_empty: bool = False) -> str | list[dict[str, Any]]:
    if isinstance(value, str):
        if not value.strip() and not may_be_empty:
            raise RecordError(key, "empty; expected the text (or a list of chat messages)")
        return value
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        return value
    if value is None:
        raise RecordError(key, "missing")
    raise RecordError(
        key, f"expected a string or a non-empty list of messages, got {type(value).__name__}"
    )


def _optional_str(record: dict[str, Any], key: str) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise RecordError(key, f"expected a non-empty string, got {value!r:.60}")
    return value.strip()


def _domains(record: dict[str, Any]) -> list[str]:
    value = record.get("domains")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
        raise RecordError("domains", "expected a list of strings")
    return value


def rollout_fields(
    record: dict[str, Any], options: ConvertOptions = ConvertOptions()
) -> RolloutFields:
    """Check one ``rollouts.jsonl`` record; a :class:`RecordError` names the bad field."""
    extra = check_unknown(record, ROLLOUT_KEYS, options)
    reward = record.get("reward")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise RecordError("reward", f"expected a number, got {type(reward).__name__}")
    if reward is not None and reward != reward:  # NaN: a scorer failed on this answer
        raise RecordError("reward", "NaN; score this answer again or leave 'reward' out")
    item_id = None if record.get("id") is None else _identifier(record["id"], "id")
    return RolloutFields(
        prompt=_body(record.get("prompt"), "prompt"),
        response=_body(record.get("response"), "response", may_be_empty=True),
        reward=None if reward is None else float(reward),
        model=_optional_str(record, "model"),
        id=item_id,
        domains=_domains(record),
        extra=extra,
    )


def _candidate(body: str | list[dict[str, Any]], model: str | None) -> dict[str, Any]:
    return {**({"text": body} if isinstance(body, str) else {"messages": body}), "model": model}


def _metadata(record: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    meta = record.get("metadata") or {}
    if not isinstance(meta, dict):
        raise RecordError("metadata", f"expected an object, got {type(meta).__name__}")
    return {**meta, **extra}


def _text_key(text: str) -> str:
    return unicodedata.normalize("NFC", text).strip()


def prompt_key(prompt: str | list[dict[str, Any]] | Any) -> str:
    """What makes two prompts the same prompt: Unicode NFC, surrounding whitespace stripped, a
    chat prompt of one user message equal to its text (``preflab eval create`` matches prompts
    across models by it)."""
    if isinstance(prompt, list):
        messages = [m if isinstance(m, dict) else m.model_dump(mode="json") for m in prompt]
        if len(messages) == 1 and messages[0].get("role") == "user":
            return _text_key(str(messages[0].get("content", "")))
        return orjson.dumps(
            [{**m, "content": _text_key(str(m.get("content", "")))} for m in messages],
            option=orjson.OPT_SORT_KEYS,
        ).decode()
    return _text_key(str(prompt))


def answer_key(answer: str | list[dict[str, Any]] | Any) -> str:
    """What makes two answers the same answer (same normalisation as :func:`prompt_key`)."""
    if isinstance(answer, list):
        messages = [m if isinstance(m, dict) else m.model_dump(mode="json") for m in answer]
        if len(messages) == 1 and messages[0].get("role") == "assistant":
            return _text_key(str(messages[0].get("content", "")))
        return prompt_key(messages)
    return _text_key(str(answer))


def comparison_id(prompt: Any, sides: Any) -> str:
    """The id of an item that compares two models' answers to one prompt: a hash of the prompt
    and the ``(model, answer)`` pairs, so the same two texts from another pair of models are
    another item (the id names no model). ``preflab eval create`` and a ``human_eval`` row
    without ``id`` make the same id."""
    return content_hash(
        {
            "prompt": prompt_key(prompt),
            "answers": sorted([model or "", answer_key(body)] for model, body in sides),
        },
        prefix="itm_",
        length=16,
    )


# -- rollouts ------------------------------------------------------------------------------


def _rollout_detect(record: dict[str, Any]) -> bool:
    return "prompt" in record and "response" in record


def _rollout_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    r = rollout_fields(record, options)
    meta = _metadata(record, r.extra)
    if r.reward is not None:
        meta["reward"] = r.reward
    # Two models may give the same answer: a rollout is one model's output, so its model is part
    # of what identifies it (else the second model's row would clash with the first's item).
    item_id = r.id or content_hash(
        {"prompt": r.prompt, "response": r.response, "model": r.model}, prefix="itm_", length=16
    )
    item = _item(
        {
            "id": item_id,
            "prompt": r.prompt,
            "candidates": [_candidate(r.response, r.model)],
            "domains": r.domains,
            "metadata": meta,
        }
    )
    return Converted([item], [])


ROLLOUT = register(
    RecordFormat(
        "rollout",
        "model outputs (rollouts.jsonl): prompt, response, reward?, model?",
        _rollout_detect,
        _rollout_convert,
        samples=True,
    )
)

# -- human evaluation ------------------------------------------------------------------------


def _human_eval_detect(record: dict[str, Any]) -> bool:
    return "prompt" in record and "answer_1" in record and "answer_2" in record


def _human_eval_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    extra = check_unknown(record, HUMAN_EVAL_KEYS, options)
    prompt = _body(record.get("prompt"), "prompt")
    answers = [_body(record.get(k), k, may_be_empty=True) for k in ("answer_1", "answer_2")]
    if answers[0] == answers[1]:
        raise RecordError(
            "answer_2", "identical to 'answer_1'; a comparison needs two different answers"
        )
    prefers = record.get("human_prefers")
    if isinstance(prefers, bool) or prefers not in HUMAN_PREFERS:
        raise RecordError(
            "human_prefers",
            f'expected "answer_1", "answer_2" or "tie" (or 1, 2, 0), got {prefers!r:.60}',
        )
    models = [_optional_str(record, k) for k in ("model_1", "model_2")]
    rationale = record.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        raise RecordError("rationale", f"expected a string, got {type(rationale).__name__}")
    if record.get("id") is not None:
        item_id = _identifier(record["id"], "id")
    else:
        item_id = comparison_id(prompt, zip(models, answers, strict=True))
    item = _item(
        {
            "id": item_id,
            "prompt": prompt,
            "domains": _domains(record),
            "candidates": [_candidate(a, m) for a, m in zip(answers, models, strict=True)],
            "metadata": _metadata(record, extra),
        }
    )
    winner = HUMAN_PREFERS[prefers]
    try:
        judgment = PairwiseJudgment(
            item_id=item.id,
            shown_order=(item.candidates[0].id, item.candidates[1].id),
            winner=winner,
            strength=0 if winner == "tie" else UNKNOWN_STRENGTH,
            rationale=rationale,
            provenance={
                "rater_id": _verdict_rater(record, options),
                "source": _source(record, options),
            },
        )
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    return Converted([item], [judgment])


def _verdict_rater(record: dict[str, Any], options: ConvertOptions) -> str:
    """The rater of a verdict: ``labeler``, else ``--default-rater``, else a rater of its own
    (``anonymous:`` + a hash of the row): verdicts of unnamed people are not one rater's
    revisions, so none replaces another (the same row twice is the same verdict)."""
    return _rater(record, options)  # generic.anonymous_rater when the row names nobody


HUMAN_EVAL = register(
    RecordFormat(
        "human_eval",
        "human evaluation (human_eval.jsonl): prompt, answer_1, answer_2, human_prefers, "
        "model_1, model_2",
        _human_eval_detect,
        _human_eval_convert,
        # a verdict on two named models' answers: the same texts from other models are another
        # item, so its id (given, or comparison_id) is kept, never joined by content
        samples=True,
    )
)
