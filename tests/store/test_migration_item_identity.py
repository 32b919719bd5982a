"""Migration ``0005_item_identity``: a database built at the previous head with one pair split
into several items (the rule before issue 17: ids hashed the prompt as written and the answers
in record order) comes out with one item per pair, every judgment kept with its provenance, and
the canonical pair re-signed where the candidate order changed."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from pathlib import Path

import orjson
import sqlalchemy as sa
from sqlalchemy import select

from preflab.io.importer import import_files
from preflab.schema import UnaryJudgment, content_hash
from preflab.store import db
from preflab.store.models import CandidateRow, ItemRow, JudgmentRow, Project, Rater
from preflab.store.rows import judgment_rows, pairwise_rows

PREVIOUS = "0004_judgment_indexes"
NOW = datetime(2026, 11, 1, tzinfo=UTC)
PROMPT = "Which café is better?"
ONE, TWO = "Answer one.", "Answer two."

meta = sa.MetaData()
JSON = sa.JSON()
projects = sa.Table(
    "projects",
    meta,
    sa.Column("pk", sa.Integer, primary_key=True),
    sa.Column("name", sa.String),
    sa.Column("title", sa.String),
    sa.Column("secret", sa.String),
    sa.Column("kinds", JSON),
    sa.Column("settings", JSON),
    sa.Column("created_at", sa.DateTime(timezone=True)),
)
batches = sa.Table(
    "import_batches",
    meta,
    sa.Column("pk", sa.Integer, primary_key=True),
    sa.Column("project_pk", sa.Integer),
    sa.Column("content_hash", sa.String),
    sa.Column("sources", JSON),
    sa.Column("format", sa.String),
    sa.Column("counts", JSON),
    sa.Column("created_at", sa.DateTime(timezone=True)),
)
items = sa.Table(
    "items",
    meta,
    sa.Column("pk", sa.Integer, primary_key=True),
    sa.Column("project_pk", sa.Integer),
    sa.Column("item_key", sa.String),
    sa.Column("content_hash", sa.String),
    sa.Column("prompt", JSON),
    sa.Column("domains", JSON),
    sa.Column("metadata", JSON),
    sa.Column("batch_pk", sa.Integer),
    sa.Column("created_at", sa.DateTime(timezone=True)),
)
candidates = sa.Table(
    "candidates",
    meta,
    sa.Column("pk", sa.Integer, primary_key=True),
    sa.Column("item_pk", sa.Integer),
    sa.Column("candidate_key", sa.String),
    sa.Column("position", sa.Integer),
    sa.Column("text", sa.Text),
    sa.Column("messages", JSON),
    sa.Column("source", sa.String),
    sa.Column("metadata", JSON),
)
raters = sa.Table(
    "raters",
    meta,
    sa.Column("pk", sa.Integer, primary_key=True),
    sa.Column("project_pk", sa.Integer),
    sa.Column("rater_key", sa.String),
    sa.Column("rater_hash", sa.String),
    sa.Column("created_at", sa.DateTime(timezone=True)),
)
judgments = sa.Table(
    "judgments",
    meta,
    sa.Column("pk", sa.Integer, primary_key=True),
    sa.Column("project_pk", sa.Integer),
    sa.Column("item_pk", sa.Integer),
    sa.Column("rater_pk", sa.Integer),
    sa.Column("kind", sa.String),
    sa.Column("body", JSON),
    sa.Column("pair_lo", sa.String),
    sa.Column("pair_hi", sa.String),
    sa.Column("score", sa.Integer),
    sa.Column("shown_order", JSON),
    sa.Column("review_pass", sa.Integer),
    sa.Column("source", sa.String),
    sa.Column("content_hash", sa.String),
    sa.Column("batch_pk", sa.Integer),
    sa.Column("excluded", sa.Boolean),
    sa.Column("created_at", sa.DateTime(timezone=True)),
)
pool = sa.Table(
    "task_pool",
    meta,
    sa.Column("pk", sa.Integer, primary_key=True),
    sa.Column("project_pk", sa.Integer),
    sa.Column("item_pk", sa.Integer),
    sa.Column("role", sa.String),
    sa.Column("target", sa.Integer),
    sa.Column("filled", sa.Integer),
    sa.Column("order_key", sa.Integer),
)


def _old_candidate_key(body) -> str:
    return content_hash(body, prefix="cand_", length=12)


def _old_item_key(prompt, bodies) -> str:
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    return content_hash(
        {"prompt": messages, "candidates": [[_old_candidate_key(b), b] for b in bodies]},
        prefix="itm_",
        length=16,
    )


class OldDatabase:
    """Rows written as the importer wrote them before this revision."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.raters: dict[tuple[int, str], int] = {}

    def project(self, name: str) -> int:
        pk = self.conn.execute(
            projects.insert().values(
                name=name,
                title=name,
                secret="s",
                kinds=["pairwise", "unary"],
                settings={},
                created_at=NOW,
            )
        ).inserted_primary_key[0]
        self.batch = self.conn.execute(
            batches.insert().values(
                project_pk=pk,
                content_hash=f"files-{name}",
                sources=[],
                format="comparison",
                counts={},
                created_at=NOW,
            )
        ).inserted_primary_key[0]
        return pk

    def item(
        self, project: int, prompt, bodies, key: str | None = None
    ) -> tuple[int, str, list[str]]:
        key = key or _old_item_key(prompt, bodies)
        pk = self.conn.execute(
            items.insert().values(
                project_pk=project,
                item_key=key,
                content_hash="0" * 64,
                prompt=prompt,
                domains=[],
                metadata={"from": key},
                batch_pk=self.batch,
                created_at=NOW,
            )
        ).inserted_primary_key[0]
        ids = []
        for n, body in enumerate(bodies):
            cid = _old_candidate_key(body)
            ids.append(cid)
            self.conn.execute(
                candidates.insert().values(
                    item_pk=pk,
                    candidate_key=cid,
                    position=n,
                    text=body if isinstance(body, str) else None,
                    messages=None if isinstance(body, str) else body,
                    source="model",
                    metadata={},
                )
            )
        self.conn.execute(
            pool.insert().values(
                project_pk=project, item_pk=pk, role="production", target=3, filled=1, order_key=0
            )
        )
        return pk, key, ids

    def rater(self, project: int, name: str) -> int:
        if (project, name) not in self.raters:
            self.raters[project, name] = self.conn.execute(
                raters.insert().values(
                    project_pk=project, rater_key=name, rater_hash=f"h-{name}", created_at=NOW
                )
            ).inserted_primary_key[0]
        return self.raters[project, name]

    def comparison(
        self, project: int, item: tuple[int, str, list[str]], chosen: int, rater: str
    ) -> None:
        """``rater`` chose candidate number ``chosen`` (stored in sorted id order, as imports were)."""
        pk, key, ids = item
        shown = tuple(sorted(ids))
        rows = pairwise_rows(key, shown, "a" if shown[0] == ids[chosen] else "b", 2, rater)
        self._judgment(project, pk, rater, rows)

    def unary(
        self, project: int, item: tuple[int, str, list[str]], candidate: int, rater: str
    ) -> None:
        pk, key, ids = item
        rows = judgment_rows(
            UnaryJudgment(
                item_id=key, candidate_id=ids[candidate], label=True, provenance={"rater_id": rater}
            )
        )
        self._judgment(project, pk, rater, rows)

    def _judgment(self, project: int, item_pk: int, rater: str, rows) -> None:
        v = rows.values
        self.conn.execute(
            judgments.insert().values(
                project_pk=project,
                item_pk=item_pk,
                rater_pk=self.rater(project, rater),
                kind=v["kind"],
                body=v["body"],
                pair_lo=v["pair_lo"],
                pair_hi=v["pair_hi"],
                score=v["score"],
                shown_order=v["shown_order"],
                review_pass=0,
                source=v["source"],
                content_hash=v["content_hash"],
                batch_pk=self.batch,
                excluded=False,
                created_at=NOW,
            )
        )


