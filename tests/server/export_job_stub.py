"""The export job process (:func:`preflab.server.export_job.main`, unchanged) with one step held,
so that a test can act while a job is in that step:

``python export_job_stub.py preflab.server.export_job MODE JOB_ID`` (the database from
``$PREFLAB_DB``; the first argument is the word a server knows its job processes by)

- ``read``: the export stays in its ``read`` phase (the first of both the streaming and the
  in-memory pipeline), calling its progress callback every 50 ms (so a cancel is seen at the
  next call, as in a long phase);
- ``write``: the export writes its files into its temporary directory, prints ``written`` and
  sleeps (a process that does not stop by itself).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from preflab.io.export import pipeline
from preflab.server import export_job


def hold_read() -> None:
    real = export_job.Pulse.progress

    def progress(self: export_job.Pulse, phase: str, done: int, total: int) -> None:
        while phase == "read":
            real(self, phase, done, total)  # raises Cancelled once the cancel is seen
            time.sleep(0.05)
        real(self, phase, done, total)

    export_job.Pulse.progress = progress  # type: ignore[method-assign]


def hold_write() -> None:
    real = pipeline._publish

    def publish(engine: Any, project: str, exporter: Any, options: Any, write: Any) -> Any:
        def held(tmp: Any) -> dict[str, Any]:
            manifest: dict[str, Any] = write(tmp)  # every file is in the temporary directory
            print("written", flush=True)
            time.sleep(3600)
            return manifest

        return real(engine, project, exporter, options, held)

    pipeline._publish = publish


if __name__ == "__main__":
    _, mode, job = sys.argv[1:4]
    {"read": hold_read, "write": hold_write}[mode]()
    sys.exit(export_job.main([job]))
