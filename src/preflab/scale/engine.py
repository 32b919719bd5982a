"""Where the per-shard work runs: in this process (``sync``) or on a Dask cluster.

``sync`` applies the function shard by shard and folds the results with
:class:`~preflab.quality.mergeable.TreeFold` (memory: one shard plus ``log2(n)`` partial
states). ``local:N`` starts a ``distributed.LocalCluster`` of ``N`` worker processes (one thread
each); ``tcp://host:port`` joins a running scheduler. On a cluster every shard is one task and
the partial states are merged by tasks in the same fixed binary tree
(:func:`~preflab.quality.mergeable.tree_reduce`), so results are identical to ``sync`` to the
bit. The tree is submitted in its order with a bounded number of unfinished tasks (2 per worker
unless ``in_flight`` says otherwise), so a worker holds a few states, not every shard's result
(all the shards submitted at once ran first and piled up: 4.6 GB a worker at 100M). Dask (``pip install 'preflab[scale]'``) is imported only when a cluster is asked for.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from ..quality.mergeable import Chunk, TreeFold
from .shards import read_shard

T = TypeVar("T")
R = TypeVar("R")

_LOCAL = re.compile(r"local:(\d+)$")


class SchedulerError(ValueError):
    """A ``--scheduler`` that cannot be used; the message says what to give instead."""


def check_scheduler(spec: str) -> str:
    """``spec`` if it is ``sync``, ``local:N`` (N >= 1) or ``tcp://host:port``."""
    if spec == "sync" or spec.startswith("tcp://"):
        return spec
    m = _LOCAL.match(spec)
    if m and int(m.group(1)) >= 1:
        return spec
    raise SchedulerError(
        f"--scheduler {spec!r}: use sync (this process), local:N (N worker processes on this "
        "machine) or tcp://host:port (a running Dask scheduler)"
    )


def _on_shard(fn: Callable[[Chunk], T], path: Path) -> T:
    return fn(read_shard(path))


class Runner:
    """A context manager that maps functions over shards and merges their results."""

    def __init__(self, scheduler: str = "sync", in_flight: int | None = None) -> None:
        self.scheduler = check_scheduler(scheduler)
        if in_flight is not None and in_flight < 1:
            raise ValueError(f"in_flight must be >= 1, not {in_flight}")
        #: the most unfinished tasks of a reduction on the cluster (default: 2 per worker)
        self.in_flight = in_flight
        #: the most unfinished tasks seen at once (a check for the tests)
        self.peak_in_flight = 0
        self.client: Any = None
        self.cluster: Any = None

    def __enter__(self) -> Runner:
        if self.scheduler == "sync":
            return self
        try:
            from distributed import Client, LocalCluster
        except ImportError:  # the optional extra
            raise SchedulerError(
                f"--scheduler {self.scheduler} needs Dask: pip install 'preflab[scale]' "
                "(or use --scheduler sync)"
            ) from None
        logging.getLogger("distributed").setLevel(logging.WARNING)  # not a line per worker
        m = _LOCAL.match(self.scheduler)
        if m:
            self.cluster = LocalCluster(
                n_workers=int(m.group(1)),
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.WARNING,
            )
            self.client = Client(self.cluster)
        else:
            try:
                self.client = Client(self.scheduler, timeout=30)
            except OSError as exc:
                raise SchedulerError(
                    f"--scheduler {self.scheduler}: cannot reach the Dask scheduler ({exc}); "
                    "start one (dask scheduler) or check the address"
                ) from None
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        self.client = self.cluster = None

    @property
    def workers(self) -> int:
        if self.client is None:
            return 1
        return len(self.client.scheduler_info().get("workers", {}))

    def map_reduce(
        self,
        shards: Sequence[Path],
        fn: Callable[[Chunk], T],
        merge: Callable[[T, T], T],
    ) -> T:
        """``fn`` of every shard, merged in the fixed tree over the shard order."""
        if not shards:
            raise ValueError("no shards")
        if self.client is None:
            fold = TreeFold(merge)
            for path in shards:
                fold.add(fn(read_shard(path)))
            result: T = fold.result()
            return result
        return self._tree_on_cluster(shards, fn, merge)

    def _tree_on_cluster(
        self,
        shards: Sequence[Path],
        fn: Callable[[Chunk], T],
        merge: Callable[[T, T], T],
    ) -> T:
        """:class:`TreeFold`'s binary counter played with futures: a shard's task is submitted
        only while fewer than :attr:`in_flight` tasks are unfinished, and each merge as soon as
        both halves are submitted, so a worker holds a bounded number of states (the running
        tasks', their inputs and the counter's ``log2(n)`` partial states), not every shard's
        result at once. The tree is :func:`tree_reduce`'s (the same bits as ``sync``); a future
        is dropped once merged, so the cluster frees its state."""
        from distributed import wait

        client = self.client
        limit = self.in_flight or max(2, 2 * self.workers)
        running: list[Any] = []  # submitted and not seen finished
        stack: list[tuple[int, Any]] = []
        # the function once to every worker (a Dawid-Skene pass's carries the global encoding,
        # 10^5 rater names), not pickled into each of the shards' tasks
        [shipped] = client.scatter([fn], hash=False, broadcast=True)
        for path in shards:
            while len(running) >= limit:
                wait(running, return_when="FIRST_COMPLETED")
                for f in running:
                    if f.status == "error":
                        f.result()  # raises the task's exception (a broken shard's name)
                running = [f for f in running if not f.done()]
            state = client.submit(_on_shard, shipped, path, pure=False)
            running.append(state)
            size = 1
            while stack and stack[-1][0] == size:
                _, left = stack.pop()
                state = client.submit(merge, left, state, pure=False)
                running.append(state)
                size *= 2
            stack.append((size, state))
            self.peak_in_flight = max(self.peak_in_flight, len(running))
        acc = stack.pop()[1]
        while stack:
            acc = client.submit(merge, stack.pop()[1], acc, pure=False)
        del running
        result: T = acc.result()
        del shipped
        return result

    def map(self, fn: Callable[[int, Path], R], shards: Sequence[Path]) -> list[R]:
        """``fn(index, path)`` of every shard, results in shard order."""
        if self.client is None:
            return [fn(i, path) for i, path in enumerate(shards)]
        futures = self.client.map(fn, list(range(len(shards))), list(shards), pure=False)
        results: list[R] = self.client.gather(futures)
        return results
