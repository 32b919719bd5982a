"""The REST API's shape (issue 10 §1): routes split by concern, each with a response model, so the
OpenAPI document describes every answer, and the answers really have the documented shape."""

from __future__ import annotations

import json

from pydantic import TypeAdapter
from starlette.routing import Match

from preflab.server.permissions import iter_api_routes

from .conftest import pairwise_item, seed
from .test_holes import app_client, bearer


def _without_response_schema(openapi: dict) -> set[tuple[str, str]]:
    missing = set()
    for path, operations in openapi["paths"].items():
        for method, op in operations.items():
            success = [v for k, v in op["responses"].items() if k.startswith("2")]
            schemas = [c.get("schema") for r in success for c in r.get("content", {}).values()]
            if not schemas or not all(schemas):  # no content, or the empty schema {}
                missing.add((method, path))
    return missing


def test_every_route_in_the_openapi_document_has_a_response_schema(sqlite_url):
    seed(sqlite_url, n_items=0, raters=0, extra_roles=False)
    with app_client(sqlite_url) as c:
        openapi = c.get("/api/v1/openapi.json").json()
    assert len(openapi["paths"]) > 40  # the walk found the API
    missing = _without_response_schema(openapi)
    assert missing == set(), "give these routes a response_model"


def test_a_route_without_a_response_model_is_caught():
    fake = {
        "paths": {
            "/x": {
                "get": {"responses": {"200": {"content": {"application/json": {"schema": {}}}}}}
            },
            "/y": {"get": {"responses": {"200": {"description": "no content"}}}},
            "/z": {
                "get": {
                    "responses": {
                        "200": {"content": {"application/json": {"schema": {"type": "object"}}}}
                    }
                }
            },
        }
    }
    assert _without_response_schema(fake) == {("get", "/x"), ("get", "/y")}


def _check_answer(app, method: str, url: str, body: object) -> None:
    """The answer validates against the response model of the route that gave it."""
    scope = {"type": "http", "method": method.upper(), "path": url.split("?")[0]}
    for route in iter_api_routes(app.routes):
        if route.matches(scope)[0] == Match.FULL:
            assert route.response_model is not None, f"{method} {url}: no response_model"
            TypeAdapter(route.response_model).validate_python(body)
            return
    raise AssertionError(f"no route for {method} {url}")


def test_answers_have_the_shape_their_response_model_documents(sqlite_url, tmp_path):
    seeded = seed(sqlite_url, n_items=4, raters=1)
    root, padmin, reviewer = seeded.admin_token, seeded.tokens["padmin"], seeded.tokens["reviewer"]
    p = f"/api/v1/projects/{seeded.project}"
    calls = [
        ("get", "/api/v1/health", None, None),
        ("get", "/api/v1/auth/me", root, None),
        ("post", "/api/v1/auth/tokens", root, {"name": "t"}),
        ("get", "/api/v1/auth/tokens", root, None),
        ("post", "/api/v1/me/credentials", seeded.tokens["rater000"], {"domain": "code"}),
        ("get", "/api/v1/me/credentials", seeded.tokens["rater000"], None),
        ("post", "/api/v1/users", root, {"username": "newbie"}),
        ("get", "/api/v1/users", root, None),
        ("patch", "/api/v1/users/newbie", root, {"is_active": False}),
        ("get", "/api/v1/users/rater000/credentials", root, None),
        ("post", "/api/v1/users/rater000/credentials/code/verify", root, {"verified": True}),
        ("post", "/api/v1/users/newbie/reset-link", root, {}),
        ("get", "/api/v1/projects", root, None),
        ("post", "/api/v1/projects", root, {"name": "other"}),
        ("get", p, seeded.tokens["rater000"], None),
        ("patch", f"{p}/settings", padmin, {"title": "T", "note": "n"}),
        ("get", f"{p}/settings/history", padmin, None),
        ("get", f"{p}/members", reviewer, None),
        ("put", f"{p}/members/newbie", padmin, {"role": "rater"}),
        ("delete", f"{p}/members/newbie", padmin, None),
        ("post", f"{p}/invites", padmin, {}),
        ("post", f"{p}/items", padmin, {"items": [pairwise_item(50)]}),
        ("get", f"{p}/items", reviewer, None),
        ("get", f"{p}/items/item-00000", reviewer, None),
        ("post", f"{p}/rubrics", padmin, _rubric()),
        ("get", f"{p}/rubric", seeded.tokens["rater000"], None),
        ("get", f"{p}/rubrics", reviewer, None),
        ("get", f"{p}/judgments", reviewer, None),
        ("get", f"{p}/raters", reviewer, None),
        ("get", f"{p}/quality", reviewer, None),
        ("get", f"{p}/review/queues", reviewer, None),
        ("get", f"{p}/review/items/item-00000", reviewer, None),
        ("get", f"{p}/browse", reviewer, None),
        ("get", f"{p}/skips", reviewer, None),
        ("get", f"{p}/demonstrations/pending", reviewer, None),
        ("get", f"{p}/my/status", seeded.tokens["rater000"], None),
        ("get", f"{p}/my/judgments", seeded.tokens["rater000"], None),
        ("get", f"{p}/my/revisions", seeded.tokens["rater000"], None),
        ("post", "/api/v1/markdown/preview", root, {"text": "*hi*"}),
        ("post", f"{p}/exports", padmin, {"format": "raw"}),
        ("get", "/api/v1/audit", root, None),
    ]
    with app_client(sqlite_url, config_changes={"exports_dir": tmp_path / "exports"}) as c:
        for method, url, token, body in calls:
            kw = {"json": body} if body is not None else {}
            r = c.request(method, url, headers=bearer(token) if token else {}, **kw)
            assert r.status_code < 300, f"{method} {url}: {r.status_code} {r.text}"
            _check_answer(c.app, method, url, r.json())
        raw = json.dumps(pairwise_item(60)).encode()
        r = c.post(f"{p}/items/file?filename=x.jsonl", content=raw, headers=bearer(padmin))
        _check_answer(c.app, "post", f"{p}/items/file", r.json())
        bad = c.post(f"{p}/items/file?filename=x.jsonl", content=b"{nope\n", headers=bearer(padmin))
        assert bad.status_code == 422
        _check_answer(c.app, "post", f"{p}/items/file", bad.json())


def _rubric() -> dict:
    return {
        "id": "helpful",
        "version": 1,
        "dimensions": [{"name": "helpfulness", "scale": "ordinal", "points": 5}],
    }
