"""Export jobs: an export started from the web app runs in a process of its own
(:mod:`preflab.server.export_job`), with progress, cancel, and files to download when done.

Lifecycle of an ``export_jobs`` row (:class:`~preflab.store.server_models.ExportJob`):

- ``queued``: :func:`create_job` checks the options with ``preflab export``'s rules (a bad one
  is a 422 before any row is written) and the server starts the process (:class:`Runner`).
- ``running``: the process claimed the row with one ``UPDATE ... WHERE status = 'queued'``
  (:func:`claim`), so whatever the number of server workers or processes started for it, one
  runs it; it writes its phase, progress and a heartbeat every :data:`HEARTBEAT_S`.
- ``done`` (``result``: the export log id, the files with their SHA-256, the manifest's summary
  and warnings), ``failed`` (``error``: what went wrong, in words) or ``cancelled``.

Cancel (:func:`request_cancel`): a queued job is cancelled at once; a running one is marked, its
process stops at its next progress call, and the server that took the request ends the
process group if it has not stopped after :data:`CANCEL_GRACE_S` seconds. The export's temporary
directory goes with it (:func:`remove_partial`).

Never silently lost: a ``running`` job whose process is gone (its pid no longer an export
process on this host; on another host, no heartbeat for :data:`STALE_S`) becomes ``failed`` with
:data:`RESTART_REASON` when a server starts, and with :data:`LOST_REASON` when a running
server notices (its watcher of the processes it started, a sweep every :data:`SWEEP_S`).
Queued jobs are started when a server starts.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection, CursorResult, Update, func, or_, select, update
from sqlalchemy.orm import Session

from .. import audit
from ..io.export.base import ExportError
from ..store.models import utcnow
from ..store.repo import NotFound
from ..store.server_models import ExportJob, User
from .database import Database
from .export_options import build
from .flow.submit import JudgingError

log = logging.getLogger(__name__)

#: Seconds between two heartbeats of a running job's process (it reads the cancel mark then).
HEARTBEAT_S = 1.0
#: A running job without a heartbeat for this long has lost its process.
STALE_S = 60.0
#: Seconds between two sweeps for lost jobs in a running server.
SWEEP_S = 30.0
#: Seconds a running job has to stop after a cancel before its process group is terminated
#: (SIGTERM), and then killed (SIGKILL) after as many again.
CANCEL_GRACE_S = 5.0
RESTART_REASON = "the server stopped while this export ran; start it again"
LOST_REASON = "the export process stopped before it finished; start it again"
FINAL = ("done", "failed", "cancelled")
WORKER_MODULE = "preflab.server.export_job"
PAGE_LIMIT = 20


class Cancelled(Exception):
    """Raised in a job's process to stop its export (a cancel, or the row is no longer its)."""


def this_host() -> str:
    return socket.gethostname()[:255]


