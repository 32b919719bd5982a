"""Fixtures of the reward-model tests: a real project, tiny models built from a config.

The project holds the 60 PandaLM comparisons of ``tests/data/pandalm-60.json`` (3 human
annotators each), with the record's ``motivation_app`` as the item's domain tag. The backbone and
the policy are 2-layer Llamas (hidden size 32) with a word-level tokenizer trained here on the
project's text, saved as local Hugging Face directories, as a user's would be. Nothing is
downloaded (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("trl")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXTURES = Path(__file__).resolve().parents[1] / "data"
PROJECT = "pandalm"


@pytest.fixture(scope="session")
def pandalm_records() -> list[dict]:
    return json.loads((FIXTURES / "pandalm-60.json").read_text())


@pytest.fixture(scope="session")
def project_db(tmp_path_factory, pandalm_records) -> str:
    """A SQLite database URL holding project ``pandalm`` (60 items, 180 pairwise labels)."""
    from preflab.io.formats import FORMATS, ConvertOptions
    from preflab.store import transaction
    from preflab.store.db import open_db
    from preflab.store.repo import add_item, add_judgment, create_project

    url = f"sqlite:///{tmp_path_factory.mktemp('rmdb') / 'preflab.db'}"
    engine = open_db(url)  # migrated, as the CLI opens it
    with transaction(engine) as s:
        project = create_project(s, PROJECT, kinds=["pairwise"])
        for record in pandalm_records:
            converted = FORMATS["pandalm"].convert(record, ConvertOptions())
            for item in converted.items:
                add_item(
                    s,
                    project,
                    item.model_copy(update={"domains": [record["motivation_app"].lower()]}),
                )
            for j in converted.judgments:
                add_judgment(s, project, j)
    engine.dispose()
    return url


@pytest.fixture(scope="session")
def export_dir(tmp_path_factory, project_db) -> Path:
    """The project exported as ``trl-reward`` (JSONL), the way a user would hand it over."""
    from preflab.io.export import ExportOptions, export_project
    from preflab.store import make_engine

    out = tmp_path_factory.mktemp("export") / "reward"
    engine = make_engine(project_db)
    # the length gate off: these tests are about TRL's handling of every pair, long ones included
    export_project(engine, PROJECT, ExportOptions(format="trl-reward", out=out, length_gate=None))
    engine.dispose()
    return out


@pytest.fixture(scope="session")
def tokenizer(pandalm_records):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [
        str(r[k])
        for r in pandalm_records
        for k in ("instruction", "input", "response1", "response2")
    ]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        corpus, trainers.WordLevelTrainer(special_tokens=["<unk>", "<pad>", "<eos>", "<bos>"])
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
    )


def tiny_llama_config(tokenizer, **extra):
    from transformers import LlamaConfig

    return LlamaConfig(
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
        **extra,
    )


@pytest.fixture(scope="session")
def backbone_dir(tmp_path_factory, tokenizer) -> Path:
    """A tiny reward-model backbone directory (Llama, 1 output, random weights)."""
    import torch
    from transformers import LlamaForSequenceClassification

    path = tmp_path_factory.mktemp("backbone")
    torch.manual_seed(0)
    LlamaForSequenceClassification(tiny_llama_config(tokenizer, num_labels=1)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def policy_dir(tmp_path_factory, tokenizer) -> Path:
    """A tiny causal LM directory (the policy for best-of-N sampling and RL)."""
    import torch
    from transformers import LlamaForCausalLM

    path = tmp_path_factory.mktemp("policy")
    torch.manual_seed(0)
    LlamaForCausalLM(tiny_llama_config(tokenizer)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def make_tiny_reward_model(tokenizer):
    """A factory of fresh tiny reward models (same seed, same weights)."""

    def make():
        import torch
        from transformers import LlamaForSequenceClassification

        torch.manual_seed(0)
        return LlamaForSequenceClassification(tiny_llama_config(tokenizer, num_labels=1))

    return make
