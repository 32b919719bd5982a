"""``trl-sft-agent``: trajectories as TRL conversational SFT rows that honour ``loss_mask``, with
tool calls and tool turns in TRL's chat format; a real ``SFTTrainer`` trains on them."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.store import db, repo, transaction

NORMATIVE = Path(__file__).resolve().parent.parent / "data" / "trajectory-rlhf-2026.11.json"

MULTI_TURN = {
    "trajectory_id": "multi",
    "schema_version": "RLHF-2026.11",
    "turns": [
        {"turn": 0, "role": "user", "loss_mask": 0, "content": "List the files then fix the bug."},
        {
            "turn": 1,
            "role": "assistant",
            "loss_mask": 1,
            "content": "Listing files.",
            "tool_call": {"name": "shell", "args": {"cmd": "ls"}},
        },
        {"turn": 2, "role": "tool", "loss_mask": 0, "content": "main.py"},
        {
            "turn": 3,
            "role": "assistant",
            "loss_mask": 0,
            "content": "(a draft the annotator masked)",
        },
        {"turn": 4, "role": "user", "loss_mask": 0, "content": "Go on."},
        {
            "turn": 5,
            "role": "assistant",
            "loss_mask": 1,
            "content": "Fixed the off-by-one in main.py.",
        },
    ],
    "verifier": {
        "f2p_exit": 0,
        "p2p_exit": 0,
        "harness_sha256_verified": True,
        "terminal_reward": 1.0,
    },
}


@pytest.fixture
def exported(db_url, tmp_path) -> Path:
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "agents", kinds=["steps"])
    failed = {
        **orjson.loads(NORMATIVE.read_bytes()),
        "trajectory_id": "failed",
        "verifier": {
            "f2p_exit": 1,
            "p2p_exit": 0,
            "harness_sha256_verified": True,
            "terminal_reward": 0.0,
        },
    }
    source = tmp_path / "t.jsonl"
    source.write_bytes(
        b"".join(
            orjson.dumps(r) + b"\n"
            for r in (MULTI_TURN, orjson.loads(NORMATIVE.read_bytes()), failed)
        )
    )
    import_files(engine, "agents", [source])
    out = tmp_path / "sft"
    export_project(engine, "agents", ExportOptions(format="trl-sft-agent", out=out))
    engine.dispose()
    return out


def rows(out: Path) -> list[dict]:
    return [orjson.loads(x) for x in (out / "train.jsonl").read_bytes().splitlines()]


def test_one_row_per_trained_assistant_turn_with_every_prior_turn_as_prompt(exported):
    multi = [r for r in rows(exported) if r["prompt"][0]["content"].startswith("List the files")]
    assert [r["completion"] for r in multi] == [
        [
            {
                "role": "assistant",
                "content": "Listing files.",
                "tool_calls": [
                    {"type": "function", "function": {"name": "shell", "arguments": {"cmd": "ls"}}}
                ],
            }
        ],
        [{"role": "assistant", "content": "Fixed the off-by-one in main.py."}],
    ]
    assert multi[0]["prompt"] == [{"role": "user", "content": "List the files then fix the bug."}]
    assert [m["role"] for m in multi[1]["prompt"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert multi[1]["prompt"][2] == {"role": "tool", "content": "main.py", "name": "shell"}
    # the masked draft is context only, never a completion
    assert all("masked" not in m["content"] for r in multi for m in r["completion"])


def test_the_normative_trajectory_keeps_its_tool_call_and_a_failed_one_gives_no_rows(exported):
    normative = [
        r for r in rows(exported) if r["prompt"][0]["content"].startswith("Fix lost wake-up")
    ]
    assert len(normative) == 1  # the failed copy of the same trajectory is gated
    [completion] = normative[0]["completion"]
    assert completion["tool_calls"][0]["function"] == {
        "name": "apply_patch_and_test",
        "arguments": {"diff_lines": 19},
    }
    assert completion["content"].startswith("Inspecting src/channel/mpsc.rs")
    manifest = orjson.loads((exported / "manifest.json").read_bytes())
    assert b"SFT trajectory: fail-to-pass tests failed" in orjson.dumps(manifest)


TOOL_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}"
    "{% if m.get('tool_calls') %}{% for c in m['tool_calls'] %} call {{ c['function']['name'] }}"
    "{% endfor %}{% endif %}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@pytest.mark.train
def test_sft_trainer_trains_on_the_export(exported, tmp_path):
    pytest.importorskip("trl")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import datasets
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from trl import SFTConfig, SFTTrainer

    dataset = datasets.load_dataset("json", data_files=str(exported / "train.jsonl"), split="train")
    texts = [m["content"] for row in rows(exported) for m in row["prompt"] + row["completion"]]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        texts + ["user assistant tool system : call shell apply_patch_and_test"],
        trainers.WordLevelTrainer(special_tokens=["<unk>", "<pad>", "<eos>", "<bos>"]),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
    )
    tokenizer.chat_template = TOOL_TEMPLATE
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=512,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.bos_token_id,
        )
    )
    args = SFTConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,
        report_to=[],
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        max_length=256,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    labels = trainer.train_dataset[0][
        "labels"
    ]  # the prompt turns carry no loss, the completion does
    assert labels[0] == -100 and any(label != -100 for label in labels)
    trainer.train()
    assert trainer.state.global_step == 2


STEPPED = {
    "trajectory_id": "stepped",
    "schema_version": "RLHF-2026.11",
    "turns": [
        {"turn": 0, "role": "user", "loss_mask": 0, "content": "Find and fix the leak."},
        {
            "turn": 1,
            "role": "assistant",
            "loss_mask": 1,
            "prm_steps": [{"step": 1, "text": "Run the profiler.", "verdict": 1}],
            "tool_call": {"name": "profile", "args": {"target": "server"}},
        },
        {"turn": 2, "role": "tool", "loss_mask": 0, "content": "cache grows without bound"},
        {
            "turn": 3,
            "role": "assistant",
            "loss_mask": 1,
            "prm_steps": [
                {"step": 1, "text": "Bound the cache with an LRU.", "verdict": 1},
                {"step": 2, "text": "Delete the cache entirely.", "verdict": -1},
            ],
        },
    ],
}


def test_stepwise_rows_take_every_prior_turn_as_the_prompt(sqlite_url, tmp_path):
    engine = db.open_db(sqlite_url)
    with transaction(engine) as s:
        repo.create_project(s, "agents", kinds=["steps"])
    source = tmp_path / "t.jsonl"
    source.write_bytes(orjson.dumps(STEPPED) + b"\n")
    import_files(engine, "agents", [source])
    out = tmp_path / "steps"
    export_project(engine, "agents", ExportOptions(format="trl-stepwise", out=out))
    engine.dispose()
    first, second = rows(out)
    assert first == {
        "prompt": "user: Find and fix the leak.",
        "completions": ["Run the profiler."],
        "labels": [True],
    }
    assert second["prompt"] == (
        "user: Find and fix the leak.\n\nassistant: Run the profiler.\n"
        '[tool call profile {"target":"server"}]\n\ntool: cache grows without bound'
    )
    assert second["completions"] == ["Bound the cache with an LRU.", "Delete the cache entirely."]
    assert second["labels"] == [True, False]
