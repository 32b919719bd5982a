"""``openrlhf``: OpenRLHF reward-model / DPO data: ``prompt``, ``chosen``, ``rejected``, ``margin``.

OpenRLHF's ``RewardDataset`` reads the columns named by ``--data.prompt_key``,
``--data.chosen_key`` and ``--data.rejected_key`` and an optional ``margin`` column whose name is
fixed (``openrlhf/datasets/reward_dataset.py``, ``preprocess_data``; a null margin reads as 0,
the plain loss). Checked against OpenRLHF 0.11.2 (the spelling of 0.10.4-0.11.2)::

    deepspeed --module openrlhf.cli.train_rm \\
        --model.model_name_or_path BASE_MODEL --data.dataset path/to/export/train.jsonl \\
        --data.prompt_key prompt --data.chosen_key chosen --data.rejected_key rejected \\
        --data.apply_chat_template --model.margin_loss_enable

``openrlhf.cli.train_dpo`` takes the same ``--data.*`` flags (no margin). Conversational rows
(message lists) need ``--data.apply_chat_template`` (without it: ``AttributeError: 'list' object
has no attribute 'rstrip'``); a standard (text) export needs ``--data.input_template`` with a
``{}`` for the prompt instead, or prompt and answer are glued together. ``--model.margin_loss_enable``
only when the file has a ``margin`` column: only rows whose raters gave a strength carry one
(the 0..3 median strength); the others are null, and with no known strength at all the column
is left out (the manifest's ``format_notes.margin`` says which). OpenRLHF 0.10.0 and earlier
spelled the flags ``--prompt_key``, ``--chosen_key``, ``--rejected_key``, ``--apply_chat_template``
and ``--input_template``.
"""

from __future__ import annotations

import shlex
from typing import Any

from .trl_preference import TRLPreference

OPENRLHF_VERSION = "0.11.2"
DATA_FLAGS = "--data.prompt_key prompt --data.chosen_key chosen --data.rejected_key rejected"
#: a standard (text) export: OpenRLHF formats the prompt with it; newlines with bash $'...'
INPUT_TEMPLATE = "User: {} Assistant: "
OLD_SPELLING = (
    "--prompt_key prompt --chosen_key chosen --rejected_key rejected --apply_chat_template"
)


class OpenRLHF(TRLPreference):
    name = "openrlhf"
    description = f"OpenRLHF reward/DPO (prompt, chosen, rejected, margin): {DATA_FLAGS}"
    reference = "https://github.com/OpenRLHF/OpenRLHF/blob/main/openrlhf/datasets/reward_dataset.py"
    task_categories = ("text-classification",)
    margin = "any"
    margin_rule = "OpenRLHF reads a null margin as 0 (the plain loss) for that row"

    def usage(self, manifest: dict[str, Any]) -> list[str]:
        return [
            f"## Training with OpenRLHF (checked against OpenRLHF {OPENRLHF_VERSION})",
            "",
            *self.margin_card_lines(manifest),
            "Reward model:",
            "",
            "```bash",
            "deepspeed --module openrlhf.cli.train_rm "
            + " ".join(openrlhf_flags(manifest, reward=True)),
            "```",
            "",
            "DPO:",
            "",
            "```bash",
            "deepspeed --module openrlhf.cli.train_dpo "
            + " ".join(openrlhf_flags(manifest, reward=False)),
            "```",
            "",
            "Conversational rows need `--data.apply_chat_template` (without it OpenRLHF fails with "
            "`AttributeError: 'list' object has no attribute 'rstrip'`); a text export needs "
            "`--data.input_template` with `{}` for the prompt, or prompt and answer are glued together "
            "(use bash `$'...\\n...'` for newlines in it). The flags are the spelling of OpenRLHF 0.10.4 to "
            f"{OPENRLHF_VERSION}; 0.10.0 and earlier spelled them `{OLD_SPELLING}` (and `--input_template`).",
            "",
        ]


def openrlhf_flags(manifest: dict[str, Any], *, reward: bool) -> list[str]:
    """The card's flags for ``train_rm`` (``reward``) or ``train_dpo``, shell-quoted."""
    split, file_format = manifest["split"], manifest["file_format"]
    dataset = (
        f"path/to/export/{split}"
        if file_format == "hf"
        else f"path/to/export/{split}.{file_format}"
    )
    flags = [
        "--model.model_name_or_path",
        "BASE_MODEL",
        "--data.dataset",
        dataset,
        *DATA_FLAGS.split(),
    ]
    if manifest["conversational"]:
        flags.append("--data.apply_chat_template")
    else:
        flags += ["--data.input_template", shlex.quote(INPUT_TEMPLATE)]
    if reward and manifest.get("format_notes", {}).get("margin", {}).get("written"):
        flags.append("--model.margin_loss_enable")
    return flags
