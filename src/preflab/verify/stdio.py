"""The stdin/stdout verifier (the competitive-programming shape): each case runs the candidate's
program afresh in the same minimal root as a function-level candidate (no harness, no expected
output, nothing of the host but the system and the interpreter), with the case's input on stdin;
its stdout comes back over a pipe, capped, and is compared here, outside its sandbox."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from .code import _own, _write_files, start_candidate
from .result import Verdict
from .sandbox import (
    Limits,
    claim_uid,
    ensure_available,
    stop,
    wait_or_kill,
)
from .tasks import StdioTask

MAX_OUTPUT = 4 * 1024 * 1024


def same_output(expected: str, actual: str, compare: str) -> bool:
    if compare == "exact":
        return expected == actual
    if compare == "lines":
        strip = [line.rstrip() for line in expected.rstrip().splitlines()]
        return strip == [line.rstrip() for line in actual.rstrip().splitlines()]
    return expected.split() == actual.split()


def verify_stdio(task: StdioTask, program: str, *, limits: Limits | None = None) -> Verdict:
    limits = limits or Limits(wall_s=task.timeout_s, cpu_s=int(task.timeout_s) + 1)
    ensure_available()
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        uid = stack.enter_context(claim_uid()) if os.geteuid() == 0 else None
        tests: dict[str, str] = {}
        problems: list[str] = []
        for k, case in enumerate(task.cases):
            outcome, problem = _run_case(task, program, case.input, case.output, limits, uid)
            tests[f"case {k}"] = outcome
            if problem:
                problems.append(f"case {k}: {problem}")
    failed = [name for name, outcome in tests.items() if outcome != "passed"]
    reward = 0.0 if failed else 1.0
    if not failed:
        reason = f"all {len(tests)} cases passed"
    else:
        reason = "; ".join(problems[:3]) or ("cases failed: " + ", ".join(failed[:5]))
    return Verdict(
        task_id=task.task_id,
        kind="stdio",
        reward=reward,
        reason=reason,
        f2p_exit=int(bool(failed)),
        tests=tests,
        wall_s=time.monotonic() - started,
    )


def _run_case(
    task: StdioTask, program: str, given: str, expected: str, limits: Limits, uid: int | None
) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="preflab-stdio-") as tmp:
        work = Path(tmp)
        home, new_root = work / "home", work / "root"
        home.mkdir()
        new_root.mkdir()
        os.chmod(work, 0o711)
        _write_files(home, {task.solution_path: program})
        _own(home, uid)
        command = [sys.executable, "-I", "-B", str(home / task.solution_path)]
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        proc = start_candidate(
            command,
            work=work,
            new_root=new_root,
            home=home,
            keep=[],
            uid=uid,
            limits=limits,
            fds={3: stdin_r, 4: stdout_w},
            log=work / "output.log",
            edit_script=_stdio_on_pipes,
        )
        os.close(stdin_r)
        os.close(stdout_w)
        received = bytearray()
        reader = threading.Thread(target=_drain, args=(stdout_r, received), daemon=True)
        reader.start()
        writer = threading.Thread(target=_feed, args=(stdin_w, given.encode()), daemon=True)
        writer.start()
        timed_out = wait_or_kill(proc, limits.wall_s)
        stop(proc, uid)
        reader.join(timeout=5)
        tail = (work / "output.log").read_bytes()[-400:].decode("utf-8", "replace").strip()
    if timed_out:
        return "failed", f"timed out after {limits.wall_s:g}s"
    if proc.returncode != 0:
        return "failed", f"exited with {proc.returncode}: {tail[-200:]}"
    if len(received) > MAX_OUTPUT:
        return "failed", f"more than {MAX_OUTPUT} bytes of output"
    actual = received.decode("utf-8", "replace")
    if same_output(expected, actual, task.compare):
        return "passed", ""
    return "failed", "wrong output"


def _stdio_on_pipes(script: str) -> str:
    """The case's stdin and stdout are the pipes placed at 3 and 4 (stderr stays the log)."""
    head, _, last = script.rpartition("\n")
    return f"{head}\nexec 0<&3 1>&4 3<&- 4>&-\n{last}"


def _drain(fd: int, sink: bytearray) -> None:
    with os.fdopen(fd, "rb", buffering=0) as stream:
        while chunk := stream.read(65536):
            if len(sink) <= MAX_OUTPUT:
                sink.extend(chunk[: MAX_OUTPUT + 1 - len(sink)])


def _feed(fd: int, data: bytes) -> None:
    try:
        with os.fdopen(fd, "wb", buffering=0) as stream:
            stream.write(data)
    except OSError:  # the program exited without reading all of it
        pass
