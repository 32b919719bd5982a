"""Export jobs: an export started from the web app runs in a process of its own
(:mod:`preflab.server.export_job`), with progress, cancel, and files to download when done.

Lifecycle of an ``export_jobs`` row (:class:`~preflab.store.server_models.ExportJob`):

- ``queued``: :func:`create_job` checks the options with ``preflab export``'s rules (a bad one
  is a 422 before any row is written) and the server starts the process (:class:`~.export_runner.Runner`).
- ``running``: the process claimed the row with one ``UPDATE ... WHERE status = 'queued'``
  (:func:`claim`), so whatever the number of server workers or processes started for it, one
  runs it; it writes its phase, progress and a heartbeat every :data:`HEARTBEAT_S`.
- ``done`` (``result``: the export log id, the files with their SHA-256, the manifest's summary
  and warnings), ``failed`` (``error``: what went wrong, in words) or ``cancelled``.

Cancel (:func:`request_cancel`): a queued job is cancelled at once; a running one is marked, its
process stops at its next progress call, and the server that took the request ends the
process group if it has not stopped after a few seconds. The export's temporary
directory goes with it (:func:`remove_partial`).

The server's side (starting the processes, watching them, enforcing a cancel, the restart rule
that makes a job whose process is gone ``failed``): :mod:`.export_runner`.
"""

from __future__ import annotations

import logging
import shutil
import socket
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection, CursorResult, Update, func, select, update
from sqlalchemy.orm import Session

from .. import audit
from ..io.export.base import ExportError
from ..store.models import utcnow
from ..store.repo import NotFound
from ..store.server_models import ExportJob, User
from .errors import ServiceError
from .export_options import build

log = logging.getLogger(__name__)

#: Seconds between two heartbeats of a running job's process (it reads the cancel mark then).
HEARTBEAT_S = 1.0
FINAL = ("done", "failed", "cancelled")
PAGE_LIMIT = 20


class Cancelled(Exception):
    """Raised in a job's process to stop its export (a cancel, or the row is no longer its)."""


def this_host() -> str:
    return socket.gethostname()[:255]


