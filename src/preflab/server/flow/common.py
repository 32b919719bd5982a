"""What every part of the flow shares: the "not the common case" signal and aware datetimes."""

from __future__ import annotations

from datetime import UTC, datetime


class NotCommon(Exception):
    """Not the common case: the executor rolls back and the framework path (ORM) answers,
    deciding with the same rule functions."""


def aware(dt: datetime) -> datetime:
    """A datetime with a time zone (SQLite gives naive UTC datetimes back)."""
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)
