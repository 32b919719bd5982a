"""Logging for the CLI and the server: text lines or JSON lines on stderr.

Library modules only create their logger (``log = logging.getLogger(__name__)``) and log; the
entry points (the ``preflab`` command, each server worker) call :func:`configure_logging` once.
A JSON line holds ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, every field
passed with ``extra=`` and, for an exception, ``exception`` (the traceback)::

    log.info("import done", extra={"project": "p", "judgments": 1200})
    {"time": "2026-11-30T18:40:01.123+00:00", "level": "info", "logger": "preflab.io.importer",
     "message": "import done", "project": "p", "judgments": 1200}
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: Attributes every LogRecord has: anything else on a record came in through ``extra=``.
_RECORD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
) | {"message", "asctime", "taskName", "color_message"}  # uvicorn's copy with ANSI colours


class JsonFormatter(logging.Formatter):
    """One JSON object a line; values JSON cannot hold are written as their ``str``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class _PreflabHandler(logging.StreamHandler[TextIO]):
    """The handler :func:`configure_logging` installs (a second call replaces it). Without a
    stream it writes to whatever ``sys.stderr`` is at each record (a test runner swaps it)."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__(stream)
        self._follow_stderr = stream is None

    def emit(self, record: logging.LogRecord) -> None:
        if self._follow_stderr:
            self.stream = sys.stderr
        super().emit(record)


def configure_logging(
    level: str = "warning", *, json: bool = False, stream: TextIO | None = None
) -> None:
    """Send log records at ``level`` and above to ``stream`` (stderr), as JSON lines or text.

    Installs one handler on the root logger (so uvicorn's and the libraries' records share the
    format) and replaces the one an earlier call installed; other handlers are left alone."""
    numeric = logging.getLevelNamesMapping().get(level.upper())
    if numeric is None:
        raise ValueError(f"log level {level!r}: use one of debug, info, warning, error, critical")
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _PreflabHandler)]:
        root.removeHandler(old)
    handler = _PreflabHandler(stream)
    handler.setFormatter(JsonFormatter() if json else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(numeric)
