"""The set of keys an export has written, spilled to disk past a bound (``io/export/seen.py``)."""

from __future__ import annotations

import random

from preflab.io.export.seen import SeenKeys


def test_answers_as_a_set_does_across_the_spill():
    rng = random.Random(7)
    keys = [rng.randrange(300).to_bytes(16, "little") for _ in range(2_000)]
    seen, reference = SeenKeys(memory=16), set()
    for key in keys:
        assert seen.add(key) == (key not in reference)
        reference.add(key)
    assert seen.spilled > 0  # most keys went through the disk table
    assert len(seen) == len(reference)
    seen.close()


def test_holds_at_most_the_bound_in_memory():
    seen = SeenKeys(memory=10)
    for n in range(95):
        assert seen.add(n.to_bytes(4, "little"))
    assert len(seen._recent) < 10
    assert seen.spilled == 90
    assert not seen.add((3).to_bytes(4, "little"))  # on disk
    assert not seen.add((94).to_bytes(4, "little"))  # in memory
    seen.close()
