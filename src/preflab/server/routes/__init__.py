"""The REST API under ``/api/v1``, one module per concern: ``auth`` (the caller's own account),
``users`` (site administration), ``projects``, ``items`` (and rubrics), ``review``, ``audit``.
The labelling routes are in :mod:`preflab.server.api` and :mod:`preflab.server.webapi`.

Handlers are thin: parse, call a service (:mod:`preflab.server.queries`, ``review``, ``files``,
``auth``, ``projects``, ``judging``), shape the answer. Each declares a ``response_model``
(:mod:`.models`) and exactly one ``guard(action)`` (:mod:`preflab.server.permissions`).
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI


def routers() -> list[APIRouter]:
    """Every router of the REST API, in the order they are matched."""
    from .. import api, webapi
    from . import audit, auth, items, my_labels, projects, review, users

    return [
        auth.router,
        users.router,
        projects.router,
        items.router,
        review.router,
        audit.router,
        api.router,
        webapi.router,
        my_labels.router,  # a rater edits their own recent labels
    ]


def include_all(app: FastAPI) -> None:
    for router in routers():
        app.include_router(router)
