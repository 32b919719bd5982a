"""``near_duplicate_pairs`` confirms its candidates with shingle sets kept per text (bounded):
the pairs and similarities of the search that computes ``jaccard`` for every candidate."""

from __future__ import annotations

import random

import pytest

from preflab.quality import telemetry


def reference_pairs(
    texts: list[str], owners: list[str], min_jaccard: float = 0.8, k: int = 5, num_perm: int = 64
) -> list[tuple[int, int, float]]:
    sigs = telemetry.minhash_signatures(texts, k, num_perm)
    bands, rows = 16, num_perm // 16
    seen, out = set(), []
    for b in range(bands):
        for members in telemetry._buckets(sigs[:, b * rows : (b + 1) * rows]):
            for x in range(len(members)):
                for y in range(x + 1, len(members)):
                    i, j = members[x], members[y]
                    if (i, j) in seen or owners[i] == owners[j]:
                        continue
                    seen.add((i, j))
                    sim = telemetry.jaccard(texts[i], texts[j], k)
                    if sim >= min_jaccard:
                        out.append((i, j, sim))
    return sorted(out)


@pytest.mark.parametrize("kept", [2, 1_000])
def test_same_pairs_as_jaccard_for_every_candidate(
    kept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(telemetry, "SHINGLE_SETS", kept)  # 2: the kept sets cleared often
    rng = random.Random(1)
    stock = ["Response A is better because it is more accurate.", "Better.", "B is clearer"]
    words = "the answer is more accurate clear complete correct helpful than other one".split()
    texts, owners = [], []
    for _ in range(400):
        if rng.random() < 0.4:
            text = rng.choice(stock)
            if rng.random() < 0.5:
                text += rng.choice(["", "!", " Really.", " yes"])
        else:
            text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
        texts.append(text)
        owners.append(f"r{rng.randint(0, 9)}")
    found = telemetry.near_duplicate_pairs(texts, owners, 0.8, 5, 64)
    assert found == reference_pairs(texts, owners)
    assert len(found) > 10 and any(sim < 1.0 for *_, sim in found)
