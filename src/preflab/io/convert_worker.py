"""The importer's converting process: ``python -m preflab.io.convert_worker`` (started by
:func:`preflab.io.importer.import_files` for large files; not meant to be run by hand)."""

from __future__ import annotations

import sys

from .importer.worker import convert_worker_main

if __name__ == "__main__":
    convert_worker_main(sys.stdin.buffer, sys.stdout.buffer)
