"""Issue 29 §5: a reference two experts wrote independently and disagree on goes to the
adjudication queue with both answers; a reviewer who is neither author settles it; the item's
reference, its provenance and the audit log say who did, and the verl export takes the item
once (and only once) the reference is settled. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from .conftest import pairwise_item, seed


def _item(i: int, first: str, second: str) -> dict:
    item = pairwise_item(i)
    item["reference"] = first
    item["metadata"] = {
        "verifiable": "math",
        "verify_task": {"kind": "math", "answer": first},
        "reference_provenance": {
            "require_two": True,
            "authors": [
                {"author": "expert1", "answer": first},
                {"author": "reviewer", "answer": second},
            ],
        },
    }
    return item


@pytest.fixture
def client(db_url, tmp_path):
    from preflab.server.app import ServerConfig, create_app

    # item 0: the experts disagree; item 1: they agree as math (7/12 and \frac{7}{12})
    seeded = seed(db_url, items=[_item(0, "7/12", "5/12"), _item(1, "7/12", r"\frac{7}{12}")])
    config = ServerConfig(db_url=db_url, exports_dir=tmp_path / "exports", pool_size=2)
    with TestClient(create_app(config=config)) as c:
        c.seeded = seeded  # type: ignore[attr-defined]
        yield c


def _as(c: TestClient, who: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {c.seeded.tokens[who] if who != 'root' else c.seeded.admin_token}"
    }  # type: ignore[attr-defined]


def _queue(c: TestClient) -> dict[str, list[str]]:
    r = c.get("/api/v1/projects/demo/review/queues", headers=_as(c, "padmin"))
    assert r.status_code == 200, r.text
    return {e["item_id"]: e["reasons"] for e in r.json()["adjudication"]}


URL = "/api/v1/projects/demo/items/{}/reference/adjudicate"


def test_a_disputed_reference_is_queued_then_settled_by_someone_else(client):
    queue = _queue(client)
    assert any("references disagree: '7/12' vs '5/12'" in r for r in queue["item-00000"])
    assert "item-00001" not in queue  # 7/12 and \frac{7}{12} agree as math

    # an author of one of the answers cannot settle the dispute
    r = client.post(
        URL.format("item-00000"),
        json={"answer": "5/12", "note": "mine is right"},
        headers=_as(client, "reviewer"),
    )
    assert r.status_code == 403, r.text
    # a rater may not adjudicate at all
    r = client.post(
        URL.format("item-00000"),
        json={"answer": "7/12", "note": "x"},
        headers=_as(client, "rater000"),
    )
    assert r.status_code == 403, r.text
    # an agreed reference is not in dispute
    r = client.post(
        URL.format("item-00001"), json={"answer": "1", "note": "x"}, headers=_as(client, "padmin")
    )
    assert r.status_code == 409, r.text

    r = client.post(
        URL.format("item-00000"),
        json={"answer": "7/12", "note": "3/12 + 4/12; expert 2 dropped a term"},
        headers=_as(client, "padmin"),
    )
    assert r.status_code == 200, r.text
    assert r.json() == {
        "item_id": "item-00000",
        "reference": "7/12",
        "adjudicator": "padmin",
        "status": "adjudicated",
    }
    assert not any("references disagree" in r for r in _queue(client).get("item-00000", []))
    audit = client.get("/api/v1/audit", headers=_as(client, "root"))
    if audit.status_code == 200:  # the site audit API, where the server has one
        assert "item.reference_adjudicated" in audit.text


def test_the_verl_export_takes_the_item_once_the_reference_is_settled(client, db_url, tmp_path):
    from preflab.io.export import ExportOptions, export_project
    from preflab.store import db

    def exported() -> set[str]:
        import json

        import pyarrow.parquet as pq

        out = tmp_path / f"verl-{len(list(tmp_path.glob('verl-*')))}"
        engine = db.open_db(db_url)
        export_project(engine, "demo", ExportOptions(format="verl", out=out, file_format="parquet"))
        engine.dispose()
        [data] = out.glob("*.parquet")
        left_out = json.loads((out / "manifest.json").read_text())["format_notes"]
        return {r["extra_info"]["item_id"] for r in pq.read_table(data).to_pylist()}, left_out

    rows, notes = exported()
    assert "item-00000" not in rows and "item-00001" in rows, notes
    r = client.post(
        URL.format("item-00000"),
        json={"answer": "7/12", "note": "settled"},
        headers=_as(client, "padmin"),
    )
    assert r.status_code == 200, r.text
    rows, _ = exported()
    assert {"item-00000", "item-00001"} <= rows
