"""The REST API under ``/api/v1``, one module per concern: ``auth`` (the caller's own account),
``users`` (site administration), ``projects``, ``export_jobs`` (exports in the background), ``items`` (and rubrics), ``review``, ``audit``.
``labelling`` holds next task, release, submit and skip (the two hot ones are also served by
:mod:`preflab.server.fastlane`); the caller's own labels and revise are in :mod:`preflab.server.api`.

Handlers are thin: parse, call a service (:mod:`preflab.server.queries`, ``review``, ``files``,
``auth``, ``projects``, ``judging``), shape the answer. Each declares a ``response_model``
(:mod:`.models`) and exactly one ``guard(action)`` (:mod:`preflab.server.permissions`).
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI


def routers() -> list[APIRouter]:
    """Every router of the REST API, in the order they are matched."""
    from .. import api
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
        api.router,
        my_labels.router,  # a rater edits their own recent labels
    ]


def include_all(app: FastAPI) -> None:
    for router in routers():
        app.include_router(router)
