"""The REST API under ``/api/v1``, one module per concern: ``auth`` (the caller's own account),
``users`` (site administration), ``projects``, ``export_jobs`` (exports in the background), ``items`` (and rubrics), ``review``, ``audit``.
``labelling`` holds next task, release, submit and skip (the two hot ones are also served by
:mod:`preflab.server.fastlane`); ``my_labels`` the caller's own labels, revise and edit.

Handlers are thin: parse, call a service (:mod:`preflab.server.services`, and ``auth``),
shape the answer; no route module imports another (the shared helpers are ``common`` and the
answer models ``models``). Each declares a ``response_model``
(:mod:`.models`) and exactly one ``guard(action)`` (:mod:`preflab.server.permissions`).
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI


def routers() -> list[APIRouter]:
    """Every router of the REST API, in the order they are matched."""
    from . import audit, auth, export_jobs, items, labelling, my_labels, projects, review, users

    return [
        auth.router,
        users.router,
        projects.router,
        export_jobs.router,
        items.router,
        review.router,
        audit.router,
        labelling.router,
        my_labels.router,  # the caller's own labels: status, revise, edit
    ]


def include_all(app: FastAPI) -> None:
    for router in routers():
        app.include_router(router)
