"""``preflab judge run`` and ``preflab judge audit`` against a real OpenAI-compatible HTTP server in
this process (``preflab.train.openai_stub``; httpx over a socket, nothing mocked), on a project
with human labels built so that every audit figure is computed by hand below."""

from __future__ import annotations

import json
import re

import numpy as np
import orjson
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from preflab.cli import app
from preflab.io.export import ExportOptions, export_project
from preflab.judge.project import audit_project, judge_project
from preflab.judge.runner import JudgeConfig
from preflab.judge.templates import load_template
from preflab.quality.agreement import krippendorff_alpha
from preflab.quality.bias import length_bias
from preflab.quality.judges import finite
from preflab.schema import Candidate, Dimension, Item, PairwiseJudgment, Rubric, UnaryJudgment
from preflab.store import JudgmentRow, db, transaction
from preflab.store.repo import add_item, add_judgment, add_rubric, create_project
from preflab.train.openai_stub import StubPolicy, StubServer
from preflab.train.sampling import RetryPolicy

FAST = RetryPolicy(max_retries=2, base_s=0.01, cap_s=0.05, timeout_s=5)

# item k: x by a GPT model, y by a Llama model; x is the longer answer in items 1-3 (words)
LONG, SHORT = "word " * 12, "word " * 4
ITEMS = {
    k: (
        f"GPT answer {k} " + (LONG if k <= 3 else SHORT),
        f"Llama answer {k} " + (SHORT if k <= 3 else LONG),
    )
    for k in range(1, 6)
}
# human votes per item (alice, bob): "x", "y" or "tie"
HUMANS = {1: ("x", "y"), 2: ("y", "y"), 3: ("x", "x"), 4: ("y", "y"), 5: ("tie", "y")}


def build_project(url: str, name: str = "p") -> None:
    engine = db.open_db(url)
    with transaction(engine) as s:
        project = create_project(s, name, kinds=["pairwise"])
        for k, (x, y) in ITEMS.items():
            add_item(
                s,
                project,
                Item(
                    id=f"i{k}",
                    prompt=f"Question number {k}?",
                    candidates=[
                        Candidate(id="x", text=x, model="gpt-4o-2024-08-06"),
                        Candidate(id="y", text=y, model="meta-llama/Llama-3.1-8B-Instruct"),
                    ],
                ),
            )
            for rater, vote in zip(("alice", "bob"), HUMANS[k], strict=True):
                winner = {"x": "a", "y": "b", "tie": "tie"}[vote]
                add_judgment(
                    s,
                    project,
                    PairwiseJudgment(
                        item_id=f"i{k}",
                        shown_order=("x", "y"),
                        winner=winner,
                        strength=0 if vote == "tie" else 2,
                        provenance={"rater_id": rater},
                    ),
                )
    engine.dispose()


def answers(prompt: str) -> tuple[str, str]:
    a = re.search(r"\[ANSWER A\]\n(.*?)\n\[/ANSWER A\]", prompt, re.S)
    b = re.search(r"\[ANSWER B\]\n(.*?)\n\[/ANSWER B\]", prompt, re.S)
    assert a and b, prompt
    return a.group(1), b.group(1)


def reply(winner: str, strength: int = 2) -> str:
    return json.dumps({"winner": winner, "strength": strength, "rationale": "because"})


def gpt_lover(prompt: str, attempt: int) -> str:
    """Prefers the GPT answer whichever order it is shown in: consistent, self-preferring."""
    a, _ = answers(prompt)
    return reply("A" if a.startswith("GPT") else "B")


def first_on_odd_items(prompt: str, attempt: int) -> str:
    """Says "first" on items 1, 3, 5 (both orders: inconsistent), prefers GPT on 2 and 4."""
    k = int(re.search(r"Question number (\d+)", prompt).group(1))
    return reply("A", 1) if k % 2 else gpt_lover(prompt, attempt)


def config(url: str, model: str, template: str = "pairwise", **kw) -> JudgeConfig:
    return JudgeConfig(
        endpoint=url, model=model, template=load_template(template), retry=FAST, **kw
    )


