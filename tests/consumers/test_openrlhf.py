"""preflab's ``openrlhf`` export run with OpenRLHF 0.11.2's own code (issue 15 §2, §4).

The card's flags are parsed by the real argument definitions of ``openrlhf/cli/train_rm.py``
and ``train_dpo.py``. Those scripts build their parser under ``if __name__ == "__main__":`` and
import deepspeed at the top, so neither importing nor running them works without the training
stack: :func:`script_parser` compiles the statements of that block that come before
``parser.parse_args()`` (the ``argparse`` setup, verbatim from the installed file, nothing
copied into this repository) and runs them alone. The parsed arguments then configure
OpenRLHF's ``RewardDataset`` (reward and DPO modes), which tokenises the export and collates a
batch.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shlex
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.store import db, transaction
from preflab.store.repo import create_project

COMPARISONS = [  # two with the raters' strength, one (like PandaLM / hh-rlhf) without
    {
        "prompt": "Capital of France?",
        "chosen": "Paris.",
        "rejected": "Lyon.",
        "labeler": "r1",
        "strength": 3,
    },
    {"prompt": "2 + 2?", "chosen": "4", "rejected": "5", "labeler": "r1", "strength": 1},
    {"prompt": "A colour of the sky?", "chosen": "Blue.", "rejected": "Green.", "labeler": "r1"},
]


def script_parser(script: Path) -> argparse.ArgumentParser:
    """The parser a script builds in its ``__main__`` block, without running anything else."""
    tree = ast.parse(script.read_text(), str(script))
    main = next(
        n
        for n in tree.body
        if isinstance(n, ast.If) and ast.unparse(n.test) == "__name__ == '__main__'"
    )
    setup = []
    for statement in main.body:
        if "parse_args" in ast.unparse(statement):
            break
        setup.append(statement)
    namespace = {"argparse": argparse, "datetime": datetime}
    exec(compile(ast.Module(body=setup, type_ignores=[]), str(script), "exec"), namespace)
    return namespace["parser"]


def card_command(card: str, module: str) -> list[str]:
    """The flags of the card's ``deepspeed --module <module>`` command."""
    line = re.search(rf"^deepspeed --module {re.escape(module)} (.*)$", card, re.M).group(1)
    return shlex.split(line)


def parse(consumers_path: Path, script: str, flags: list[str]):
    from openrlhf.utils.config import hierarchize

    return hierarchize(
        script_parser(consumers_path / "openrlhf" / "cli" / script).parse_args(flags)
    )


def export_openrlhf(tmp_path: Path, sqlite_url: str, records: list[dict], *, name: str):
    engine = db.open_db(sqlite_url)
    with transaction(engine) as s:
        create_project(s, name, kinds=["pairwise"])
    source = tmp_path / f"{name}.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    import_files(engine, name, [source])
    out = tmp_path / f"{name}-export"
    manifest = export_project(engine, name, ExportOptions(format="openrlhf", out=out))
    engine.dispose()
    return out, manifest


def reward_dataset(out: Path, args, tokenizer, *, dpo: bool):
    from datasets import load_dataset
    from openrlhf.datasets import RewardDataset

    data = load_dataset("json", data_files=str(out / "train.jsonl"), split="train")
    return RewardDataset(
        data,
        tokenizer,
        args.data.max_len,
        SimpleNamespace(args=args),
        input_template=args.data.input_template,
        is_dpo=dpo,
        num_processors=1,
    )


def test_the_cards_reward_and_dpo_commands_parse_with_openrlhfs_own_arguments(
    consumers_path, tmp_path, sqlite_url
):
    out, manifest = export_openrlhf(tmp_path, sqlite_url, COMPARISONS, name="std")
    card = (out / "README.md").read_text()
    rm = parse(consumers_path, "train_rm.py", card_command(card, "openrlhf.cli.train_rm"))
    assert (rm.data.prompt_key, rm.data.chosen_key, rm.data.rejected_key) == (
        "prompt",
        "chosen",
        "rejected",
    )
    assert rm.data.dataset == "path/to/export/train.jsonl"
    assert rm.model.margin_loss_enable is True  # the file has a margin column
    assert rm.data.apply_chat_template is False and "{}" in rm.data.input_template  # a text export
    dpo = parse(consumers_path, "train_dpo.py", card_command(card, "openrlhf.cli.train_dpo"))
    assert dpo.data.prompt_key == "prompt" and "{}" in dpo.data.input_template
    assert (
        "OpenRLHF 0.11.2" in card and "--prompt_key prompt --chosen_key chosen" in card
    )  # old spelling, a note


