"""``trl-sft-agent``: multi-turn agent trajectories as TRL conversational SFT rows that honour
``loss_mask``.

Format (TRL docs, dataset formats — conversational prompt-completion and tool calling:
https://huggingface.co/docs/trl/dataset_formats)::

    {"prompt": [every turn before the trained one],
     "completion": [{"role": "assistant", "content": str,
                     "tool_calls": [{"type": "function",
                                     "function": {"name": str, "arguments": {...}}}]}]}

One row per assistant turn with ``loss_mask: 1``; its prompt holds all prior turns (user,
earlier assistant turns, tool calls and ``{"role": "tool", "name", "content"}`` outputs).
``SFTTrainer`` trains prompt-completion rows on the completion only (``completion_only_loss``,
its default), so exactly the turns with ``loss_mask: 1`` carry loss; assistant turns with
``loss_mask: 0`` appear only as context. An assistant turn without ``content`` gets its
``prm_steps`` texts joined. Trajectories whose verifier failed give no rows (truth gate).
In Parquet and ``datasets`` output the message lists are JSON strings.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pyarrow as pa

from ...schema.trajectory import TRAJECTORY_SCHEMA_VERSION, Trajectory, Turn
from .base import BATCH_ROWS, Batch, ExportData, Exporter, ExportOptions
from .truth import GATE, TRAJECTORY_CANDIDATE, candidate_failure


def chat_message(turn: Turn, last_tool: str | None) -> dict[str, Any]:
    """A turn as a message in the chat format TRL and ``transformers`` chat templates take."""
    content = turn.content
    if content is None and turn.prm_steps:
        content = "\n\n".join(step.text for step in turn.prm_steps)
    message: dict[str, Any] = {"role": turn.role, "content": content or ""}
    if turn.tool_call is not None:
        message["tool_calls"] = [
            {
                "type": "function",
                "function": {"name": turn.tool_call.name, "arguments": dict(turn.tool_call.args)},
            }
        ]
    if turn.role == "tool" and last_tool is not None:
        message["name"] = last_tool
    return message


def sft_rows(trajectory: Trajectory) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    last_tool = None
    for turn in trajectory.turns:
        message = chat_message(turn, last_tool)
        if turn.role == "assistant" and turn.loss_mask == 1:
            rows.append({"prompt": list(messages), "completion": [message]})
        if turn.tool_call is not None:
            last_tool = turn.tool_call.name
        messages.append(message)
    return rows


class TRLSFTAgent(Exporter):
    name = "trl-sft-agent"
    description = (
        "TRL conversational SFT from agent trajectories, loss_mask honoured, tool calls kept"
    )
    needs = frozenset()
    one_pass = True
    reference = "https://huggingface.co/docs/trl/dataset_formats"

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        return pa.schema([("prompt", pa.string()), ("completion", pa.string())])

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        batch: Batch = {"prompt": [], "completion": [], "_row": []}
        for item in data.items.values():
            stored = (item.metadata or {}).get("trajectory")
            if (
                not isinstance(stored, dict)
                or stored.get("schema_version") != TRAJECTORY_SCHEMA_VERSION
            ):
                continue
            if reason := candidate_failure(item, TRAJECTORY_CANDIDATE):
                data.drops.drop(GATE, f"SFT trajectory: {reason}", item.key)
                continue
            for row in sft_rows(Trajectory.model_validate(stored)):
                batch["prompt"].append(orjson.dumps(row["prompt"]).decode())
                batch["completion"].append(orjson.dumps(row["completion"]).decode())
                batch["_row"].append(row)
                if len(batch["_row"]) >= BATCH_ROWS:
                    yield batch
                    batch = {n: [] for n in batch}
        if batch["_row"]:
            yield batch

    def json_record(self, batch: Batch, names: list[str], i: int) -> dict[str, Any]:
        return batch["_row"][i]


def message_text(message: dict[str, Any]) -> str:
    """A chat message flattened to text (``role: content``), its tool calls spelled out."""
    text = f"{message['role']}: {message['content']}"
    for call in message.get("tool_calls", ()):
        function = call["function"]
        text += f"\n[tool call {function['name']} {orjson.dumps(function['arguments']).decode()}]"
    return text


def trajectory_step_rows(
    trajectory: Trajectory, labels: list[bool]
) -> list[tuple[str, list[str], list[bool]]]:
    """Stepwise rows of a trajectory: one per assistant turn carrying ``prm_steps``, its prompt
    every prior turn as text (tool calls and tool outputs included), its steps that turn's.
    ``labels`` are the resolved labels of all steps in order (they stop at the first error),
    consumed turn by turn."""
    rows: list[tuple[str, list[str], list[bool]]] = []
    messages: list[dict[str, Any]] = []
    last_tool, at = None, 0
    for turn in trajectory.turns:
        if turn.prm_steps and at < len(labels):
            taken = labels[at : at + len(turn.prm_steps)]
            rows.append(
                (
                    "\n\n".join(message_text(m) for m in messages),
                    [s.text for s in turn.prm_steps[: len(taken)]],
                    list(taken),
                )
            )
            at += len(taken)
        messages.append(chat_message(turn, last_tool))
        if turn.tool_call is not None:
            last_tool = turn.tool_call.name
    return rows
