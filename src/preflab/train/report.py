"""Self-contained HTML reports (inline SVG, no scripts, no network) for ``rm eval`` and ``rl``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..quality.html_parts import bar_svg, escape, fmt, html_page, html_table

METHOD_NAMES = {
    "reward_model": "reward model",
    "longer_wins": "longer wins",
    "shorter_wins": "shorter wins",
    "tfidf_lr": "TF-IDF + LR",
}


def line_svg(
    points: Sequence[tuple[float, float]],
    *,
    x_label: str,
    y_label: str,
    diagonal: bool = False,
    bounds: tuple[float, float, float, float] | None = None,
) -> str:
    """A small x/y plot: points joined by a line, axis labels, optional y = x reference."""
    w, h, pad = 420, 300, 45
    pts = [(x, y) for x, y in points if x is not None and y is not None]
    if bounds is None:
        xs, ys = [p[0] for p in pts] or [0.0, 1.0], [p[1] for p in pts] or [0.0, 1.0]
        bounds = (min(xs), max(xs), min(ys), max(ys))
    x0, x1, y0, y1 = bounds
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)
    sx = lambda x: pad + (w - 2 * pad) * (x - x0) / (x1 - x0)  # noqa: E731
    sy = lambda y: h - pad - (h - 2 * pad) * (y - y0) / (y1 - y0)  # noqa: E731
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">',
        f'<rect x="{pad}" y="{pad}" width="{w - 2 * pad}" height="{h - 2 * pad}" fill="none" stroke="#999"/>',
    ]
    if diagonal:
        parts.append(
            f'<line x1="{sx(x0):.1f}" y1="{sy(x0):.1f}" x2="{sx(x1):.1f}" y2="{sy(x1):.1f}" '
            'stroke="#999" stroke-dasharray="4"/>'
        )
    if pts:
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#4a7ab5" stroke-width="2"/>')
        parts += [
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="#4a7ab5"/>' for x, y in pts
        ]
    parts += [
        f'<text x="{pad}" y="{h - pad + 15}" font-size="10">{x0:.3g}</text>',
        f'<text x="{w - pad}" y="{h - pad + 15}" font-size="10" text-anchor="end">{x1:.3g}</text>',
        f'<text x="{pad - 4}" y="{h - pad}" font-size="10" text-anchor="end">{y0:.3g}</text>',
        f'<text x="{pad - 4}" y="{pad + 8}" font-size="10" text-anchor="end">{y1:.3g}</text>',
        f'<text x="{w / 2}" y="{h - 8}" font-size="12" text-anchor="middle">{escape(x_label)}</text>',
        f'<text x="12" y="{h / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 12 {h / 2})">'
        f"{escape(y_label)}</text>",
        "</svg>",
    ]
    return "".join(parts)


def render_eval_html(
    report: Mapping[str, Any], title: str = "preflab reward model evaluation"
) -> str:
    methods = report["methods"]
    body = [
        f"<p>Model <code>{escape(report.get('model', ''))}</code>; {report['n_heldout']} held-out pairs "
        f"(split by prompt), baselines fitted on {report['n_train']} training pairs in the same run. "
        f"Lengths in {report['length_unit']}.</p>",
        "<h2>Pairwise accuracy (95 % Wilson CI)</h2>",
        html_table(
            ["method", "accuracy", "low", "high", "pairs", "|longer − shorter|"],
            [
                [
                    METHOD_NAMES.get(k, k),
                    m["accuracy"],
                    m["low"],
                    m["high"],
                    m["n"],
                    report["length_gap"][k],
                ]
                for k, m in methods.items()
            ],
        ),
        bar_svg(
            [
                (METHOD_NAMES.get(k, k), m["accuracy"], m["low"], m["high"])
                for k, m in methods.items()
            ],
            0.0,
            1.0,
        ),
    ]
    if report.get("versus"):
        body.append("<h2>Reward model against each baseline, pair by pair (exact McNemar)</h2>")
        body.append(
            html_table(
                ["baseline", "RM − baseline", "only RM right", "only baseline right", "p"],
                [
                    [
                        METHOD_NAMES.get(k, k),
                        v["difference"],
                        v["a_only"],
                        v["b_only"],
                        v["p_value"],
                    ]
                    for k, v in report["versus"].items()
                ],
            )
        )
    for stratum in ("length", "domain", "agreement"):
        groups = sorted({g for m in methods.values() for g in m["strata"][stratum]})
        body.append(f"<h2>Accuracy by {stratum}</h2>")
        body.append(
            html_table(
                ["method", *groups],
                [
                    [
                        METHOD_NAMES.get(k, k),
                        *[m["strata"][stratum].get(g, {}).get("accuracy") for g in groups],
                    ]
                    for k, m in methods.items()
                ],
            )
        )
        rm = methods["reward_model"]["strata"][stratum]
        body.append(
            bar_svg(
                [
                    (f"RM: {g} (n={rm[g]['n']})", rm[g]["accuracy"], rm[g]["low"], rm[g]["high"])
                    for g in groups
                    if g in rm
                ],
                0.0,
                1.0,
            )
        )
    rho = report.get("spearman_reward_length")
    body.append("<h2>Reward and length</h2>")
    body.append(
        f"<p>Spearman ρ(reward, length) over held-out answers: {fmt(rho and rho['rho'])} "
        f"(p = {fmt(rho and rho['p_value'], 4)}).</p>"
    )
    for name, cal in report["calibration"].items():
        body.append(
            f"<h2>Calibration: {escape(METHOD_NAMES.get(name, name))} (ECE {fmt(cal['ece'])})</h2>"
        )
        body.append(
            line_svg(
                [(b["confidence"], b["accuracy"]) for b in cal["bins"] if b["n"]],
                x_label="confidence max(p, 1 − p)",
                y_label="accuracy",
                diagonal=True,
                bounds=(0.5, 1.0, 0.0, 1.0),
            )
        )
        body.append(
            html_table(
                ["bin", "pairs", "confidence", "accuracy"],
                [
                    [f"{b['low']:.2f}–{b['high']:.2f}", b["n"], b["confidence"], b["accuracy"]]
                    for b in cal["bins"]
                ],
            )
        )
    return html_page(title, body)


MONITOR_LABELS = {
    "reward": "reward (weighted sum)",
    "kl": "KL(policy ‖ reference)",
    "entropy": "entropy (nats per token)",
    "length": "mean length (tokens)",
    "zero_variance_share": "share of zero-variance groups",
    "language_drift": "language drift (share of letters outside the prompt's script)",
}


def render_rl_html(report: Mapping[str, Any], title: str = "preflab RL run: monitors") -> str:
    steps = report["steps"]
    spec = report.get("reward") or {"mode": "rm", "functions": ["reward_model"], "weights": [1.0]}
    terms = " + ".join(
        f"{fmt(w)} · {escape(f)}"
        for f, w in zip(spec["functions"], spec["weights"], strict=False)
        if f != "language_drift"
    )
    body = [
        f"<p>{len(steps)} logged steps, β = {fmt(report.get('beta'))}, reward "
        f"<code>{escape(spec['mode'])}</code>: r = {terms}; GRPO group size "
        f"{escape(report.get('group_size', ''))}. If the reward keeps rising while "
        "the KL to the reference grows and answers lengthen, the policy may be exploiting the reward "
        'rather than improving (Gao et al. 2023, "Scaling Laws for Reward Model Overoptimization"). '
        "Entropy falling towards 0 is collapse; a high share of zero-variance groups (all samples "
        "of a prompt rewarded alike) means most of the batch teaches nothing; language drift is the "
        "share of the answers' letters written in another script than the prompt's "
        "(docs/stages.md).</p>",
    ]
    guessable = report.get("guessable_left_out") or {}
    if guessable:
        body.append(
            "<p>Left out as guessable (a trivial answer passes the verifier): "
            + ", ".join(
                f"<code>{escape(t)}</code> ({escape(', '.join(v))})" for t, v in guessable.items()
            )
            + "</p>"
        )
    summary = report.get("monitors") or {}
    body.append("<h2>Monitors</h2>")
    body.append(
        html_table(
            ["monitor", "first step", "last step", "mean"],
            [
                [MONITOR_LABELS[k], v["first"], v["last"], v["mean"]]
                for k, v in summary.items()
                if v is not None and k in MONITOR_LABELS
            ],
        )
    )
    body += [
        "<h2>Reward vs KL</h2>",
        line_svg(
            [(s["kl"], s["reward"]) for s in steps],
            x_label="KL(policy ‖ reference)",
            y_label="reward",
        ),
        "<h2>Length vs KL</h2>",
        line_svg(
            [(s["kl"], s["length"]) for s in steps],
            x_label="KL(policy ‖ reference)",
            y_label="mean length (tokens)",
        ),
    ]
    for key in ("entropy", "zero_variance_share", "language_drift"):
        body.append(f"<h2>{escape(MONITOR_LABELS[key])} by step</h2>")
        body.append(
            line_svg(
                [(s["step"], s.get(key)) for s in steps],
                x_label="step",
                y_label=key.replace("_", " "),
            )
        )
    names = sorted({n for s in steps for n in (s.get("rewards") or {})})
    body.append("<h2>Every step</h2>")
    body.append(
        html_table(
            ["step", "reward", "KL", "entropy", "length", "zero-variance groups", "drift"]
            + [f"mean {n}" for n in names],
            [
                [
                    s["step"],
                    s["reward"],
                    s["kl"],
                    s.get("entropy"),
                    s["length"],
                    s.get("zero_variance_share"),
                    s.get("language_drift"),
                    *[(s.get("rewards") or {}).get(n) for n in names],
                ]
                for s in steps
            ],
        )
    )
    return html_page(title, body)
