"""The README's walk-through, as commands: sample from the in-process OpenAI-compatible server,
verify rollouts, advise, rl --reward verifier on the advice's GRPO prompts with a tiny local
policy — on the bundled stage example's math and SQL tasks (code tasks need the sandbox and
minutes; their verifiers are covered in tests/verify)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from preflab.cli import app
from preflab.train.openai_stub import StubPolicy, StubServer
from preflab.verify.passk import pass_at_k

STAGES = Path(__file__).resolve().parents[2] / "examples" / "stages"


def test_sample_verify_advise_rl_on_the_bundled_example(tmp_path, policy_dir):
    rows = []
    for line in (STAGES / "tasks.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["kind"] == "code":
            continue
        if "fixture" in row:
            row["fixture"] = str((STAGES / row["fixture"]).resolve())
        rows.append(row)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    answers = json.loads((STAGES / "answers.json").read_text())
    runner = CliRunner()
    with StubServer(StubPolicy(answers)) as server:
        result = runner.invoke(
            app,
            ["sample", str(tasks), "--n", "16", "--endpoint", server.url, "--model", "stub"]
            + ["--out", str(tmp_path / "rollouts.jsonl")],
        )
    assert result.exit_code == 0, result.output
    report = tmp_path / "passk.json"
    result = runner.invoke(
        app,
        ["verify", "rollouts", str(tasks), str(tmp_path / "rollouts.jsonl"), "-w", "1"]
        + ["--report", str(report), "--out", str(tmp_path / "scored.jsonl")],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert data["excluded_from_pass_at_k"] == ["math/choice"]
    # 16 samples cycle twice through the eight scripted answers: c = 2 x correct answers
    expected_c = {"sql/revenue_by_country": 12, "sql/top_customer": 8, "math/fraction": 16}
    expected_c |= {"sql/customers_without_orders": 16, "sql/orders_per_month": 4}
    expected_c |= {"math/surd": 0, "math/interval": 8, "math/decimal": 2}
    assert {t: data["tasks"][t]["c"] for t in expected_c} == expected_c
    math_pass8 = sum(pass_at_k(16, expected_c[t], 8) for t in expected_c if t.startswith("math"))
    assert data["domains"]["math"]["pass@8"]["value"] == math_pass8 / 4
    result = runner.invoke(app, ["advise", str(report), "--out", str(tmp_path / "advice")])
    assert result.exit_code == 0, result.output
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    assert advice["domains"]["sql"]["stop_sft"] and advice["domains"]["math"]["stop_sft"]
    grpo = {r["task_id"] for r in advice["lists"]["grpo"]}
    assert grpo == {
        "sql/revenue_by_country",
        "sql/top_customer",
        "sql/orders_per_month",
        "math/interval",
        "math/decimal",
    }
    drop = {r["task_id"]: r["reason"] for r in advice["lists"]["drop"]}
    assert drop["math/choice"].startswith("guessable")
    assert set(drop) == {
        "math/choice",
        "math/fraction",
        "math/surd",
        "sql/customers_without_orders",
    }
    # the fourth command: GRPO against the verifiers on exactly the advised prompts
    grpo_file = tmp_path / "advice" / "grpo.jsonl"
    result = runner.invoke(
        app,
        ["rl", "--reward", "verifier", "--policy", str(policy_dir), "--tasks", str(tasks)]
        + ["--prompts", str(grpo_file), "--out", str(tmp_path / "rl"), "--steps", "1"]
        + ["--num-generations", "2", "--batch-size", "2", "--max-completion-length", "4"]
        + ["--json"],
    )
    assert result.exit_code == 0, result.output
    rl_report = json.loads(result.stdout)
    assert rl_report["prompts"] == 5 and rl_report["guessable_left_out"] == {}
    assert rl_report["steps"][0]["zero_variance_share"] is not None
    assert (tmp_path / "rl" / "rl_report.html").is_file()
