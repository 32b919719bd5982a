"""Issue 28 §1 through the web app: honest raters' labels stay in every export, strong telemetry
evidence goes to review with its evidence, a reviewer's decision settles it, the web export
offers what the CLI offers, and a 0-row export says so on every surface.

As reported: two raters, ~25 labels typed as clean sentences (no deletion, so each is flagged
``no_revision``), two accepted demonstrations -> ``trl-sft`` from the web had **0 rows**, the
adjudication queue listed nearly every item for ``telemetry: no_revision`` and the dashboard
showed every label flagged.
"""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from .conftest import seed

#: A person who types a clean sentence: human rhythm, no deletion (flagged ``no_revision``).
CLEAN = {
    "typed_chars": 64,
    "pasted_chars": 0,
    "paste_count": 0,
    "untrusted_paste_chars": 0,
    "active_ms": 40_000,
    "focus_losses": 0,
    "iki_cv": 0.52,
    "revision_ratio": 0.0,
}
RATIONALE = "Answer A states the facts correctly and B gets the date wrong."
#: A model's rationale pasted whole from outside the page, after a glance.
PASTED = "The first answer is better because " + "it is accurate and complete. " * 30
PASTED_TEL = {
    "typed_chars": 0,
    "pasted_chars": len(PASTED),
    "paste_count": 1,
    "untrusted_paste_chars": len(PASTED),
    "active_ms": 60_000,
    "focus_losses": 1,
}


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _label_everything(
    c: TestClient, token: str, *, demo: bool, telemetry=CLEAN, text=RATIONALE, prefer="a"
):
    """The rater takes every task offered: a demonstration first when ``demo``, then pairwise
    judgments preferring the candidate ``prefer`` wherever it was shown."""
    ids = []
    while True:
        r = c.post("/api/v1/projects/demo/assignments/next", headers=_as(token))
        assert r.status_code in (200, 201), r.text
        task = r.json()["task"]
        if task is None:
            return ids
        if demo and not ids:
            judgment = {"kind": "demonstration", "text": "Paris is the capital of France."}
        else:
            winner = "a" if task["shown_order"][0] == prefer else "b"
            judgment = {"kind": "pairwise", "winner": winner, "strength": 2, "rationale": text}
        body = {
            "assignment_id": task["assignment_id"],
            "judgment": judgment,
            "telemetry": telemetry,
        }
        r = c.post("/api/v1/projects/demo/judgments", json=body, headers=_as(token))
        assert r.status_code == 201, r.text
        ids.append(r.json()["judgment_id"])


def _export(c: TestClient, token: str, **body) -> dict:
    r = c.post("/api/v1/projects/demo/exports", json=body, headers=_as(token))
    assert r.status_code == 201, r.text
    return r.json()


def _held_out_cell(html: str, rater: str) -> str:
    """The dashboard's 'held out by telemetry' cell of a rater's row (the eighth column)."""
    row = re.search(rf'<tr id="rater-{rater}">(.*?)</tr>', html, re.S).group(1)
    cells = re.findall(r"<td>(.*?)</td>", row, re.S)
    return re.sub(r"<[^>]+>", "", cells[7]).strip()


def test_clean_typists_labels_reach_every_export_and_flood_nothing(db_url, app_for):
    seeded = seed(
        db_url,
        n_items=13,
        raters=2,
        kinds=["pairwise", "demonstration"],
        policy={"overlap_share": 1.0, "min_alpha": 0.0},
    )
    c = app_for(db_url)
    labelled = sum(
        len(_label_everything(c, seeded.tokens[r], demo=True)) for r in ("rater000", "rater001")
    )
    assert labelled == 26
    reviewer = _as(seeded.tokens["reviewer"])
    pending = c.get("/api/v1/projects/demo/demonstrations/pending", headers=reviewer).json()
    assert len(pending) == 2
    for d in pending:
        r = c.post(
            f"/api/v1/projects/demo/demonstrations/{d['judgment_id']}/review",
            json={"decision": "accepted", "note": "fine"},
            headers=reviewer,
        )
        assert r.status_code == 201, r.text

    sft = _export(c, seeded.admin_token, format="trl-sft")
    manifest = sft["manifest"]
    assert manifest["counts"]["rows_out"] == 2, "before: 0 rows, every label dropped"
    assert manifest["gates"]["telemetry"]["dropped"] == 0
    # 26 labels and the 2 reviewed revisions of the demonstrations (the author's telemetry kept)
    assert manifest["gates"]["telemetry"]["kept_weak"] == {"no_revision": 28}
    assert manifest["warnings"] == []
    pref = _export(
        c, seeded.admin_token, format="trl-preference", length_gate=None, length_unit="words"
    )
    stored = c.get("/api/v1/projects/demo/judgments", headers=reviewer).json()
    compared = {j["item_id"] for j in stored if j["kind"] == "pairwise"}
    assert len(compared) >= 11
    assert pref["manifest"]["counts"]["rows_out"] == len(compared), "every compared item"

    queues = c.get("/api/v1/projects/demo/review/queues", headers=reviewer).json()
    reasons = [r for e in queues["adjudication"] for r in e["reasons"]]
    assert not [r for r in reasons if "no_revision" in r], "before: 17 of 19 items queued"
    assert queues["telemetry"]["held_out"] == []
    weak = {w["rater"]: w for w in queues["telemetry"]["weak_by_rater"]}
    assert len(weak) == 2, "one row per rater, with their pattern"
    assert all(w["flags"] == {"no_revision": 13} and w["labels"] == 13 for w in weak.values())

    html = c.get("/admin/p/demo/dashboard", headers=reviewer).text
    assert "Held out by telemetry" in html and "Flagged labels" not in html
    assert _held_out_cell(html, "rater000") == "0" and _held_out_cell(html, "rater001") == "0"


