"""The FastAPI application factory. The app holds configuration and engines only, never
business state, so any number of worker processes can serve the same database."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..logs import configure_logging
from ..settings import DEFAULT_DB_URL, env_var, get_settings
from ..store.repo import Conflict, NotFound, StoreError
from .auth import AuthError, LoginLimit, PasswordGate, RateLimited
from .database import Database, init_schema
from .errors import ServiceError
from .export_runner import Runner
from .transport import TransportSecurity
from .wire import RejectNulInUrl

CONFIG_ENV = env_var("server_config")


@dataclass
class ServerConfig:
    db_url: str = DEFAULT_DB_URL
    max_body_bytes: int = 2 * 1024 * 1024
    session_ttl: timedelta = timedelta(hours=12)
    login_limit: LoginLimit = field(default_factory=LoginLimit)
    #: ``Secure`` on cookies always (else: when the request came over HTTPS).
    secure_cookies: bool = False
    exports_dir: Path = Path("preflab-exports")
    pool_size: int = 20
    #: Addresses/networks of reverse proxies whose ``X-Forwarded-For``/``-Proto`` are believed;
    #: empty (the default): nobody's, the peer address is the client.
    trusted_proxies: list[str] = field(default_factory=list)
    #: Seconds a client has to send a request's headers before the connection is closed.
    header_timeout_s: float = 10.0

    def to_env(self) -> str:
        return json.dumps(
            {
                "db_url": self.db_url,
                "max_body_bytes": self.max_body_bytes,
                "session_ttl_s": self.session_ttl.total_seconds(),
                "login_limit": dataclasses.asdict(self.login_limit),
                "secure_cookies": self.secure_cookies,
                "exports_dir": str(self.exports_dir),
                "pool_size": self.pool_size,
                "trusted_proxies": self.trusted_proxies,
                "header_timeout_s": self.header_timeout_s,
            }
        )

    @classmethod
    def from_env(cls, raw: str) -> ServerConfig:
        d = json.loads(raw)
        return cls(
            db_url=d["db_url"],
            max_body_bytes=d["max_body_bytes"],
            session_ttl=timedelta(seconds=d["session_ttl_s"]),
            login_limit=LoginLimit(**d["login_limit"]),
            secure_cookies=d["secure_cookies"],
            exports_dir=Path(d["exports_dir"]),
            pool_size=d["pool_size"],
            trusted_proxies=list(d["trusted_proxies"]),
            header_timeout_s=d["header_timeout_s"],
        )


def db_error_kind(exc: Exception) -> str:
    """A short, safe name for a retryable database error (no SQL or parameters leak out)."""
    orig = getattr(exc, "orig", None)
    code = getattr(orig, "sqlstate", None) or getattr(getattr(orig, "diag", None), "sqlstate", None)
    if code == "40001":
        return "serialization failure"
    if code == "40P01":
        return "deadlock"
    text = str(orig or exc).lower()
    if "locked" in text or "busy" in text:
        return "database is locked"
    return "operational error"


def _json(
    status: int, detail: Any, errors: list | None = None, headers: dict | None = None
) -> Response:
    body: dict[str, Any] = {"detail": detail}
    if errors:
        body["errors"] = errors
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, declared or streamed (pure ASGI)."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_big = _json(413, f"request body over {self.limit} bytes; send fewer items per request")
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = self.limit + 1
                if declared > self.limit:
                    return await too_big(scope, receive, send)
        seen = 0
        state = {"answered": False, "started": False}

        async def guarded_send(message):
            if state["answered"]:
                return  # we already refused the request; drop the app's late answer
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit and not state["started"]:
                    await too_big(scope, receive, send)
                    state["answered"] = True
                    return {"type": "http.disconnect"}
            return message

        await self.app(scope, limited_receive, guarded_send)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Startup: room in the thread pool for every pooled connection, the gold scorer (it
    also sweeps gold judgments a crash left unscored), and the export jobs' restart rule (running
    jobs whose process is gone fail, queued ones start; :mod:`.export_runner`). Shutdown: stop the
    scorer and the jobs' sweep (their processes go on), close the pool."""
    import anyio.to_thread

    from .services.gold_scoring import start_gold_scorer, stop_gold_scorer

    anyio.to_thread.current_default_thread_limiter().total_tokens = max(
        64, app.state.config.pool_size * 2
    )
    start_gold_scorer(app.state.db)
    app.state.export_jobs.recover()
    try:
        yield
    finally:
        app.state.export_jobs.close()
        stop_gold_scorer(app.state.db)
        app.state.db.dispose()


