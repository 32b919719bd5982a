"""``preflab advise``: the specification's decisions at each threshold boundary, on constructed
pass@k reports (tasks with known n and c); a zero-variance group never reaches GRPO."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from preflab.cli import app
from preflab.train.advise import StageThresholds, advise, load_thresholds
from preflab.verify.passk import pass_at_k

DEFAULT = StageThresholds()


def report(*groups: tuple[str, int, list[int]], guessable: dict[str, list[str]] | None = None):
    """``(domain, n, [c per task])`` groups as a ``verify rollouts`` report."""
    tasks = {}
    for domain, n, cs in groups:
        for i, c in enumerate(cs):
            tid = f"{domain}/{i}"
            tasks[tid] = {
                "domain": domain,
                "n": n,
                "c": c,
                "prompt": f"prompt {tid}",
                "guessable": (guessable or {}).get(tid, []),
                "draft": "my attempt",
                "model": "m",
            }
    return {"tasks": tasks}


def ids(advice, name):
    return {r["task_id"] for r in advice["lists"][name]}


def test_cold_start_boundary_pass16_below_010():
    # n = 32, c = 1: pass@16 = 0.5 exactly; the domain's mean is 0.5 * solved / tasks
    assert pass_at_k(32, 1, 16) == 0.5
    just_below = advise(report(("d", 32, [1] + [0] * 9)), DEFAULT)["domains"]["d"]  # 0.05
    at = advise(report(("d", 32, [1, 1] + [0] * 8)), DEFAULT)["domains"]["d"]  # 0.10
    assert just_below["cold_start"] and just_below["sft"].startswith("cold start")
    assert at["pass@16"] == 0.10
    assert not at["cold_start"] and not at["sft"].startswith("cold start")


def test_stop_sft_boundary_pass8_at_040():
    at = advise(report(("d", 32, [32, 32, 0, 0, 0])), DEFAULT)["domains"]["d"]  # 0.40
    below = advise(report(("d", 32, [32, 32, 0, 0, 0, 0])), DEFAULT)["domains"]["d"]  # 0.33
    assert at["pass@8"] == 0.40 and at["stop_sft"] and at["sft"].startswith("stop SFT")
    assert not below["stop_sft"] and below["sft"].startswith("SFT may continue")


def test_preference_boundary_pass16_at_015():
    at = advise(report(("d", 32, [32] * 3 + [0] * 17)), DEFAULT)  # 0.15
    below = advise(report(("d", 32, [32] * 2 + [0] * 18)), DEFAULT)  # 0.10
    assert at["domains"]["d"]["pass@16"] == 0.15 and at["domains"]["d"]["preference_data"]
    assert not below["domains"]["d"]["preference_data"]
    assert not at["lists"]["preference"]  # always or never solved: nothing to compare
    mixed = advise(report(("d", 32, [32] * 3 + [4] + [0] * 16)), DEFAULT)
    assert ids(mixed, "preference") == {"d/3"}


def test_no_rl_where_pass32_is_zero():
    advice = advise(report(("d", 32, [0, 1, 31, 32])), DEFAULT)
    assert pass_at_k(32, 1, 32) == 1.0
    assert ids(advice, "grpo") == {"d/1", "d/2"}
    assert advice["domains"]["d"]["no_rl_prompts"] == 1
    drop = {r["task_id"]: r["reason"] for r in advice["lists"]["drop"]}
    assert drop == {
        "d/0": "never solved: zero reward variance",
        "d/3": "always solved: zero reward variance",
    }


@pytest.mark.parametrize("group_size", [2, 4, 8, 16, 64])
def test_a_zero_variance_group_never_reaches_grpo(group_size):
    groups = [(f"n{n}", n, list(range(n + 1))) for n in (1, 2, 3, 8, 16, 32, 40)]
    advice = advise(report(*groups), StageThresholds(group_size=group_size))
    for row in advice["lists"]["grpo"]:
        assert 0 < row["c"] < row["n"], row
        assert row[f"mixed_group_share@{group_size}"] > 0
    expected = {f"n{n}/{c}" for n in (1, 2, 3, 8, 16, 32, 40) for c in range(1, n)}
    assert ids(advice, "grpo") == expected


def test_grpo_share_threshold_and_guessable_tasks():
    th = StageThresholds(group_size=4, grpo_min_mixed_share=0.5)
    advice = advise(report(("d", 16, [1, 8, 15]), guessable={"d/1": ["constant '1'"]}), th)
    # c = 1 of 16: P(mixed group of 4) = 0.25 (<= 0.5); c = 8: 0.95; c = 15: 0.25
    assert ids(advice, "grpo") == set()  # d/1 guessable, the others under the bar
    advice = advise(report(("d", 16, [1, 8, 15]), guessable={"d/0": ["empty"]}), th)
    assert ids(advice, "grpo") == {"d/1"}
    drop = {r["task_id"]: r["reason"] for r in advice["lists"]["drop"]}
    assert drop["d/0"] == "guessable: passed by empty"
    assert advice["guessable"] == {"d/0": ["empty"]}
    assert advice["domains"]["d"]["tasks"] == 2  # guessable tasks: not in the domain's pass@k


def test_demonstrations_are_low_tasks_where_sft_is_not_stopped():
    advice = advise(report(("cold", 32, [0] * 9 + [1]), ("warm", 32, [32, 32, 0])), DEFAULT)
    assert advice["domains"]["cold"]["cold_start"] and advice["domains"]["warm"]["stop_sft"]
    # cold/9: pass@16 = 0.5; warm/2 is never solved, but SFT has stopped in its domain
    assert ids(advice, "demonstrations") == {f"cold/{i}" for i in range(9)}
    row = advice["lists"]["demonstrations"][0]
    assert row["prompt"] == "prompt cold/0" and row["draft"] == "my attempt"


def test_too_few_samples_is_unknown_not_a_guess():
    advice = advise(report(("d", 4, [0, 1, 2])), DEFAULT)
    d = advice["domains"]["d"]
    assert d["sft"].startswith("unknown: needs n >= 16") and d["preference"].startswith("unknown")
    assert not d["cold_start"] and not advice["lists"]["demonstrations"]
    assert ids(advice, "grpo") == {"d/1", "d/2"}  # the group variance is measurable at any n


def test_thresholds_from_a_policy_file_and_overrides(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("stages:\n  stop_sft_at: 0.5\n  group_size: 16\n")
    th = load_thresholds(policy, {"preference_at": 0.2})
    assert (th.stop_sft_at, th.group_size, th.preference_at) == (0.5, 16, 0.2)
    assert th.cold_start_below == 0.10 and th.no_rl_k == 32
    at_040 = advise(report(("d", 32, [32, 32, 0, 0, 0])), th)["domains"]["d"]
    assert not at_040["stop_sft"]  # 0.40 < 0.5 now
    policy.write_text("stages:\n  stop_sft: 0.5\n")
    with pytest.raises(ValidationError):
        load_thresholds(policy)


def test_cli_writes_lists_json_html_and_a_demonstration_project(tmp_path):
    source = tmp_path / "passk.json"
    source.write_text(json.dumps(report(("code", 32, [0, 0]), ("sql", 32, [16, 32, 3]))))
    db = tmp_path / "p.db"
    assert CliRunner().invoke(app, ["init", "--db", str(db)]).exit_code == 0
    out = tmp_path / "advice"
    result = CliRunner().invoke(
        app,
        ["advise", str(source), "--out", str(out), "--set", "stop_sft_at=0.5"]
        + ["--group-size", "4", "--create-project", "demos", "--db", str(db)],
    )
    assert result.exit_code == 0, result.output
    assert (
        "cold start" in result.output and "created project 'demos' with 2 prompts" in result.output
    )
    data = json.loads((out / "advice.json").read_text())
    assert data["thresholds"]["stop_sft_at"] == 0.5 and data["thresholds"]["group_size"] == 4
    grpo = [json.loads(line) for line in (out / "grpo.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in grpo} == {"sql/0", "sql/2"}
    assert len((out / "demonstrations.jsonl").read_text().splitlines()) == 2
    html = (out / "advice.html").read_text()
    assert "<h2>grpo (2)</h2>" in html and "cold start" in html

    from preflab.store import make_engine, repo, transaction

    engine = make_engine(f"sqlite:///{db}")
    with transaction(engine) as s:
        project = repo.get_project(s, "demos")
        items = [e.item for e in repo.iter_items_with_judgments(s, project)]
    engine.dispose()
    assert sorted(i.prompt for i in items) == ["prompt code/0", "prompt code/1"]
    assert items[0].metadata["task_id"].startswith("code/")
    # again: the project exists, nothing changes, exit 2
    again = CliRunner().invoke(
        app,
        ["advise", str(source), "--out", str(out), "--create-project", "demos", "--db", str(db)],
    )
    assert again.exit_code == 2 and "exists already" in again.output


def test_cli_refuses_what_is_not_a_report(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[]")
    result = CliRunner().invoke(app, ["advise", str(bad)])
    assert result.exit_code == 2 and "not a pass@k report" in result.output
    result = CliRunner().invoke(app, ["advise", str(bad), "--set", "nonsense"])
    assert result.exit_code == 2 and "NAME=VALUE" in result.output
