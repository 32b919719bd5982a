"""Issue 27 §2: the web app never loads a project.

The data browser pages by item pk with its filters in SQL and computes a row's facts for the
page's items only; on small projects every page walk equals the browser it replaced
(:mod:`browse_oracle`). The dashboard's statistics come from the quality snapshot, computed in a
separate process (``python -m preflab.server.snapshot``), started by the page when it is missing
or stale; the figures it shows equal the quality report's on the same project.
"""

from __future__ import annotations

import random
import re
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from preflab.io.quality_source import load_for_report
from preflab.quality.report import build_report
from preflab.schema import PairwiseJudgment
from preflab.server import snapshot
from preflab.server.database import Database
from preflab.server.permissions import ProjectRef
from preflab.server.services import browse, review
from preflab.store import repo
from preflab.store.models import JudgmentRow, Rater
from preflab.store.server_models import QualitySnapshot, RaterStatus, User

from .browse_oracle import browse_items
from .conftest import pairwise_item, seed

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
COPIED = "I picked this one because it is clearly more complete and accurate overall, as always."
PASTED = "The first answer is better because " + "it is accurate and complete. " * 30
PASTED_TEL = {
    "typed_chars": 0,
    "pasted_chars": len(PASTED),
    "paste_count": 1,
    "untrusted_paste_chars": len(PASTED),
    "active_ms": 60_000,
    "focus_losses": 1,
}
DOMAINS = [[], ["math"], ["code", "math"], ["law"]]
#: Rationales drawn from these words are far apart (no near duplicate unless copied).
WORDS = (
    "accurate brief clear concise correct cites detail direct example explains factual fluent "
    "friendly grounded helpful honest logical neat numbers on-topic organised plain polite "
    "precise relevant safe simple sourced specific steps structured succinct thorough tidy "
    "useful valid verbose vague wrong missing confused rambling outdated partial risky sloppy "
    "terse unclear unsafe hedged generic repetitive offtopic"
).split()


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _item(i: int) -> dict:
    """Answer B longer by a few words on two items in three (the length panel has pairs)."""
    item = pairwise_item(i, domains=DOMAINS[i % 4])
    item["candidates"][1]["text"] += " with more words" * (i % 3)
    return item


def _judgment(i: int, rater: int, *, minutes: int = 0, **extra: object) -> PairwiseJudgment:
    """Rater ``rater`` on item ``i``: disagreement on every third item, a copied rationale on
    every fifth (near duplicates across items), a pasted rationale of rater000 on every seventh."""
    winner = ("a" if rater % 2 else "b") if i % 3 == 0 else "a"
    rationale = " ".join(random.Random(i * 100 + rater).sample(WORDS, 12))
    tel = None
    if i % 5 == 0:
        rationale = COPIED
    if i % 7 == 0 and rater == 0:
        rationale, tel = PASTED, PASTED_TEL
    at = T0 + timedelta(days=i % 4, minutes=rater * 3 + minutes)
    prov = {
        "rater_id": f"rater{rater:03d}",
        "started_at": at - timedelta(seconds=20 + 7 * rater + i),
        "submitted_at": at,
    }
    if tel:
        prov["telemetry"] = tel
    prov.update(extra)
    return PairwiseJudgment(
        item_id=f"item-{i:05d}",
        shown_order=("a", "b"),
        winner=winner,
        strength=1 + (i + rater) % 3,
        rationale=rationale,
        provenance=prov,
    )


