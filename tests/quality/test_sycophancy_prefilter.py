"""The sycophancy count's word prefilter (``quality/bias.py``) never hides a match of the regex."""

from __future__ import annotations

import random
import re
import string

from preflab.quality import bias


def _regex_count(text: str) -> int:
    return len(bias.SYCOPHANCY.findall(text))


def test_the_characters_re_ignorecase_adds_are_the_ones_mapped() -> None:
    # any other non-ASCII character that re.I matches to a letter, with a lower case that is not
    # that letter, would be missed by the prefilter's str.lower()
    odd = {
        chr(c)
        for c in range(0x80, 0x110000)
        if not 0xD800 <= c < 0xE000
        and chr(c).lower() not in string.ascii_lowercase
        and re.fullmatch("[a-z]", chr(c), re.I)
    }
    assert odd == {"\u0130", "\u0131", "\u017f"}


def test_prefilter_agrees_with_the_regex_on_case_variants() -> None:
    phrases = [
        "great question",
        "excellent question",
        "you're absolutely right",
        "youre totally right",
        "i apologise",
        "i apologize",
        "happy to help",
        "what a great",
        "what a wonderful",
        "you are correct",
        "good point",
    ]
    extra = {"i": ["\u0130", "\u0131"], "s": ["\u017f"], "k": ["\u212a"]}
    rng = random.Random(0)
    found = 0
    for phrase in phrases:
        for _ in range(200):
            variant = "".join(rng.choice([c, c.upper(), *extra.get(c, [])]) for c in phrase)
            for text in (variant, f"x {variant} y", f"\u00e9 {variant}. {variant}!", variant[1:]):
                expected = _regex_count(text)
                found += expected
                assert bias.text_features(text)["sycophancy"] == expected, text
    assert found > 0  # the variants do match: the comparison is not of zeros only


def test_texts_without_the_words_count_none() -> None:
    for text in ["", "A plain answer.", "Right, the question is a point of help.", "\u00e9t\u00e9"]:
        assert bias.text_features(text)["sycophancy"] == _regex_count(text) == 0
