"""Agreement as a delivery gate (issue 16 §4): Krippendorff's alpha per batch and dimension must
reach the project's ``policy.min_alpha`` (0.84 by default) or the export refuses; ``force`` writes
and marks the card; the manifest and the card carry alpha with its interval and raters per item.

Data: PandaLM pairs (tests/data/pandalm-60.json, 3 annotators who agree on all 60 records = 57 items: 3 pairs of texts recur under two model pairs, alpha 1.0)
plus a batch where two raters disagree on every pair.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.export.base import ExportError
from preflab.io.importer import import_files
from preflab.store import db, repo, transaction

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "panda", kinds=["pairwise"])
        repo.create_project(
            s, "lenient", kinds=["pairwise"], settings={"policy": {"min_alpha": 0.5}}
        )
    yield engine
    engine.dispose()


def disagreeing_batch(tmp_path: Path) -> Path:
    records = []
    for n in range(8):
        for rater, (chosen, rejected) in (("x", ("A", "B")), ("y", ("B", "A"))):
            records.append(
                {
                    "id": f"d{n}",
                    "prompt": f"Q{n}",
                    "chosen": chosen,
                    "rejected": rejected,
                    "labeler": rater,
                }
            )
    path = tmp_path / "disagree.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def export(engine, project, out, **kw):
    return export_project(engine, project, ExportOptions(format="trl-preference", out=out, **kw))


def test_agreeing_raters_export_with_the_figures_in_manifest_and_card(engine, tmp_path):
    import_files(engine, "panda", [DATA / "pandalm-60.json"])
    manifest = export(engine, "panda", tmp_path / "o")
    agreement = manifest["agreement"]
    assert agreement["min_alpha"] == 0.84 and agreement["passed"] and not agreement["forced"]
    (winner,) = [f for f in agreement["by_batch_dimension"] if f["dimension"] == "winner"]
    assert winner["alpha"] == 1.0 and winner["items"] == 57 and winner["raters_per_item"] == 3.0
    card = (tmp_path / "o" / "README.md").read_text()
    assert "## Agreement" in card and "| winner | 1.0 (1.0, 1.0) | 57 | 57 | 3.0 |" in card
    # PandaLM gives no strength (unknown strengths are None): no strength dimension to report
    assert not [f for f in agreement["by_batch_dimension"] if f["dimension"] == "strength"]


def test_a_batch_below_the_floor_refuses_and_writes_nothing(engine, tmp_path):
    import_files(engine, "panda", [DATA / "pandalm-60.json"])
    import_files(engine, "panda", [disagreeing_batch(tmp_path)])
    with pytest.raises(
        ExportError,
        match=r"agreement below policy.min_alpha 0.84: batch-\d+/winner: alpha -?0\.\d+.*--force",
    ):
        export(engine, "panda", tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_a_raw_export_is_not_refused_but_reports_the_low_agreement(engine, tmp_path):
    # raw is not training data: it is how disagreeing labels go out for adjudication
    import_files(engine, "panda", [disagreeing_batch(tmp_path)])
    manifest = export_project(engine, "panda", ExportOptions(format="raw", out=tmp_path / "raw"))
    agreement = manifest["agreement"]
    assert not agreement["passed"] and not agreement["forced"] and len(agreement["below"]) == 1
    assert (tmp_path / "raw" / "train.jsonl").exists()


def test_force_writes_and_marks_the_card(engine, tmp_path):
    import_files(engine, "panda", [DATA / "pandalm-60.json"])
    import_files(engine, "panda", [disagreeing_batch(tmp_path)])
    manifest = export(engine, "panda", tmp_path / "o", force=True)
    assert manifest["agreement"]["forced"] and not manifest["agreement"]["passed"]
    assert len(manifest["agreement"]["below"]) == 1
    assert (
        "**Warning: agreement is below the project's floor"
        in (tmp_path / "o" / "README.md").read_text()
    )


def test_the_floor_is_a_project_setting_and_an_option(engine, tmp_path):
    import_files(engine, "lenient", [DATA / "pandalm-60.json"])
    import_files(engine, "lenient", [disagreeing_batch(tmp_path)])
    with pytest.raises(ExportError):
        export(engine, "lenient", tmp_path / "o")  # alpha of the disagreeing batch is below 0.5 too
    assert export(engine, "lenient", tmp_path / "o", min_alpha=-1.0)["agreement"]["passed"]


def test_single_rated_data_is_reported_as_not_measured(engine, tmp_path):
    path = tmp_path / "single.jsonl"
    path.write_text(
        "".join(
            json.dumps({"prompt": f"Q{n}", "chosen": "A", "rejected": "B"}) + "\n" for n in range(5)
        )
    )
    import_files(engine, "panda", [path])
    manifest = export(engine, "panda", tmp_path / "o")
    (winner,) = [
        f for f in manifest["agreement"]["by_batch_dimension"] if f["dimension"] == "winner"
    ]
    assert winner["alpha"] is None and winner["items_with_2plus_raters"] == 0
    assert "not measured" in (tmp_path / "o" / "README.md").read_text()


def test_drop_disagreement_removes_split_items_and_counts_them(engine, tmp_path):
    # two pairs all three raters agree on, two split 2 to 1 (winning share 2/3)
    votes = {"u0": "AAA", "u1": "BBB", "s0": "AAB", "s1": "ABB"}
    records = [
        {
            "id": item,
            "prompt": item,
            "chosen": "A" if v == "A" else "B",
            "rejected": "B" if v == "A" else "A",
            "labeler": f"r{k}",
        }
        for item, vs in votes.items()
        for k, v in enumerate(vs)
    ]
    path = tmp_path / "split.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    import_files(engine, "panda", [path])
    manifest = export(engine, "panda", tmp_path / "o", force=True, drop_disagreement=0.75)
    gate = manifest["gates"]["disagreement"]
    assert gate["reasons"] == {"agreement-below-0.75": 2}
    assert sorted(gate["sample_item_ids"]["agreement-below-0.75"]) == ["s0", "s1"]
    assert len((tmp_path / "o" / "train.jsonl").read_text().splitlines()) == 2
    assert "disagreement" not in export(engine, "panda", tmp_path / "p", force=True)["gates"]
    with pytest.raises(ExportError, match="--drop-disagreement 1.5: use a share in"):
        export(engine, "panda", tmp_path / "q", force=True, drop_disagreement=1.5)


def test_cli_refuses_with_a_message_and_force_writes(engine, tmp_path, db_url):
    from typer.testing import CliRunner

    from preflab.cli import app

    import_files(engine, "panda", [DATA / "pandalm-60.json"])
    import_files(engine, "panda", [disagreeing_batch(tmp_path)])
    runner = CliRunner()
    args = ["export", "panda", "-f", "trl-preference", "--db", db_url]
    refused = runner.invoke(app, [*args, "-o", str(tmp_path / "a")])
    assert refused.exit_code == 2 and "below policy.min_alpha 0.84" in refused.output
    assert "Traceback" not in refused.output and not (tmp_path / "a").exists()
    forced = runner.invoke(app, [*args, "-o", str(tmp_path / "b"), "--force", "--json"])
    assert forced.exit_code == 0 and json.loads(forced.output)["agreement"]["forced"]


def test_a_rater_who_revises_a_label_is_one_rater_with_one_label(engine, tmp_path):
    # x and y agree on every pair; x first said the opposite and then changed their mind. The gate
    # measures the label set the export ships (latest label per rater, here by row order): alpha
    # 1.0, not a refusal (before: x's two labels were counted as two raters who disagree).
    records = []
    for n in range(8):
        good, bad = ("A", "B") if n % 2 else ("B", "A")  # both directions, so alpha is defined
        records.append(
            {"id": f"r{n}", "prompt": f"Q{n}", "chosen": bad, "rejected": good, "labeler": "x"}
        )
        for rater in ("x", "y"):
            records.append(
                {
                    "id": f"r{n}",
                    "prompt": f"Q{n}",
                    "chosen": good,
                    "rejected": bad,
                    "labeler": rater,
                }
            )
    path = tmp_path / "revised.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    import_files(engine, "panda", [path])
    manifest = export(engine, "panda", tmp_path / "o")
    (winner,) = [
        f for f in manifest["agreement"]["by_batch_dimension"] if f["dimension"] == "winner"
    ]
    assert winner["alpha"] == 1.0 and manifest["agreement"]["passed"]
    assert manifest["counts"]["rows_out"] == 8
