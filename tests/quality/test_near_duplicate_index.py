"""The near-duplicate search run once and answered for subsets (the dashboard's snapshot): the
same pairs, in the same order, with the same Jaccard as a search of the subset itself."""

from __future__ import annotations

import random

from preflab.quality.near_duplicate_index import NearDuplicateIndex
from preflab.quality.telemetry import TelemetrySettings, near_duplicate_pairs

STOCK = [
    "The first answer is clearly better because it explains every step of the proof.",
    "Answer B is more concise and still covers the main points the user asked about.",
    "Both answers are wrong about the date; the second one at least cites a source.",
]


def corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    texts, owners = [], []
    for _ in range(n):
        base = rng.choice(STOCK)
        roll = rng.random()
        if roll < 0.3:
            text = base  # verbatim: near duplicates of each other
        elif roll < 0.6:
            text = base.replace("answer", "reply", 1) + " " + rng.choice(["Yes.", "Indeed."])
        else:
            text = " ".join(rng.choice(base.split()) for _ in range(14))
        texts.append(text)
        owners.append(f"r{rng.randrange(6)}")
    return texts, owners


def test_subsets_get_the_pairs_a_search_of_the_subset_finds() -> None:
    cfg = TelemetrySettings()
    params = (cfg.min_jaccard, cfg.shingle, cfg.num_perm)
    texts, owners = corpus(300, 1)
    index = NearDuplicateIndex(texts, owners, *params)
    assert index.found == near_duplicate_pairs(texts, owners, *params)
    assert len(index.found) > 50  # the corpus has near duplicates across owners
    rng = random.Random(2)
    for _ in range(5):
        picked = rng.sample(range(300), 120) + rng.sample(range(300), 10)  # repeats too
        sub_t = [texts[i] for i in picked]
        sub_o = [owners[i] for i in picked]
        expected = near_duplicate_pairs(sub_t, sub_o, *params)
        assert expected
        assert index.pairs(sub_t, sub_o, *params) == expected


def test_a_text_not_searched_or_other_parameters_search_anew() -> None:
    cfg = TelemetrySettings()
    params = (cfg.min_jaccard, cfg.shingle, cfg.num_perm)
    texts, owners = corpus(80, 3)
    index = NearDuplicateIndex(texts[:40], owners[:40], *params)
    # the second half was never searched: its pairs come from a search of its own
    assert index.pairs(texts, owners, *params) == near_duplicate_pairs(texts, owners, *params)
    loose = (0.5, cfg.shingle, cfg.num_perm)
    assert index.pairs(texts[:40], owners[:40], *loose) == near_duplicate_pairs(
        texts[:40], owners[:40], *loose
    )
    assert near_duplicate_pairs(texts[:40], owners[:40], *loose) != near_duplicate_pairs(
        texts[:40], owners[:40], *params
    )
