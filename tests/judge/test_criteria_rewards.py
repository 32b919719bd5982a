"""Per-item rubrics as rewards (issue 30 item 5), against a real OpenAI-compatible HTTP server in
this process (``preflab.train.openai_stub``, as ``test_judge.py``): the judge's ``criteria``
template, the CLI that writes and approves criteria, the ``verl`` export's rubric rows and the
reward functions for verl and TRL, the must-have veto and a malformed reply included."""

from __future__ import annotations

import json
import re

import orjson
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from preflab.cli import app
from preflab.io.export import ExportOptions, export_project
from preflab.judge.project import judge_project
from preflab.judge.rubric_reward import CriteriaReward, compute_score, judge_config
from preflab.judge.runner import JudgeConfig
from preflab.judge.templates import load_template
from preflab.schema import Candidate, CriteriaJudgment, CriteriaSet, Item
from preflab.store import JudgmentRow, db, transaction
from preflab.store.repo import StoreError, add_item, add_judgment, create_project, get_project
from preflab.train.openai_stub import StubPolicy, StubServer
from preflab.train.sampling import RetryPolicy
from preflab.verify.verl_reward import RoutingError

FAST = RetryPolicy(max_retries=1, base_s=0.01, cap_s=0.05, timeout_s=5)
CRITERIA = [
    {"id": "dose", "text": "States the adult dose", "weight": 3, "must_have": True},
    {"id": "doctor", "text": "Says when to see a doctor", "weight": 1},
    {"id": "water", "text": "Says to take it with water", "weight": 1},
]


def approved(version: int = 1, criteria=CRITERIA) -> dict:
    return {
        "version": version,
        "author": "dr_a",
        "approved_by": "dr_b",
        "approved_at": "2026-12-01T10:00:00+00:00",
        "criteria": criteria,
    }


def keyword_judge(prompt: str, attempt: int) -> str:
    """Met when the answer holds the criterion's id as a word: a grader a test can predict."""
    answer = re.search(r"\[ANSWER\]\n(.*?)\n\[/ANSWER\]", prompt, re.S).group(1)
    block = re.search(r"\[CRITERIA\]\n(.*?)\n\[/CRITERIA\]", prompt, re.S).group(1)
    ids = re.findall(r"^- \[([^\]]+)\] ", block, re.M)
    return json.dumps({"met": {i: i in answer.split() for i in ids}, "rationale": "checked"})


def prose_judge(prompt: str, attempt: int) -> str:
    return "The answer meets most criteria."


def config(url: str, **kw) -> JudgeConfig:
    return JudgeConfig(
        endpoint=url, model="judge-m", template=load_template("criteria"), retry=FAST, **kw
    )


def build(url: str) -> None:
    """q1: approved criteria; q2: criteria awaiting approval; q3: none."""
    engine = db.open_db(url)
    unapproved = {"version": 1, "author": "dr_a", "criteria": CRITERIA}
    with transaction(engine) as s:
        project = create_project(s, "med", kinds=["criteria"])
        for key, meta, answer in (
            ("q1", {"criteria": approved()}, "dose 500mg with water"),
            ("q2", {"criteria": unapproved}, "dose doctor water"),
            ("q3", {}, "no criteria here"),
        ):
            add_item(
                s,
                project,
                Item(
                    id=key,
                    prompt=f"How do I take drug {key}?",
                    candidates=[Candidate(id="c", text=answer)],
                    metadata=meta,
                ),
            )
    engine.dispose()


def test_judge_run_grades_only_approved_criteria(sqlite_url):
    build(sqlite_url)
    engine = db.open_db(sqlite_url)
    policy = StubPolicy(responder=keyword_judge)
    with StubServer(policy) as server:
        _, stats = judge_project(engine, "med", config(server.url), cache_path=None)
    assert policy.requests == 1 and stats.labels == 1 and stats.no_criteria == 2
    with transaction(engine) as s:
        (row,) = s.scalars(select(JudgmentRow)).all()
        assert (row.kind, row.item.item_key, row.source) == ("criteria", "q1", "ai")
        assert row.body["met"] == {"doctor": False, "dose": True, "water": True}
        assert row.body["criteria_version"] == 1
        assert (row.judge["template"], row.judge["template_version"]) == ("criteria", 1)
    engine.dispose()


