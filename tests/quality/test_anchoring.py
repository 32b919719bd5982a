"""The anchoring audit of AI assistance (``quality/anchoring.py``; docs/judges.md): a constructed
case computed by hand, and the quality report's JSON and HTML section from the store."""

from __future__ import annotations

import math

import pytest

from preflab.quality.anchoring import anchoring_audit
from preflab.schema import Item, UnaryJudgment

JUDGE = "m"


def thumb(item: str, rater: str, label: bool, source: str = "human", seen: int | None = None):
    prov: dict = {"rater_id": rater, "source": source}
    if seen is not None:
        prov["assisted_by"] = [
            {"origin": "judge", "content_hash": "h", "judgment_id": seen, "judge": JUDGE}
        ]
    return UnaryJudgment(item_id=item, candidate_id="x", label=label, provenance=prov)


def constructed() -> tuple[list, list[int]]:
    """The judge says u1 +, u2 +, u3 - (ids 1, 2, 3). With the suggestion in view: a1 u1 + (agrees),
    a1 u2 - (disagrees), a2 u1 + (agrees), a2 u3 - (agrees): 3 of 4. Without: h1 u1 +, h2 u1 -,
    h3 u1 -, h1 u2 +, h2 u2 +, h1 u3 -. Human pairs: u1 (+,-) (+,-) (-,-) and u2 (+,+): 2 of 4
    equal (u3 has one human: no pair). Humans against the judge: u1 1 of 3, u2 2 of 2, u3 1 of 1:
    4 of 6."""
    js = [
        thumb("u1", f"judge:{JUDGE}", True, "ai"),
        thumb("u2", f"judge:{JUDGE}", True, "ai"),
        thumb("u3", f"judge:{JUDGE}", False, "ai"),
        thumb("u1", "a1", True, "ai_assisted", seen=1),
        thumb("u2", "a1", False, "ai_assisted", seen=2),
        thumb("u1", "a2", True, "ai_assisted", seen=1),
        thumb("u3", "a2", False, "ai_assisted", seen=3),
        thumb("u1", "h1", True),
        thumb("u1", "h2", False),
        thumb("u1", "h3", False),
        thumb("u2", "h1", True),
        thumb("u2", "h2", True),
        thumb("u3", "h1", False),
    ]
    return js, list(range(1, len(js) + 1))


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval written out (95 %), independent of the module's."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_the_constructed_case_by_hand():
    out = anchoring_audit(*constructed())
    assert out is not None
    (judge,) = out["judges"]
    assert judge["judge"] == JUDGE
    (row,) = judge["rows"]
    assert (row["kind"], row["dimension"]) == ("unary", "thumb")
    expected = {
        "assisted_vs_suggestion": (3, 4),
        "unassisted_vs_judge": (4, 6),
        "human_vs_human": (2, 4),
    }
    for name, (k, n) in expected.items():
        rate = row[name]
        assert (rate["agree"], rate["n"]) == (k, n), name
        assert rate["rate"] == pytest.approx(k / n, abs=1e-12)
        low, high = wilson(k, n)
        assert (rate["low"], rate["high"]) == pytest.approx((low, high), abs=1e-12), name
    # by hand, to four places: 3/4 -> [0.3006, 0.9544]
    assert row["assisted_vs_suggestion"]["low"] == pytest.approx(0.3006, abs=1e-4)
    assert row["assisted_vs_suggestion"]["high"] == pytest.approx(0.9544, abs=1e-4)


def test_no_assisted_labels_no_section():
    js, ids = constructed()
    plain = [j for j in js if j.provenance.source != "ai_assisted"]
    assert anchoring_audit(plain, ids[: len(plain)]) is None


def test_a_suggestion_not_among_the_labels_is_not_counted():
    js, ids = constructed()
    ids[1] = 99  # the judge's u2 label is stored under another id: a1's u2 label is not matched
    out = anchoring_audit(js, ids)
    assert out is not None
    row = out["judges"][0]["rows"][0]
    assert (row["assisted_vs_suggestion"]["agree"], row["assisted_vs_suggestion"]["n"]) == (3, 3)


def test_the_report_from_the_store_has_the_section_in_json_and_html(db_url):
    from preflab.io.quality_source import report_from_store
    from preflab.quality.report import render_html
    from preflab.store import db, repo, transaction

    engine = db.open_db(db_url)
    js, _ = constructed()
    with transaction(engine) as s:
        p = repo.create_project(s, "p", kinds=["unary"])
        plain = repo.create_project(s, "plain", kinds=["unary"])
        stored: dict[int, int] = {}
        for item in ("u1", "u2", "u3"):
            for project in (p, plain):
                repo.add_item(
                    s,
                    project,
                    Item(id=item, prompt=f"{item}?", candidates=[{"id": "x", "text": item}]),
                )
        for n, j in enumerate(js, start=1):
            if j.provenance.assisted_by:  # point at the judge label's stored pk
                rec = j.provenance.assisted_by[0]
                j = j.model_copy(
                    update={
                        "provenance": j.provenance.model_copy(
                            update={
                                "assisted_by": [
                                    rec.model_copy(update={"judgment_id": stored[rec.judgment_id]})
                                ]
                            }
                        )
                    }
                )
            row, _ = repo.add_judgment(s, p, j)
            stored[n] = row.pk
            if j.provenance.source == "human":
                repo.add_judgment(s, plain, j)
    try:
        report = report_from_store(db_url, "p", n_boot=20)
        assert "anchoring" not in report_from_store(db_url, "plain", n_boot=20)
    finally:
        engine.dispose()
    row = report["anchoring"]["judges"][0]["rows"][0]
    assert (row["assisted_vs_suggestion"]["agree"], row["assisted_vs_suggestion"]["n"]) == (3, 4)
    assert (row["human_vs_human"]["agree"], row["human_vs_human"]["n"]) == (2, 4)
    assert (row["unassisted_vs_judge"]["agree"], row["unassisted_vs_judge"]["n"]) == (4, 6)
    html = render_html(report)
    assert "AI assistance: anchoring" in html and "3/4 = 0.750" in html
