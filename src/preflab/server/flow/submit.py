"""The rules of "submit", as decisions over values the caller has fetched.

Used by the flow (:func:`preflab.server.flow.lane.run_submit`, on every executor), by
revisions (:mod:`preflab.server.services.revisions`) and by the tests' ORM oracle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.orm import Session

from ...schema import (
    CriteriaJudgment,
    PairwiseJudgment,
    Rubric,
    RubricJudgment,
    SpannedJudgment,
    describe_need,
    kind_fits,
    kinds_for_item,
    parse_judgment,
)
from ...schema.common import FieldProblem
from ...schema.pairwise import (
    judgment_content_hash,
    pairwise_hashed,
)
from ...schema.policy import policy_of
from ...schema.spans import CritiqueSpan, span_category_problems, span_offset_problems
from ...store import repo
from ...store.models import ItemRow, Project, utcnow
from ...store.rows import pairwise_judgment_values
from ..errors import ServiceError
from ..wire import wire_problems
from .common import NotCommon, aware
from .criteria import criteria_problems

#: Pool roles whose answers are scored after the response: production and production gold look and cost the same,
#: gold being scored after the response (:func:`preflab.server.services.gold_scoring.defer_gold_scoring`).
SCORED_LATER = frozenset({"production", "gold"})


def problem(loc: str, msg: str) -> dict[str, Any]:
    return {"loc": ["body", "judgment", *loc.split(".")], "msg": msg, "type": "value_error"}


def lease_refusal(
    assignment_id: str,
    *,
    found: bool,
    lease_status: str | None,
    rater_status: str | None,
    rater_reason: str,
    expires_at: datetime | None,
    now: datetime,
) -> ServiceError | None:
    """Why this caller may not submit on this lease now, in the order the checks apply.

    ``found``: the lease exists in the project and is the caller's. A submitted lease is
    refused here; the caller first answers a replay of the same answer with the first result.
    """
    if not found:
        return ServiceError(
            404,
            f"no assignment {assignment_id!r} of yours in this project; "
            "get one with POST .../assignments/next",
        )
    if lease_status == "submitted":
        return ServiceError(
            409,
            "this assignment was already submitted with a different answer; "
            "ask a reviewer to send it back if you want to revise it",
        )
    if lease_status == "released":
        return ServiceError(
            409, "you released this assignment; get a new one with POST .../assignments/next"
        )
    if rater_status == "suspended":
        return ServiceError(403, f"you are suspended from this project: {rater_reason}")
    if expires_at is not None and aware(expires_at) <= now:
        return ServiceError(
            410,
            f"assignment {assignment_id} expired at {aware(expires_at).isoformat()}; "
            "its item went back to the pool; get a new task with POST .../assignments/next",
        )
    return None


def kind_refusal(
    kind: Any,
    project_kinds: Sequence[str],
    n_candidates: int,
    declared: Sequence[str] | None = None,
) -> ServiceError | None:
    """The project's declared kinds, the item's own (``metadata.kinds``, where it declares
    some), and the kind's fit to the item's number of answers: what the label page offers
    (:func:`preflab.schema.kinds_for_item`) is what submit accepts."""
    if kind not in project_kinds:
        return ServiceError(
            422,
            f"this project collects {list(project_kinds)}, not {kind!r}",
            [problem("kind", f"must be one of {list(project_kinds)}")],
        )
    offered = kinds_for_item(list(project_kinds), n_candidates, list(declared or []) or None)
    if declared and kind not in declared:
        return ServiceError(
            422,
            f"this item takes {list(declared)}, not {kind!r}",
            [problem("kind", f"choose one of {offered}")],
        )
    if not kind_fits(kind, n_candidates):  # the rule the label page offers kinds by
        return ServiceError(
            422,
            f"this item has {n_candidates} answers; {kind} needs {describe_need(kind)}",
            [problem("kind", f"choose one of {offered}")],
        )
    return None


def rationale_refusal(rationale: str | None, min_chars: int) -> dict[str, Any] | None:
    """The project's minimum rationale length (``Policy.min_rationale_chars``)."""
    if min_chars and len((rationale or "").strip()) < min_chars:
        return problem(
            "rationale", f"write at least {min_chars} characters explaining your judgment"
        )
    return None


def judgment_columns(
    project_pk: int,
    item_pk: int,
    rater_pk: int,
    values: dict[str, Any],
    *,
    batch_pk: int | None = None,
) -> dict[str, Any]:
    """The judgment row's columns, assembled in this one place for every submit path (the ORM
    row and the executors' INSERT): a new column written at submit is added here."""
    return {
        "project_pk": project_pk,
        "item_pk": item_pk,
        "rater_pk": rater_pk,
        "batch_pk": batch_pk,
        **values,
    }


