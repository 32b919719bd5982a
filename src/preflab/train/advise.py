"""The stage advisor: ``preflab advise passk.json --out DIR``.

It turns measured pass@k (``preflab verify rollouts``) into the specification's decisions, per
domain, and writes the prompt lists that follow from them. The thresholds and their defaults are
the specification's (see ``docs/stages.md``); a policy file or options change them:

| decision | rule (domain pass@k, mean over its tasks) | default |
|---|---|---|
| cold start: buy SFT demonstrations | ``pass@16 < cold_start_below`` | 0.10 |
| stop SFT (demonstrations waste expert hours) | ``pass@8 >= stop_sft_at`` | 0.40 |
| no GRPO / DPO on a prompt | its ``pass@32 <= no_rl_at_most`` (== 0: never solved) | 0.0 |
| preference data | ``pass@16 >= preference_at`` | 0.15 |
| GRPO on a prompt | P(a group of ``group_size`` samples has reward variance > 0) ``> grpo_min_mixed_share`` | G = 8, 0.0 |

Prompt lists (one JSON row per task: ``task_id``, ``prompt``, ``domain``, ``n``, ``c``, pass@k,
``reason``):

* ``demonstrations.jsonl``: tasks with ``pass@16 < cold_start_below`` in domains where SFT has not
  been stopped — the prompts of a demonstration project (``--create-project``);
* ``grpo.jsonl``: tasks whose groups carry a learning signal; a task every sample passes or every
  sample fails (a zero-variance group: GRPO's advantage is 0 for each of its samples) never lands
  here, nor does a guessable one;
* ``preference.jsonl``: tasks solved at least once in domains past the preference threshold;
* ``drop.jsonl``: tasks to keep out of RL: always solved, never solved, or guessable.

A decision whose k exceeds the samples drawn (``n < k``) is ``unknown`` and says how many samples
it needs, never a guess.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..verify.passk import mixed_group_share, pass_at_k


class StageThresholds(BaseModel):
    """The specification's thresholds; every one can be set in a policy file or an option."""

    model_config = ConfigDict(extra="forbid")
    cold_start_k: int = Field(16, ge=1)
    cold_start_below: float = Field(0.10, ge=0, le=1)
    stop_sft_k: int = Field(8, ge=1)
    stop_sft_at: float = Field(0.40, ge=0, le=1)
    no_rl_k: int = Field(32, ge=1)
    no_rl_at_most: float = Field(0.0, ge=0, le=1)
    preference_k: int = Field(16, ge=1)
    preference_at: float = Field(0.15, ge=0, le=1)
    group_size: int = Field(8, ge=2)
    grpo_min_mixed_share: float = Field(0.0, ge=0, lt=1)