def _project(url: str, n_items: int = 31, raters: int = 4):
    """Items with domains (a few never labelled), each labelled by two to four raters; one label
    excluded, one item adjudicated (review pass 2)."""
    items = [_item(i) for i in range(n_items)]
    seeded = seed(url, n_items=0, items=items, raters=raters)
    db = Database(url, pool_size=2, max_overflow=2)
    with db.writing() as s:
        project = repo.get_project(s, "demo")
        for user in s.scalars(select(User).where(User.username.like("rater%"))):
            s.add(RaterStatus(project_pk=project.pk, user_pk=user.pk, status="qualified"))
        for i in range(n_items - 3):
            for r in range(2 + i % (raters - 1)):
                repo.add_judgment(s, project, _judgment(i, r))
        repo.add_judgment(s, project, _judgment(3, 0, rater_id="reviewer", review_pass=2))
        first = s.scalar(select(func.min(JudgmentRow.pk)))
        s.execute(update(JudgmentRow).where(JudgmentRow.pk == first).values(excluded=True))
    db.dispose()
    return seeded


def _hash_prefix(s, rater_key: str) -> str:
    """What a blind project (the default) shows for a rater, and its rater filter takes."""
    return s.scalar(select(Rater.rater_hash).where(Rater.rater_key == rater_key))[:24]


def _ref(db: Database, name: str = "demo") -> ProjectRef:
    with db.reading() as s:
        p = repo.get_project(s, name)
        return ProjectRef(
            pk=p.pk,
            name=p.name,
            title=p.title,
            kinds=p.kinds,
            settings=p.settings,
            rubric_key=None,
            rubric_version=None,
        )


FILTERS = [
    {},
    {"kind": "pairwise"},
    {"kind": "rubric"},
    {"rater": "rater002"},
    {"rater": "nobody"},
    {"domain": "math"},
    {"domain": "law", "kind": "pairwise"},
    {"flagged": True},
    {"disagreement": True},
    {"disagreement": True, "domain": "math"},
    {"q": "question 1"},
    {"q": "ANSWER b TO 2"},
    {"q": "item-0001"},
    {"q": "%"},
    {"q": "é"},
    {"flagged": True, "q": "question", "kind": "pairwise"},
]


