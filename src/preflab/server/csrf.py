"""CSRF protection for cookie-authenticated requests (synchronizer token).

A browser session row carries a random CSRF token; the login response and ``GET
/api/v1/auth/me`` hand it to the page, which sends it back in the ``X-CSRF-Token`` header (or
a ``csrf_token`` form field, for the server-rendered pages) on every state-changing request.
A cross-site page can make the browser send the cookie but cannot read the token.
Requests authenticated by ``Authorization: Bearer`` carry no ambient credential and are exempt.
"""

from __future__ import annotations

import hmac

from fastapi import Request

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
HEADER = "X-CSRF-Token"
FORM_FIELD = "csrf_token"


def csrf_ok(request: Request, expected: str, form_token: str | None = None) -> bool:
    """Whether a cookie-authenticated request may proceed."""
    if request.method in SAFE_METHODS:
        return True
    return token_matches(request.headers.get(HEADER) or form_token, expected)


def token_matches(sent: str | None, expected: str) -> bool:
    """The rule itself (the framework's guard and the fast lane both call it): a token was
    sent and equals the session's, compared in constant time."""
    if not sent:
        return False
    return hmac.compare_digest(sent.encode(), expected.encode())
