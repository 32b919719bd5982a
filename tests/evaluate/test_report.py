"""``eval report`` on a project's verdicts: battles as the exports resolve labels, per pair and
per domain, the reward model against people, ``human_eval.jsonl`` out and back in, escaped HTML."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from preflab.evaluate.outputs import OutputsInvalid
from preflab.evaluate.report import (
    build_report,
    load_verdicts,
    read_rm_scores,
    render_html,
    rm_agreement,
    write_human_eval,
)
from preflab.io.importer import ImportOptions, import_files, validate_files
from preflab.schema import PairwiseJudgment
from preflab.store import open_db, repo, transaction

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def verdict(
    i: int, prefers: str, *, labeler: str = "alice", first: str = "v1", domains=None
) -> dict:
    models = ("v1", "v2") if first == "v1" else ("v2", "v1")
    row = {
        "prompt": f"Prompt {i}",
        "answer_1": f"{models[0]} says {i}",
        "answer_2": f"{models[1]} says {i}",
        "human_prefers": prefers,
        "model_1": models[0],
        "model_2": models[1],
        "labeler": labeler,
    }
    if domains:
        row["domains"] = domains
    return row


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path, db_url):
    """10 prompts, each model shown first on half: v1 wins 0, 1, 2, 3, 8; v2 wins 5, 6, 9; ties 4, 7.
    Prompts 0-4 are math, 5-9 code."""
    engine = open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "ev")
    rows = [
        verdict(i, p, first="v1" if i % 2 else "v2", domains=["math" if i < 5 else "code"])
        for i, p in enumerate(
            [
                "answer_2",
                "answer_1",
                "answer_2",
                "answer_1",
                "tie",
                "answer_2",
                "answer_1",
                "tie",
                "answer_2",
                "answer_2",
            ]
        )
    ]
    import_files(engine, "ev", [jsonl(tmp_path / "human_eval.jsonl", rows)])
    yield engine
    engine.dispose()


def winners(data) -> list[tuple[str, str, str]]:
    return sorted(v.battle for v in data.verdicts)


def test_human_eval_rows_become_battles_in_the_order_shown(project):
    data = load_verdicts(project, "ev")
    assert len(data.verdicts) == 10
    by_prompt = {v.prompt: v for v in data.verdicts}
    assert by_prompt["Prompt 0"].battle == (
        "v2",
        "v1",
        "model_b",
    )  # v2 first, answer_2 (v1) preferred
    assert by_prompt["Prompt 1"].battle == ("v1", "v2", "model_a")
    report = build_report(data, rounds=200)
    (pair,) = report["pairs"]
    assert (
        pair["model_1"],
        pair["wins"]["count"],
        pair["ties"]["count"],
        pair["losses"]["count"],
    ) == ("v1", 5, 2, 3)
    assert report["domains"]["math"]["battles"] == 5 and report["domains"]["code"]["battles"] == 5
    assert report["ratings"]["identifiable"] and report["position"]["decided"] == 8


def test_a_relabel_counts_once_and_ai_or_excluded_labels_not_at_all(project, tmp_path):
    with transaction(project) as s:
        p = repo.get_project(s, "ev")
        item = next(
            i.item for i in repo.iter_items_with_judgments(s, p) if i.item.prompt == "Prompt 0"
        )
        shown = (item.candidates[0].id, item.candidates[1].id)
        for rater, source, winner, when in (
            ("alice", "human", "a", T0 + timedelta(days=1)),  # alice changes her mind
            ("gpt-judge", "ai", "a", T0),
        ):
            repo.add_judgment(
                s,
                p,
                PairwiseJudgment(
                    item_id=item.id,
                    shown_order=shown,
                    winner=winner,
                    strength=2,
                    provenance={"rater_id": rater, "source": source, "submitted_at": when},
                ),
            )
    data = load_verdicts(project, "ev")
    assert len(data.verdicts) == 10 and data.skipped == {"AI-sourced judgments": 1}
    assert next(v for v in data.verdicts if v.prompt == "Prompt 0").winner == "model_a"
    assert len(load_verdicts(project, "ev", include_ai=True).verdicts) == 11


def test_human_eval_out_and_back_in_gives_the_same_battles(project, tmp_path, db_url):
    data = load_verdicts(project, "ev")
    path = tmp_path / "out" / "human_eval.jsonl"
    assert write_human_eval(data, path) == 10
    first = orjson.loads(path.read_bytes().splitlines()[0])
    assert set(first) >= {"prompt", "answer_1", "answer_2", "human_prefers", "model_1", "model_2"}
    assert first["labeler"].startswith("hmac_sha256:")  # the rater's hash, never the account
    assert validate_files([path], ImportOptions()).ok
    with transaction(project) as s:
        repo.create_project(s, "again")
    import_files(project, "again", [path])
    again = load_verdicts(project, "again")
    assert winners(again) == winners(data)
    assert {v.item_id for v in again.verdicts} == {v.item_id for v in data.verdicts}


def test_reward_model_agreement_with_people(project, tmp_path):
    data = load_verdicts(project, "ev")
    # the RM prefers v2 on prompts 0-7, v1 on 8, neither on 9
    rows = []
    for i in range(10):
        r1, r2 = (0.0, 1.0) if i < 8 else (1.0, 0.0) if i == 8 else (0.5, 0.5)
        rows += [
            {"prompt": f"Prompt {i}", "response": f"v1 says {i}", "reward": r1, "model": "v1"},
            {"prompt": f"Prompt {i}", "response": f"v2 says {i}", "reward": r2, "model": "v2"},
        ]
    scores = read_rm_scores(jsonl(tmp_path / "rollouts.jsonl", rows))
    rm = rm_agreement(data.verdicts, scores)
    # people: v2 won prompts 2, 3?, ... computed from the fixture: v2 wins on 0,1? -> check by hand below
    # people (fixture): v1 won 0, 1, 2, 3, 8; v2 won 5, 6; ties 4, 7 (9 is an RM tie)
    # decided by both: 0, 1, 2, 3, 5, 6, 8; the RM agrees on 5, 6 (v2) and 8 (v1)
    assert (rm["scored"], rm["rm_ties"], rm["human_ties"], rm["decided"], rm["agree"]) == (
        10,
        1,
        2,
        7,
        3,
    )
    assert rm["agreement"] == pytest.approx(3 / 7)
    assert rm["rm_preferred_score"] == pytest.approx((3 + 0.5 * 3) / 10)
    low, high = rm["agreement_ci"]
    assert low < rm["agreement"] < high


def test_rm_scores_need_rewards_named_by_line(tmp_path):
    path = jsonl(
        tmp_path / "rollouts.jsonl",
        [
            {"prompt": "P", "response": "R", "reward": 1.0},
            {"prompt": "P", "response": "S"},
            {"prompt": "P", "response": "R ", "reward": 2.0},
        ],
    )
    with pytest.raises(OutputsInvalid) as info:
        read_rm_scores(path)
    assert [str(p) for p in info.value.problems] == [
        f"{path}:2: reward: missing: score the answers first (preflab rm score)",
        f"{path}:3: reward: 2.0 differs from 1.0 for the same prompt and answer on line 1",
    ]


def test_html_report_escapes_model_names_and_draws_the_intervals(tmp_path, sqlite_url):
    engine = open_db(sqlite_url)
    with transaction(engine) as s:
        repo.create_project(s, "xss")
    rows = [
        {**verdict(i, p), "model_1": "<script>alert(1)</script>"}
        for i, p in enumerate(["answer_1", "answer_2", "tie", "answer_1", "answer_2"])
    ]
    import_files(engine, "xss", [jsonl(tmp_path / "h.jsonl", rows)])
    page = render_html(build_report(load_verdicts(engine, "xss"), rounds=50))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<svg" in page and "<line" in page  # the interval bars
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched
