"""Sandboxed verifiers for what an oracle can check: code (pytest), SQL (SQLite) and math.

``verify(task, completion)`` judges one completion; ``verify_many`` runs a batch on a worker
pool; :mod:`preflab.verify.adapters` plugs the same verifiers into TRL, verl and OpenRLHF.
"""

from .dispatch import verify
from .result import Verdict, fill_verifier_block
from .tasks import CodeTask, MathTask, SqlTask, TaskFileError, load_tasks, parse_task

__all__ = [
    "CodeTask",
    "MathTask",
    "SqlTask",
    "TaskFileError",
    "Verdict",
    "fill_verifier_block",
    "load_tasks",
    "parse_task",
    "verify",
]
