"""Calibration of the telemetry exclusion rule on sessions whose answer is known.

    python benchmarks/calibrate_telemetry.py                 # figures of the shipped set
    python benchmarks/calibrate_telemetry.py --write         # regenerate tests/data/telemetry-calibration.jsonl.gz
    python benchmarks/calibrate_telemetry.py --data my.jsonl # figures of your own labelled sessions

A labelled session is one JSON line: ``{"id", "archetype", "honest": bool, "telemetry": {...},
"words_to_read": int, "written_chars": int}``; ``telemetry`` is the summary the web app sends
(``preflab/server/static/app.js``: ``typed_chars``, ``pasted_chars``, ``paste_count``,
``untrusted_paste_chars``, ``active_ms``, ``focus_losses``, ``iki_cv``, ``revision_ratio``).

The shipped set is *simulated*, keystroke by keystroke, and summarised by a line-for-line copy
of the web app's summary (:func:`summary`): intervals between key presses under 5 s, their
coefficient of variation, deleted / typed characters, pasted characters (untrusted when the
pasted text is not on the page). Each archetype's parameters and where they come from are in
:data:`ARCHETYPES` and docs/telemetry.md; the figures are only as good as those assumptions.
With real labelled sessions (a red-team exercise, sessions a reviewer decided), run ``--data``.

The rules compared (:data:`RULES`) and the figures per archetype are printed as Markdown, the
way docs/telemetry.md shows them; ``tests/quality/test_telemetry_calibration.py`` checks the
shipped set, the figures of the default rule and that this script regenerates the set exactly.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from preflab.quality.telemetry import (  # noqa: E402
    TelemetrySettings,
    assess_summary,
)

DATA = ROOT / "tests" / "data" / "telemetry-calibration.jsonl.gz"
SEED = 20260528
IDLE_MS = 60_000  # app.js: active time counts at most a minute between two events
MAX_IKI_MS = 5_000  # app.js: an interval of 5 s or more is a pause, not rhythm


# -- the web app's summary, in Python ------------------------------------------------------------


@dataclass
class Session:
    """What app.js counts while a rater works on one task."""

    intervals: list[float]
    typed: int = 0
    deleted: int = 0
    pasted: int = 0
    untrusted: int = 0
    pastes: int = 0
    active_ms: float = 0.0
    focus_losses: int = 0
    text_chars: int = 0  # the written answer's length when submitted


def summary(s: Session) -> dict[str, Any]:
    """app.js ``t.summary()``: the same fields, the same rounding."""
    out: dict[str, Any] = {
        "pasted_chars": s.pasted,
        "paste_count": s.pastes,
        "untrusted_paste_chars": s.untrusted,
        "typed_chars": s.typed,
        "active_ms": round(s.active_ms),
        "focus_losses": s.focus_losses,
    }
    iv = s.intervals
    if len(iv) >= 2:
        mean = sum(iv) / len(iv)
        sd = math.sqrt(sum((x - mean) ** 2 for x in iv) / (len(iv) - 1))
        if mean > 0:
            out["iki_cv"] = round(sd / mean, 4)
    if s.typed > 0:
        out["revision_ratio"] = round(s.deleted / s.typed, 4)
    return out


# -- typists -----------------------------------------------------------------------------------


@dataclass
class Typist:
    """Key-press timing and error habits. ``median_ms`` / ``sigma``: log-normal inter-key
    intervals; ``pause_p``: chance of a thinking pause (0.6-4 s) at a word boundary;
    ``error_p``: chance per character of a slip (1-3 wrong keys, deleted with Backspace and
    typed again); ``reword_p``: chance per sentence of selecting a word and deleting it."""

    median_ms: float
    sigma: float
    pause_p: float
    error_p: float
    reword_p: float


class Sim:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.s = Session(intervals=[])
        self.last_key: float | None = None
        self.clock = 0.0

    def key(self, gap_ms: float) -> None:
        """A key press ``gap_ms`` after the previous event (app.js keydown)."""
        self.clock += gap_ms
        if self.last_key is not None and self.clock - self.last_key < MAX_IKI_MS:
            self.s.intervals.append(self.clock - self.last_key)
        self.last_key = self.clock
        self.s.active_ms += min(gap_ms, IDLE_MS)

    def wait(self, ms: float) -> None:
        """Time without key presses (reading, thinking, scrolling: still active)."""
        self.clock += ms
        self.s.active_ms += min(ms, IDLE_MS)

    def type_text(self, n: int, t: Typist) -> None:
        """Type ``n`` characters as ``t`` does, slips corrected."""
        r = self.rng
        mu = math.log(t.median_ms)
        for i in range(n):
            gap = float(r.lognormal(mu, t.sigma))
            if i and i % 6 == 0 and r.random() < t.pause_p:
                gap += float(r.uniform(600, 4000))
            self.key(gap)
            self.s.typed += 1
            if t.error_p and r.random() < t.error_p:
                wrong = int(r.integers(1, 4))
                for _ in range(wrong):
                    self.key(float(r.lognormal(mu, t.sigma)))
                    self.s.typed += 1
                self.key(float(r.uniform(250, 700)))  # noticing the slip
                for _ in range(wrong - 1):
                    self.key(float(r.lognormal(mu, t.sigma)) * 0.7)  # Backspace, held
                self.s.deleted += wrong
            if t.reword_p and i and i % 60 == 0 and r.random() < t.reword_p:
                self.key(float(r.uniform(800, 3000)))  # select a word, Delete
                self.s.deleted += int(r.integers(3, 12))
        self.s.text_chars += n

    def paste(self, n: int, untrusted: bool) -> None:
        self.key(float(self.rng.uniform(300, 1500)))  # Ctrl+V: "v" is a keydown app.js counts
        self.s.pasted += n
        self.s.pastes += 1
        self.s.untrusted += n if untrusted else 0
        self.s.text_chars += n

    def machine(self, n: int, interval_ms: float, cv: float) -> None:
        """A script typing ``n`` characters at ``interval_ms`` with Gaussian jitter of ``cv``."""
        for _ in range(n):
            self.key(max(1.0, float(self.rng.normal(interval_ms, interval_ms * cv))))
            self.s.typed += 1
        self.s.text_chars += n


def human(rng: np.random.Generator, *, clean: bool = False, steady: bool = False) -> Typist:
    """A person at the keyboard. Median inter-key interval 120-350 ms and log-normal spread
    0.35-0.7 (CV about 0.36-0.8): Dhakal et al. 2018 (136M keystrokes) report a mean IKI of
    about 240 ms with wide spread across people; ``steady``: a regular touch typist (spread
    0.2-0.3, CV about 0.2-0.3). Slips 0.5-3 % of characters (the same study: about 2.3 % of
    keystrokes are corrections); ``clean``: no slip and no rewording at all."""
    sigma = float(rng.uniform(0.2, 0.3) if steady else rng.uniform(0.35, 0.7))
    return Typist(
        median_ms=float(rng.uniform(120, 350)),
        sigma=sigma,
        pause_p=float(rng.uniform(0.05, 0.3)),
        error_p=0.0 if clean else float(rng.uniform(0.005, 0.03)),
        reword_p=0.0 if clean else float(rng.uniform(0.0, 0.5)),
    )


def read(sim: Sim, words: int, ms_per_word: float) -> None:
    sim.wait(words * ms_per_word)


# -- archetypes -------------------------------------------------------------------------------
# Each returns a Session; ``words`` is what the task gives to read (the answers' words).


def h_typist(sim: Sim, words: int) -> None:
    """Honest: reads (150-400 words a minute), writes a rationale of 40-400 characters with the
    ordinary slips and corrections."""
    r = sim.rng
    read(sim, words, float(r.uniform(150, 400)))
    sim.type_text(int(r.integers(40, 401)), human(r))


def h_clean(sim: Sim, words: int) -> None:
    """Honest: a clean sentence typed without one deletion (20-200 characters): the case issue
    28 found flagged ``no_revision`` and dropped from every export."""
    r = sim.rng
    read(sim, words, float(r.uniform(150, 400)))
    sim.type_text(int(r.integers(20, 201)), human(r, clean=True))


def h_short(sim: Sim, words: int) -> None:
    """Honest: a short answer (3-19 characters, "A is correct"), with or without a slip."""
    r = sim.rng
    read(sim, words, float(r.uniform(150, 400)))
    sim.type_text(int(r.integers(3, 20)), human(r, clean=r.random() < 0.5))


def h_notes(sim: Sim, words: int) -> None:
    """Honest: pastes a bit of their own notes (10-150 characters, from outside the page) and
    types 0-80 characters around it, clean half of the time."""
    r = sim.rng
    read(sim, words, float(r.uniform(150, 400)))
    t = human(r, clean=r.random() < 0.5)
    sim.type_text(int(r.integers(0, 40)), t)
    sim.paste(int(r.integers(10, 151)), untrusted=True)
    sim.type_text(int(r.integers(0, 41)), t)


def h_quote(sim: Sim, words: int) -> None:
    """Honest: quotes a passage of an answer (copied on the page: a trusted paste, 30-400
    characters) and comments on it (30-200 characters typed)."""
    r = sim.rng
    read(sim, words, float(r.uniform(150, 400)))
    t = human(r, clean=r.random() < 0.3)
    sim.type_text(int(r.integers(15, 100)), t)
    sim.paste(int(r.integers(30, 401)), untrusted=False)
    sim.type_text(int(r.integers(15, 101)), t)


def h_fast(sim: Sim, words: int) -> None:
    """Honest: an expert who skims long answers (1,000-3,000 words a minute: faster than the
    ``too_fast`` floor) and types a clean sentence (20-120 characters, no deletion)."""
    r = sim.rng
    read(sim, words, float(r.uniform(20, 60)))
    sim.type_text(int(r.integers(20, 121)), human(r, clean=True))


def h_steady(sim: Sim, words: int) -> None:
    """Honest: a regular touch typist (inter-key CV about 0.2-0.3), clean or not."""
    r = sim.rng
    read(sim, words, float(r.uniform(150, 400)))
    sim.type_text(int(r.integers(40, 301)), human(r, clean=r.random() < 0.5, steady=True))


def h_drafted(sim: Sim, words: int) -> None:
    """Honest, and indistinguishable from cheating: writes the rationale in their own editor and
    pastes it whole (150-800 characters from outside the page)."""
    r = sim.rng
    read(sim, words, float(r.uniform(150, 400)))
    sim.paste(int(r.integers(150, 801)), untrusted=True)


def c_llm_paste(sim: Sim, words: int) -> None:
    """Cheating: pastes a model's rationale (200-1,500 characters) after a glance (2-30 s),
    perhaps typing a word."""
    r = sim.rng
    sim.wait(float(r.uniform(2000, 30000)))
    sim.paste(int(r.integers(200, 1501)), untrusted=True)
    if r.random() < 0.3:
        sim.type_text(int(r.integers(1, 15)), human(r))


def c_llm_edit(sim: Sim, words: int) -> None:
    """Cheating: pastes a model's rationale (150-800 characters) and edits it a little (types
    5-60 characters with slips)."""
    r = sim.rng
    sim.wait(float(r.uniform(5000, 60000)))
    sim.paste(int(r.integers(150, 801)), untrusted=True)
    sim.type_text(int(r.integers(5, 61)), human(r))


def c_canned(sim: Sim, words: int) -> None:
    """Cheating: pastes the same short canned rationale (30-150 characters) on task after task
    without reading (1-8 s)."""
    r = sim.rng
    sim.wait(float(r.uniform(1000, 8000)))
    sim.paste(int(r.integers(30, 151)), untrusted=True)


def c_script(sim: Sim, words: int) -> None:
    """Cheating: a script types a rationale (40-400 characters) with key events at a regular
    interval (30-120 ms, jitter CV 0.01-0.12), no deletion, no reading (0.2-3 s)."""
    r = sim.rng
    sim.wait(float(r.uniform(200, 3000)))
    sim.machine(int(r.integers(40, 401)), float(r.uniform(30, 120)), float(r.uniform(0.01, 0.12)))


def c_script_jitter(sim: Sim, words: int) -> None:
    """Cheating: a script that hides its rhythm (log-normal intervals, spread 0.3-0.6, like a
    person's), no deletion, little reading (1-10 s)."""
    r = sim.rng
    sim.wait(float(r.uniform(1000, 10000)))
    t = Typist(float(r.uniform(60, 200)), float(r.uniform(0.3, 0.6)), 0.0, 0.0, 0.0)
    sim.type_text(int(r.integers(40, 401)), t)


def c_retype(sim: Sim, words: int) -> None:
    """Cheating: a person who retypes a model's rationale from another window (100-500
    characters, ordinary slips, several focus losses), having read at a normal pace."""
    r = sim.rng
    read(sim, words, float(r.uniform(150, 400)))
    sim.type_text(int(r.integers(100, 501)), human(r))
    sim.s.focus_losses += int(r.integers(2, 12))


def c_clicker(sim: Sim, words: int) -> None:
    """Cheating: clicks through without reading (1-6 s) and types a few characters or none."""
    r = sim.rng
    sim.wait(float(r.uniform(1000, 6000)))
    sim.type_text(int(r.integers(0, 15)), human(r, clean=True))


#: name -> (honest, how many sessions, the simulator)
ARCHETYPES: dict[str, tuple[bool, int, Callable[[Sim, int], None]]] = {
    "typist": (True, 400, h_typist),
    "clean_typist": (True, 300, h_clean),
    "short_answer": (True, 200, h_short),
    "own_notes": (True, 200, h_notes),
    "quotes_answer": (True, 150, h_quote),
    "fast_expert": (True, 150, h_fast),
    "steady_typist": (True, 100, h_steady),
    "drafted_elsewhere": (True, 50, h_drafted),
    "llm_paste": (False, 200, c_llm_paste),
    "llm_paste_edited": (False, 150, c_llm_edit),
    "canned_paste": (False, 150, c_canned),
    "script": (False, 150, c_script),
    "script_jitter": (False, 100, c_script_jitter),
    "retyped_llm": (False, 100, c_retype),
    "click_through": (False, 100, c_clicker),
}


def generate(seed: int = SEED) -> list[dict[str, Any]]:
    """The labelled set: every archetype's sessions, each with the words it had to read
    (two answers of 40-400 words each)."""
    rng = np.random.default_rng(seed)
    rows = []
    for name, (honest, n, simulate) in ARCHETYPES.items():
        for k in range(n):
            sim = Sim(rng)
            words = int(rng.integers(40, 401)) + int(rng.integers(40, 401))
            simulate(sim, words)
            sim.wait(float(rng.uniform(500, 3000)))  # choosing and submitting
            rows.append(
                {
                    "id": f"{name}-{k:03d}",
                    "archetype": name,
                    "honest": honest,
                    "telemetry": summary(sim.s),
                    "words_to_read": words,
                    "written_chars": sim.s.text_chars,
                }
            )
    return rows


def write(rows: list[dict[str, Any]], path: Path = DATA) -> None:
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # mtime 0: the same bytes every run
        f.write(text.encode())


def load(path: Path = DATA) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


# -- rules ------------------------------------------------------------------------------------


def rule_any_flag(row: dict[str, Any], cfg: TelemetrySettings) -> bool:
    """Before issue 28: any flag kept the label out of exports."""
    return bool(
        assess_summary(row["telemetry"], row["words_to_read"], row["written_chars"], cfg).flags
    )


def rule_with(**overrides: Any) -> Callable[[dict[str, Any], TelemetrySettings], bool]:
    def rule(row: dict[str, Any], cfg: TelemetrySettings) -> bool:
        c = TelemetrySettings(**{**cfg.__dict__, **overrides})
        return assess_summary(
            row["telemetry"], row["words_to_read"], row["written_chars"], c
        ).exclude

    return rule


#: The rules compared: a small grid fixed before looking at the figures.
RULES: dict[str, Callable[[dict[str, Any], TelemetrySettings], bool]] = {
    "any flag (before)": rule_any_flag,
    "pasted answer only": rule_with(exclude_signals=99, exclude_signals_with_rhythm=99),
    "pasted answer, or 2 signals": rule_with(exclude_signals=2),
    "pasted answer, or 3 signals": rule_with(exclude_signals=3, exclude_signals_with_rhythm=3),
    "pasted answer, or 3 signals, or machine typing + 1": rule_with(
        exclude_signals=3, exclude_signals_with_rhythm=2
    ),
    "... with pasted share 0.5": rule_with(strong_paste_share=0.5),
    "... with pasted answers from 100 chars": rule_with(max_untrusted_paste_chars=100),
    "default": rule_with(),
}


def figures(
    rows: list[dict[str, Any]], rule: Callable[..., bool], cfg: TelemetrySettings
) -> dict[str, Any]:
    """False-exclusion rate on honest sessions, catch rate on cheating ones, and per archetype
    the share excluded."""
    per: dict[str, list[bool]] = {}
    honest, cheat = [], []
    for row in rows:
        out = rule(row, cfg)
        per.setdefault(row["archetype"], []).append(out)
        (honest if row["honest"] else cheat).append(out)
    return {
        "false_exclusion": round(sum(honest) / len(honest), 4) if honest else None,
        "catch": round(sum(cheat) / len(cheat), 4) if cheat else None,
        "honest": len(honest),
        "honest_excluded": sum(honest),
        "cheating": len(cheat),
        "cheating_excluded": sum(cheat),
        "per_archetype": {k: round(sum(v) / len(v), 4) for k, v in per.items()},
    }


def markdown(rows: list[dict[str, Any]], cfg: TelemetrySettings) -> str:
    results = {name: figures(rows, rule, cfg) for name, rule in RULES.items()}
    names = list(results)
    honest_of = {r["archetype"]: r["honest"] for r in rows}
    lines = [
        "| rule | false exclusion (honest) | catch (cheating) |",
        "|---|---|---|",
        *[
            f"| {n} | {results[n]['false_exclusion']:.1%} ({results[n]['honest_excluded']} of "
            f"{results[n]['honest']}) | {results[n]['catch']:.1%} ({results[n]['cheating_excluded']} "
            f"of {results[n]['cheating']}) |"
            for n in names
        ],
        "",
        "Share of each archetype's sessions the rule keeps out of exports:",
        "",
        "| archetype | sessions | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["archetype"]] = counts.get(r["archetype"], 0) + 1
    for arch in counts:
        tag = "honest" if honest_of[arch] else "cheating"
        cells = " | ".join(f"{results[n]['per_archetype'][arch]:.0%}" for n in names)
        lines.append(f"| {arch} ({tag}) | {counts[arch]} | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="labelled sessions (JSONL, .gz ok)")
    ap.add_argument("--write", action="store_true", help=f"regenerate {DATA.relative_to(ROOT)}")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.write:
        write(generate())
    rows = load(args.data or DATA)
    cfg = TelemetrySettings()
    if args.json:
        print(json.dumps({n: figures(rows, r, cfg) for n, r in RULES.items()}, indent=2))
    else:
        print(markdown(rows, cfg))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
