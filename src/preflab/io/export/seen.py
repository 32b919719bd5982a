"""Which keys an export has already written, in memory that does not grow with the export.

``rollouts`` writes a model's answer to a prompt once, however many items repeat it: it must
remember a 16-byte digest of every answer written. :class:`SeenKeys` keeps up to ``memory``
keys in a set; when the set is full they move to a private temporary SQLite database on disk
(``sqlite3.connect("")``: a file SQLite deletes on close, its page cache bounded by SQLite's
default of ~2 MB), and lookups check the set, then the table. The answer to "seen before?" is
the same as a set's at any size.
"""

from __future__ import annotations

import sqlite3

#: keys held in memory before they move to disk (~75 bytes each in a Python set)
SEEN_IN_MEMORY = 100_000


class SeenKeys:
    """A set of ``bytes`` keys that spills to a temporary on-disk SQLite table."""

    def __init__(self, memory: int | None = None) -> None:
        self.memory = SEEN_IN_MEMORY if memory is None else memory
        self._recent: set[bytes] = set()
        self._db: sqlite3.Connection | None = None
        self.spilled = 0

    def add(self, key: bytes) -> bool:
        """Add ``key``; True when it was not there before."""
        if key in self._recent or self._on_disk(key):
            return False
        self._recent.add(key)
        if len(self._recent) >= max(self.memory, 1):
            self._spill()
        return True

    def _on_disk(self, key: bytes) -> bool:
        if self._db is None:
            return False
        found = self._db.execute("SELECT 1 FROM seen WHERE key = ?", (key,)).fetchone()
        return found is not None

    def _spill(self) -> None:
        if self._db is None:
            self._db = sqlite3.connect("")
            self._db.execute("CREATE TABLE seen (key BLOB PRIMARY KEY) WITHOUT ROWID")
        with self._db:
            self._db.executemany("INSERT INTO seen VALUES (?)", ((k,) for k in self._recent))
        self.spilled += len(self._recent)
        self._recent.clear()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __len__(self) -> int:
        return self.spilled + len(self._recent)
