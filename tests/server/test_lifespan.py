"""The app's startup and shutdown run through a lifespan (not the deprecated ``on_event``)."""

from __future__ import annotations

import warnings

import anyio.to_thread
from fastapi.testclient import TestClient

from preflab.server.app import ServerConfig, create_app


def test_building_the_app_raises_no_deprecation_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        create_app(f"sqlite:///{tmp_path / 'p.db'}", init=True)


def test_startup_sizes_the_thread_pool_and_shutdown_closes_the_database(tmp_path):
    config = ServerConfig(db_url=f"sqlite:///{tmp_path / 'p.db'}", pool_size=50)
    app = create_app(config=config, init=True)
    disposed = []
    real_dispose = app.state.db.dispose
    app.state.db.dispose = lambda: (disposed.append(True), real_dispose())
    with TestClient(app) as client:
        assert client.get("/api/v1/health").status_code == 200
        # one worker thread per pooled connection, at least 64 (set when the app starts)
        assert (
            client.portal.call(
                lambda: anyio.to_thread.current_default_thread_limiter().total_tokens
            )
            == 100
        )
        assert disposed == []
    assert disposed == [True]


def test_shutdown_closes_the_fast_lanes_own_connections(db_url):
    """The lane opens connections of its own (SQLite: one + the WAL checkpointer; PostgreSQL:
    a psycopg pool); the app's shutdown closes them with the database."""
    from sqlalchemy import create_engine, text

    from preflab.server import fastlane
    from preflab.server.exec.postgres import APPLICATION_NAME

    from .conftest import seed

    s = seed(db_url, raters=1, n_items=2, extra_roles=False)
    app = create_app(db_url)
    shared = next(
        r.endpoint.shared
        for r in app.router.routes
        if hasattr(r, "endpoint") and isinstance(r.endpoint, fastlane.LaneEndpoint)
    )
    h = {"Authorization": f"Bearer {s.tokens['rater000']}"}
    with TestClient(app) as client:
        for _ in range(2):  # the second request is the lane's
            assert (
                client.post("/api/v1/projects/demo/assignments/next", headers=h).status_code == 200
            )
        executor = shared.ex
        assert executor is not None
    assert shared.ex is None
    if db_url.startswith("sqlite"):
        assert not shared.checkpointer.is_alive()
        try:
            executor.conn.execute("SELECT 1")
        except Exception as exc:
            assert "closed" in str(exc)
        else:
            raise AssertionError("the lane's SQLite connection is still open")
        return
    # a closed connection's backend leaves pg_stat_activity a moment after the client hangs up:
    # poll (a leaked, open connection stays listed and fails this after the deadline)
    import time

    engine = create_engine(db_url)
    deadline = time.monotonic() + 10
    while True:
        with engine.connect() as conn:
            left = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = :a "
                    "AND datname = current_database()"
                ),
                {"a": APPLICATION_NAME},
            ).scalar()
        if left == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    engine.dispose()
    assert left == 0
