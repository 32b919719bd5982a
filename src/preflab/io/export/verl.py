"""``verl``: RL prompts for verl's ``RLHFDataset`` (PPO/GRPO), one row per item.

Format (verl docs, "Prepare Data for Post-Training":
https://verl.readthedocs.io/en/latest/preparation/prepare_data.html, and
``verl/utils/dataset/README.md``)::

    {"data_source": str, "prompt": [chat messages], "ability": str,
     "reward_model": {"style": "rule" | "model", "ground_truth": str | None},
     "extra_info": {"split": str, "index": int, "item_id": str}}

``style`` is ``"rule"`` for verifiable items (``metadata.verifiable``: code / sql / math) with
the verifier's ground truth (the math answer, or the task's JSON) and ``extra_info.verifier``
naming the verifier (``extra_info.verify_task``: the task's JSON, so a math task's
``tolerance`` survives verl's bare-answer ``ground_truth``); else ``"rule"`` with the item's hidden ``reference`` as ``ground_truth``
when it has one, else ``"model"`` (a reward model scores the rollout; ``ground_truth`` is null).
An item with approved criteria of its own (``metadata.criteria``, not verifiable) is a
``"rubric"`` row: ``ground_truth`` is the criteria set's JSON, ``extra_info.verifier``
``preflab.judge:criteria``, ``extra_info.prompt_text`` the prompt, graded by a judge in
:mod:`preflab.judge.rubric_reward` (docs/rubric-rewards.md).
``data_source`` is the item's ``metadata.source`` or the project name, or
``params={"data_source": ...}`` for every row (CLI ``--data-source``); ``ability`` the item's
first domain, else ``"general"``. With ``params={"require_reference": True}`` (CLI
``--require-reference``) only items with a reference are exported. Items flagged guessable
(``metadata.guessable``) and items whose reference is not settled (two experts required:
``metadata.reference_provenance``) are left out, listed in ``format_notes.left_out``; a task's
``author``/``approver``/``version`` travel inside ``extra_info.verify_task`` and are counted in
``format_notes.task_provenance``.

Reward routing: verl never reads ``reward_model.style``; its default reward picks a scorer by
``data_source`` and raises ``NotImplementedError`` for a key it does not know
(``verl/utils/reward_score/__init__.py``, verl 0.9.1). So ``extra_info`` also carries ``style``,
``verifier`` (``preflab.verify:<math|code|sql>`` for verifiable items, ``preflab.verify:exact``
for a reference answer, null for model rows) and ``prompt_text`` (model rows: the prompt the
reward model reads), and :mod:`preflab.verify.verl_reward` routes each row by them. The
manifest's ``format_notes.warnings`` (printed by the CLI) names every ``data_source`` that
verl's default reward would refuse. Config lines for verl 0.9.1 (also on the dataset card)::

    data.train_files=path/to/export/train.parquet
    reward.custom_reward_function.path=pkg://preflab.verify.verl_reward
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.reward_model_path=/path/to/reward-model
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from ...schema import approved_criteria, item_criteria, prompt_as_text
from ...schema.routing import rule_ground_truth, verifiable_route, verify_task
from .base import MESSAGES, Batch, ExportData, Exporter, ExportOptions, chunked, prompt_value

REWARD_MODEL = pa.struct([("style", pa.string()), ("ground_truth", pa.string())])
#: ``style`` and ``verifier`` route the row in :mod:`preflab.verify.verl_reward`
EXTRA_INFO = pa.struct(
    [
        ("split", pa.string()),
        ("index", pa.int64()),
        ("item_id", pa.string()),
        ("style", pa.string()),
        ("verifier", pa.string()),
        ("prompt_text", pa.string()),
        ("verify_task", pa.string()),
    ]
)
#: The ``data_source`` keys verl 0.9.1's ``default_compute_score`` knows
#: (verl/utils/reward_score/__init__.py; also every key starting with ``aime``).
VERL_BUILTIN_DATA_SOURCES = frozenset(
    {
        "openai/gsm8k",
        "lighteval/MATH",
        "DigitalLearningGmbH/MATH-lighteval",
        "HuggingFaceH4/MATH-500",
        "math_dapo",
        "math",
        "math_dapo_reasoning",
        "numina_aops_forum",
        "numina_synthetic_math",
        "numina_amc_aime",
        "numina_synthetic_amc",
        "numina_cn_k12",
        "numina_olympiads",
        "codecontests",
        "apps",
        "codeforces",
        "taco",
        "hiyouga/geometry3k",
        "searchR1_nq",
        "searchR1_triviaqa",
        "searchR1_popqa",
        "searchR1_hotpotqa",
        "searchR1_2wikimultihopqa",
        "searchR1_musique",
        "searchR1_bamboogle",
    }
)
CONFIG_LINES = (
    "reward.custom_reward_function.path=pkg://preflab.verify.verl_reward",
    "reward.custom_reward_function.name=compute_score",
)
#: ``extra_info.verifier`` of a rubric row (an item with approved criteria, graded by a judge)
RUBRIC_VERIFIER = "preflab.judge:criteria"
RUBRIC_CONFIG_LINES = (
    "reward.custom_reward_function.path=pkg://preflab.judge.rubric_reward",
    "reward.custom_reward_function.name=compute_score",
)
REWARD_MODEL_LINE = (
    "+reward.custom_reward_function.reward_kwargs.reward_model_path=/path/to/reward-model"
)


class Verl(Exporter):
    name = "verl"
    description = (
        "verl RL prompts (data_source, prompt, ability, reward_model, extra_info): PPO/GRPO"
    )
    needs = frozenset()
    one_pass = True
    reference = "https://verl.readthedocs.io/en/latest/preparation/prepare_data.html"
    params = {"require_reference": False, "data_source": None}
    task_categories = ("reinforcement-learning", "text-generation")

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        return pa.schema(
            [
                ("data_source", pa.string()),
                ("prompt", MESSAGES),
                ("ability", pa.string()),
                ("reward_model", REWARD_MODEL),
                ("extra_info", EXTRA_INFO),
            ]
        )

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        return self.rows([data], options)

    def rows(self, chunks: Iterable[ExportData], options: ExportOptions) -> Iterator[Batch]:
        """``extra_info.index`` runs over the whole export, chunk after chunk."""
        index = 0
        for data in chunks:
            items = self._items(data, options)
            for rows in chunked(len(items)):
                part = items[rows.start : rows.stop]
                yield {
                    "data_source": [self._data_source(i, data, options) for i in part],
                    "prompt": [prompt_value(i.prompt, True) for i in part],
                    "ability": [i.domains[0] if i.domains else "general" for i in part],
                    "reward_model": [_reward_model(i) for i in part],
                    "extra_info": [
                        _extra_info(i, options.split, index + rows.start + k)
                        for k, i in enumerate(part)
                    ],
                }
            index += len(items)

    def _items(self, data: ExportData, options: ExportOptions) -> list:
        items = [i for i in data.items.values() if left_out(i) is None]
        if self.param(options, "require_reference"):
            items = [i for i in items if i.reference is not None]
        return items

    def _data_source(self, item, data: ExportData, options: ExportOptions) -> str:
        return str(
            self.param(options, "data_source") or item.metadata.get("source") or data.project
        )

    def notes(self, data: ExportData, options: ExportOptions) -> dict[str, Any]:
        """Which ``data_source`` values verl's default reward would refuse (``warnings``)."""
        return self.notes_from_counts(self.note_counts(data, options), options)

    def note_counts(self, data: ExportData, options: ExportOptions) -> dict[str, Any]:
        """The rows by style and data source, the items left out and the tasks' provenance of
        ``data``'s items: sums over the items."""
        items = self._items(data, options)
        styles = {"rule": 0, "model": 0}
        unknown: dict[str, int] = {}
        model_rows_builtin = 0
        repo_level = 0
        rubric_unapproved = 0
        for item in items:
            if _criteria_unapproved(item):
                rubric_unapproved += 1
            if verifiable_route(item) == "code" and (verify_task(item) or {}).get("mode") == "repo":
                repo_level += 1
            style = _reward_model(item)["style"]
            styles[style] = styles.get(style, 0) + 1
            source = self._data_source(item, data, options)
            if not is_verl_builtin(source):
                unknown[source] = unknown.get(source, 0) + 1
            elif style == "model":
                model_rows_builtin += 1
        dropped: dict[str, list[str]] = {}
        for item in data.items.values():
            why = left_out(item)
            if why is not None:
                dropped.setdefault(why, []).append(str(item.id))
        tasks = [verify_task(i) for i in items if verifiable_route(i) is not None]
        provenance = {
            "tasks": len(tasks),
            "with_author": sum(1 for t in tasks if t and t.get("author")),
            "with_approver": sum(1 for t in tasks if t and t.get("approver")),
        }
        counts: dict[str, Any] = {
            "rows_by_style": styles,
            "unknown_data_sources": unknown,
            "model_rows_builtin": model_rows_builtin,
            "repo_level_code_rows": repo_level,
            "left_out": dropped,
            "task_provenance": provenance,
        }
        if rubric_unapproved:  # only then: exports without criteria keep their manifest
            counts["criteria_unapproved"] = rubric_unapproved
        return counts

    def notes_from_counts(self, counts: dict[str, Any], options: ExportOptions) -> dict[str, Any]:
        unknown: dict[str, int] = counts["unknown_data_sources"]
        model_rows_builtin, repo_level = (
            counts["model_rows_builtin"],
            counts["repo_level_code_rows"],
        )
        dropped: dict[str, list[str]] = counts["left_out"]
        warnings = [
            f"data_source {source!r} ({n} rows) is not one of verl's built-in keys: verl's default reward raises "
            "NotImplementedError for it; train with the shipped reward function ("
            + " ".join(CONFIG_LINES)
            + ")"
            for source, n in sorted(unknown.items())
        ]
        if model_rows_builtin:
            warnings.append(
                f"{model_rows_builtin} preference rows (style 'model') carry a built-in data_source: verl's "
                "default reward would score them with a rule; use the shipped reward function"
            )
        if repo_level:
            warnings.append(
                f"{repo_level} rows are repo-level code tasks (mode 'repo'): their tests import the "
                "candidate's code into the process that judges it, so their reward is trusted only "
                "as far as the static screen and the in-process checks reach (a policy may learn "
                "what they miss); function-level tasks run the candidate in a process of its own. "
                "See docs/verify.md, 'Trust limit'"
            )
        if dropped.get("guessable"):
            warnings.append(
                f"{len(dropped['guessable'])} verifiable items left out as guessable (a trivial "
                "answer passes their verifier; `preflab verify project` flags them): "
                + ", ".join(sorted(dropped["guessable"])[:20])
            )
        if dropped.get("reference_unsettled"):
            warnings.append(
                f"{len(dropped['reference_unsettled'])} items left out: their reference needs two "
                "independent experts who agree, or an adjudication (metadata.reference_provenance): "
                + ", ".join(sorted(dropped["reference_unsettled"])[:20])
            )
        if counts.get("criteria_unapproved"):
            warnings.append(
                f"{counts['criteria_unapproved']} items carry criteria not approved yet: exported "
                "without them (a reference or model row); approve them (preflab criteria approve) "
                "to reward with them"
            )
        by_style = counts["rows_by_style"]
        styles = {"rule": by_style["rule"], "model": by_style["model"]}
        if by_style.get("rubric"):
            styles["rubric"] = by_style["rubric"]
        return {
            "rows_by_style": styles,
            "warnings": warnings,
            "repo_level_code_rows": repo_level,
            "left_out": {k: sorted(v) for k, v in sorted(dropped.items())},
            "task_provenance": counts["task_provenance"],
        }

    def usage(self, manifest: dict[str, Any]) -> list[str]:
        split, file_format = manifest["split"], manifest["file_format"]
        by_style = manifest.get("format_notes", {}).get("rows_by_style", {})
        model_rows, rubric_rows = by_style.get("model", 0), by_style.get("rubric", 0)
        lines = [
            f"data.train_files=path/to/export/{split}.{file_format}",
            *(RUBRIC_CONFIG_LINES if rubric_rows else CONFIG_LINES),
        ]
        if model_rows:
            lines.append(REWARD_MODEL_LINE)
        rubric = (
            [
                f"{rubric_rows} rows carry their item's approved criteria (`style: rubric`, the "
                "criteria set as JSON in `ground_truth`): `preflab.judge.rubric_reward` grades "
                "them with the judge named by `PREFLAB_JUDGE_ENDPOINT` and `PREFLAB_JUDGE_MODEL` "
                "(weighted share of criteria met, an unmet must-have gives 0) and hands every "
                "other row to `preflab.verify.verl_reward` (docs/rubric-rewards.md).",
                "",
            ]
            if rubric_rows
            else []
        )
        return [
            "## Training with verl (checked against verl 0.9.1)",
            "",
            "verl never reads `reward_model.style`; its default reward picks a scorer by `data_source` and "
            "raises `NotImplementedError` for keys it does not know. preflab ships a reward function that routes "
            "every row by `extra_info.style` and `extra_info.verifier`: rule rows to preflab's verifiers "
            "(math, code, SQL, exact match against the reference), preference rows (`style: model`, "
            f"{model_rows} here) to the reward model given by `reward_model_path`. Add to your verl command:",
            "",
            "```",
            *lines,
            "```",
            "",
            *rubric,
            *[f"- warning: {w}" for w in manifest.get("format_notes", {}).get("warnings", [])],
            "",
        ]


def left_out(item) -> str | None:
    """Why an item stays out of the RL export, or None: ``guessable`` (a trivial answer passes
    its verifier: ``metadata.guessable``, written by ``preflab verify project``) or
    ``reference_unsettled`` (its reference requires two independent experts and they have not
    both written it, or disagree without an adjudication: :mod:`preflab.schema.authorship`)."""
    from ...schema.authorship import SETTLED
    from ...verify.references import reference_status

    metadata = item.metadata or {}
    if metadata.get("guessable"):
        return "guessable"
    if reference_status(metadata, item.reference) not in SETTLED:
        return "reference_unsettled"
    return None


def is_verl_builtin(data_source: str) -> bool:
    return data_source in VERL_BUILTIN_DATA_SOURCES or data_source.startswith("aime")


def _criteria_unapproved(item) -> bool:
    return (
        verifiable_route(item) is None
        and item_criteria(item.metadata) is not None
        and (approved_criteria(item.metadata) is None)
    )


def _reward_model(item) -> dict:
    """Verifiable items (see :mod:`preflab.schema.routing`) are scored by their verifier: rule
    style with the verifier's ground truth; else, with approved criteria
    (``metadata.criteria``), ``rubric`` style with the criteria set's JSON (a judge grades the
    rollout against it: :mod:`preflab.judge.rubric_reward`); else rule with the hidden
    reference, else a model."""
    if verifiable_route(item) is not None:
        return {"style": "rule", "ground_truth": rule_ground_truth(item)}
    criteria = approved_criteria(item.metadata)
    if criteria is not None:
        return {"style": "rubric", "ground_truth": json.dumps(criteria.as_json(), sort_keys=True)}
    return {
        "style": "rule" if item.reference is not None else "model",
        "ground_truth": item.reference,
    }


def _extra_info(item, split: str, index: int) -> dict:
    """What :mod:`preflab.verify.verl_reward` routes by (verl hands ``extra_info`` to it)."""
    style = _reward_model(item)["style"]
    route = verifiable_route(item)
    task = None
    verifier: str | None
    if (
        route is not None
    ):  # names the verifier; the whole task travels too (a math task's tolerance)
        verifier = f"preflab.verify:{route}"
        spec = verify_task(item)
        task = (
            json.dumps({"task_id": item.id, "kind": route, **spec}, sort_keys=True)
            if spec
            else None
        )
    elif style == "rubric":
        verifier = RUBRIC_VERIFIER
    else:
        verifier = "preflab.verify:exact" if style == "rule" else None
    return {
        "split": split,
        "index": index,
        "item_id": item.id,
        "style": style,
        "verifier": verifier,
        "prompt_text": prompt_as_text(item.prompt) if style in ("model", "rubric") else None,
        "verify_task": task,
    }