def test_the_old_spelling_is_refused_by_the_current_release(consumers_path):
    """What the card said before issue 15: every flag is unknown to train_rm.py of 0.11.2."""
    parser = script_parser(consumers_path / "openrlhf" / "cli" / "train_rm.py")
    with pytest.raises(SystemExit):
        parser.parse_args(
            [
                "--prompt_key",
                "prompt",
                "--chosen_key",
                "chosen",
                "--rejected_key",
                "rejected",
                "--apply_chat_template",
            ]
        )


def test_reward_mode_tokenises_and_collates_with_real_margins_only(
    consumers_path, tmp_path, sqlite_url, tokenizer
):
    out, manifest = export_openrlhf(tmp_path, sqlite_url, COMPARISONS, name="std")
    assert manifest["format_notes"]["margin"] | {"why": ""} == {
        "written": True,
        "rows_with_margin": 2,
        "rows_with_known_strength": 2,
        "rows": 3,
        "why": "",
    }
    rows = {
        r["prompt"]: r["margin"]
        for r in map(json.loads, (out / "train.jsonl").read_text().splitlines())
    }
    assert rows == {"Capital of France?": 3.0, "2 + 2?": 1.0, "A colour of the sky?": None}
    args = parse(
        consumers_path,
        "train_rm.py",
        card_command((out / "README.md").read_text(), "openrlhf.cli.train_rm"),
    )
    dataset = reward_dataset(out, args, tokenizer, dpo=False)
    chosen_ids, chosen_mask, reject_ids, reject_mask, margins = dataset.collate_fn(
        [dataset[i] for i in range(3)]
    )
    assert chosen_ids.shape[0] == reject_ids.shape[0] == 3
    # OpenRLHF reads the null margin as 0 (the plain loss): no number preflab made up
    assert sorted(margins) == [0, 1.0, 3.0]
    first = tokenizer.decode(dataset[0][0][0], skip_special_tokens=True)
    assert (
        first.startswith("user :") and "assistant :" in first
    )  # input_template: prompt and answer apart


def test_dpo_mode_with_a_conversational_export_and_the_chat_template(
    consumers_path, tmp_path, sqlite_url, tokenizer
):
    chats = [
        {
            "chosen": [
                {"role": "user", "content": r["prompt"]},
                {"role": "assistant", "content": r["chosen"]},
            ],
            "rejected": [
                {"role": "user", "content": r["prompt"]},
                {"role": "assistant", "content": r["rejected"]},
            ],
            "labeler": "r1",
        }
        for r in COMPARISONS
    ]
    out, manifest = export_openrlhf(tmp_path, sqlite_url, chats, name="chat")
    assert manifest["conversational"] is True
    assert "margin" not in manifest["schema"]  # no strength anywhere: no margin column at all
    card = (out / "README.md").read_text()
    args = parse(consumers_path, "train_dpo.py", card_command(card, "openrlhf.cli.train_dpo"))
    assert args.data.apply_chat_template is True and args.data.input_template is None
    dataset = reward_dataset(out, args, tokenizer, dpo=True)
    chosen_ids, _, reject_ids, _, prompt_lengths = dataset.collate_fn(
        [dataset[i] for i in range(len(dataset))]
    )
    assert chosen_ids.shape[0] == 3 and all(n > 0 for n in prompt_lengths)
    rm_args = parse(consumers_path, "train_rm.py", card_command(card, "openrlhf.cli.train_rm"))
    assert rm_args.model.margin_loss_enable is False
