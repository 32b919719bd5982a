"""The collection server (``preflab serve``): accounts, projects, assignments, judgments.

The FastAPI app is imported on first use, so ``preflab --help`` and other commands stay quick.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServerConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module 'preflab.server' has no attribute {name!r}")