def test_self_preferring_judge_audit_equals_the_hand_computation(sqlite_url, tmp_path):
    build_project(sqlite_url)
    engine = db.open_db(sqlite_url)
    policy = StubPolicy(responder=gpt_lover)
    with StubServer(policy) as server:
        _, stats = judge_project(
            engine, "p", config(server.url, "gpt-4o-mini"), cache_path=tmp_path / "c.jsonl"
        )
    assert policy.requests == 10 and stats.requests == 10  # 5 pairs x 2 orders
    assert stats.labels == 5 and stats.order_inconsistent == 0 and stats.failed == 0
    # the stub counts words: 10 replies' usage summed
    assert stats.completion_tokens == 10 * len(reply("A").split())
    assert stats.prompt_tokens > 0

    with transaction(engine) as s:
        rows = s.scalars(select(JudgmentRow).where(JudgmentRow.source == "ai")).all()
        assert len(rows) == 5
        for r in rows:
            assert r.judge["model"] == "gpt-4o-mini" and r.judge["template"] == "pairwise"
            assert r.judge["template_version"] == 2 and r.judge["endpoint"] == server.url
            assert r.score == -2 and not r.excluded  # x (canonical first) better, strength 2

    audit = audit_project(engine, "p", n_boot=200)
    (judge,) = audit["judges"]
    assert judge["judge"] == "gpt-4o-mini · pairwise@2" and judge["family"] == "gpt"
    # self-preference: the judge chose its family's answer (x) on all 5 pairs; the people's
    # own-family share per pair (a tie counts half): .5, 0, 1, 0, .25 -> mean .35
    sp = judge["self_preference"]
    assert sp["pairs"] == 5 and sp["judge_own_share"] == 1.0
    assert sp["human_own_share"] == pytest.approx(0.35, abs=1e-12)
    assert sp["delta"] == pytest.approx(0.65, abs=1e-12)
    assert sp["low"] <= sp["delta"] <= sp["high"] and sp["low"] > 0
    # position: every pair consistent; of 10 one-order verdicts, the first shown won in 5
    pos = judge["position_consistency"]
    assert (pos["pairs"], pos["consistent"], pos["share_consistent"]) == (5, 5, 1.0)
    assert pos["first_shown_share"] == 0.5
    # agreement on winner: judge -1 everywhere; humans: alice -1 +1 -1 +1 0, bob +1 +1 -1 +1 +1
    (winner,) = [r for r in judge["agreement"] if r["dimension"] == "winner"]
    assert winner["n_units"] == 5 and winner["n_pairs"] == 10
    assert winner["judge_human_equal_share"] == pytest.approx(0.3)
    humans = {"alice": [-1, 1, -1, 1, 0], "bob": [1, 1, -1, 1, 1]}
    units = [f"u{k}-{r}" for r in humans for k in range(5) for _ in (0, 1)]
    values = [v for r in humans for h in humans[r] for v in (-1, h)]
    assert winner["judge_human"]["alpha"] == pytest.approx(
        krippendorff_alpha(np.array(units), np.array(values, dtype=float)), abs=1e-12
    )
    hh = krippendorff_alpha(
        np.array([f"u{k}" for k in range(5) for _ in humans]),
        np.array([humans[r][k] for k in range(5) for r in humans], dtype=float),
    )
    assert winner["human_human"]["alpha"] == pytest.approx(hh, abs=1e-12)
    # length bias: the judge chose x, the longer answer in items 1-3 only
    assert judge["length_bias"]["share_chosen_longer"] == pytest.approx(0.6)
    words = {k: (len(x.split()), len(y.split())) for k, (x, y) in ITEMS.items()}
    assert judge["length_bias"] == finite(
        length_bias([words[k][0] for k in ITEMS], [words[k][1] for k in ITEMS])
    )
    engine.dispose()


