"""The telemetry rule and its calibration (issue 28 §1, docs/telemetry.md).

One weak signal never removes a label; strong evidence (a pasted answer, several independent
signals together) does. The thresholds were chosen on the labelled sessions of
``tests/data/telemetry-calibration.jsonl.gz``; these tests hold the shipped set to the script
that makes it, the default rule to its documented figures, and docs/telemetry.md to the
script's tables.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from preflab.quality.telemetry import TelemetrySettings, assess_summary

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "calibrate_telemetry.py"


@pytest.fixture(scope="module")
def calib():
    spec = importlib.util.spec_from_file_location("calibrate_telemetry", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def rows(calib):
    return calib.load()


#: The reported case: a clean sentence typed at a person's rhythm, no deletion.
CLEAN = {"typed_chars": 64, "pasted_chars": 0, "iki_cv": 0.5, "revision_ratio": 0.0}


def test_one_weak_signal_is_exported_with_its_evidence():
    found = assess_summary(CLEAN, written_chars=64)
    assert found.names == ["no_revision"] and found.weak and not found.exclude
    assert "weak signal" in found.why


@pytest.mark.parametrize(
    "telemetry, reason",
    [
        # a model's answer pasted whole: strong on its own
        (
            {"pasted_chars": 900, "untrusted_paste_chars": 900, "typed_chars": 10},
            "pasted_answer",
        ),
        # machine-regular typing with no correction: two families, one of them rhythm
        ({"typed_chars": 300, "iki_cv": 0.03, "revision_ratio": 0.0}, "machine_typing+no_revision"),
        # three families: paste, speed, editing
        (
            {"typed_chars": 25, "pasted_chars": 150, "active_ms": 2000, "revision_ratio": 0.0},
            "no_revision+paste_dominant+too_fast",
        ),
    ],
)
def test_strong_evidence_keeps_a_label_out(telemetry, reason):
    found = assess_summary(telemetry, words_to_read=400, written_chars=175)
    assert found.exclude and found.reason == reason


def test_a_quote_of_the_page_or_a_small_paste_is_not_a_pasted_answer():
    quote = {"pasted_chars": 350, "untrusted_paste_chars": 0, "typed_chars": 80, "iki_cv": 0.5}
    assert assess_summary(quote, written_chars=430).flags == []
    notes = {"pasted_chars": 120, "untrusted_paste_chars": 120, "typed_chars": 10}
    found = assess_summary(notes, written_chars=130)
    assert found.names == ["paste_dominant"] and not found.exclude
    # an untrusted paste of 300 characters in an answer of 1,000 is a quote, not the answer
    part = {"pasted_chars": 300, "untrusted_paste_chars": 300, "typed_chars": 700, "iki_cv": 0.5}
    found = assess_summary(part, written_chars=1000)
    assert found.names == ["untrusted_paste"] and not found.exclude


def test_the_shipped_set_is_what_the_script_makes(calib, rows):
    assert rows == calib.generate(), "regenerate: python benchmarks/calibrate_telemetry.py --write"
    assert len(rows) == 2500
    honest = [r for r in rows if r["honest"]]
    assert len(honest) == 1550
    clean = [r for r in rows if r["archetype"] == "clean_typist"]
    # the set exercises the reported case: every clean typist is flagged, and kept
    for r in clean:
        found = assess_summary(r["telemetry"], r["words_to_read"], r["written_chars"])
        assert found.names == ["no_revision"] and not found.exclude


def test_the_default_rule_has_the_documented_figures(calib, rows):
    f = calib.figures(rows, calib.RULES["default"], TelemetrySettings())
    assert (f["honest_excluded"], f["honest"]) == (43, 1550)
    assert (f["cheating_excluded"], f["cheating"]) == (491, 950)
    assert f["false_exclusion"] == 0.0277 and f["catch"] == 0.5168
    for archetype in (
        "typist",
        "clean_typist",
        "short_answer",
        "own_notes",
        "quotes_answer",
        "fast_expert",
        "steady_typist",
    ):
        assert f["per_archetype"][archetype] == 0, archetype
    # the whole false exclusion: answers written elsewhere and pasted whole (to the reviewers)
    assert f["per_archetype"]["drafted_elsewhere"] == 0.86
    assert f["per_archetype"]["llm_paste"] == 1 and f["per_archetype"]["script"] == 1
    before = calib.figures(rows, calib.RULES["any flag (before)"], TelemetrySettings())
    assert before["per_archetype"]["clean_typist"] == 1, "before: every clean typist was dropped"


def test_docs_show_the_scripts_tables(calib, rows):
    doc = (ROOT / "docs" / "telemetry.md").read_text()
    assert calib.markdown(rows, TelemetrySettings()) in doc
    assert re.search(r"\*\*2\.8 %\*\* \(43 of 1,550\)", doc)
    assert "**51.7 %**" in doc


def test_the_python_summary_sends_the_fields_the_web_app_sends(calib):
    js = (ROOT / "src" / "preflab" / "server" / "static" / "app.js").read_text()
    summary = js[js.index("t.summary = () => {") :]
    summary = summary[: summary.index("return out;")]
    sent = set(re.findall(r"\b([a-z_]+):", summary)) | set(re.findall(r"out\.([a-z_]+) =", summary))
    sim = calib.Sim(__import__("numpy").random.default_rng(0))
    sim.type_text(30, calib.human(sim.rng))
    assert set(calib.summary(sim.s)) == sent
