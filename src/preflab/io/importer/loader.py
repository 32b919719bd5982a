"""Checks chunks of converted records against the database and writes the accepted rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby
from typing import Any

from sqlalchemy import Connection, select

from ...schema import Rubric, rater_hash
from ...schema.policy import stored_policy
from ...store import repo
from ...store.models import Project, utcnow
from ...store.rows import ItemRows, JudgmentRows, PairRows, pair_key
from ..formats import FORMATS
from .checks import CheckState, ProjectRules, answer_length, check_record
from .columns import RowBuilder
from .convert import Pair, Record
from .options import MAX_SKIPPED, ImportOptions, ImportReport, Problem
from .stage import Mover, Stage, StagedRows
from .worker import Chunk, StagedChunk
from .writer import (
    ALIASES,
    CANDIDATE_COLUMNS,
    CANDIDATES,
    ITEM_COLUMNS,
    ITEMS,
    JUDGMENT_COLUMNS,
    JUDGMENTS,
    RATERS,
    Writer,
)

#: Item keys a fresh project's import keeps of the chunks converted in this process (more than
#: the head of an import with a converting process writes: 10k records, an item each).
WRITTEN_HERE_MAX = 50_000

#: Keys per ``IN (...)`` list on SQLite (old builds allow 999 parameters; PostgreSQL gets one array).
IN_CHUNK = 900


def _in_chunks(values: Iterable[Any]) -> Iterator[list[Any]]:
    values = list(values)
    for i in range(0, len(values), IN_CHUNK):
        yield values[i : i + IN_CHUNK]


class Loader:
    """Checks chunks of converted records against the database and writes the accepted rows."""

    def __init__(
        self,
        session: Any,
        project: Project,
        batch_pk: int,
        options: ImportOptions,
        report: ImportReport,
    ):
        self.session = session
        self.conn: Connection = session.connection()
        self.writer = Writer(self.conn)
        self.project = project
        self.project_pk = project.pk
        self.batch_pk = batch_pk
        self.options = options
        self.report = report
        self.kinds = set(project.kinds)
        self.rules = ProjectRules(
            name=project.name,
            kinds=self.kinds,
            rubric=self._rubric,
            span_categories=stored_policy(project.settings).span_categories,
        )
        self.rater_pks: dict[str, int] = {}
        self.rubrics: dict[tuple[str, int | None], Rubric | None] = {}
        self.formats_seen: set[str] = set()
        # Alias lookups only once the project has any (most never do).
        self.has_aliases = (
            self.conn.execute(
                select(ALIASES.c.pk).where(ALIASES.c.project_pk == self.project_pk).limit(1)
            ).first()
            is not None
        )
        # A plain comparison (derived id) can only join a stored item of another id if that item
        # came from a record of another shape: one stored before this import, or written by it.
        # Until then its content lookup is skipped (a bulk import into a fresh project: ~10% of its time).
        self.other_ids_stored = (
            self.conn.execute(
                select(ITEMS.c.pk).where(ITEMS.c.project_pk == self.project_pk).limit(1)
            ).first()
            is not None
        )
        #: The project had no items when the import began: then the items stored are those this
        #: import wrote, and a staged chunk's are looked up only where an earlier chunk may have
        #: written them: one the converting process converted (it says which keys:
        #: ``Stage.repeats``) or one converted here (the head of the import: ``written_here``,
        #: exactly; ``None`` when the project had items, or once more than
        #: :data:`WRITTEN_HERE_MAX` keys were written here, and staged chunks are joined with the
        #: items instead).
        self.written_here: set[str] | None = None if self.other_ids_stored else set()
        self.problems: list[Problem] = []
        self.problem_count = 0
        self.now = utcnow()
        #: Moves staged comparisons (SQLite, rows from the converting process; :mod:`.stage`).
        self.mover: Mover | None = None

    @property
    def stages(self) -> bool:
        """Whether the converting process should stage plain comparisons for this database
        (SQLite, through a ``sqlite3`` that can load a database image: Python 3.11+ on SQLite
        3.36+ builds it in; and SQLite 3.38+, whose JSON functions move scattered rows,
        :func:`.stage._picked`)."""
        return (
            self.writer.sqlite
            and sqlite3.sqlite_version_info >= (3, 38)
            and hasattr(self.conn.connection.driver_connection, "deserialize")
        )

    def close(self) -> None:
        """Let go of the last chunk's stage (call before the transaction ends, either way)."""
        if self.mover is None:
            return
        try:
            self.mover.close()
        except sqlite3.Error:
            # Never in the way of the import's own outcome (or its error): a stage left attached
            # only holds memory, and the next import on this connection takes it over (Mover.use).
            pass

    # -- problems

    def _problem(self, rec: Record, field: str, reason: str) -> None:
        problem = Problem(rec.file, rec.line, field, reason)
        self.problem_count += 1
        if self.options.skip_invalid:
            if len(self.report.skipped) < MAX_SKIPPED:
                self.report.skipped.append(problem)
        elif len(self.problems) < max(self.options.max_errors, 1):
            self.problems.append(problem)

    # -- lookups

    def _select_in(self, sql: str, values: set[str]) -> Iterator[Any]:
        """Rows of ``sql`` for every value: its ``{values}`` is an ``IN`` list (SQLite, in parts)
        or ``= ANY`` of one array (PostgreSQL); its one other parameter is the project's pk.

        Raw driver SQL: a SQLAlchemy ``select`` with an expanding ``IN`` is compiled on every
        call, which cost more than the lookup itself.
        """
        if not values:
            return
        if self.writer.sqlite:
            for part in _in_chunks(values):
                yield from self.conn.exec_driver_sql(
                    sql.format(param="?", values=f"IN ({', '.join('?' * len(part))})"),
                    (self.project_pk, *part),
                )
        else:
            yield from self.conn.exec_driver_sql(
                sql.format(param="%s", values="= ANY(%s)"), (self.project_pk, list(values))
            )

    def _existing_items(self, keys: set[str]) -> dict[str, tuple[int, str]]:
        sql = "SELECT item_key, pk, content_hash FROM items WHERE project_pk = {param} AND item_key {values}"
        return {key: (pk, digest) for key, pk, digest in self._select_in(sql, keys)}

    def _aliases(self, keys: set[str]) -> dict[str, tuple[str, int, str]]:
        """alias -> (item key, item pk, content hash) of the items these keys are aliases of."""
        if not self.has_aliases:
            return {}
        sql = (
            "SELECT a.alias_key, i.item_key, i.pk, i.content_hash FROM item_aliases a JOIN items i "
            "ON i.pk = a.item_pk WHERE a.project_pk = {param} AND a.alias_key {values}"
        )
        return {alias: (key, pk, digest) for alias, key, pk, digest in self._select_in(sql, keys)}

    def _items_by_content(self, hashes: set[str]) -> dict[str, tuple[str, int]]:
        """content hash -> (item key, pk) of the project's items with that content (the first
        imported one, should older databases hold several)."""
        sql = (
            "SELECT content_hash, item_key, pk FROM items WHERE project_pk = {param} AND content_hash {values} "
            "ORDER BY pk DESC"
        )
        return {digest: (key, pk) for digest, key, pk in self._select_in(sql, hashes)}

    def _candidate_keys(self, item_pks: dict[str, int]) -> dict[str, set[str]]:
        by_pk: dict[int, set[str]] = {pk: set() for pk in item_pks.values()}
        for part in _in_chunks(by_pk):
            for pk, key in self.conn.execute(
                select(CANDIDATES.c.item_pk, CANDIDATES.c.candidate_key).where(
                    CANDIDATES.c.item_pk.in_(part)
                )
            ):
                by_pk[pk].add(key)
        return {key: by_pk[pk] for key, pk in item_pks.items()}

    def _answer_lengths(self, item_pk: int) -> dict[str, int]:
        """A stored item's answers' lengths (critique span offsets are checked against them)."""
        rows = self.conn.execute(
            select(CANDIDATES.c.candidate_key, CANDIDATES.c.text, CANDIDATES.c.messages).where(
                CANDIDATES.c.item_pk == item_pk
            )
        )
        return {
            key: answer_length({"text": text, "messages": messages}) for key, text, messages in rows
        }

    def _hashes_of_items(self, item_pks: set[int]) -> set[str]:
        """Content hashes of the judgments of these items (served by ``uq_judgments_item_content``)."""
        found: set[str] = set()
        for part in _in_chunks(item_pks):
            found.update(
                self.conn.execute(
                    select(JUDGMENTS.c.content_hash).where(JUDGMENTS.c.item_pk.in_(part))
                ).scalars()
            )
        return found

    def _existing_idem(self, wanted: set[tuple[str, str]]) -> set[tuple[str, str]]:
        """The (rater, idempotency key) pairs of ``wanted`` the project already holds."""
        sql = (
            "SELECT r.rater_key, j.idempotency_key FROM judgments j JOIN raters r "
            "ON r.pk = j.rater_pk WHERE j.project_pk = {param} AND j.idempotency_key {values}"
        )
        found = set(self._select_in(sql, {key for _, key in wanted}))
        return {(rater, key) for rater, key in found} & wanted

    def _existing(self, column: str, values: set[str]) -> set[str]:
        sql = f"SELECT {column} FROM judgments WHERE project_pk = {{param}} AND {column} {{values}}"
        return {value for (value,) in self._select_in(sql, values)}

    def _rubric(self, key: str, version: int | None) -> Rubric | None:
        if (key, version) not in self.rubrics:
            self.rubrics[(key, version)] = repo.get_rubric(self.session, self.project, key, version)
        return self.rubrics[(key, version)]

    def _register_rubrics(self, formats: Iterable[str | None]) -> None:
        if "rubric" not in self.kinds:  # a format's rubrics are for its rubric judgments only
            return
        for fmt in formats:
            if fmt and fmt not in self.formats_seen:
                self.formats_seen.add(fmt)
                for rubric in FORMATS[fmt].rubrics:
                    repo.add_rubric(
                        self.session,
                        self.project,
                        rubric,
                        make_current=self.project.rubric_key is None,
                    )
                    self.rubrics.clear()

    def _rater_pks(self, keys: set[str]) -> None:
        missing = keys - self.rater_pks.keys()
        for part in _in_chunks(missing):
            for key, pk in self.conn.execute(
                select(RATERS.c.rater_key, RATERS.c.pk).where(
                    RATERS.c.project_pk == self.project_pk, RATERS.c.rater_key.in_(part)
                )
            ):
                self.rater_pks[key] = pk
        new = sorted(keys - self.rater_pks.keys())
        if new:
            pks = self.writer.allocate_pks(RATERS, len(new))
            created = self.writer.constant(RATERS, "created_at", self.now)
            self.writer.insert(
                RATERS,
                ("pk", "project_pk", "rater_key", "rater_hash", "created_at"),
                [
                    (pk, self.project_pk, key, rater_hash(key, self.project.secret), created)
                    for pk, key in zip(pks, new, strict=True)
                ],
                constants=("created_at",),
            )
            self.rater_pks.update(zip(new, pks, strict=True))

    # -- one chunk

    def load(self, chunk: Chunk) -> None:
        if type(chunk) is StagedChunk:
            if self._load_whole(chunk):
                return
            chunk = chunk.records()
        assert type(chunk) is list
        self._register_rubrics(rec.format for rec in chunk)
        item_keys: set[str] = set()
        idem: set[tuple[str, str]] = set()  # (rater, key): keys are per rater (0015)
        referenced: set[str] = set()  # items judged by generic records
        pairs: list[PairRows] = []
        pair_keys: set[str] = set()  # of items with ids of their own (rows.pair_key)
        for rec in chunk:
            if isinstance(rec, Pair):
                pairs.append(rec.rows)
                continue
            pairs_checked = not (rec.format and FORMATS[rec.format].keeps_pair_ids)
            for i in rec.items:
                item_keys.add(i.key)
                # the same pair without candidate ids: an item or an alias (rows.pair_key)
                if pairs_checked and (pair := pair_key(i)[0]) is not None:
                    item_keys.add(pair)
                    pair_keys.add(pair)
            for j in rec.judgments:
                referenced.add(j.item_key)
                if j.idempotency_key:
                    idem.add((j.rater_key, j.idempotency_key))
        named = item_keys | referenced
        # A staged chunk's comparisons are looked up by a join with the stage (no keys bound), or
        # in a fresh project those that an earlier chunk may have written (see written_here).
        stage = pairs[0].stage if pairs and type(pairs[0]) is StagedRows else None
        written_here = self.written_here
        if stage is None:
            named.update(p.item_key for p in pairs)
        elif written_here is not None:
            named.update(stage.repeats)
            if written_here:
                named.update(written_here.intersection([p.item_key for p in pairs]))
        existing_items = self._existing_items(named)
        if stage is not None:
            if written_here is None:
                existing_items.update(self._move().stored_items(stage, self.project_pk))
            if self.has_aliases:
                named.update(p.item_key for p in pairs)
        # Items this chunk names by an alias or brings again under another id (found by content).
        aliases = self._aliases(named - existing_items.keys())
        unnamed = {
            i.content_hash
            for rec in chunk
            if type(rec) is not Pair
            for i in rec.items  # type: ignore[union-attr]
            if i.key not in existing_items and i.key not in aliases
        }
        if self.other_ids_stored:
            unnamed.update(p.item_hash for p in pairs if p.item_key not in existing_items)
        by_content = self._items_by_content(unnamed)
        joined = {key: (pk, digest) for key, pk, digest in aliases.values()}
        joined.update((key, (pk, digest)) for digest, (key, pk) in by_content.items())
        for key, value in joined.items():
            existing_items.setdefault(key, value)
        # A judgment's content hash covers its item's key, and judgments are stored with their
        # item (unique per item_pk and hash): one of an item the project does not have is not in
        # the database either. So only the judgments of existing items are looked up (a fresh
        # import: none), by item.
        judged = {existing_items[p.item_key][0] for p in pairs if p.item_key in existing_items}
        judged.update(existing_items[k][0] for k in referenced if k in existing_items)
        judged.update(pk for pk, _ in joined.values())
        # Items judged in this chunk that the database has (this chunk's records may fail, or come later).
        outside = {k: existing_items[k][0] for k in referenced if k in existing_items}
        outside.update((aliases[k][0], aliases[k][1]) for k in referenced if k in aliases)
        # the candidates of the items a pair key names: which shape they are (checks.pair_problem)
        outside.update((k, existing_items[k][0]) for k in pair_keys if k in existing_items)
        outside.update((aliases[k][0], aliases[k][1]) for k in pair_keys if k in aliases)
        state = CheckState(
            existing_items=existing_items,
            aliases={alias: key for alias, (key, _, _) in aliases.items()},
            by_content={digest: key for digest, (key, _) in by_content.items()},
            outside_candidates=self._candidate_keys(outside) if outside else {},
            existing_hashes=self._hashes_of_items(judged),
            existing_idem=self._existing_idem(idem),
            stored_lengths=lambda key: self._answer_lengths(existing_items[key][0]),
        )
        report = self.report
        formats = report.formats
        known, accepted_items, new_judgments, seen_hashes = (
            state.known,
            state.accepted_items,
            state.new_judgments,
            state.seen_hashes,
        )
        existing_hashes, by_content_ = state.existing_hashes, state.by_content
        # an alias: another id of a stored item, or the key of an item's pair (rows.pair_key)
        aliases_ = state.aliases
        pairwise = "pairwise" in self.kinds
        # The fast path's counts, added to the report once a chunk.
        fast_items = fast_repeats = fast_judgments = fast_existing = 0
        for rec in chunk:
            if isinstance(rec, Pair):
                p = rec.rows
                key = p.item_key
                if pairwise and key not in aliases_:
                    # The common cases, decided here as _check would decide them.
                    entry = known.get(key)
                    if entry is None:
                        stored = existing_items.get(key)
                        if stored is None and p.item_hash not in by_content_:
                            # A new item, and a judgment of its own candidates, new unless its
                            # hash is known.
                            known[key] = (p.item_hash, p.candidate_keys)
                            by_content_[p.item_hash] = key
                            accepted_items[key] = p
                            if not (fast_items or fast_repeats):  # the format counted where it
                                formats.setdefault(Pair.format, 0)  # first occurs, as _check does
                            fast_items += 1
                            h = p.content_hash
                            if h in existing_hashes or h in seen_hashes:
                                fast_existing += 1
                            else:
                                seen_hashes.add(h)
                                new_judgments.append(p)
                                fast_judgments += 1
                            continue
                        if stored is not None and stored[1] == p.item_hash:
                            # a stored item met again: known from now on, as _check keeps it
                            entry = known[key] = (stored[1], set(p.candidate_keys))
                    if (
                        entry is not None
                        and entry[0] == p.item_hash
                        and p.candidate_keys[0] in entry[1]
                        and p.candidate_keys[1] in entry[1]
                    ):
                        # An item already known (stored, or met earlier in this chunk) with the
                        # same content, judged by another rater: its judgment, new unless its
                        # hash is known.
                        if not (fast_items or fast_repeats):
                            formats.setdefault(Pair.format, 0)
                        fast_repeats += 1
                        h = p.content_hash
                        if h in existing_hashes or h in seen_hashes:
                            fast_existing += 1
                        else:
                            seen_hashes.add(h)
                            new_judgments.append(p)
                            fast_judgments += 1
                        continue
                rec = rec.as_record()
            self._check(rec, state)
        report.items_added += fast_items
        report.items_existing += fast_repeats
        report.judgments_added += fast_judgments
        report.judgments_existing += fast_existing
        if fast_items or fast_repeats:
            formats[Pair.format] += fast_items + fast_repeats
        if not self.other_ids_stored:
            self.other_ids_stored = any(
                type(i) is not PairRows and type(i) is not StagedRows
                for i in state.accepted_items.values()
            )
        self._write(state.accepted_items, state.new_judgments, existing_items, state.new_aliases)
        if stage is not None:
            stage.close()  # (the rows the generic checks read back)
        if written_here is not None and stage is None:
            written_here.update(state.accepted_items)
            if len(written_here) > WRITTEN_HERE_MAX:
                self.written_here = None

    def _load_whole(self, chunk: StagedChunk) -> bool:
        """Accept a staged chunk of new comparisons whole, as :meth:`load` would row by row, if
        nothing about it needs a row's checks: the project had no items (``written_here``) and
        no other record wrote one under another key or an alias, it collects pairwise
        judgments, and none of the chunk's items is stored. Then every item and judgment is new
        (the chunk repeats none within itself: the converting process checked) and its rows
        are moved without a Python object a row. ``False``: nothing was done."""
        written_here = self.written_here
        if (
            written_here is None
            or self.other_ids_stored
            or self.has_aliases
            or "pairwise" not in self.kinds
        ):
            return False
        named = set(chunk.stage.repeats)
        if written_here:
            named.update(written_here.intersection(chunk.keys()))
        if named and self._existing_items(named):
            return False
        self._register_rubrics((Pair.format,))
        n = chunk.size
        report = self.report
        report.items_added += n
        report.judgments_added += n
        report.formats[Pair.format] = report.formats.get(Pair.format, 0) + n
        build = self._row_builder()
        seqs = range(n)
        item_pks = self.writer.allocate_pks(ITEMS, n)
        self._move_items(chunk.stage, seqs, item_pks, build)
        self._rater_pks(set(chunk.raters))
        self._move_judgments(chunk.stage, seqs, item_pks, build)
        return True

    def _check(self, rec: Record, state: CheckState) -> None:
        """Check one record (:func:`check_record`); count it or list its problems."""
        checked = check_record(rec, state, self.rules)
        if checked.problems:
            for fld, reason in checked.problems:
                self._problem(rec, fld, reason)
            return
        report = self.report
        report.items_added += checked.items_added
        report.items_existing += checked.items_existing
        report.judgments_added += checked.judgments_added
        report.judgments_existing += checked.judgments_existing
        report.judgments_not_collected += checked.not_collected
        if rec.format:
            report.formats[rec.format] = report.formats.get(rec.format, 0) + 1

    def _write(
        self,
        items: dict[str, ItemRows | PairRows],
        judgments: list[JudgmentRows | PairRows],
        existing_items: dict[str, tuple[int, str]],
        aliases: dict[str, str],
    ) -> None:
        """Insert the chunk's accepted rows, in the order they were accepted."""
        w = self.writer
        build = self._row_builder()
        item_pks = {key: pk for key, (pk, _) in existing_items.items()}
        item_pks.update(zip(items, w.allocate_pks(ITEMS, len(items)), strict=True))
        for shape, run in _runs(items.values()):
            pks = [item_pks[i.key if type(i) is ItemRows else i.item_key] for i in run]
            if shape is StagedRows:
                self._move_items(run[0].stage, [i.seq for i in run], pks, build)
                continue
            if shape is PairRows:
                item_rows, candidate_rows = (
                    build.pair_items(pks, run),
                    build.pair_candidates(pks, run),
                )
            else:
                item_rows = [build.item(pk, i) for pk, i in zip(pks, run, strict=True)]
                candidate_rows = [
                    c for pk, i in zip(pks, run, strict=True) for c in build.candidates(pk, i)
                ]
            w.insert(ITEMS, ITEM_COLUMNS, item_rows, constants=("created_at",), processed=True)
            w.insert(CANDIDATES, CANDIDATE_COLUMNS, candidate_rows, processed=True)
        if aliases:
            self._write_aliases(aliases, item_pks)
        if not judgments:
            return
        self._rater_pks({j.rater_key for j in judgments})
        rater_pks = self.rater_pks
        for shape, run in _runs(judgments):
            ipks = [item_pks[j.item_key] for j in run]
            if shape is StagedRows:
                self._move_judgments(run[0].stage, [j.seq for j in run], ipks, build)
                continue
            rpks = [rater_pks[j.rater_key] for j in run]
            if shape is PairRows:
                rows = build.pair_judgments(ipks, rpks, run)
            else:
                rows = [build.judgment(*args) for args in zip(ipks, rpks, run, strict=True)]
            w.insert(
                JUDGMENTS,
                JUDGMENT_COLUMNS,
                rows,
                constants=("excluded", "created_at"),
                processed=True,
            )

    def _row_builder(self) -> RowBuilder:
        w = self.writer
        return RowBuilder(
            self.project_pk,
            self.batch_pk,
            json=w.json,
            datetime=w.datetime,
            now=w.constant(ITEMS, "created_at", self.now),
            excluded=w.constant(JUDGMENTS, "excluded", False),
        )

    def _move_items(
        self, stage: Stage, seqs: Sequence[int], pks: Sequence[int], build: RowBuilder
    ) -> None:
        self._move().items(
            stage,
            seqs,
            pks,
            {
                "project_pk": self.project_pk,
                "domains": build.empty_list,
                "metadata": build.empty_dict,
                "batch_pk": self.batch_pk,
                "created_at": build.now,
                "candidate_metadata": build.empty_dict,
            },
        )

    def _move_judgments(
        self, stage: Stage, seqs: Sequence[int], item_pks: Sequence[int], build: RowBuilder
    ) -> None:
        self._move().judgments(
            stage,
            seqs,
            item_pks,
            {
                "project_pk": self.project_pk,
                "batch_pk": self.batch_pk,
                "excluded": build.excluded,
                "created_at": build.now,
            },
        )

    def _move(self) -> Mover:
        if self.mover is None:
            driver = self.conn.connection.driver_connection
            assert self.writer.sqlite and driver is not None, "only SQLite imports stage rows"
            self.mover = Mover(driver)
        return self.mover

    def _write_aliases(self, aliases: dict[str, str], item_pks: dict[str, int]) -> None:
        w = self.writer
        alias_pks = w.allocate_pks(ALIASES, len(aliases))
        w.insert(
            ALIASES,
            ("pk", "project_pk", "alias_key", "item_pk"),
            [
                (pk, self.project_pk, alias, item_pks[key])
                for pk, (alias, key) in zip(alias_pks, aliases.items(), strict=True)
            ],
        )
        self.has_aliases = True


def _runs(rows: Iterable[Any]) -> Iterator[tuple[type, list[Any]]]:
    """Consecutive rows of one type: ``PairRows`` (lean), ``StagedRows`` (staged: rows of one
    chunk, so of one stage) or the generic ``ItemRows`` / ``JudgmentRows``."""
    for kind, run in groupby(rows, key=type):
        yield kind, list(run)
