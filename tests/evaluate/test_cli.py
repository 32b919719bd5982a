"""``preflab eval create`` / ``eval report`` as a user types them (SQLite file)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from typer.testing import CliRunner

from preflab.cli import app
from preflab.schema import Candidate

from .conftest import V1, V2, V3, outputs, write_outputs

runner = CliRunner()


def run(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, f"exit {result.exit_code}, expected {code}:\n{result.output}"
    return result.output


def run_json(*args: str) -> dict:
    result = runner.invoke(app, [*map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def label_everything(db: str, tmp_path: Path) -> Path:
    """Export the items to label; one person prefers the BETTER answer (a tie when both are), except
    on prompt 0, where she prefers the short one."""
    run("export", "cli", "-f", "to-label", "-o", tmp_path / "todo", "--db", db)
    rows = [orjson.loads(x) for x in (tmp_path / "todo" / "train.jsonl").read_bytes().splitlines()]
    verdicts = []
    for r in rows:
        a, b = Candidate(text=r["answer_a"]).id, Candidate(text=r["answer_b"]).id
        better = [r["answer_a"].startswith("BETTER"), r["answer_b"].startswith("BETTER")]
        if r["prompt"].startswith("Question 0:"):
            better = [not x for x in better]
        winner = "tie" if better[0] == better[1] else "a" if better[0] else "b"
        verdicts.append(
            {
                "kind": "pairwise",
                "item_id": r["id"],
                "shown_order": [a, b],
                "winner": winner,
                "strength": 0 if winner == "tie" else 2,
                "provenance": {"rater_id": "erin"},
            }
        )
    path = tmp_path / "verdicts.jsonl"
    path.write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in verdicts))
    run("import", "cli", path, "--db", db)
    return path


def test_create_label_report(tmp_path: Path):
    db = str(tmp_path / "cli.db")
    run("init", "--db", db)  # only init creates a database
    v1 = write_outputs(tmp_path / "v1.jsonl", outputs(V1, 8, domains=True))
    v2 = write_outputs(tmp_path / "v2.jsonl", outputs(V2, 8, better=True))
    v3 = write_outputs(
        tmp_path / "v3.jsonl",
        [{**r, "response": "BETTER " + r["response"]} for r in outputs(V3, 8)],
    )
    summary = run_json(
        "eval",
        "create",
        "cli",
        "--model-a",
        v1,
        "--model-b",
        v2,
        "--model",
        f"third={v3}",
        "--seed",
        "3",
        "--raters-per-item",
        "2",
        "--db",
        db,
    )
    assert [m["name"] for m in summary["models"]] == [V1, V2, "third"]
    assert summary["items"] == 24 and summary["pairs"][f"{V1} vs {V2}"]["items"] == 8
    label_everything(db, tmp_path)
    rollouts = write_outputs(
        tmp_path / "rollouts.jsonl",
        [
            {**r, "reward": float(len(r["response"]))}
            for r in outputs(V1, 8)
            + outputs(V2, 8, better=True)
            + [{**r, "response": "BETTER " + r["response"]} for r in outputs(V3, 8)]
        ],
    )
    report = run_json(
        "eval",
        "report",
        "cli",
        "--db",
        db,
        "--bootstrap",
        "100",
        "--out",
        tmp_path / "r.html",
        "--human-eval",
        tmp_path / "human_eval.jsonl",
        "--rm-scores",
        rollouts,
    )
    assert report["battles"] == 24
    assert [m["model"] for m in report["ratings"]["models"]][
        -1
    ] == V1  # preferred once in 16 battles
    (v1_v2,) = [p for p in report["pairs"] if (p["model_1"], p["model_2"]) == (V1, V2)]
    assert (v1_v2["wins"]["count"], v1_v2["ties"]["count"], v1_v2["losses"]["count"]) == (1, 0, 7)
    assert set(report["domains"]) == {"general", "physics"}
    # the RM scores longer answers higher: it agrees with erin on every decided battle but prompt 0's two
    rm = report["rm_agreement"]
    assert (rm["decided"], rm["agree"], rm["unscored"]) == (16, 14, 0)
    assert "<svg" in (tmp_path / "r.html").read_text()
    assert len((tmp_path / "human_eval.jsonl").read_text().splitlines()) == 24
    text = run("eval", "report", "cli", "--db", db, "--bootstrap", "50", "--rm-scores", rollouts)
    assert "rank" in text and "reward model agrees with people on" in text


def test_bad_inputs_exit_2_and_create_nothing(tmp_path: Path):
    db = str(tmp_path / "cli.db")
    v1 = write_outputs(tmp_path / "v1.jsonl", outputs(V1, 3))
    bad = write_outputs(tmp_path / "bad.jsonl", [*outputs(V2, 2), {"prompt": "Q"}])
    run("init", "--db", db)  # only `init` creates a database (a mistyped --db must not)
    out = run("eval", "create", "cli", "--model-a", v1, "--model-b", bad, "--db", db, code=2)
    assert f"{bad}:3: response: missing" in out and "nothing was created" in out
    assert "NAME=FILE" in run(
        "eval", "create", "cli", "--model-a", v1, "--model", "oops", "--db", db, code=2
    )
    assert "at least two models" in run(
        "eval", "create", "cli", "--model-a", v1, "--db", db, code=2
    )
    assert "cli" not in run("project", "list", "--db", db)
    assert "project" in run("eval", "report", "nope", "--db", db, code=2)
