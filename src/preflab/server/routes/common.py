"""What every route module shares: the JSON answer, the id in a path, the database of the app,
the request bodies' wire rules."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import orjson
from fastapi import Path as PathParam
from fastapi import Request
from fastapi.responses import Response
from pydantic import Field, model_validator

from ...schema import Rubric, Telemetry
from ..database import Database
from ..wire import WireModel, check_wire

#: A row id in a path: bounded to a signed 64-bit integer (a larger one overflowed the SQLite
#: driver into a 500 instead of a 422; found by the schemathesis fuzz test).
DbId = Annotated[int, PathParam(ge=1, le=2**63 - 1)]

#: Every request body: unknown fields refused, and the wire rules (no NUL, 64-bit integers,
#: finite numbers) checked anywhere in the body before the fields (preflab.server.wire).
Strict = WireModel


def ok(data: Any, status: int = 200) -> Response:
    """The answer as JSON (orjson; the route's ``response_model`` documents its shape)."""
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def db_of(request: Request) -> Database:
    return request.app.state.db


def client_ip(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def idempotency_key(request: Request, body_key: str | None) -> str | None:
    return body_key or request.headers.get("idempotency-key") or None


class RubricIn(Rubric):
    """A rubric body under the same wire rules."""

    @model_validator(mode="before")
    @classmethod
    def _wire_rules(cls, data: Any) -> Any:
        check_wire(data, "Rubric")
        return data


class ReviseIn(Strict):
    """A revised (or edited) answer: the judgment, its telemetry, an idempotency key."""

    judgment: dict[str, Any]
    telemetry: Telemetry | None = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


class ExportIn(Strict):
    format: str = Field(
        default="raw",
        min_length=1,
        max_length=50,
        description="trl-preference, trl-reward, trl-kto, trl-sft, trl-stepwise, openrlhf, verl, raw",
    )
    # the options of `preflab export` (preflab.io.export.ExportOptions), same defaults
    aggregation: str = Field(
        default="majority", max_length=40, description="majority or dawid-skene"
    )
    length_gate: tuple[float, float] | None = Field(
        default=(0.85, 1.20),
        description="[min, max] chosen/rejected length ratio (on by default; null: off)",
    )
    # tokens of the project's policy.length_tokenizer (else MiniLM); no tokenizer path from clients
    length_unit: Literal["tokens", "words", "chars"] = "tokens"
    provenance_columns: bool = Field(
        default=False, description="rater_hash, rubric_version and guideline_version columns"
    )
    min_raters: int = Field(default=1, ge=1, le=100)
    include_ai: bool = False
    include_gold: bool = False
    include_rater_ids: bool = Field(
        default=False, description="raw export: rater ids instead of HMAC hashes"
    )
    # issue 28: everything `preflab export` offers, the tokenizer path excepted (see above)
    file_format: Literal["jsonl", "parquet", "hf"] = "jsonl"
    conversational: bool | None = Field(
        default=None, description="chat-message rows (null: follow the prompts)"
    )
    include_flagged: bool = Field(
        default=False,
        description="keep labels whose telemetry is strong evidence (a weak flag never removes "
        "a label)",
    )
    min_alpha: float | None = Field(
        default=None, ge=0, le=1, description="agreement floor (null: policy.min_alpha)"
    )
    force: bool = Field(
        default=False, description="write even below the agreement floor (marked in the card)"
    )
    drop_disagreement: float | None = Field(
        default=None, gt=0, le=1, description="drop pairs whose winning share is below this"
    )
    require_reference: bool = Field(
        default=False, description="verl: export only items with a reference answer"
    )
    data_source: str | None = Field(
        default=None, min_length=1, max_length=200, description="verl: data_source of every row"
    )