def export_process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live export job process on this host (a reused pid is not; a
    zombie, which has no command line, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.parent.exists():  # no /proc: believe the signal
        return True
    try:
        return WORKER_MODULE.encode() in cmdline.read_bytes()
    except OSError:
        return False


def signal_group(pid: int, sig: int) -> None:
    """``sig`` to the job process's group (it leads one: started in a session of its own)."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


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
        raise JudgingError(
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
        raise JudgingError(
            422,
            "force_reason is only for a forced export (force: true)",
            [{"loc": ["body", "force_reason"], "msg": "only with force", "type": "value_error"}],
        )
    options = {**options, "force_reason": reason or None}
    try:
        build(options, exports_dir / project_name / "job")
    except ExportError as exc:
        raise JudgingError(422, str(exc)) from None
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
    process stops, :meth:`Runner.enforce_cancel`); 409 for a finished job."""
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
    raise JudgingError(
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


def _ours(pk: int, pid: int, host: str) -> Any:
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
        .where(_ours(pk, pid, host))
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
    return bool(changed(session, update(ExportJob).where(_ours(pk, pid, host)).values(values)))


def requester(session: Session, job: ExportJob) -> audit.Actor:
    user = session.get(User, job.requested_by) if job.requested_by is not None else None
    return user if user is not None else audit.SYSTEM


# -- the server's side: start, watch, cancel, recover ---------------------------------------------------


def fail_lost(db: Database, reason: str, *, stale_s: float = STALE_S) -> list[int]:
    """Make ``failed`` every running job whose process is gone: on this host, its pid is no
    export process any more; on another host (its pid cannot be looked at from here), no
    heartbeat for ``stale_s`` seconds. A live process of this host is never judged by its
    heartbeat (a SQLite import holding the write lock for minutes delays beats; a hung one is
    cancelled). Returns the jobs failed."""
    host = this_host()
    cutoff = utcnow() - timedelta(seconds=stale_s)
    with db.reading() as s:
        running = s.execute(
            select(ExportJob.pk, ExportJob.worker_pid, ExportJob.worker_host, ExportJob.out_dir)
            .where(ExportJob.status == "running")
            .order_by(ExportJob.pk)
        ).all()
    lost = []
    for pk, pid, worker_host, out_dir in running:
        here = worker_host == host and pid is not None
        if pid is not None and here and export_process_alive(pid):
            continue
        where = [
            ExportJob.pk == pk,
            ExportJob.status == "running",
            ExportJob.worker_pid == pid if pid is not None else ExportJob.worker_pid.is_(None),
        ]
        if not here:  # judged by its heartbeat, read in the same statement
            where.append(or_(ExportJob.heartbeat_at.is_(None), ExportJob.heartbeat_at < cutoff))
        with db.writing() as s:
            failed = changed(
                s,
                update(ExportJob)
                .where(*where)
                .values(status="failed", phase="failed", error=reason, finished_at=utcnow()),
            )
        if failed:
            remove_partial(out_dir)
            lost.append(pk)
            log.warning("export job %s failed: %s", pk, reason, extra={"export_job": pk})
    return lost


class Runner:
    """The export job processes this server process started, and its sweep for lost ones."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None

    def start(self, pk: int) -> None:
        """Start the process of job ``pk`` (it claims the job; a second process for the same
        job finds it claimed and exits). A process that cannot start fails the job."""
        package_root = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH")
        env = {
            **os.environ,
            "PREFLAB_DB": self.db.url,  # not on the command line: the URL may hold a password
            "PYTHONPATH": package_root + (os.pathsep + path if path else ""),
        }
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE, str(pk)],
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: cancel ends it and its children
            )
        except OSError as exc:
            self._fail_queued(pk, f"the export process could not start: {exc}")
            return
        threading.Thread(
            target=self._watch, args=(proc, pk), name=f"export-job-{pk}", daemon=True
        ).start()

    def _fail_queued(self, pk: int, reason: str) -> None:
        with self.db.writing() as s:
            changed(
                s,
                update(ExportJob)
                .where(ExportJob.pk == pk, ExportJob.status == "queued")
                .values(status="failed", phase="failed", error=reason, finished_at=utcnow()),
            )

    def _watch(self, proc: subprocess.Popen[bytes], pk: int) -> None:
        """Reap the process; a job it left running (killed, out of memory) becomes failed."""
        code = proc.wait()
        try:
            if code != 0:
                self._fail_queued(
                    pk, f"the export process exited with code {code} before it started"
                )
            with self.db.writing() as s:
                out_dir = s.scalar(select(ExportJob.out_dir).where(ExportJob.pk == pk))
                left = changed(
                    s,
                    update(ExportJob)
                    .where(_ours(pk, proc.pid, this_host()))
                    .values(
                        status="failed",
                        phase="failed",
                        error=f"{LOST_REASON} (exit code {code})",
                        finished_at=utcnow(),
                    ),
                )
            if left and out_dir:
                remove_partial(out_dir)
                log.warning("export job %s: its process exited with code %s", pk, code)
        except Exception:  # the database went away with the server: the next start sweeps
            log.exception("export job %s: could not record its process's end", pk)

    def enforce_cancel(self, pk: int) -> None:
        """In the background: end the job's process group if it has not stopped after
        :data:`CANCEL_GRACE_S` (SIGTERM, then SIGKILL), and record the job cancelled."""
        threading.Thread(
            target=self._enforce, args=(pk,), name=f"export-cancel-{pk}", daemon=True
        ).start()

    def _running(self, pk: int) -> tuple[int | None, str | None, str] | None:
        with self.db.reading() as s:
            row = s.execute(
                select(ExportJob.worker_pid, ExportJob.worker_host, ExportJob.out_dir).where(
                    ExportJob.pk == pk, ExportJob.status == "running"
                )
            ).first()
        return None if row is None else (row[0], row[1], row[2])

    def _wait_stopped(self, pk: int, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._running(pk) is None:
                return True
            time.sleep(0.2)
        return self._running(pk) is None

    def _enforce(self, pk: int) -> None:
        try:
            if self._wait_stopped(pk, CANCEL_GRACE_S):
                return
            running = self._running(pk)
            if running is None:
                return
            pid, host, out_dir = running
            if pid is None or host != this_host():
                return  # another host's process: it reads the mark, or the sweep fails it
            for sig in (signal.SIGTERM, signal.SIGKILL):
                signal_group(pid, sig)
                if self._wait_stopped(pk, CANCEL_GRACE_S):
                    return
            with self.db.writing() as s:
                s.execute(
                    update(ExportJob)
                    .where(_ours(pk, pid, host))
                    .values(status="cancelled", phase="cancelled", finished_at=utcnow())
                )
            remove_partial(out_dir)
        except Exception:
            log.exception("export job %s: could not enforce its cancel", pk)

    def recover(self) -> None:
        """At start-up: running jobs whose process is gone become failed
        (:data:`RESTART_REASON`); queued jobs are started. A failure here is logged and does
        not stop the server (the sweep tries again)."""
        try:
            fail_lost(self.db, RESTART_REASON)
            with self.db.reading() as s:
                queued = list(
                    s.scalars(
                        select(ExportJob.pk)
                        .where(ExportJob.status == "queued")
                        .order_by(ExportJob.pk)
                    )
                )
            for pk in queued:
                self.start(pk)
        except Exception:
            log.exception("export jobs: the restart rule could not run")
        self._sweeper = threading.Thread(target=self._sweep, name="export-sweep", daemon=True)
        self._sweeper.start()

    def _sweep(self) -> None:
        while not self._stop.wait(SWEEP_S):
            try:
                fail_lost(self.db, LOST_REASON)
            except Exception:
                log.exception("export job sweep failed")

    def close(self) -> None:
        """Stop the sweep (the shutdown). Running jobs go on: their processes outlive the
        server, and the next server finds them running, or failed."""
        self._stop.set()
        if self._sweeper is not None:
            self._sweeper.join(5)


__all__ = [
    "CANCEL_GRACE_S",
    "FINAL",
    "HEARTBEAT_S",
    "LOST_REASON",
    "RESTART_REASON",
    "Cancelled",
    "Runner",
    "claim",
    "create_job",
    "fail_lost",
    "finish",
    "job_file",
    "job_out",
    "jobs_out",
    "list_jobs",
]
