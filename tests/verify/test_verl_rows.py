"""verl rule rows (issue 13, section 2): a verifiable item's row in the ``verl`` export carries
``reward_model.style: "rule"``, its ground truth and ``extra_info`` naming the verifier; the
shipped ``compute_score`` (loaded by path, called with the row's fields as verl's reward manager
calls it) routes each row to that verifier."""

from __future__ import annotations

import json
import sqlite3

import orjson
import pyarrow.parquet as pq
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.schema import Item
from preflab.store import db, repo, transaction

from .conftest import ADD_TESTS, CORRECT, WRONG
from .test_adapters import load_by_path

THIRD = {"kind": "math", "answer": r"\frac{1}{3}", "tolerance": 0.01}
#: (completion that passes, completion that fails) per route
ANSWERS = {
    "math": (r"about \boxed{0.333}", r"\boxed{0.5}"),
    "sql": ("SELECT SUM(x) FROM t", "SELECT MAX(x) FROM t"),
    "code": (f"```python\n{CORRECT}```", f"```python\n{WRONG}```"),
}


@pytest.fixture
def verl_rows(tmp_path, sqlite_url) -> dict[str, dict]:
    fixture = tmp_path / "n.sqlite"
    with sqlite3.connect(fixture) as c:
        c.executescript("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);")
    tasks = {
        "math": THIRD,
        "sql": {"kind": "sql", "fixture": str(fixture), "reference_query": "SELECT SUM(x) FROM t"},
        "code": {
            "kind": "code",
            "files": {"tests/test_add.py": ADD_TESTS},
            "timeout_s": 20,
            "f2p": ["tests/test_add.py::test_add"],
            "p2p": ["tests/test_add.py::test_zero"],
        },
    }
    engine = db.open_db(sqlite_url)
    with transaction(engine) as s:
        project = repo.create_project(s, "rl", kinds=["pairwise"])
        for route, task in tasks.items():
            repo.add_item(
                s,
                project,
                Item(
                    id=route,
                    prompt=f"a {route} task",
                    candidates=[{"id": "c", "text": "x"}],
                    metadata={"verifiable": route, "verify_task": task},
                ),
            )
    out = tmp_path / "verl"
    export_project(engine, "rl", ExportOptions(format="verl", out=out, file_format="parquet"))
    engine.dispose()
    [data_file] = out.glob("*.parquet")
    return {r["extra_info"]["item_id"]: r for r in pq.read_table(data_file).to_pylist()}


def test_rule_rows_carry_ground_truth_and_name_their_verifier(verl_rows):
    for route, row in verl_rows.items():
        assert row["reward_model"]["style"] == "rule"
        assert row["reward_model"]["ground_truth"]
        assert row["extra_info"]["verifier"] == f"preflab.verify:{route}"
        assert json.loads(row["extra_info"]["verify_task"])["kind"] == route
    assert (
        verl_rows["math"]["reward_model"]["ground_truth"] == r"\frac{1}{3}"
    )  # verl's bare-answer convention


@pytest.mark.parametrize("route", ["math", "sql", "code"])
def test_compute_score_routes_a_rule_row_to_its_verifier(verl_rows, route, request):
    if route == "code":
        request.getfixturevalue(
            "sandbox"
        )  # code runs sandboxed: skipped where namespaces are missing
    compute_score = load_by_path("custom_module").compute_score
    row = verl_rows[route]
    good, bad = ANSWERS[route]
    scores = [
        compute_score(
            data_source=row["data_source"],
            solution_str=answer,
            ground_truth=row["reward_model"]["ground_truth"],
            extra_info=row["extra_info"],
        )["score"]
        for answer in (good, bad)
    ]
    assert scores == [1.0, 0.0]


def test_the_whole_task_travels_in_extra_info(verl_rows):
    """0.333 is 1/3 only within the task's tolerance, which the bare ground truth does not carry."""
    compute_score = load_by_path("custom_module").compute_score
    row = verl_rows["math"]
    truth = row["reward_model"]["ground_truth"]
    assert (
        compute_score(row["data_source"], ANSWERS["math"][0], truth, row["extra_info"])["score"]
        == 1.0
    )
    assert (
        compute_score(row["data_source"], ANSWERS["math"][0], truth, {"index": 0})["score"] == 0.0
    )


def test_a_row_whose_task_is_not_the_named_verifier_is_refused(verl_rows):
    compute_score = load_by_path("custom_module").compute_score
    row = verl_rows["sql"]
    misrouted = {**row["extra_info"], "verifier": "preflab.verify:math"}
    with pytest.raises(
        ValueError, match="extra_info.verifier is 'preflab.verify:math' but the task is a sql task"
    ):
        compute_score(
            row["data_source"], ANSWERS["sql"][0], row["reward_model"]["ground_truth"], misrouted
        )
    assert orjson.dumps(row)  # the row itself is plain data verl can read


def test_the_card_states_the_trust_limit_of_repo_level_code_rewards(tmp_path, sqlite_url):
    """A repo-level code task (its tests import the candidate) carries a reward only as good as
    the in-process checks: the export's card and manifest say so, and count the rows; an export
    of function-level tasks alone says nothing of it."""
    task = {
        "kind": "code",
        "files": {"tests/test_add.py": ADD_TESTS},
        "f2p": ["tests/test_add.py::test_add"],
    }
    engine = db.open_db(sqlite_url)
    with transaction(engine) as s:
        project = repo.create_project(s, "rl", kinds=["pairwise"])
        for item_id, mode in (("fn", "function"), ("repo1", "repo"), ("repo2", "repo")):
            repo.add_item(
                s,
                project,
                Item(
                    id=item_id,
                    prompt="a code task",
                    candidates=[{"id": "c", "text": "x"}],
                    metadata={"verifiable": "code", "verify_task": {**task, "mode": mode}},
                ),
            )
    out = tmp_path / "verl"
    export_project(engine, "rl", ExportOptions(format="verl", out=out, file_format="parquet"))
    engine.dispose()
    card = (out / "README.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format_notes"]["repo_level_code_rows"] == 2
    assert "2 rows are repo-level code tasks" in card and "Trust limit" in card
