"""Versioned prompt templates of the judge, shipped as package data (``templates/*.json``).

A template is ``{"name", "version", "kind", "description", "system", "user"}``; ``user`` is a
:class:`string.Template` (``$prompt``, ``$answer_a`` ...), so the JSON examples it shows need no
escaping. A template is immutable once shipped: a change is a new file with version + 1, and
every label records the name and version it was asked with (``Provenance.judge``).
``$spans`` (``pairwise@2``, ``unary@2``) is the runner's request for critique spans in the
project's categories (:func:`preflab.judge.runner.span_request`), empty when it has none.
``--template pairwise`` takes the newest version, ``--template pairwise@1`` that one, and a path
to a JSON file of the same shape a template of one's own.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

KINDS = ("pairwise", "rubric", "unary", "steps", "criteria")

#: the placeholders each kind's ``user`` text may use
PLACEHOLDERS = {
    "pairwise": {"prompt", "answer_a", "answer_b", "spans"},
    "rubric": {"prompt", "answer", "dimension", "dimension_description", "scale"},
    "unary": {"prompt", "answer", "spans"},
    "steps": {"prompt", "steps"},
    "criteria": {"prompt", "answer", "criteria"},
}


class TemplateError(ValueError):
    """A template that cannot be found or read, said in words."""


@dataclass(frozen=True)
class JudgeTemplate:
    name: str
    version: int
    kind: str
    description: str
    system: str
    user: str

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    def messages(self, **values: str) -> list[dict[str, str]]:
        """The chat messages for one request: the system text, then the filled-in user text."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": string.Template(self.user).substitute(values)},
        ]


def _parse(data: Any, where: str) -> JudgeTemplate:
    if not isinstance(data, dict):
        raise TemplateError(f"{where}: expected a JSON object")
    missing = [k for k in ("name", "version", "kind", "system", "user") if k not in data]
    if missing:
        raise TemplateError(f"{where}: missing {', '.join(missing)}")
    kind = data["kind"]
    if kind not in KINDS:
        raise TemplateError(f"{where}: kind: {kind!r} is not one of {', '.join(KINDS)}")
    version = data["version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise TemplateError(f"{where}: version: expected an integer >= 1")
    user = str(data["user"])
    used = {
        m.group("named") or m.group("braced")
        for m in string.Template.pattern.finditer(user)
        if m.group("named") or m.group("braced")
    }
    unknown = used - PLACEHOLDERS[kind]
    if unknown:
        raise TemplateError(
            f"{where}: user: unknown placeholder(s) {sorted(unknown)}; a {kind} template may use "
            f"{sorted(PLACEHOLDERS[kind])}"
        )
    return JudgeTemplate(
        name=str(data["name"]),
        version=version,
        kind=kind,
        description=str(data.get("description", "")),
        system=str(data["system"]),
        user=user,
    )


def shipped() -> list[JudgeTemplate]:
    """Every template shipped with preflab, by name then version."""
    out = []
    for entry in resources.files(__package__).joinpath("templates").iterdir():
        if entry.name.endswith(".json"):
            out.append(_parse(json.loads(entry.read_text(encoding="utf-8")), entry.name))
    return sorted(out, key=lambda t: (t.name, t.version))


def load_template(spec: str) -> JudgeTemplate:
    """``name``, ``name@version`` or a path to a template JSON file."""
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise TemplateError(f"{spec}: {e.strerror or e}") from None
        except json.JSONDecodeError as e:
            raise TemplateError(f"{spec}:{e.lineno}: invalid JSON: {e.msg}") from None
        return _parse(data, spec)
    name, _, version = spec.partition("@")
    candidates = [t for t in shipped() if t.name == name]
    if version:
        candidates = [t for t in candidates if str(t.version) == version]
    if not candidates:
        names = ", ".join(t.label for t in shipped())
        raise TemplateError(f"--template {spec!r}: no such template (shipped: {names})")
    return candidates[-1]
