"""The persistence API on SQLite and PostgreSQL: round trips of every judgment kind, rubric versions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from preflab.schema import (
    Dimension,
    Item,
    PairwiseJudgment,
    Rubric,
    dump_judgment,
    parse_judgment,
)
from preflab.schema.identity import normal_text
from preflab.store import db, repo, transaction
from preflab.store.models import ItemRow, RubricVersion
from preflab.store.rows import item_rows, judgment_rows, pair_rows, pairwise_rows, text_item_rows

ALL_KINDS = ("pairwise", "ranking", "rubric", "unary", "steps", "demonstration")

ITEM = Item(
    id="q1",
    prompt=[
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?", "name": "u"},
    ],
    candidates=[
        {"id": "a", "text": "4", "model": "m1"},
        {"id": "b", "messages": [{"role": "assistant", "content": "Four."}], "source": "human"},
        {"id": "c", "text": "5", "metadata": {"note": "wrong"}},
    ],
    domains=["Math", " arithmetic "],
    reference="4",
    gold={
        "judgment": {"kind": "unary", "candidate_id": "a", "label": True},
        "explanation": "2+2=4",
    },
    metadata={"batch": 7, "tags": ["x"]},
)

PROV = {
    "rater_id": "r1",
    "rubric_id": "helpful",
    "rubric_version": 1,
    "review_pass": 1,
    "source": "ai_assisted",
    "started_at": "2025-03-01T10:00:00+02:00",
    "submitted_at": "2025-03-01T08:01:30Z",
    "telemetry": {"iki_cv": 0.5, "pasted_chars": 0},
}

JUDGMENTS = [
    {
        "kind": "pairwise",
        "shown_order": ["b", "a"],
        "winner": "b",
        "strength": 3,
        "rationale": "a is right",
    },
    {"kind": "pairwise", "shown_order": ["a", "c"], "winner": "tie", "strength": 0},
    {"kind": "ranking", "order": [["a"], ["b", "c"]]},
    {
        "kind": "rubric",
        "candidate_id": "a",
        "scores": {"correct": 1, "style": 4.0},
        "vetoes_failed": ["unsafe"],
    },
    {"kind": "unary", "candidate_id": "c", "label": False},
    {"kind": "steps", "candidate_id": "b", "steps": ["add", "answer"], "verdicts": [1, -1]},
    {"kind": "demonstration", "text": "4, because 2+2=4.", "status": "accepted"},
]


def _judgment(body, **prov):
    return parse_judgment({**body, "item_id": "q1", "provenance": {**PROV, **prov}})


def test_item_and_every_judgment_kind_round_trip(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        project = repo.create_project(s, "rt", kinds=ALL_KINDS)
        row, created = repo.add_item(s, project, ITEM)
        assert created
        for n, body in enumerate(JUDGMENTS):
            _, created = repo.add_judgment(s, project, _judgment(body, idempotency_key=f"k{n}"))
            assert created
    with transaction(engine) as s:
        project = repo.get_project(s, "rt")
        assert repo.item_from_row(repo.get_item(s, project, "q1")) == ITEM
        [entry] = list(repo.iter_items_with_judgments(s, project))
        assert entry.item == ITEM
        # stored and returned in UTC: 10:00+02:00 comes back as 08:00Z, with the same content hash
        expected = [
            dump_judgment(_judgment(b, idempotency_key=f"k{n}", started_at="2025-03-01T08:00:00Z"))
            for n, b in enumerate(JUDGMENTS)
        ]
        got = [dump_judgment(j) for j in entry.judgments]
        for g in got:
            assert g["provenance"].pop("rater_hash").startswith("hmac_sha256:")
        assert got == expected
        assert [repo.judgment_content_hash(j) for j in entry.judgments] == [
            repo.judgment_content_hash(_judgment(b)) for b in JUDGMENTS
        ]
        # aware UTC datetimes come back on SQLite too
        assert entry.judgments[0].provenance.started_at == datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
    engine.dispose()


def test_same_item_twice_is_a_no_op_and_changed_content_conflicts(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        project = repo.create_project(s, "dup", kinds=ALL_KINDS)
        repo.add_item(s, project, ITEM)
        _, created = repo.add_item(s, project, ITEM.model_copy(deep=True))
        assert not created
        changed = ITEM.model_copy(update={"reference": "four"})
        with pytest.raises(repo.Conflict, match="already exists with different content"):
            repo.add_item(s, project, changed)
        j = _judgment(JUDGMENTS[0])
        first, created = repo.add_judgment(s, project, j)
        again, created_again = repo.add_judgment(
            s, project, _judgment(JUDGMENTS[0], idempotency_key="other")
        )
        assert created and not created_again and again.pk == first.pk
        with pytest.raises(repo.StoreError, match="not a candidate"):
            repo.add_judgment(
                s, project, _judgment({"kind": "unary", "candidate_id": "zz", "label": True})
            )
        assert s.scalar(select(func.count()).select_from(ItemRow)) == 1
    engine.dispose()


def test_gold_none_is_sql_null(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        project = repo.create_project(s, "nulls")
        repo.add_item(s, project, Item(prompt="p", candidates=[{"text": "x"}]))
        repo.add_item(s, project, ITEM)
        assert (
            s.scalar(select(func.count()).select_from(ItemRow).where(ItemRow.gold.is_(None))) == 1
        )
    engine.dispose()


RUBRIC = Rubric(
    id="helpful",
    dimensions=[
        Dimension(name="correct", scale="binary"),
        Dimension(name="style", scale="ordinal", points=5),
    ],
)


def test_rubric_versions(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        project = repo.create_project(s, "rub")
        v1 = repo.add_rubric(s, project, RUBRIC)
        assert (v1.version, project.rubric_version) == (1, 1)
        # same content (even if the file claims another version): the same stored version
        same = repo.add_rubric(s, project, RUBRIC.model_copy(update={"version": 9}))
        assert same.pk == v1.pk and same.version == 1
        changed = RUBRIC.model_copy(update={"description": "now with a description"})
        v2 = repo.add_rubric(s, project, changed)
        assert v2.version == 2 and project.rubric_version == 2
        # version 1 is untouched
        stored_v1 = repo.get_rubric(s, project, "helpful", 1)
        assert stored_v1 == RUBRIC
        assert repo.get_rubric(s, project).description == "now with a description"
        # going back to the old content is a new version too: versions only move forward
        v3 = repo.add_rubric(s, project, RUBRIC)
        assert v3.version == 3
        assert s.scalar(select(func.count()).select_from(RubricVersion)) == 3
    engine.dispose()


# -- the fast row builders equal the pydantic path -----------------------------------------

texts = st.text(min_size=0, max_size=40)
ids = st.text(alphabet="abcxyz_-0123456789", min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    prompt=texts,
    bodies=st.lists(texts, min_size=1, max_size=4, unique_by=normal_text),
    with_ids=st.booleans(),
    models=st.lists(st.none() | ids, min_size=4, max_size=4),
    meta=st.dictionaries(ids, st.integers(-(2**63), 2**63 - 1) | texts | st.none(), max_size=3),
    item_id=st.none() | ids,
)
def test_text_item_rows_equal_the_model(prompt, bodies, with_ids, models, meta, item_id):
    cands = [(f"c{i}" if with_ids else None, t, models[i]) for i, t in enumerate(bodies)]
    fast = text_item_rows(prompt, cands, dict(meta), item_id)
    item = Item(
        id=item_id,
        prompt=prompt,
        candidates=[{"id": c, "text": t, "model": m} for c, t, m in cands],
        metadata=dict(meta),
    )
    slow = item_rows(item)
    assert fast == slow
    assert fast.content_hash == item.content_hash()


@settings(max_examples=200, deadline=None)
@given(
    pair=st.lists(ids, min_size=2, max_size=2, unique=True),
    winner=st.sampled_from(["a", "b", "tie"]),
    strength=st.integers(1, 3),
    rater=ids,
    source=st.sampled_from(["human", "ai", "ai_assisted"]),
    rationale=st.none() | texts,
)
def test_pairwise_rows_equal_the_model(pair, winner, strength, rater, source, rationale):
    strength = 0 if winner == "tie" else strength
    fast = pairwise_rows("item", tuple(pair), winner, strength, rater, source, rationale)
    j = PairwiseJudgment(
        item_id="item",
        shown_order=tuple(pair),
        winner=winner,
        strength=strength,
        rationale=rationale,
        provenance={"rater_id": rater, "source": source},
    )
    assert fast == judgment_rows(j)
    assert fast.content_hash == repo.judgment_content_hash(j)
    assert fast.values["score"] == j.score


@settings(max_examples=300, deadline=None)
@given(
    prompt=st.text(max_size=40),
    pair=st.lists(st.text(max_size=40), min_size=2, max_size=2, unique_by=normal_text),
    rater=st.text(min_size=1, max_size=20).filter(lambda r: r == r.strip()),
    strength=st.integers(1, 3),
    source=st.sampled_from(["human", "ai", "ai_assisted"]),
)
def test_pair_rows_equal_the_other_paths(prompt, pair, rater, strength, source):
    chosen, rejected = pair
    lean = pair_rows(prompt, chosen, rejected, rater, strength, source)
    item = text_item_rows(prompt, [(None, chosen, None), (None, rejected, None)])
    c0, c1 = item.candidate_keys
    shown = (c0, c1) if c0 < c1 else (c1, c0)
    judgment = pairwise_rows(
        item.key, shown, "a" if shown[0] == c0 else "b", strength, rater, source
    )
    assert lean.item_rows() == item
    assert lean.judgment_rows() == judgment
    assert (lean.item_key, lean.item_hash, lean.content_hash) == (
        item.key,
        item.content_hash,
        judgment.content_hash,
    )
    # the column values the importer writes from the lean rows, as the generic rows serialise
    assert lean.prompt_json == orjson.dumps(prompt).decode()
    assert lean.body_json == orjson.dumps(judgment.values["body"]).decode()
    assert lean.shown_order_json == orjson.dumps(judgment.values["shown_order"]).decode()
    assert lean.score == judgment.values["score"]


def test_datetimes_are_stored_as_utc():
    j = _judgment(
        JUDGMENTS[4], started_at=datetime(2025, 1, 1, 12, tzinfo=timezone(timedelta(hours=5)))
    )
    assert judgment_rows(j).values["started_at"] == datetime(2025, 1, 1, 7, tzinfo=UTC)


@pytest.mark.parametrize("size", [1, 3, 4, 100])
def test_item_pk_ranges_cover_the_projects_pks_in_order(db_url, size):
    """The ranges of ``size`` items are those of the sorted pks (keeping only the ranges, not
    every pk): items of two projects interleaved, one deleted (a gap), the last range short or
    full, an empty project none."""
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        ours, other = repo.create_project(s, "ours"), repo.create_project(s, "other")
        empty = repo.create_project(s, "empty")
        for i in range(12):
            repo.add_item(s, ours if i % 3 else other, ITEM.model_copy(update={"id": f"q{i}"}))
        s.delete(s.scalars(select(ItemRow).where(ItemRow.project_pk == ours.pk)).all()[4])
        s.flush()
        pks = sorted(s.scalars(select(ItemRow.pk).where(ItemRow.project_pk == ours.pk)))
        assert len(pks) == 7
        expected = [(pks[i], pks[min(i + size, len(pks)) - 1]) for i in range(0, len(pks), size)]
        assert list(repo.item_pk_ranges(s, ours, size)) == expected
        assert list(repo.item_pk_ranges(s, empty, size)) == []
    engine.dispose()