def test_a_malformed_criteria_reply_is_a_failure_not_a_guess(sqlite_url):
    build(sqlite_url)
    engine = db.open_db(sqlite_url)

    def missing_one(prompt: str, attempt: int) -> str:
        return json.dumps({"met": {"dose": True, "doctor": True}})  # "water" left out

    with StubServer(StubPolicy(responder=missing_one)) as server:
        _, stats = judge_project(
            engine, "med", config(server.url, parse_retries=1), cache_path=None
        )
    assert (stats.labels, stats.failed, stats.malformed) == (0, 1, 2)
    assert "met: missing ['water']" in stats.failures[0]
    with transaction(engine) as s:
        assert s.scalars(select(JudgmentRow)).all() == []
    engine.dispose()


def test_a_person_s_checklist_must_name_each_approved_criterion(sqlite_url):
    build(sqlite_url)
    engine = db.open_db(sqlite_url)

    def checklist(item: str, met: dict, version: int = 1) -> CriteriaJudgment:
        return CriteriaJudgment(
            item_id=item,
            candidate_id="c",
            criteria_version=version,
            met=met,
            provenance={"rater_id": "nurse"},
        )

    full = {"dose": True, "doctor": False, "water": True}
    with transaction(engine) as s:
        project = get_project(s, "med")
        add_judgment(s, project, checklist("q1", full))
        with pytest.raises(StoreError, match="met.water: missing"):
            add_judgment(s, project, checklist("q1", {"dose": True, "doctor": True}))
        with pytest.raises(StoreError, match="not approved yet"):
            add_judgment(s, project, checklist("q2", full))
        with pytest.raises(StoreError, match="not the item's approved version 1"):
            add_judgment(s, project, checklist("q1", full, version=2))
    engine.dispose()


