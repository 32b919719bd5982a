"""Page handlers. Each one: the REST API's guard, a read through a service
(:mod:`preflab.server.services`, the same functions the REST routes call), a template. A
service's error is the page's error message (:func:`error_page`), never an empty page. Changes
happen in the browser through the REST API."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, date, datetime, time
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy import select

from ... import __version__, audit
from ...schema import JUDGMENT_KINDS, describe_need
from ...schema.policy import settings_of
from ...store import repo
from ...store.models import Project
from ...store.server_models import SKIP_REASONS
from .. import auth, export_jobs, snapshot
from ..errors import ServiceError
from ..permissions import SESSION_COOKIE, Ctx, ProjectCtx, _authenticate, guard
from ..services import assist, browse, extra_raters, files, queries, review_pages
from ..services import review as review_service
from ..services import revisions as revision_service
from ..services.browse import BrowseFilters
from . import TEMPLATES, data, panels
from .render import markdown, steps_of
from .span_render import marked_text, marks_spans, span_markdown
from .trajectory import step_blocks, step_suggestions, trajectory_view, with_masks

router = APIRouter(include_in_schema=False)

env = Environment(
    loader=FileSystemLoader(str(TEMPLATES)),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
env.filters["markdown"] = markdown
env.filters["steps"] = steps_of
env.filters["span_markdown"] = span_markdown
env.globals["marks_spans"] = marks_spans
env.globals["marked_text"] = marked_text
env.filters["step_blocks"] = step_blocks
env.globals["version"] = __version__


def pretty_call(call: Any) -> str:
    """A tool call as readable JSON (a JSON-string ``arguments`` decoded); escaped by Jinja."""
    import json

    def decode(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (_maybe_json(x) if k == "arguments" else decode(x)) for k, x in v.items()}
        return v

    def _maybe_json(x: Any) -> Any:
        try:
            return json.loads(x) if isinstance(x, str) else x
        except ValueError:
            return x

    return json.dumps(decode(call), indent=2, ensure_ascii=False, default=str)


env.filters["pretty_call"] = pretty_call


def call_args(call: Any, limit: int = 120) -> str:
    """A tool call's arguments on one line (OpenAI ``function.arguments`` or trajectory ``args``),
    cut at ``limit`` characters; the full call is in the collapsible block below it."""
    import json

    fn = call.get("function") if isinstance(call, dict) else None
    args = (
        fn.get("arguments")
        if isinstance(fn, dict)
        else (call.get("args") if isinstance(call, dict) else None)
    )
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    text = (
        args
        if isinstance(args, str)
        else json.dumps(args, ensure_ascii=False, separators=(", ", ": "))
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


env.filters["call_args"] = call_args


def answer_text(candidate: dict[str, Any]) -> str:
    """A candidate's answer as raw text (assistant turns of a conversation), for step splitting."""
    if candidate.get("text") is not None:
        return candidate["text"]
    return "\n\n".join(
        m.get("content") or ""
        for m in candidate.get("messages") or []
        if m.get("role") == "assistant"
    )


env.filters["answer_text"] = answer_text


def num(value: Any, fmt: str = "%.3f") -> str:
    """A statistic for display: '—' when undefined (None or NaN)."""
    import math

    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt % value


env.filters["num"] = num

PAIRWISE_SCALE = [  # key, winner, strength, label
    (1, "a", 3, "A much better"),
    (2, "a", 2, "A better"),
    (3, "a", 1, "A slightly better"),
    (4, "tie", 0, "Tie"),
    (5, "b", 1, "B slightly better"),
    (6, "b", 2, "B better"),
    (7, "b", 3, "B much better"),
]
env.globals["PAIRWISE_SCALE"] = PAIRWISE_SCALE
env.globals["SKIP_REASONS"] = SKIP_REASONS


def render(
    request: Request, template: str, ctx: Ctx | None = None, http_status: int = 200, **values: Any
) -> HTMLResponse:
    actor = ctx.actor if ctx else None
    html = env.get_template(template).render(
        request=request, user=actor, csrf=actor.csrf_token if actor else "", **values
    )
    return HTMLResponse(html, status_code=http_status, headers={"Cache-Control": "no-store"})


