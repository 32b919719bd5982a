"""A page shows a service's refusal (issue 32): pages read through the same service functions
as the REST routes, and a :class:`ServiceError` becomes the page's error message with its status
(never an empty page, as when pages called the REST handlers and dropped their errors); the
REST route answers the same refusal as its JSON problem."""

from __future__ import annotations

from preflab.server.errors import ServiceError
from preflab.server.services import queries

from .conftest import seed
from .test_holes import app_client, bearer

HTML = {"accept": "text/html,application/xhtml+xml"}


def test_a_page_shows_the_services_error_and_the_api_its_json(sqlite_url, monkeypatch):
    s = seed(sqlite_url, n_items=1)

    def refuse(*args, **kwargs):
        raise ServiceError(409, "the rater's status is being rebuilt: try again in a minute")

    with app_client(sqlite_url, monkeypatch=monkeypatch) as c:
        h = bearer(s.tokens["rater000"])
        assert c.get("/p/demo", headers={**h, **HTML}).status_code == 200
        monkeypatch.setattr(queries, "my_status", refuse)
        page = c.get("/p/demo", headers={**h, **HTML})
        assert page.status_code == 409
        assert page.headers["content-type"].startswith("text/html")
        assert "being rebuilt: try again in a minute" in page.text
        api = c.get("/api/v1/projects/demo/my/status", headers=h)
        assert api.status_code == 409
        assert api.json()["detail"] == "the rater's status is being rebuilt: try again in a minute"
