"""Issue 31: the quality report's page printed a "-0.0" tick (ticks from ``linspace`` over a
float step) and did not name the project it measured."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from preflab.cli import app
from preflab.quality.report import axis_ticks, build_report, render_html
from preflab.schema import PairwiseJudgment


def _pairs() -> list[PairwiseJudgment]:
    return [
        PairwiseJudgment(
            item_id=f"i{i}",
            shown_order=["a", "b"],
            winner="a" if (i + r) % 3 else "b",
            strength=1,
            provenance={"rater_id": f"r{r}"},
        )
        for i in range(12)
        for r in range(3)
    ]


def test_ticks_are_whole_steps_and_never_minus_zero():
    assert axis_ticks(-0.2, 1.0) == [-0.2, 0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert all(str(t) != "-0.0" for t in axis_ticks(-1.0, 1.0))
    html = render_html(build_report(_pairs()))
    charts = [svg for svg in html.split("<svg")[1:] if 'text-anchor="middle"' in svg]
    assert charts
    for svg in charts:  # each chart's axis: even steps, no "-0.0"
        ticks = re.findall(r'text-anchor="middle">([^<]*)</text>', svg)
        assert "-0.0" not in ticks, ticks
        steps = {round(float(b) - float(a), 6) for a, b in zip(ticks, ticks[1:])}
        assert steps == {0.2}, ticks


def test_the_page_names_the_project(tmp_path):
    db = str(tmp_path / "q.db")
    runner = CliRunner()
    assert runner.invoke(app, ["init", "--db", db]).exit_code == 0
    assert runner.invoke(app, ["project", "create", "sunflower", "--db", db]).exit_code == 0
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["quality", "report", "sunflower", "--db", db, "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "<title>sunflower: quality report</title>" in html
    assert "<h1>sunflower: quality report</h1>" in html
