"""The fast lane: the two hot endpoints served without the framework in the way.

A labelling session is a loop of two requests, ``POST /api/v1/projects/{project}/assignments/next``
and ``POST /api/v1/projects/{project}/judgments``. Through FastAPI each costs milliseconds of CPU
(routing, dependency injection, a worker-thread hop, pydantic, the ORM). This pure ASGI layer
sits inside the app's middleware (so the body limit and the security headers still apply) and
runs those two requests' flow (:mod:`preflab.server.flow.lane`) on an executor of its own:

* SQLite (:mod:`.exec.sqlite`): a connection of the lane's own, ``BEGIN IMMEDIATE`` on the
  event loop thread (a few hundred µs; no thread hop), only ever *trying* the locks;
* PostgreSQL (:mod:`.exec.postgres`): psycopg's asynchronous connections of the lane's own,
  one transaction a request, each round trip awaited on the event loop.

The flow itself (:mod:`.flow.lane`) does no I/O: it yields the statements it needs, and the
executor answers them.

A caller authenticates as the guard would: a bearer token, or the browser's session cookie
with its CSRF header (checked by the same rule, :func:`.csrf.token_matches`).
What the lane cannot answer itself — a bad or revoked token, a non-member, a first contact, a
refusal, a replay, a first label, a qualification answer, an empty pool, a body the cheap
validation does not accept, a lock not free at once — is rolled back and handed, untouched
(the body replayed), to the FastAPI route, which runs the same flow after its guard
(:mod:`.exec.framework`). The lane never answers an error itself, so every refusal is byte
for byte the framework's. Nothing about a caller is cached: a revoked token, a removed
membership or a suspension counts from the very next request, from any worker.

Durability is the database's: the answer is sent after ``COMMIT``, so an acknowledged
judgment survives ``kill -9`` of the server.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import anyio
import orjson
from starlette.applications import Starlette
from starlette.requests import cookie_parser
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from ..store.db import _sqlite_pragmas
from ..store.models import utcnow
from .auth import sha256
from .database import Database
from .errors import ServiceError
from .exec import Busy
from .exec.sqlite import SqliteExecutor
from .flow import NotCommon
from .flow.lane import Credential, Flow, Lane, run_next, run_submit
from .flow.submit import Submit, parse_submit
from .permissions import SESSION_COOKIE, iter_api_routes
from .services import gold_scoring

log = logging.getLogger("preflab.server.fastlane")

#: Counters for tests and profiling: requests served here, and handed on (by reason).
STATS: dict[str, int] = {}

#: Called with each SQL statement the lane's connection runs (profiling); set before first use.
TRACE: Callable[[str], None] | None = None

#: Off switch (tests compare the lane with the framework path; profiling).
ENABLED = True
#: The lane on PostgreSQL (psycopg); off: PostgreSQL requests take the framework path.
PG_ENABLED = True

_PREFIX = "/api/v1/projects/"
_NEXT, _SUBMIT = 1, 2


def _count(key: str) -> None:
    STATS[key] = STATS.get(key, 0) + 1


def _connect(path: str, *, busy_ms: int = 0) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    _sqlite_pragmas(conn, None)
    conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
    return conn


class _Checkpointer(threading.Thread):
    """Checkpoints the WAL off the event loop.

    A committing connection normally runs the checkpoint itself once the WAL passes 1,000
    pages, and with ``synchronous=NORMAL`` a checkpoint fsyncs: milliseconds of stall on the
    event loop every hundred or so commits. The lane's connection has auto-checkpoints off
    and this thread runs ``wal_checkpoint(PASSIVE)`` (which never blocks writers or readers)
    on its own connection a few times a second while there are new commits. Durability does
    not depend on it: a committed transaction is in the WAL before the answer is sent.
    """

    def __init__(self, path: str, period_s: float = 0.2) -> None:
        super().__init__(name="preflab-wal-checkpoint", daemon=True)
        self.path, self.period_s = path, period_s
        self.dirty = threading.Event()
        self.stopping = False

    def run(self) -> None:
        conn = _connect(self.path, busy_ms=1000)
        try:
            while not self.stopping:
                self.dirty.wait()
                time.sleep(self.period_s)
                self.dirty.clear()
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:  # busy or the like: try again on the next round
                    self.dirty.set()
        finally:
            conn.close()

    def stop(self) -> None:
        self.stopping = True
        self.dirty.set()
        self.join(5)


class _Shared:
    """Per process: the lane's executor (SQLite: its connection, the app's write lock and the
    checkpointer; PostgreSQL: psycopg connections of its own), closed with the database."""

    def __init__(self, get_db: Callable[[], Database]) -> None:
        self.get_db = get_db
        self.enabled: bool | None = None
        self.ex: Any = None
        self.db: Database | None = None
        self.checkpointer: _Checkpointer | None = None
        self._slots: anyio.Semaphore | None = None

    def executor(self) -> Any:
        if self.enabled is None:
            db = self.get_db()
            self.enabled = ENABLED and (
                db.is_sqlite or (PG_ENABLED and db.engine.dialect.driver == "psycopg")
            )
            if self.enabled:
                self.db = db
                if db.is_sqlite:
                    self.ex = self._sqlite(db)
                else:  # psycopg is an optional dependency (the postgres extra)
                    from .exec.postgres import PgExecutor

                    self.ex = PgExecutor(db.engine.url, trace=TRACE)
                db.on_dispose(self.close)
        return self.ex

    def slots(self) -> anyio.Semaphore:
        """As many requests in flight as the PostgreSQL executor has connections."""
        if self._slots is None:
            self._slots = anyio.Semaphore(self.ex.pool_size)
        return self._slots

    def _sqlite(self, db: Database) -> SqliteExecutor:
        path = db.engine.url.database
        if path is None:  # sqlite:// (in memory) has no file to share with the lane
            raise ValueError("the fast lane needs a SQLite file, not an in-memory database")
        lock = db.write_lock
        assert not isinstance(lock, nullcontext)  # a SQLite Database's is a threading.Lock
        conn = _connect(path)  # busy_timeout 0: never wait on the event loop, hand on
        conn.execute("PRAGMA wal_autocheckpoint=0")
        if TRACE is not None:
            conn.set_trace_callback(TRACE)
        self.checkpointer = _Checkpointer(path)
        self.checkpointer.start()
        return SqliteExecutor(conn, lock)

    def close(self) -> None:
        """Close the lane's connections (the app's shutdown, through ``Database.dispose``)."""
        if self.checkpointer is not None:
            self.checkpointer.stop()
        if self.ex is not None:
            self.ex.close()
        self.ex, self.enabled = None, None


class LaneEndpoint:
    """The ASGI endpoint of one hot route, placed before the FastAPI route of the same path."""

    def __init__(self, shared: _Shared, kind: int, route: Route) -> None:
        self.shared, self.kind, self.route = shared, kind, route

    async def _framework(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["endpoint"], scope["route"] = self.route.endpoint, self.route
        await self.route.handle(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        shared = self.shared
        cred = _credential(headers) if shared.executor() is not None else None
        if cred is None:
            _count("pass:no credential or lane off")
            return await self._framework(scope, receive, send)  # anonymous, malformed, lane off
        project_name = scope["path_params"]["project"]
        submit = None
        if self.kind == _SUBMIT:
            body = await _read_body(receive)
            if body is None:
                return  # the client went away (or the body limit answered 413)
            receive = _replay(body, receive)
            try:
                ctype = headers.get(b"content-type")
                if ctype is not None and ctype.lower() != b"application/json":
                    raise NotCommon("content type")
                idem = headers.get(b"idempotency-key")
                submit = parse_submit(body, idem.decode("latin-1") if idem is not None else None)
            except NotCommon as why:
                _count(f"pass:{why}")
                return await self._framework(scope, receive, send)
        try:
            out = await self._run(cred, project_name, submit)
        except NotCommon as why:
            _count(f"pass:{why}")
            return await self._framework(scope, receive, send)
        except ServiceError as refusal:  # the framework's route answers refusals, byte for byte
            _count(f"pass:refused {refusal.status}")
            return await self._framework(scope, receive, send)
        if out is None:  # no item left: the route syncs the pool and says why
            _count("pass:nothing found")
            return await self._framework(scope, receive, send)
        _count("served")
        status = 200 if self.kind == _NEXT else 201
        await _send_json(send, status, out)

    def _flow(self, lane: Lane, cred: Credential, project_name: str, submit: Submit | None) -> Flow:
        if self.kind == _NEXT:
            return run_next(lane, cred, project_name)
        assert submit is not None  # __call__ parses the body of every submit
        lease_id, judgment, telemetry, idem = submit
        return run_submit(
            lane,
            cred,
            project_name,
            assignment_id=lease_id,
            judgment=judgment,
            idempotency_key=idem,
            telemetry=telemetry,
        )

    async def _run(self, cred: Credential, project_name: str, submit: Submit | None) -> Any:
        """One transaction on the executor; ``NotCommon`` (rolled back) for the framework."""
        shared = self.shared
        ex = shared.ex
        lane = Lane(ex, utcnow())
        flow = self._flow(lane, cred, project_name, submit)
        try:
            if ex.is_pg:  # round trips awaited on the event loop, one per lane connection
                async with shared.slots():  # wait for a free connection (never a detour)
                    out = await ex.run(flow)
            else:  # a few hundred µs of local work: on the event loop, synchronously
                out = ex.run(flow)
        except Busy as why:
            flow.close()
            raise NotCommon(str(why)) from None
        except ex.errors as exc:
            # A driver error on the lane's own connection (a lock timeout, a dead
            # connection): nothing was committed; the framework redoes the request.
            log.warning("fast lane: handing a request on after %r", exc)
            raise NotCommon(f"{type(exc).__module__.split('.')[0]} {type(exc).__name__}") from None
        if shared.checkpointer is not None:
            shared.checkpointer.dirty.set()
        db = shared.db
        assert db is not None  # set with the executor that just ran
        for pool_role, judgment_pk in lane.after_commit:
            gold_scoring.after_submit(db, pool_role, judgment_pk)
        return out


_READ = (b"authorization", b"content-type", b"idempotency-key", b"cookie", b"x-csrf-token")


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """The first value of each header the lane reads."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name in _READ and name not in found:
            found[name] = value
    return found