def _build(engine) -> None:
    db.upgrade(engine, PREVIOUS)
    with engine.begin() as conn:
        old = OldDatabase(conn)
        p = old.project("p")
        split = [
            (PROMPT, [ONE, TWO], 0, "alice"),  # alice: one > two
            (PROMPT, [TWO, ONE], 0, "bob"),  # the same pair the other way round: bob: two > one
            (PROMPT + "\n", [ONE + "\n", TWO], 0, "carol"),  # trailing newlines: carol: one > two
            (
                [{"role": "user", "content": PROMPT}],
                [[{"role": "assistant", "content": ONE}], TWO],
                1,
                "dave",
            ),
            (
                unicodedata.normalize("NFD", PROMPT),
                [ONE, TWO],
                0,
                "alice",
            ),  # alice again, the same verdict (NFD)
        ]
        for prompt, bodies, chosen, rater in split:
            old.comparison(p, old.item(p, prompt, bodies), chosen, rater)
        old.comparison(p, old.item(p, "Other?", ["X", "Y"]), 1, "erin")
        old.unary(p, old.item(p, "Named", ["C", "D "], key="x"), 1, "frank")
        q = old.project("q")  # the same pair in another project stays there
        old.comparison(q, old.item(q, PROMPT, [TWO, ONE]), 1, "alice")


