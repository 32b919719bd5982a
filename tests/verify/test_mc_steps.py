"""Monte Carlo checks of step labels on constructed data where the answer is known: the policy
is the in-process OpenAI-compatible stub, scripted per step prefix, so each step's estimate is
known exactly; a step label its rollouts contradict is flagged, the agreement figures are
computed by hand, and ``--send-back`` puts it in the review queue with its evidence."""

from __future__ import annotations

import json
import math

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from preflab.cli import app
from preflab.schema import Candidate, Item, StepsJudgment
from preflab.store import make_engine, transaction
from preflab.store.db import open_db
from preflab.store.repo import add_item, add_judgment, create_project
from preflab.train.openai_stub import StubPolicy, StubServer
from preflab.verify.mc_steps import (
    StepUnit,
    agreement,
    check_steps,
    endpoint_sampler,
    prefix_prompt,
)
from preflab.verify.tasks import MathTask

PROMPT = "What is 1/3 + 1/4?"
GOOD = ["1/3 = 4/12", "1/4 = 3/12", "4/12 + 3/12 = 7/12, so the answer is \\boxed{7/12}"]
BAD = ["1/3 = 4/12", "1/4 = 2/12", "4/12 + 2/12 = 6/12, so the answer is \\boxed{1/2}"]
RIGHT, WRONG = "... so \\boxed{\\frac{7}{12}}", "... so \\boxed{\\frac{1}{2}}"


def script(steps, successes_per_step, n=4):
    """Stub answers: from the prefix up to step i, ``successes_per_step[i]`` of n rollouts right."""
    return {
        prefix_prompt(PROMPT, steps, i + 1): [RIGHT] * k + [WRONG] * (n - k)
        for i, k in enumerate(successes_per_step)
    }


def units(verdicts_good, verdicts_bad):
    task = MathTask(task_id="frac", kind="math", answer="7/12")
    return [
        StepUnit("frac", "good", PROMPT, GOOD, verdicts_good, task, judgment_id=1, rater="r1"),
        StepUnit("frac", "bad", PROMPT, BAD, verdicts_bad, task, judgment_id=2, rater="r2"),
    ]


def test_a_step_label_contradicted_by_its_rollouts_is_flagged():
    answers = script(GOOD, [4, 4, 4]) | script(BAD, [4, 0, 0])
    # r2 calls the wrong step 2 of BAD correct: every rollout from it fails
    checks_in = units([1, 1, 1], [1, 1, 1])
    with StubServer(StubPolicy(answers)) as server:
        sampler = endpoint_sampler(endpoint=server.url, model="stub")
        checks = check_steps(checks_in, 4, sampler)
    got = {(c.candidate_id, c.step): (c.mc_estimate, c.disagree) for c in checks}
    assert got == {
        ("good", 1): (1.0, False),
        ("good", 2): (1.0, False),
        ("good", 3): (1.0, False),
        ("bad", 1): (1.0, False),
        ("bad", 2): (0.0, True),
        ("bad", 3): (0.0, True),
    }
    flagged = next(c for c in checks if c.candidate_id == "bad" and c.step == 2)
    assert flagged.mc_correct == 0 and flagged.mc_n == 4 and flagged.judgment_id == 2
    assert flagged.evidence and all(e.startswith("wrong:") for e in flagged.evidence)
    a = agreement(checks)
    # compared: 6 steps, MC says sound for 4, human for 6: agreement 4/6, kappa 0 (human constant)
    assert a["agreement"] == pytest.approx(4 / 6) and a["disagreements"] == 2
    assert a["kappa"] == pytest.approx(0.0)
    assert a["confusion"]["human +1, mc -1"] == 2


def test_agreement_and_kappa_by_hand_with_a_correct_error_label_and_a_threshold():
    # both solutions open with the same step: one prefix, one estimate
    assert prefix_prompt(PROMPT, GOOD, 1) == prefix_prompt(PROMPT, BAD, 1)
    answers = script(GOOD, [4, 3, 4]) | script(BAD, [4, 1])
    checks_in = units([1, 1, 0], [1, -1])  # the human marks BAD's step 2 wrong; GOOD's 3 neutral
    with StubServer(StubPolicy(answers)) as server:
        checks = check_steps(checks_in, 4, endpoint_sampler(endpoint=server.url, model="stub"))
    est = [(c.candidate_id, c.step, c.human_verdict, c.mc_estimate) for c in checks]
    assert est == [
        ("good", 1, 1, 1.0),
        ("good", 2, 1, 0.75),
        ("good", 3, 0, 1.0),
        ("bad", 1, 1, 1.0),
        ("bad", 2, -1, 0.25),
    ]
    assert not any(c.disagree for c in checks)  # every gap <= 0.5
    a = agreement(checks)
    assert a["compared"] == 4 and a["neutral"] == 1 and a["agreement"] == 1.0
    assert a["kappa"] == pytest.approx(1.0)
    assert a["by_human_verdict"]["-1"] == {"steps": 1, "mean_estimate": 0.25}
    # a stricter threshold flags the steps whose gap is 0.25
    with StubServer(StubPolicy(answers)) as server:
        strict = check_steps(
            checks_in, 4, endpoint_sampler(endpoint=server.url, model="stub"), threshold=0.2
        )
    assert [(c.candidate_id, c.step) for c in strict if c.disagree] == [("good", 2), ("bad", 2)]
    # kappa against a direct computation: po = 3/4; pe from the marginals
    mixed = [c for c in strict]
    mixed[1].mc_estimate = 0.25  # MC says unsound where the human says +1
    b = agreement(mixed)
    po, pe = 3 / 4, (3 / 4) * (2 / 4) + (1 / 4) * (2 / 4)
    assert b["agreement"] == po and b["kappa"] == pytest.approx((po - pe) / (1 - pe))


