"""The web UI: server-rendered Jinja2 pages and a little vanilla JavaScript (no build step,
nothing from a CDN).

Pages are thin. A page handler authenticates with the same ``guard`` as the REST API, reads
through the same service functions as the REST routes (never a route), and renders; a
service's refusal (:class:`preflab.server.errors.ServiceError`) is the page's error message. Every change
a page makes goes through the REST API from JavaScript, with the session's CSRF token.

Security headers: a strict Content-Security-Policy (no inline scripts, no foreign hosts, no
images from anywhere but this server) on every page; model output is rendered by
:mod:`preflab.server.pages.render`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import ServiceError

log = logging.getLogger(__name__)
HERE = Path(__file__).resolve().parent.parent
STATIC = HERE / "static"
TEMPLATES = HERE / "templates"

CSP = (
    "default-src 'self'; script-src 'self'; object-src 'none'; img-src 'self'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
#: Swagger UI (``/api/v1/docs``) comes from this server too (the ``fastapi-offline`` package's files);
#: it needs inline styles and ``data:`` images, nothing from another host.
DOCS_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'none'"
)
DOCS_PATH = "/api/v1/docs"


class SecurityHeaders:
    """Pure ASGI middleware adding CSP and friends to every response."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        csp = DOCS_CSP if scope.get("path", "").startswith(DOCS_PATH) else CSP

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                for k, v in (
                    (b"content-security-policy", csp.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"x-frame-options", b"DENY"),
                ):
                    if k not in names:
                        headers.append((k, v))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _delegate(
    handler: Callable[[Request, Exception], Response | Awaitable[Response]],
    request: Request,
    exc: Exception,
) -> Response:
    """Answer with another of the app's exception handlers (Starlette allows sync ones too)."""
    response = handler(request, exc)
    return await response if inspect.isawaitable(response) else response


def mount(app: FastAPI) -> None:
    """Add the web UI to the app: pages, static files, the API docs page, headers."""
    from . import views

    app.include_router(views.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _mount_api_docs(app)
    app.add_middleware(SecurityHeaders)

    api_handler = app.exception_handlers.get(StarletteHTTPException)

    async def html_errors(request: Request, exc: Exception) -> Response:
        """The API's JSON for API paths and non-browser clients; for a browser asking for a page,
        a login redirect (401) or an error page, keeping the guard's headers."""
        assert isinstance(exc, StarletteHTTPException)  # registered for that class below
        wants_html = "text/html" in request.headers.get("accept", "")
        if api_handler is not None and (
            request.url.path.startswith(("/api/", "/static/")) or not wants_html
        ):
            return await _delegate(api_handler, request, exc)
        headers = {
            k: v
            for k, v in (getattr(exc, "headers", None) or {}).items()
            if k.lower() != "www-authenticate"
        }
        if exc.status_code == 401:
            from urllib.parse import quote

            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            resp = RedirectResponse(
                f"/login?next={quote(target, safe='')}", status_code=303, headers=headers
            )
            # an ended session's cookie would be refused on /login too (a redirect loop): drop it
            from ..permissions import SESSION_COOKIE

            if request.cookies.get(SESSION_COOKIE):
                resp.delete_cookie(SESSION_COOKIE, path="/")
            return resp
        page = views.error_page(request, exc.status_code, str(exc.detail))
        page.headers.update(headers)
        return page

    app.add_exception_handler(StarletteHTTPException, html_errors)

    service_handler = app.exception_handlers.get(ServiceError)

    async def service_errors(request: Request, exc: Exception) -> Response:
        """A service's refusal: the API's JSON problem for API paths and non-browser clients,
        the error page with the service's message for a browser asking for a page."""
        assert isinstance(exc, ServiceError)
        wants_html = "text/html" in request.headers.get("accept", "")
        if service_handler is not None and (
            request.url.path.startswith(("/api/", "/static/")) or not wants_html
        ):
            return await _delegate(service_handler, request, exc)
        return views.error_page(request, exc.status, exc.message)

    app.add_exception_handler(ServiceError, service_errors)

    async def server_error(request: Request, exc: Exception) -> Response:
        """Never a bare "Internal Server Error": a styled page with a way back for a browser, a
        JSON problem for the API; the traceback goes to the log with the request that caused it."""
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        detail = (
            "Something went wrong on the server; it has been logged. "
            "Go back and try again, or tell an admin what you were doing."
        )
        if request.url.path.startswith("/api/") or "text/html" not in request.headers.get(
            "accept", ""
        ):
            return JSONResponse({"detail": detail}, status_code=500)
        return views.error_page(request, 500, detail)

    app.add_exception_handler(Exception, server_error)


def _mount_api_docs(app: FastAPI) -> None:
    """``/api/v1/docs``: Swagger UI 5 (it reads OpenAPI 3.1) from the files the ``fastapi-offline``
    package ships, and an initializer in ``static/`` (no inline script, no CDN, no validator
    badge fetched from swagger.io), so the API docs work on a machine without internet."""
    import fastapi_offline
    from fastapi.responses import HTMLResponse

    assets = Path(fastapi_offline.__file__).resolve().parent / "static"
    app.mount(f"{DOCS_PATH}/assets", StaticFiles(directory=assets), name="swagger-ui")
    page = (TEMPLATES / "api_docs.html").read_text().replace("{{ title }}", app.title)

    from ..permissions import Ctx, guard

    @app.get(DOCS_PATH, include_in_schema=False)
    def api_docs(ctx: Ctx = guard("public")) -> HTMLResponse:
        return HTMLResponse(page)
