"""The services' domain errors: what a route answers as an HTTP status with a JSON problem
(:func:`preflab.server.app.create_app` maps them) and a page shows as its error message.

A service raises :class:`ServiceError` with the HTTP status that says what went wrong (404: no
such thing of yours; 409: the state refuses it; 422: the input is wrong, with ``errors`` field
by field). ``JudgingError`` is its older name, kept for callers outside the package (tests,
scripts) that still import it.
"""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """A refused request: ``status`` is the HTTP code, ``errors`` field-by-field problems."""

    def __init__(
        self, status: int, message: str, errors: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.errors = status, message, errors or []


JudgingError = ServiceError