def _credential(headers: dict[bytes, bytes]) -> Credential | None:
    """The caller's credential as the guard reads it (``permissions._authenticate``): an
    ``Authorization`` header wins (a bearer token; any other scheme is the framework's 401),
    else the session cookie with the request's CSRF header; None: the framework answers."""
    auth = headers.get(b"authorization")
    if auth is not None:
        scheme, _, token = auth.decode("latin-1").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        return Credential("token", sha256(token))
    cookie = headers.get(b"cookie")
    if cookie is None:
        return None
    session = cookie_parser(cookie.decode("latin-1")).get(SESSION_COOKIE)
    if not session:
        return None
    csrf = headers.get(b"x-csrf-token")
    return Credential("session", sha256(session), csrf.decode("latin-1") if csrf else None)


async def _read_body(receive: Receive) -> bytes | None:
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return None
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


async def _send_json(send: Send, status: int, out: dict[str, Any]) -> None:
    body = orjson.dumps(out)
    headers = [
        (b"content-length", str(len(body)).encode()),
        (b"content-type", b"application/json"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def install(app: Starlette) -> None:
    """Put the lane in front of the two hot FastAPI routes (same paths, POST only)."""
    shared = _Shared(lambda: app.state.db)
    routes = {(r.path, m): r for r in iter_api_routes(app.router.routes) for m in r.methods}
    lanes = []
    for path, kind in (
        (_PREFIX + "{project}/assignments/next", _NEXT),
        (_PREFIX + "{project}/judgments", _SUBMIT),
    ):
        endpoint = LaneEndpoint(shared, kind, routes[(path, "POST")])
        lanes.append(Route(path, endpoint, methods=["POST"], include_in_schema=False))
    app.router.routes[0:0] = lanes


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands out the already-read body once, then defers to the server's."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
