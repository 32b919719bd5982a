"""Every environment variable preflab reads, with its default, in one place.

:func:`get_settings` reads the environment when it is called, never at import time, so a
variable set after ``import preflab`` (by a test, by ``preflab serve`` for its workers) counts.
``preflab config show`` prints :func:`effective_settings`: each value, where it came from and
secrets masked. Project settings (policy, guidelines) live in the database, not here
(:mod:`preflab.schema.policy`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "PREFLAB_"
DEFAULT_DB_URL = "sqlite:///preflab.db"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

#: How ``config show`` masks a secret field: ``url`` hides a URL's password, ``all`` the value.
_MASK = "mask"


class Settings(BaseSettings):
    """preflab's process configuration: ``PREFLAB_<NAME>`` for each field (``PREFLAB_DB``)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore", frozen=True
    )

    db: str = Field(
        DEFAULT_DB_URL,
        description="Database URL or SQLite path used when a command gets no --db.",
        json_schema_extra={_MASK: "url"},
    )
    log_level: Literal["debug", "info", "warning", "error", "critical"] = Field(
        "warning", description="Lowest level of log records written (to stderr)."
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="Log records as text lines or JSON lines (one object a line)."
    )
    sqlite_page_size: int = Field(
        4096,
        ge=512,
        le=65536,
        description="Page size in bytes of a new SQLite database (an existing file keeps its own).",
    )
    import_worker: bool | None = Field(
        None,
        description="Convert imports in a second process: true/false forces it; unset decides "
        "by file size and idle cores.",
    )
    import_cache_kib: int = Field(
        32 * 1024,
        ge=0,
        description="SQLite page cache of an import's connection, in KiB (bounded: allocated as "
        "it fills, it was the import's memory that grew with the project).",
    )
    header_timeout_s: float = Field(
        10.0, gt=0, description="Seconds a client has to send a request's headers."
    )
    max_upload_decompressed_mb: float = Field(
        64.0,
        gt=0,
        description="The largest a gzipped upload (items file, web import) may be once "
        "decompressed, in MiB; the body limit bounds only the compressed bytes.",
    )
    snapshot_max_age_s: float = Field(
        300.0,
        ge=0,
        description="The dashboard's quality snapshot is recomputed (in a separate process) once "
        "it is older than this many seconds and labels changed since.",
    )
    snapshot_inline_labels: int = Field(
        2000,
        ge=0,
        description="Projects of at most this many judgments get their dashboard "
        "statistics computed in the request (always current); larger ones show the snapshot.",
    )
    server_config: str | None = Field(
        None,
        description="Set by `preflab serve` for its worker processes (the server configuration "
        "as JSON); not meant to be set by hand.",
        json_schema_extra={_MASK: "all"},
    )

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _case_insensitive(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value


def get_settings(**options: Any) -> Settings:
    """The settings now: command-line ``options`` (those not None) over the environment over the
    defaults. A bad value raises :class:`pydantic.ValidationError` naming the variable."""
    return Settings(**{name: value for name, value in options.items() if value is not None})


def env_var(name: str) -> str:
    """The environment variable of a setting: ``db`` -> ``PREFLAB_DB``."""
    return ENV_PREFIX + name.upper()


@dataclass(frozen=True)
class EffectiveSetting:
    name: str
    env_var: str
    value: Any
    source: Literal["default", "env", "option"]
    description: str


def effective_settings(**options: Any) -> list[EffectiveSetting]:
    """Every setting with its value (secrets masked) and source, for ``preflab config show``."""
    settings = get_settings(**options)
    rows = []
    for name, field in Settings.model_fields.items():
        if options.get(name) is not None:
            source: Literal["default", "env", "option"] = "option"
        elif os.environ.get(env_var(name)):
            source = "env"
        else:
            source = "default"
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        value = mask(getattr(settings, name), str(extra.get(_MASK, "")))
        rows.append(EffectiveSetting(name, env_var(name), value, source, field.description or ""))
    return rows


def mask(value: Any, how: str) -> Any:
    """``url``: the URL with its password as ``***``; ``all``: ``***`` for any value set."""
    if value is None or not how:
        return value
    if how == "all":
        return "***"
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(value).render_as_string(hide_password=True)
    except ArgumentError:  # a bare SQLite path has no password
        return value
