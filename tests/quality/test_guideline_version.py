"""Issue 16 §3: the guideline version a rater saw is stored on each judgment (imported from the
record's ``provenance.guideline_version``), exported, and agreement breaks down by it."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.quality import agreement_by_guideline_version, build_report
from preflab.schema import PairwiseJudgment

# version 1: three raters split on four pairs; version 2 (clearer guidelines): they agree
V1 = {"q1": "aab", "q2": "abb", "q3": "aba", "q4": "bba"}
V2 = {"q5": "aaa", "q6": "bbb", "q7": "aaa"}


def judgments():
    out = []
    for version, units in ((1, V1), (2, V2)):
        for item, winners in units.items():
            for k, winner in enumerate(winners):
                out.append(
                    PairwiseJudgment(
                        item_id=item,
                        shown_order=("a", "b"),
                        winner=winner,
                        strength=2,
                        provenance={"rater_id": f"r{k}", "guideline_version": version},
                    )
                )
    return out


def reference_alpha(units: dict[str, str]) -> float:
    """krippendorff.alpha (the reference package), nominal, raters x units."""
    data = np.array([[0 if w[k] == "a" else 1 for w in units.values()] for k in range(3)])
    return krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")


def test_alpha_per_guideline_version_matches_the_reference_package():
    rows = agreement_by_guideline_version(judgments(), n_boot=0)
    winner = {r["guideline_version"]: r for r in rows if r["dimension"] == "winner"}
    assert set(winner) == {"v1", "v2"}
    assert winner["v1"]["alpha"] == pytest.approx(reference_alpha(V1))
    assert winner["v2"]["alpha"] == pytest.approx(1.0)
    assert winner["v1"]["n_units"] == 4 and winner["v2"]["n_units"] == 3


def test_the_quality_report_breaks_agreement_down_by_guideline_version():
    report = build_report(judgments(), n_boot=0)
    versions = {r["guideline_version"] for r in report["agreement_by_guideline_version"]}
    assert versions == {"v1", "v2"}
    # labels without the field: nothing to break down
    plain = [
        j.model_copy(
            update={"provenance": j.provenance.model_copy(update={"guideline_version": None})}
        )
        for j in judgments()
    ]
    assert build_report(plain, n_boot=0)["agreement_by_guideline_version"] == []


def test_an_imported_guideline_version_is_stored_exported_and_reported(tmp_path):
    db = str(tmp_path / "g.db")
    records = tmp_path / "labels.jsonl"
    lines = [
        {
            "id": "q1",
            "prompt": "Capital of France?",
            "candidates": [{"id": "a", "text": "Paris"}, {"id": "b", "text": "Lyon"}],
        },
    ]
    for k, version in enumerate((1, 2)):
        lines.append(
            {
                "kind": "pairwise",
                "item_id": "q1",
                "shown_order": ["a", "b"],
                "winner": "a",
                "strength": 2,
                "provenance": {"rater_id": f"r{k}", "guideline_version": version},
            }
        )
    records.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    runner = CliRunner()
    for args in (
        ["init", "--db", db],
        ["project", "create", "p", "--db", db],
        ["import", "p", str(records), "--db", db],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    out = tmp_path / "raw"
    result = runner.invoke(app, ["export", "p", "-f", "raw", "-o", str(out), "--db", db, "--json"])
    assert result.exit_code == 0, result.output
    raw = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert sorted(r["provenance"]["guideline_version"] for r in raw) == [1, 2]
    pref = tmp_path / "pref"
    result = runner.invoke(
        app,
        [
            "export",
            "p",
            "-f",
            "trl-preference",
            "-o",
            str(pref),
            "--provenance-columns",
            "--db",
            db,
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in (pref / "train.jsonl").read_text().splitlines()]
    assert row["guideline_version"] == [1, 2]
    report = json.loads(runner.invoke(app, ["quality", "report", "p", "--db", db, "--json"]).stdout)
    assert {r["guideline_version"] for r in report["agreement_by_guideline_version"]} == {
        "v1",
        "v2",
    }
