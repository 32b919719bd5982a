"""An imported RLHF-2026.11 trajectory, turn by turn, for the pages.

The import keeps the record verbatim in ``item.metadata.trajectory`` and turns its turns into the
candidate's messages (without ``loss_mask``). The pages read the record for what the messages
lack: masks, ``prm_steps`` verdicts, the rubric block and the verifier result. Nothing here
changes a stored candidate; every view is a copy.

The verifier result names the reward a policy got, so it is for reviewers and admins only:
:func:`trajectory_view` is called from reviewer pages, never from a rater's.
"""

from __future__ import annotations

import copy
from typing import Any

VERIFIER_FIELDS = ("f2p_exit", "p2p_exit", "harness_sha256_verified", "terminal_reward", "reason")


def _record(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    traj = (metadata or {}).get("trajectory")
    return traj if isinstance(traj, dict) and isinstance(traj.get("turns"), list) else None


def verifier_of(item: dict[str, Any]) -> dict[str, Any] | None:
    """The verifier block: a candidate's ``metadata.verifier`` (preflab verified it) first, else
    the imported ``metadata.trajectory.verifier``; ``None`` when there is none."""
    for c in item.get("candidates") or []:
        block = (c.get("metadata") or {}).get("verifier")
        if isinstance(block, dict) and block:
            return block
    block = (_record(item.get("metadata")) or {}).get("verifier")
    return block if isinstance(block, dict) and block else None


def verifier_rows(block: dict[str, Any]) -> list[tuple[str, Any]]:
    """The block's known fields in a fixed order, then any others it carries."""
    known = [(k, block[k]) for k in VERIFIER_FIELDS if k in block]
    return known + [(k, v) for k, v in block.items() if k not in VERIFIER_FIELDS]


def verifier_passed(block: dict[str, Any]) -> bool | None:
    """True when every check the block states passed, False when one failed, None if it says nothing."""
    checks = [
        block.get("f2p_exit") in (0, None),
        block.get("p2p_exit") in (0, None),
        block.get("harness_sha256_verified") is not False,
    ]
    if all(block.get(k) is None for k in ("f2p_exit", "p2p_exit", "harness_sha256_verified")):
        return None
    return all(checks)


def trajectory_view(item: dict[str, Any]) -> dict[str, Any] | None:
    """Turns, rubric scores and verifier result of an item's trajectory, for reviewers; ``None``
    for an item that is not an imported trajectory and carries no verifier block."""
    record = _record(item.get("metadata"))
    verifier = verifier_of(item)
    if record is None and verifier is None:
        return None
    turns = record["turns"] if record else []
    return {
        "id": (record or {}).get("trajectory_id", item.get("id")),
        "turns": [t for t in turns if isinstance(t, dict)],
        "rubric": (record or {}).get("rubric") or {},
        "verifier": verifier,
        "verifier_rows": verifier_rows(verifier) if verifier else [],
        "verifier_passed": verifier_passed(verifier) if verifier else None,
    }


def with_masks(item_view: dict[str, Any], metadata: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of a (public) item view whose trajectory candidate messages carry the record's
    ``loss_mask`` per turn, so the label page can mark masked turns. Only masks are copied over:
    the view a rater gets keeps no verifier, rubric or verdicts."""
    record = _record(metadata)
    if record is None:
        return item_view
    prompt_len = (
        len(item_view.get("prompt") or []) if isinstance(item_view.get("prompt"), list) else 0
    )
    answer_turns = record["turns"][prompt_len:]
    out = copy.deepcopy(item_view)
    for c in out.get("candidates") or []:
        messages = c.get("messages")
        if not messages or len(messages) != len(answer_turns):
            continue  # not the trajectory's own turns: leave it as it is
        for m, t in zip(messages, answer_turns, strict=True):
            if isinstance(t, dict) and t.get("loss_mask") in (0, 1) and "loss_mask" not in m:
                m["loss_mask"] = t["loss_mask"]
    return out


def step_suggestions(metadata: dict[str, Any] | None) -> dict[str, int]:
    """An imported trajectory's ``prm_steps`` verdicts by step text, for a project that takes
    them as suggestions (``policy.imported_step_verdicts``): the label page shows each beside
    the step it belongs to, and the rater's own verdict is the label. Steps without a verdict
    suggest nothing."""
    record = _record(metadata)
    out: dict[str, int] = {}
    for turn in record["turns"] if record else []:
        for s in (turn.get("prm_steps") if isinstance(turn, dict) else None) or []:
            if isinstance(s, dict) and s.get("verdict") in (-1, 0, 1) and s.get("text"):
                out.setdefault(str(s["text"]).strip(), s["verdict"])
    return out


def step_blocks(candidate: dict[str, Any], steps: list[str]) -> list[dict[str, Any]]:
    """The steps widget's layout for an agent run: the answer's steps (split as for any answer,
    so the stored ``steps`` do not change) in the order of the turns, each assistant turn's tool
    call after its steps and each tool output where it came. Blocks: ``{"steps": [(i, text)]}``,
    ``{"call": call}``, ``{"tool": message}``. An answer without tool turns is one block."""
    messages = candidate.get("messages") or []
    if not any(
        m.get("role") == "tool" or m.get("tool_call") or m.get("tool_calls") for m in messages
    ):
        return [{"steps": list(enumerate(steps))}]
    blocks: list[dict[str, Any]] = []
    pending = list(enumerate(steps))
    for m in messages:
        if m.get("role") == "assistant":
            mine, text = [], m.get("content") or ""
            while pending and pending[0][1] in text:  # steps are this turn's paragraphs, in order
                text = text.split(pending[0][1], 1)[1]
                mine.append(pending.pop(0))
            if mine:
                blocks.append({"steps": mine})
            for call in m.get("tool_calls") or ([m["tool_call"]] if m.get("tool_call") else []):
                blocks.append({"call": call})
        elif m.get("role") == "tool":
            blocks.append({"tool": m})
    if pending:  # a split that did not line up with the turns: keep every step labellable
        blocks.append({"steps": pending})
    return blocks
