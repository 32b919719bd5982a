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