# -- the common case's body, validated without pydantic ---------------------------------------------

_DT_JSON = TypeAdapter(datetime)
_JUDGMENT_KEYS = frozenset({"kind", "winner", "strength", "rationale"})
_SUBMIT_KEYS = frozenset({"assignment_id", "judgment", "telemetry", "idempotency_key"})
_TEL_ORDER = (
    "iki_cv",
    "revision_ratio",
    "pasted_chars",
    "paste_count",
    "typed_chars",
    "active_ms",
    "focus_losses",
    "untrusted_paste_chars",
)
_TEL_FLOAT = frozenset({"iki_cv", "revision_ratio"})
_TEL_KEYS = frozenset(_TEL_ORDER)


def _ident(value: Any) -> bool:
    """Already a valid ``Identifier`` (a string of 1-200 characters, nothing to strip)."""
    return type(value) is str and 1 <= len(value) <= 200 and value == value.strip()


def telemetry_fast(raw: Any) -> dict[str, Any] | None:
    """``Telemetry.model_validate(raw).model_dump(mode="json", exclude_none=True)`` for plain
    values (ints where ints go, floats where floats go, all >= 0); ``NotCommon`` otherwise."""
    if raw is None:
        return None
    if type(raw) is not dict:
        raise NotCommon("telemetry")
    for k, v in raw.items():
        if k not in _TEL_KEYS:
            raise NotCommon("telemetry")
        if v is None:
            continue
        if (type(v) is not (float if k in _TEL_FLOAT else int)) or v < 0:
            raise NotCommon("telemetry")
    return {k: raw[k] for k in _TEL_ORDER if raw.get(k) is not None}


#: A submit's body as :func:`parse_submit` reads it: assignment id, judgment, telemetry and
#: idempotency key.
Submit = tuple[str, dict[str, Any], dict[str, Any] | None, str | None]


def parse_submit(body: bytes, header_idem: str | None) -> Submit:
    """``SubmitIn`` for plain values (``NotCommon`` for anything the model might treat otherwise)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise NotCommon("body") from None
    if type(data) is not dict or not data.keys() <= _SUBMIT_KEYS:
        raise NotCommon("body")
    if wire_problems(data):
        raise NotCommon("wire rules")  # the framework's models answer the 422, field by field
    lease_id, judgment = data.get("assignment_id"), data.get("judgment")
    if type(lease_id) is not str or not 1 <= len(lease_id) <= 64 or type(judgment) is not dict:
        raise NotCommon("body")
    idem = data.get("idempotency_key")
    if idem is not None and (type(idem) is not str or not 1 <= len(idem) <= 200):
        raise NotCommon("body")
    telemetry = telemetry_fast(data.get("telemetry"))
    return lease_id, judgment, telemetry, idem or header_idem or None


def _check_pairwise(judgment: dict[str, Any], min_rationale_chars: int) -> None:
    if not judgment.keys() <= _JUDGMENT_KEYS or judgment.get("kind") != "pairwise":
        raise NotCommon("judgment shape")
    winner, strength = judgment.get("winner"), judgment.get("strength")
    if winner not in ("a", "b", "tie") or type(winner) is not str or type(strength) is not int:
        raise NotCommon("judgment values")
    if not 0 <= strength <= 3 or (winner == "tie") != (strength == 0):
        raise NotCommon("judgment values")
    rationale = judgment.get("rationale")
    if rationale is not None and (type(rationale) is not str or len(rationale) > 20_000):
        raise NotCommon("rationale")
    if rationale_refusal(rationale, min_rationale_chars) is not None:
        raise NotCommon("rationale")


def pairwise_values(
    judgment: dict[str, Any],
    *,
    item_key: str,
    shown_order: list[str],
    candidate_keys: list[str],
    username: str,
    rubric_key: str | None,
    rubric_version: int | None,
    guideline_version: int | None,
    started_at: datetime,
    submitted_at: datetime,
    idempotency_key: str | None,
    telemetry: dict[str, Any] | None,
    min_rationale_chars: int,
) -> dict[str, Any]:
    """``judgment_rows(build_judgment(...)).values`` for a plain pairwise judgment.

    Accepts only what :func:`build_judgment` would accept unchanged (``NotCommon`` for anything
    else, which then goes through that validation, errors included); the property test in
    ``tests/server/test_fastlane.py`` holds the two equal.
    """
    _check_pairwise(judgment, min_rationale_chars)
    if (
        len(shown_order) != 2
        or not _ident(shown_order[0])
        or not _ident(shown_order[1])
        or shown_order[0] == shown_order[1]
        or shown_order[0] not in candidate_keys
        or shown_order[1] not in candidate_keys
    ):
        raise NotCommon("shown order")
    if not _ident(item_key) or not _ident(username):
        raise NotCommon("identifiers")
    if idempotency_key is not None and len(idempotency_key) > 200:
        raise NotCommon("idempotency key")
    if rubric_key is not None and type(rubric_key) is not str:
        raise NotCommon("rubric")
    if rubric_version is not None and (type(rubric_version) is not int or rubric_version < 1):
        raise NotCommon("rubric")
    winner, strength, rationale = (
        judgment["winner"],
        judgment["strength"],
        judgment.get("rationale"),
    )
    a, b = shown_order
    prov: dict[str, Any] = {"rater_id": username}
    if rubric_key is not None:
        prov["rubric_id"] = rubric_key
    if rubric_version is not None:
        prov["rubric_version"] = rubric_version
    if guideline_version:  # 0: an assignment from before settings were versioned, not recorded
        if type(guideline_version) is not int or guideline_version < 1:
            raise NotCommon("guideline version")
        prov["guideline_version"] = guideline_version
    prov["review_pass"] = 0
    prov["source"] = "human"
    prov["started_at"] = _DT_JSON.dump_python(started_at, mode="json")
    prov["submitted_at"] = _DT_JSON.dump_python(submitted_at, mode="json")
    if telemetry is not None:
        prov["telemetry"] = telemetry
    # the one canonical form and hash (preflab.schema.pairwise), as every other writer stores it
    digest = judgment_content_hash(
        pairwise_hashed(item_key, (a, b), winner, strength, prov, rationale)
    )
    return pairwise_judgment_values(
        a,
        b,
        winner,
        strength,
        rationale=rationale,
        source="human",
        content_hash=digest,
        rubric_key=rubric_key,
        rubric_version=rubric_version,
        guideline_version=guideline_version or None,
        started_at=started_at,
        submitted_at=submitted_at,
        telemetry=telemetry,
        idempotency_key=idempotency_key,
    )


def _field_errors(
    exc: ValidationError, prefix: tuple = ("body", "judgment")
) -> list[dict[str, Any]]:
    out = []
    for e in exc.errors(include_url=False, include_input=False):
        named = (e.get("ctx") or {}).get("error")
        if isinstance(named, FieldProblem):  # a model validator that names its field (spans.N...)
            loc = [*e["loc"], *named.field]
            out.append({"loc": [*prefix, *map(str, loc)], "msg": named.reason, "type": e["type"]})
            continue
        out.append({"loc": [*prefix, *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]})
    return out


#: ``build_judgment(rubric=...)`` left out: read it through the session.
READ_RUBRIC = object()


def current_rubric(session: Session, project: Any) -> Rubric | None:
    """The project's current rubric (the version its judgments record), or None."""
    if project.rubric_key is None:
        return None
    return repo.get_rubric(session, project, project.rubric_key, project.rubric_version)


