"""Candidate text statistics computed at write time, and the backfill (issue 27, CPU).

A candidate's text never changes once written, yet every export measured each answer's tokens
for the length gate (with a digest of it for the cache key) and every report each distinct
answer's word length and formatting features. :func:`fill` computes them once into
``candidate_text_stats`` (:class:`preflab.store.models.CandidateTextStats`) for the candidates
that have no current row: the token count under the default tokenizer
(:func:`preflab.quality.bias.default_token_length`, a batch at a time through its batch API),
``word_length`` and the five :func:`~preflab.quality.bias.text_features`, of the text its
``as_text()`` gives. The import calls it for the candidates it added, in its own transaction
(:func:`preflab.io.importer.api.import_files`: every writer of items, the server's included,
goes through it); ``preflab db text-stats`` for a database written before (or by a path that
does not, e.g. ``repo.add_item``): keyset-ordered batches by candidate pk, each committed, so it
runs in constant memory, can stop anywhere and resume, and does nothing the second time. Rows of
another version (another tokenizer, a changed feature code) are replaced.

Readers take what is stored and compute the rest (:mod:`preflab.quality.text_stats`), so they
are right before, during and after a backfill.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
from sqlalchemy import Table, bindparam, delete, text
from sqlalchemy.orm import Session

from ..quality import text_stats as stored_text
from ..quality.bias import default_token_length, text_features, word_length
from ..store.models import CandidateTextStats
from ..store.text_stats import version_pk

#: Candidates read, measured and written at a time.
BATCH = 5_000

#: the columns :func:`fill` writes, in order
COLUMNS = ("candidate_pk", *stored_text.STATS_COLUMNS)

_STATS: Table = CandidateTextStats.__table__  # type: ignore[assignment]

_MISSING = text(
    "SELECT c.pk, c.text, c.messages, s.version_pk FROM candidates c "
    "LEFT JOIN candidate_text_stats s ON s.candidate_pk = c.pk "
    "WHERE c.pk > :after AND (s.version_pk IS NULL OR s.version_pk != :version) "
    "ORDER BY c.pk LIMIT :n"
)


def token_length() -> tuple[Callable[[list[str]], list[int]] | None, str]:
    """The default tokenizer's batch count and fingerprint; ``(None, "")`` when it is not
    installed (then no token counts are stored: readers tokenize)."""
    try:
        fn = default_token_length()
    except ValueError:
        return None, ""
    return fn.batch, fn.fingerprint  # type: ignore[attr-defined]


def compute(
    texts: Sequence[str], batch: Callable[[list[str]], list[int]] | None
) -> list[tuple[int | None, int, int, int, int, int, int]]:
    """``(tokens, words, headers, bullets, bold, sycophancy, opening_validation)`` of each text,
    exactly as the readers' functions give them (tokens None without a tokenizer)."""
    tokens: list[int | None] = (
        list(batch(list(texts))) if batch is not None else [None] * len(texts)
    )
    out = []
    for t, n in zip(texts, tokens, strict=True):
        f = text_features(t)
        out.append(
            (n, word_length(t), f["headers"], f["bullets"], f["bold"], f["sycophancy"],
             f["opening_validation"])
        )  # fmt: skip
    return out


def _as_text(value: str | None, messages: Any) -> str:
    """``Candidate.as_text()`` from the stored columns."""
    if value is not None:
        return value
    if isinstance(messages, (str, bytes)):
        messages = orjson.loads(messages)
    return "\n\n".join(m.get("content", "") for m in messages or [] if m.get("role") == "assistant")


def fill(
    session: Session,
    *,
    after: int = 0,
    batch: int = BATCH,
    commit: bool = False,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Compute the statistics of every candidate with pk above ``after`` that has no current
    row; returns how many. ``commit``: commit each batch (a backfill: resumable, constant
    memory); else all stay in the caller's transaction (an import)."""
    count_batch, fingerprint = token_length()
    version = version_pk(session, fingerprint)
    if commit:
        session.commit()
    mark = "?" if session.get_bind().dialect.paramstyle == "qmark" else "%s"
    insert_sql = (
        f"INSERT INTO candidate_text_stats ({', '.join(COLUMNS)}) "
        f"VALUES ({', '.join([mark] * len(COLUMNS))})"
    )
    done = 0
    while True:
        rows = session.execute(_MISSING, {"after": after, "version": version, "n": batch}).all()
        if not rows:
            return done
        stale = [pk for pk, _, _, old in rows if old is not None]
        if stale:
            session.execute(
                delete(_STATS).where(_STATS.c.candidate_pk.in_(bindparam("pks", expanding=True))),
                {"pks": stale},
            )
        values = compute([_as_text(t, m) for _, t, m, _ in rows], count_batch)
        # the driver's executemany of plain tuples (SQLAlchemy's per-row parameter processing
        # was a fifth of this function's CPU)
        session.connection().exec_driver_sql(
            insert_sql, [(pk, version, *v) for (pk, *_), v in zip(rows, values, strict=True)]
        )
        if commit:
            session.commit()
        done += len(rows)
        after = rows[-1][0]
        if progress is not None:
            progress(done)
