"""Issue 11: no server error page is ever bare. An unhandled exception gives a browser a styled
page with a way back, an API client a JSON problem, and the log the traceback."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


@pytest.fixture
def client(tmp_path):
    from preflab.server.app import create_app

    app = create_app(f"sqlite:///{tmp_path / 'web.db'}", init=True)

    @app.get("/p/{project}/boom")
    def boom(project: str) -> None:
        raise RuntimeError("a bug in a page handler")

    @app.get("/api/v1/boom")
    def api_boom() -> None:
        raise RuntimeError("a bug in an API handler")

    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def test_a_browser_gets_a_styled_error_page_with_a_way_back(client, caplog):
    with caplog.at_level(logging.ERROR, logger="preflab.server"):
        r = client.get("/p/demo/boom", headers={"Accept": "text/html,application/xhtml+xml"})
    assert r.status_code == 500
    assert r.headers["content-type"].startswith("text/html")
    assert '<link rel="stylesheet"' in r.text, "styled like every other page"
    assert 'href="/"' in r.text and 'href="/p/demo"' in r.text, "a way back: home and the project"
    assert "has been logged" in r.text
    assert "a bug in a page handler" not in r.text, "no internals shown to the user"
    logged = [rec for rec in caplog.records if "GET /p/demo/boom" in rec.getMessage()]
    assert logged and logged[0].exc_info[1].args == ("a bug in a page handler",)


def test_an_api_client_gets_a_json_problem(client):
    r = client.get("/api/v1/boom", headers={"Accept": "text/html"})
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/json"
    assert "has been logged" in r.json()["detail"]
