"""Persistence: SQLAlchemy models, Alembic migrations, engines and sessions."""

from . import server_models  # registers the server tables on Base.metadata
from .db import (
    current_revision,
    default_url,
    downgrade,
    make_engine,
    normalise_url,
    open_db,
    session_factory,
    transaction,
    upgrade,
)
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
    "current_revision",
    "default_url",
    "downgrade",
    "make_engine",
    "normalise_url",
    "open_db",
    "session_factory",
    "transaction",
    "upgrade",
]
