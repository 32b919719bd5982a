"""The scale benchmark (issue 27; the full run: ``python benchmarks/bench_scale.py --sizes 100k
1m``): its generator is deterministic and makes the project it says, its measurement reads a
child's CPU, peak RSS, timeout and failure, and a tiny run gives sane figures for every step."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scale.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_scale", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()


def test_generator_is_deterministic_and_makes_the_stated_project(tmp_path):
    bench = load_bench()
    a = bench.generate(tmp_path / "a", 900, seed=3, raters=20, per_item=3, batches=3)
    b = bench.generate(tmp_path / "b", 900, seed=3, raters=20, per_item=3, batches=3)
    c = bench.generate(tmp_path / "c", 900, seed=4, raters=20, per_item=3, batches=3)
    assert digest(a) == digest(b) != digest(c)
    assert len(a) == 3 and all(p.stat().st_size > 0 for p in a)
    recs = [json.loads(line) for p in a for line in p.read_text().splitlines()]
    judgments = [r for r in recs if "candidates" not in r]
    items = [r for r in recs if "candidates" in r]
    assert len(judgments) == 900
    assert len(items) == 100  # every third item of 300 comes with candidate ids
    shown = {tuple(r["shown_order"]) for r in judgments if "shown_order" in r}
    assert shown == {("good", "bad"), ("bad", "good")}  # both orders were shown
    assert {r.get("labeler") or r["provenance"]["rater_id"] for r in judgments} <= {
        f"rater-{i:03d}" for i in range(20)
    }
    rationales = [r["rationale"] for r in judgments if "rationale" in r]
    assert len(rationales) > 50
    assert len(set(rationales)) == len(rationales)  # free text, not a few stock phrases
    answers = [len(r["chosen"]) for r in judgments if "chosen" in r]
    assert min(answers) < 300 < max(answers)  # lengths vary, a few hundred characters
    # a pair's raters write the same prompt and answers: one content-identified item
    pairs = {
        (r["prompt"], frozenset((r["chosen"], r["rejected"]))) for r in judgments if "chosen" in r
    }
    assert len(pairs) == 200


@pytest.mark.slow
def test_a_thumbs_project_imports_and_its_report_and_kto_export_run(tmp_path):
    """``--kind unary``: items of one answer, each judged up or down by its raters; the
    project is created with that kind, imported, reported on and exported (trl-kto)."""
    bench = load_bench()
    files = bench.generate(
        tmp_path / "g", 300, seed=1, raters=20, per_item=3, batches=2, kind="unary"
    )
    recs = [json.loads(line) for p in files for line in p.read_text().splitlines()]
    items = [r for r in recs if "candidates" in r]
    thumbs = [r for r in recs if r.get("kind") == "unary"]
    assert len(items) == 100 and len(thumbs) == 300 and len(recs) == 400
    assert all(len(r["candidates"]) == 1 for r in items)
    assert {r["label"] for r in thumbs} == {True, False}
    out = tmp_path / "scale.json"
    bench.main(
        [
            "--judgments", "600", "--kind", "unary", "--db", "sqlite", "--work", str(tmp_path),
            "--json", str(out), "--quiet", "--steps", "import", "report", "export:trl-kto",
        ]
    )  # fmt: skip
    (case,) = json.loads(out.read_text())["cases"]
    assert {s: r["status"] for s, r in case["steps"].items()} == dict.fromkeys(
        ("import", "report", "export:trl-kto"), "ok"
    )
    assert case["steps"]["export:trl-kto"]["bytes"] > 50_000
    (db,) = tmp_path.glob("*-unary/preflab.db")
    with closing(sqlite3.connect(db)) as conn:
        kinds = conn.execute("SELECT kind, count(*) FROM judgments GROUP BY kind").fetchall()
    assert kinds == [("unary", 600)]


def test_measure_reads_a_childs_cpu_and_peak_rss(tmp_path):
    bench = load_bench()
    code = "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(range(0, len(b), 4096)); sum(range(3 * 10**7))"
    r = bench.measure([sys.executable, "-c", code], 60, {})
    assert r["status"] == "ok"
    assert 300 <= r["peak_rss_mb"] < 1000
    assert r["cpu_s"] > 0.1 and r["wall_s"] >= r["cpu_s"] * 0.5


def test_measure_records_a_timeout_and_a_failure_as_such():
    bench = load_bench()
    slow = bench.measure([sys.executable, "-c", "import time; time.sleep(30)"], 1, {})
    assert slow["status"] == "timeout" and 1 <= slow["wall_s"] < 20
    failed = bench.measure([sys.executable, "-c", "import sys; sys.exit('broken input')"], 60, {})
    assert failed["status"] == "failed" and failed["rc"] == 1 and "broken input" in failed["stderr"]


@pytest.mark.slow
def test_tiny_run_measures_every_step_and_caches_the_import(tmp_path):
    bench = load_bench()
    steps = ["baseline", "import", "status", "report", "export:trl-preference", "page:data-last"]
    out = tmp_path / "scale.json"
    argv = [
        "--judgments",
        "2000",
        "--db",
        "sqlite",
        "--work",
        str(tmp_path),
        "--json",
        str(out),
        "--quiet",
        "--steps",
    ]
    bench.main([*argv, *steps])
    doc = json.loads(out.read_text())
    (case,) = doc["cases"]
    assert case["judgments"] == 2000 and case["db"] == "sqlite"
    assert list(case["steps"]) == ["import", *(s for s in steps if s != "import")]  # import first
    for step, r in case["steps"].items():
        assert r["status"] == "ok", (step, r)
        assert 0 < r["cpu_s"] and 0 < r["wall_s"], (step, r)
        assert 5 < r["peak_rss_mb"] < 4000, (step, r)
        assert r["load"] >= 0
    assert case["steps"]["import"]["peak_rss_mb"] > case["steps"]["baseline"]["peak_rss_mb"]
    assert case["steps"]["export:trl-preference"]["bytes"] > 100_000
    page = case["steps"]["page:data-last"]
    # 667 items, 50 a page: the last page starts after the 650th item (keyset, as its links)
    assert page["path"].endswith("after=650") and page["bytes"] > 1000
    assert page["peak_rss_mb"] >= page["server_idle_rss_mb"] * 0.5
    (db,) = tmp_path.glob("*/preflab.db")
    with closing(sqlite3.connect(db)) as conn:
        counts = [
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("judgments", "items", "import_batches")
        ]
    assert counts == [2000, 667, 4]
    # a second run reuses the generated files and the imported database
    bench.main([*argv, "baseline"])
    again = json.loads(out.read_text())["cases"][0]["steps"]
    assert again["import"]["cached"] is True
    assert again["import"]["cpu_s"] == case["steps"]["import"]["cpu_s"]
    assert again["baseline"]["status"] == "ok"


@pytest.mark.slow
def test_against_runs_the_other_checkouts_code_just_before(tmp_path):
    bench = load_bench()
    other = tmp_path / "other-src"
    (other / "preflab").mkdir(parents=True)  # a checkout whose CLI fails: its step says so
    (other / "preflab" / "__init__.py").write_text("raise SystemExit('the other checkout')\n")
    out = tmp_path / "scale.json"
    bench.main(
        [
            "--judgments",
            "600",
            "--work",
            str(tmp_path),
            "--json",
            str(out),
            "--quiet",
            "--against",
            str(other),
            "--steps",
            "status",
        ]
    )
    steps = json.loads(out.read_text())["cases"][0]["steps"]
    assert list(steps) == ["import", "status@base", "status"]
    assert steps["status@base"]["status"] == "failed"
    assert "the other checkout" in steps["status@base"]["stderr"]
    assert steps["status"]["status"] == "ok"


def test_several_runs_of_a_page_give_their_medians():
    bench = load_bench()
    runs = [
        {"status": "ok", "wall_s": w, "cpu_s": c, "peak_rss_mb": m, "load": ld, "path": "/p"}
        for w, c, m, ld in ((3.0, 1.0, 300.0, 2.0), (1.0, 0.5, 250.0, 4.0), (2.0, 2.0, 200.0, 3.0))
    ]
    failed = {"status": "timeout", "wall_s": 9.0, "cpu_s": 9.0, "peak_rss_mb": 900.0, "load": 5.0}
    out = bench._median_of([*runs, failed])
    assert (out["wall_s"], out["cpu_s"], out["peak_rss_mb"]) == (2.0, 1.0, 250.0)
    assert out["repeat"] == 4 and out["failed_runs"] == 1 and out["load"] == 5.0
    assert out["runs"][3] is failed and out["status"] == "ok"
    assert bench._median_of(runs[:1]) == runs[0]  # one run: as measured
    assert bench._median_of([failed, failed])["status"] == "timeout"


@pytest.mark.slow
def test_the_review_page_and_pages_of_the_other_checkout(tmp_path):
    bench = load_bench()
    other = tmp_path / "other-src"
    (other / "preflab").mkdir(parents=True)  # a checkout whose CLI fails: its server says so
    (other / "preflab" / "__init__.py").write_text("raise SystemExit('the other checkout')\n")
    out = tmp_path / "scale.json"
    argv = ["--judgments", "600", "--work", str(tmp_path), "--json", str(out), "--quiet"]
    bench.main([*argv, "--against", str(other), "--repeat", "2", "--steps", "page:review"])
    steps = json.loads(out.read_text())["cases"][0]["steps"]
    assert list(steps) == ["import", "page:review@base", "page:review"]
    assert steps["page:review@base"]["status"] == "failed"
    review = steps["page:review"]
    assert review["status"] == "ok" and review["path"] == "/p/bench/review"
    assert review["repeat"] == 2 and len(review["runs"]) == 2 and review["bytes"] > 1000


@pytest.mark.slow
def test_a_larger_size_is_tiled_from_a_smaller_ones_database(tmp_path):
    bench = load_bench()
    out = tmp_path / "scale.json"
    argv = ["--judgments", "300", "--judgments", "900", "--tile-from", "n300", "--db", "sqlite"]
    argv += ["--work", str(tmp_path), "--json", str(out), "--quiet", "--steps", "status"]
    bench.main(argv)
    small, large = json.loads(out.read_text())["cases"]
    assert "tiled_from" not in small["steps"]["import"]
    built = large["steps"]["import"]
    assert built["status"] == "ok" and (built["tiled_from"], built["tiles"]) == ("n300", 3)
    assert large["steps"]["status"]["status"] == "ok"
    assert not (tmp_path / "n900-s0-r100-p3-b4" / "data").exists()  # nothing generated
    with closing(sqlite3.connect(tmp_path / "n900-s0-r100-p3-b4" / "preflab.db")) as conn:
        counts = [
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("judgments", "items", "import_batches")
        ]
    assert counts == [900, 300, 4]
    # cached like every size: a second run tiles nothing
    bench.main(argv)
    again = json.loads(out.read_text())["cases"][1]["steps"]["import"]
    assert again["cached"] is True and again["tiles"] == 3
    # a cached tiled size needs its source no more: nothing is generated or imported again
    shutil.rmtree(tmp_path / "n300-s0-r100-p3-b4")
    bench.main([*argv[2:]])
    (alone,) = json.loads(out.read_text())["cases"]
    assert alone["steps"]["import"]["cached"] is True and alone["steps"]["status"]["status"] == "ok"
    assert not (tmp_path / "n300-s0-r100-p3-b4").exists()
