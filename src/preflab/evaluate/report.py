"""``preflab eval report``: what people said about the models of a comparison project.

Battles come from the project's pairwise judgments on items whose two candidates name different
models (items made by ``preflab eval create`` or imported from ``human_eval.jsonl``), resolved as
the exports resolve labels (:func:`preflab.io.export.effective_judgments`: a rater's latest label
per item; an adjudication replaces the production labels of its item); excluded labels are left
out, and so are AI-sourced ones unless asked. One rater's verdict on one item is one battle, the
model shown first being ``model_a``.

The report (one JSON-able dict, :func:`build_report`): per model pair win/tie/loss with Wilson
intervals, Arena ratings with bootstrap intervals (:mod:`.arena`), the same per domain tag (the
item's ``domains`` and ``metadata.evaluation.domains``), and,
given reward-model scores for the same answers (``rollouts.jsonl`` from ``preflab rm score``),
how often the answer the reward model scores higher is the one people prefer.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine

from ..io.export.resolve import effective_judgments
from ..io.importer import Problem
from ..quality.gold import wilson_interval
from ..schema import Item, PairwiseJudgment
from ..store import repo, session_factory
from .arena import arena_ratings, pair_record
from .outputs import OutputsInvalid, answer_key, prompt_key, rollout_rows

NO_DOMAIN = "(no domain)"


@dataclass(frozen=True)
class Verdict:
    """One battle with what people saw: answers and models in the order shown."""

    item_id: str
    prompt: Any
    answers: tuple[Any, Any]
    models: tuple[str, str]
    winner: str  # "model_a" | "model_b" | "tie"
    domains: tuple[str, ...]
    rater_hash: str

    @property
    def battle(self) -> tuple[str, str, str]:
        return (self.models[0], self.models[1], self.winner)


@dataclass
class EvalData:
    project: str
    verdicts: list[Verdict] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


def _body(candidate: Any) -> Any:
    if candidate.text is not None:
        return candidate.text
    return [m.model_dump(mode="json", exclude_none=True) for m in candidate.messages or []]


def _verdicts_of(
    item: Item, judgments: list[Any], order: list[int], include_ai: bool, skipped: Counter[str]
) -> list[Verdict]:
    named = {c.key: c.model for c in item.candidates}
    models = {key: model for key, model in named.items() if model is not None}
    if len(item.candidates) != 2 or len(models) != 2 or len(set(models.values())) != 2:
        skipped["items not comparing two models"] += 1
        return []
    prompt = item.model_dump(mode="json")["prompt"]
    stated = item.metadata.get("evaluation")
    evaluation: dict[str, Any] = stated if isinstance(stated, dict) else {}
    topics = tuple(sorted(set(item.domains) | set(evaluation.get("domains") or ())))
    out = []
    for _, j in effective_judgments(judgments, order):
        if not isinstance(j, PairwiseJudgment):
            skipped[f"{j.kind} judgments"] += 1
            continue
        if j.provenance.source == "ai" and not include_ai:
            skipped["AI-sourced judgments"] += 1
            continue
        first, second = j.shown_order
        out.append(
            Verdict(
                item_id=item.key,
                prompt=prompt,
                answers=(_body(item.candidate(first)), _body(item.candidate(second))),
                models=(models[first], models[second]),
                winner={"a": "model_a", "b": "model_b", "tie": "tie"}[j.winner],
                domains=topics,
                rater_hash=j.provenance.rater_hash or j.provenance.rater_id,
            )
        )
    return out


def load_verdicts(engine: Engine, project_name: str, *, include_ai: bool = False) -> EvalData:
    """Every battle of a project (see the module doc)."""
    data = EvalData(project=project_name)
    with session_factory(engine)() as session:
        project = repo.get_project(session, project_name)
        data.project = project.name
        for iwj in repo.iter_items_with_judgments(session, project):
            order = [m["pk"] for m in iwj.meta]
            data.verdicts.extend(
                _verdicts_of(iwj.item, iwj.judgments, order, include_ai, data.skipped)
            )
    return data


# -- reward model against people ------------------------------------------------------------


def read_rm_scores(path: Path) -> dict[tuple[str, str], float]:
    """``{(prompt key, answer key): reward}`` from a ``rollouts.jsonl``; :class:`OutputsInvalid`
    naming every bad line (a record without ``reward``, one answer scored twice differently)."""
    scores: dict[tuple[str, str], float] = {}
    lines: dict[tuple[str, str], int] = {}
    problems: list[Problem] = []
    for line, r in rollout_rows(path, problems):
        if r.reward is None:
            problems.append(
                Problem(
                    str(path), line, "reward", "missing: score the answers first (preflab rm score)"
                )
            )
            continue
        key = (prompt_key(r.prompt), answer_key(r.response))
        if key in scores and scores[key] != r.reward:
            problems.append(
                Problem(
                    str(path),
                    line,
                    "reward",
                    f"{r.reward} differs from {scores[key]} for the same "
                    f"prompt and answer on line {lines[key]}",
                )
            )
            continue
        scores[key], lines[key] = r.reward, line or 0
    if problems:
        raise OutputsInvalid(problems)
    return scores


def rm_agreement(verdicts: list[Verdict], scores: dict[tuple[str, str], float]) -> dict[str, Any]:
    """Does the answer the reward model scores higher win with people?

    ``agreement``: among battles people decided (no tie) where the reward model's two scores
    differ, the share where its higher-scored answer is the one people preferred, with a 95 %
    Wilson interval. ``rm_preferred_score``: over every scored battle, the people's score of the
    reward model's choice (win 1, tie 0.5, loss 0). Battles with an unscored answer are counted.
    """
    counts: Counter[str] = Counter()
    agree = decided = 0
    score = 0.0
    for v in verdicts:
        key = prompt_key(v.prompt)
        first, second = (scores.get((key, answer_key(a))) for a in v.answers)
        if first is None or second is None:
            counts["unscored"] += 1
            continue
        counts["scored"] += 1
        if first == second:
            counts["rm_ties"] += 1
            score += 0.5
            continue
        rm_pick = "model_a" if first > second else "model_b"
        if v.winner == "tie":
            counts["human_ties"] += 1
            score += 0.5
            continue
        decided += 1
        agree += rm_pick == v.winner
        score += rm_pick == v.winner
    scored = counts["scored"]
    return {
        "battles": len(verdicts),
        "scored": scored,
        "unscored": counts["unscored"],
        "human_ties": counts["human_ties"],
        "rm_ties": counts["rm_ties"],
        "decided": decided,
        "agree": agree,
        "agreement": agree / decided if decided else None,
        "agreement_ci": list(wilson_interval(agree, decided)) if decided else None,
        "rm_preferred_score": score / scored if scored else None,
    }


# -- the report -------------------------------------------------------------------------------


def build_report(
    data: EvalData,
    *,
    rm_scores: dict[tuple[str, str], float] | None = None,
    rounds: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The report dict (see the module doc)."""
    battles = [v.battle for v in data.verdicts]
    by_domain: dict[str, list[tuple[str, str, str]]] = {}
    for v in data.verdicts:
        for d in v.domains or (NO_DOMAIN,):
            by_domain.setdefault(d, []).append(v.battle)
    report: dict[str, Any] = {
        "project": data.project,
        "battles": len(battles),
        "items": len({v.item_id for v in data.verdicts}),
        "raters": len({v.rater_hash for v in data.verdicts}),
        "skipped": dict(data.skipped),
        "ratings": arena_ratings(battles, rounds=rounds, seed=seed) if battles else None,
        "pairs": pair_record(battles),
        "domains": {
            d: {"battles": len(b), "pairs": pair_record(b)} for d, b in sorted(by_domain.items())
        },
        "position": _position(data.verdicts),
    }
    if rm_scores is not None:
        report["rm_agreement"] = rm_agreement(data.verdicts, rm_scores)
    return report


