"""Task, reference and rubric provenance (issue 29 §5): author, approver and version validated
and carried where tasks travel; a reference that needs two independent experts counts only when
they agree or an adjudicator settled it; guessable items and unsettled references stay out of the
verl export."""

from __future__ import annotations

import json

import orjson
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from preflab.cli import app
from preflab.io.export import ExportOptions, export_project
from preflab.schema import Item
from preflab.schema.common import FieldProblem
from preflab.schema.rubric import Rubric
from preflab.store import db, repo, transaction
from preflab.verify.passk import pass_at_k
from preflab.verify.references import reference_status
from preflab.verify.rollouts import load_tasks_with_meta, read_rollouts, score_rollouts
from preflab.verify.tasks import parse_task

MATH = {"task_id": "frac", "kind": "math", "answer": "7/12"}


def test_task_provenance_is_validated_and_optional():
    task = parse_task({**MATH, "author": "ana", "approver": "ben", "version": 2})
    assert task.provenance() == {"author": "ana", "approver": "ben", "version": 2}
    assert parse_task(MATH).provenance() == {}
    with pytest.raises(ValidationError, match="approval needs someone else"):
        parse_task({**MATH, "author": "ana", "approver": "ana"})
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        parse_task({**MATH, "version": 0})
    with pytest.raises(ValidationError, match="at least 1 character"):
        parse_task({**MATH, "author": ""})


def test_task_provenance_travels_into_the_pass_at_k_report_and_advice(tmp_path):
    from preflab.train.advise import StageThresholds, advise

    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(
        json.dumps(
            {**MATH, "prompt": "1/3 + 1/4?", "author": "ana", "approver": "ben", "version": 3}
        )
        + "\n"
    )
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text(
        "".join(
            json.dumps({"task_id": "frac", "response": f"\\boxed{{{a}}}"}) + "\n"
            for a in ["7/12", "1/2"] * 8
        )
    )
    tasks, meta = load_tasks_with_meta(tasks_file)
    result = score_rollouts(tasks, meta, read_rollouts(rollouts, tasks), resamples=10)
    entry = result.report["tasks"]["frac"]
    assert entry["provenance"] == {"author": "ana", "approver": "ben", "version": 3}
    assert entry["c"] == 8 and entry["pass@8"] == pass_at_k(16, 8, 8)
    advice = advise(result.report, StageThresholds())
    grpo = advice["lists"]["grpo"]
    assert [r["task_id"] for r in grpo] == ["frac"] and grpo[0]["provenance"]["approver"] == "ben"


def _prov(*answers, require_two=True, adjudicator=None, **kw):
    authors = [{"author": f"e{i}", "answer": a} for i, a in enumerate(answers, 1)]
    out = {"require_two": require_two, "authors": authors, **kw}
    if adjudicator:
        out["adjudicator"] = adjudicator
    return out


def test_reference_states_follow_the_two_expert_rule():
    math = {"verifiable": "math"}
    assert reference_status({}, "7/12") == "unrecorded"
    assert (
        reference_status({"reference_provenance": _prov("7/12", require_two=False)}, "7/12")
        == "single"
    )
    assert reference_status({"reference_provenance": _prov("7/12")}, "7/12") == "awaiting_second"
    # equal as math, not as text
    agreed = {**math, "reference_provenance": _prov("7/12", "\\frac{7}{12}")}
    assert reference_status(agreed, "7/12") == "agreed"
    # text answers: normalised (case, whitespace) equality
    assert (
        reference_status({"reference_provenance": _prov("Paris", " paris ")}, "Paris") == "agreed"
    )
    disagree = {**math, "reference_provenance": _prov("7/12", "1/2")}
    assert reference_status(disagree, "7/12") == "disagree"
    settled = {**math, "reference_provenance": _prov("7/12", "1/2", adjudicator="lead")}
    assert reference_status(settled, "7/12") == "adjudicated"
    assert reference_status(settled, None) == "disagree"  # adjudicated, but no answer given


