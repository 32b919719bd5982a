"""The process of one export job: ``python -m preflab.server.export_job JOB_ID`` (the database
from ``$PREFLAB_DB``, or ``--db URL``). The server starts it in a session of its own when the
job is created or found queued at start-up (:class:`preflab.server.export_runner.Runner`).

It claims the job (one conditional ``UPDATE``; a job another process holds is left alone, exit
0), runs the CLI's export (:func:`preflab.io.export.export_project`) with the job's options, and
a heartbeat thread writes the phase and progress every :data:`~.export_jobs.HEARTBEAT_S` and
reads the cancel mark. A cancel stops the export at its next progress call (:class:`Cancelled`
raised from the callback) or on SIGTERM; the exporter's temporary directory goes with it. The
job ends ``done`` (with the export log id, files and manifest summary, and the ``project.exported``
audit event of the user who asked), ``failed`` (the reason in words) or ``cancelled``.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from sqlalchemy import Engine, select

from .. import audit
from ..io.export import export_project
from ..io.export.base import ExportError
from ..io.export.manifest import manifest_summary
from ..logs import configure_logging
from ..settings import get_settings
from ..store import make_engine, session_factory, transaction
from ..store.models import ExportLog, Project
from ..store.repo import StoreError
from ..store.server_models import ExportJob
from .export_jobs import (
    HEARTBEAT_S,
    Cancelled,
    beat,
    claim,
    finish,
    remove_partial,
    requester,
    this_host,
)
from .export_options import build

log = logging.getLogger(__name__)


class Pulse:
    """The job's heartbeat thread and its progress callback (the export's ``progress``)."""

    def __init__(self, engine: Engine, pk: int, pid: int, host: str) -> None:
        self.engine, self.pk, self.pid, self.host = engine, pk, pid, host
        self.phase, self.done, self.total = "starting", 0, 0
        self.cancel = threading.Event()
        self.why = "cancelled"
        #: SIGTERM stops the export only while it runs (not once its files are published)
        self.interruptible = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="export-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def progress(self, phase: str, done: int, total: int) -> None:
        self.phase, self.done, self.total = phase, done, total
        if self.cancel.is_set():
            raise Cancelled(self.why)

    def beat_once(self) -> None:
        try:
            with self.engine.begin() as conn:
                ours, asked = beat(
                    conn, self.pk, self.pid, self.host, self.phase, self.done, self.total
                )
        except Exception:  # a busy database: the next beat tries again
            log.warning("export job %s: heartbeat failed", self.pk, exc_info=True)
            return
        if not ours:
            self.why = "the job is no longer this process's (failed by a server's sweep)"
            self.cancel.set()
        elif asked:
            self.cancel.set()

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.beat_once()

    def on_term(self, _signum: int, _frame: FrameType | None) -> None:
        if self.interruptible:
            raise Cancelled("terminated")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _result(engine: Engine, out_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """What the job keeps of its export: the log row, every file (the manifest's, and the
    manifest itself) with its SHA-256, rows, the summary and warnings."""
    with session_factory(engine)() as s:
        export_id = s.scalar(
            select(ExportLog.pk).where(ExportLog.path == str(out_dir)).order_by(ExportLog.pk.desc())
        )
    manifest_file = out_dir / "manifest.json"
    files = dict(manifest.get("files") or {})
    files["manifest.json"] = {
        "sha256": _sha256(manifest_file),
        "bytes": manifest_file.stat().st_size,
    }
    return {
        "export_id": export_id,
        "files": files,
        "rows_out": (manifest.get("counts") or {}).get("rows_out"),
        "summary": manifest_summary(manifest),
        "warnings": list(manifest.get("warnings") or []),
    }


def run(engine: Engine, pk: int) -> str | None:
    """Run job ``pk`` if this process can claim it; its final status, or None (not claimed)."""
    pid, host = os.getpid(), this_host()
    with engine.begin() as conn:
        if not claim(conn, pk, pid, host):
            log.info("export job %s: not queued (another process has it, or it ended)", pk)
            return None
    with session_factory(engine)() as s:
        job = s.get(ExportJob, pk)
        assert job is not None  # claimed just now
        project = s.scalar(select(Project.name).where(Project.pk == job.project_pk))
        options, out_dir = dict(job.options), Path(job.out_dir)
    pulse = Pulse(engine, pk, pid, host)
    pulse.start()
    previous = signal.signal(signal.SIGTERM, pulse.on_term)
    status, result, error = "failed", None, None
    manifest: dict[str, Any] | None = None
    try:
        export_options = build(options, out_dir)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        manifest = export_project(engine, str(project), export_options, progress=pulse.progress)
        pulse.interruptible = False
        status, result = "done", _result(engine, out_dir, manifest)
    except Cancelled as exc:
        status = "cancelled"
        log.info("export job %s cancelled: %s", pk, exc)
    except (ExportError, StoreError, ValueError, OSError) as exc:  # what the user can act on
        error = str(exc)
    except Exception as exc:
        log.exception("export job %s failed", pk)
        error = f"the export stopped on an internal error ({type(exc).__name__}: {exc}); see the server's log"
    finally:
        pulse.interruptible = False
        signal.signal(signal.SIGTERM, previous)
        pulse.stop()
    if status != "done":
        remove_partial(out_dir)
    with transaction(engine) as s:
        last = (pulse.done, pulse.total)
        if not finish(s, pk, pid, host, status, result=result, error=error, progress=last):
            log.warning(
                "export job %s: no longer this process's; its %s is not recorded", pk, status
            )
            return status
        if status == "done" and manifest is not None:
            job = s.get(ExportJob, pk)
            assert job is not None
            details = audit.export_details(str(options.get("format")), out_dir, manifest) | {
                "export_id": result["export_id"] if result else None,
                "job_id": pk,
                "source": "export-job",
            }
            if options.get("force"):
                details |= {"force": True, "force_reason": options.get("force_reason")}
            audit.record(
                s, requester(s, job), "project.exported", audit.target(str(project)), details
            )
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m preflab.server.export_job")
    parser.add_argument("job", type=int, help="the export job's id")
    parser.add_argument("--db", default=None, help="database URL (default: $PREFLAB_DB)")
    args = parser.parse_args(argv)
    settings = get_settings()
    configure_logging(settings.log_level, json=settings.log_format == "json")
    engine = make_engine(args.db or settings.db)
    try:
        run(engine, args.job)
    finally:
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
