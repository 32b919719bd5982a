"""Fixtures shared by the export tests (``tests/io`` is not a package: its test modules cannot
import each other's fixtures, pytest finds these by name)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from preflab.io.export import manifest as export_manifest
from preflab.io.export import stream


class _Clock(datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def frozen_clock(monkeypatch):
    """The manifest's and the card's ``created_at``: the only bytes two runs may differ in."""
    monkeypatch.setattr(export_manifest, "datetime", _Clock)


@pytest.fixture
def small_chunks(monkeypatch):
    """Pass 2 a few items at a time (3), so that every chunk boundary is crossed."""
    monkeypatch.setattr(stream, "CHUNK_ITEMS", 3)