def error_page(request: Request, status: int, detail: str) -> HTMLResponse:
    """A styled error page with a way back (to the project the address names, when it names one)."""
    parts = request.url.path.split("/")
    back = f"/p/{parts[2]}" if len(parts) > 3 and parts[1] == "p" and parts[2] else None
    return render(
        request,
        "error.html",
        None,
        http_status=status,
        status_code=status,
        detail=detail,
        back=back,
        back_name="the project" if back else None,
    )


#: A row id in a path, bounded to a signed 64-bit integer (as the REST API's ``DbId``).
DbId = Annotated[int, PathParam(ge=1, le=2**63 - 1)]


def read(request: Request, service: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """``service(session, *args, **kw)`` in a read transaction, as the JSON the REST API
    answers for it (the page shows what the API shows); a service error propagates to the
    page's error message."""
    with _db(request).reading() as s:
        return orjson.loads(orjson.dumps(service(s, *args, **kw)))


def _db(request: Request):
    return request.app.state.db


def _local(target: str | None) -> str:
    """Only same-site paths after login (no open redirect): the rule is auth's."""
    from ..auth import safe_redirect_path

    return safe_redirect_path(target)


# -- public ---------------------------------------------------------------------------------------


@router.get("/login")
def login_page(
    request: Request,
    next: str | None = Query(default=None, max_length=2000),
    ctx: Ctx = guard("public"),
) -> Response:
    with _db(request).reading() as s:
        try:
            actor = _authenticate(request, s) if request.cookies.get(SESSION_COOKIE) else None
        except Exception:  # an expired cookie: log in again
            actor = None
    if actor is not None:
        return RedirectResponse(_local(next), status_code=303)
    resp = render(request, "login.html", None, next=_local(next))
    if request.cookies.get(SESSION_COOKIE):
        resp.delete_cookie(SESSION_COOKIE, path="/")  # a stale cookie would block the login call
    return resp


@router.get("/invite/{token}")
def invite_page(request: Request, token: str, ctx: Ctx = guard("public")) -> Response:
    return render(request, "invite.html", None, token=token)


@router.get("/reset/{token}")
def reset_page(request: Request, token: str, ctx: Ctx = guard("public")) -> Response:
    # a used, expired or replaced link says so at once, not after a password is typed
    with _db(request).reading() as s:
        state = auth.reset_link_state(s, token)
    return render(request, "reset.html", None, token=token, state=state)


# -- everyone ----------------------------------------------------------------------------------------


@router.get("/")
def home(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    projects = read(request, queries.visible_projects, ctx.user.user_pk, is_admin=ctx.user.is_admin)
    with _db(request).reading() as s:
        for p in projects:
            pk = s.scalar(select(Project.pk).where(Project.name == p["name"]))
            p["progress"] = data.project_progress(s, pk, ctx.user.user_pk)
    return render(request, "home.html", ctx, projects=projects)


@router.get("/account")
def account(request: Request, ctx: Ctx = guard("authenticated")) -> Response:
    me = read(request, queries.me, ctx.user)
    creds = read(request, queries.credentials, ctx.user.user_pk)
    return render(request, "account.html", ctx, me=me, credentials=creds)


def _project_bits(request: Request, ctx: ProjectCtx) -> dict[str, Any]:
    project = read(request, queries.project, ctx.project, ctx.role, ctx.user)
    rubric = read(request, queries.rubric, ctx.project)
    if rubric is not None and "dimensions" not in rubric:
        rubric = None
    return {
        "project": project,
        "rubric": rubric,
        "policy": settings_of(ctx.project.settings).policy,
    }


@router.get("/p/{project}")
def project_page(
    request: Request, project: str, ctx: ProjectCtx = guard("project.view")
) -> Response:
    bits = _project_bits(request, ctx)
    status = revisions = None
    recent: list[dict[str, Any]] = []
    if ctx.role == "rater":
        status = read(request, queries.my_status, ctx.project.pk, ctx.user.user_pk)
        revisions = read(request, queries.my_revision_requests, ctx.project.pk, ctx.user.user_pk)
        mine = read(
            request, queries.my_judgments, ctx.project.pk, ctx.user.user_pk, after=0, limit=1000
        )
        recent = list(reversed(mine))[:10]
    with _db(request).reading() as s:
        progress = data.project_progress(s, ctx.project.pk, ctx.user.user_pk)
        closed = revision_service.editable(
            s, ctx.project.pk, ctx.user.user_pk, [j["judgment_id"] for j in recent]
        )
    sent_back = {r["judgment_id"] for r in revisions or []}
    return render(
        request,
        "project.html",
        ctx,
        role=ctx.role,
        status=status,
        revisions=revisions or [],
        progress=progress,
        recent=recent,
        sent_back=sent_back,
        closed=closed,
        **bits,
    )


@router.get("/p/{project}/label")
def label_page(
    request: Request,
    project: str,
    kind: str | None = Query(default=None, max_length=40),
    ctx: ProjectCtx = guard("project.label"),
) -> Response:
    bits = _project_bits(request, ctx)
    to_record: list[dict[str, Any]] | None = None  # AI assistance: the lease's record to store
    with _db(request).reading() as s:
        task = data.live_task(s, ctx.project, ctx.user.user_pk)
        progress = data.label_progress(
            s, ctx.project, ctx.user.user_pk, ctx.user.session_pk, task is not None
        )
        if task is not None:  # masked turns of an imported trajectory (a display copy; masks only)
            meta = data.item_metadata(s, ctx.project, task["item"]["id"])
            task = {**task, "item": with_masks(task["item"], meta)}
            if bits["policy"].imported_step_verdicts == "suggestion":
                task["step_suggestions"] = step_suggestions(meta)
            if bits["policy"].ai_assist or task.get("step_suggestions"):
                # AI assistance (services/assist.py): none on gold; what is shown is recorded
                task["suggestion"], steps_ok, to_record = assist.served(
                    s,
                    ctx.project.pk,
                    bits["policy"],
                    task["assignment_id"],
                    task.get("step_suggestions"),
                )
                if not steps_ok:
                    task.pop("step_suggestions", None)
    if task is not None and to_record:
        with _db(request).writing() as s:
            assist.record(s, ctx.project.pk, task["assignment_id"], to_record)
    # Only the kinds this item can take (the assignment engine's task payload says which).
    kinds = task["kinds"] if task else ctx.project.kinds
    status = read(request, queries.my_status, ctx.project.pk, ctx.user.user_pk)
    chosen, kind = kind, (kind if kind in kinds else (kinds[0] if kinds else None))
    kind_note = _kind_note(task, chosen, kind, ctx.project.kinds) if task else None
    return render(
        request,
        "label.html",
        ctx,
        task=task,
        kind=kind,
        kinds=kinds,
        status=status,
        mode="label",
        initial=None,
        kind_note=kind_note,
        progress=progress,
        chosen_kind=chosen if chosen in ctx.project.kinds else None,
        **bits,
    )


def _kind_note(
    task: dict[str, Any], chosen: str | None, kind: str | None, project_kinds: list[str]
) -> str | None:
    """Why the page shows another kind than the one asked for, or no widget at all."""
    n = len(task["item"]["candidates"])
    if kind is None:
        needs = "; ".join(f"{k} needs {describe_need(k)}" for k in project_kinds)
        return (
            f"This item has {n} answer{'s' if n != 1 else ''}, and no kind this project collects fits it "
            f"({needs}). Release it below; an admin should fix the item or the project's kinds."
        )
    if chosen and chosen != kind and chosen in JUDGMENT_KINDS:
        return (
            f"This item has {n} answer{'s' if n != 1 else ''}, so it cannot be labelled as {chosen} "
            f"({chosen} needs {describe_need(chosen)}); showing {kind}. Your choice stays for the next item."
        )
    return None


@router.get("/p/{project}/revise/{judgment_id}")
def revise_page(
    request: Request, project: str, judgment_id: DbId, ctx: ProjectCtx = guard("project.label")
) -> Response:
    revisions = read(request, queries.my_revision_requests, ctx.project.pk, ctx.user.user_pk)
    rev = next((r for r in revisions if r["judgment_id"] == judgment_id), None)
    if rev is None:
        return error_page(
            request, 404, f"judgment {judgment_id} is not waiting for a revision of yours"
        )
    return judgment_page(
        request,
        ctx,
        item=rev["item"],
        shown_order=rev["shown_order"],
        judgment_id=judgment_id,
        kind=rev["your_judgment"].get("kind", ctx.project.kinds[0]),
        initial=rev["your_judgment"],
        mode="revise",
        note=rev["note"],
    )


def judgment_page(
    request: Request,
    ctx: ProjectCtx,
    *,
    item: dict[str, Any],
    shown_order: list[str] | None,
    judgment_id: int,
    kind: str,
    initial: dict[str, Any],
    mode: str,
    note: str | None,
) -> Response:
    """The label page over a stored judgment, pre-filled, in the order the rater saw: ``revise``
    (sent back, with the reviewer's note) or ``edit`` (the rater's own change); the page posts
    a new revision."""
    order = shown_order or [c["id"] for c in item["candidates"]]
    by_id = {c["id"]: c for c in item["candidates"]}
    item = {**item, "candidates": [by_id[c] for c in order if c in by_id]}
    phase = "revision" if mode == "revise" else "edit"
    task = {
        "item": item,
        "shown_order": order,
        "phase": phase,
        "judgment_id": judgment_id,
        "note": note,
    }
    status = read(request, queries.my_status, ctx.project.pk, ctx.user.user_pk)
    return render(
        request,
        "label.html",
        ctx,
        task=task,
        kind=kind,
        kinds=[kind],
        status=status,
        mode=mode,
        initial=initial,
        **_project_bits(request, ctx),
    )


@router.get("/p/{project}/qualification")
def qualification_page(
    request: Request, project: str, ctx: ProjectCtx = guard("project.label")
) -> Response:
    status = read(request, queries.my_status, ctx.project.pk, ctx.user.user_pk)
    return render(
        request,
        "qualification.html",
        ctx,
        project=read(request, queries.project, ctx.project, ctx.role, ctx.user),
        status=status,
    )


# -- reviewers -----------------------------------------------------------------------------------------


@router.get("/p/{project}/review")
def review_page(
    request: Request,
    project: str,
    share: float | None = Query(default=None, ge=0, le=1),
    after: str | None = Query(default=None, min_length=1, max_length=200),
    limit: int = Query(default=review_pages.DEFAULT_LIMIT, ge=1, le=review_pages.MAX_LIMIT),
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    """One page of the review queues (:func:`review_pages.queues_page`), "previous" and "next"
    links between pages; a cursor of an earlier snapshot shows the first page with a note."""
    db = _db(request)
    recomputed = False
    try:
        queues = review_pages.queues_page(db, ctx.project, after=after, limit=limit, share=share)
    except ServiceError as e:
        if e.status != 409:
            raise
        queues = review_pages.queues_page(db, ctx.project, limit=limit, share=share)
        recomputed = True
    with db.reading() as s:
        skips = review_service.skip_summary(s, ctx.project)
    return render(
        request,
        "review.html",
        ctx,
        project=read(request, queries.project, ctx.project, ctx.role, ctx.user),
        queues=queues,
        skips=skips,
        recomputed=recomputed,
        share=share,
    )


@router.get("/p/{project}/review/item/{item_id}")
def review_item_page(
    request: Request, project: str, item_id: str, ctx: ProjectCtx = guard("project.review")
) -> Response:
    bits = _project_bits(request, ctx)
    with _db(request).reading() as s:
        review = review_service.item_review(s, ctx.project, item_id)
    # the next open item of the adjudication queue, for "next item" after recording a final label
    next_item = review_pages.next_open_item(_db(request), ctx.project, item_id)
    item = review["item"]
    order = [c["id"] for c in item["candidates"]]
    task = {"item": item, "shown_order": order, "phase": "adjudication"}
    kind = next((j["kind"] for j in review["judgments"]), ctx.project.kinds[0])
    names = {c: "AB"[i] if len(order) == 2 else str(i + 1) for i, c in enumerate(order)}
    return render(
        request,
        "review_item.html",
        ctx,
        review=review,
        task=task,
        kind=kind,
        kinds=[kind],
        mode="adjudicate",
        initial=None,
        names=names,
        next_item=next_item,
        trajectory=trajectory_view(item),
        **bits,
    )


# -- admins ---------------------------------------------------------------------------------------------


@router.get("/admin")
def admin_page(request: Request, ctx: Ctx = guard("site.admin")) -> Response:
    projects = read(request, queries.visible_projects, ctx.user.user_pk, is_admin=ctx.user.is_admin)
    users = read(request, queries.users)
    for u in users:
        u["credentials"] = read(request, queries.user_credentials, u["username"])
    return render(
        request, "admin.html", ctx, projects=projects, users=users, kinds=list(JUDGMENT_KINDS)
    )


@router.get("/admin/audit")
def audit_page(
    request: Request,
    action: str | None = Query(default=None, max_length=60),
    actor: str | None = Query(default=None, max_length=200),
    since: str = Query(default="", max_length=10, description="YYYY-MM-DD (UTC); empty: any"),
    before: int | None = Query(default=None, ge=1, le=2**63 - 1),
    ctx: Ctx = guard("site.admin"),
) -> Response:
    """The audit log for site admins: filters by action, actor and day, 100 events a page
    (an empty field of the filter form means no filter)."""
    filters = {"action": action or None, "actor": (actor or "").strip() or None}
    try:
        day = date.fromisoformat(since) if since else None
    except ValueError:
        day = None
    start = datetime.combine(day, time.min, tzinfo=UTC) if day else None
    with _db(request).reading() as s:
        events = audit.events(s, **filters, since=start, before=before, limit=AUDIT_PAGE + 1)
    older = events[AUDIT_PAGE - 1]["id"] if len(events) > AUDIT_PAGE else None
    for e in events:
        e["details_text"] = orjson.dumps(e["details"], option=orjson.OPT_SORT_KEYS).decode()
    return render(
        request,
        "audit.html",
        ctx,
        events=events[:AUDIT_PAGE],
        actions=sorted(audit.ACTIONS),
        filters={**filters, "since": day.isoformat() if day else ""},
        older=older,
    )


AUDIT_PAGE = 100


@router.get("/admin/p/{project}")
def admin_project_page(
    request: Request, project: str, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    bits = _project_bits(request, ctx)
    members = read(request, queries.members, ctx.project.pk)
    history = read(request, queries.settings_versions, ctx.project.pk)
    with _db(request).reading() as s:
        versions = files.rubric_versions(s, ctx.project.pk)
    policy_json = orjson.dumps(
        bits["policy"].model_dump(mode="json"), option=orjson.OPT_INDENT_2
    ).decode()
    return render(
        request,
        "admin_project.html",
        ctx,
        members=members,
        history=list(reversed(history))[:20],
        versions=versions,
        policy_json=policy_json,
        **bits,
    )


@router.get("/admin/p/{project}/import")
def admin_import_page(
    request: Request, project: str, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    return render(
        request,
        "admin_import.html",
        ctx,
        project=read(request, queries.project, ctx.project, ctx.role, ctx.user),
    )


@router.get("/admin/p/{project}/dashboard")
def dashboard_page(
    request: Request, project: str, ctx: ProjectCtx = guard("project.review")
) -> Response:
    # starts a refresh, never computes one; the panels but the near-duplicate pks (not shown)
    snap = snapshot.current(_db(request), ctx.project, panels="shown")
    with _db(request).reading() as s:
        # the counts that read every judgment: now for a small project, else the snapshot's
        q = review_service.quality_summary(s, ctx.project, counts=snap.inline)
        if not snap.inline:
            q.update(data.snapshot_counts(s, ctx.project, snap))
        dash = data.dashboard(s, ctx.project, q, snap)
        dash["skips"] = review_service.skip_summary(s, ctx.project)
        dash["extra_raters"] = extra_raters.figures(
            s, ctx.project.pk, settings_of(ctx.project.settings).policy
        )
    return render(
        request,
        "dashboard.html",
        ctx,
        project=read(request, queries.project, ctx.project, ctx.role, ctx.user),
        q=q,
        dash=dash,
        can_manage=ctx.user.is_admin or ctx.role == "admin",
        min_slope_pairs=panels.MIN_SLOPE_PAIRS,
    )


@router.get("/admin/p/{project}/data")
def data_page(
    request: Request,
    project: str,
    filters_in: BrowseFilters = Depends(),
    after: int = Query(default=0, ge=0, le=2**62),
    offset: int = Query(default=0, ge=0, le=10**9),
    ctx: ProjectCtx = guard("project.review"),
) -> Response:
    # an empty form field means no filter
    filters: dict[str, Any] = {
        k: v if isinstance(v, bool) else (v or None) for k, v in asdict(filters_in).items()
    }
    db = _db(request)
    dups, snap = snapshot.near_duplicates(db, ctx.project)
    with db.reading() as s:
        found = browse.browse(
            s,
            ctx.project,
            browse.Filters(**filters),
            after=after,
            offset=offset,
            near_duplicates=dups,
        )
    return render(
        request,
        "data.html",
        ctx,
        project=read(request, queries.project, ctx.project, ctx.role, ctx.user),
        found=found,
        filters=filters,
        snap=snap,
        scan_budget=browse.SCAN_BUDGET,
    )


@router.get("/admin/p/{project}/export")
def export_page(
    request: Request, project: str, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    try:
        from ...io.export import EXPORT_FORMATS

        choices = [
            (name, getattr(e, "description", "")) for name, e in sorted(EXPORT_FORMATS.items())
        ]
    except ImportError:  # EXPORTER HOOK: the page still renders; the API answers 501
        choices = []
    with _db(request).reading() as s:
        history = data.past_exports(s, ctx.project.pk)
        jobs = export_jobs.jobs_out(s, ctx.project.name, export_jobs.list_jobs(s, ctx.project.pk))
    return render(
        request,
        "export.html",
        ctx,
        project=read(request, queries.project, ctx.project, ctx.role, ctx.user),
        formats=choices,
        history=history,
        jobs=jobs,
        final=export_jobs.FINAL,
    )


_ = repo


# -- blind evaluation (preflab.evaluate) ----------------------------------------------------------------


@router.get("/admin/p/{project}/leaderboard")
def leaderboard_page(
    request: Request, project: str, ctx: ProjectCtx = guard("project.manage")
) -> Response:
    """Model ratings and win rates of a blind evaluation; names models, so admins only."""
    from markupsafe import Markup

    from ...evaluate import report as ev

    report = ev.build_report(ev.load_verdicts(_db(request).engine, ctx.project.name))
    domains = [(d, v["battles"], ev.pair_rows(v["pairs"])) for d, v in report["domains"].items()]
    return render(
        request,
        "admin_leaderboard.html",
        ctx,
        project=read(request, queries.project, ctx.project, ctx.role, ctx.user),
        report=report,
        svg=Markup(ev.leaderboard_svg(report["ratings"])),  # escaped inside
        rating_header=ev.RATING_HEADER,
        rating_table=ev.rating_rows(report["ratings"]),
        pair_header=ev.PAIR_HEADER,
        pair_table=ev.pair_rows(report["pairs"]),
        domain_tables=domains if len(domains) > 1 or ev.NO_DOMAIN not in report["domains"] else [],
    )


@router.get("/p/{project}/edit/{judgment_id}")
def edit_page(
    request: Request, project: str, judgment_id: DbId, ctx: ProjectCtx = guard("project.label")
) -> Response:
    """The label page over one of the rater's own labels, to edit it (409 saying why once a
    reviewer acted on it)."""
    try:
        with _db(request).reading() as s:
            label = revision_service.label_to_edit(s, ctx.project.pk, ctx.user.user_pk, judgment_id)
    except ServiceError as exc:
        return error_page(request, exc.status, exc.message)
    return judgment_page(
        request,
        ctx,
        item=label["item"],
        shown_order=label["shown_order"],
        judgment_id=judgment_id,
        kind=label["kind"],
        initial=label["initial"],
        mode="edit",
        note=None,
    )
