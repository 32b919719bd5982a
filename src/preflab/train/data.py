"""Preference pairs for reward modelling: read, split by prompt, gate by length parity.

A :class:`Pair` is one exported preference (TRL's ``prompt, chosen, rejected, margin``) plus
what the evaluation stratifies by (item id, domain, agreement). Pairs come from a preflab
export directory (``trl-reward`` or ``trl-preference``, any file format) or straight from a
project, exported first so that the model card can name the export manifest's SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..io.export.trl_preference import PAIR_METADATA
from ..quality.bias import length_parity_gate

PAIR_FORMATS = ("trl-reward", "trl-preference")


class PairDataError(ValueError):
    """Pairs that cannot be read as asked; the message says where and what to do."""


@dataclass(frozen=True, slots=True)
class Pair:
    prompt: str
    chosen: str
    rejected: str
    margin: float = 0.0
    item_id: str | None = None
    domain: str | None = None
    #: share of raters who agreed with the resolved label (``None`` when unknown)
    agreement: float | None = None
    n_raters: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PairSource:
    """Pairs plus the provenance a model card names."""

    pairs: list[Pair]
    manifest: dict[str, Any]
    manifest_sha256: str | None
    path: str


def as_text(value: Any) -> str:
    """A prompt or answer as one string: chat messages become ``role: content`` lines.

    The same rendering the ``trl-preference`` exporter uses for standard (non-chat) prompts,
    so a model trained on a chat export scores plain-text rollouts the same way.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n\n".join(f"{m['role']}: {m['content']}" for m in value)
    raise PairDataError(f"expected text or a list of chat messages, got {type(value).__name__}")


def jsonl_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of a JSONL file; a line that is not a JSON object is a
    :class:`PairDataError` naming ``file:line``. Blank lines are skipped."""
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PairDataError(
                    f"{path}:{line_no}: not JSON ({exc.msg}); one object per line"
                ) from exc
            if not isinstance(row, dict):
                raise PairDataError(f"{path}:{line_no}: expected a JSON object")
            yield line_no, row


def read_export(directory: Path) -> PairSource:
    """Pairs of a preflab ``trl-reward`` / ``trl-preference`` export directory."""
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file():
        raise PairDataError(
            f"{directory}: no manifest.json; pass a preflab export directory "
            "(preflab export PROJECT -f trl-reward -o DIR) or a project name"
        )
    raw = manifest_path.read_bytes()
    manifest = json.loads(raw)
    if manifest.get("format") not in PAIR_FORMATS:
        raise PairDataError(
            f"{manifest_path}: format: {manifest.get('format')!r} is not a pair format; "
            f"export with -f trl-reward"
        )
    rows = _read_rows(directory, manifest["split"], manifest["file_format"])
    pairs = [_pair(row, directory, line) for line, row in enumerate(rows, start=1)]
    metadata_path = directory / PAIR_METADATA
    if metadata_path.is_file():  # exports before the side file existed have no strata data
        pairs = with_metadata(pairs, metadata_path)
    return PairSource(pairs, manifest, hashlib.sha256(raw).hexdigest(), str(directory))


def with_metadata(pairs: list[Pair], path: Path) -> list[Pair]:
    """Pairs with item id, domain and agreement from the export's ``pair_metadata.jsonl``."""
    rows = [row for _, row in jsonl_objects(path)]
    if len(rows) != len(pairs):
        raise PairDataError(
            f"{path}: {len(rows)} rows for {len(pairs)} pairs; the export directory was "
            "changed after writing: export it again"
        )
    return [
        replace(
            pair,
            item_id=row.get("item_id"),
            domain=",".join(row.get("domains") or []) or None,
            agreement=row.get("agreement"),
            n_raters=row.get("n_raters"),
        )
        for pair, row in zip(pairs, rows, strict=True)
    ]


