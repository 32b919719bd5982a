"""The collection server (``preflab serve``): accounts, projects, assignments, judgments."""

from .app import ServerConfig, create_app

__all__ = ["ServerConfig", "create_app"]
