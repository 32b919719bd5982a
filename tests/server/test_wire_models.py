"""Issue 31: a NUL in a skip note was a 500 on PostgreSQL and stored on SQLite: ``SkipIn`` sat
outside the wire rules. Every request body model of the API is now checked by them (a new
route with a plain ``BaseModel`` body fails here), and the skip note is refused on both
databases with a 422 naming the field, storing nothing."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from .conftest import seed


def _body_models(app) -> dict[str, type]:
    from preflab.server.permissions import iter_api_routes

    found = {}
    for route in iter_api_routes(app.routes):
        if route.body_field is not None:
            found[f"{sorted(route.methods)[0]} {route.path}"] = (
                route.body_field.field_info.annotation
            )
    return found


def test_every_request_body_model_is_under_the_wire_rules(tmp_path):
    from preflab.server.app import create_app
    from preflab.server.wire import WireModel

    app = create_app(f"sqlite:///{tmp_path / 'w.db'}", init=True)
    models = _body_models(app)
    assert len(models) > 20, "the walk found the API's bodies"
    outside = {
        route: model
        for route, model in models.items()
        if not (isinstance(model, type) and issubclass(model, BaseModel))
        or not (issubclass(model, WireModel) or hasattr(model, "_wire_rules"))
    }
    assert not outside, f"request models outside preflab.server.wire: {outside}"
    app.state.db.dispose()


@pytest.mark.parametrize(
    ("note", "field"), [("broken\x00item", "note"), ("x" * 2001, "note")], ids=["nul", "too-long"]
)
def test_a_skip_note_with_nul_or_too_long_is_a_422_and_nothing_is_stored(db_url, note, field):
    from sqlalchemy import func, select

    from preflab.server.app import ServerConfig, create_app
    from preflab.store.server_models import ItemSkip

    s = seed(db_url, n_items=2, raters=1)
    rater = {"Authorization": f"Bearer {s.tokens['rater000']}"}
    app = create_app(config=ServerConfig(db_url=db_url))
    try:
        with TestClient(app) as c:
            task = c.post("/api/v1/projects/demo/assignments/next", headers=rater).json()["task"]
            where = f"/api/v1/projects/demo/assignments/{task['assignment_id']}/skip"
            r = c.post(where, json={"reason": "broken", "note": note}, headers=rater)
            assert r.status_code == 422, r.text
            assert field in r.text
            ok = c.post(where, json={"reason": "broken", "note": "fine"}, headers=rater)
            assert ok.status_code < 300, ok.text
        with app.state.db.reading() as session:
            notes = session.scalars(select(ItemSkip.note)).all()
            assert notes == ["fine"], notes
            assert session.scalar(select(func.count()).select_from(ItemSkip)) == 1
    finally:
        app.state.db.dispose()