def test_order_biased_judge_shows_position_inconsistency(db_url, tmp_path):
    build_project(db_url)
    engine = db.open_db(db_url)
    with StubServer(StubPolicy(responder=first_on_odd_items)) as server:
        _, stats = judge_project(engine, "p", config(server.url, "llama-judge"), cache_path=None)
    assert (stats.labels, stats.order_inconsistent) == (2, 3)
    with transaction(engine) as s:
        rows = s.scalars(select(JudgmentRow).where(JudgmentRow.source == "ai")).all()
        bad = sorted(r.item.item_key for r in rows if r.excluded)
        assert bad == ["i1", "i3", "i5"]
        assert all(r.judge["outcome"] == "order_inconsistent" for r in rows if r.excluded)
        assert all("order-inconsistent" in r.exclusion_reason for r in rows if r.excluded)
    (judge,) = audit_project(engine, "p", n_boot=50)["judges"]
    pos = judge["position_consistency"]
    # 2 of 5 pairs agree across orders; first shown chosen in 6 (odd items) + 2 (even) of 10
    assert (pos["pairs"], pos["consistent"]) == (5, 2)
    assert pos["share_consistent"] == pytest.approx(0.4)
    assert pos["first_shown_share"] == pytest.approx(0.8)
    assert judge["order_inconsistent"] == 3 and judge["labels"] == 2
    # an inconsistent verdict is no preference: agreement only on the two consistent pairs
    (winner,) = [r for r in judge["agreement"] if r["dimension"] == "winner"]
    assert winner["n_units"] == 2
    # the family of "llama-judge" is llama: the Llama answers (y) are its own; it chose x on
    # both consistent pairs (0), the people chose y on both (1): delta -1
    sp = judge["self_preference"]
    assert sp["family"] == "llama" and sp["pairs"] == 2 and sp["delta"] == pytest.approx(-1.0)
    engine.dispose()


def test_malformed_replies_are_retried_then_recorded_as_failures(sqlite_url, tmp_path):
    build_project(sqlite_url)
    engine = db.open_db(sqlite_url)

    def flaky(prompt: str, attempt: int) -> str:
        k = int(re.search(r"Question number (\d+)", prompt).group(1))
        if k == 1 and attempt == 1:
            return "I think A is better."  # prose: malformed, asked again
        if k == 2:
            return '{"winner": "A", "strength": 0}'  # a winner with strength 0: never valid
        if k == 3 and attempt == 1:
            return "```json\n" + reply("A", 7) + "\n```"  # strength out of range
        return gpt_lover(prompt, attempt)

    policy = StubPolicy(responder=flaky)
    with StubServer(policy) as server:
        _, stats = judge_project(
            engine, "p", config(server.url, "gpt-4o", parse_retries=2), cache_path=None
        )
    # each order is its own prompt: items 1 and 3, one malformed reply per order, then a good
    # one; item 2, three malformed per order (1 + parse_retries), then it fails
    assert stats.malformed == 2 + 6 + 2
    assert policy.requests == 10 + 2 + 4 + 2
    assert (stats.labels, stats.failed) == (4, 1)
    (failure,) = stats.failures
    assert failure.startswith("i2: malformed reply, 3 times; last: ")
    assert "strength 0" in failure
    with transaction(engine) as s:
        judged = {r.item.item_key for r in s.scalars(select(JudgmentRow)) if r.source == "ai"}
    assert judged == {"i1", "i3", "i4", "i5"}  # nothing guessed for i2
    engine.dispose()


def test_a_rerun_asks_nothing_already_answered(sqlite_url, tmp_path):
    build_project(sqlite_url)
    engine = db.open_db(sqlite_url)
    cache = tmp_path / "cache.jsonl"
    policy = StubPolicy(responder=gpt_lover)
    with StubServer(policy) as server:
        cfg = config(server.url, "gpt-4o")
        _, first = judge_project(engine, "p", cfg, cache_path=cache, limit=2)
        assert policy.requests == 4 and first.labels == 2
        _, second = judge_project(engine, "p", cfg, cache_path=cache)
        assert policy.requests == 4 + 6  # only the three new items, both orders
        assert (second.already_stored, second.labels) == (2, 3)
        _, third = judge_project(engine, "p", cfg, cache_path=None)  # the database remembers
        assert policy.requests == 10 and third.already_stored == 5 and third.requests == 0
    with transaction(engine) as s:
        assert len([r for r in s.scalars(select(JudgmentRow)) if r.source == "ai"]) == 5
    # another database, the same reply cache: stored again without asking
    other = f"sqlite:///{tmp_path / 'other.db'}"
    build_project(other)
    engine2 = db.open_db(other)
    with StubServer(StubPolicy(responder=gpt_lover)) as server2:
        _, fourth = judge_project(engine2, "p", config(server2.url, "gpt-4o"), cache_path=cache)
    assert fourth.requests == 0 and fourth.cached_replies == 10 and fourth.labels == 5
    engine.dispose()
    engine2.dispose()


