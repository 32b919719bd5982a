"""The server's side of export jobs (:mod:`.export_jobs`): it starts a job's process, reaps it,
enforces a cancel, and applies the restart rule.

Never silently lost: a ``running`` job whose process is gone (its pid no longer an export
process on this host; on another host, no heartbeat for :data:`STALE_S`) becomes ``failed`` with
:data:`RESTART_REASON` when a server starts, and with :data:`LOST_REASON` when a running
server notices (its watcher of the processes it started, a sweep every :data:`SWEEP_S`).
Queued jobs are started when a server starts, and a cancel asked of a job still running on this
host is enforced again (the server that was enforcing it stopped).

Threads: the sweep, one watcher per process started (``export-job-PK``) and one per cancel being
enforced (``export-cancel-PK``). Each ends when its job ends, and all of them when the app shuts
down (:meth:`Runner.close`: they wait on its stop event, never in a sleep or a blocking
``wait()``, and are joined), so none outlives the app and its database: a job's process goes on
after a shutdown, and what a stopped watcher would have recorded the next server's restart rule
records.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from sqlalchemy import or_, select, update

from ..store.models import utcnow
from ..store.server_models import ExportJob
from .database import Database
from .export_jobs import changed, owned_by, remove_partial, this_host

log = logging.getLogger(__name__)

#: A running job without a heartbeat for this long has lost its process.
STALE_S = 60.0
#: Seconds between two sweeps for lost jobs in a running server.
SWEEP_S = 30.0
#: Seconds a running job has to stop after a cancel before its process group is terminated
#: (SIGTERM), and then killed (SIGKILL) after as many again.
CANCEL_GRACE_S = 5.0
#: Seconds between two looks of a watcher at its process or job (and at the app's shutdown).
POLL_S = 0.2
#: Seconds :meth:`Runner.close` waits for its threads, all together.
CLOSE_S = 10.0
RESTART_REASON = "the server stopped while this export ran; start it again"
LOST_REASON = "the export process stopped before it finished; start it again"
WORKER_MODULE = "preflab.server.export_job"


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
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()

    def _spawn(self, target: Callable[[int], None], pk: int, name: str) -> None:
        """Run ``target(pk)`` in a thread of its own, joined by :meth:`close`."""

        def run() -> None:
            try:
                target(pk)
            finally:
                with self._lock:
                    self._threads.discard(thread)

        thread = threading.Thread(target=run, name=name, daemon=True)
        with self._lock:
            if self._stop.is_set():  # the app is shutting down: nothing new starts
                return
            self._threads.add(thread)
        thread.start()

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
        self._spawn(lambda job: self._watch(proc, job), pk, f"export-job-{pk}")

    def _fail_queued(self, pk: int, reason: str) -> None:
        with self.db.writing() as s:
            changed(
                s,
                update(ExportJob)
                .where(ExportJob.pk == pk, ExportJob.status == "queued")
                .values(status="failed", phase="failed", error=reason, finished_at=utcnow()),
            )

    def _watch(self, proc: subprocess.Popen[bytes], pk: int) -> None:
        """Reap the process; a job it left running (killed, out of memory) becomes failed.
        At the app's shutdown the watcher stops and the process goes on."""
        while True:
            try:
                code = proc.wait(POLL_S)
                break
            except subprocess.TimeoutExpired:
                if self._stop.is_set():
                    return
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
                    .where(owned_by(pk, proc.pid, this_host()))
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
        self._spawn(self._enforce, pk, f"export-cancel-{pk}")

    def _running(self, pk: int) -> tuple[int | None, str | None, str] | None:
        with self.db.reading() as s:
            row = s.execute(
                select(ExportJob.worker_pid, ExportJob.worker_host, ExportJob.out_dir).where(
                    ExportJob.pk == pk, ExportJob.status == "running"
                )
            ).first()
        return None if row is None else (row[0], row[1], row[2])

    def _wait_stopped(self, pk: int, seconds: float) -> bool:
        """Whether job ``pk`` stopped running within ``seconds``, or the app is shutting
        down (then the enforcing ends: the cancel mark stays, the next server enforces it)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._running(pk) is None:
                return True
            if self._stop.wait(POLL_S):
                return True
        return self._stop.is_set() or self._running(pk) is None

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
                    .where(owned_by(pk, pid, host))
                    .values(status="cancelled", phase="cancelled", finished_at=utcnow())
                )
            remove_partial(out_dir)
        except Exception:
            log.exception("export job %s: could not enforce its cancel", pk)

    def recover(self) -> None:
        """At start-up: running jobs whose process is gone become failed
        (:data:`RESTART_REASON`); a cancel asked of a running job of this host is enforced;
        queued jobs are started. A failure here is logged and does not stop the server (the
        sweep tries again)."""
        try:
            fail_lost(self.db, RESTART_REASON)
            with self.db.reading() as s:
                cancelling = list(
                    s.scalars(
                        select(ExportJob.pk)
                        .where(
                            ExportJob.status == "running",
                            ExportJob.cancel_requested_at.is_not(None),
                            ExportJob.worker_host == this_host(),
                        )
                        .order_by(ExportJob.pk)
                    )
                )
            for pk in cancelling:
                self.enforce_cancel(pk)
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
        """Stop the sweep, the watchers and the cancels being enforced, and wait for them (the
        shutdown; at most :data:`CLOSE_S`). Running jobs go on: their processes outlive the
        server, and the next server finds them running, or failed."""
        deadline = time.monotonic() + CLOSE_S
        with self._lock:
            self._stop.set()
            threads = list(self._threads)
        if self._sweeper is not None:
            threads.append(self._sweeper)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
