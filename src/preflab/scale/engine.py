"""Where the per-shard work runs: in this process (``sync``) or on a Dask cluster.

``sync`` applies the function shard by shard and folds the results with
:class:`~preflab.quality.mergeable.TreeFold` (memory: one shard plus ``log2(n)`` partial
states). ``local:N`` starts a ``distributed.LocalCluster`` of ``N`` worker processes (one thread
each); ``tcp://host:port`` joins a running scheduler. On a cluster every shard is one task and
the partial states are merged by tasks in the same fixed binary tree
(:func:`~preflab.quality.mergeable.tree_reduce`), so results are identical to ``sync`` to the
bit. Dask (``pip install 'preflab[scale]'``) is imported only when a cluster is asked for.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from ..quality.mergeable import Chunk, TreeFold, tree_split
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

    def __init__(self, scheduler: str = "sync") -> None:
        self.scheduler = check_scheduler(scheduler)
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
        leaves = self.client.map(partial(_on_shard, fn), list(shards), pure=False)

        def tree(lo: int, hi: int) -> Any:
            if hi - lo == 1:
                return leaves[lo]
            cut = lo + tree_split(hi - lo)
            return self.client.submit(merge, tree(lo, cut), tree(cut, hi), pure=False)

        future = tree(0, len(leaves))
        result = future.result()
        return result

    def map(self, fn: Callable[[int, Path], R], shards: Sequence[Path]) -> list[R]:
        """``fn(index, path)`` of every shard, results in shard order."""
        if self.client is None:
            return [fn(i, path) for i, path in enumerate(shards)]
        futures = self.client.map(fn, list(range(len(shards))), list(shards), pure=False)
        results: list[R] = self.client.gather(futures)
        return results
