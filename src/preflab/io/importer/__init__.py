"""Import records into a project: streamed, validated, all-or-nothing, idempotent.

>>> report = import_files(engine, "demo", [Path("to_label.jsonl")])      # doctest: +SKIP
>>> report.items_added, report.judgments_added                           # doctest: +SKIP

How it works, one module a step:

1. The files' bytes are hashed (SHA-256). A project that already has an import batch with that
   hash has seen these files: nothing is read, ``already_imported=True`` (:mod:`.api`).
2. Records are streamed (:mod:`preflab.io.readers`), each converted by the first record format
   that recognises it (:mod:`preflab.io.formats`) into item and judgment rows
   (:mod:`preflab.store.rows`) (:mod:`.convert`); large files by a second process
   (:mod:`.worker`).
3. Every ``CHUNK`` records, existing items, judgments and raters are looked up with ``IN``
   queries (:mod:`.loader`), each record is checked (:mod:`.checks`: conflicting item ids,
   unknown items or candidates, judgment kinds the project does not collect, rubric scores; the
   very checks ``validate`` runs against the files alone), and the accepted rows are written in
   bulk (:mod:`.writer`: ``executemany`` on SQLite, ``COPY`` on PostgreSQL). When a second
   process converts for a SQLite import, it stages the plain comparisons' rows in a SQLite image
   and the writer moves the accepted ones with ``INSERT ... SELECT`` (:mod:`.stage`); a chunk
   of comparisons that repeats nothing within itself or of what the import wrote before (the
   converting process keeps a filter of the keys it saw) is accepted whole, without a Python
   object a row (:class:`.worker.StagedChunk`). A plain comparison of an item met before (an
   item judged by several raters) is decided on the same lean path as a new one, staged or not
   (:meth:`.loader.Loader.load`). On SQLite the import's own connection checks
   foreign keys once, for the rows it added, before the commit
   (:mod:`preflab.store.bulk`).
4. Everything happens in one transaction. Any problem fails the whole import and changes nothing
   (:class:`ImportFailed` lists ``file:line: field: reason``), unless ``skip_invalid``: then bad
   records are left out and listed in the report and in the batch's ``counts``.

Identity: an item is its ``id``, derived when the record has none from its prompt and the *set* of
its answers after the normalisation of :mod:`preflab.schema.identity` (NFC, surrounding
whitespace, one-message chats = their text), so the same pair written in any shape or judged in
either direction is one item. The same id with the same (normalised) content is counted as
existing, with different content it is a problem. A record with another id but the content of an
item already known joins that item, its id kept as an alias (``item_aliases``) that later
records and judgments may name (:func:`.checks.joined_item`). A judgment is its content hash (or
its idempotency key): importing it again adds nothing.

Raises :class:`preflab.store.repo.NotFound` when the project does not exist.
"""

from __future__ import annotations

from .api import files_hash, import_files, validate_files
from .options import (
    ImportFailed,
    ImportOptions,
    ImportReport,
    Problem,
    ValidationReport,
    labeler_lines,
)
from .worker import WorkerFailed

__all__ = [
    "ImportFailed",
    "ImportOptions",
    "ImportReport",
    "Problem",
    "ValidationReport",
    "WorkerFailed",
    "files_hash",
    "import_files",
    "labeler_lines",
    "validate_files",
]
