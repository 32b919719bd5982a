"""Issue 27 item 2: the review page and ``GET .../review/queues`` read one keyset page of the
review queues. A large project's queues are computed by the quality snapshot's process and stored
(``review_queue_entries``); a small one's are computed in the request. Either way, every page
walked with ``next`` and put end to end is the queues of the whole project loaded at once
(:mod:`review_oracle`), on both databases; a stored page re-checks its items live; no request
computes a large project's queues."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from sqlalchemy import select, update

from preflab.server import snapshot
from preflab.server.auth import create_api_token
from preflab.server.database import Database
from preflab.server.errors import ServiceError
from preflab.server.services import review, review_pages
from preflab.store import repo
from preflab.store.models import Project, utcnow
from preflab.store.server_models import ReviewRequest, User

from . import review_oracle
from .test_browse_snapshot import _as, _judgment, _ref
from .test_review_queues_oracle import _project

SHARE = 0.5


def _setup(url: str) -> Database:
    """The oracle test's project (every reason present), spot review drawn at :data:`SHARE`."""
    _project(url)
    db = Database(url, pool_size=2, max_overflow=2)
    with db.writing() as s:
        p = repo.get_project(s, "demo")
        settings = dict(p.settings)
        settings["policy"] = {**settings.get("policy", {}), "spot_review_share": SHARE}
        s.execute(update(Project).where(Project.pk == p.pk).values(settings=settings))
    return db


def _walk(db: Database, limit: int, share: float | None = None) -> tuple[dict, list[dict]]:
    """Every page from the first, following ``next``: the lists put end to end, and the pages."""
    project = _ref(db)
    pages = [review_pages.queues_page(db, project, limit=limit, share=share)]
    while pages[-1]["page"]["next"] is not None:
        after = pages[-1]["page"]["next"]
        pages.append(review_pages.queues_page(db, project, after=after, limit=limit, share=share))
        assert len(pages) < 200, "the walk ends"
    whole: dict[str, Any] = {
        "adjudication": [],
        "spot": [],
        "spot_share": pages[0]["spot_share"],
        "demonstrations": [],
        "telemetry": {"held_out": [], "weak_by_rater": [], "decided": 0},
    }
    for p in pages:
        for key in ("adjudication", "spot", "demonstrations"):
            assert len(p[key]) <= limit
            whole[key] += p[key]
        for key in ("held_out", "weak_by_rater"):
            assert len(p["telemetry"][key]) <= limit
            whole["telemetry"][key] += p["telemetry"][key]
        whole["telemetry"]["decided"] = p["telemetry"]["decided"]
    return whole, pages


def _oracle(db: Database, share: float | None = None) -> dict:
    with db.reading() as s:
        return review_oracle.review_queues(s, _ref(db), share=share)


def _check_counts(page: dict, whole: dict) -> None:
    counts = page["page"]["counts"]
    assert counts["adjudication"] == len(whole["adjudication"])
    assert counts["adjudication_open"] == sum(
        1 for e in whole["adjudication"] if not e["adjudicated"]
    )
    assert counts["spot"] == len(whole["spot"])
    assert counts["held_out"] == len(whole["telemetry"]["held_out"])
    assert counts["weak_by_rater"] == len(whole["telemetry"]["weak_by_rater"])