def create_app(
    db_url: str | None = None, *, config: ServerConfig | None = None, init: bool = False
) -> FastAPI:
    """Build the app. ``init=True`` creates/migrates the schema first (do it once, not per worker)."""
    config = config or ServerConfig(db_url=db_url or get_settings().db)
    if db_url:
        config.db_url = db_url
    if init:
        init_schema(config.db_url)
    app = FastAPI(
        title="preflab collection server",
        version=__version__,
        description="Accounts, projects, assignments and judgments for auditable human preference data.",
        openapi_url="/api/v1/openapi.json",
        docs_url=None,  # /api/v1/docs: Swagger UI from local assets (no CDN), with a CSP
        redoc_url=None,
        lifespan=_lifespan,
    )
    app.state.config = config
    app.state.db = Database(
        config.db_url, pool_size=config.pool_size, max_overflow=config.pool_size
    )
    app.state.password_gate = PasswordGate(config.login_limit.concurrent)
    app.state.export_jobs = Runner(app.state.db)

    from .routes import include_all

    include_all(app)
    # The two hot routes' flow on the lane's executors, in front of them (preflab.server.fastlane).
    from .fastlane import install as install_fast_lane

    install_fast_lane(app)

    @app.exception_handler(ServiceError)
    async def _judging(_: Request, exc: ServiceError) -> Response:
        return _json(exc.status, exc.message, exc.errors)

    @app.exception_handler(RateLimited)
    async def _limited(_: Request, exc: RateLimited) -> Response:
        return _json(429, str(exc), headers={"Retry-After": str(exc.retry_after)})

    @app.exception_handler(AuthError)
    async def _auth(_: Request, exc: AuthError) -> Response:
        return _json(exc.status, str(exc))

    @app.exception_handler(NotFound)
    async def _missing(_: Request, exc: NotFound) -> Response:
        return _json(404, str(exc))

    @app.exception_handler(Conflict)
    async def _conflict(_: Request, exc: Conflict) -> Response:
        return _json(409, str(exc))

    @app.exception_handler(StoreError)
    async def _store(_: Request, exc: StoreError) -> Response:
        return _json(422, str(exc))

    @app.exception_handler(ValidationError)
    async def _invalid(_: Request, exc: ValidationError) -> Response:
        errors = [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_input=False)
        ]
        return _json(422, "invalid input", errors)

    @app.exception_handler(RequestValidationError)
    async def _request_invalid(_: Request, exc: RequestValidationError) -> Response:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return _json(422, "invalid request", errors)

    @app.exception_handler(IntegrityError)
    async def _integrity(_: Request, exc: IntegrityError) -> Response:
        # a concurrent request created the same thing first: the client may retry
        return _json(409, "conflicting concurrent change; retry the request")

    @app.exception_handler(OperationalError)
    async def _busy(_: Request, exc: OperationalError) -> Response:
        # Serialization failures and deadlocks (PostgreSQL 40001/40P01), SQLite's "database is
        # locked" after the busy timeout, a dropped connection: the transaction was rolled back
        # whole, so the same request may simply be sent again (a submission with the same
        # idempotency key; ``next`` resumes the live lease). preflab.client retries these.
        return _json(
            503,
            f"the database is busy ({db_error_kind(exc)}); retry shortly",
            headers={"Retry-After": "1"},
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> Response:
        return _json(exc.status_code, exc.detail, headers=getattr(exc, "headers", None))

    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    app.add_middleware(RejectNulInUrl)
    app.add_middleware(TransportSecurity, secure_cookies=config.secure_cookies)
    if config.trusted_proxies:
        # The client's address and scheme from X-Forwarded-For/-Proto, believed only when the
        # peer is a configured proxy (uvicorn's own middleware; ``serve`` turns off uvicorn's
        # default, which trusts 127.0.0.1). Outermost, so every layer sees the real client.
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=list(config.trusted_proxies))

    # -- web UI (webui branch): pages, static files, CSP; see preflab.server.pages -------------
    from .pages import mount as mount_pages

    mount_pages(app)
    return app


def app_from_env() -> FastAPI:
    """Factory for uvicorn workers (``--factory``): configuration comes from the environment."""
    settings = get_settings()
    configure_logging(settings.log_level, json=settings.log_format == "json")
    raw = settings.server_config
    config = ServerConfig.from_env(raw) if raw else ServerConfig(db_url=settings.db)
    return create_app(config=config)
