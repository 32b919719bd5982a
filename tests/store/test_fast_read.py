"""The fast reader yields exactly what the validated ORM reader does, on SQLite and PostgreSQL.

:func:`repo.iter_items_with_judgments` builds the wire models from stored values without
validating them (:mod:`preflab.store.trusted`); :func:`repo.iter_items_with_judgments_validated`
loads ORM rows and validates everything. Compared here: ``model_dump`` (python and JSON modes),
fields set, extras, types of nested models, derived properties, meta and batch pks.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, update

from preflab.io.importer import import_files
from preflab.schema import (
    Candidate,
    Dimension,
    GoldAnswer,
    Item,
    JudgmentBase,
    Message,
    PairwiseJudgment,
    Provenance,
    ReviewPass,
    Rubric,
    Telemetry,
    Veto,
    parse_judgment,
)
from preflab.store import db, repo, transaction
from preflab.store.models import JudgmentRow

ALL_KINDS = ("pairwise", "ranking", "rubric", "unary", "steps", "demonstration")

RUBRIC = Rubric(
    id="helpful",
    dimensions=[
        Dimension(name="correct", scale="binary"),
        Dimension(name="style", scale="ordinal", points=5),
    ],
    vetoes=[Veto(name="unsafe"), Veto(name="wrong")],
)


def _items(rng: random.Random, n: int) -> list[Item]:
    """Items of every shape: message prompts (with extra keys), text and message candidates,
    gold, reference, metadata, domains; and plain ones."""
    items = []
    for i in range(n):
        cands: list[dict[str, Any]] = []
        for c in range(rng.randint(2, 4)):
            if rng.random() < 0.3:
                msgs = [{"role": "assistant", "content": f"answer {i}.{c}"}]
                if rng.random() < 0.5:
                    msgs = [{"role": "user", "content": "again?", "name": "u1"}, *msgs]
                    msgs[-1] = {**msgs[-1], "tool_calls": [{"id": "t1", "args": {"x": 1}}]}
                cand: dict[str, Any] = {"id": f"c{c}", "messages": msgs}
            else:
                cand = {"id": f"c{c}", "text": f"answer {i}.{c} " * rng.randint(1, 4)}
            if rng.random() < 0.5:
                cand["model"] = rng.choice(["m1", "m2"])
            if rng.random() < 0.2:
                cand["source"] = "human"
            if rng.random() < 0.3:
                cand["metadata"] = {"temp": 0.7, "tags": ["a", "b"], "n": None}
            cands.append(cand)
        data: dict[str, Any] = {"id": f"it{i}", "candidates": cands}
        if rng.random() < 0.4:
            data["prompt"] = [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": f"question {i}?", "name": "asker"},
            ]
        else:
            data["prompt"] = f"question {i}?"
        if rng.random() < 0.4:
            data["domains"] = [" Math", "code ", "math"]
        if rng.random() < 0.3:
            data["reference"] = f"reference {i}"
        if rng.random() < 0.3:
            data["gold"] = {
                "judgment": {"kind": "unary", "candidate_id": "c0", "label": True},
                "explanation": "because" if rng.random() < 0.5 else None,
                "tolerance": rng.choice([0.0, 0.5, 1]),
            }
        if rng.random() < 0.5:
            data["metadata"] = {
                "batch": i,
                "source": "gen",
                "nested": {"deep": [1, 2.5, None, True]},
            }
        items.append(Item.model_validate(data))
    return items


def _provenance(rng: random.Random, rater: str, n: str) -> dict[str, Any]:
    prov: dict[str, Any] = {"rater_id": rater}
    if rng.random() < 0.5:
        prov["rubric_id"], prov["rubric_version"] = "helpful", 1
    if rng.random() < 0.5:
        prov["review_pass"] = rng.choice([0, 1, 2])
    if rng.random() < 0.5:
        prov["source"] = rng.choice(["human", "ai", "ai_assisted"])
    if rng.random() < 0.5:
        offset = timezone(timedelta(hours=rng.choice([-5, 0, 2, 9])))
        start = datetime(
            2025, 3, 1, 10, 0, rng.randint(0, 59), rng.randint(0, 999_999), tzinfo=offset
        )
        prov["started_at"] = start.isoformat()
        prov["submitted_at"] = (start + timedelta(seconds=rng.randint(1, 300))).isoformat()
    elif rng.random() < 0.3:
        prov["submitted_at"] = "2025-03-02T08:00:00Z"
    if rng.random() < 0.4:
        prov["telemetry"] = {"iki_cv": 0.5, "pasted_chars": rng.randint(0, 9), "active_ms": 1200}
    if rng.random() < 0.3:
        prov["idempotency_key"] = f"key-{rater}-{n}"
    return prov


def _judgments(rng: random.Random, item: Item, n_raters: int) -> list[JudgmentBase]:
    ids = [c.id for c in item.candidates]
    out = []
    for r in range(n_raters):
        for kind in ALL_KINDS:
            if rng.random() < 0.3:
                continue
            body: dict[str, Any]
            if kind == "pairwise":
                a, b = rng.sample(ids, 2)  # both shown orders, relative to the sorted pair
                strength = rng.choice([0, 1, 2, 3])
                winner = "tie" if strength == 0 else rng.choice("ab")
                body = {"shown_order": [a, b], "winner": winner, "strength": strength}
            elif kind == "ranking":
                shuffled = rng.sample(ids, len(ids))
                order = [[shuffled[0]]]
                for c in shuffled[1:]:  # ties: join the last group now and then
                    (order[-1].append(c) if rng.random() < 0.4 else order.append([c]))
                body = {"order": order}
            elif kind == "rubric":
                body = {
                    "candidate_id": rng.choice(ids),
                    "scores": {"correct": rng.choice([0, 1]), "style": 3.0},
                }
                if rng.random() < 0.5:
                    body["vetoes_failed"] = rng.sample(["unsafe", "wrong"], rng.randint(1, 2))
            elif kind == "unary":
                body = {"candidate_id": rng.choice(ids), "label": rng.random() < 0.5}
            elif kind == "steps":
                verdicts = [rng.choice([1, 0]) for _ in range(rng.randint(0, 2))]
                steps = ["s1", "s2", "s3"]
                verdicts = (
                    verdicts + [-1] if rng.random() < 0.5 else [rng.choice([1, 0]) for _ in steps]
                )
                body = {"candidate_id": rng.choice(ids), "steps": steps, "verdicts": verdicts}
            else:
                if rng.random() < 0.5:
                    body = {
                        "text": f"demo by r{r}",
                        "status": rng.choice(["pending", "accepted", "rejected"]),
                    }
                else:
                    body = {"messages": [{"role": "assistant", "content": "hi", "name": "expert"}]}
            if rng.random() < 0.3:
                body["rationale"] = f"because {r}"
            out.append(
                parse_judgment(
                    {
                        **body,
                        "kind": kind,
                        "item_id": item.id,
                        "provenance": _provenance(rng, f"rater-{r}", f"{item.id}-{len(out)}"),
                    }
                )
            )
    return out


def _populate(engine: Any, name: str, seed: int, n_items: int, tmp: Path) -> None:
    """A project ``name`` (every kind; some items imported in a batch; some judgments excluded),
    with another project's items interleaved so item pks of a chunk are not contiguous."""
    rng = random.Random(seed)
    items = _items(rng, n_items)
    with transaction(engine) as s:
        project = repo.create_project(s, name, kinds=ALL_KINDS)
        other = repo.create_project(s, f"{name}-other", kinds=ALL_KINDS)
        repo.add_rubric(s, project, RUBRIC)
        for n, item in enumerate(items[: n_items // 2]):
            repo.add_item(s, project, item)
            decoy = Item(
                id=item.id,
                prompt="decoy",
                candidates=[{"id": "c0", "text": "x"}, {"id": "c1", "text": "y"}],
            )
            repo.add_item(s, other, decoy)
            repo.add_judgment(
                s,
                other,
                PairwiseJudgment(
                    item_id=item.id,
                    shown_order=("c1", "c0"),
                    winner="a",
                    strength=1,
                    provenance={"rater_id": "d"},
                ),
            )
            for j in _judgments(rng, item, 3 if n % 5 else 0):  # every fifth item: no judgments
                repo.add_judgment(s, project, j)
    # the rest through the bulk importer: items and judgments with a batch pk
    path = tmp / f"{name}.jsonl"
    with open(path, "wb") as f:
        for item in items[n_items // 2 :]:
            f.write(orjson.dumps(item.model_dump(mode="json")) + b"\n")
            for j in _judgments(rng, item, 3):
                f.write(
                    orjson.dumps(j.model_dump(mode="json", by_alias=True, exclude_none=True))
                    + b"\n"
                )
    report = import_files(engine, name, [path])
    assert report.batch_pk is not None
    with transaction(engine) as s:
        project = repo.get_project(s, name)
        pks = sorted(
            s.scalars(
                JudgmentRow.__table__.select()
                .with_only_columns(JudgmentRow.pk)
                .where(JudgmentRow.project_pk == project.pk)
            )
        )
        excluded = rng.sample(pks, len(pks) // 5)
        s.execute(
            update(JudgmentRow)
            .where(JudgmentRow.pk.in_(excluded))
            .values(
                excluded=True, exclusion_reason=rng.choice([None, "rater suspended: gold drift"])
            )
        )


def _snapshot(entries: list[repo.ItemWithJudgments]) -> list[Any]:
    """Everything observable about the yielded records, in comparable form."""
    out = []
    for e in entries:
        out.append(
            {
                "item": e.item.model_dump(),
                "item_json": e.item.model_dump(mode="json"),
                "item_set": [
                    e.item.model_fields_set,
                    [c.model_fields_set for c in e.item.candidates],
                ],
                "messages": [(m.__pydantic_extra__, m.model_fields_set) for m in _messages(e.item)]
                + [
                    (m.__pydantic_extra__, m.model_fields_set)
                    for j in e.judgments
                    if j.kind == "demonstration"
                    for m in j.messages or ()
                ],
                "judgments": [
                    (
                        type(j),
                        j.model_dump(),
                        j.model_dump(mode="json", by_alias=True, exclude_none=True),
                        j.model_fields_set,
                        j.provenance.model_fields_set,
                        j.label_rows(),
                    )
                    for j in e.judgments
                ],
                "meta": e.meta,
                "batch_pk": e.batch_pk,
            }
        )
    return out


def _messages(item: Item) -> list[Message]:
    out = list(item.prompt) if isinstance(item.prompt, list) else []
    for c in item.candidates:
        out.extend(c.messages or [])
    return out


def _check_types(entries: list[repo.ItemWithJudgments]) -> None:
    """Nested models are model instances (not dicts); timestamps aware UTC; properties work."""
    for e in entries:
        assert all(type(c) is Candidate for c in e.item.candidates)
        assert all(type(m) is Message for m in _messages(e.item))
        assert e.item.gold is None or type(e.item.gold) is GoldAnswer
        for j in e.judgments:
            p = j.provenance
            assert type(p) is Provenance and type(p.review_pass) is ReviewPass
            assert p.telemetry is None or type(p.telemetry) is Telemetry
            for ts in (p.started_at, p.submitted_at):
                assert ts is None or ts.utcoffset() == timedelta(0) and ts.tzinfo is UTC
            if isinstance(j, PairwiseJudgment):
                assert type(j.shown_order) is tuple
                assert j.pair == tuple(sorted(j.shown_order)) and -3 <= j.score <= 3
            if j.kind == "demonstration" and j.messages is not None:
                assert all(type(m) is Message for m in j.messages)


def _compare(engine: Any, name: str, chunks: tuple[int, ...]) -> int:
    with transaction(engine) as s:
        project = repo.get_project(s, name)
        n = 0
        for include_excluded in (False, True):
            reference = list(
                repo.iter_items_with_judgments_validated(
                    s, project, include_excluded=include_excluded
                )
            )
            expected = _snapshot(reference)
            for chunk in chunks:
                fast = list(
                    repo.iter_items_with_judgments(
                        s, project, include_excluded=include_excluded, chunk=chunk
                    )
                )
                _check_types(fast)
                assert [e.item for e in fast] == [e.item for e in reference]
                assert [e.judgments for e in fast] == [e.judgments for e in reference]
                assert _snapshot(fast) == expected
            n = max(n, sum(len(e.judgments) for e in reference))
        return n


@pytest.mark.slow
def test_fast_reader_equals_the_validated_reader(db_url, tmp_path):
    engine = db.open_db(db_url)
    _populate(engine, "fr", seed=7, n_items=40, tmp=tmp_path)
    judged = _compare(engine, "fr", chunks=(1, 3, 7, 1000))
    with transaction(engine) as s:
        entries = list(
            repo.iter_items_with_judgments(s, repo.get_project(s, "fr"), include_excluded=True)
        )
    # the fixture covers what it claims to
    kinds = {j.kind for e in entries for j in e.judgments}
    assert kinds == set(ALL_KINDS) and judged > 100
    pairs = [j for e in entries for j in e.judgments if isinstance(j, PairwiseJudgment)]
    assert {j.shown_order[0] < j.shown_order[1] for j in pairs} == {True, False}
    assert any(j.winner == "tie" for j in pairs)
    assert any(
        len(g) > 1 for e in entries for j in e.judgments if j.kind == "ranking" for g in j.order
    )
    assert any(j.vetoes_failed for e in entries for j in e.judgments if j.kind == "rubric")
    assert any(j.messages for e in entries for j in e.judgments if j.kind == "demonstration")
    assert any(m["excluded"] for e in entries for m in e.meta)
    assert {e.batch_pk is None for e in entries} == {True, False}
    assert any(isinstance(e.item.prompt, list) for e in entries)
    assert any(e.item.gold for e in entries) and any(e.item.reference for e in entries)
    assert any(e.item.domains for e in entries) and any(e.item.metadata for e in entries)
    assert any(not e.judgments for e in entries)
    assert any(j.provenance.telemetry for e in entries for j in e.judgments)
    assert any(j.provenance.started_at for e in entries for j in e.judgments)
    engine.dispose()


@pytest.mark.slow
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1), n_items=st.integers(1, 12))
def test_fast_reader_equals_the_validated_reader_on_random_projects(
    db_url, tmp_path, seed, n_items
):
    engine = db.open_db(db_url)
    name = f"p{seed}-{n_items}"
    with transaction(engine) as s:
        exists = any(p.name == name for p in repo.list_projects(s))
    if not exists:
        _populate(engine, name, seed=seed, n_items=n_items, tmp=tmp_path)
    compared = _compare(engine, name, chunks=(1, 5))  # asserts both readers equal, every chunking
    with transaction(engine) as s:
        project = repo.get_project(s, name)
        stored = s.scalar(
            select(func.count())
            .select_from(JudgmentRow)
            .where(JudgmentRow.project_pk == project.pk)
        )
    assert compared == stored  # and, excluded labels included, they read every stored judgment
    engine.dispose()


def test_empty_project(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        project = repo.create_project(s, "empty")
        assert list(repo.iter_items_with_judgments(s, project)) == []
    engine.dispose()


def test_timestamps_come_back_aware_utc(db_url):
    engine = db.open_db(db_url)
    item = Item(id="q", prompt="p", candidates=[{"id": "a", "text": "x"}, {"id": "b", "text": "y"}])
    with transaction(engine) as s:
        project = repo.create_project(s, "ts")
        repo.add_item(s, project, item)
        repo.add_judgment(
            s,
            project,
            PairwiseJudgment(
                item_id="q",
                shown_order=("b", "a"),
                winner="a",
                strength=2,
                provenance={
                    "rater_id": "r",
                    "started_at": "2025-03-01T10:00:00+02:00",
                    "submitted_at": "2025-03-01T08:01:30Z",
                },
            ),
        )
    with transaction(engine) as s:
        [entry] = repo.iter_items_with_judgments(s, repo.get_project(s, "ts"))
        [j] = entry.judgments
        assert j.provenance.started_at == datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
        assert j.provenance.started_at.tzinfo is UTC and j.provenance.submitted_at.tzinfo is UTC
        assert (j.pair, j.score, j.chosen) == (("a", "b"), 2, "b")
    engine.dispose()
