"""The quality statistics of a shard directory, in one pass (plus Dawid-Skene's iterations).

One pass over the shards gives alpha and percent agreement per ``(batch, kind, dimension)``,
per-rater label counts and up-rates, the thumbs resolution's counts and the Bradley-Terry win
cells (:mod:`preflab.quality.mergeable`); Dawid-Skene on one dimension then costs one pass per
EM iteration (each shard's E-step, the M-step tables merged).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..quality import mergeable as m
from .engine import Runner
from .shards import ShardDir

OnePass = tuple[m.AgreementState, m.RaterState, m.ThumbSummary, m.WinState]


def one_pass_from_chunk(table: m.Chunk) -> OnePass:
    return (
        m.agreement_from_chunk(table),
        m.raters_from_chunk(table),
        m.thumb_summary_from_chunk(table),
        m.wins_from_chunk(table),
    )


def merge_one_pass(a: OnePass, b: OnePass) -> OnePass:
    return (
        m.merge_agreement(a[0], b[0]),
        m.merge_raters(a[1], b[1]),
        m.merge_thumb_summary(a[2], b[2]),
        m.merge_wins(a[3], b[3]),
    )


def only(kind: str, dimension: str) -> Callable[[m.Chunk], m.Chunk]:
    def select(chunk: m.Chunk) -> m.Chunk:
        return chunk.select(kind, dimension)

    return select


def run_stats(
    shards: ShardDir,
    runner: Runner,
    metrics: Mapping[str, str] | None = None,
    dawid_skene: tuple[str, str] | None = ("unary", "thumb"),
    bradley_terry: bool = True,
) -> dict[str, Any]:
    """Every figure as JSON-able values. ``dawid_skene``: the ``(kind, dimension)`` to
    aggregate (``None``: skip; skipped too when it has no label)."""
    agreement, raters, thumbs, wins = runner.map_reduce(
        shards.shards, one_pass_from_chunk, merge_one_pass
    )
    out: dict[str, Any] = {
        "source": shards.layout.get("source"),
        "n_shards": len(shards.shards),
        "agreement": m.agreement_figures(agreement, metrics),
        "raters": m.rater_figures(raters),
        "thumbs": dict(thumbs),
    }
    if bradley_terry and wins:
        bt = m.bradley_terry_from_wins(wins)
        out["bradley_terry"] = bt.as_dict()
    if dawid_skene is not None:
        kind, dim = dawid_skene
        select = only(kind, dim)
        has = any(g[1] == kind and g[2] == dim for g in agreement)
        if has:

            def mr(fn: Callable[[m.Chunk], Any], merge: Callable[[Any, Any], Any]) -> Any:
                return runner.map_reduce(shards.shards, lambda t: fn(select(t)), merge)

            fit = m.dawid_skene_merged(mr)
            r = fit.result
            out["dawid_skene"] = {
                "kind": kind,
                "dimension": dim,
                "classes": r.classes.tolist(),
                "priors": None if r.priors is None else r.priors.tolist(),
                "n_iter": r.n_iter,
                "objective": r.log_likelihood,
                "raters": r.raters.tolist(),
                "accuracy": r.reliability.tolist(),
                "mean_accuracy": float(np.mean(r.reliability)),
            }
    return out