def _read_rows(directory: Path, split: str, file_format: str) -> Iterable[dict[str, Any]]:
    if file_format == "jsonl":
        with open(directory / f"{split}.jsonl", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    if file_format == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(directory / f"{split}.parquet").to_pylist()
    import datasets

    return list(datasets.load_from_disk(str(directory))[split])


def _pair(row: dict[str, Any], directory: Path, line: int) -> Pair:
    for field in ("prompt", "chosen", "rejected"):
        if field not in row:
            raise PairDataError(
                f"{directory}:{line}: {field}: missing; a pair needs prompt, chosen and rejected"
            )
    margin = row.get("margin")
    return Pair(
        as_text(row["prompt"]),
        as_text(row["chosen"]),
        as_text(row["rejected"]),
        float(margin) if margin is not None else 0.0,
    )


def export_project_pairs(
    engine: Any, project: str, out: Path, *, min_raters: int = 1
) -> PairSource:
    """Export ``project`` as ``trl-reward`` into ``out`` and read it back, strata included.

    The export is the record (manifest, SHA-256, export log row); item ids, domains and
    agreement levels come from its ``pair_metadata.jsonl``, written from the same resolution.
    The export's length-parity gate is off: held-out pairs must keep the natural length
    distribution so that ``rm eval`` measures length bias; ``rm train --length-parity`` applies
    the same bounds to the training pairs only.
    """
    from ..io.export import ExportOptions, export_project

    options = ExportOptions(
        format="trl-reward",
        out=out,
        min_raters=min_raters,
        conversational=False,
        length_gate=None,
    )
    export_project(engine, project, options)
    return read_export(out)


def split_by_prompt(
    pairs: Sequence[Pair], heldout: float, seed: int
) -> tuple[list[Pair], list[Pair]]:
    """``(train, heldout)``: whole prompts go to one side, about ``heldout`` of them held out.

    Prompts are shuffled with ``random.Random(seed)`` (reproducible across runs and machines),
    so no prompt's pairs are on both sides.
    """
    if not 0 < heldout < 1:
        raise PairDataError(f"held-out fraction must be between 0 and 1, got {heldout}")
    prompts = sorted({p.prompt for p in pairs})
    if len(prompts) < 2:
        raise PairDataError(
            f"{len(prompts)} distinct prompt(s): a split by prompt needs at least 2"
        )
    random.Random(seed).shuffle(prompts)
    n_held = min(max(1, round(len(prompts) * heldout)), len(prompts) - 1)
    held = set(prompts[:n_held])
    return [p for p in pairs if p.prompt not in held], [p for p in pairs if p.prompt in held]


def share_of_prompts(pairs: Sequence[Pair], share: float, seed: int) -> list[Pair]:
    """The pairs of ``share`` of the prompts (at least one), drawn with ``random.Random(seed)``."""
    prompts = sorted({p.prompt for p in pairs})
    random.Random(f"share-{seed}").shuffle(prompts)
    kept = set(prompts[: max(1, round(len(prompts) * share))])
    return [p for p in pairs if p.prompt in kept]


def length_parity(
    pairs: Sequence[Pair], length: Callable[[str], int], bounds: tuple[float, float]
) -> list[Pair]:
    """Pairs whose chosen/rejected length ratio lies in ``bounds`` (the quality engine's gate)."""
    result = length_parity_gate(
        [length(p.chosen) for p in pairs],
        [length(p.rejected) for p in pairs],
        low=bounds[0],
        high=bounds[1],
    )
    return [p for p, keep in zip(pairs, result.keep, strict=True) if keep]


def length_balanced(
    pairs: Sequence[Pair], length: Callable[[str], int], seed: int, strength: float = 1.0
) -> list[Pair]:
    """Pairs with as many "chosen longer" as "chosen shorter": the smaller side is repeated.
    ``strength`` < 1 closes only that share of the gap (0: the pairs as they are).

    Where one side dominates (hh-rlhf harmless: the shorter answer wins 56 %), a reward model
    can lower its loss by scoring length alone; with both sides equally common, length carries
    no signal on average and the model has to learn something else. Oversampling (seeded
    ``random.Random(seed)`` draws with replacement) keeps every pair, unlike the parity gate.
    Equal-length pairs are kept once.
    """
    longer: list[Pair] = []
    shorter: list[Pair] = []
    equal: list[Pair] = []
    for p in pairs:
        lc, lr = length(p.chosen), length(p.rejected)
        (longer if lc > lr else shorter if lc < lr else equal).append(p)
    small, big = sorted((longer, shorter), key=len)
    if not small:
        return list(pairs)  # nothing to repeat: length decides every pair one way
    rng = random.Random(seed)
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"length balance strength must be within 0..1, not {strength}")
    extra = [rng.choice(small) for _ in range(round(strength * (len(big) - len(small))))]
    balanced = [*longer, *shorter, *equal, *extra]
    rng.shuffle(balanced)
    return balanced


def write_pairs(path: Path, pairs: Iterable[Pair]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(p.as_dict(), ensure_ascii=False) + "\n")


def read_pairs(path: Path) -> list[Pair]:
    with open(path, encoding="utf-8") as f:
        return [Pair(**json.loads(line)) for line in f if line.strip()]
