"""A model's *family*, for the judge's self-preference audit.

Default rule: lower-case the name, drop everything up to the last ``/`` (a Hugging Face
organisation is a publisher, not a model family: ``meta-llama/Llama-3.1-8B`` is a Llama), and
keep the leading run of letters (version numbers and sizes are not the family:
``gpt-4o-mini`` and ``gpt-4.1`` are ``gpt``, ``Qwen2.5-72B-Instruct`` and ``qwen3:8b`` are
``qwen``, ``claude-3-5-sonnet`` is ``claude``). A name with no leading letter is its own
family. Where the rule is wrong (``Mixtral`` is a Mistral), a mapping ``{prefix: family}``
given with ``--family PREFIX=FAMILY`` wins: the longest prefix that the lower-cased name (after
the last ``/``) starts with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_LETTERS = re.compile(r"[a-z]+")


def model_family(model: str | None, mapping: Mapping[str, str] | None = None) -> str | None:
    """The family of ``model`` (``None`` for an unknown model).

    >>> [model_family(m) for m in ("gpt-4o", "meta-llama/Llama-3.1-8B", "Qwen2.5-7B", "qwen3:8b")]
    ['gpt', 'llama', 'qwen', 'qwen']
    >>> model_family("Mixtral-8x7B", {"mixtral": "mistral"})
    'mistral'
    """
    if not model or not model.strip():
        return None
    name = model.strip().lower().rsplit("/", 1)[-1]
    for prefix in sorted(mapping or {}, key=len, reverse=True):
        if name.startswith(prefix.lower()):
            return (mapping or {})[prefix].lower()
    match = _LETTERS.match(name)
    return match.group(0) if match else name


def parse_family_options(values: list[str]) -> dict[str, str]:
    """``["mixtral=mistral", ...]`` as a mapping (``ValueError`` naming the bad one)."""
    out = {}
    for value in values:
        prefix, sep, family = value.partition("=")
        if not sep or not prefix.strip() or not family.strip():
            raise ValueError(f"--family {value!r}: expected PREFIX=FAMILY, e.g. mixtral=mistral")
        out[prefix.strip().lower()] = family.strip().lower()
    return out
