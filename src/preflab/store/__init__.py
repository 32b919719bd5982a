"""Persistence: SQLAlchemy models, Alembic migrations, engines and sessions."""

from .db import default_url, make_engine, normalise_url, session_factory, transaction
from .models import (
    Base,
    CandidateRow,
    ExportLog,
    ImportBatch,
    ItemRow,
    JudgmentRow,
    Project,
    Rater,
    RubricVersion,
)
from . import server_models  # noqa: F401  (registers the server tables on Base.metadata)

__all__ = [
    "Base",
    "CandidateRow",
    "ExportLog",
    "ImportBatch",
    "ItemRow",
    "JudgmentRow",
    "Project",
    "Rater",
    "RubricVersion",
    "default_url",
    "make_engine",
    "normalise_url",
    "session_factory",
    "transaction",
]
