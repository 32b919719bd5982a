"""Feed the quality report from a project in the store or from a raw-export JSONL file.

The report streams (issue 27): :func:`report_from_store` reads the project item by item in
keyset-ordered chunks of item pks (:func:`preflab.store.repo.iter_items_with_judgments`, one
chunk of items and their judgments in memory at a time) and :func:`report_from_jsonl` reads the
file once, an item's consecutive lines at a time; both fold each item into
:class:`preflab.quality.accumulate.ReportAccumulator`. :func:`load_for_report` and
:func:`load_project` still load everything (the reference ``build_report`` takes, and the demo).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.orm import Session

from ..quality.accumulate import Bounds, ReportAccumulator
from ..quality.accumulate_columns import (
    PlainItem,
    ScoresCache,
    add_plain_items,
    columns_apply,
    plain_item,
)
from ..quality.anchoring import AnchoringTally
from ..quality.table import time_window_batches
from ..schema import Item, JudgmentBase, parse_judgment
from .gc_pause import gc_paused
from .quality_read import Flags, iter_lean_chunks

#: items folded between two sweeps of the youngest generation while the collector is paused
SWEEP_ITEMS = 2000


def is_jsonl_source(source: str) -> bool:
    """Whether ``source`` names a JSONL of judgments rather than a project."""
    path = Path(source)
    return path.suffix in {".jsonl", ".gz", ".json"} or path.is_file()


def load_for_report(
    source: str, db: str | None
) -> tuple[list[JudgmentBase], dict[str, Item], dict[str, Any]]:
    """``(judgments, items by id, import batch per item id)`` for :func:`preflab.quality.report.build_report`.

    ``source`` is a path to a JSONL of judgments (each line as ``parse_judgment`` accepts, with an
    optional ``"item"``), or else the name of a project in the database ``db``.
    """
    path = Path(source)
    if is_jsonl_source(source):
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
            items[record.item.key] = record.item
            # agreement is reported per import batch of the item (the quality engine's `batches`)
            batches[record.item.key] = (
                f"batch {record.batch_pk}" if record.batch_pk is not None else "none"
            )
            judgments.extend(record.judgments)
    return judgments, items, batches


def report_from_store(
    session_or_url: Session | str | None,
    project: str,
    *,
    window: timedelta | None = None,
    include_ai: bool = False,
    n_boot: int = 200,
    bounds: Bounds | None = None,
) -> dict[str, Any]:
    """The quality report of ``project``, streamed from the database (a session, whose
    transaction it reads in, or a URL; ``None``: the default database). Agreement per import
    batch of the item, or per submission-time ``window``. Raises ``LookupError`` for an
    unknown project."""
    from ..store import transaction
    from ..store.db import default_url, open_db

    if isinstance(session_or_url, Session):
        return _report_in(session_or_url, project, window, include_ai, n_boot, bounds)
    engine = open_db(session_or_url or default_url())
    try:
        with transaction(engine) as session:
            if session.get_bind().dialect.name == "postgresql":
                # one snapshot for the whole read, as the exporter's
                session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            return _report_in(session, project, window, include_ai, n_boot, bounds)
    finally:
        engine.dispose()


def _report_in(
    session: Session,
    name: str,
    window: timedelta | None,
    include_ai: bool,
    n_boot: int,
    bounds: Bounds | None,
) -> dict[str, Any]:
    from ..quality.report import finish_report
    from ..store import repo

    flags = Flags()
    acc = _accumulate(
        session,
        name,
        window=window,
        include_ai=include_ai,
        n_boot=n_boot,
        bounds=bounds,
        flags=flags,
    )
    report = finish_report(acc)
    # a project a model judge labelled gets the judges' audit (a section of its own: every other
    # figure of the report is what it was; a project with no judge labels has no such key); the
    # lean read saw every judgment's judge and assistance (excluded ones too), otherwise the
    # table is asked
    project = repo.get_project(session, name)
    lean = flags.read
    if flags.judge if lean else has_judge_labels(session, project.pk):
        report["judges"] = judge_section(session, project, n_boot=n_boot)
    # AI assistance: the anchoring audit
    if flags.assisted if lean else has_assisted_labels(session, project.pk):
        report["anchoring"] = anchoring_section(session, project)
    return report


def accumulate_in(
    session: Session,
    name: str,
    *,
    window: timedelta | None = None,
    include_ai: bool = False,
    n_boot: int = 200,
    bounds: Bounds | None = None,
) -> ReportAccumulator:
    """Every item of project ``name`` folded, as it is read in ``session``'s transaction, into
    a :class:`~preflab.quality.accumulate.ReportAccumulator`: the report's state, whose
    :meth:`~preflab.quality.accumulate.ReportAccumulator.result` is the report and whose
    kept figures (the length pairs) the dashboard draws. Raises ``LookupError`` for an
    unknown project."""
    return _accumulate(
        session,
        name,
        window=window,
        include_ai=include_ai,
        n_boot=n_boot,
        bounds=bounds,
        flags=Flags(),
    )


def _accumulate(
    session: Session,
    name: str,
    *,
    window: timedelta | None,
    include_ai: bool,
    n_boot: int,
    bounds: Bounds | None,
    flags: Flags,
) -> ReportAccumulator:
    """:func:`accumulate_in`, ``flags`` set by the lean read (``flags.read``) when it is made."""
    from ..store import repo

    try:
        project = repo.get_project(session, name)
    except repo.NotFound as exc:
        raise LookupError(f"{exc} (or give a path to a JSONL of judgments)") from None
    batch_of: dict[str, str] = {}  # the current chunk's items only
    batches: dict[str, str] | Callable[[JudgmentBase], str] = (
        time_window_batches(window) if window is not None else batch_of
    )
    acc = ReportAccumulator(batches=batches, n_boot=n_boot, include_ai=include_ai, bounds=bounds)
    # the cyclic collector paused (as an export's read): the accumulator's long-lived state
    # (kept units, rationales, text caches) was walked by each automatic collection, ~15 % of
    # the report's CPU; the youngest generation is swept every SWEEP_ITEMS items and after each
    # chunk, so a cycle made while folding an item (none is known) does not outlive its chunk
    with gc_paused():
        if columns_apply(acc):
            flags.read = True
            _fold_lean(session, project, acc, batch_of, flags)
        else:
            _fold_raw(session, project, acc, batch_of)
    return acc


def _fold_lean(
    session: Session,
    project: Any,
    acc: ReportAccumulator,
    batch_of: dict[str, str],
    flags: Flags,
) -> None:
    """The project read lean (io/quality_read.py): plain pairwise items folded from their
    columns (quality/accumulate_columns.py), consecutive ones of a chunk together
    (add_plain_items: the same state as one item at a time, the run folded before any other
    item goes through add); every other item built from its full rows and added."""
    from ..store import repo

    scores = ScoresCache()
    batch_names: dict[Any, str] = {}  # an import batch's name by its pk
    n = 0
    run: list[PlainItem] = []
    for part in iter_lean_chunks(session, project, acc.include_ai, flags):
        not_plain = part.not_plain
        rows, part.items = part.items, []
        for pk, key, has_gold, batch_pk in rows:
            n += 1
            cands = part.candidates.pop(pk)
            judged = part.judgments.pop(pk)
            batch = batch_names.get(batch_pk)
            if batch is None:
                batch = f"batch {batch_pk}" if batch_pk is not None else "none"
                batch_names[batch_pk] = batch
            if pk not in not_plain and plain_item(judged, cands, has_gold):
                run.append((key, judged, cands, batch))
                continue
            if run:
                add_plain_items(acc, run, scores)
                run = []
            full, full_rows = part.full()
            record = repo.item_with_judgments(
                full_rows[pk], full.candidates[pk], full.judgments[pk], full.raw_json
            )
            batch_of.clear()
            if record.item.id is not None:
                # agreement is reported per import batch of the item
                batch_of[record.item.id] = batch
            acc.add(record.judgments, record.item)
            if n % SWEEP_ITEMS == 0:
                gc.collect(0)
        if run:
            add_plain_items(acc, run, scores)
            run = []
        gc.collect(0)


def _fold_raw(
    session: Session, project: Any, acc: ReportAccumulator, batch_of: dict[str, str]
) -> None:
    """Every item built from its stored rows and added (a time-window report)."""
    from ..store import repo

    n = 0
    for part in repo.iter_raw_chunks(session, project):
        raw = part.raw_json
        rows, part.items = part.items, []
        for row in rows:
            n += 1
            pk, batch_pk = row[0], row[8]
            record = repo.item_with_judgments(
                row, part.candidates.pop(pk), part.judgments.pop(pk), raw
            )
            batch_of.clear()
            if record.item.id is not None:
                batch_of[record.item.id] = f"batch {batch_pk}" if batch_pk is not None else "none"
            acc.add(record.judgments, record.item)
            if n % SWEEP_ITEMS == 0:
                gc.collect(0)
        gc.collect(0)


def has_judge_labels(session: Session, project_pk: int) -> bool:
    from sqlalchemy import select

    from ..store import JudgmentRow

    return (
        session.scalar(
            select(JudgmentRow.pk)
            .where(JudgmentRow.project_pk == project_pk, JudgmentRow.judge.is_not(None))
            .limit(1)
        )
        is not None
    )


def has_assisted_labels(session: Session, project_pk: int) -> bool:
    """Whether any label was made with a suggestion in view (``judgments.assisted_by``, 0018)."""
    from sqlalchemy import select

    from ..store import JudgmentRow

    return (
        session.scalar(
            select(JudgmentRow.pk)
            .where(JudgmentRow.project_pk == project_pk, JudgmentRow.assisted_by.is_not(None))
            .limit(1)
        )
        is not None
    )


def anchoring_section(session: Session, project: Any) -> dict[str, Any] | None:
    """The anchoring audit of AI assistance (``quality.anchoring``) over the project's labels
    that are not excluded, with their stored ids (what a suggestion names), item by item."""
    from ..store import repo

    tally = AnchoringTally()
    for record in repo.iter_items_with_judgments(session, project):
        tally.add_item(record.judgments, [m.get("pk") for m in record.meta])
    return tally.result()


def judge_section(
    session: Session,
    project: Any,
    *,
    families: dict[str, str] | None = None,
    n_boot: int = 1000,
) -> dict[str, Any]:
    """The judges' audit of a project (``quality.judges.judge_audit``): every item, and every
    judgment with whether it is excluded (a judge's order-inconsistent verdicts are)."""
    from ..quality.judges import judge_audit
    from ..store import repo

    items: list[Item] = []
    judgments: list[JudgmentBase] = []
    excluded: list[bool] = []
    for record in repo.iter_items_with_judgments(session, project, include_excluded=True):
        items.append(record.item)
        judgments.extend(record.judgments)
        excluded.extend(bool(m.get("excluded")) for m in record.meta)
    return judge_audit(items, judgments, excluded, families=families, n_boot=n_boot)


def iter_jsonl_items(path: str | Path) -> Iterator[tuple[list[JudgmentBase], Item | None]]:
    """A JSONL of judgments (as :func:`preflab.quality.report.load_judgments_jsonl` reads) one
    item at a time, in one pass: consecutive lines of one item id form the item, whose
    ``"item"`` any of them may carry. Raises ``ValueError`` (``file:line: reason``) on a bad
    line, and when an item's lines are not consecutive (``NotGrouped``)."""
    current: str | None = None
    judgments: list[JudgmentBase] = []
    item: Item | None = None
    done: set[str] = set()
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                data = orjson.loads(line)
                raw_item = data.pop("item", None)
                j = parse_judgment(data)
                parsed = Item.model_validate(raw_item) if raw_item is not None else None
            except Exception as exc:  # report where, then re-raise as a clear error
                raise ValueError(f"{path}:{n}: {exc}") from exc
            if j.item_id != current:
                if current is not None:
                    done.add(current)
                    yield judgments, item
                if j.item_id in done:
                    raise NotGrouped(f"{path}:{n}: item {j.item_id!r} again after other items")
                current, judgments, item = j.item_id, [], None
            judgments.append(j)
            if parsed is not None and parsed.id == j.item_id:
                item = parsed
            elif parsed is not None:
                raise NotGrouped(
                    f"{path}:{n}: carries item {parsed.id!r} on a line of {j.item_id!r}"
                )
    if current is not None:
        yield judgments, item


class NotGrouped(ValueError):
    """A JSONL whose lines are not grouped by item (the one-pass reader needs them grouped)."""


def report_from_jsonl(
    path: str | Path,
    *,
    window: timedelta | None = None,
    include_ai: bool = False,
    n_boot: int = 200,
    bounds: Bounds | None = None,
) -> dict[str, Any]:
    """The quality report of a JSONL of judgments: one pass over the file when each item's lines
    are consecutive (as ``export --format raw`` writes them); otherwise the file is read whole
    into memory and measured with :func:`preflab.quality.report.build_report`, as before."""
    from ..quality.report import build_report, load_judgments_jsonl, report_from_items

    batches = time_window_batches(window) if window is not None else None
    try:
        return report_from_items(
            iter_jsonl_items(path),
            batches=batches,
            include_ai=include_ai,
            n_boot=n_boot,
            bounds=bounds,
        )
    except NotGrouped:
        judgments, items = load_judgments_jsonl(path)
        return build_report(
            judgments, items=items, batches=batches, include_ai=include_ai, n_boot=n_boot
        )


def report_for_source(
    source: str, db: str | None, *, window: timedelta | None = None, include_ai: bool = False
) -> dict[str, Any]:
    """The ``quality report`` command's report of a JSONL path or a project name."""
    if is_jsonl_source(source):
        if not Path(source).is_file():
            raise OSError(f"{source}: no such file")
        return report_from_jsonl(source, window=window, include_ai=include_ai)
    return report_from_store(db, source, window=window, include_ai=include_ai)