@pytest.mark.slow
def test_pages_end_to_end_equal_the_whole_project_queues(db_url, monkeypatch):
    db = _setup(db_url)
    started: list[str] = []
    monkeypatch.setattr(snapshot, "spawn", lambda url, name: started.append(name))
    # a small project: computed in the request, paged the same way
    old = _oracle(db)
    for limit in (1, 3, 1000):
        whole, pages = _walk(db, limit)
        assert whole == old, limit
        assert {p["page"]["status"] for p in pages} == {"current"}
        _check_counts(pages[0], whole)
    assert started == []
    # a large one: nothing stored yet, so the answer says "computing" and a refresh starts
    monkeypatch.setenv("PREFLAB_SNAPSHOT_INLINE_LABELS", "0")

    def whole_project(*_a: object, **_k: object) -> None:
        raise AssertionError("a request computed the whole queue")

    with monkeypatch.context() as m:
        m.setattr(review, "review_queues", whole_project)
        first = review_pages.queues_page(db, _ref(db))
        assert first["page"]["status"] == "computing" and first["page"]["counts"] is None
        assert first["adjudication"] == [] and first["page"]["next"] is None
        assert started == ["demo"]
    snapshot.refresh(db_url, "demo", claimed=True)
    with monkeypatch.context() as m:
        m.setattr(review, "review_queues", whole_project)
        for share in (None, 0.0, 0.35, SHARE):
            old = _oracle(db, share)
            assert old["adjudication"] and old["telemetry"]["held_out"]
            for limit in (1, 4, 1000):
                whole, pages = _walk(db, limit, share)
                assert whole == old, (share, limit)
                # the same order inside the entries too (a rater's flags, a label's evidence)
                assert orjson.dumps(whole) == orjson.dumps(old), (share, limit)
                assert {p["page"]["status"] for p in pages} == {"stored"}
                _check_counts(pages[0], whole)
            if share:
                assert old["spot"], "the spot comparison compares something"
        # previous: from the second page back to the first
        _, pages = _walk(db, 3)
        assert len(pages) >= 3 and pages[0]["page"]["previous"] is None
        back = review_pages.queues_page(db, _ref(db), after=pages[1]["page"]["previous"], limit=3)
        assert {k: back[k] for k in ("adjudication", "spot", "telemetry")} == {
            k: pages[0][k] for k in ("adjudication", "spot", "telemetry")
        }
        back = review_pages.queues_page(db, _ref(db), after=pages[2]["page"]["previous"], limit=3)
        assert back["adjudication"] == pages[1]["adjudication"]
        # a larger share than the snapshot drew cannot be answered from it
        with pytest.raises(ServiceError) as e:
            review_pages.queues_page(db, _ref(db), share=0.9)
        assert e.value.status == 422 and "spot_review_share" in e.value.message
    assert started == ["demo"], "a current snapshot starts no refresh"
    db.dispose()


def _adjudicate(db: Database, item: int) -> None:
    with db.writing() as s:
        project = repo.get_project(s, "demo")
        repo.add_judgment(s, project, _judgment(item, 0, rater_id="reviewer", review_pass=2))


@pytest.mark.slow
def test_a_stored_page_rechecks_its_items_and_goes_stale(db_url, monkeypatch):
    db = _setup(db_url)
    monkeypatch.setenv("PREFLAB_SNAPSHOT_INLINE_LABELS", "0")
    started: list[str] = []
    monkeypatch.setattr(snapshot, "spawn", lambda url, name: started.append(name))
    snapshot.refresh(db_url, "demo")
    project = _ref(db)
    page = review_pages.queues_page(db, project, limit=5)
    assert page["page"]["status"] == "stored" and page["page"]["labels_since"] == 0
    open_entry = next(e for e in page["adjudication"] if not e["adjudicated"])
    held = page["telemetry"]["held_out"][0]
    # an item adjudicated and a held-out label decided since the snapshot
    _adjudicate(db, int(open_entry["item_id"].split("-")[1]))
    with db.writing() as s:
        admin = s.scalar(select(User.pk).order_by(User.pk))
        s.add(
            ReviewRequest(
                project_pk=project.pk,
                judgment_pk=held["judgment_id"],
                reviewer_pk=admin,
                status="kept",
                note="fine",
                resolved_at=utcnow(),
            )
        )
    again = review_pages.queues_page(db, project, limit=5)
    assert again["page"]["computed_at"] == page["page"]["computed_at"]
    assert again["page"]["labels_since"] == 1
    assert [e["item_id"] for e in again["adjudication"]] == [
        e["item_id"] for e in page["adjudication"]
    ], "the same place: the order is redone at the next refresh"
    shown = {e["item_id"]: e for e in again["adjudication"]}
    assert shown[open_entry["item_id"]]["adjudicated"] is True
    assert held["judgment_id"] not in [h["judgment_id"] for h in again["telemetry"]["held_out"]]
    assert started == [], "younger than PREFLAB_SNAPSHOT_MAX_AGE_S: no refresh"
    # the review item page's "next item" skips the item adjudicated since (the queue's first)
    first_open = next(e["item_id"] for e in _oracle(db)["adjudication"] if not e["adjudicated"])
    assert first_open != open_entry["item_id"]
    assert review_pages.next_open_item(db, project, "nothing") == first_open
    assert review_pages.next_open_item(db, project, first_open) not in (first_open, None)
    # stale (older than the max age, labels changed): a refresh starts, the stored page is shown
    monkeypatch.setenv("PREFLAB_SNAPSHOT_MAX_AGE_S", "0")
    stale = review_pages.queues_page(db, project, limit=5)
    assert started == ["demo"] and stale["page"]["status"] == "stored"
    assert stale["page"]["refreshing_since"] is not None
    cursor = stale["page"]["next"]
    assert cursor is not None
    # the refresh: the item moves to the adjudicated end, an old cursor is refused
    snapshot.refresh(db_url, "demo", claimed=True)
    fresh, _ = _walk(db, 1000)
    assert fresh == _oracle(db)
    assert fresh["adjudication"][-1]["adjudicated"]
    with pytest.raises(ServiceError) as e:
        review_pages.queues_page(db, project, after=cursor, limit=5)
    assert e.value.status == 409 and "start again from the first page" in e.value.message
    db.dispose()