def remove_partial(out_dir: str | Path) -> None:
    """The temporary directories an export into ``out_dir`` left (a process killed while it
    wrote: the exporter writes into ``.NAME.tmp-*`` beside it and renames)."""
    out = Path(out_dir)
    if not out.parent.is_dir():
        return
    for tmp in out.parent.glob(f".{out.name}.tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)


def changed(where: Session | Connection, stmt: Update) -> int:
    """Rows an ``UPDATE`` changed (its ``WHERE`` is the condition a transition needs)."""
    return cast(CursorResult[Any], where.execute(stmt)).rowcount


# -- the rows -----------------------------------------------------------------------------------


def create_job(
    session: Session,
    *,
    project_pk: int,
    project_name: str,
    requested_by: int | None,
    options: dict[str, Any],
    exports_dir: Path,
) -> ExportJob:
    """A queued job, its options checked as ``preflab export`` checks them (422 when not)."""
    forced, reason = bool(options.get("force")), (options.get("force_reason") or "").strip()
    if forced and not reason:
        raise ServiceError(
            422,
            "force needs a reason: say why this export may go below the agreement floor "
            "(it is kept with the job and in the audit log)",
            [
                {
                    "loc": ["body", "force_reason"],
                    "msg": "required when force is true",
                    "type": "missing",
                }
            ],
        )
    if reason and not forced:
        raise ServiceError(
            422,
            "force_reason is only for a forced export (force: true)",
            [{"loc": ["body", "force_reason"], "msg": "only with force", "type": "value_error"}],
        )
    options = {**options, "force_reason": reason or None}
    try:
        build(options, exports_dir / project_name / "job")
    except ExportError as exc:
        raise ServiceError(422, str(exc)) from None
    job = ExportJob(
        project_pk=project_pk,
        requested_by=requested_by,
        options=options,
        status="queued",
        phase="queued",
        done_units=0,
        total_units=0,
        out_dir="",
        created_at=utcnow(),
    )
    session.add(job)
    session.flush()
    job.out_dir = str((exports_dir / project_name / f"job-{job.pk}").resolve())
    session.flush()
    return job


def get_job(session: Session, project_pk: int, job_pk: int) -> ExportJob:
    job = session.get(ExportJob, job_pk)
    if job is None or job.project_pk != project_pk:
        raise NotFound(f"no export job {job_pk} in this project")
    return job


def _iso(moment: datetime | None) -> str | None:
    return audit.as_utc(moment).isoformat() if moment is not None else None


def job_out(job: ExportJob, project: str, requested_by: str | None) -> dict[str, Any]:
    """A job as the API answers it (no server path: the export's folder name only)."""
    result = job.result or {}
    base = f"/api/v1/projects/{project}/export-jobs/{job.pk}/files/"
    files = [
        {"name": name, **info, "url": base + name}
        for name, info in sorted((result.get("files") or {}).items())
    ]
    return {
        "id": job.pk,
        "project": project,
        "status": job.status,
        "phase": job.phase,
        "done": job.done_units,
        "total": job.total_units,
        "options": job.options,
        "requested_by": requested_by,
        "out": Path(job.out_dir).name,
        "export_id": result.get("export_id"),
        "summary": result.get("summary") or [],
        "warnings": result.get("warnings") or [],
        "files": files,
        "error": job.error,
        "cancel_requested": job.cancel_requested_at is not None,
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "heartbeat_at": _iso(job.heartbeat_at),
    }


def _with_names(session: Session, jobs: list[ExportJob]) -> dict[int, str]:
    pks = {j.requested_by for j in jobs if j.requested_by is not None}
    if not pks:
        return {}
    return dict(session.execute(select(User.pk, User.username).where(User.pk.in_(pks))).all())


def jobs_out(session: Session, project: str, jobs: list[ExportJob]) -> list[dict[str, Any]]:
    names = _with_names(session, jobs)
    return [
        job_out(j, project, names.get(j.requested_by) if j.requested_by else None) for j in jobs
    ]


def list_jobs(
    session: Session, project_pk: int, *, before: int | None = None, limit: int = PAGE_LIMIT
) -> list[ExportJob]:
    """The project's jobs, newest first; ``before`` (a job id) pages back to older ones."""
    stmt = select(ExportJob).where(ExportJob.project_pk == project_pk)
    if before is not None:
        stmt = stmt.where(ExportJob.pk < before)
    return list(session.scalars(stmt.order_by(ExportJob.pk.desc()).limit(limit)))


def request_cancel(session: Session, job: ExportJob) -> str:
    """Cancel a queued job at once (``cancelled``) or mark a running one (``running``: its
    process stops, :meth:`.export_runner.Runner.enforce_cancel`); 409 for a finished job."""
    now = utcnow()
    queued = changed(
        session,
        update(ExportJob)
        .where(ExportJob.pk == job.pk, ExportJob.status == "queued")
        .values(status="cancelled", phase="cancelled", cancel_requested_at=now, finished_at=now),
    )
    if queued:
        return "cancelled"
    running = changed(
        session,
        update(ExportJob)
        .where(ExportJob.pk == job.pk, ExportJob.status == "running")
        .values(cancel_requested_at=func.coalesce(ExportJob.cancel_requested_at, now)),
    )
    if running:
        return "running"
    session.refresh(job)
    raise ServiceError(
        409, f"export job {job.pk} is {job.status}: only a queued or running job can be cancelled"
    )


def job_file(job: ExportJob, name: str) -> Path:
    """A file of a finished job: only a name its manifest lists (or the manifest itself), and
    never a path outside the job's directory; else ``NotFound``."""
    listed = set((job.result or {}).get("files") or {})
    base = Path(job.out_dir).resolve()
    path = (base / name).resolve()
    if job.status != "done" or name not in listed or base not in path.parents or not path.is_file():
        raise NotFound(f"export job {job.pk} has no file {name!r}")
    return path


# -- the process's side: claim, heartbeat, finish ----------------------------------------------------


def owned_by(pk: int, pid: int, host: str) -> Any:
    return (
        (ExportJob.pk == pk)
        & (ExportJob.status == "running")
        & (ExportJob.worker_pid == pid)
        & (ExportJob.worker_host == host)
    )


def claim(conn: Connection, pk: int, pid: int, host: str) -> bool:
    """Take a queued job (one ``UPDATE``: of several claimants exactly one gets it)."""
    now = utcnow()
    return bool(
        changed(
            conn,
            update(ExportJob)
            .where(ExportJob.pk == pk, ExportJob.status == "queued")
            .values(
                status="running",
                phase="starting",
                worker_pid=pid,
                worker_host=host,
                started_at=now,
                heartbeat_at=now,
            ),
        )
    )


def beat(
    conn: Connection, pk: int, pid: int, host: str, phase: str, done: int, total: int
) -> tuple[bool, bool]:
    """Write progress and the heartbeat; ``(still this process's job, cancel asked)``."""
    ours = changed(
        conn,
        update(ExportJob)
        .where(owned_by(pk, pid, host))
        .values(heartbeat_at=utcnow(), phase=phase[:40], done_units=done, total_units=total),
    )
    asked = conn.scalar(select(ExportJob.cancel_requested_at).where(ExportJob.pk == pk))
    return bool(ours), asked is not None


def finish(
    session: Session,
    pk: int,
    pid: int,
    host: str,
    status: str,
    *,
    result: dict[str, Any] | None = None,
    error: str | None = None,
    progress: tuple[int, int] = (0, 0),
) -> bool:
    """End the job this process runs, with its last ``(done, total)``; False when it is no
    longer its (failed by a sweep)."""
    done, total = progress
    values: dict[str, Any] = {
        "status": status,
        "phase": status,
        "finished_at": utcnow(),
        "done_units": total if status == "done" else done,
        "total_units": total,
    }
    if result is not None:
        values["result"] = result
    if error is not None:
        values["error"] = error
    return bool(changed(session, update(ExportJob).where(owned_by(pk, pid, host)).values(values)))


def requester(session: Session, job: ExportJob) -> audit.Actor:
    user = session.get(User, job.requested_by) if job.requested_by is not None else None
    return user if user is not None else audit.SYSTEM
