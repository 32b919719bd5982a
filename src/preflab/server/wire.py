"""What any value arriving over the wire must satisfy, whatever field it lands in.

PostgreSQL cannot store a NUL character in ``text`` or ``jsonb`` (the driver raises, the
request became a 500), a file name with NUL makes the OS calls raise, and an integer beyond 64
bits overflows the JSON encoder and the database's ``bigint``. One walk over the decoded
request finds all three anywhere in a body (nested judgment bodies and imported items
included); :class:`WireModel` runs it before every request model of the API, and
:class:`RejectNulInUrl` applies the NUL rule to paths and query strings of every route (pages,
API, static files). The fast lane (:mod:`preflab.server.fastlane`) asks :func:`wire_problems`
too and hands anything it flags to the framework, which answers the 422.
"""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import parse_qsl

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

#: The largest magnitude an integer may have: a signed 64-bit ``bigint`` (and what orjson encodes).
MAX_INT = 2**63 - 1

NUL_MESSAGE = "contains a NUL character (\\u0000), which cannot be stored; remove it"
INT_MESSAGE = f"integer out of range: at most {MAX_INT} in magnitude"
FLOAT_MESSAGE = "must be a finite number"


def wire_problems(value: Any, loc: tuple = ()) -> list[tuple[tuple, str, str]]:
    """``(location, error type, message)`` for each value that breaks a wire rule."""
    out: list[tuple[tuple, str, str]] = []
    if isinstance(value, str):
        if "\x00" in value:
            out.append((loc, "nul_character", NUL_MESSAGE))
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        if abs(value) > MAX_INT:
            out.append((loc, "int_out_of_range", INT_MESSAGE))
    elif isinstance(value, float):
        if not math.isfinite(value):
            out.append((loc, "finite_number", FLOAT_MESSAGE))
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and "\x00" in k:
                out.append(((*loc, k), "nul_character", "key " + NUL_MESSAGE))
            out += wire_problems(v, (*loc, k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            out += wire_problems(v, (*loc, i))
    return out


def jsonl_problems(raw: bytes) -> list[tuple[int, str, str]]:
    """``(line, field, message)`` for wire problems in JSON Lines (or one JSON document) text;
    lines that are not JSON are left to the importer, which reports them its own way."""
    if b"\\u0000" not in raw and b"\x00" not in raw and not re.search(rb"\d{19}", raw):
        return []  # the common case: nothing to look at closely
    out = []
    for n, line in enumerate(raw.splitlines(), start=1):
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            if b"\x00" in line:
                out.append((n, "line", NUL_MESSAGE))
            continue
        out += [
            (n, ".".join(str(p) for p in loc) or "record", message)
            for loc, _, message in wire_problems(value)
        ]
    return out


def check_wire(value: Any, title: str) -> None:
    """Raise a pydantic ``ValidationError`` (422 field by field) for every wire problem."""
    problems = wire_problems(value)
    if problems:
        raise ValidationError.from_exception_data(
            title,
            [
                InitErrorDetails(type=PydanticCustomError(kind, message), loc=loc, input="")
                for loc, kind, message in problems
            ],
        )


class WireModel(BaseModel):
    """Base of every request body model: unknown fields refused, wire rules checked first."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _wire_rules(cls, data: Any) -> Any:
        check_wire(data, cls.__name__)
        return data


def _json_error(loc: list, message: str) -> bytes:
    return orjson.dumps(
        {
            "detail": "invalid request",
            "errors": [{"loc": loc, "msg": message, "type": "nul_character"}],
        }
    )


class RejectNulInUrl:
    """422 for a NUL anywhere in the path or a query parameter, before any route runs (pure ASGI)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            loc = None
            if "\x00" in scope.get("path", ""):
                loc = ["path"]
            elif b"%00" in scope.get("query_string", b"") or b"\x00" in scope.get(
                "query_string", b""
            ):
                for name, value in parse_qsl(
                    scope["query_string"].decode("latin-1"), keep_blank_values=True
                ):
                    if "\x00" in name or "\x00" in value:
                        loc = ["query", name.replace("\x00", "\\u0000")]
                        break
            if loc is not None:
                body = _json_error(loc, NUL_MESSAGE)
                await send(
                    {
                        "type": "http.response.start",
                        "status": 422,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
