"""``quality/bias.py: text_features`` skips a regex only where it cannot match: its counts equal
every regex run over the whole text (headers without "#", bold without "**"/"__", bullets of a
text without a newline tried at its start only)."""

from __future__ import annotations

import random

from preflab.quality import bias


def _all_regexes(text: str) -> dict[str, int]:
    out = {name: len(rx.findall(text)) for name, rx in bias._FEATURES.items()}
    out["sycophancy"] = len(bias.SYCOPHANCY.findall(text))
    out["opening_validation"] = int(bool(bias.OPENING_VALIDATION.match(text)))
    return out


PIECES = [
    "# ",
    "## Title",
    "   ### x",
    "#no",
    "- ",
    "* ",
    "+ ",
    "1. ",
    "12) ",
    "3.x",
    "-x",
    "**bold**",
    "__under__",
    "** not**",
    "*",
    "_",
    "\n",
    "\r\n",
    "\r",
    "\u2028",
    "\u0085",
    "\t",
    " ",
    "  ",
    "\u00a0",
    "word",
    "Great question!",
    "ok.",
    "\u6771\u4eac",
]


def test_the_counts_equal_every_regex_run_on_random_texts() -> None:
    rng = random.Random(0)
    totals = dict.fromkeys(bias.FEATURE_NAMES, 0)
    for _ in range(20_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 8)))
        expected = _all_regexes(text)
        assert bias.text_features(text) == expected, repr(text)
        for name, n in expected.items():
            totals[name] += n
    # every feature was found somewhere: the comparison is not of zeros only
    assert all(n > 0 for n in totals.values()), totals


def test_bullets_without_a_newline() -> None:
    for text, n in [("- a", 1), ("  * a - b", 1), ("a - b", 0), ("1) a 2) b", 1), ("-", 0)]:
        assert bias.text_features(text)["bullets"] == _all_regexes(text)["bullets"] == n
