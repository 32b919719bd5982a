"""Statement counts that must not grow with the data (issue 32): a page or endpoint that makes
a query per rater is slow on a project with many raters. Counted with SQLAlchemy's
``before_cursor_execute`` event on the engine the route reads through."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event

from .conftest import seed
from .test_holes import app_client, bearer

P = "/api/v1/projects/demo"


@contextmanager
def counted(engine) -> Iterator[list[str]]:
    """Every statement ``engine`` sends while the block runs."""
    seen: list[str] = []

    def listen(conn, cursor, statement, parameters, context, executemany):
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", listen)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", listen)


def _statements_for_raters(url: str, monkeypatch: pytest.MonkeyPatch, raters: int) -> int:
    s = seed(url, n_items=2 * raters, raters=raters, policy={"overlap_share": 0.0})
    with app_client(url, monkeypatch=monkeypatch) as c:
        for i in range(raters):  # each rater takes a task: a rater status row each
            r = c.post(f"{P}/assignments/next", headers=bearer(s.tokens[f"rater{i:03d}"]))
            assert r.status_code == 200, r.text
        h = bearer(s.tokens["reviewer"])
        assert c.get(f"{P}/raters", headers=h).status_code == 200  # warm the guard's caches
        db = c.app.state.db
        with counted(db.engine) as seen, counted(db.write_engine) as written:
            r = c.get(f"{P}/raters", headers=h)
        assert r.status_code == 200, r.text
        assert len(r.json()) == raters
        return len(seen) + (len(written) if db.write_engine is not db.engine else 0)


@pytest.mark.slow
def test_the_rater_figures_take_the_same_number_of_statements_for_3_and_30_raters(
    tmp_path, monkeypatch
):
    few = _statements_for_raters(f"sqlite:///{tmp_path / 'few.db'}", monkeypatch, 3)
    many = _statements_for_raters(f"sqlite:///{tmp_path / 'many.db'}", monkeypatch, 30)
    assert many == few, f"{few} statements for 3 raters, {many} for 30: a query per rater"
