"""Fixtures of the server suite: a seeded database and a real ``preflab serve`` process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:  # test this checkout, whatever the venv has installed
    sys.path.insert(0, str(SRC))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pairwise_item(
    i: int,
    *,
    gold: int | None = None,
    domains: list[str] | None = None,
    qualification: bool = False,
    prefix: str = "item",
) -> dict[str, Any]:
    """An item with two candidates; ``gold`` = expected winner strength sign (-1: first better)."""
    item: dict[str, Any] = {
        "id": f"{prefix}-{i:05d}",
        # an item is its content (issue 17): items of another prefix (gold, qualification) must not
        # be the production item of the same number written again
        "prompt": f"Question {i}: which answer is better?"
        if prefix == "item"
        else f"Question {i} ({prefix}): which answer is better?",
        "candidates": [
            {"id": "a", "text": f"answer A to {i}"},
            {"id": "b", "text": f"answer B to {i}"},
        ],
        "domains": domains or [],
    }
    if gold is not None:
        winner = "a" if gold < 0 else "b"
        item["gold"] = {
            "judgment": {
                "kind": "pairwise",
                "shown_order": ["a", "b"],
                "winner": winner,
                "strength": 2,
            },
            "explanation": f"answer {winner.upper()} is correct",
        }
        item["reference"] = "SECRET-REFERENCE"
        item["metadata"] = {"qualification": qualification}
    return item


@dataclass
class Seeded:
    url: str
    project: str
    admin_token: str
    tokens: dict[str, str] = field(default_factory=dict)  # username -> token
    roles: dict[str, str] = field(default_factory=dict)  # username -> role


def seed(
    url: str,
    *,
    project: str = "demo",
    n_items: int = 20,
    raters: int = 3,
    policy: dict | None = None,
    items: list[dict] | None = None,
    kinds: list[str] | None = None,
    extra_roles: bool = True,
) -> Seeded:
    """Schema, a site admin, a project with items, and members with API tokens (no HTTP)."""
    from preflab.server.auth import create_api_token, create_user, set_membership
    from preflab.server.database import Database, init_schema
    from preflab.server.services import projects as P
    from preflab.store.server_models import User

    init_schema(url)
    db = Database(url, pool_size=2, max_overflow=2)
    out = Seeded(url=url, project=project, admin_token="")
    with db.writing() as s:
        admin, _ = create_user(s, "root", is_admin=True)
        out.admin_token, _ = create_api_token(s, admin, name="test")
        proj = P.create_project(
            s, project, kinds=kinds or ["pairwise"], guidelines="# Be careful", policy=policy or {}
        )
        members = [(f"rater{i:03d}", "rater") for i in range(raters)]
        if extra_roles:
            members += [("padmin", "admin"), ("reviewer", "reviewer"), ("outsider", None)]
        for name, role in members:
            # token-only accounts: no password, so no argon2 hashing (0.5 s each on a small box)
            user = User(username=name, display_name=name)
            s.add(user)
            s.flush()
            if role:
                set_membership(s, proj, user, role)
            out.tokens[name], _ = create_api_token(s, user, name="test")
            out.roles[name] = role or "none"
    db.dispose()
    if items is None:
        items = [pairwise_item(i) for i in range(n_items)]
    if items:
        db = Database(url, pool_size=2, max_overflow=2)
        P.import_items(db, project, items)
        db.dispose()
    return out


class Server:
    """``python -m preflab.server serve`` on a free loopback port; killed afterwards."""

    def __init__(
        self,
        url: str,
        *,
        workers: int = 1,
        tmp: Path,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ) -> None:
        self.url, self.workers, self.tmp, self.env, self.args = (
            url,
            workers,
            tmp,
            env or {},
            args or [],
        )
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> Server:
        env = {**os.environ, "PYTHONPATH": str(SRC), **self.env}
        self.log = open(self.tmp / f"server-{self.port}-{time.time_ns()}.log", "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "preflab.server",
                "serve",
                "--db",
                self.url,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--exports-dir",
                str(self.tmp / "exports"),
                *(["--log-level", "info"] if self.workers > 1 else []),
                *self.args,
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited early:\n{Path(self.log.name).read_text()[-3000:]}"
                )
            try:
                if (
                    httpx.get(self.base + "/api/v1/health", timeout=2).status_code == 200
                    and self._all_workers_up()
                ):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"server did not start:\n{Path(self.log.name).read_text()[-3000:]}")

    def _all_workers_up(self) -> bool:
        """Each uvicorn worker logs its startup (at ``info``, set for several workers); the first
        answer may come before the others are up."""
        if self.workers == 1:
            return True  # the answer came from the one worker
        self.log.flush()
        return Path(self.log.name).read_text().count("Application startup complete") >= self.workers

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the server's own process group (the uvicorn supervisor and its workers)."""
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=20)
        if getattr(self, "log", None):
            self.log.close()

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def client(self, token: str | None = None, **kw: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.base, headers=headers, timeout=30, **kw)


@pytest.fixture
def start_server(tmp_path: Path):
    servers: list[Server] = []

    def _start(url: str, **kw: Any) -> Server:
        server = Server(url, tmp=tmp_path, **kw).start()
        servers.append(server)
        return server

    yield _start
    for server in servers:
        server.kill()


@pytest.fixture
def app_for(tmp_path: Path):
    """``make(url)``: the app on ``url`` in process, its lifespan started (closed at the end)."""
    from fastapi.testclient import TestClient

    from preflab.server.app import ServerConfig, create_app

    clients: list[TestClient] = []

    def make(url: str) -> TestClient:
        config = ServerConfig(db_url=url, exports_dir=tmp_path / "exports", pool_size=2)
        client = TestClient(create_app(config=config))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for c in clients:
        c.__exit__(None, None, None)


def expire_now(url: str, model: Any, *where: Any) -> int:
    """Move ``expires_at`` of the matching rows one second into the past: the server's own clock
    then sees them expired, as if the time had passed (instead of sleeping in the test)."""
    from datetime import timedelta

    from sqlalchemy import create_engine, update

    from preflab.store import normalise_url
    from preflab.store.models import utcnow

    engine = create_engine(normalise_url(url))
    try:
        with engine.begin() as conn:
            return conn.execute(
                update(model).where(*where).values(expires_at=utcnow() - timedelta(seconds=1))
            ).rowcount
    finally:
        engine.dispose()


#: The paths that answer "next" and "submit" (:func:`serve_by`).
PATHS = ("lane", "framework", "oracle")


def serve_by(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Which path answers "next" and "submit" in apps created after this call: ``lane`` (the
    fast lane; what it hands on, the routes' executor), ``framework`` (the flow on the routes'
    executor alone), ``oracle`` (the ORM reference of :mod:`.oracle`, never served)."""
    from preflab.server import fastlane

    if path == "oracle":
        from .oracle import install

        install(monkeypatch)
    else:
        monkeypatch.setattr(fastlane, "ENABLED", path == "lane")
