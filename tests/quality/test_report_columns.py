"""The report's store path folds plain pairwise items from their stored columns
(``quality/accumulate_columns.py``) and every other item through ``add``: the accumulator's
result is bit for bit what ``add`` on every item's objects gives, on SQLite and PostgreSQL, on
projects with and without each twist that leaves the column path (revisions, pass 1 and pass 2
labels, AI labels, gold, telemetry, critique spans, other kinds, message candidates) and each
that stays on it (ties, a missing strength, the shown order, several import batches and
guideline versions, rationales, times, candidates shared between items, a rater on two pairs of
one item). The store path reads the project lean (``io/quality_read.py``): its times in bulk or
through SQLAlchemy's parser, and whether any label, excluded ones too, has a judge or an
assistance, as the queries of the table answer."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from preflab.io import quality_read, quality_source
from preflab.io.quality_source import accumulate_in, load_project, report_from_store
from preflab.quality import accumulate_columns, build_report
from preflab.quality.accumulate import Bounds
from preflab.quality.adjudication import reasons_for, unit_scores
from preflab.schema import Item, JudgmentBase, PairwiseJudgment, UnaryJudgment
from preflab.store import db, repo, transaction
from preflab.store.models import ImportBatch, JudgmentRow

from .test_report_streaming import assert_same

T0 = datetime(2026, 6, 1, tzinfo=UTC)
#: twists that leave the column path, then twists it takes
LEAVING = ("revision", "ai", "adjudicated", "gold", "telemetry", "spans", "unary", "messages")
STAYING = (
    "plain",
    "pass1",
    "two_versions",
    "no_strength",
    "tie",
    "no_times",
    "empty",
    "rater_twice",
)
TEXTS = [
    "## Plan\n- **one** step\n- two",
    "Great question! Here it is.",
    "plain short answer",
    "a much longer plain answer with many many words in it for the length",
    "You're absolutely right, I apologize.",
]
RATIONALES = [
    "the first answer is clearly more helpful and correct",
    "the first answer is clearly more helpful and correct!",
    "B explains the steps better than A does here",
]


def twisted_project(
    seed: int, twists: tuple[str, ...], n_items: int = 90
) -> tuple[list[JudgmentBase], list[tuple[Item, int]]]:
    """Pairwise items (two or three candidates), item ``n`` with twist ``twists[n % len]``;
    each item with the import batch (0, 1 or 2: none) it goes in."""
    rng = random.Random(seed)
    raters = [f"r{k}" for k in range(6)]
    items: list[tuple[Item, int]] = []
    js: list[JudgmentBase] = []
    minute = 0
    for n in range(n_items):
        twist = twists[n % len(twists)]
        item_id = f"q{n}"
        cands = ["a", "b", "c"] if n % 4 == 0 or twist == "rater_twice" else ["a", "b"]
        candidates: list[dict[str, Any]] = [{"id": c, "text": rng.choice(TEXTS)} for c in cands]
        if twist == "messages":
            candidates[0] = {
                "id": "a",
                "messages": [{"role": "assistant", "content": rng.choice(TEXTS)}],
            }
        gold = None
        if twist == "gold":
            gold = {
                "judgment": {
                    "kind": "pairwise",
                    "shown_order": ["a", "b"],
                    "winner": "a",
                    "strength": 2,
                }
            }
        items.append(
            (Item(id=item_id, prompt=f"prompt {n}", candidates=candidates, gold=gold), n % 3)
        )
        if twist == "empty":
            continue
        version = rng.choice([None, 1, 2])
        for k, rater in enumerate(rng.sample(raters, rng.randint(1, 5))):
            minute += 1
            prov: dict[str, Any] = {
                "rater_id": rater,
                "submitted_at": T0 + timedelta(minutes=minute),
                "guideline_version": version,
            }
            if twist != "no_times" and rng.random() < 0.8:
                prov["started_at"] = T0 + timedelta(minutes=minute, seconds=-rng.randint(1, 90))
            if twist == "two_versions" and k == 1:
                prov["guideline_version"] = 3
            if twist == "pass1" and k == 0:
                prov["review_pass"] = 1
            if twist == "ai" and k == 0:
                prov["source"] = "ai"
            if twist == "adjudicated" and k == 0:
                prov["review_pass"] = 2
            if twist == "telemetry" and k == 0:
                prov["telemetry"] = {"active_ms": 200, "typed_chars": 5, "pasted_chars": 400}
            shown = tuple(rng.sample(cands, 2))
            winner = rng.choice(["a", "b"])
            strength: int | None = rng.randint(1, 3)
            if twist == "tie" and k % 2 == 0:
                winner, strength = "tie", 0
            if twist == "no_strength" and k != 1:
                strength = None
            rationale = rng.choice(RATIONALES) if rng.random() < 0.4 else None
            if rng.random() < 0.1:
                rationale = "too short"
            if twist == "unary" and k == 0:
                js.append(
                    UnaryJudgment(
                        item_id=item_id,
                        candidate_id="a",
                        label=rng.random() < 0.5,
                        provenance=prov,
                        rationale=rationale,
                    )
                )
                continue
            extra: dict[str, Any] = {}
            if twist == "spans" and k < 2:
                extra["spans"] = [
                    {"candidate_id": shown[0], "start": 0, "end": 4, "category": "factual"}
                ]
            js.append(
                PairwiseJudgment(
                    item_id=item_id,
                    shown_order=shown,
                    winner=winner,
                    strength=strength,
                    provenance=prov,
                    rationale=rationale,
                    **extra,
                )
            )
            if twist == "rater_twice" and k == 0:  # the same rater on another pair: plain
                other = [c for c in cands if c not in shown] + [shown[0]]
                minute += 1
                js.append(
                    PairwiseJudgment(
                        item_id=item_id,
                        shown_order=tuple(other),
                        winner="b",
                        strength=2,
                        provenance={**prov, "submitted_at": T0 + timedelta(minutes=minute)},
                    )
                )
            if twist == "revision" and k == 0:  # the same rater and pair again, later
                minute += 1
                js.append(
                    PairwiseJudgment(
                        item_id=item_id,
                        shown_order=shown[::-1],
                        winner="a",
                        strength=1,
                        provenance={**prov, "submitted_at": T0 + timedelta(minutes=minute)},
                    )
                )
    return js, items


def store(url: str, js: list[JudgmentBase], items: list[tuple[Item, int]], name: str) -> None:
    engine = db.open_db(url)
    with transaction(engine) as s:
        settings = {"policy": {"span_categories": ["factual"]}}
        project = repo.create_project(s, name, kinds=("pairwise", "unary"), settings=settings)
        other = repo.create_project(
            s, f"{name}-other", kinds=("pairwise", "unary"), settings=settings
        )
        batches = []
        for k in range(2):
            batch = ImportBatch(project_pk=project.pk, content_hash=f"{k:064d}", format="jsonl")
            s.add(batch)
            s.flush()
            batches.append(batch.pk)
        for it, b in items:
            repo.add_item(s, project, it, batch_pk=batches[b] if b < 2 else None)
            repo.add_item(s, other, it)  # another project's items interleaved
        for j in js:
            repo.add_judgment(s, project, j)
        repo.add_judgment(s, other, js[0])
    engine.dispose()


def identical(a: Any, b: Any, path: str = "report") -> None:
    """Equal bit for bit (NaN equal to NaN), key order and types included."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{path}: {list(a)} != {b!r}"
        for k in a:
            identical(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: {a!r} != {b!r}"
        for k, (x, y) in enumerate(zip(a, b)):
            identical(x, y, f"{path}[{k}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), f"{path}: {a!r} != {b!r}"
    else:
        assert a == b and type(a) is type(b), f"{path}: {a!r} != {b!r}"


def both_paths(
    url: str, name: str, monkeypatch: pytest.MonkeyPatch, **kw: Any
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The result of ``accumulate_in`` with the column path and with ``add`` only (and its
    length pairs), and how many items the column path took."""
    taken = 0
    add_plain = accumulate_columns.add_plain_items

    def counting(acc: Any, run: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal taken
        taken += len(run)
        add_plain(acc, run, *args, **kwargs)

    engine = db.open_db(url)
    try:
        with transaction(engine) as s:
            monkeypatch.setattr(quality_source, "add_plain_items", counting)
            fast = accumulate_in(s, name, n_boot=30, **kw)
            monkeypatch.setattr(quality_source, "columns_apply", lambda acc: False)
            slow = accumulate_in(s, name, n_boot=30, **kw)
            monkeypatch.undo()
        out_fast = {"result": fast.result(), "pairs": fast.length_pairs()}
        out_slow = {"result": slow.result(), "pairs": slow.length_pairs()}
    finally:
        engine.dispose()
    return out_fast, out_slow, taken


def check_paths(
    url: str, monkeypatch: pytest.MonkeyPatch, twists: tuple[str, ...], **kw: Any
) -> tuple[int, int]:
    """Both paths' results identical (asserted here); returns how many items took the column
    path and how many should have (every plain item; an item with a twist that leaves it
    does not, the AI twist stays on it when AI labels count), for the test to assert."""
    js, items = twisted_project(len(twists), twists, n_items=45 if len(twists) < 3 else 90)
    store(url, js, items, "cols")
    fast, slow, taken = both_paths(url, "cols", monkeypatch, **kw)
    identical(slow, fast)
    staying = set(STAYING) | ({"ai"} if kw.get("include_ai") else set())
    expected = sum(1 for n in range(len(items)) if twists[n % len(twists)] in staying)
    return taken, expected


@pytest.mark.parametrize("twist", LEAVING)
def test_column_path_equals_add_with_each_twist(db_url, monkeypatch, twist):
    taken, expected = check_paths(db_url, monkeypatch, (twist, "plain"))
    assert taken == expected > 0


@pytest.mark.parametrize("include_ai", [False, True])
@pytest.mark.parametrize("twists", [STAYING, LEAVING + STAYING], ids=["staying", "all"])
def test_column_path_equals_add_and_build_report(db_url, monkeypatch, twists, include_ai):
    taken, expected = check_paths(db_url, monkeypatch, twists, include_ai=include_ai)
    assert taken == expected > 0
    # and the finished report equals build_report on the loaded project
    judgments, loaded, batches = load_project("cols", db_url)
    reference = build_report(
        judgments, items=loaded, batches=batches, n_boot=30, include_ai=include_ai
    )
    assert_same(reference, report_from_store(db_url, "cols", n_boot=30, include_ai=include_ai))


def test_column_path_above_the_bounds(db_url, monkeypatch):
    """The kept units, length pairs, times and rationales pass their bounds: sampled alike."""
    js, items = twisted_project(5, LEAVING + STAYING, n_items=150)
    store(db_url, js, items, "bounded")
    bounds = Bounds(units=7, pairs=9, times_per_rater=4, times=6, rationales=3, text_cache=2)
    fast, slow, taken = both_paths(db_url, "bounded", monkeypatch, bounds=bounds)
    assert taken > 50
    assert fast["result"]["length_bias"]["sample"]["pairs"] == 9
    assert fast["result"]["telemetry_flags_sample"]["rationales"] == 3
    assert any("ci_sample" in row for row in fast["result"]["agreement"])
    identical(slow, fast)


def test_a_time_window_leaves_the_column_path(db_url, monkeypatch):
    js, items = twisted_project(2, STAYING, n_items=30)
    store(db_url, js, items, "window")
    fast, slow, taken = both_paths(db_url, "window", monkeypatch, window=timedelta(minutes=45))
    assert taken == 0
    identical(slow, fast)


def test_scores_cache_equals_unit_scores_and_clears() -> None:
    cache = accumulate_columns.ScoresCache(size=2)
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 5)
        winners = [float(rng.choice([-1, 0, 1])) for _ in range(n)]
        dims = {"winner": winners, "strength": [w * rng.randint(1, 3) for w in winners]}
        if rng.random() < 0.3:
            del dims["strength"]
        row = unit_scores("pairwise", "u", "i", dims)
        expected = ({k: v for k, v in row.items() if k not in ("item_id", "unit", "kind")},)
        got = cache.scores("pairwise", dims, None)
        identical(expected[0], got[0])
        assert got[1] == reasons_for(row, None)
        assert len(cache.entries) <= 2


@pytest.mark.parametrize("units", [40, 200_000])
def test_long_runs_of_plain_items(db_url, monkeypatch, units):
    """Items that stay on the column path only: the plain items of a chunk are folded as one
    run (add_plain_items), broken only by items of two guideline versions; the agreement rows
    fill in bulk and (units=40) pass their bound in the middle of a run; a 3-entry text cache."""
    js, items = twisted_project(7, STAYING, n_items=160)
    store(db_url, js, items, "runs")
    runs: list[int] = []
    add_runs = accumulate_columns.add_plain_items

    def recording(acc: Any, run: Any, *args: Any) -> None:
        runs.append(len(run))
        add_runs(acc, run, *args)

    monkeypatch.setattr(accumulate_columns, "add_plain_items", recording)
    bounds = Bounds(units=units, text_cache=3)
    fast, slow, taken = both_paths(db_url, "runs", monkeypatch, bounds=bounds)
    assert taken == len(items)  # every item is plain (an empty one too)
    assert runs == [taken]  # one chunk: one run
    assert bool(units == 40) == any("ci_sample" in row for row in fast["result"]["agreement"])
    identical(slow, fast)


def test_times_through_sqlalchemys_parser(db_url, monkeypatch):
    """Stored times not in SQLAlchemy's SQLite text take the per-value path: the same result."""
    js, items = twisted_project(3, STAYING, n_items=60)
    store(db_url, js, items, "times")
    parsed = 0
    as_utc = quality_read.as_utc

    def counting(value: Any) -> Any:
        nonlocal parsed
        parsed += 1
        return as_utc(value)

    with monkeypatch.context() as m:
        m.setattr(quality_read, "as_utc", counting)
        bulk, slow, _ = both_paths(db_url, "times", m)
    # SQLite's stored text in bulk with numpy; PostgreSQL's datetimes one by one
    assert (parsed == 0) == db_url.startswith("sqlite")
    parsed = 0
    with monkeypatch.context() as m:
        m.setattr(quality_read, "as_utc", counting)
        m.setattr(quality_read, "_sqlalchemy_text", lambda value: False)
        per_value, _, taken = both_paths(db_url, "times", m)
    assert taken > 0 and parsed > 0
    medians = [r.get("median_seconds") for r in bulk["result"]["raters"].values()]
    assert sum(m is not None for m in medians) >= 3
    identical(slow, bulk)
    identical(slow, per_value)


@pytest.mark.parametrize("column", ["judge", "assisted_by"])
@pytest.mark.parametrize("excluded", [False, True])
def test_lean_flags_equal_the_queries(db_url, column, excluded):
    """The lean read's judge and assistance flags are what has_judge_labels and
    has_assisted_labels ask of the table (excluded labels count), before and after one label
    gets the column."""
    js, items = twisted_project(4, STAYING, n_items=30)
    store(db_url, js, items, "flags")
    engine = db.open_db(db_url)
    try:
        for step in range(2):
            with transaction(engine) as s:
                project = repo.get_project(s, "flags")
                flags = quality_read.Flags()
                for _ in quality_read.iter_lean_chunks(s, project, False, flags, chunk=7):
                    pass
                judge = quality_source.has_judge_labels(s, project.pk)
                assisted = quality_source.has_assisted_labels(s, project.pk)
                assert (flags.judge, flags.assisted) == (judge, assisted)
                assert (judge, assisted) == (
                    step == 1 and column == "judge",
                    step == 1 and column == "assisted_by",
                )
                if step == 0:
                    pk = s.scalar(
                        select(func.max(JudgmentRow.pk)).where(JudgmentRow.project_pk == project.pk)
                    )
                    value: Any = {"model": "m"} if column == "judge" else [{"origin": "judge"}]
                    s.execute(
                        update(JudgmentRow)
                        .where(JudgmentRow.pk == pk)
                        .values({column: value, "excluded": excluded})
                    )
    finally:
        engine.dispose()


def test_queue_of_run_finds_the_cached_scores() -> None:
    """A run's units look up ScoresCache's own keys: units seen once are hits (no scoring)."""
    acc = accumulate_columns.ReportAccumulator(batches={})
    cache = accumulate_columns.ScoresCache()
    units = [
        ("i1", "i1::a|b", [1.0, -1.0, 1.0], [2.0, -1.0, 3.0]),
        ("i2", "i2::a|b", [0.0, 1.0], []),
        ("i3", "i3::a|c", [-1.0], [-2.0]),
    ]
    accumulate_columns._queue_of_run(acc, units, cache)
    pushed = acc.queue_total
    assert len(cache.entries) == 3

    def no_scoring(*args: Any) -> Any:
        raise AssertionError("a unit seen before was scored again")

    cache.scores = no_scoring  # type: ignore[method-assign]
    accumulate_columns._queue_of_run(acc, units, cache)
    assert pushed > 0 and len(cache.entries) == 3 and acc.queue_total == 2 * pushed