def test_cli_add_approve_show_and_a_new_version_resets_approval(sqlite_url, tmp_path):
    build(sqlite_url)
    runner = CliRunner()
    path = tmp_path / "c.yaml"
    path.write_text("- {id: dose, text: States the dose, weight: 2, must_have: true}\n")

    def run(*args: str):
        return runner.invoke(app, ["criteria", *args, "--db", sqlite_url])

    added = run("add", "med", "q3", str(path), "--author", "dr_x", "--json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["version"] == 1 and not json.loads(added.stdout)["approved_by"]
    self_approval = run("approve", "med", "q3", "--approver", "dr_x")
    assert self_approval.exit_code == 2 and "approval needs someone else" in self_approval.output
    wrong = run("approve", "med", "q3", "--approver", "dr_y", "--version", "2")
    assert wrong.exit_code == 2 and "not the current version (v1)" in wrong.output
    ok = run("approve", "med", "q3", "--approver", "dr_y", "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["approved_by"] == "dr_y"
    shown = run("show", "med", "q3")
    assert (
        "criteria v1 by dr_x, approved by dr_y" in shown.stdout
        and "States the dose" in shown.stdout
    )
    # the same criteria again: nothing written; changed ones: v2, unapproved
    same = run("add", "med", "q3", str(path), "--author", "dr_z")
    assert same.exit_code == 0 and "unchanged" in same.stdout
    path.write_text("- {id: dose, text: States the dose in mg, weight: 2, must_have: true}\n")
    v2 = run("add", "med", "q3", str(path), "--author", "dr_z", "--json")
    body = json.loads(v2.stdout)
    assert (body["version"], body["author"], body["approved_by"]) == (2, "dr_z", None)
    bad = tmp_path / "bad.json"
    bad.write_text('[{"id": "a", "text": "t", "weight": -1}]')
    refused = run("add", "med", "q3", str(bad), "--author", "dr_z")
    assert (
        refused.exit_code == 2
        and "criteria.0.weight: Input should be greater than 0" in refused.output
    )
    missing = run("show", "med", "nope")
    assert missing.exit_code == 2 and "has no item 'nope'" in missing.output
    assert "not approved" in run("show", "med", "q2").stdout


def test_import_accepts_criteria_and_names_a_bad_one(sqlite_url, tmp_path):
    runner = CliRunner()
    engine = db.open_db(sqlite_url)
    with transaction(engine) as s:
        create_project(s, "imp", kinds=["criteria"])
    engine.dispose()
    good = {"id": "a", "prompt": "p", "candidates": [{"id": "c", "text": "x"}],
            "metadata": {"criteria": approved()}}  # fmt: skip
    bad = {"id": "b", "prompt": "p", "candidates": [{"id": "c", "text": "x"}],
           "metadata": {"criteria": {**approved(), "approved_by": "dr_a"}}}  # fmt: skip
    f = tmp_path / "items.jsonl"
    f.write_bytes(orjson.dumps(good) + b"\n" + orjson.dumps(bad) + b"\n")
    result = runner.invoke(app, ["import", "imp", str(f), "--db", sqlite_url])
    assert result.exit_code == 2, result.output
    assert f"{f}:2: metadata.criteria: approver 'dr_a' is the author" in result.output.replace(
        "\n", ""
    )
    f.write_bytes(orjson.dumps(good) + b"\n")
    result = runner.invoke(app, ["import", "imp", str(f), "--db", sqlite_url])
    assert result.exit_code == 0, result.output
    shown = runner.invoke(app, ["criteria", "show", "imp", "a", "--db", sqlite_url, "--json"])
    assert json.loads(shown.stdout)["approved_by"] == "dr_b"


def verl_rows(url: str, tmp_path) -> list[dict]:
    out = tmp_path / "verl"
    engine = db.open_db(url)
    export_project(engine, "med", ExportOptions(format="verl", file_format="jsonl", out=out))
    engine.dispose()
    return [orjson.loads(line) for line in (out / "train.jsonl").read_bytes().splitlines()]


def test_verl_export_carries_approved_criteria_and_the_reward_grades_them(sqlite_url, tmp_path):
    build(sqlite_url)
    rows = {r["extra_info"]["item_id"]: r for r in verl_rows(sqlite_url, tmp_path)}
    q1 = rows["q1"]
    assert q1["reward_model"]["style"] == "rubric"
    assert (
        json.loads(q1["reward_model"]["ground_truth"])
        == CriteriaSet.model_validate(approved()).as_json()
    )
    assert q1["extra_info"]["verifier"] == "preflab.judge:criteria"
    assert q1["extra_info"]["prompt_text"] == "How do I take drug q1?"
    # unapproved criteria and no criteria: the model rows of before
    assert (
        rows["q2"]["reward_model"]
        == rows["q3"]["reward_model"]
        == {"style": "model", "ground_truth": None}
    )
    manifest = json.loads((tmp_path / "verl" / "manifest.json").read_text())
    assert manifest["format_notes"]["rows_by_style"] == {"rule": 0, "model": 2, "rubric": 1}
    assert any("criteria not approved yet" in w for w in manifest["format_notes"]["warnings"])
    assert "pkg://preflab.judge.rubric_reward" in (tmp_path / "verl" / "README.md").read_text()

    args = ("med", "", q1["reward_model"]["ground_truth"], q1["extra_info"])
    policy = StubPolicy(responder=keyword_judge)
    with StubServer(policy) as server:
        kw = {"judge_endpoint": server.url, "judge_model": "judge-m"}
        # dose (3) + water (1) of 5 -> 0.8
        r = compute_score(args[0], "dose 500mg with water", *args[2:], **kw)
        assert r == {"score": pytest.approx(0.8, abs=1e-15), "route": 3.0, "judge_failed": 0.0}
        # every other criterion met but the must-have: the veto
        assert compute_score(args[0], "doctor water", *args[2:], **kw)["score"] == 0.0
        assert compute_score(args[0], "dose doctor water", *args[2:], **kw)["score"] == 1.0
    assert policy.requests == 3
    # other rows go to the verifier reward as before
    assert (
        compute_score(
            "med", "Paris", "paris", {"style": "rule", "verifier": "preflab.verify:exact"}
        )["score"]
        == 1.0
    )


def test_a_malformed_reply_gives_the_documented_reward_and_says_so(
    sqlite_url, tmp_path, monkeypatch
):
    build(sqlite_url)
    q1 = next(r for r in verl_rows(sqlite_url, tmp_path) if r["extra_info"]["item_id"] == "q1")
    policy = StubPolicy(responder=prose_judge)
    with StubServer(policy) as server:
        monkeypatch.setenv("PREFLAB_JUDGE_ENDPOINT", server.url)
        monkeypatch.setenv("PREFLAB_JUDGE_MODEL", "judge-m")
        r = compute_score(
            "med", "dose doctor water", q1["reward_model"]["ground_truth"], q1["extra_info"]
        )
        # a full marks answer, but the judge never said so: the failure score, flagged
        assert r == {"score": 0.0, "route": 3.0, "judge_failed": 1.0}
        assert policy.requests == 3  # asked 1 + parse_retries (2) times
        r = compute_score(
            "med", "dose", q1["reward_model"]["ground_truth"], q1["extra_info"], failure_score=-1.0
        )
        assert r["score"] == -1.0 and r["judge_failed"] == 1.0


def test_the_verl_reward_refuses_rubric_rows_and_unapproved_criteria(monkeypatch):
    from preflab.verify.verl_reward import compute_score as verify_reward

    with pytest.raises(RoutingError, match="pkg://preflab.judge.rubric_reward"):
        verify_reward("med", "x", "{}", {"style": "rubric"})
    unapproved = json.dumps({"version": 1, "author": "a", "criteria": CRITERIA})
    with pytest.raises(RoutingError, match="not approved"):
        compute_score(
            "med", "x", unapproved, {"style": "rubric"}, judge_endpoint="http://x", judge_model="m"
        )
    monkeypatch.delenv("PREFLAB_JUDGE_ENDPOINT", raising=False)
    with pytest.raises(ValueError, match="PREFLAB_JUDGE_ENDPOINT"):
        judge_config(None, "m")


def test_trl_reward_function_from_a_column_and_from_the_verl_export(sqlite_url, tmp_path):
    build(sqlite_url)
    rows = verl_rows(sqlite_url, tmp_path)
    by_item = {r["extra_info"]["item_id"]: r for r in rows}
    with StubServer(StubPolicy(responder=keyword_judge)) as server:
        reward = CriteriaReward(config(server.url))
        assert reward.__name__ == "criteria"
        # the verl export loaded as a dataset: TRL passes its reward_model column
        prompts = [by_item[k]["prompt"] for k in ("q1", "q1", "q3")]
        completions = [
            [{"role": "assistant", "content": "dose with water"}],
            [{"role": "assistant", "content": "doctor water"}],
            [{"role": "assistant", "content": "anything"}],
        ]
        got = reward(
            prompts,
            completions,
            reward_model=[by_item[k]["reward_model"] for k in ("q1", "q1", "q3")],
        )
        assert got == [pytest.approx(0.8, abs=1e-15), 0.0, None]  # q3 has no criteria: None
        # a plain `criteria` column (the set's JSON), text prompts and completions
        column = [json.dumps(approved()), json.dumps(approved(criteria=CRITERIA[1:]))]
        got = reward(["How?", "How?"], ["dose doctor", "water"], criteria=column)
        assert got == [pytest.approx(0.8, abs=1e-15), pytest.approx(0.5, abs=1e-15)]
        assert reward.calls == 4 and reward.failures == []
    with StubServer(StubPolicy(responder=prose_judge)) as server:
        reward = CriteriaReward(config(server.url, parse_retries=0))
        assert reward(["How?"], ["dose"], criteria=[json.dumps(approved())]) == [None]
        (failure,) = reward.failures
        assert failure.startswith("malformed reply, 1 times; last: not a JSON object")


def test_the_quality_report_measures_agreement_per_criterion(sqlite_url):
    engine = db.open_db(sqlite_url)
    with transaction(engine) as s:
        project = create_project(s, "m", kinds=["criteria"])
        for k in range(6):
            add_item(
                s,
                project,
                Item(
                    id=f"q{k}",
                    prompt=f"p{k}",
                    candidates=[Candidate(id="c", text="a")],
                    metadata={"criteria": approved()},
                ),
            )
            for rater in ("r1", "r2"):
                met = {"dose": k % 2 == 0 or rater == "r1", "doctor": k < 3, "water": True}
                add_judgment(
                    s,
                    project,
                    CriteriaJudgment(
                        item_id=f"q{k}",
                        candidate_id="c",
                        criteria_version=1,
                        met=met,
                        provenance={"rater_id": rater},
                    ),
                )
    engine.dispose()
    result = CliRunner().invoke(app, ["quality", "report", "m", "--db", sqlite_url, "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["dimension"]: r for r in json.loads(result.stdout)["agreement"]}
    dose = rows["criterion:dose"]
    # 12 labels, 9 met; 3 units disagree: D_o = 6/12, D_e = 2*9*3/(12*11) -> 1 - (1/2)/(54/132)
    assert (dose["n_units"], dose["percent_agreement"]) == (6, 0.5)
    assert dose["alpha"] == pytest.approx(1 - 0.5 / (54 / 132), abs=1e-12)
    assert rows["criterion:doctor"]["alpha"] == 1.0
