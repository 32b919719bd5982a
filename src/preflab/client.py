"""Python client of the preflab REST API (``/api/v1``).

    >>> from preflab.client import Client
    >>> c = Client("http://127.0.0.1:8000", token="plt_...")          # doctest: +SKIP
    >>> task = c.next_task("demo")                                      # doctest: +SKIP
    >>> c.submit("demo", task["assignment_id"], {"kind": "pairwise", "winner": "a", "strength": 2},
    ...          rationale="A is correct")                              # doctest: +SKIP

Errors raise :class:`ApiError` with the HTTP status and the server's message, which says what
to do next. Submissions carry an idempotency key (generated when not given), and transport
errors and "database busy" answers (503, ``Retry-After``) on submit are retried with the same key, so a
flaky network or a contended database never stores a label twice.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import httpx

API = "/api/v1"


#: Answers that mean "send the same request again shortly": the server rolled the transaction
#: back whole (serialization failure, deadlock, database locked, overloaded).
RETRYABLE = frozenset({503})


class ApiError(Exception):
    def __init__(
        self, status: int, detail: Any, errors: list | None = None, retry_after: float | None = None
    ) -> None:
        self.status, self.detail, self.errors = status, detail, errors or []
        self.retry_after = retry_after
        lines = [f"HTTP {status}: {detail}"] + [
            f"  {'.'.join(map(str, e.get('loc', [])))}: {e.get('msg')}" for e in self.errors
        ]
        super().__init__("\n".join(lines))


def _retry_after(r: httpx.Response) -> float | None:
    value = r.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: not sent by this server
        return None


class Client:
    """A small, typed wrapper over httpx; one instance per user (token or login session)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30,
        transport: httpx.BaseTransport | None = None,
        retries: int = 4,
        max_retry_wait: float = 10.0,
    ) -> None:
        """``retries``: how often a retryable answer (503) to a safe request is retried —
        reads, ``next_task`` (it resumes the live lease) and ``submit`` (same idempotency
        key) — honouring ``Retry-After`` up to ``max_retry_wait`` seconds."""
        self.retries, self.max_retry_wait = retries, max_retry_wait
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )
        self._csrf: str | None = None

    # -- plumbing -----------------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, retry: bool | None = None, **kw: Any) -> Any:
        """One API call. ``retry``: retry retryable answers (default: only for GET/HEAD; pass
        ``True`` for writes that are safe to repeat)."""
        headers = kw.pop("headers", {})
        if self._csrf and method not in ("GET", "HEAD", "OPTIONS"):
            headers["X-CSRF-Token"] = self._csrf
        if retry is None:
            retry = method in ("GET", "HEAD")
        attempt = 0
        while True:
            r = self._http.request(method, API + path, headers=headers, **kw)
            if r.status_code in RETRYABLE and retry and attempt < self.retries:
                time.sleep(self._retry_wait(r, attempt))
                attempt += 1
                continue
            break
        if r.status_code >= 400:
            try:
                body = r.json()
            except ValueError:
                body = {"detail": r.text}
            raise ApiError(r.status_code, body.get("detail"), body.get("errors"), _retry_after(r))
        if r.headers.get("content-type", "").startswith("application/json"):
            return r.json()
        return r.content

    def _retry_wait(self, r: httpx.Response, attempt: int) -> float:
        """The server's ``Retry-After`` when given, else exponential backoff; with jitter so
        many clients refused at once do not come back at once."""
        base = _retry_after(r)
        if base is None:
            base = 0.2 * 2**attempt
        return min(self.max_retry_wait, base) * random.uniform(0.5, 1.0)

    # -- auth ------------------------------------------------------------------------------------
    def login(self, username: str, password: str) -> dict:
        """Start a cookie session (the CSRF token is sent on later writes automatically)."""
        out = self.request("POST", "/auth/login", json={"username": username, "password": password})
        self._csrf = out["csrf_token"]
        return out

    def logout(self) -> dict:
        return self.request("POST", "/auth/logout")

    def me(self) -> dict:
        return self.request("GET", "/auth/me")

    def create_token(self, name: str = "", ttl_days: int | None = None) -> dict:
        return self.request("POST", "/auth/tokens", json={"name": name, "ttl_days": ttl_days})

    def tokens(self) -> list[dict]:
        return self.request("GET", "/auth/tokens")

    def revoke_token(self, token_id: int) -> dict:
        return self.request("DELETE", f"/auth/tokens/{token_id}")

    def accept_invite(self, token: str, username: str, password: str) -> dict:
        return self.request(
            "POST", f"/invites/{token}/accept", json={"username": username, "password": password}
        )

    def claim_credential(self, domain: str, evidence: str = "") -> dict:
        return self.request(
            "POST", "/me/credentials", json={"domain": domain, "evidence": evidence}
        )

    def my_credentials(self) -> list[dict]:
        return self.request("GET", "/me/credentials")

    # -- site admin --------------------------------------------------------------------------------
    def create_user(
        self,
        username: str,
        password: str | None = None,
        *,
        is_admin: bool = False,
        email: str | None = None,
    ) -> dict:
        return self.request(
            "POST",
            "/users",
            json={"username": username, "password": password, "is_admin": is_admin, "email": email},
        )

    def users(self) -> list[dict]:
        return self.request("GET", "/users")

    def update_user(self, username: str, **changes: Any) -> dict:
        return self.request("PATCH", f"/users/{username}", json=changes)

    def user_credentials(self, username: str) -> list[dict]:
        return self.request("GET", f"/users/{username}/credentials")

    def verify_credential(self, username: str, domain: str, verified: bool = True) -> dict:
        return self.request(
            "POST", f"/users/{username}/credentials/{domain}/verify", json={"verified": verified}
        )

    # -- projects -------------------------------------------------------------------------------------
    def projects(self) -> list[dict]:
        return self.request("GET", "/projects")

    def create_project(
        self,
        name: str,
        *,
        kinds: list[str] | None = None,
        title: str = "",
        guidelines: str = "",
        policy: dict | None = None,
    ) -> dict:
        body: dict[str, Any] = {
            "name": name,
            "title": title,
            "kinds": kinds or ["pairwise"],
            "guidelines": guidelines,
        }
        if policy is not None:
            body["policy"] = policy
        return self.request("POST", "/projects", json=body)

    def project(self, project: str) -> dict:
        return self.request("GET", f"/projects/{project}")

    def update_settings(self, project: str, *, note: str = "", **changes: Any) -> dict:
        return self.request(
            "PATCH", f"/projects/{project}/settings", json={**changes, "note": note}
        )

    def settings_history(self, project: str) -> list[dict]:
        return self.request("GET", f"/projects/{project}/settings/history")

    def members(self, project: str) -> list[dict]:
        return self.request("GET", f"/projects/{project}/members")

    def set_member(self, project: str, username: str, role: str) -> dict:
        return self.request("PUT", f"/projects/{project}/members/{username}", json={"role": role})

    def remove_member(self, project: str, username: str) -> dict:
        return self.request("DELETE", f"/projects/{project}/members/{username}")

    def invite(
        self, project: str, role: str = "rater", *, email: str | None = None, ttl_hours: int = 72
    ) -> dict:
        return self.request(
            "POST",
            f"/projects/{project}/invites",
            json={"role": role, "email": email, "ttl_hours": ttl_hours},
        )

    def add_rubric(self, project: str, rubric: dict) -> dict:
        return self.request("POST", f"/projects/{project}/rubrics", json=rubric)

    def rubric(self, project: str, version: int | None = None) -> dict:
        return self.request(
            "GET", f"/projects/{project}/rubric", params={"version": version} if version else None
        )

    def import_items(self, project: str, items: list[dict]) -> dict:
        return self.request("POST", f"/projects/{project}/items", json={"items": items})

    def items(self, project: str, after: int = 0, limit: int = 100) -> list[dict]:
        return self.request(
            "GET", f"/projects/{project}/items", params={"after": after, "limit": limit}
        )

    def item(self, project: str, item_id: str) -> dict:
        return self.request("GET", f"/projects/{project}/items/{item_id}")

    # -- labelling ---------------------------------------------------------------------------------------
    def next_task(self, project: str) -> dict | None:
        """The next task, or ``None`` (see :meth:`next_task_raw` for the reason)."""
        return self.next_task_raw(project)["task"]

    def next_task_raw(self, project: str) -> dict:
        # safe to repeat: while a lease is live the same task comes back
        return self.request("POST", f"/projects/{project}/assignments/next", retry=True)

    def release(self, project: str, assignment_id: str) -> dict:
        return self.request("POST", f"/projects/{project}/assignments/{assignment_id}/release")

    def submit(
        self,
        project: str,
        assignment_id: str,
        judgment: dict,
        *,
        rationale: str | None = None,
        telemetry: dict | None = None,
        idempotency_key: str | None = None,
        retries: int = 3,
    ) -> dict:
        """Submit a judgment for a live assignment; dropped connections and 503s are retried with the same key."""
        body_j = dict(judgment)
        if rationale is not None:
            body_j["rationale"] = rationale
        body = {
            "assignment_id": assignment_id,
            "judgment": body_j,
            "telemetry": telemetry,
            "idempotency_key": idempotency_key or uuid.uuid4().hex,
        }
        # Safe to repeat with the same idempotency key: the first stored answer comes back.
        # 503s are retried inside request(); dropped connections here.
        for attempt in range(retries + 1):
            try:
                return self.request("POST", f"/projects/{project}/judgments", json=body, retry=True)
            except httpx.TransportError:
                if attempt == retries:
                    raise
                time.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")

    def my_status(self, project: str) -> dict:
        return self.request("GET", f"/projects/{project}/my/status")

    def my_judgments(self, project: str, after: int = 0, limit: int = 100) -> list[dict]:
        return self.request(
            "GET", f"/projects/{project}/my/judgments", params={"after": after, "limit": limit}
        )

    def my_revisions(self, project: str) -> list[dict]:
        return self.request("GET", f"/projects/{project}/my/revisions")

    def revise(
        self, project: str, judgment_id: int, judgment: dict, *, idempotency_key: str | None = None
    ) -> dict:
        return self.request(
            "POST",
            f"/projects/{project}/judgments/{judgment_id}/revise",
            json={"judgment": judgment, "idempotency_key": idempotency_key or uuid.uuid4().hex},
        )

    def edit(
        self, project: str, judgment_id: int, judgment: dict, *, idempotency_key: str | None = None
    ) -> dict:
        """Edit one of your own labels until a reviewer acts on it: a new revision (the old one
        is kept); 409 with the reason once a reviewer has acted."""
        return self.request(
            "POST",
            f"/projects/{project}/judgments/{judgment_id}/edit",
            json={"judgment": judgment, "idempotency_key": idempotency_key or uuid.uuid4().hex},
        )

    # -- review and quality ---------------------------------------------------------------------------------
    def judgments(
        self, project: str, after: int = 0, limit: int = 100, item_id: str | None = None
    ) -> list[dict]:
        params: dict[str, Any] = {"after": after, "limit": limit}
        if item_id:
            params["item_id"] = item_id
        return self.request("GET", f"/projects/{project}/judgments", params=params)

    def send_back(self, project: str, judgment_id: int, note: str) -> dict:
        return self.request(
            "POST", f"/projects/{project}/judgments/{judgment_id}/send-back", json={"note": note}
        )

    def raters(self, project: str) -> list[dict]:
        return self.request("GET", f"/projects/{project}/raters")

    def reinstate(self, project: str, username: str, note: str) -> dict:
        return self.request(
            "POST", f"/projects/{project}/raters/{username}/reinstate", json={"note": note}
        )

    def quality(self, project: str) -> dict:
        return self.request("GET", f"/projects/{project}/quality")

    def export(self, project: str, format: str = "jsonl") -> dict:
        return self.request("POST", f"/projects/{project}/exports", json={"format": format})

    def export_file(self, project: str, export_id: int, filename: str) -> bytes:
        return self.request("GET", f"/projects/{project}/exports/{export_id}/files/{filename}")
