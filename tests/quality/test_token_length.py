"""Lengths in tokens of a local Hugging Face tokenizer directory (no hub access), for the length
audit and the export's length-parity gate."""

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("transformers")  # the `train` extra; always installed by `make test`


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    """A word-level tokenizer trained here, saved as a transformers tokenizer directory."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # splits punctuation off words
    tok.train_from_iterator(
        ["Paris is the capital of France.", "Blue, like the sky."],
        trainers.WordLevelTrainer(special_tokens=["[UNK]"]),
    )
    out = tmp_path / "tok"
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(out)
    return out


def test_token_length_differs_from_words_where_punctuation_splits(tokenizer_dir: Path):
    from preflab.quality.bias import length_function

    words, tokens = length_function("words"), length_function("tokens", str(tokenizer_dir))
    text = "Blue, like the sky."
    assert words(text) == 4  # "Blue," "like" "the" "sky."
    assert tokens(text) == 6  # Blue , like the sky .
    with pytest.raises(ValueError, match="needs a tokenizer"):
        length_function("tokens")


def test_export_gate_counts_tokens_and_the_manifest_says_so(tokenizer_dir: Path, tmp_path: Path):
    from typer.testing import CliRunner

    from preflab.cli import app

    db = str(tmp_path / "t.db")
    rows = tmp_path / "pairs.jsonl"
    # chosen/rejected: 4 vs 4 words (ratio 1.0) but 6 vs 4 tokens (ratio 1.5)
    rows.write_text(
        json.dumps(
            {
                "prompt": "Colour of the sky?",
                "chosen": "Blue, like the sky.",
                "rejected": "It is blue sky",
                "labeler": "r1",
            }
        )
        + "\n"
    )
    runner = CliRunner()
    for args in (
        ["init", "--db", db],
        ["project", "create", "p", "--db", db],
        ["import", "p", str(rows), "--db", db],
    ):
        assert runner.invoke(app, args).exit_code == 0
    by_words = runner.invoke(
        app,
        [
            "export",
            "p",
            "-f",
            "trl-preference",
            "-o",
            str(tmp_path / "w"),
            "--length-gate",
            "0.85:1.20",
            "--length-unit",
            "words",
            "--db",
            db,
            "--json",
        ],
    )
    assert json.loads(by_words.stdout)["counts"]["rows_out"] == 1
    by_tokens = runner.invoke(
        app,
        [
            "export",
            "p",
            "-f",
            "trl-preference",
            "-o",
            str(tmp_path / "t"),
            "--length-gate",
            "0.85:1.20",
            "--length-unit",
            "tokens",
            "--tokenizer",
            str(tokenizer_dir),
            "--db",
            db,
            "--json",
        ],
    )
    manifest = json.loads(by_tokens.stdout)
    assert manifest["counts"]["rows_out"] == 0
    assert manifest["gates"]["length_parity"]["reasons"] == {"chosen_too_long": 1}
    # the tokenizer by name and content hash, never by where it lies on this machine (issue 16 §1, §6)
    length = manifest["gates"]["length_parity"]["length"]
    assert re.fullmatch(
        rf"tokens of {re.escape(Path(tokenizer_dir).name)} \(sha256:[0-9a-f]{{64}}\)", length
    )
    assert str(tmp_path) not in json.dumps(manifest)
