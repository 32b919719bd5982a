"""Helpers of the browser tests: a real server process, a seeded site, a page guard, screenshots."""

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
from urllib.parse import urlsplit

import httpx

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
SHOTS = REPO / "test-artifacts" / "screens"
PASSWORD = "correct-horse-battery"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``python -m preflab.server serve`` on a free loopback port; killed afterwards."""

    def __init__(self, db_url: str, tmp: Path) -> None:
        self.db_url, self.tmp = db_url, tmp
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        self.log = open(self.tmp / f"server-{self.port}.log", "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "preflab.server",
                "serve",
                "--db",
                self.db_url,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--exports-dir",
                str(self.tmp / "exports"),
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited:\n{Path(self.log.name).read_text()[-3000:]}")
            try:
                if httpx.get(self.base + "/api/v1/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
        self.log.close()


@dataclass
class Site:
    """A running server with its accounts (all share one password) and an admin API token."""

    server: Server
    admin_token: str
    projects: dict[str, Any] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return self.server.base

    def api(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {self.admin_token}"}, timeout=30
        )

    def judgments(self, project: str, item_id: str | None = None) -> list[dict[str, Any]]:
        with self.api() as c:
            params = {"limit": 1000, **({"item_id": item_id} if item_id else {})}
            r = c.get(f"/api/v1/projects/{project}/judgments", params=params)
            r.raise_for_status()
            return r.json()


def build_site(tmp: Path, users: dict[str, bool], projects: list[dict[str, Any]]) -> Site:
    """Schema, accounts (``users``: name -> site admin), projects with members, items, rubrics;
    through the server's own functions (no HTTP), then a server process."""
    from preflab.schema import Rubric
    from preflab.server.auth import create_api_token, create_user, get_user, set_membership
    from preflab.server.database import Database, init_schema
    from preflab.server.services import projects as P
    from preflab.store import repo

    url = f"sqlite:///{tmp / 'web.db'}"
    init_schema(url)
    db = Database(url, pool_size=2, max_overflow=2)
    with db.writing() as s:
        for name, admin in users.items():
            create_user(s, name, password=PASSWORD, is_admin=admin)
        token, _ = create_api_token(
            s, get_user(s, next(n for n, a in users.items() if a)), name="tests"
        )
        for spec in projects:
            p = P.create_project(
                s,
                spec["name"],
                title=spec.get("title", ""),
                kinds=spec["kinds"],
                guidelines=spec.get(
                    "guidelines", "# Guidelines\n\nPrefer **helpful**, honest answers."
                ),
                policy=spec.get("policy", {}),
            )
            for user, role in spec.get("members", {}).items():
                set_membership(s, p, get_user(s, user), role)
            if spec.get("rubric"):
                repo.add_rubric(s, p, Rubric.model_validate(spec["rubric"]))
    for spec in projects:
        if spec.get("items"):
            P.import_items(db, spec["name"], spec["items"])
    db.dispose()
    server = Server(url, tmp).start()
    return Site(server=server, admin_token=token, projects={p["name"]: p for p in projects})


class PageGuard:
    """Records what would betray an injection: dialogs, console errors, page errors and any
    request to a host other than the server's."""

    def __init__(self, page, base: str) -> None:
        self.host = urlsplit(base).netloc
        self.dialogs: list[str] = []
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self.foreign: list[str] = []
        page.on("dialog", self._dialog)
        page.on(
            "console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None
        )
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        page.on("request", self._request)

    def _dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def _request(self, request) -> None:
        parts = urlsplit(request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != self.host:
            self.foreign.append(request.url)
        elif parts.scheme not in ("http", "https", "ws", "wss", "about", "blob", "data"):
            self.foreign.append(request.url)

    def assert_clean(self) -> None:
        assert not self.dialogs, f"a dialog opened: {self.dialogs}"
        assert not self.page_errors, f"script errors: {self.page_errors}"
        assert not self.console_errors, f"console errors: {self.console_errors}"
        assert not self.foreign, f"requests left for other hosts: {self.foreign}"


SCREEN_WIDTHS = (1366, 390)  # a laptop and a phone


def shot(page, name: str, full: bool = True) -> Path:
    """``name-1366.png`` and ``name-390.png`` in ``test-artifacts/screens/`` (the README names
    the folder); the page's own viewport is restored afterwards."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    for width in SCREEN_WIDTHS:
        page.set_viewport_size({"width": width, "height": size["height"] if size else 900})
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=full)
    if size:
        page.set_viewport_size(size)
    return SHOTS / f"{name}-{SCREEN_WIDTHS[0]}.png"


def login(page, username: str, password: str = PASSWORD, *, next_path: str = "/") -> None:
    """Log in with the keyboard only."""
    page.goto(f"/login?next={next_path}")
    page.keyboard.type(username)  # the username field has autofocus
    page.keyboard.press("Tab")
    page.keyboard.type(password)
    with page.expect_navigation():
        page.keyboard.press("Enter")
