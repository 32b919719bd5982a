"""A judge worker: the process that parses math answers or runs SQL queries for the verifiers.

Started by :mod:`preflab.verify.worker` as ``python -P <this file> <kind> <memory MiB>``; not
meant to be run by hand. It imports nothing of the ``preflab`` package (whose ``__init__`` pulls
in the code verifier and pydantic): only the job module of its kind, loaded from the file next to
it (``_math_judge.py``, ``_sql_judge.py``). ``-P`` keeps this directory off ``sys.path``, where
``code.py`` would shadow the standard library's module of that name.

Before anything else it caps its address space (``RLIMIT_AS``, soft and hard: nothing in it can
raise the cap again); before each job it sets its CPU-time limit to what it has used plus the
job's limit and a margin, so a worker whose parent died mid-job still ends (``SIGXCPU``).

Protocol, on the inherited stdin/stdout pipes (both moved to private descriptors, so a stray
``print`` in a library cannot corrupt a frame): frames of an 8-byte little-endian length and a
pickle. The worker first sends ``{"ready": pid}`` once its job module is imported and warmed up;
then for each job dict it receives it sends ``{"value": ...}`` or ``{"error": "..."}``, plain
data only (the parent unpickles it with every class refused). End of stdin: it exits.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import resource
import signal
import sys
from pathlib import Path

JOBS = {"math": "_math_judge.py", "sql": "_sql_judge.py"}
CPU_MARGIN_S = 5


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(fd: int):
    head = _read_exact(fd, 8)
    if head is None:
        return None
    body = _read_exact(fd, int.from_bytes(head, "little"))
    return None if body is None else pickle.loads(body)  # written by our own parent


def _send(fd: int, message) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    for part in (len(body).to_bytes(8, "little"), body):
        view = memoryview(part)
        while view:
            view = view[os.write(fd, view) :]


def _load(kind: str):
    path = Path(__file__).with_name(JOBS[kind])
    spec = importlib.util.spec_from_file_location(f"preflab_judge_{kind}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cpu_backstop(limit_s: float) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(used + limit_s) + CPU_MARGIN_S
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def main(kind: str, memory_mb: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's; it ends us
    channel_in, channel_out = os.dup(0), os.dup(1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    cap = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    job_module = _load(kind)
    job_module.warm_up()
    _send(channel_out, {"ready": os.getpid()})
    while (job := _receive(channel_in)) is not None:
        _cpu_backstop(float(job.get("timeout_s", 60)))
        try:
            reply = {"value": job_module.run(job)}
        except MemoryError:
            reply = {"error": f"memory limit of the judge worker ({memory_mb} MiB) reached"}
        except RecursionError:
            reply = {"error": "nesting too deep (recursion limit reached)"}
        except Exception as e:  # reported as the verdict's reason
            reply = {"error": f"{type(e).__name__}: {e}"}
        try:
            _send(channel_out, reply)
        except MemoryError:
            _send(channel_out, {"error": f"reply over the memory limit ({memory_mb} MiB)"})
        del job, reply


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
