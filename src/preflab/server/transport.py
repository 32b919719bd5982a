"""Transport-level protection: HTTPS-only cookies and HSTS, and a deadline for request headers.
(The API docs page and its Content-Security-Policy: :mod:`preflab.server.pages`.)

* :class:`TransportSecurity`: over HTTPS (the connection's scheme, or a *trusted* proxy's
  ``X-Forwarded-Proto``, see ``ServerConfig.trusted_proxies``) every ``Set-Cookie`` gets
  ``Secure`` and every response ``Strict-Transport-Security``; ``secure_cookies`` forces
  ``Secure`` over plain HTTP too (a TLS proxy that is not configured as trusted).
* :class:`HeaderDeadlineProtocol`: uvicorn waits forever for the rest of a request's headers
  (slowloris: 300 connections sending a byte now and then stayed open indefinitely). This
  protocol closes a connection whose request headers are not complete ``header_timeout_s``
  after the connection opened or the request's first byte arrived.
"""

from __future__ import annotations

import asyncio
from functools import cache

from ..settings import env_var, get_settings

HSTS = (b"strict-transport-security", b"max-age=31536000; includeSubDomains")


class TransportSecurity:
    """``Secure`` cookies and HSTS over HTTPS (pure ASGI)."""

    def __init__(self, app, *, secure_cookies: bool = False) -> None:
        self.app, self.secure_cookies = app, secure_cookies

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        https = scope.get("scheme") == "https"
        if not (https or self.secure_cookies):
            return await self.app(scope, receive, send)

        async def send_secure(message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, _secure_cookie(v) if k.lower() == b"set-cookie" else v)
                    for k, v in message.get("headers", [])
                ]
                if https:
                    headers.append(HSTS)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_secure)


def _secure_cookie(value: bytes) -> bytes:
    attributes = [a.strip().lower() for a in value.split(b";")[1:]]
    return value if b"secure" in attributes else value + b"; Secure"


# -- the header deadline ------------------------------------------------------------------------------

#: Environment variable the worker processes read the deadline from (set by ``preflab serve``).
HEADER_TIMEOUT_ENV = env_var("header_timeout_s")


@cache
def _header_timeout_s() -> float:
    """Read once per worker process, at its first connection (reading settings costs ~1 ms)."""
    return get_settings().header_timeout_s


class _HeaderDeadline:
    """Mixed into a uvicorn HTTP protocol: close the connection when headers are late."""

    loop: asyncio.AbstractEventLoop  # set by the uvicorn protocol it is mixed into
    transport: asyncio.Transport
    _deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._deadline is None:
            seconds = _header_timeout_s()
            self._deadline = self.loop.call_later(seconds, self._headers_late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _headers_late(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def _protocol_class():
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools is optional in uvicorn
        HttpToolsProtocol = None
    if HttpToolsProtocol is not None:

        class HeaderDeadlineProtocol(_HeaderDeadline, HttpToolsProtocol):
            def connection_made(self, transport) -> None:
                super().connection_made(transport)
                self._arm()

            def on_message_begin(self) -> None:
                super().on_message_begin()
                self._arm()

            def on_headers_complete(self) -> None:
                self._disarm()
                super().on_headers_complete()

            def connection_lost(self, exc) -> None:
                self._disarm()
                super().connection_lost(exc)

        return HeaderDeadlineProtocol

    from uvicorn.protocols.http.h11_impl import H11Protocol  # pragma: no cover

    class HeaderDeadlineH11Protocol(_HeaderDeadline, H11Protocol):  # pragma: no cover
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self.cycle is None or self.cycle.response_complete:  # bytes of a new request's head
                self._arm()
            super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadlineH11Protocol


HeaderDeadlineProtocol = _protocol_class()
HeaderDeadlineProtocol.__module__ = __name__
HeaderDeadlineProtocol.__qualname__ = "HeaderDeadlineProtocol"
