"""The export manifest (``manifest.json``) and the dataset card (``README.md``).

The manifest makes an export reproducible and auditable: version, project, format, options,
creation time, row counts in and out, what each gate dropped and why (counts and sample item
ids), rubric versions, rater counts, and the SHA-256 of every file written (the manifest
itself excepted).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import yaml

from ... import __version__
from .agreement_gate import agreement_card
from .base import ExportData, Exporter, ExportOptions
from .writers import CARD, MANIFEST, file_hashes

AGGREGATION_POLICY = (
    "Per rater, the latest label per unit (review pass, then submission time, then row order); "
    "adjudicated labels (review pass 2) replace all other labels of their unit; one vote per "
    "rater and candidate pair whatever the kind: pairwise judgments, induced ranking pairs and "
    "rubric grades of raters who graded both candidates (a vetoed answer loses to every answer "
    "that passed its vetoes, then Rubric.reward with the verbosity penalty decides; strength "
    "3 when a veto decides, else min(3, 3 * reward difference)); the latest vote of a rater "
    "counts once. Aggregation over {first better, second better, tie}: units it cannot separate "
    "(see 'margin') are dropped as 'no-majority', a winning tie as 'tie', never broken by "
    "candidate order; strength = median strength of the winning side (0..3). Pairs no rater "
    "graded both sides of: ordered by the share of raters who passed the vetoes, then mean "
    "reward. Thumbs: majority per candidate. Steps: majority per step, up to and including "
    "the first error; neutral (0) counts as correct. Gold (qualification / honeypot) items are "
    "left out of training exports unless include_gold."
)


def size_category(n: int) -> str:
    """Hugging Face ``size_categories`` bucket."""
    for limit, label in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
    ):
        if n < limit:
            return label
    return "10M<n<100M"


def build_manifest(
    *,
    exporter: Exporter,
    data: ExportData,
    options: ExportOptions,
    stats: dict[str, Any],
    rows_out: dict[str, int],
    files: dict[str, dict[str, Any]],
    aggregator_name: str,
    length_fn_name: str,
    created_at: datetime | None = None,
) -> dict[str, Any]:
    created = (created_at or datetime.now(UTC)).isoformat()
    opts = {
        "format": options.format,
        "out": Path(options.out).name,  # the folder's name: a manifest holds no absolute path
        "file_format": options.file_format,
        "conversational": options.conversational,
        "include_ai": options.include_ai,
        "include_gold": options.include_gold,
        "include_rater_ids": options.include_rater_ids,
        "length_gate": list(options.length_gate) if options.length_gate else None,
        "min_raters": options.min_raters,
        "split": options.split,
        "params": {**exporter.params, **options.params},
    }
    gates = data.drops.summary()
    for gate in ("excluded", "source", "gold", "aggregation", "min_raters", "length_parity"):
        gates.setdefault(gate, {"dropped": 0, "reasons": {}, "sample_item_ids": {}})
    gates["min_raters"]["threshold"] = options.min_raters
    gates["length_parity"]["enabled"] = options.length_gate is not None
    gates["length_parity"]["length"] = length_fn_name
    if options.length_gate is not None:
        gates["length_parity"]["bounds"] = list(options.length_gate)
    if data.length_cohorts is not None:
        gates["length_parity"]["cohorts"] = data.length_cohorts
    gates["source"]["include_ai"] = options.include_ai
    gates["gold"]["include_gold"] = options.include_gold
    gates["gold"]["gold_items"] = stats.get("gold_items", 0)
    if data.policy.require_spans:  # the DPO floor's critique spans (io/export/spans_gate.py)
        spans = gates.setdefault("spans", {"dropped": 0, "reasons": {}, "sample_item_ids": {}})
        spans["required"] = True
    if data.telemetry is not None:  # issue 28: what the telemetry gate kept, and its rule
        tel = gates.setdefault("telemetry", {"dropped": 0, "reasons": {}, "sample_item_ids": {}})
        tel.update(data.telemetry.manifest(options.include_flagged))
    manifest = {
        "preflab_version": __version__,
        "project": data.project,
        "format": exporter.name,
        "format_reference": exporter.reference,
        "file_format": options.file_format,
        "split": options.split,
        "conversational": data.conversational,
        "created_at": created,
        "options": opts,
        "filter": {
            "exclude_flagged": not options.include_flagged,
            "include_ai": options.include_ai,
            "include_gold": options.include_gold,
            "min_raters": options.min_raters,
            "length_gate": opts["length_gate"],
        },
        "aggregation": {
            "function": aggregator_name,
            "policy": AGGREGATION_POLICY,
            "margin": stats.get("aggregation_margin"),
        },
        "counts": {
            "items_in": stats["items_in"],
            "judgments_in": stats["judgments_in"],
            "judgments_in_by_kind": dict(sorted(stats["judgments_in_by_kind"].items())),
            "judgments_used": stats["judgments_used"],
            "judgments_used_by_kind": dict(sorted(stats["judgments_used_by_kind"].items())),
            "judgments_used_by_source": dict(sorted(stats["judgments_used_by_source"].items())),
            "rows_out": sum(rows_out.values()),
            "rows_out_by_file": rows_out,
            "resolved": stats["resolved"],
        },
        "gates": gates,
        "flags": {"ai_assisted_judgments": stats["judgments_used_by_source"].get("ai_assisted", 0)},
        "verbosity_penalty": data.verbosity,
        "gold_accuracy": stats.get("gold_accuracy"),
        "rubrics": [
            {
                "id": key,
                "version": version,
                "content_hash": rubric.content_hash(),
                # who wrote and approved the version, where recorded
                **{k: v for k in ("author", "approver") if (v := getattr(rubric, k)) is not None},
            }
            for (key, version), rubric in sorted(data.rubrics.items())
        ],
        "raters": {"in": stats["raters_in"], "out": stats["raters_out"]},
        "schema": {f.name: str(f.type) for f in exporter.schema(data, options)},
        "format_notes": (
            exporter.notes(data, options) if data.format_notes is None else data.format_notes
        ),
        "files": files,
    }
    if sum(rows_out.values()) == 0:
        # `load_dataset` cannot read an empty JSONL or Parquet file (datasets 5: StopIteration,
        # "BatchSize must be greater than 0"): the card builds the empty split from these
        # declared features instead (issue 31)
        from datasets import Features

        manifest["features"] = Features.from_arrow_schema(exporter.schema(data, options)).to_dict()
    manifest["warnings"] = export_warnings(manifest, stats)
    return manifest


#: Gates that drop labels before they are resolved (the rest drop resolved pairs and rows).
LABEL_GATES = ("excluded", "source", "telemetry")


def _gate_words(gates: dict[str, Any], names: Any = None) -> str:
    """``gate telemetry dropped 31 (no_revision 30, pasted_answer 1); ...``, largest first."""
    parts = []
    ranked = sorted(gates.items(), key=lambda kv: -int(kv[1].get("dropped") or 0))
    for gate, info in ranked:
        if not info.get("dropped") or (names is not None and gate not in names):
            continue
        reasons = sorted(info.get("reasons", {}).items(), key=lambda kv: -kv[1])
        why = ", ".join(f"{r} {n}" for r, n in reasons[:4])
        parts.append(f"gate {gate} dropped {info['dropped']} ({why})")
    return "; ".join(parts)


def export_warnings(manifest: dict[str, Any], stats: dict[str, Any]) -> list[str]:
    """Sentences for an export that holds nothing, or that left most of its labels or pairs
    out (issue 28: a 0-row export must say so on every surface: the CLI, the web page, the
    manifest and the card). Labels of gold items, which training exports leave out by design,
    do not count as dropped."""
    counts, gates = manifest["counts"], manifest["gates"]
    out = []
    read = counts["judgments_in"] - int(stats.get("gold_judgments", 0))
    used = counts["judgments_used"]
    telemetry = gates.get("telemetry", {})
    hint = (
        " Labels held out by their telemetry wait in the review queue: a reviewer can keep "
        "them, or export with include-flagged (--include-flagged)."
        if telemetry.get("dropped")
        else ""
    )
    if counts["rows_out"] == 0:
        why = _gate_words(gates)
        if counts["judgments_in"] == 0:
            why = "the project has no labels"
        elif not why:
            why = f"none of the {used} labels used is of a kind this format exports"
        out.append(f"This export has 0 rows: {why}.{hint}")
        return out
    if read > 0 and used < read / 2:
        out.append(
            f"Most labels were left out: {used} of {read} judgments used; "
            f"{_gate_words(gates, LABEL_GATES)}.{hint}"
        )
    resolved = counts.get("resolved") or {}
    kept = sum(int(n) for n in resolved.values())
    pair_drops = sum(
        int(info.get("dropped") or 0)
        for gate, info in gates.items()
        if gate not in LABEL_GATES and gate != "gold"
    )
    if pair_drops > kept:
        other = tuple(g for g in gates if g not in LABEL_GATES and g != "gold")
        out.append(
            f"More was dropped than kept after resolving: {pair_drops} dropped, {kept} kept "
            f"(pairs, labels, step labels, demonstrations); {_gate_words(gates, other)}."
        )
    return out


def dump_manifest(manifest: dict[str, Any]) -> bytes:
    return orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def render_card(manifest: dict[str, Any], exporter: Exporter, sources: Counter[str]) -> str:
    """A Hugging Face dataset card: YAML front matter, then what, where from, how made, how to load."""
    rows = manifest["counts"]["rows_out"]
    split = manifest["split"]
    file_format = manifest["file_format"]
    front: dict[str, Any] = {
        "license": "other",
        "pretty_name": f"{manifest['project']} ({exporter.name})",
        "task_categories": list(exporter.task_categories),
        "size_categories": [size_category(rows)],
        "tags": ["preflab", "human-feedback", "rlhf", exporter.name],
    }
    if file_format in ("jsonl", "parquet"):
        front["configs"] = [
            {
                "config_name": "default",
                "data_files": [{"split": split, "path": f"{split}.{file_format}"}],
            }
        ]
    yaml_text = yaml.safe_dump(front, sort_keys=False, allow_unicode=True)
    counts = manifest["counts"]
    lines = [
        "---",
        "# license: placeholder, set the licence of your data (and of its sources) before publishing",
        yaml_text.rstrip(),
        "---",
        "",
        f"# {manifest['project']}: {exporter.name}",
        "",
        f"{exporter.description}. Exported by preflab {manifest['preflab_version']} on "
        f"{manifest['created_at']}: {rows} rows in split `{split}` ({file_format}"
        f"{', conversational' if manifest['conversational'] else ''}).",
        f"Format reference: {exporter.reference or 'see preflab documentation'}.",
        "",
        *[f"> **Warning:** {w}\n" for w in manifest.get("warnings", [])],
        "## Columns",
        "",
        *[f"- `{name}`: `{type_}`" for name, type_ in manifest["schema"].items()],
        "",
        "## Sources",
        "",
        *([f"- {src}: {n} items" for src, n in sorted(sources.items())] or ["- (no items)"]),
        "",
        "## Labels",
        "",
        f"- items read: {counts['items_in']}; judgments read: {counts['judgments_in']}; "
        f"judgments used: {counts['judgments_used']}",
        *[f"- {kind}: {n} judgments used" for kind, n in counts["judgments_used_by_kind"].items()],
        *[f"- source {src}: {n}" for src, n in counts["judgments_used_by_source"].items()],
        f"- raters: {manifest['raters']['in']} contributed labels, {manifest['raters']['out']} "
        "behind exported rows",
        _gold_line(manifest.get("gold_accuracy")),
        "",
        "## Rubric versions",
        "",
        *(
            [
                f"- `{r['id']}` v{r['version']} (sha256 {r['content_hash'][:16]}...)"
                + (f", by {r['author']}" if r.get("author") else "")
                + (f", approved by {r['approver']}" if r.get("approver") else "")
                for r in manifest["rubrics"]
            ]
            or ["- none"]
        ),
        "",
        "## Aggregation",
        "",
        manifest["aggregation"]["policy"],
        *(
            [f"Decided when: {manifest['aggregation']['margin']}."]
            if manifest["aggregation"].get("margin")
            else []
        ),
        "",
        "## Gates",
        "",
        "| gate | dropped | reasons |",
        "|---|---|---|",
        *[
            f"| {gate} | {info['dropped']} | "
            f"{', '.join(f'{r}: {n}' for r, n in info['reasons'].items()) or '-'} |"
            for gate, info in manifest["gates"].items()
        ],
        "",
        *length_card_lines(manifest),
        *exporter.usage(manifest),
        "## Loading",
        "",
        "```python",
        *(
            _load_snippet(file_format, split)
            if manifest["counts"]["rows_out"] or "features" not in manifest
            else _empty_snippet(list(manifest["schema"]))
        ),
        "```",
        "",
        "Every file's SHA-256 is in `manifest.json` (with the options, gates and counts of this export).",
        "",
    ]
    return "\n".join(lines)


def _gold_line(gold: dict[str, Any] | None) -> str:
    if not gold:
        return "- gold (honeypot) accuracy: no graded gold labels"
    return (
        f"- gold (honeypot) accuracy: {gold['accuracy']:.3f} (95% Wilson {gold['low']:.3f}-"
        f"{gold['high']:.3f}; {gold['correct']} of {gold['n']} gold labels, "
        f"{gold['raters_graded']} raters graded, {gold['raters_below_0.8']} below 0.8)"
    )


def length_card_lines(manifest: dict[str, Any]) -> list[str]:
    """The card's *Length* section: the unit, the parity gate per cohort, the verbosity penalty."""
    gate = manifest["gates"].get("length_parity", {})
    verbosity = manifest.get("verbosity_penalty")
    if not gate.get("cohorts") and not verbosity:
        return []
    lines = ["## Length", "", f"Lengths in {gate.get('length')}."]
    if gate.get("enabled"):
        lo, hi = gate["bounds"]
        lines.append(
            f"Length-parity gate: keep pairs with {lo} <= len(chosen)/len(rejected) <= {hi}."
        )
    else:
        lines.append("Length-parity gate: off (--no-length-gate).")
    cohorts = gate.get("cohorts")
    if cohorts:
        lines += [
            "",
            f"| {cohorts['by']} | pairs | dropped | kept share | median ratio before | after |",
            "|---|---|---|---|---|---|",
        ]
        for name, c in cohorts["cohorts"].items():
            mark = " (all dropped)" if c["removed_wholesale"] else ""
            lines.append(
                f"| {name}{mark} | {c['pairs']} | {c['dropped']} | {c['parity_share']} | "
                f"{c['median_ratio_before']} | {c['median_ratio_after']} |"
            )
    if verbosity:
        lines += [
            "",
            f"Verbosity penalty subtracted from margins: {verbosity['function']} "
            f"(free_ratio {verbosity['free_ratio']}, per_log_ratio {verbosity['per_log_ratio']}, "
            f"max_penalty {verbosity['max_penalty']}); {verbosity['pairs_penalized']} of "
            f"{verbosity['pairs_with_margin']} pairs with a margin penalized.",
        ]
    return [*lines, ""]