def test_429_and_5xx_are_retried_with_backoff(sqlite_url):
    build_project(sqlite_url)
    engine = db.open_db(sqlite_url)
    policy = StubPolicy(responder=gpt_lover, fail_first=1, fail_status=503)
    with StubServer(policy) as server:
        _, stats = judge_project(engine, "p", config(server.url, "gpt-4o"), cache_path=None)
    assert stats.labels == 5 and stats.retries == 10 and policy.failures == 10
    engine.dispose()


def test_judge_labels_never_pass_as_human_in_exports(sqlite_url, tmp_path):
    build_project(sqlite_url)
    engine = db.open_db(sqlite_url)
    with StubServer(StubPolicy(responder=first_on_odd_items)) as server:
        judge_project(engine, "p", config(server.url, "gpt-4o"), cache_path=None)

    def export(sub: str, **kw):
        out = tmp_path / sub
        manifest = export_project(
            engine,
            "p",
            ExportOptions(format="trl-preference", out=out, length_gate=None, force=True, **kw),
        )
        rows = [orjson.loads(line) for line in (out / "train.jsonl").read_bytes().splitlines()]
        return rows, manifest

    rows, manifest = export("default")
    # the judge's 2 consistent labels: dropped by the source gate; its 3 order-inconsistent
    # ones: by the exclusion gate; what is left is the people's, with no source column
    assert manifest["gates"]["source"]["dropped"] == 2
    assert manifest["gates"]["excluded"]["dropped"] == 3
    assert all("source" not in r for r in rows)
    human_only = tmp_path / "human.db"
    build_project(f"sqlite:///{human_only}")
    engine_h = db.open_db(f"sqlite:///{human_only}")
    ref = export_project(
        engine_h,
        "p",
        ExportOptions(format="trl-preference", out=tmp_path / "ref", length_gate=None, force=True),
    )
    assert (tmp_path / "ref" / "train.jsonl").read_bytes() == (
        tmp_path / "default" / "train.jsonl"
    ).read_bytes()
    # the same counts but what was read (the judge's 5 labels more: 15 judgments in, not 10)
    assert manifest["counts"]["judgments_in"] == ref["counts"]["judgments_in"] + 5

    def read(m):
        return {k: v for k, v in m["counts"].items() if not k.startswith("judgments_in")}

    assert read(ref) == read(manifest)
    engine_h.dispose()
    # --include-ai: the judge's consistent labels count, and every row says its sources; the
    # order-inconsistent ones are still excluded (never a preference)
    rows_ai, manifest_ai = export("with-ai", include_ai=True)
    assert manifest_ai["gates"]["excluded"]["dropped"] == 3
    assert {r["source"] for r in rows_ai} >= {"ai+human"}
    engine.dispose()


