"""The real human-preference data sets in ``shared/data`` (see its README for licences).

- PandaLM test set (Apache-2.0): 3 annotators, 0 tie / 1 response1 / 2 response2.
- Tulu-1 human eval (Apache-2.0): 17 evaluators, 5-level preference, per-completion acceptability.
- hh-rlhf harmless-base test (MIT): chosen/rejected conversations, one label, no rater ids.
- SQuALITY human eval (CC BY): 3 systems' summaries, each rated by 3 workers on 3 dimensions.

Where a source does not record something the wire format needs, the choice is documented here:
PandaLM and hh-rlhf give no preference strength, so a non-tie is stored with strength unknown
(``None``; no export turns it into a margin), while Tulu-1's 5-level preference keeps its strengths;
hh-rlhf gives no shown order or rater, so its pair is shown in stored order, each row by a rater
of its own (``anonymous:`` + a hash of the row, as every unlabeled comparison; position-bias
audits are meaningless on it).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from ...schema import (
    Dimension,
    Item,
    JudgmentBase,
    Message,
    PairwiseJudgment,
    Rubric,
    RubricJudgment,
    UnaryJudgment,
)
from ...schema.identity import candidate_key
from ...store.rows import JudgmentRows
from . import Converted, ConvertOptions, RecordError, RecordFormat, check_unknown, register, require
from .generic import anonymous_rater, labeler_source

#: a non-tie whose source gives no strength: stored as unknown, never as a made-up number
UNKNOWN_STRENGTH = None

# -- PandaLM ------------------------------------------------------------------------------

PANDALM_KEYS = {
    "idx",
    "motivation_app",
    "cmp_key",
    "instruction",
    "input",
    "response1",
    "response2",
    "annotator1",
    "annotator2",
    "annotator3",
}


def _pandalm_detect(record: dict[str, Any]) -> bool:
    return "response1" in record and "annotator1" in record


def _pandalm_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    extra = check_unknown(record, PANDALM_KEYS, options)
    idx = require(record, "idx", int)
    instruction = require(record, "instruction", str)
    context = record.get("input") or ""
    if not isinstance(context, str):
        raise RecordError("input", f"expected a string, got {type(context).__name__}")
    models = str(record.get("cmp_key", "")).split("_")
    candidates = []
    for n in (1, 2):
        text = require(record, f"response{n}", str)
        model = models[n - 1] if len(models) == 2 else None
        candidates.append({"id": f"response{n}", "text": text, "model": model})
    prompt = instruction if not context else f"{instruction}\n\n{context}"
    item = Item(
        id=f"pandalm-{idx}",
        prompt=prompt,
        candidates=candidates,
        metadata={
            "source": "pandalm-testset-v1",
            "motivation_app": record.get("motivation_app"),
            "cmp_key": record.get("cmp_key"),
            **extra,
        },
    )
    judgments: list[JudgmentBase | JudgmentRows] = []
    for n in (1, 2, 3):
        value = require(record, f"annotator{n}", int)
        if value not in (0, 1, 2):
            raise RecordError(f"annotator{n}", f"expected 0 (tie), 1 or 2, got {value}")
        winner = {0: "tie", 1: "a", 2: "b"}[value]
        judgments.append(
            PairwiseJudgment(
                item_id=item.id,
                shown_order=("response1", "response2"),
                winner=winner,
                strength=0 if value == 0 else UNKNOWN_STRENGTH,
                provenance={"rater_id": f"pandalm:annotator{n}", "source": "human"},
            )
        )
    return Converted([item], judgments)


PANDALM = register(
    RecordFormat(
        "pandalm",
        "PandaLM test set: response1/response2, annotator1..3",
        _pandalm_detect,
        _pandalm_convert,
        dataset_ids=True,
    )
)

# -- Tulu-1 human eval ------------------------------------------------------------------

TULU_KEYS = {
    "id",
    "instance_index",
    "instance_id",
    "prompt",
    "model_a",
    "model_b",
    "completion_a",
    "completion_b",
    "completion_a_is_acceptable",
    "completion_b_is_acceptable",
    "preference",
    "instance_quality",
    "comment",
    "evaluator",
    "timestamp",
}
TULU_PREFERENCE = {
    "a-is-better": ("a", 2),
    "a-is-slightly-better": ("a", 1),
    "tie": ("tie", 0),
    "b-is-slightly-better": ("b", 1),
    "b-is-better": ("b", 2),
}


def _tulu_detect(record: dict[str, Any]) -> bool:
    return "completion_a" in record and "evaluator" in record


def _tulu_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    extra = check_unknown(record, TULU_KEYS, options)
    if all(record.get(k) is None for k in ("prompt", "completion_a", "completion_b", "preference")):
        raise RecordError("(record)", "blank row: no prompt, completions or preference")
    instance = require(record, "instance_id", str)
    prompt = require(record, "prompt", str)
    model_a, model_b = require(record, "model_a", str), require(record, "model_b", str)
    if model_a == model_b:
        raise RecordError("model_b", f"same model as model_a ({model_a!r})")
    item = Item(
        id=f"tulu1-{instance}-{'-vs-'.join(sorted((model_a, model_b)))}",
        prompt=prompt,
        candidates=sorted(
            [
                {"id": model_a, "text": require(record, "completion_a", str), "model": model_a},
                {"id": model_b, "text": require(record, "completion_b", str), "model": model_b},
            ],
            key=lambda c: c["id"],
        ),
        metadata={"source": "tulu1-human-eval", "instance_id": instance, **extra},
    )
    pref = require(record, "preference", str)
    if pref not in TULU_PREFERENCE:
        raise RecordError("preference", f"expected one of {sorted(TULU_PREFERENCE)}, got {pref!r}")
    evaluator = record.get("evaluator")
    row_id = record.get("id")
    rater = f"tulu1:{evaluator}" if evaluator else f"tulu1:anonymous-{row_id}"
    submitted = None
    if record.get("timestamp"):
        try:
            submitted = datetime.fromisoformat(str(record["timestamp"])).replace(tzinfo=UTC)
        except ValueError as exc:
            raise RecordError("timestamp", f"not an ISO date-time: {exc}") from None
    provenance = {"rater_id": rater, "source": "human", "submitted_at": submitted}
    winner, strength = TULU_PREFERENCE[pref]
    judgments: list[Any] = [
        PairwiseJudgment(
            item_id=item.id,
            shown_order=(model_a, model_b),
            winner=winner,
            strength=strength,
            rationale=record.get("comment") or None,
            provenance=provenance,
        )
    ]
    for side, model in (("a", model_a), ("b", model_b)):
        accept = record.get(f"completion_{side}_is_acceptable")
        if accept is None:
            continue
        if accept not in ("yes", "no"):
            raise RecordError(
                f"completion_{side}_is_acceptable", f"expected 'yes' or 'no', got {accept!r}"
            )
        judgments.append(
            UnaryJudgment(
                item_id=item.id, candidate_id=model, label=accept == "yes", provenance=provenance
            )
        )
    return Converted([item], judgments)


TULU1 = register(
    RecordFormat(
        "tulu1",
        "Tulu-1 human eval: completion_a/b, 5-level preference, evaluator",
        _tulu_detect,
        _tulu_convert,
        dataset_ids=True,
    )
)

# -- hh-rlhf --------------------------------------------------------------------------

_TURN = re.compile(r"\n\n(Human|Assistant): ")


def parse_hh_conversation(text: str, where: str) -> list[Message]:
    """``"\\n\\nHuman: ...\\n\\nAssistant: ..."`` as chat messages."""
    parts = _TURN.split(text)
    if parts[0].strip():
        raise RecordError(where, "text before the first 'Human:' turn")
    messages = []
    for speaker, content in zip(parts[1::2], parts[2::2], strict=True):
        messages.append(
            Message(role="user" if speaker == "Human" else "assistant", content=content)
        )
    if not messages or messages[-1].role != "assistant":
        raise RecordError(where, "a conversation must end with an 'Assistant:' turn")
    return messages


def _hh_detect(record: dict[str, Any]) -> bool:
    return (
        set(record) <= {"chosen", "rejected"} | {"labeler"}
        and isinstance(record.get("chosen"), str)
        and "\n\nAssistant:" in record["chosen"]
    )


def _hh_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    chosen = parse_hh_conversation(require(record, "chosen", str), "chosen")
    rejected = parse_hh_conversation(require(record, "rejected", str), "rejected")
    prompt = chosen[:-1]
    if [m.model_dump() for m in rejected[:-1]] != [m.model_dump() for m in prompt]:
        raise RecordError(
            "rejected", "the conversation before the final reply differs from 'chosen'"
        )
    good, bad = chosen[-1].content, rejected[-1].content
    ids = {"chosen": candidate_key(good), "rejected": candidate_key(bad)}
    if ids["chosen"] == ids["rejected"]:
        raise RecordError(
            "rejected", "the final reply is identical to the chosen one (after normalisation)"
        )
    item = Item(
        prompt=prompt,
        candidates=[{"id": ids["chosen"], "text": good}, {"id": ids["rejected"], "text": bad}],
        metadata={"source": "hh-rlhf"},
    )
    shown = tuple(sorted(ids.values()))
    # no rater ids: each row is a rater of its own (generic.anonymous_rater), not one "crowd"
    # whose later rows of a pair would replace the earlier ones
    rater = record.get("labeler") or options.default_rater or anonymous_rater(record)
    if not isinstance(rater, str):
        raise RecordError("labeler", f"expected a string, got {type(rater).__name__}")
    judgment = PairwiseJudgment(
        item_id=item.id,
        shown_order=shown,
        winner="a" if shown[0] == ids["chosen"] else "b",
        strength=UNKNOWN_STRENGTH,
        provenance={
            "rater_id": rater,
            "source": labeler_source(rater, "human", options, said=False),
        },
    )
    return Converted([item], [judgment])


HH_RLHF = register(
    RecordFormat(
        "hh-rlhf",
        "Anthropic hh-rlhf: chosen/rejected '\\n\\nHuman:' conversations",
        _hh_detect,
        _hh_convert,
    )
)

# -- SQuALITY -------------------------------------------------------------------------

SQUALITY_DIMENSIONS = ("correctness", "selection", "overall")
SQUALITY_RUBRIC = Rubric(
    id="squality",
    version=1,
    title="SQuALITY human evaluation",
    description="Summary ratings from the SQuALITY human evaluation (Wang et al., 2022), 0-100.",
    dimensions=[
        Dimension(name=d, scale="interval", min=0, max=100, description=f"{d} rating, 0-100")
        for d in SQUALITY_DIMENSIONS
    ],
)


def _squality_detect(record: dict[str, Any]) -> bool:
    return "passage-id" in record and "questions" in record


def _squality_convert(record: dict[str, Any], options: ConvertOptions) -> Converted:
    passage = str(require(record, "passage-id", (str, int)))
    questions = require(record, "questions", dict)
    out = Converted()
    for qkey, systems in questions.items():
        where = f"questions.{qkey}"
        if not isinstance(systems, dict) or not systems:
            raise RecordError(where, "expected an object of systems")
        candidates = []
        for system, body in sorted(systems.items()):
            if not isinstance(body, dict):
                raise RecordError(f"{where}.{system}", "expected an object")
            candidates.append(
                {
                    "id": system,
                    "text": require(body, "response", str, f"{where}.{system}."),
                    "model": system,
                    "source": "human" if system == "human" else "model",
                }
            )
        item = Item(
            id=f"squality-{passage}-q{qkey}",
            prompt=f"Summarise the story of SQuALITY passage {passage} to answer question {qkey}.",
            candidates=candidates,
            metadata={"source": "squality", "passage_id": passage, "question": qkey},
        )
        out.items.append(item)
        for system, body in sorted(systems.items()):
            for n, review in enumerate(body.get("reviews") or []):
                rwhere = f"{where}.{system}.reviews[{n}]."
                worker = require(review, "worker_id", (str, int), rwhere)
                scores = {
                    d: float(require(review, f"{d}-rating", (int, float), rwhere))
                    for d in SQUALITY_DIMENSIONS
                }
                out.judgments.append(
                    RubricJudgment(
                        item_id=item.id,
                        candidate_id=system,
                        scores=scores,
                        provenance={
                            "rater_id": f"squality:{worker}",
                            "rubric_id": "squality",
                            "rubric_version": 1,
                            "source": "human",
                        },
                    )
                )
    return out


SQUALITY = register(
    RecordFormat(
        "squality",
        "SQuALITY human eval: passage-id, questions.*.reviews",
        _squality_detect,
        _squality_convert,
        dataset_ids=True,
        rubrics=(SQUALITY_RUBRIC,),
    )
)