@pytest.mark.slow
def test_keyset_pages_equal_the_old_browser(db_url):
    _project(db_url)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    with db.reading() as s:
        dups = set(snapshot.rater_activity(s, project)["near_duplicate_pks"])
        assert dups, "the copied rationales are near duplicates across items"
        nonempty = 0
        hashed = _hash_prefix(s, "rater002")
        for filters in [*FILTERS, {"rater": hashed}, {"rater": hashed, "flagged": True}]:
            old = browse_items(s, project, **filters, limit=10**6)
            nonempty += bool(old["items"])
            f = browse.Filters(**filters)
            for limit in (1, 4, 7, 50):
                walked, after, pages = [], 0, 0
                while True:
                    page = browse.browse(
                        s, project, f, after=after, limit=limit, near_duplicates=dups, budget=9
                    )
                    assert len(page["items"]) <= limit
                    assert page["total"] == (None if f.scanning else old["total"])
                    walked += page["items"]
                    pages += 1
                    if page["next_after"] is None:
                        break
                    assert page["next_after"] > after
                    after = page["next_after"]
                assert walked == old["items"], (filters, limit)
                if not f.scanning:
                    assert pages == max(1, -(-old["total"] // limit))
            # offset (older links) skips matches, in SQL or in the scan
            for offset in (0, 3, 10):
                page = browse.browse(s, project, f, offset=offset, limit=5, near_duplicates=dups)
                assert page["items"] == old["items"][offset : offset + 5], (filters, offset)
        assert nonempty >= 12, "most filters find items: the comparison compares something"
    db.dispose()


@pytest.mark.slow
def test_the_browse_route_and_data_page_read_only_the_page(db_url, app_for, monkeypatch):
    seeded = _project(db_url)
    monkeypatch.setenv("PREFLAB_SNAPSHOT_INLINE_LABELS", "0")
    started: list[str] = []
    monkeypatch.setattr(snapshot, "spawn", lambda url, name: started.append(name))

    def whole_project(*_a, **_k):
        raise AssertionError("a page loaded every judgment of the project")

    monkeypatch.setattr(review, "active_judgments", whole_project)
    monkeypatch.setattr(repo, "iter_items_with_judgments", whole_project)
    c = app_for(db_url)
    h = _as(seeded.tokens["reviewer"])
    db = Database(db_url, pool_size=2, max_overflow=2)
    walked, after = [], 0
    while True:
        r = c.get(f"/api/v1/projects/demo/browse?after={after}&limit=8&kind=pairwise", headers=h)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["total"] == 28  # the items with labels
        walked += [it["item_id"] for it in body["items"]]
        if body["next_after"] is None:
            break
        after = body["next_after"]
    assert walked == [f"item-{i:05d}" for i in range(28)]
    old_style = c.get("/api/v1/projects/demo/browse?offset=26&limit=8", headers=h).json()
    assert [it["item_id"] for it in old_style["items"]] == [f"item-{i:05d}" for i in range(26, 31)]
    with db.reading() as s:
        hashed = _hash_prefix(s, "rater003")
    db.dispose()
    page = c.get(f"/admin/p/demo/data?rater={hashed}", headers=h)
    assert page.status_code == 200
    assert '<h2 id="data-count">9 items</h2>' in page.text  # items 2, 5, ..., 26
    assert page.text.count("<tr data-item=") == 9
    scan = c.get("/admin/p/demo/data?flagged=true", headers=h)
    assert scan.status_code == 200 and 'id="data-scan"' in scan.text
    assert "(being computed)" in scan.text, "no snapshot yet: the page says so"
    assert started == ["demo"], "one refresh started for the near-duplicate flags"
    dash = c.get("/admin/p/demo/dashboard", headers=h)
    assert dash.status_code == 200
    assert "Computing the statistics (started at" in dash.text
    assert started == ["demo"], "the claim is held: no second process"


def _wait_for_snapshot(db: Database, project_pk: int, since: datetime | None) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        with db.reading() as s:
            row = s.scalar(select(QualitySnapshot).where(QualitySnapshot.project_pk == project_pk))
            assert row is None or row.error is None, row.error
            done = row is not None and row.computed_at is not None and row.running_since is None
            if done and (since is None or snapshot._as_utc(row.computed_at) > since):
                return
        time.sleep(0.5)
    raise AssertionError("the snapshot process did not finish in 240 s")


def _report_figures(url: str) -> dict:
    judgments, items, batches = load_for_report("demo", url)
    return build_report(judgments, items=items, batches=batches)


def _check_against_report(html: str, report: dict) -> None:
    """The dashboard's agreement rows, consensus, position and length figures are the report's."""
    for a in report["agreement"]:
        row = f"<tr><td>{a['batch']}</td><td>{a['kind']}</td><td>{a['dimension']}</td>"
        assert row in html, row
        start = html.index(row)
        cells = re.findall(r"<td>(.*?)</td>", html[start : start + 400], re.S)
        assert cells[3] == ("—" if a["alpha"] is None else f"{a['alpha']:.3f}")
        assert cells[4] == (
            "[—, —]" if a["alpha_low"] is None else f"[{a['alpha_low']:.3f}, {a['alpha_high']:.3f}]"
        )
        assert cells[5] == str(a["n_labels"])
    for rater, figures in report["raters"].items():
        if figures.get("consensus_n"):
            cell = f'{figures["consensus_agreement"] * 100:.0f}% <span class="muted small">n={figures["consensus_n"]}</span>'
            if f'id="rater-{rater}"' in html:
                assert cell in html.split(f'id="rater-{rater}"', 1)[1].split("</tr>", 1)[0]
    pos = report["position_bias"]["overall"]
    assert f"Overall p = {pos['p_value']:.3g}" in html
    length = report["length_bias"]
    assert f"Chosen answer longer in {length['share_chosen_longer']:.3f} of" in html
    assert f"{length['n_differ']} decided pairs" in re.sub(r"\s+", " ", html)


@pytest.mark.slow
def test_the_dashboard_shows_the_snapshot_and_refreshes_it_when_stale(db_url, app_for, monkeypatch):
    seeded = _project(db_url)
    monkeypatch.setenv("PREFLAB_SNAPSHOT_INLINE_LABELS", "0")
    monkeypatch.setenv("PREFLAB_SNAPSHOT_MAX_AGE_S", "0")

    def whole_project(*_a, **_k):
        raise AssertionError("the dashboard loaded every judgment of the project")

    monkeypatch.setattr(review, "active_judgments", whole_project)
    c = app_for(db_url)
    h = _as(seeded.tokens["reviewer"])
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)

    first = c.get("/admin/p/demo/dashboard", headers=h).text
    assert "Computing the statistics (started at" in first
    assert "Krippendorff" not in first, "no statistics drawn before there are any"
    _wait_for_snapshot(db, project.pk, None)
    with db.reading() as s:
        labels = snapshot.watermark(s, project.pk).labels
    shown = re.sub(r"\s+", " ", c.get("/admin/p/demo/dashboard", headers=h).text)
    assert f"from {labels} judgments; 0 new since." in shown
    _check_against_report(shown, _report_figures(db_url))
    held = re.search(r'<tr id="rater-rater000">(.*?)</tr>', shown).group(1)
    held_cell = re.findall(r"<td>(.*?)</td>", held)[7]
    assert held_cell.endswith(">3</a>"), "items 7, 14, 21 pasted (item 0's label is excluded)"

    # new labels: the page shows the old figures, how many labels came since, and refreshes
    with db.writing() as s:
        p = repo.get_project(s, "demo")
        for i in range(28, 31):
            for r in range(3):
                repo.add_judgment(s, p, _judgment(i, r, minutes=1))
    with db.reading() as s:
        computed = s.scalar(select(QualitySnapshot.computed_at))
    stale = re.sub(r"\s+", " ", c.get("/admin/p/demo/dashboard", headers=h).text)
    assert f"from {labels} judgments; 9 new since; refreshing… (started at" in stale
    _wait_for_snapshot(db, project.pk, snapshot._as_utc(computed))
    fresh = re.sub(r"\s+", " ", c.get("/admin/p/demo/dashboard", headers=h).text)
    assert f"from {labels + 9} judgments; 0 new since." in fresh
    _check_against_report(fresh, _report_figures(db_url))
    db.dispose()


def test_a_claim_is_taken_once_and_a_dead_one_expires(db_url):
    seed(db_url, n_items=1)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    with db.writing() as s:
        assert snapshot.claim(s, project.pk)
    with db.writing() as s:
        assert not snapshot.claim(s, project.pk), "a live claim holds"
        s.execute(
            update(QualitySnapshot).values(
                running_since=datetime.now(UTC) - snapshot.CLAIM_TIMEOUT - timedelta(minutes=1)
            )
        )
    with db.writing() as s:
        assert snapshot.claim(s, project.pk), "a claim past its timeout is a dead run's"
    with db.writing() as s:
        assert snapshot.claim(s, project.pk, force=True)
    with db.reading() as s:
        assert s.scalar(select(func.count()).select_from(QualitySnapshot)) == 1
    db.dispose()


def test_the_snapshot_command_refuses_a_held_claim_and_records_a_failure(db_url, capsys):
    seed(db_url, n_items=2)
    db = Database(db_url, pool_size=2, max_overflow=2)
    project = _ref(db)
    with db.writing() as s:
        assert snapshot.claim(s, project.pk)
    assert snapshot.main(["demo", "--db", db_url]) == 1
    assert "being computed already" in capsys.readouterr().err
    assert snapshot.main(["demo", "--db", db_url, "--force"]) == 0
    with db.reading() as s:
        row = s.scalar(select(QualitySnapshot))
        assert row.running_since is None and row.computed_at is not None and row.labels == 0
    assert snapshot.main(["nope", "--db", db_url]) == 1
    db.dispose()
