"""A real client proves the exports: TRL's trainers load them with ``datasets`` and train.

Real human labels (PandaLM, 3 annotators; Anthropic hh-rlhf, chat) plus a few synthetic thumbs,
step labels and demonstrations go through a database and preflab's exporters; each export is
loaded with ``datasets`` exactly as its card says and fed to ``RewardTrainer``, ``DPOTrainer``,
``KTOTrainer`` and ``SFTTrainer`` for 2 optimisation steps on a 2-layer Llama built from a
config (hidden size 32) with a word-level tokenizer trained here on the exported text. Nothing
is downloaded (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("trl")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import datasets

from preflab.io.export import ExportOptions, export_project
from preflab.io.formats import FORMATS, ConvertOptions
from preflab.schema import JUDGMENT_KINDS, DemonstrationJudgment, StepsJudgment, UnaryJudgment
from preflab.store import Base, make_engine, transaction
from preflab.store.repo import add_item, add_judgment, create_project

pytestmark = pytest.mark.train

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
N_PANDALM = 24
N_HH = 12
# excerpts of the public sets (tests/data/LICENSE-DATA): the first 170 PandaLM records hold 24
# short pairs, the first 300 hh-rlhf conversations 12 short ones
DATA = Path(__file__).resolve().parents[1] / "data"


def _short(*texts: str, words: int = 30) -> bool:
    return all(isinstance(t, str) and len(t.split()) < words for t in texts)


def _load(project, fmt: str, records, session) -> None:
    for record in records:
        converted = FORMATS[fmt].convert(record, ConvertOptions())
        for item in converted.items:
            add_item(session, project, item)
        for j in converted.judgments:
            add_judgment(session, project, j)


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    """Export every TRL target once (SQLite), in a mix of file formats."""
    root = tmp_path_factory.mktemp("trl")
    pandalm = [
        r
        for r in json.loads((DATA / "pandalm-170.json").read_text())
        if _short(r["instruction"] + " " + (r["input"] or ""), r["response1"], r["response2"])
    ][:N_PANDALM]
    hh = []
    with gzip.open(DATA / "hh-rlhf-300.jsonl.gz", "rt") as f:
        for line in f:
            r = json.loads(line)
            if _short(r["chosen"], r["rejected"], words=45):
                hh.append(r)
            if len(hh) == N_HH:
                break
    engine = make_engine(f"sqlite:///{root / 'preflab.db'}")
    Base.metadata.create_all(engine)
    with transaction(engine) as s:
        std = create_project(s, "pandalm", kinds=list(JUDGMENT_KINDS))
        _load(std, "pandalm", pandalm, s)
        chat = create_project(s, "hh", kinds=["pairwise"])
        _load(chat, "hh-rlhf", hh, s)
        # synthetic thumbs, step labels and demonstrations on the PandaLM items
        for k, r in enumerate(pandalm):
            item_id, prov = f"pandalm-{r['idx']}", {"rater_id": "expert"}
            add_judgment(
                s,
                std,
                UnaryJudgment(
                    item_id=item_id, candidate_id="response1", label=k % 2 == 0, provenance=prov
                ),
            )
            words = r["response1"].split()
            steps = [" ".join(words[i : i + 5]) for i in range(0, len(words), 5)] or ["(empty)"]
            verdicts = [1] * len(steps) if k % 3 else [1] * (len(steps) - 1) + [-1]
            add_judgment(
                s,
                std,
                StepsJudgment(
                    item_id=item_id,
                    candidate_id="response1",
                    steps=steps,
                    verdicts=verdicts,
                    provenance=prov,
                ),
            )
            add_judgment(
                s,
                std,
                DemonstrationJudgment(
                    item_id=item_id, text=r["response2"], status="accepted", provenance=prov
                ),
            )
    plan = {
        "preference": ("pandalm", "trl-preference", "jsonl", None),
        "reward": ("pandalm", "trl-reward", "parquet", None),
        "kto": ("pandalm", "trl-kto", "hf", None),
        "sft": ("pandalm", "trl-sft", "jsonl", None),
        "sft-chat": ("pandalm", "trl-sft", "parquet", True),
        "stepwise": ("pandalm", "trl-stepwise", "jsonl", None),
        "chat-preference": ("hh", "trl-preference", "jsonl", None),
        "chat-reward": ("hh", "trl-reward", "hf", None),
        "chat-kto": ("hh", "trl-kto", "parquet", None),
        # issue 16 §3: rater_hash, rubric_version, guideline_version columns beside TRL's own
        "reward-provenance": ("pandalm", "trl-reward", "jsonl", None),
        "preference-provenance": ("pandalm", "trl-preference", "parquet", None),
    }
    out = {}
    for name, (project, fmt, file_format, conversational) in plan.items():
        out[name] = root / name
        export_project(
            engine,
            project,
            ExportOptions(
                format=fmt,
                out=out[name],
                file_format=file_format,
                conversational=conversational,
                # every short pair, whatever the lengths: these tests are about TRL loading
                # them (the token-length gate, on by default, has its own tests)
                length_gate=None,
                provenance_columns=name.endswith("-provenance"),
            ),
        )
    engine.dispose()
    return out


def load(path: Path) -> datasets.Dataset:
    """Load an export the way its dataset card says."""
    manifest = json.loads((path / "manifest.json").read_text())
    split, file_format = manifest["split"], manifest["file_format"]
    if file_format == "hf":
        return datasets.load_from_disk(str(path))[split]
    builder = "json" if file_format == "jsonl" else "parquet"
    return datasets.load_dataset(
        builder, data_files=str(path / f"{split}.{file_format}"), split="train"
    )


def _texts(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    return []


@pytest.fixture(scope="module")
def tokenizer(exports):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [t for path in exports.values() for row in load(path) for t in _texts(row)]
    corpus += ["system user assistant : <eos>"]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        corpus, trainers.WordLevelTrainer(special_tokens=["<unk>", "<pad>", "<eos>", "<bos>"])
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_config(tokenizer):
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
    )


def causal_lm(tokenizer):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(tiny_config(tokenizer))


COMMON = dict(
    max_steps=2,
    per_device_train_batch_size=2,
    report_to=[],
    use_cpu=True,
    bf16=False,
    logging_steps=1,
    save_strategy="no",
    disable_tqdm=True,
    dataloader_num_workers=0,
)


def assert_trained(trainer) -> None:
    result = trainer.train()
    assert trainer.state.global_step == 2
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 2 and all(loss == loss for loss in losses)  # finite, not NaN
    assert result.training_loss == result.training_loss


PROVENANCE = {"rater_hash", "rubric_version", "guideline_version"}


@pytest.mark.parametrize("export_name", ["reward", "chat-reward", "reward-provenance"])
def test_reward_trainer(exports, tokenizer, tmp_path, export_name):
    import torch
    from transformers import LlamaForSequenceClassification
    from trl import RewardConfig, RewardTrainer

    dataset = load(exports[export_name])
    # PandaLM and hh-rlhf record no preference strength: no invented margin column (issue 15);
    # margins that raters gave reach TRL's collator in tests/consumers/test_trl_reward.py
    extra = PROVENANCE if export_name.endswith("-provenance") else set()
    assert set(dataset.column_names) == {"prompt", "chosen", "rejected"} | extra
    torch.manual_seed(0)
    config = tiny_config(tokenizer)
    config.num_labels = 1
    model = LlamaForSequenceClassification(config)
    args = RewardConfig(output_dir=str(tmp_path), max_length=256, **COMMON)
    trainer = RewardTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer
    )
    assert len(trainer.train_dataset) == len(dataset)  # nothing filtered out by max_length
    assert_trained(trainer)


@pytest.mark.parametrize("export_name", ["preference", "chat-preference", "preference-provenance"])
def test_dpo_trainer(exports, tokenizer, tmp_path, export_name):
    from trl import DPOConfig, DPOTrainer

    dataset = load(exports[export_name])
    extra = sorted(PROVENANCE) if export_name.endswith("-provenance") else []
    assert sorted(dataset.column_names) == sorted(["prompt", "chosen", "rejected", *extra])
    args = DPOConfig(output_dir=str(tmp_path), max_length=256, **COMMON)
    trainer = DPOTrainer(
        model=causal_lm(tokenizer),
        ref_model=causal_lm(tokenizer),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    assert_trained(trainer)


@pytest.mark.parametrize("export_name", ["kto", "chat-kto"])
def test_kto_trainer(exports, tokenizer, tmp_path, export_name):
    from trl import KTOConfig, KTOTrainer

    dataset = load(exports[export_name])
    assert dataset.column_names == ["prompt", "completion", "label"]
    assert set(dataset["label"]) == {True, False}
    args = KTOConfig(output_dir=str(tmp_path), max_length=256, **COMMON)
    trainer = KTOTrainer(
        model=causal_lm(tokenizer),
        ref_model=causal_lm(tokenizer),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    assert_trained(trainer)


@pytest.mark.parametrize("export_name", ["sft", "sft-chat"])
def test_sft_trainer(exports, tokenizer, tmp_path, export_name):
    from trl import SFTConfig, SFTTrainer

    dataset = load(exports[export_name])
    expected = ["messages"] if export_name == "sft-chat" else ["prompt", "completion"]
    assert dataset.column_names == expected and dataset.num_rows == N_PANDALM
    args = SFTConfig(output_dir=str(tmp_path), max_length=256, packing=False, **COMMON)
    trainer = SFTTrainer(
        model=causal_lm(tokenizer), args=args, train_dataset=dataset, processing_class=tokenizer
    )
    assert_trained(trainer)


def test_stepwise_export_loads_as_trl_stepwise_supervision(exports):
    from trl.data_utils import is_conversational

    dataset = load(exports["stepwise"])
    assert dataset.column_names == ["prompt", "completions", "labels"]
    assert dataset.num_rows == N_PANDALM
    for row in dataset:
        assert len(row["completions"]) == len(row["labels"]) >= 1
        assert all(row["labels"][:-1]) and not is_conversational(row)
    assert (
        sum(not row["labels"][-1] for row in dataset) == N_PANDALM // 3
    )  # every third has an error
