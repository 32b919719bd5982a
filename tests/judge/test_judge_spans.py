"""Model judges mark critique spans (templates ``pairwise@2`` and ``unary@2``, docs/judges.md):
the judge quotes each span; the runner places a quote only where it occurs exactly once in its
answer (code points of ``Candidate.as_text()``) and drops, counted, a quote it cannot find, one
it finds twice, and one in a category the project lacks. Against the in-process
OpenAI-compatible server (``preflab.train.openai_stub``)."""

from __future__ import annotations

import json

from sqlalchemy import select

from preflab.judge.project import judge_project
from preflab.judge.runner import JudgeConfig
from preflab.judge.templates import load_template
from preflab.schema import Candidate, Item
from preflab.store import JudgmentRow, db, transaction
from preflab.store.repo import add_item, create_project
from preflab.train.openai_stub import StubPolicy, StubServer
from preflab.train.sampling import RetryPolicy

FAST = RetryPolicy(max_retries=2, base_s=0.01, cap_s=0.05, timeout_s=5)
X = "😀 The capital of France is **Lyon**. It is big. It is big."
Y = "Paris is the capital of France."
POLICY = {"policy": {"span_categories": ["factual_error", "style"]}}


def build(url: str, kinds: list[str], items: list[Item]):
    engine = db.open_db(url)
    with transaction(engine) as s:
        project = create_project(s, "p", kinds=kinds, settings=POLICY)
        for item in items:
            add_item(s, project, item)
    return engine


def config(url: str, template: str) -> JudgeConfig:
    return JudgeConfig(endpoint=url, model="qwen", template=load_template(template), retry=FAST)


def test_a_pairwise_judge_marks_spans_placed_by_exact_quote(sqlite_url):
    item = Item(
        id="i1",
        prompt="Capital of France?",
        candidates=[Candidate(id="x", text=X), Candidate(id="y", text=Y)],
    )
    engine = build(sqlite_url, ["pairwise"], [item])
    prompts: list[str] = []

    def judge(prompt: str, attempt: int) -> str:
        prompts.append(prompt)
        x_is_a = prompt.index("😀") < prompt.index("Paris is")
        xl, yl = ("A", "B") if x_is_a else ("B", "A")
        spans = [
            {"answer": xl, "quote": "**Lyon**", "category": "factual_error", "note": "Paris"},
            {"answer": xl, "quote": "Marseille", "category": "factual_error"},  # not in it
            {"answer": xl, "quote": "It is big.", "category": "style"},  # twice in it
            {"answer": yl, "quote": "Paris", "category": "praise"},  # not a category
        ]
        if not x_is_a:  # the second order adds one on the other answer
            spans.append({"answer": yl, "quote": "of France", "category": "style", "note": ""})
        return json.dumps(
            {"winner": yl, "strength": 2, "rationale": "Lyon is wrong", "spans": spans}
        )

    with StubServer(StubPolicy(responder=judge)) as server:
        _, stats = judge_project(engine, "p", config(server.url, "pairwise"), cache_path=None)
    assert all("factual_error, style" in p and '"spans"' in p for p in prompts)
    assert (stats.labels, stats.spans) == (1, 2)
    # each order's reply is counted: the quote not found twice, the repeated one twice ...
    assert (stats.spans_not_found, stats.spans_ambiguous, stats.spans_other_category) == (2, 2, 2)
    with transaction(engine) as s:
        (row,) = s.scalars(select(JudgmentRow).where(JudgmentRow.source == "ai")).all()
        spans = row.body["spans"]
    texts = {"x": X, "y": Y}
    got = [
        (sp["candidate_id"], texts[sp["candidate_id"]][sp["start"] : sp["end"]], sp["category"])
        for sp in spans
    ]
    assert got == [("x", "**Lyon**", "factual_error"), ("y", "of France", "style")]
    assert spans[0]["start"] == X.index("**Lyon**")  # code points: the emoji counts one
    engine.dispose()


def test_a_unary_judge_marks_spans_and_v1_asks_for_none(sqlite_url):
    item = Item(id="u1", prompt="Capital?", candidates=[Candidate(id="c", text=X)])
    engine = build(sqlite_url, ["unary"], [item])
    prompts: list[str] = []

    def judge(prompt: str, attempt: int) -> str:
        prompts.append(prompt)
        spans = [{"quote": "Lyon", "category": "factual_error", "note": "Paris"}]
        return json.dumps({"acceptable": False, "rationale": "wrong city", "spans": spans})

    with StubServer(StubPolicy(responder=judge)) as server:
        _, stats = judge_project(engine, "p", config(server.url, "unary@2"), cache_path=None)
    assert stats.spans == 1 and "factual_error, style" in prompts[0]
    with transaction(engine) as s:
        (row,) = s.scalars(select(JudgmentRow).where(JudgmentRow.source == "ai")).all()
        (span,) = row.body["spans"]
    assert X[span["start"] : span["end"]] == "Lyon" and span["note"] == "Paris"
    assert row.judge["template_version"] == 2

    v1 = load_template("unary@1")
    assert "spans" not in v1.user and "$spans" in load_template("unary@2").user
    engine.dispose()
