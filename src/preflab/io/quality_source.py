"""Feed the quality report from a project in the store or from a raw-export JSONL file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..schema import Item, JudgmentBase


def load_for_report(
    source: str, db: str | None
) -> tuple[list[JudgmentBase], dict[str, Item], dict[str, Any]]:
    """``(judgments, items by id, import batch per item id)`` for :func:`preflab.quality.report.build_report`.

    ``source`` is a path to a JSONL of judgments (each line as ``parse_judgment`` accepts, with an
    optional ``"item"``), or else the name of a project in the database ``db``.
    """
    path = Path(source)
    if path.suffix in {".jsonl", ".gz", ".json"} or path.is_file():
        if not path.is_file():
            raise OSError(f"{source}: no such file")
        from ..quality.report import load_judgments_jsonl

        judgments, items = load_judgments_jsonl(path)
        return judgments, items, {}
    return load_project(source, db)


def load_project(
    name: str, db: str | None
) -> tuple[list[JudgmentBase], dict[str, Item], dict[str, Any]]:
    from ..store import repo, transaction
    from ..store.db import default_url, open_db
    from .export.writers import gc_paused

    judgments: list[JudgmentBase] = []
    items: dict[str, Item] = {}
    batches: dict[str, Any] = {}
    # gc paused: every item and judgment stays alive, full collections would walk them over and over
    with transaction(open_db(db or default_url())) as session, gc_paused():
        try:
            project = repo.get_project(session, name)
        except repo.NotFound as exc:
            raise LookupError(f"{exc} (or give a path to a JSONL of judgments)") from None
        for record in repo.iter_items_with_judgments(session, project):
            items[record.item.id] = record.item
            # agreement is reported per import batch of the item (the quality engine's `batches`)
            batches[record.item.id] = (
                f"batch {record.batch_pk}" if record.batch_pk is not None else "none"
            )
            judgments.extend(record.judgments)
    return judgments, items, batches
