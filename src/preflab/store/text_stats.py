"""The stored versions of candidate text statistics (``text_stats_versions``, migration 0022).

The statistics themselves are computed by :mod:`preflab.io.text_stats` and handed to the
readers by :mod:`preflab.quality.text_stats`; here, which stored rows are current.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..quality.text_stats import FEATURES_VERSION
from .models import TextStatsVersion


def current_versions(session: Session) -> dict[int, str]:
    """``version pk -> tokenizer fingerprint`` of the stored versions of the current
    :data:`~preflab.quality.text_stats.FEATURES_VERSION` (the rows whose values readers take)."""
    v = TextStatsVersion.__table__.c
    rows = session.execute(
        select(v.pk, v.tokenizer).where(v.features_version == FEATURES_VERSION)
    ).all()
    return {pk: tokenizer for pk, tokenizer in rows}


def version_pk(session: Session, tokenizer: str) -> int:
    """The pk of the version ``(FEATURES_VERSION, tokenizer)``, added when missing."""
    v = TextStatsVersion.__table__.c
    stmt = select(v.pk).where(v.features_version == FEATURES_VERSION, v.tokenizer == tokenizer)
    pk = session.scalar(stmt)
    if pk is None:
        session.add(TextStatsVersion(features_version=FEATURES_VERSION, tokenizer=tokenizer))
        session.flush()
        pk = session.scalar(stmt)
    assert pk is not None
    return int(pk)