def test_strong_evidence_is_held_out_with_its_evidence_until_a_reviewer_decides(db_url, app_for):
    seeded = seed(db_url, n_items=3, raters=2, policy={"overlap_share": 1.0, "min_alpha": 0.0})
    c = app_for(db_url)
    pasted = _label_everything(
        c, seeded.tokens["rater000"], demo=False, telemetry=PASTED_TEL, text=PASTED
    )
    _label_everything(c, seeded.tokens["rater001"], demo=False)
    reviewer = _as(seeded.tokens["reviewer"])
    options = {"format": "trl-preference", "length_gate": None, "length_unit": "words"}

    gate = _export(c, seeded.admin_token, **options)["manifest"]["gates"]["telemetry"]
    assert gate["dropped"] == 3 and gate["reasons"] == {"pasted_answer": 3}
    assert gate["kept_weak"] == {"no_revision": 3}

    queues = c.get("/api/v1/projects/demo/review/queues", headers=reviewer).json()
    held = {h["judgment_id"]: h for h in queues["telemetry"]["held_out"]}
    assert sorted(held) == sorted(pasted)
    first = held[pasted[0]]
    assert first["why"].startswith(f"pasted answer: {len(PASTED)} characters pasted")
    assert first["evidence"]["untrusted_paste"] == {"untrusted_paste_chars": len(PASTED)}
    item = c.get(f"/api/v1/projects/demo/review/items/{first['item_id']}", headers=reviewer)
    shown = {j["judgment_id"]: j["telemetry_assessment"] for j in item.json()["judgments"]}
    assert shown[pasted[0]]["held_out"] and shown[pasted[0]]["strong"]
    weak_ones = [a for pk, a in shown.items() if pk != pasted[0]]
    assert weak_ones and not weak_ones[0]["strong"] and "weak signal" in weak_ones[0]["why"]
    page = c.get(f"/p/demo/review/item/{first['item_id']}", headers=reviewer)
    assert page.status_code == 200 and "Held out of exports until you decide" in page.text
    assert f"untrusted_paste_chars {len(PASTED)}" in page.text, "the evidence, in numbers"
    html = c.get("/p/demo/review", headers=reviewer).text
    assert f'id="held-{pasted[0]}"' in html and "pasted answer" in html
    dash = c.get("/admin/p/demo/dashboard", headers=reviewer).text
    assert _held_out_cell(dash, "rater000") == "3" and _held_out_cell(dash, "rater001") == "0"

    url = "/api/v1/projects/demo/judgments/{}/telemetry-review"
    kept = c.post(
        url.format(pasted[0]), json={"decision": "keep", "note": "my draft"}, headers=reviewer
    )
    assert kept.status_code == 201, kept.text
    assert kept.json()["decision"] == "kept" and kept.json()["flags"] == [
        "paste_dominant",
        "untrusted_paste",
    ]
    refused = c.post(url.format(pasted[1]), json={"decision": "exclude"}, headers=reviewer)
    assert refused.status_code == 422 and "note" in refused.text
    excluded = c.post(
        url.format(pasted[1]),
        json={"decision": "exclude", "note": "a model's text"},
        headers=reviewer,
    )
    assert excluded.status_code == 201, excluded.text
    again = c.post(url.format(pasted[1]), json={"decision": "keep"}, headers=reviewer)
    assert again.status_code == 409

    queues = c.get("/api/v1/projects/demo/review/queues", headers=reviewer).json()
    assert [h["judgment_id"] for h in queues["telemetry"]["held_out"]] == [pasted[2]]
    assert queues["telemetry"]["decided"] == 2
    manifest = _export(c, seeded.admin_token, **options)["manifest"]
    assert manifest["gates"]["telemetry"]["reasons"] == {"pasted_answer": 1}
    assert manifest["gates"]["telemetry"]["kept_by_reviewer"] == {"pasted_answer": 1}
    assert manifest["gates"]["excluded"]["dropped"] == 1
    events = c.get("/api/v1/audit", headers=_as(seeded.admin_token)).json()["events"]
    actions = [e["action"] for e in events]
    assert "judgment.telemetry_kept" in actions and "judgment.telemetry_excluded" in actions