def _token(db: Database, username: str) -> str:
    with db.writing() as s:
        user = s.scalar(select(User).where(User.username == username))
        token, _ = create_api_token(s, user, name="pages")
    return token


@pytest.mark.slow
@pytest.mark.parametrize("stored", [False, True])
def test_the_api_and_the_page_walk_the_pages(db_url, app_for, monkeypatch, stored):
    db = _setup(db_url)
    started: list[str] = []
    monkeypatch.setattr(snapshot, "spawn", lambda url, name: started.append(name))
    if stored:
        monkeypatch.setenv("PREFLAB_SNAPSHOT_INLINE_LABELS", "0")
        snapshot.refresh(db_url, "demo")
    c = app_for(db_url)
    h = _as(_token(db, "reviewer"))
    api = "/api/v1/projects/demo/review/queues"
    old = _oracle(db)
    walked, after = [], None
    while True:
        r = c.get(api, params={"limit": 2, **({"after": after} if after else {})}, headers=h)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["page"]["status"] == ("stored" if stored else "current")
        assert body["page"]["limit"] == 2 and body["page"]["computed_at"]
        walked += body["adjudication"]
        after = body["page"]["next"]
        if after is None:
            break
    assert walked == old["adjudication"]
    default = c.get(api, headers=h).json()
    assert default["page"]["limit"] == review_pages.DEFAULT_LIMIT
    assert default["adjudication"] == old["adjudication"][: review_pages.DEFAULT_LIMIT]
    # bad cursors and limits: a clear 422 naming the parameter
    for bad in ("x", "1.2.3", "0.-5.0.0.0.0", "0." + ".".join(["1"] * 9)):
        r = c.get(api, params={"after": bad}, headers=h)
        assert r.status_code == 422, (bad, r.text)
        assert "after" in r.text and "cursor" in r.text
    for limit in (0, review_pages.MAX_LIMIT + 1):
        assert c.get(api, params={"limit": limit}, headers=h).status_code == 422
    # the role check holds with the new parameters
    for who, status in (("rater000", 403), ("outsider", 404)):  # (a non-member: no project)
        params = {"limit": 2, "after": "0.-1.-1.-1.-1.-1"}
        r = c.get(api, params=params, headers=_as(_token(db, who)))
        assert r.status_code == status, (who, r.text)
    assert c.get(api, params={"limit": 2}).status_code == 401
    # the HTML page: one page of each queue, with working next / previous links
    html = c.get("/p/demo/review?limit=2", headers=h).text
    assert html.count('href="/p/demo/review/item/') >= 2
    assert 'rel="prev"' not in html
    nxt = re.search(r'<a rel="next" href="([^"]+)"', html)
    assert nxt is not None
    second = c.get(nxt.group(1).replace("&amp;", "&"), headers=h)
    assert second.status_code == 200
    rows = re.findall(r'<td><a href="/p/demo/review/item/([^"]+)">', second.text)
    assert rows[:2] == [e["item_id"] for e in old["adjudication"][2:4]]
    prev = re.search(r'<a rel="prev" href="([^"]+)"', second.text)
    assert prev is not None
    first = c.get(prev.group(1).replace("&amp;", "&"), headers=h).text
    assert re.findall(r'<td><a href="/p/demo/review/item/([^"]+)">', first)[:2] == [
        e["item_id"] for e in old["adjudication"][:2]
    ]
    open_n = sum(1 for e in old["adjudication"] if not e["adjudicated"])
    assert f"({open_n} open)" in html, "the count is the whole queue's, not the page's"
    assert ("Queues as of" in html) is stored
    bad = c.get("/p/demo/review?after=nonsense", headers=h)
    assert bad.status_code == 422
    assert started == []
    db.dispose()