def build_judgment(
    session: Session | None,
    project: Project,
    item_row: ItemRow | None,
    username: str,
    data: dict[str, Any],
    *,
    shown_order: list[str] | None,
    started_at: datetime | None,
    idempotency_key: str | None,
    telemetry: dict[str, Any] | None,
    item_key: str | None = None,
    candidate_keys: list[str] | None = None,
    guideline_version: int | None = None,
    rubric: Rubric | None | object = READ_RUBRIC,
    assisted_by: list[Any] | None = None,
    item_meta: dict[str, Any] | None | object = READ_RUBRIC,
    answer_lengths: Mapping[str, int] | None = None,
):
    """Validate a submitted judgment body into its schema class (422 field-by-field); every
    submit path's one validation (the flow's on every executor for every kind but
    pairwise, whose cheap equal is :func:`pairwise_values`). A rubric judgment is checked
    against the project's *current* rubric version, the one its provenance records: ``rubric``
    as the caller read it (an executor), or read here through ``session``.

    ``project`` needs ``kinds``, ``rubric_key``, ``rubric_version`` and ``settings`` (a
    :class:`ProjectRef` will do unless the judgment is a rubric one); the item comes as an
    ``ItemRow`` or as ``item_key`` + ``candidate_keys`` (the hot path has no ORM rows).
    """
    if item_row is not None:
        item_key, candidate_keys = item_row.item_key, [c.candidate_key for c in item_row.candidates]
    if not isinstance(data, dict):
        raise ServiceError(
            422, "judgment must be an object", [problem("judgment", "expected an object")]
        )
    data = dict(data)
    declared = (item_row.meta or {}).get("kinds") if item_row is not None else None
    refusal = kind_refusal(data.get("kind"), project.kinds, len(candidate_keys or []), declared)
    if refusal is not None:
        raise refusal
    if "item_id" in data and data["item_id"] != item_key:
        raise ServiceError(
            422,
            "item_id does not match the assignment",
            [problem("item_id", f"this assignment is for item {item_key!r}")],
        )
    if "provenance" in data:
        raise ServiceError(
            422,
            "provenance is set by the server",
            [problem("provenance", "do not send provenance; send telemetry beside the judgment")],
        )
    data["item_id"] = item_key
    if (
        data.get("kind") == "pairwise"
        and "shown_order" not in data
        and shown_order
        and len(shown_order) == 2
    ):
        data["shown_order"] = list(shown_order)
    data["provenance"] = {
        "rater_id": username,
        "rubric_id": project.rubric_key,
        "rubric_version": project.rubric_version,
        # the settings (guidelines) version the assignment showed; 0: an assignment from before
        # settings were versioned, not recorded
        "guideline_version": guideline_version or None,
        # the server's record of suggestions served with the lease, never the client's word
        "source": "ai_assisted" if assisted_by else "human",
        "assisted_by": assisted_by or None,
        "started_at": aware(started_at).isoformat() if started_at else None,
        "submitted_at": utcnow().isoformat(),
        "telemetry": telemetry,
        "idempotency_key": idempotency_key,
    }
    try:
        judgment = parse_judgment(data)
    except ValidationError as exc:
        raise ServiceError(422, "the judgment is not valid", _field_errors(exc)) from None
    problems = []
    known = list(candidate_keys or [])
    for cid in judgment.candidate_ids():
        if cid not in known:
            problems.append(
                problem("candidates", f"{cid!r} is not a candidate of this item (has {known})")
            )
    if isinstance(judgment, PairwiseJudgment) and judgment.strength is None:
        # unknown strength is for imported sources that did not record it; a rater always says it
        problems.append(
            problem(
                "strength",
                "say how much better: 1 slightly, 2 better, 3 much better (0 with a tie)",
            )
        )
    if isinstance(judgment, PairwiseJudgment) and shown_order and not problems:
        seen = [c for c in shown_order if c in judgment.shown_order]
        if seen != list(judgment.shown_order):
            problems.append(
                problem("shown_order", f"must follow the order you were shown: {shown_order}")
            )
    if isinstance(judgment, RubricJudgment):
        if rubric is READ_RUBRIC:
            if session is None:
                raise NotCommon("rubric")  # the caller did not read it: the framework does
            rubric = current_rubric(session, project)
        if not isinstance(rubric, Rubric):
            problems.append(
                problem("scores", "this project has no rubric yet; ask an admin to add one")
            )
        else:
            problems += [
                problem(p.split(":")[0], p.split(": ", 1)[-1])
                for p in rubric.check_scores(judgment.scores, judgment.vetoes_failed)
            ]
    if isinstance(judgment, CriteriaJudgment):  # against the item's approved criteria
        if item_row is not None:
            item_meta = item_row.meta
        elif item_meta is READ_RUBRIC:
            raise NotCommon("criteria")  # the item's metadata: read by the framework
        problems += criteria_problems(judgment, item_meta)
    short = rationale_refusal(
        judgment.rationale, policy_of(project.settings or {}).min_rationale_chars
    )
    if short is not None:
        problems.append(short)
    if isinstance(judgment, SpannedJudgment) and judgment.spans:
        if answer_lengths is None:
            if item_row is not None:
                answer_lengths = lengths_of(item_row)
            elif session is not None:
                answer_lengths = read_answer_lengths(session, project.pk, item_key or "")
            else:
                raise NotCommon("spans")  # the caller did not read the answers: the framework does
        problems += span_submit_problems(
            data.get("spans") or [],
            policy_of(project.settings or {}).span_categories,
            answer_lengths,
        )
    if problems:
        raise ServiceError(422, "the judgment does not fit this item or rubric", problems)
    return judgment


def lengths_of(item_row: ItemRow) -> dict[str, int]:
    """``len(Candidate.as_text())`` of each of the item's answers: what span offsets index."""
    item = repo.item_from_row(item_row)
    return {c.id: len(c.as_text()) for c in item.candidates if c.id is not None}


def read_answer_lengths(session: Session, project_pk: int, item_key: str) -> dict[str, int]:
    """:func:`lengths_of` the item ``item_key`` of the project, read through ``session``."""
    project = session.get(Project, project_pk)
    return lengths_of(repo.get_item(session, project, item_key)) if project is not None else {}


def span_submit_problems(
    raw: list[Any], categories: Sequence[str], lengths: Mapping[str, int]
) -> list[dict[str, Any]]:
    """The spans as submitted (indices as the rater sent them, not the stored order) against the
    project's categories and the answers' lengths; ``spans.N.field: reason`` problems."""
    spans = [CritiqueSpan.model_validate(s) for s in raw]  # each already valid: parse passed
    found = span_category_problems(spans, categories) + span_offset_problems(spans, lengths)
    return [problem(field, reason) for field, reason in found]
