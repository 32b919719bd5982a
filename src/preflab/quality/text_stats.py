"""Stored text statistics of candidates, handed from the rows read to the code that needs them.

A leaf module (no import beyond the standard library): the store's reader
(:func:`preflab.store.repo.iter_raw_chunks`) fills :data:`MEMO`, the export and the report read
it, and nothing here needs a database.

A candidate's text never changes once written (items are content-identified), so its statistics
are computed once, when it is written (:mod:`preflab.io.text_stats`), and kept in
``candidate_text_stats`` (:class:`preflab.store.models.CandidateTextStats`): its token count under the
default tokenizer, its word length, its five formatting features. The readers are far from the
rows: the export's length gate measures ``candidate.as_text()`` strings
(:class:`preflab.io.export.token_cache.CachedLength`), the report's
:class:`preflab.quality.accumulate.TextFeatures` does too. :data:`MEMO` joins them without a
new parameter through the code between: :func:`preflab.store.repo.iter_raw_chunks` puts each
row's stored statistics under its text, and the readers look a text up there before computing.

The memo is keyed by the text itself. A text is one ``str`` object from the row to the reader
(``as_text()`` returns the stored text), so a look-up reuses the hash computed when it was put
(cached in the object) and compares by identity: no digest, no tokenization. Its values are a
function of the text alone, so one memo serves every reader and thread of the process (a
look-up that finds nothing, or a value another tokenizer made, computes as before). It holds two
generations of :data:`GENERATION` texts (the current chunks'), the older dropped whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: The version of :func:`preflab.quality.bias.text_features` and ``word_length`` that stored
#: values are of: bump it with any change to either (stored rows of another version are
#: ignored by the readers and recomputed by ``preflab db text-stats``).
FEATURES_VERSION = 1

#: Texts a generation of :data:`MEMO` holds (a chunk of an export is 2,000 items, of a report
#: 1,000: a few thousand texts).
GENERATION = 16_384

#: The statistics columns of ``candidate_text_stats`` in the order the readers get them.
STATS_COLUMNS = (
    "version_pk",
    "tokens",
    "words",
    "headers",
    "bullets",
    "bold",
    "sycophancy",
    "opening_validation",
)

#: One text's stored statistics: ``(tokenizer fingerprint, tokens or None, words, features)``,
#: the features in :data:`preflab.quality.bias.FEATURE_NAMES` order.
Stats = tuple[str, int | None, int, tuple[int, int, int, int, int]]


class StatsMemo:
    """Stored statistics by text, in two bounded generations (see the module docstring)."""

    def __init__(self, size: int = GENERATION) -> None:
        self.size = size
        self.young: dict[str, Stats] = {}
        self.old: dict[str, Stats] = {}

    def get(self, text: str) -> Stats | None:
        found = self.young.get(text)
        if found is None:
            found = self.old.get(text)
        return found

    def put(self, text: str, stats: Stats) -> None:
        young = self.young
        if len(young) >= self.size:
            self.old, self.young = young, {}
            young = self.young
        young[text] = stats

    def clear(self) -> None:
        self.young, self.old = {}, {}

    def remember(
        self, rows: Iterable[Any], versions: dict[int, str], text_at: int, stats_at: int
    ) -> None:
        """Put the statistics of candidate ``rows`` (a row's text at ``text_at``, its
        :data:`STATS_COLUMNS` from ``stats_at``) whose version is one of ``versions`` (version
        pk -> tokenizer fingerprint, those of the current :data:`FEATURES_VERSION`)."""
        put = self.put
        for row in rows:
            text = row[text_at]
            if text is None:  # a message list: its as_text() is a new string each time
                continue
            fingerprint = versions.get(row[stats_at])
            if fingerprint is None:  # no stored row, or one of another feature version
                continue
            put(
                text,
                (
                    fingerprint,
                    row[stats_at + 1],
                    row[stats_at + 2],
                    tuple(row[stats_at + 3 : stats_at + 8]),
                ),
            )


#: The process's memo (see the module docstring).
MEMO = StatsMemo()