def test_bad_threshold_and_no_labels():
    with pytest.raises(ValueError, match="threshold"):
        check_steps([], 2, lambda r, n: [], threshold=1.5)
    a = agreement([])
    assert a["agreement"] is None and a["kappa"] is None and a["steps_checked"] == 0
    assert not math.isnan(a["threshold"])


@pytest.fixture
def project_db(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'preflab.db'}"
    engine = open_db(url)
    with transaction(engine) as s:
        project = create_project(s, "prm", kinds=["steps"])
        item = Item(
            id="frac",
            prompt=PROMPT,
            reference="\\frac{7}{12}",
            candidates=[
                Candidate(id="good", text="\n".join(GOOD)),
                Candidate(id="bad", text="\n".join(BAD)),
            ],
        )
        add_item(s, project, item)
        add_item(
            s,
            project,
            Item(id="essay", prompt="Write a poem", candidates=[Candidate(id="c", text="x")]),
        )
        for cid, steps, verdicts, rater in (
            ("good", GOOD, [1, 1, 1], "alice"),
            ("bad", BAD, [1, 1, 1], "bob"),  # bob misses the error in step 2
            ("bad", BAD, [1, -1], "carol"),  # carol finds it
        ):
            add_judgment(
                s,
                project,
                StepsJudgment(
                    item_id="frac", candidate_id=cid, steps=steps, verdicts=verdicts,
                    provenance={"rater_id": rater},
                ),
            )  # fmt: skip
        add_judgment(
            s,
            project,
            StepsJudgment(
                item_id="essay", candidate_id="c", steps=["x"], verdicts=[1],
                provenance={"rater_id": "alice"},
            ),
        )  # fmt: skip
    engine.dispose()
    return url


def test_cli_reports_exports_estimates_and_sends_disagreements_to_review(project_db, tmp_path):
    from preflab.server.permissions import ProjectRef
    from preflab.server.services.review import item_review, review_queues
    from preflab.store.models import JudgmentRow, Project
    from preflab.store.server_models import ReviewRequest

    answers = script(GOOD, [4, 4, 4]) | script(BAD, [4, 0, 0])
    out = tmp_path / "mc"
    with StubServer(StubPolicy(answers)) as server:
        args = ["verify", "steps", "prm", "--db", project_db, "--n", "4", "--endpoint", server.url]
        args += ["--model", "stub", "--out", str(out), "--send-back", "--json"]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["not_checked"] == [
        "essay: no task to verify answers with (metadata.verify_task or a reference answer)"
    ]
    a = report["agreement"]
    # alice 3 steps agree; bob: step 1 agrees, 2 and 3 disagree; carol: 1 (+1, 1.0) and 2 (-1, 0.0) agree
    assert a["steps_checked"] == 8 and a["compared"] == 8 and a["disagreements"] == 2
    assert a["agreement"] == pytest.approx(6 / 8)
    rows = [json.loads(line) for line in (out / "mc_steps.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and {"human_verdict", "mc_estimate", "judgment_id"} <= set(rows[0])
    bob = [r for r in rows if r["rater"] == "bob"]
    assert [(r["step"], r["mc_estimate"], r["disagree"]) for r in bob] == [
        (1, 1.0, False),
        (2, 0.0, True),
        (3, 0.0, True),
    ]
    assert "Cohen" in (out / "mc_report.html").read_text()
    # one review request for bob's judgment, evidence in the note; the item is queued for it
    assert len(report["review"]["sent"]) == 1 and report["review"]["skipped"] == []
    engine = make_engine(project_db)
    with transaction(engine) as s:
        req = s.scalars(select(ReviewRequest)).one()
        judgment = s.get(JudgmentRow, req.judgment_pk)
        assert judgment.pk == bob[0]["judgment_id"] and req.status == "open"
        assert req.reviewer_pk is None
        assert req.note.startswith("Monte Carlo check: step 2 labelled correct (+1), but 0 of 4")
        assert "Step 3:" in req.note and "rollout (wrong:" in req.note
        p = s.scalars(select(Project).where(Project.name == "prm")).one()
        ref = ProjectRef(
            p.pk, p.name, p.title, list(p.kinds or []), dict(p.settings or {}), None, None
        )
        queue = review_queues(s, ref, share=0.0)["adjudication"]
        assert [q["item_id"] for q in queue] == ["frac"]
        assert any(r.startswith("Monte Carlo check: step 2") for r in queue[0]["reasons"])
        page = item_review(s, ref, "frac")
        sent = [j for j in page["judgments"] if j["sent_back"]]
        assert len(sent) == 1 and sent[0]["sent_back"]["note"] == req.note
    # a second run finds the label already waiting: left as it is, not duplicated
    with StubServer(StubPolicy(answers)) as server:
        args = ["verify", "steps", "prm", "--db", project_db, "--n", "4", "--endpoint", server.url]
        args += ["--model", "stub", "--out", str(out), "--send-back", "--json"]
        again = json.loads(CliRunner().invoke(app, args).stdout)
    assert again["review"]["sent"] == [] and len(again["review"]["skipped"]) == 1
    engine.dispose()