def _labels(engine, project: str):
    with engine.connect() as conn:
        project_pk = conn.execute(select(Project.pk).where(Project.name == project)).scalar_one()
        texts = {
            (c.item_pk, c.candidate_key): c.text if c.text is not None else c.messages[0]["content"]
            for c in conn.execute(select(CandidateRow))
        }
        rows = conn.execute(
            select(
                ItemRow.item_key,
                ItemRow.pk,
                Rater.rater_key,
                JudgmentRow.kind,
                JudgmentRow.pair_lo,
                JudgmentRow.pair_hi,
                JudgmentRow.score,
                JudgmentRow.body,
                JudgmentRow.excluded,
                JudgmentRow.exclusion_reason,
            )
            .join(JudgmentRow, JudgmentRow.item_pk == ItemRow.pk)
            .join(Rater, Rater.pk == JudgmentRow.rater_pk)
            .where(ItemRow.project_pk == project_pk)
            .order_by(JudgmentRow.pk)
        ).all()
    out = []
    for key, pk, rater, kind, lo, hi, score, body, excluded, reason in rows:
        if kind == "pairwise":
            win, lose = (lo, hi) if score < 0 else (hi, lo)
            verdict = (texts[pk, win].strip(), texts[pk, lose].strip())
            a, b = body["shown_order"]
            assert (lo, hi) == tuple(sorted((a, b)))
        else:
            verdict = (texts[pk, body["candidate_id"]].strip(),)
        out.append((key, rater, verdict, excluded, reason))
    return out


def test_split_items_are_merged_with_every_judgment_kept(db_url, tmp_path):
    engine = db.make_engine(db_url)
    try:
        _build(engine)
        db.upgrade(engine)
        labels = _labels(engine, "p")
        assert len(labels) == 7, "every judgment kept"
        pair = [row for row in labels if row[1] in ("alice", "bob", "carol", "dave")]
        assert len({row[0] for row in pair}) == 1, "one item for the pair"
        assert [(rater, verdict) for _, rater, verdict, excluded, _ in pair if not excluded] == [
            ("alice", (ONE, TWO)),
            ("bob", (TWO, ONE)),
            ("carol", (ONE, TWO)),
            ("dave", (TWO, ONE)),
        ]
        duplicate = [row for row in pair if row[3]]
        assert len(duplicate) == 1 and duplicate[0][1] == "alice"
        assert "duplicate after the item merge of migration 0005" in duplicate[0][4]
        assert {row[1]: row[2] for row in labels if row[1] in ("erin", "frank")} == {
            "erin": ("Y", "X"),
            "frank": ("D",),
        }
        with engine.connect() as conn:
            keys = conn.execute(
                select(ItemRow.item_key, ItemRow.meta).join(Project).where(Project.name == "p")
            ).all()
            pool_rows = conn.execute(sa.text("SELECT item_pk, filled, target FROM task_pool")).all()
        assert len(keys) == 3 and "x" in {k for k, _ in keys}, "explicit ids are kept"
        merged = next(m for k, m in keys if m.get("merged_items"))
        assert len(merged["merged_items"]) == 4, "the merged items' keys and metadata are kept"
        # pool entries follow their items; at head their count is the label counter's rule
        # (migration 0012 recounts): the four raters' labels, not alice's excluded duplicate
        assert sorted(f for _, f, _ in pool_rows) == [1, 1, 1, 4], "pool entries follow their items"
        assert [v for _, _, v, _, _ in _labels(engine, "q")] == [(ONE, TWO)]
        assert db.current_revision(engine) == db.head_revision()
    finally:
        engine.dispose()


def test_after_the_migration_the_old_records_import_as_already_present(db_url, tmp_path):
    engine = db.make_engine(db_url)
    try:
        _build(engine)
        db.upgrade(engine)
        # strength 2, as the old rows store it: since migration 0006 a comparison without strength
        # is stored with strength unknown, and an old "comparison" batch cannot tell a 2 the record
        # gave from the old default (see 0007_unknown_strength), so the records say it
        records = [
            {"prompt": PROMPT, "chosen": ONE, "rejected": TWO, "labeler": "alice", "strength": 2},
            {"prompt": PROMPT, "chosen": TWO, "rejected": ONE, "labeler": "bob", "strength": 2},
            {
                "prompt": PROMPT + "\n",
                "chosen": ONE + "\n",
                "rejected": TWO,
                "labeler": "carol",
                "strength": 2,
            },
            {"prompt": "Other?", "chosen": "Y", "rejected": "X", "labeler": "erin", "strength": 2},
        ]
        path = Path(tmp_path) / "again.jsonl"
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
        report = import_files(engine, "p", [path])
        assert (report.items_added, report.judgments_added) == (0, 0)
        assert (report.items_existing, report.judgments_existing) == (4, 4)
    finally:
        engine.dispose()