def test_rubric_and_unary_templates_end_to_end(sqlite_url, tmp_path):
    engine = db.open_db(sqlite_url)
    rubric = Rubric(
        id="quality",
        version=1,
        dimensions=[
            Dimension(name="accuracy", scale="ordinal", points=5, description="Is it right?"),
            Dimension(name="clarity", scale="binary"),
        ],
    )
    with transaction(engine) as s:
        project = create_project(s, "r", kinds=["rubric", "unary"])
        add_rubric(s, project, rubric)
        for k in range(3):
            add_item(
                s,
                project,
                Item(id=f"q{k}", prompt=f"Q{k}", candidates=[Candidate(id="c", text=f"A{k}")]),
            )
        add_judgment(
            s,
            project,
            UnaryJudgment(item_id="q0", candidate_id="c", label=True, provenance={"rater_id": "h"}),
        )

    def grader(prompt: str, attempt: int) -> str:
        if "[CRITERION] accuracy" in prompt:
            return json.dumps({"score": 4, "rationale": "mostly right"})
        if "[CRITERION] clarity" in prompt:
            # off the binary scale first (asked again), then on it
            return json.dumps({"score": 3 if attempt == 1 else 1})
        return json.dumps({"acceptable": "Q1" not in prompt, "rationale": "ok"})

    policy = StubPolicy(responder=grader)
    with StubServer(policy) as server:
        _, rub = judge_project(
            engine, "r", config(server.url, "qwen2.5-7b", "rubric"), cache_path=None
        )
        _, una = judge_project(
            engine, "r", config(server.url, "qwen2.5-7b", "unary"), cache_path=None
        )
    assert (rub.labels, rub.malformed, una.labels) == (3, 3, 3)
    with transaction(engine) as s:
        rows = s.scalars(select(JudgmentRow).where(JudgmentRow.source == "ai")).all()
        by_kind = {(r.kind, r.item.item_key): r for r in rows}
    assert by_kind[("rubric", "q0")].body["scores"] == {"accuracy": 4.0, "clarity": 1.0}
    assert by_kind[("rubric", "q0")].rubric_key == "quality"
    assert by_kind[("rubric", "q0")].judge["template"] == "rubric"
    assert [by_kind[("unary", f"q{k}")].body["label"] for k in range(3)] == [True, False, True]
    (judge_unary,) = [
        j for j in audit_project(engine, "r", n_boot=10)["judges"] if j["template"] == "unary@2"
    ]
    (thumb,) = judge_unary["agreement"]
    assert (thumb["dimension"], thumb["n_units"], thumb["judge_human_equal_share"]) == (
        "thumb",
        1,
        1.0,
    )
    engine.dispose()


