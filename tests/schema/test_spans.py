"""Critique spans (docs/critiques.md): the model's rules, the policy's categories, the store's
checks against the item, and the round trip through the store, a raw export and a re-import."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import ImportFailed, import_files
from preflab.schema import CritiqueSpan, Item, dump_judgment, parse_judgment
from preflab.schema.policy import Policy, PolicyError, stored_policy
from preflab.server.errors import ServiceError
from preflab.server.flow.common import NotCommon
from preflab.server.flow.submit import build_judgment
from preflab.server.permissions import ProjectRef
from preflab.store import db, repo, transaction
from preflab.store.models import JudgmentRow

CATEGORIES = ["factual_error", "unsafe", "style"]
SETTINGS = {"policy": {"span_categories": CATEGORIES}}
# "é" and "🙂" are one code point each: offsets count them as Python indexes a str
ITEM = Item(
    id="q1",
    prompt="Capital of France?",
    candidates=[
        {"id": "a", "text": "Paris 🙂 is the capital."},
        {"id": "b", "messages": [{"role": "assistant", "content": "Lyon, café."}]},
    ],
)


def span(cand: str, start: int, end: int, category: str = "factual_error", note: str = "") -> dict:
    return {"candidate_id": cand, "start": start, "end": end, "category": category, "note": note}


def pairwise(spans: list[dict] | None, rater: str = "r1") -> dict:
    body = {
        "kind": "pairwise",
        "item_id": "q1",
        "shown_order": ["a", "b"],
        "winner": "a",
        "strength": 2,
        "provenance": {"rater_id": rater},
    }
    if spans is not None:
        body["spans"] = spans
    return body


# -- the model ---------------------------------------------------------------------------------


def test_offsets_are_half_open_code_points_of_the_answer_text():
    j = parse_judgment(pairwise([span("b", 0, 4, note="wrong city"), span("a", 6, 7, "style")]))
    texts = {c.id: c.as_text() for c in ITEM.candidates}
    got = [(s.candidate_id, texts[s.candidate_id][s.start : s.end]) for s in j.spans or []]
    # sorted by candidate then offsets, whatever order they came in
    assert got == [("a", "🙂"), ("b", "Lyon")]
    assert texts["b"][9:10] == "é" and len(texts["b"]) == 11


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (span("a", 3, 3), r"end \(3\) must be greater than start \(3\)"),
        (span("a", 5, 2), "must be greater than start"),
        (span("a", -1, 2), "greater than or equal to 0"),
        (span("a", 0, 2, category=""), "at least 1 character"),
        (span("a", 0, 2, note="x\x00y"), "NUL character"),
        (span("a", 0, 2, note="x" * 5001), "at most 5000 characters"),
        ({**span("a", 0, 2), "colour": "red"}, "Extra inputs are not permitted"),
    ],
)
def test_a_bad_span_is_refused_with_its_reason(bad, message):
    with pytest.raises(ValidationError, match=message):
        parse_judgment(pairwise([bad]))


def test_a_span_on_an_answer_the_judgment_does_not_name_is_refused():
    with pytest.raises(ValidationError, match=r"spans\.0\.candidate_id: 'c' is not an answer"):
        parse_judgment(pairwise([span("c", 0, 2)]))
    unary = {"kind": "unary", "item_id": "q1", "candidate_id": "a", "label": False}
    with pytest.raises(ValidationError, match="'b' is not an answer this judgment is about"):
        parse_judgment({**unary, "provenance": {"rater_id": "r"}, "spans": [span("b", 0, 1)]})
    ok = parse_judgment({**unary, "provenance": {"rater_id": "r"}, "spans": [span("a", 0, 1)]})
    assert ok.spans == [CritiqueSpan(**span("a", 0, 1))]


def test_an_exact_duplicate_is_refused_and_order_does_not_change_the_judgment():
    with pytest.raises(ValidationError, match="the same span is given twice"):
        parse_judgment(pairwise([span("a", 0, 2), span("a", 0, 2)]))
    one = parse_judgment(pairwise([span("b", 0, 4), span("a", 0, 2), span("a", 0, 2, "style")]))
    two = parse_judgment(pairwise([span("a", 0, 2, "style"), span("b", 0, 4), span("a", 0, 2)]))
    assert dump_judgment(one) == dump_judgment(two)
    assert repo.judgment_content_hash(one) == repo.judgment_content_hash(two)


def test_no_spans_is_stored_and_hashed_as_before():
    without = parse_judgment(pairwise(None))
    empty = parse_judgment(pairwise([]))
    assert empty.spans is None and "spans" not in dump_judgment(empty)
    assert dump_judgment(empty) == dump_judgment(without)
    assert repo.judgment_content_hash(empty) == repo.judgment_content_hash(without)
    with_spans = parse_judgment(pairwise([span("a", 0, 2)]))
    assert repo.judgment_content_hash(with_spans) != repo.judgment_content_hash(without)


@pytest.mark.parametrize("kind", ["steps", "demonstration"])
def test_kinds_that_do_not_compare_or_grade_answers_take_no_spans(kind):
    body = (
        {"candidate_id": "a", "steps": ["s"], "verdicts": [1]}
        if kind == "steps"
        else {"text": "Paris."}
    )
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        parse_judgment(
            {"kind": kind, "item_id": "q1", "provenance": {"rater_id": "r"}, **body}
            | {"spans": [span("a", 0, 1)]}
        )


# -- the policy --------------------------------------------------------------------------------


def test_policy_defaults_to_no_spans_and_refuses_blank_or_repeated_categories():
    assert Policy().span_categories == [] and Policy().require_spans is False
    assert stored_policy(SETTINGS).span_categories == CATEGORIES
    with pytest.raises(PolicyError, match=r"policy\.span_categories: .*listed twice"):
        stored_policy({"policy": {"span_categories": ["unsafe", "unsafe"]}})
    with pytest.raises(PolicyError, match=r"policy\.span_categories: .*blank"):
        stored_policy({"policy": {"span_categories": ["unsafe", " "]}})


# -- the store ---------------------------------------------------------------------------------


def test_spans_round_trip_through_the_store_and_are_checked_against_the_item(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        project = repo.create_project(s, "sp", kinds=["pairwise"], settings=SETTINGS)
        repo.add_item(s, project, ITEM)
        given = parse_judgment(
            pairwise([span("b", 6, 11, "style", "accent: é ✓"), span("a", 0, 5)])
        )
        row, created = repo.add_judgment(s, project, given)
        assert created
        pk = row.pk
        with pytest.raises(repo.StoreError, match=r"spans\.0\.end: 24 is past the end of answer"):
            repo.add_judgment(s, project, parse_judgment(pairwise([span("a", 20, 24)], "r2")))
        # the last code point is inside: end == len(text) is accepted
        repo.add_judgment(s, project, parse_judgment(pairwise([span("a", 20, 23)], "r3")))
        with pytest.raises(repo.StoreError, match=r"spans\.0\.category: 'typo' is not one of"):
            repo.add_judgment(s, project, parse_judgment(pairwise([span("a", 0, 1, "typo")], "r4")))
    with transaction(engine) as s:
        project = repo.get_project(s, "sp")
        [entry] = list(repo.iter_items_with_judgments(s, project))
        by_rater = {j.provenance.rater_id: j for j in entry.judgments}
        assert sorted(by_rater) == ["r1", "r3"]
        assert by_rater["r1"].spans == given.spans
        assert all(isinstance(x, CritiqueSpan) for x in by_rater["r1"].spans or [])
        # the read fast path (store/trusted.py) gives what validating the row gives
        slow = repo.judgment_from_row(s.get(JudgmentRow, pk))
        assert slow == by_rater["r1"] and dump_judgment(slow) == dump_judgment(by_rater["r1"])
        assert repo.judgment_content_hash(by_rater["r1"]) == repo.judgment_content_hash(given)
        plain = repo.create_project(s, "plain", kinds=["pairwise"])
        repo.add_item(s, plain, ITEM)
        with pytest.raises(repo.StoreError, match="this project takes no critique spans"):
            repo.add_judgment(s, plain, given)
    engine.dispose()


# -- raw export and re-import ------------------------------------------------------------------


def _raw(engine, project: str, out: Path) -> list[dict]:
    export_project(engine, project, ExportOptions(format="raw", out=out, length_gate=None))
    return [orjson.loads(line) for line in (out / "train.jsonl").read_bytes().splitlines()]


def test_spans_round_trip_through_raw_export_and_reimport(db_url, tmp_path):
    engine = db.open_db(db_url)
    spans = [span("a", 0, 5, note="right"), span("b", 0, 4, "factual_error", "Paris, not Lyon")]
    with transaction(engine) as s:
        for name in ("src", "dst"):
            repo.create_project(s, name, kinds=["pairwise"], settings=SETTINGS)
        project = repo.get_project(s, "src")
        repo.add_item(s, project, ITEM)
        repo.add_judgment(s, project, parse_judgment(pairwise(spans)))
        repo.add_judgment(s, project, parse_judgment(pairwise(None, "r2")))
    first = _raw(engine, "src", tmp_path / "one")
    assert [rec.get("spans") for rec in first] == [spans, None] or [
        rec.get("spans") for rec in first
    ] == [None, spans]
    import_files(engine, "dst", [tmp_path / "one" / "train.jsonl"])
    second = _raw(engine, "dst", tmp_path / "two")
    key = lambda rec: rec["provenance"]["rater_hash"]  # noqa: E731
    assert [r.get("spans") for r in sorted(first, key=key)] == [
        r.get("spans") for r in sorted(second, key=key)
    ]
    engine.dispose()


def test_an_import_with_a_category_outside_the_list_names_file_line_and_field(db_url, tmp_path):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "imp", kinds=["pairwise"], settings=SETTINGS)
    item = ITEM.model_dump(mode="json", exclude_none=True)
    good = {**pairwise([span("a", 0, 5)]), "item": item}
    bad = {**pairwise([span("a", 0, 5, "typo")], "r2"), "item": item}
    path = tmp_path / "in.jsonl"
    path.write_bytes(orjson.dumps(good) + b"\n" + orjson.dumps(bad) + b"\n")
    with pytest.raises(ImportFailed) as failed:
        import_files(engine, "imp", [path])
    assert [str(p) for p in failed.value.problems] == [
        f"{path}:2: spans.0.category: 'typo' is not one of the project's span categories "
        "(factual_error, unsafe, style); use one of them or add it to policy.span_categories"
    ]
    with transaction(engine) as s:  # nothing half-written
        assert list(repo.iter_items_with_judgments(s, repo.get_project(s, "imp"))) == []
    engine.dispose()


# -- the web submit (the span UI is the next step) -----------------------------------------------


def test_the_web_submit_checks_spans_against_the_answers_and_categories():
    """The web submit takes spans now (the label page's span UI): offsets against the answers'
    lengths as the caller read them, categories against the project's; without the lengths and
    without a session the lane hands the request to the framework (``NotCommon``)."""
    project = ProjectRef(
        pk=1,
        name="sp",
        title="sp",
        kinds=["pairwise"],
        settings=SETTINGS,
        rubric_key=None,
        rubric_version=None,
    )

    def submit(spans: list[dict], lengths: dict[str, int] | None):
        body = {"kind": "pairwise", "winner": "a", "strength": 2, "spans": spans}
        return build_judgment(
            None,
            project,
            None,
            "r1",
            body,
            shown_order=["a", "b"],
            started_at=datetime(2026, 1, 1, tzinfo=UTC),
            idempotency_key=None,
            telemetry=None,
            item_key="q1",
            candidate_keys=["a", "b"],
            answer_lengths=lengths,
        )

    assert submit([span("a", 0, 5)], {"a": 5, "b": 3}).spans[0].end == 5
    with pytest.raises(ServiceError) as refused:
        submit([span("b", 0, 2), span("a", 0, 6), span("b", 0, 1, "typo")], {"a": 5, "b": 3})
    assert refused.value.status == 422
    assert [e["loc"][2:] for e in refused.value.errors] == [
        ["spans", "2", "category"],
        ["spans", "1", "end"],
    ]
    with pytest.raises(NotCommon):
        submit([span("a", 0, 5)], None)
