"""One entry point for every verifier: ``verify(task, completion) -> Verdict``."""

from __future__ import annotations

import time
from collections.abc import Mapping

from .code import extract_code, verify_code
from .math_answer import verify_math
from .result import Verdict
from .sandbox import SandboxUnavailable
from .sql import verify_sql
from .stdio import verify_stdio
from .tasks import AnyTask, CodeTask, SqlTask, StdioTask


def verify(task: AnyTask, completion: str | Mapping[str, str]) -> Verdict:
    """Judge a completion (a model's raw text; for code also a ``{path: text}`` mapping).

    Never raises for anything the candidate wrote: every failure is reward 0 with a reason."""
    started = time.monotonic()
    try:
        if isinstance(task, CodeTask):
            files = extract_code(completion) if isinstance(completion, str) else completion
            return verify_code(task, files)
        if isinstance(task, StdioTask):
            if not isinstance(completion, str):
                program = completion.get(task.solution_path)
                if program is None:
                    raise ValueError(f"a stdio task runs {task.solution_path}; it is missing")
                return verify_stdio(task, program)
            return verify_stdio(task, extract_code(completion))
        if not isinstance(completion, str):
            raise TypeError(f"a {task.kind} task takes the completion as text")
        if isinstance(task, SqlTask):
            return verify_sql(task, completion)
        return verify_math(task, completion)
    except SandboxUnavailable:
        raise
    except (ValueError, TypeError, RecursionError, MemoryError) as e:
        return Verdict(
            task_id=task.task_id,
            kind=task.kind,
            reward=0.0,
            reason=f"could not verify: {type(e).__name__}: {e}",
            wall_s=time.monotonic() - started,
        )