def test_the_web_export_offers_what_the_cli_offers(db_url, app_for):
    policy = {"overlap_share": 1.0, "overlap_k": 3, "min_alpha": 0.9}
    seeded = seed(db_url, n_items=3, raters=3, policy=policy)
    c = app_for(db_url)
    # on every item: rater000 (pasted answers, held out) and rater002 prefer a, rater001 b
    _label_everything(c, seeded.tokens["rater000"], demo=False, telemetry=PASTED_TEL, text=PASTED)
    _label_everything(c, seeded.tokens["rater001"], demo=False, prefer="b")
    _label_everything(c, seeded.tokens["rater002"], demo=False)
    admin = _as(seeded.admin_token)
    page = c.get("/admin/p/demo/export", headers=admin).text
    for name in (
        "include_flagged",
        "force",
        "min_alpha",
        "drop_disagreement",
        "file_format",
        "conversational",
        "require_reference",
        "data_source",
    ):
        assert f'name="{name}"' in page, name
    base = {"format": "trl-preference", "length_gate": None, "length_unit": "words"}
    refused = c.post("/api/v1/projects/demo/exports", json=base, headers=admin)
    assert refused.status_code == 422 and "'force' option" in refused.text
    held = _export(c, seeded.admin_token, **base, force=True)["manifest"]
    assert held["agreement"]["forced"] is True
    assert held["gates"]["telemetry"]["dropped"] == 3, "rater000's pasted answers"
    assert held["gates"]["aggregation"]["dropped"] == 3, "one vote each way is no majority"
    (zero,) = held["warnings"]
    assert held["counts"]["rows_out"] == 0 and zero.startswith("This export has 0 rows: ")
    assert "gate telemetry dropped 3 (pasted_answer 3)" in zero
    assert "gate aggregation dropped 3 (no-majority 3)" in zero
    assert "include-flagged" in zero
    flagged = _export(c, seeded.admin_token, **base, force=True, include_flagged=True)
    m = flagged["manifest"]
    assert m["gates"]["telemetry"]["include_flagged"] is True
    assert m["gates"]["telemetry"]["dropped"] == 0 and m["counts"]["rows_out"] == 3
    split = _export(
        c, seeded.admin_token, **base, force=True, include_flagged=True, drop_disagreement=0.75
    )
    assert split["manifest"]["gates"]["disagreement"]["dropped"] == 3, "2 of 3 is below 0.75"
    floor = _export(
        c,
        seeded.admin_token,
        **base,
        min_alpha=0.0,
        include_flagged=True,
        force=True,
        file_format="parquet",
        conversational=True,
    )
    assert "train.parquet" in floor["manifest"]["files"]
    assert floor["manifest"]["options"]["file_format"] == "parquet"
    assert floor["manifest"]["agreement"]["min_alpha"] == 0.0
    assert floor["manifest"]["conversational"] is True
    verl = c.post(
        "/api/v1/projects/demo/exports", json={**base, "require_reference": True}, headers=admin
    )
    assert verl.status_code == 422 and "require_reference" in verl.text
    verl = _export(c, seeded.admin_token, format="verl", data_source="probe", force=True)
    assert verl["manifest"]["options"]["params"]["data_source"] == "probe"


def test_a_zero_row_export_says_so_on_the_web(db_url, app_for):
    seeded = seed(
        db_url,
        n_items=2,
        raters=1,
        kinds=["pairwise", "demonstration"],
        policy={"overlap_share": 0.0, "min_alpha": 0.0},
    )
    c = app_for(db_url)
    _label_everything(c, seeded.tokens["rater000"], demo=True)
    out = _export(c, seeded.admin_token, format="trl-sft")  # the demonstration is pending
    assert out["manifest"]["counts"]["rows_out"] == 0
    (warning,) = out["manifest"]["warnings"]
    assert warning.startswith("This export has 0 rows: gate demonstration_status dropped 1")
    assert f"WARNING: {warning}" in out["summary"]
    page = c.get("/admin/p/demo/export", headers=_as(seeded.admin_token)).text
    assert "WARNING: This export has 0 rows" in page, "the past exports list says it too"