def _empty_snippet(columns: list[str]) -> list[str]:
    """A 0-row export: the empty split with the manifest's declared features (``load_dataset``
    refuses an empty file), its columns in the export's order."""
    return [
        "# this export has 0 rows (see Gates); load_dataset cannot read an empty file, so the",
        "# empty split is built from the features manifest.json declares",
        "import json",
        "from datasets import Dataset, Features",
        'declared = Features.from_dict(json.load(open("path/to/export/manifest.json"))["features"])',
        f"features = Features({{name: declared[name] for name in {columns!r}}})",
        "ds = Dataset.from_dict({name: [] for name in features}, features=features)",
    ]


def _load_snippet(file_format: str, split: str) -> list[str]:
    if file_format == "hf":
        return [
            "from datasets import load_from_disk",
            f'ds = load_from_disk("path/to/export")["{split}"]',
        ]
    builder = "json" if file_format == "jsonl" else "parquet"
    return [
        "from datasets import load_dataset",
        f'ds = load_dataset("{builder}", data_files="path/to/export/{split}.{file_format}", split="train")',
    ]


def manifest_summary(manifest: dict[str, Any]) -> list[str]:
    """Human-readable lines about an export: rows, what each gate dropped, files and hashes."""
    counts = manifest["counts"]
    lines = [
        f"{counts['rows_out']} rows from {counts['judgments_used']} judgments on {counts['items_in']} items",
        *[f"WARNING: {w}" for w in manifest.get("warnings", [])],
    ]
    for gate, info in manifest["gates"].items():
        if info.get("dropped"):
            lines.append(f"gate {gate} dropped {info['dropped']}: {info['reasons']}")
    for name, info in manifest["files"].items():
        lines.append(f"{name}  {info['bytes']} bytes  sha256:{info['sha256'][:16]}…")
    return lines


def write_manifest(
    exporter: Exporter,
    data: ExportData,
    options: ExportOptions,
    directory: Path,
    stats: dict[str, Any],
    rows_out: dict[str, int],
    sources: Counter[str],
    *,
    aggregator_name: str,
    length_fn_name: str,
    agreement: dict[str, Any] | None,
) -> dict[str, Any]:
    """The card and ``manifest.json`` of the data files already in ``directory``."""
    manifest = build_manifest(
        exporter=exporter,
        data=data,
        options=options,
        stats=stats,
        rows_out=rows_out,
        files={},
        aggregator_name=aggregator_name,
        length_fn_name=length_fn_name,
    )
    if agreement is not None:
        manifest["agreement"] = agreement
    card = render_card(manifest, exporter, sources) + agreement_card(agreement)
    (directory / CARD).write_text(card, encoding="utf-8")
    manifest["files"] = file_hashes(directory)
    (directory / MANIFEST).write_bytes(dump_manifest(manifest))
    return manifest