def load_thresholds(
    policy: Path | None = None, overrides: Mapping[str, Any] | None = None
) -> StageThresholds:
    """Defaults, then the policy file's ``stages:`` section (YAML or JSON; a file holding only
    the thresholds works too), then ``overrides``."""
    values: dict[str, Any] = {}
    if policy is not None:
        import yaml

        data = yaml.safe_load(policy.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{policy}: expected a mapping of thresholds")
        section = data.get("stages", data)
        if not isinstance(section, dict):
            raise ValueError(f"{policy}: stages: expected a mapping of thresholds")
        values.update(section)
    values.update(overrides or {})
    return StageThresholds(**values)


@dataclass
class TaskStats:
    task_id: str
    domain: str
    n: int
    c: int
    prompt: Any = None
    guessable: list[str] = field(default_factory=list)
    draft: str | None = None
    model: str | None = None
    #: the task's author / approver / version where the tasks file gives them
    provenance: dict[str, Any] = field(default_factory=dict)

    def at(self, k: int) -> float | None:
        return pass_at_k(self.n, self.c, k) if k <= self.n else None


def _tasks(report: Mapping[str, Any]) -> list[TaskStats]:
    out = []
    for task_id, t in report.get("tasks", {}).items():
        out.append(
            TaskStats(
                task_id,
                str(t.get("domain") or t.get("kind") or "default"),
                int(t["n"]),
                int(t["c"]),
                t.get("prompt"),
                list(t.get("guessable") or []),
                t.get("draft"),
                t.get("model"),
                dict(t.get("provenance") or {}),
            )
        )
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _row(t: TaskStats, th: StageThresholds, reason: str) -> dict[str, Any]:
    ks = sorted({th.stop_sft_k, th.cold_start_k, th.preference_k, th.no_rl_k})
    return {
        "task_id": t.task_id,
        "prompt": t.prompt,
        "domain": t.domain,
        "n": t.n,
        "c": t.c,
        **{f"pass@{k}": t.at(k) for k in ks if k <= t.n},
        f"mixed_group_share@{th.group_size}": round(mixed_group_share(t.n, t.c, th.group_size), 6),
        "reason": reason,
        "draft": t.draft,
        "model": t.model,
        **({"provenance": t.provenance} if t.provenance else {}),
    }


def advise(report: Mapping[str, Any], th: StageThresholds) -> dict[str, Any]:
    """Decisions per domain and the prompt lists, from a ``preflab verify rollouts`` report."""
    tasks = _tasks(report)
    counted = [t for t in tasks if not t.guessable]
    domains: dict[str, list[TaskStats]] = {}
    for t in counted:
        domains.setdefault(t.domain, []).append(t)

    def domain_at(members: list[TaskStats], k: int) -> float | None:
        return _mean([v for t in members if (v := t.at(k)) is not None])

    decisions: dict[str, dict[str, Any]] = {}
    for name, members in sorted(domains.items()):
        cold = domain_at(members, th.cold_start_k)
        stop = domain_at(members, th.stop_sft_k)
        pref = domain_at(members, th.preference_k)
        n_min = min(t.n for t in members)
        d: dict[str, Any] = {
            "tasks": len(members),
            f"pass@{th.cold_start_k}": cold,
            f"pass@{th.stop_sft_k}": stop,
        }
        if cold is not None and cold < th.cold_start_below:
            d["sft"] = "cold start: commission SFT demonstrations"
        elif stop is not None and stop >= th.stop_sft_at:
            d["sft"] = "stop SFT: demonstrations would waste expert hours"
        elif cold is None or stop is None:
            need = max(th.cold_start_k, th.stop_sft_k)
            d["sft"] = f"unknown: needs n >= {need} samples per task (have {n_min})"
        else:
            d["sft"] = "SFT may continue (between cold start and the stop threshold)"
        if pref is None:
            d["preference"] = f"unknown: needs n >= {th.preference_k} samples per task"
        else:
            d["preference"] = (
                "collect preference data"
                if pref >= th.preference_at
                else f"not yet: pass@{th.preference_k} < {th.preference_at}"
            )
        d[f"pass@{th.preference_k}"] = pref
        no_rl = [t for t in members if _no_rl(t, th)]
        d["no_rl_prompts"] = len(no_rl)
        d["cold_start"] = cold is not None and cold < th.cold_start_below
        d["stop_sft"] = stop is not None and stop >= th.stop_sft_at
        d["preference_data"] = pref is not None and pref >= th.preference_at
        decisions[name] = d

    demonstrations, grpo, preference, drop = [], [], [], []
    for t in tasks:
        if t.guessable:
            drop.append(_row(t, th, "guessable: passed by " + ", ".join(t.guessable)))
            continue
        d = decisions[t.domain]
        if t.c == t.n:
            drop.append(_row(t, th, "always solved: zero reward variance"))
        elif t.c == 0:
            drop.append(_row(t, th, "never solved: zero reward variance"))
        cold = t.at(th.cold_start_k)
        if cold is not None and cold < th.cold_start_below and not d["stop_sft"]:
            demonstrations.append(
                _row(t, th, f"pass@{th.cold_start_k} = {cold:.3f} < {th.cold_start_below}")
            )
        share = mixed_group_share(t.n, t.c, th.group_size)
        if not _no_rl(t, th) and share > th.grpo_min_mixed_share:
            grpo.append(_row(t, th, f"mixed groups of {th.group_size}: {share:.3f}"))
        if d["preference_data"] and not _no_rl(t, th) and t.c < t.n:
            preference.append(_row(t, th, f"domain pass@{th.preference_k} >= {th.preference_at}"))
    return {
        "thresholds": th.model_dump(),
        "domains": decisions,
        "lists": {
            "demonstrations": demonstrations,
            "grpo": grpo,
            "preference": preference,
            "drop": drop,
        },
        "guessable": {t.task_id: t.guessable for t in tasks if t.guessable},
        "source": {"tasks": len(tasks), "counted": len(counted)},
    }


def _no_rl(t: TaskStats, th: StageThresholds) -> bool:
    """No GRPO/DPO: pass@no_rl_k at or below the bar. With fewer samples than no_rl_k, the
    estimate at k = n stands in (pass@k is 0 for every k exactly when no sample passed)."""
    if t.c == 0:
        return True
    value = t.at(min(th.no_rl_k, t.n))
    return value is not None and value <= th.no_rl_at_most


def write_advice(advice: Mapping[str, Any], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in advice["lists"].items():
        path = out_dir / f"{name}.jsonl"
        path.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
        )
        paths[name] = path
    paths["json"] = out_dir / "advice.json"
    paths["json"].write_text(json.dumps(advice, indent=2, ensure_ascii=False) + "\n")
    paths["html"] = out_dir / "advice.html"
    paths["html"].write_text(render_html(advice), encoding="utf-8")
    return paths


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return html.escape(str(value))


def render_html(advice: Mapping[str, Any]) -> str:
    """One self-contained page: thresholds, decisions per domain, the lists."""
    th = advice["thresholds"]
    rows = []
    for name, d in advice["domains"].items():
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{_fmt(v)}</td>"
                for v in (
                    name,
                    d["tasks"],
                    d.get(f"pass@{th['stop_sft_k']}"),
                    d.get(f"pass@{th['cold_start_k']}"),
                    d["sft"],
                    d["preference"],
                    d["no_rl_prompts"],
                )
            )
            + "</tr>"
        )
    lists = []
    for name, items in advice["lists"].items():
        body = "".join(
            f"<tr><td>{_fmt(r['task_id'])}</td><td>{_fmt(r['domain'])}</td>"
            f"<td>{r['c']}/{r['n']}</td><td>{_fmt(r['reason'])}</td></tr>"
            for r in items
        )
        lists.append(
            f"<h2>{html.escape(name)} ({len(items)})</h2><table><tr><th>task</th><th>domain</th>"
            f"<th>passed</th><th>why</th></tr>{body}</table>"
        )
    thresholds = "".join(f"<li><code>{k}</code> = {_fmt(v)}</li>" for k, v in th.items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>preflab stage advice</title>
<style>body{{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem}}
table{{border-collapse:collapse;margin:1rem 0}}td,th{{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}}
th{{background:#f4f4f4}}</style></head><body>
<h1>Stage advice from measured pass@k</h1>
<p>Rules and their sources: docs/stages.md. Thresholds of this run:</p><ul>{thresholds}</ul>
<table><tr><th>domain</th><th>tasks</th><th>pass@{th["stop_sft_k"]}</th><th>pass@{th["cold_start_k"]}</th>
<th>SFT</th><th>preference data</th><th>prompts with no GRPO/DPO</th></tr>{"".join(rows)}</table>
{"".join(lists)}
</body></html>
"""
