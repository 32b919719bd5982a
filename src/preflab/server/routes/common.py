"""What every route module shares: the JSON answer, the id in a path, the database of the app,
the request bodies' wire rules."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import Path as PathParam
from fastapi import Request
from fastapi.responses import Response
from pydantic import model_validator

from ...schema import Rubric
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
