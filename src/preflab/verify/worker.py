"""Judge workers: math parsing and SQL queries run in a separate, resource-capped process that is
killed at the deadline, from any thread.

A timeout that raises in the caller (``signal.alarm``, what math-verify uses) only works on the
main thread of the main interpreter, and not at all inside one long C call (a big-integer power,
one SQLite function call): verl calls its reward function from an executor thread, where
math-verify's timeout is off. A process can always be killed. So each verifier sends its job to a
persistent worker process (:mod:`._worker_main`) and waits for the reply with a deadline; past
the deadline the worker gets ``SIGKILL``, the job is a :class:`JobTimeout`, and a fresh worker
is started at once (its start-up is not charged to any job's limit: a job waits for its worker
to be ready before its clock starts). Each worker caps its own address space (``RLIMIT_AS``),
so a job that tries to allocate more fails there, not in the caller.

Workers are pooled per kind and memory cap: a thread takes an idle worker (or starts one), so
concurrent callers never queue behind each other; up to :data:`MAX_IDLE` idle workers are kept
(a math worker holds ~60 MiB, an SQL worker ~15 MiB).
A forked child does not inherit its parent's workers (it starts its own). Replies are unpickled
with every class refused: plain data only (numbers, strings, bytes, lists, tuples, dicts).
"""

from __future__ import annotations

import atexit
import io
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

WORKER_MAIN = Path(__file__).with_name("_worker_main.py")
START_TIMEOUT_S = 120.0  # a cold interpreter importing sympy on a loaded machine
MAX_IDLE = 32  # per kind: as many as ever ran at once, so a trainer's reward threads never wait


class JobTimeout(Exception):
    """The job ran past its limit; its worker was killed."""


class JobFailed(Exception):
    """The worker could not run the job (it died, or its reply was refused); the message says
    why."""


class _PlainData(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"a judge worker's reply names {module}.{name}: refused")


def _plain_loads(data: bytes) -> Any:
    return _PlainData(io.BytesIO(data)).load()


class _Worker:
    def __init__(self, kind: str, memory_mb: int) -> None:
        self.kind, self.memory_mb = kind, memory_mb
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", str(WORKER_MAIN), kind, str(memory_mb)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
        except OSError as e:
            raise JobFailed(f"could not start a judge worker: {e}") from e
        self._buffer = bytearray()
        self._ready = False

    def call(self, job: dict[str, Any], timeout_s: float, max_reply_bytes: int) -> dict[str, Any]:
        if not self._ready:
            self._receive(time.monotonic() + START_TIMEOUT_S, 1 << 16, starting=True)
            self._ready = True
        body = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
        assert self.proc.stdin is not None  # started with stdin=PIPE
        try:
            self.proc.stdin.write(len(body).to_bytes(8, "little") + body)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise JobFailed(f"the judge worker is gone ({self._exit()})") from e
        return self._receive(time.monotonic() + timeout_s, max_reply_bytes, starting=False)

    def _receive(self, deadline: float, max_bytes: int, *, starting: bool) -> dict[str, Any]:
        assert self.proc.stdout is not None  # started with stdout=PIPE
        fd = self.proc.stdout.fileno()
        poller = select.poll()  # not select(): a trainer may hold more than 1024 descriptors
        poller.register(fd, select.POLLIN)
        size = None
        while True:
            if size is None and len(self._buffer) >= 8:
                size = int.from_bytes(self._buffer[:8], "little")
                if size > max_bytes:
                    raise JobFailed(f"the reply is larger than {max_bytes} bytes")
            if size is not None and len(self._buffer) >= 8 + size:
                frame = bytes(self._buffer[8 : 8 + size])
                del self._buffer[: 8 + size]
                try:
                    reply = _plain_loads(frame)
                except Exception as e:
                    raise JobFailed(f"a reply that is not plain data ({e})") from e
                if not isinstance(reply, dict):
                    raise JobFailed("a reply that is not a message")
                return reply
            left = deadline - time.monotonic()
            if left <= 0:
                if starting:
                    raise JobFailed(f"the judge worker did not start in {START_TIMEOUT_S:g} s")
                raise JobTimeout()
            if not poller.poll(max(1, int(left * 1000))):
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise JobFailed(f"the judge worker stopped ({self._exit()})")
            self._buffer += chunk

    def _exit(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "still running"
        if code == -9:
            return "killed: SIGKILL, the kernel's out-of-memory killer or a person"
        if code < 0:
            return f"killed by signal {-code}"
        return f"exit code {code}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


class _Pool:
    def __init__(self, kind: str, memory_mb: int) -> None:
        self.kind, self.memory_mb = kind, memory_mb
        self.idle: list[_Worker] = []
        self.lock = threading.Lock()

    def take(self) -> _Worker:
        with self.lock:
            while self.idle:
                worker = self.idle.pop()
                if worker.alive():
                    return worker
                worker.kill()
        return _Worker(self.kind, self.memory_mb)

    def give_back(self, worker: _Worker) -> None:
        with self.lock:
            if worker.alive() and len(self.idle) < MAX_IDLE:
                self.idle.append(worker)
                return
        worker.kill()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for worker in idle:
            worker.kill()


_POOLS: dict[tuple[str, int], _Pool] = {}
_POOLS_LOCK = threading.Lock()


def _pool(kind: str, memory_mb: int) -> _Pool:
    with _POOLS_LOCK:
        pool = _POOLS.get((kind, memory_mb))
        if pool is None:
            pool = _POOLS[(kind, memory_mb)] = _Pool(kind, memory_mb)
        return pool


def run_job(
    kind: str,
    job: dict[str, Any],
    *,
    timeout_s: float,
    memory_mb: int,
    max_reply_bytes: int = 1 << 20,
) -> Any:
    """The value a judge worker of ``kind`` computes for ``job`` (``timeout_s`` is passed to it
    too), within ``timeout_s`` seconds; raises :class:`JobTimeout` (the worker was killed) or
    :class:`JobFailed`."""
    pool = _pool(kind, memory_mb)
    worker = pool.take()
    try:
        reply = worker.call({**job, "timeout_s": timeout_s}, timeout_s, max_reply_bytes)
    except JobTimeout:
        worker.kill()
        try:
            pool.give_back(
                _Worker(kind, memory_mb)
            )  # its replacement starts now, in the background
        except JobFailed:
            pass  # the next job tries again, and says why if it cannot
        raise
    except BaseException:  # JobFailed, or KeyboardInterrupt in the caller while it works
        worker.kill()
        raise
    pool.give_back(worker)  # an error reply too: the job failed, the worker is fine
    if "error" in reply:
        raise JobFailed(str(reply["error"]))
    return reply.get("value")


def close_all() -> None:
    """Stop every idle worker of this process (at exit; a later job starts new ones)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
    for pool in pools:
        pool.close()


def _forget_after_fork() -> None:
    global _POOLS, _POOLS_LOCK
    for pool in _POOLS.values():  # the parent's workers: close our copies of their pipes only
        for worker in pool.idle:
            for pipe in (worker.proc.stdin, worker.proc.stdout):
                try:
                    if pipe is not None:
                        pipe.close()
                except OSError:
                    pass
            worker.proc.returncode = 0  # not our child: never wait for it
    _POOLS, _POOLS_LOCK = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(close_all)
