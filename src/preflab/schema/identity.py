"""Item identity: when two records describe the same item.

An item is its prompt and the **set** of its candidate answers, compared after this
normalisation (the same rule for every input format, the importer, the server and the
migration that merged older databases, ``0005_item_identity``):

1. every text (a string prompt or answer, the ``content`` of every message) is put in Unicode
   NFC and stripped of surrounding whitespace (``str.strip``: spaces, tabs, newlines);
2. a prompt is a list of chat messages; a plain-string prompt is one ``user`` message, so
   ``"Q"`` and ``[{"role": "user", "content": "Q"}]`` are the same prompt;
3. an answer is text; an answer written as exactly one ``assistant`` message with no other keys
   is that message's text, so ``"A"`` and ``[{"role": "assistant", "content": "A"}]`` are the
   same answer (longer message lists stay lists, normalised per message);
4. candidate order does not matter: ``[A, B]`` and ``[B, A]`` are the same item.

A candidate without an ``id`` gets :func:`candidate_key` (a hash of its normalised answer), an
item without an ``id`` gets :func:`item_key` (a hash of its normalised prompt and its sorted
``(candidate id, normalised answer)`` pairs). So the same pair judged by alice (chosen A) and by
bob (chosen B) is one item with two opposite pairwise judgments, stored in canonical order
(sorted candidate ids) as signed strengths. A record with an explicit ``id`` whose content equals
an item's joins that item too, its id kept as an alias (the importer, ``docs/item-identity.md``).

What is stored is the text of the first record of an item, as written; only identities and
content hashes use the normalised form. The content hash (:func:`item_content`) covers what a
rater sees and what grading uses: prompt, answers, domains, reference, gold. Item and candidate
``metadata``, ``model`` and ``source`` describe where a record came from, not what the item is:
the same pair arriving from two sources is the same item, and the first record's are kept.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any, Final

from .common import content_hash

_NFC: Final = "NFC"


def normal_text(text: str) -> str:
    """``text`` in Unicode NFC without surrounding whitespace."""
    if not unicodedata.is_normalized(_NFC, text):
        text = unicodedata.normalize(_NFC, text)
    return text.strip()


def _message(message: Any) -> dict[str, Any]:
    data = message if isinstance(message, dict) else message.model_dump(mode="json")
    content = data.get("content")
    return {**data, "content": normal_text(content)} if isinstance(content, str) else dict(data)


def normal_prompt(prompt: Any) -> list[dict[str, Any]]:
    """A prompt (a string, or chat messages as models or dicts) as normalised messages."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": normal_text(prompt)}]
    return [_message(m) for m in prompt]


def normal_answer(body: Any) -> str | list[dict[str, Any]]:
    """An answer (text, or chat messages as models or dicts) in its normal form."""
    if isinstance(body, str):
        return normal_text(body)
    messages = [_message(m) for m in body]
    if (
        len(messages) == 1
        and messages[0].keys() == {"role", "content"}
        and messages[0]["role"] == "assistant"
    ):
        content: str = messages[0]["content"]
        return content
    return messages


def candidate_key(body: Any) -> str:
    """The id of a candidate that has none: ``cand_`` + a hash of its normalised answer."""
    return content_hash(normal_answer(body), prefix="cand_", length=12)


def item_key(prompt: Any, candidates: Iterable[tuple[str, Any]]) -> str:
    """The id of an item that has none, from its prompt and ``(candidate id, answer)`` pairs."""
    return content_hash(identity(prompt, candidates), prefix="itm_", length=16)


def identity(prompt: Any, candidates: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """What :func:`item_key` hashes: the normalised prompt and the candidates sorted by id."""
    return {
        "prompt": normal_prompt(prompt),
        "candidates": sorted(
            ([cid, normal_answer(body)] for cid, body in candidates), key=lambda c: c[0]
        ),
    }


def item_content(data: dict[str, Any]) -> dict[str, Any]:
    """What an item's content hash covers, from its JSON dump (``Item.model_dump(mode="json")``)."""
    cands = sorted(data["candidates"], key=lambda c: c["id"])
    return {
        "prompt": normal_prompt(data["prompt"]),
        "candidates": [
            {
                "id": c["id"],
                "body": normal_answer(c["text"] if c["text"] is not None else c["messages"]),
            }
            for c in cands
        ],
        "domains": data["domains"],
        "reference": data["reference"],
        "gold": data["gold"],
    }
