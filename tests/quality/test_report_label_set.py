"""The quality report measures the labels the export ships (issue 17 §6): latest label per rater
and unit, AI labels left out unless asked, and the report says which label set it used."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from preflab.quality import build_report, render_html
from preflab.quality.labels import LABEL_SET_RULE, resolve_labels
from preflab.schema import Item, PairwiseJudgment

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ITEM = Item(
    id="i1",
    prompt="Which is better?",
    candidates=[{"id": "x", "text": "one"}, {"id": "y", "text": "two"}],
)


def pw(winner, rater, minutes=0, **prov):
    return PairwiseJudgment(
        item_id="i1",
        shown_order=("x", "y"),
        winner=winner,
        strength=2,
        provenance={"rater_id": rater, "submitted_at": T0 + timedelta(minutes=minutes), **prov},
    )


def winner_row(report):
    (row,) = [a for a in report["agreement"] if a["dimension"] == "winner"]
    return row


def test_a_rater_who_relabels_a_pair_is_one_rater_with_one_label():
    report = build_report([pw("a", "alice"), pw("b", "alice", minutes=5)], items=[ITEM], n_boot=10)
    assert report["n_raters"] == 1 and report["n_judgments"] == 1
    assert report["raters"]["alice"]["labels"] == 1
    assert (
        report["raters"]["alice"].get("consensus_agreement") is None
    )  # nobody to agree with, not 0.0
    row = winner_row(report)
    assert row["n_pairable_units"] == 0 and row["percent_agreement"] is None
    assert report["label_set"]["set_aside"] == {"revised": 1}


def test_an_ai_rater_left_out_of_exports_is_left_out_of_the_rater_table_unless_asked():
    judgments = [pw("a", "alice"), pw("a", "bob"), pw("b", "gpt-judge", source="ai")]
    report = build_report(judgments, items=[ITEM], n_boot=10)
    assert sorted(report["raters"]) == ["alice", "bob"]
    assert report["label_set"] == {
        "rule": LABEL_SET_RULE,
        "include_ai": False,
        "judgments_in": 3,
        "judgments_used": 2,
        "set_aside": {"source-ai": 1},
    }
    assert "Label set: latest label per rater and unit" in render_html(report)
    with_ai = build_report(judgments, items=[ITEM], n_boot=10, include_ai=True)
    assert sorted(with_ai["raters"]) == ["alice", "bob", "gpt-judge"]
    assert with_ai["label_set"]["include_ai"] is True


def test_adjudication_replaces_the_production_labels_of_its_unit():
    judgments = [pw("a", "alice"), pw("b", "bob"), pw("b", "senior", minutes=9, review_pass=2)]
    labels = resolve_labels(judgments)
    assert [j.provenance.rater_id for j in labels.judgments] == ["senior"]
    assert labels.describe()["set_aside"] == {"adjudicated": 2}
    report = build_report(judgments, items=[ITEM], n_boot=10)
    assert report["adjudication_total"] == 0  # the unit is decided: nothing left to adjudicate


def test_the_dashboard_measures_the_same_label_set(tmp_path):
    """The dashboard's agreement panels (server/pages/data.py) see alice once and no AI judge."""
    from preflab.server.pages import data
    from preflab.server.permissions import ProjectRef
    from preflab.store import transaction
    from preflab.store.db import open_db
    from preflab.store.repo import add_item, add_judgment, create_project

    engine = open_db(f"sqlite:///{tmp_path / 'dash.db'}")
    with transaction(engine) as s:
        p = create_project(s, "p")
        add_item(s, p, ITEM)
        for j in (
            pw("a", "alice"),
            pw("b", "alice", minutes=5),
            pw("b", "bob"),
            pw("a", "gpt-judge", source="ai"),
        ):
            add_judgment(s, p, j)
        ref = ProjectRef(
            pk=p.pk,
            name="p",
            title="",
            kinds=["pairwise"],
            settings={},
            rubric_key=None,
            rubric_version=None,
        )
    with transaction(engine) as s:
        panels = data.dashboard(s, ref, {})["quality"]
    assert "error" not in panels
    assert sorted(panels["consensus"]) == ["alice", "bob"]
    assert panels["consensus"]["alice"]["agreement"] == 1.0  # her latest label agrees with bob
    assert panels["label_set"] == {  # the data carries what the dashboard prints it measured
        "rule": LABEL_SET_RULE,
        "include_ai": False,
        "judgments_in": 4,
        "judgments_used": 2,
        "set_aside": {"revised": 1, "source-ai": 1},
    }