def _position(verdicts: list[Verdict]) -> dict[str, Any]:
    """How often the answer shown first won (a check on the order randomisation and on raters)."""
    decided = [v for v in verdicts if v.winner != "tie"]
    first = sum(v.winner == "model_a" for v in decided)
    return {
        "decided": len(decided),
        "first_shown_won": first,
        "share": first / len(decided) if decided else None,
        "ci": list(wilson_interval(first, len(decided))) if decided else None,
    }


def human_eval_records(data: EvalData) -> list[dict[str, Any]]:
    """``human_eval.jsonl`` rows (answers in the order the rater saw them; ``labeler`` is the
    rater's hash, never the account)."""
    prefers = {"model_a": "answer_1", "model_b": "answer_2", "tie": "tie"}
    rows = []
    for v in data.verdicts:
        row = {
            "prompt": v.prompt,
            "answer_1": v.answers[0],
            "answer_2": v.answers[1],
            "human_prefers": prefers[v.winner],
            "model_1": v.models[0],
            "model_2": v.models[1],
            "labeler": v.rater_hash,
            "id": v.item_id,
        }
        if v.domains:
            row["domains"] = list(v.domains)
        rows.append(row)
    return rows


def write_human_eval(data: EvalData, path: Path) -> int:
    """Write ``human_eval.jsonl`` atomically (a temporary file renamed into place); rows written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    rows = human_eval_records(data)
    with open(tmp, "wb") as f:
        for row in rows:
            f.write(orjson.dumps(row) + b"\n")
    tmp.replace(path)
    return len(rows)


# -- HTML ---------------------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: Any, fmt: str = "{:.0f}") -> str:
    return "—" if value is None else fmt.format(value)


def leaderboard_svg(ratings: dict[str, Any] | None, width: int = 640) -> str:
    """Ratings with their intervals as an inline SVG (presentation attributes only, no styles or
    scripts, so it passes a strict Content-Security-Policy); empty without finite ratings."""
    rows = [m for m in (ratings or {}).get("models", []) if m["rating"] is not None]
    if not rows:
        return ""
    values = [v for m in rows for v in (m["rating"], *(m["ci"] or []))]
    lo, hi = min(values) - 10, max(values) + 10
    left, right, step = 160, width - 20, 28

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (right - left)

    height = step * len(rows) + 30
    # width 100% of the container, at most its natural size: the viewBox scales it down on phones
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="leaderboard-plot" width="100%" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet" role="img" '
        'aria-label="ratings with confidence intervals">'
    ]
    for i, m in enumerate(rows):
        y = 20 + i * step
        parts.append(
            f'<text x="{left - 8}" y="{y + 4}" text-anchor="end" font-size="12">{_e(m["model"])}</text>'
        )
        if m["ci"]:
            parts.append(
                f'<line x1="{x(m["ci"][0]):.1f}" x2="{x(m["ci"][1]):.1f}" y1="{y}" y2="{y}" '
                'stroke="#4a6fa5" stroke-width="2"/>'
            )
        parts.append(f'<circle cx="{x(m["rating"]):.1f}" cy="{y}" r="4" fill="#1d3557"/>')
        parts.append(
            f'<text x="{x(m["rating"]):.1f}" y="{y - 7}" text-anchor="middle" font-size="10">'
            f"{m['rating']:.0f}</text>"
        )
    axis_y = height - 8
    for v in (lo + 10, (lo + hi) / 2, hi - 10):
        parts.append(
            f'<text x="{x(v):.1f}" y="{axis_y}" text-anchor="middle" font-size="10" fill="#555">{v:.0f}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th scope='col'>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _ci(share: dict[str, Any]) -> str:
    return f"{share['share']:.1%} [{share['ci'][0]:.1%}, {share['ci'][1]:.1%}]"


def pair_rows(pairs: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [p["model_1"], p["model_2"], p["battles"], _ci(p["wins"]), _ci(p["ties"]), _ci(p["losses"])]
        for p in pairs
    ]


PAIR_HEADER = ["model 1", "model 2", "battles", "model 1 wins", "ties", "model 2 wins"]


def rating_rows(ratings: dict[str, Any] | None) -> list[list[Any]]:
    rows = []
    for rank, m in enumerate((ratings or {}).get("models", []), 1):
        ci = "—" if not m["ci"] else f"{m['ci'][0]:.0f} – {m['ci'][1]:.0f}"
        rows.append(
            [
                rank,
                m["model"],
                _num(m["rating"]),
                ci,
                m["battles"],
                m["wins"],
                m["ties"],
                m["losses"],
            ]
        )
    return rows


RATING_HEADER = ["rank", "model", "rating", "95 % CI", "battles", "wins", "ties", "losses"]


def render_html(report: dict[str, Any]) -> str:
    """A self-contained page of a :func:`build_report` dict (inline SVG, no scripts, no network);
    every text is escaped (model names and domains come from files)."""
    ratings = report.get("ratings")
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Evaluation {_e(report['project'])}</title><style>body{{font-family:sans-serif;margin:2em;"
        "max-width:1100px}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px;"
        "font-size:13px}th{background:#eee}</style></head><body>",
        f"<h1>Blind evaluation: {_e(report['project'])}</h1>",
        f"<p>{report['battles']} battles on {report['items']} items by {report['raters']} raters.</p>",
        "<h2>Leaderboard</h2>",
    ]
    if ratings and not ratings["identifiable"]:
        out.append("<p>No finite ratings: a model won or lost every battle against the others.</p>")
    out.append(_table(RATING_HEADER, rating_rows(ratings)))
    out.append(leaderboard_svg(ratings))
    if ratings:
        b = ratings["bootstrap"]
        out.append(
            f"<p>Bradley–Terry ratings on the Chatbot Arena scale (base 10, scale 400, mean 1000); "
            f"{b['confidence']:.0%} percentile intervals from {b['used']} bootstrap samples "
            f"({b['not_identifiable']} without finite ratings left out).</p>"
        )
    out += ["<h2>Model pairs</h2>", _table(PAIR_HEADER, pair_rows(report["pairs"]))]
    if len(report["domains"]) > 1 or NO_DOMAIN not in report["domains"]:
        out.append("<h2>Per domain</h2>")
        for domain, d in report["domains"].items():
            out += [
                f"<h3>{_e(domain)} ({d['battles']} battles)</h3>",
                _table(PAIR_HEADER, pair_rows(d["pairs"])),
            ]
    rm = report.get("rm_agreement")
    if rm:
        agreement = (
            "—"
            if rm["agreement"] is None
            else (
                f"{rm['agreement']:.1%} [{rm['agreement_ci'][0]:.1%}, {rm['agreement_ci'][1]:.1%}]"
            )
        )
        out += [
            "<h2>Reward model against people</h2>",
            _table(
                [
                    "battles scored",
                    "decided by people",
                    "RM agrees",
                    "agreement (95 % CI)",
                    "human ties",
                    "RM ties",
                    "unscored",
                ],
                [
                    [
                        rm["scored"],
                        rm["decided"],
                        rm["agree"],
                        agreement,
                        rm["human_ties"],
                        rm["rm_ties"],
                        rm["unscored"],
                    ]
                ],
            ),
        ]
    pos = report["position"]
    if pos["share"] is not None:
        out.append(
            f"<p>The answer shown first won {pos['share']:.1%} of {pos['decided']} decided battles "
            f"(95 % CI {pos['ci'][0]:.1%} – {pos['ci'][1]:.1%}).</p>"
        )
    if report["skipped"]:
        out.append(
            "<p>Left out: "
            + _e(", ".join(f"{k}: {v}" for k, v in report["skipped"].items()))
            + "</p>"
        )
    out.append("</body></html>")
    return "\n".join(out)