@pytest.mark.parametrize(
    ("prov", "message"),
    [
        (
            {"authors": [{"author": "e1", "answer": "a"}, {"author": "e1", "answer": "b"}]},
            "different experts",
        ),
        (_prov("a", "b", adjudicator="e2"), "wrote one of the answers"),
        ({"author": "x", "approver": "x"}, "approval needs someone else"),
        ({"version": 0}, "greater than or equal to 1"),
        ({"reviewer": "x"}, "Extra inputs"),
    ],
)
def test_reference_provenance_is_validated_at_import(prov, message):
    with pytest.raises((ValidationError, FieldProblem), match=message) as info:
        Item(
            prompt="p",
            reference="a",
            candidates=[{"text": "a"}],
            metadata={"reference_provenance": prov},
        )
    assert "reference_provenance" in str(info.value)


def test_rubric_author_and_approver_leave_the_content_hash_alone():
    base = {"id": "help", "dimensions": [{"name": "helpful", "scale": "binary"}]}
    plain = Rubric.model_validate(base)
    signed = Rubric.model_validate({**base, "author": "ana", "approver": "ben"})
    assert signed.content_hash() == plain.content_hash() and signed.author == "ana"
    with pytest.raises(ValidationError, match="approval needs someone else"):
        Rubric.model_validate({**base, "author": "ana", "approver": "ana"})


def _math_item(item_id, answer, **metadata):
    return Item(
        id=item_id,
        prompt=f"question {item_id}",
        reference=answer,
        candidates=[{"id": "a", "text": f"\\boxed{{{answer}}}"}],
        metadata={"verifiable": "math", **metadata},
    )


def test_verl_export_leaves_out_guessable_items_and_unsettled_references(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    engine = db.open_db(url)
    with transaction(engine) as s:
        p = repo.create_project(s, "rl", kinds=["pairwise"])
        task = {"answer": "7/12", "author": "ana", "approver": "ben", "version": 2}
        repo.add_item(s, p, _math_item("clean", "7/12", verify_task=task))
        repo.add_item(s, p, _math_item("one", "1"))  # the constant 1 passes it: guessable
        repo.add_item(s, p, _math_item("split", "7/12", reference_provenance=_prov("7/12", "1/2")))
        repo.add_item(
            s, p, _math_item("agreed", "7/12", reference_provenance=_prov("7/12", "\\frac{7}{12}"))
        )
        repo.add_item(
            s, p, _math_item("half", "1/3", reference_provenance=_prov("1/3"))
        )  # awaiting a second expert
    result = CliRunner().invoke(app, ["verify", "project", "rl", "--db", url, "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "guessable (a trivial answer passes; left out of the verl export): one" in " ".join(
        result.output.split()
    )
    with transaction(engine) as s:
        stored = {
            e.item.id: e.item.metadata
            for e in repo.iter_items_with_judgments(s, repo.get_project(s, "rl"))
        }
    assert stored["one"]["guessable"] == ["constant '1' (boxed)"]
    assert "guessable" not in stored["clean"]
    out = tmp_path / "verl"
    manifest = export_project(
        engine, "rl", ExportOptions(format="verl", out=out, file_format="jsonl")
    )
    rows = [orjson.loads(x) for x in (out / "train.jsonl").read_bytes().splitlines()]
    assert sorted(r["extra_info"]["item_id"] for r in rows) == ["agreed", "clean"]
    notes = manifest["format_notes"]
    assert notes["left_out"] == {"guessable": ["one"], "reference_unsettled": ["half", "split"]}
    assert notes["task_provenance"] == {"tasks": 2, "with_author": 1, "with_approver": 1}
    clean = next(r for r in rows if r["extra_info"]["item_id"] == "clean")
    carried = json.loads(clean["extra_info"]["verify_task"])
    assert (carried["author"], carried["approver"], carried["version"]) == ("ana", "ben", 2)
    assert any("left out as guessable" in w for w in notes["warnings"])
    card = (out / "README.md").read_text()
    assert "left out as guessable" in card
    engine.dispose()