def test_cli_run_and_audit(sqlite_url, tmp_path):
    build_project(sqlite_url)
    runner = CliRunner()
    with StubServer(StubPolicy(responder=gpt_lover)) as server:
        result = runner.invoke(
            app,
            ["judge", "run", "p", "--endpoint", server.url, "--model", "gpt-4o",
             "--db", sqlite_url, "--cache", str(tmp_path / "c.jsonl"), "--json"],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["labels"] == 5 and summary["template"] == "pairwise@2"
    assert summary["total_tokens"] == summary["prompt_tokens"] + summary["completion_tokens"] > 0
    result = runner.invoke(app, ["judge", "audit", "p", "--db", sqlite_url, "--n-boot", "50"])
    assert result.exit_code == 0, result.output
    assert "self-preference (gpt)" in result.stdout and "delta 0.650" in result.stdout
    bad = runner.invoke(
        app,
        ["judge", "run", "p", "--endpoint", "http://x", "--model", "m", "--template", "nope",
         "--db", sqlite_url],
    )  # fmt: skip
    assert bad.exit_code == 2 and "no such template" in bad.output


def test_the_quality_report_gets_a_judges_section_and_keeps_its_numbers(sqlite_url, tmp_path):
    from preflab.io.quality_source import report_from_store
    from preflab.quality.report import render_html

    human_only = f"sqlite:///{tmp_path / 'human.db'}"
    build_project(human_only)
    before = report_from_store(human_only, "p")
    assert "judges" not in before
    build_project(sqlite_url)
    engine = db.open_db(sqlite_url)
    with StubServer(StubPolicy(responder=first_on_odd_items)) as server:
        judge_project(engine, "p", config(server.url, "gpt-4o"), cache_path=None)
    engine.dispose()
    after = report_from_store(sqlite_url, "p")
    # the people's figures are what they were: the judge's labels are source ai
    for key in ("agreement", "raters", "position_bias", "length_bias", "n_labels", "confusion"):
        assert after[key] == before[key], key
    assert after["label_set"]["set_aside"] == {"source-ai": 2}  # 3 more are excluded, unread
    engine = db.open_db(sqlite_url)
    assert after["judges"] == audit_project(engine, "p", n_boot=200)
    engine.dispose()
    (judge,) = after["judges"]["judges"]
    assert judge["position_consistency"]["share_consistent"] == pytest.approx(0.4)
    page = render_html(after)
    assert "<h2>Model judges</h2>" in page and "gpt-4o · pairwise@2" in page
    assert "<h2>Model judges</h2>" not in render_html(before)


def test_the_judge_record_round_trips_through_raw_export_and_import(db_url, tmp_path):
    from preflab.io.importer import import_files

    build_project(db_url)
    engine = db.open_db(db_url)
    with StubServer(StubPolicy(responder=gpt_lover)) as server:
        judge_project(engine, "p", config(server.url, "gpt-4o"), cache_path=None)
    out = tmp_path / "raw"
    export_project(
        engine,
        "p",
        ExportOptions(format="raw", out=out, include_ai=True, include_rater_ids=True, force=True),
    )
    with transaction(engine) as s:
        create_project(s, "q", kinds=["pairwise"])
    import_files(engine, "q", [out / "train.jsonl"])
    with transaction(engine) as s:
        rows = s.scalars(select(JudgmentRow).where(JudgmentRow.source == "ai")).all()
        by_project: dict[int, list] = {}
        for r in rows:
            by_project.setdefault(r.project_pk, []).append(r.judge)
    first, second = by_project.values()
    assert len(first) == 5 and sorted(map(json.dumps, first)) == sorted(map(json.dumps, second))
    assert first[0]["verdicts"][0]["shown_order"] == ["x", "y"]
    engine.dispose()


def test_steps_template_checks_each_step_and_retries_a_bad_verdict_list(sqlite_url):
    from preflab.schema import StepsJudgment

    engine = db.open_db(sqlite_url)
    with transaction(engine) as s:
        project = create_project(s, "s", kinds=["steps"])
        add_item(
            s,
            project,
            Item(
                id="m1",
                prompt="2 + 2 * 3?",
                candidates=[
                    Candidate(id="c", text="2*3=6\n\n2+6=9", metadata={"steps": ["2*3=6", "2+6=9"]})
                ],
            ),
        )
        add_item(
            s,
            project,
            Item(id="m2", prompt="1 + 1?", candidates=[Candidate(id="c", text="1+1=2\n\nso 2")]),
        )
        add_item(
            s,
            project,
            Item(id="m3", prompt="3 - 1?", candidates=[Candidate(id="c", text="one step")]),
        )
        add_judgment(
            s,
            project,
            StepsJudgment(
                item_id="m2", candidate_id="c", steps=["1+1=2", "so 2"], verdicts=[1, 1],
                provenance={"rater_id": "h"},
            ),
        )  # fmt: skip

    def checker(prompt: str, attempt: int) -> str:
        if "2+6=9" in prompt:  # a verdict after the first error: asked again
            return json.dumps({"verdicts": [1, -1, 1] if attempt == 1 else [1, -1]})
        return json.dumps({"verdicts": [1, 1]})

    with StubServer(StubPolicy(responder=checker)) as server:
        _, stats = judge_project(
            engine, "s", config(server.url, "qwen3-8b", "steps"), cache_path=None
        )
    # m3: no split known (no metadata.steps, nobody labelled it): skipped, counted
    assert (stats.labels, stats.malformed, stats.no_steps) == (2, 1, 1)
    with transaction(engine) as s:
        rows = {r.item.item_key: r.body for r in s.scalars(select(JudgmentRow)) if r.source == "ai"}
    assert rows["m1"]["verdicts"] == [1, -1] and rows["m1"]["steps"] == ["2*3=6", "2+6=9"]
    assert rows["m2"]["steps"] == ["1+1=2", "so 2"]  # the person's split: the same step units
    (judge,) = audit_project(engine, "s", n_boot=10)["judges"]
    verdict_rows = [r for r in judge["agreement"] if r["dimension"] == "step_verdict"]
    assert verdict_rows[0]["n_units"] == 2 and verdict_rows[0]["judge_human_equal_share"] == 1.0
    engine.dispose()
