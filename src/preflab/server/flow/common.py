"""What every part of the flow shares: the lane's "hand it on" signals and aware datetimes."""

from __future__ import annotations

from datetime import UTC, datetime


class NotCommon(Exception):
    """The fast lane cannot answer this request (the caller is not authenticated or not
    allowed, its lock is busy, a step needs the framework's session): the lane's executor
    rolls back and the FastAPI route answers, running the same flow after its guard."""


class Changed(NotCommon):
    """A guarded write found the rows changed since they were read (a race lost): the
    framework's executor runs the flow again; the lane hands the request on."""


def aware(dt: datetime) -> datetime:
    """A datetime with a time zone (SQLite gives naive UTC datetimes back)."""
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)
