"""``io/`` reads a project's policy typed (:class:`preflab.schema.policy.Policy`), never as the
stored mapping (issue 32): a mapping read repeats the policy's defaults and checks, and drifts
from them.

The check reads the source of every module under ``src/preflab/io/`` (with :mod:`ast`) and
refuses the two shapes such a read takes:

* the policy taken out of stored settings: ``settings.get("policy")``, ``settings["policy"]``,
  ``(project.settings or {}).get("policy")`` — a ``"policy"`` key read from anything named
  ``...settings``;
* a key read from a policy held as a mapping: ``policy.get("min_alpha", 0.84)``,
  ``data.policy["telemetry"]``, ``policy.get(key)`` — ``get`` / ``pop`` / ``setdefault`` or a
  subscript on anything named ``...policy``. A :class:`Policy` has attributes, not keys, so a
  typed read (``policy.min_alpha``) never looks like this.
"""

from __future__ import annotations

import ast
from pathlib import Path

import preflab

IO = Path(preflab.__file__).parent / "io"
MAPPING_READS = frozenset({"get", "pop", "setdefault"})


def _names(node: ast.AST) -> set[str]:
    """Every name and attribute name in an expression (``(project.settings or {})``:
    ``project``, ``settings``)."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def _terminal(node: ast.AST) -> str | None:
    """The name an expression ends in (``self.shared.policy``: ``policy``)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _reads(node: ast.AST) -> tuple[ast.AST, ast.AST | None] | None:
    """``(receiver, key)`` of a mapping read (``receiver.get(key)``, ``receiver[key]``)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in MAPPING_READS:
            return node.func.value, node.args[0] if node.args else None
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return node.value, node.slice
    return None


def policy_dict_reads(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: what`` for every read of a policy as a mapping in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        read = _reads(node)
        if read is None:
            continue
        receiver, key = read
        terminal = _terminal(receiver) or ""
        if terminal.lower().endswith("policy"):
            found.append(f"{filename}:{node.lineno}: {terminal} read as a mapping")
        elif (
            isinstance(key, ast.Constant)
            and key.value == "policy"
            and any(n.lower().endswith("settings") for n in _names(receiver))
        ):
            found.append(f"{filename}:{node.lineno}: 'policy' read from stored settings")
    return found


def test_no_io_module_reads_a_policy_as_a_mapping():
    modules = sorted(IO.rglob("*.py"))
    assert len(modules) > 30, f"the io package was not found at {IO}"
    found = [
        hit
        for path in modules
        for hit in policy_dict_reads(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not found, (
        "io reads the project policy as a mapping; load it typed "
        "(preflab.schema.policy.stored_policy, preflab.io.export.base.project_policy) "
        "and read its attributes:\n" + "\n".join(found)
    )


# What the check catches: the reads io made before the policy was typed (issue 32), and the
# typed reads that replaced them, which it lets through.
OLD_READS = [
    'policy = (project.settings or {}).get("policy") or {}',
    'value = policy.get("min_alpha", 0.84)',
    'given = policy.get("verbosity_penalty") or {}',
    'self.shared.policy = dict((project.settings or {}).get("policy") or {})',
    'mode = ((project.settings or {}).get("policy") or {}).get("imported_step_verdicts")',
    'tokenizer = options.tokenizer or data.policy["length_tokenizer"]',
    'policy = project_settings["policy"]',
    "value = policy.get(key)",
]
TYPED_READS = [
    "policy = project_policy(project.settings)",
    "value = data.policy.min_alpha",
    "penalty = policy.verbosity_penalty",
    'agreement = manifest["agreement"]["min_alpha"]',
    'kind = manifest["aggregation"]["policy"]',
    'telemetry = record.get("telemetry")',
]


def test_the_check_catches_every_old_read_and_lets_typed_reads_through():
    for line in OLD_READS:
        assert policy_dict_reads(line), f"not caught: {line}"
    for line in TYPED_READS:
        assert not policy_dict_reads(line), f"a typed read refused: {line}"
