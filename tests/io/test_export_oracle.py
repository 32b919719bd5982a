"""Every training export equals an independent oracle of what the raters said (issue 28, "Done
means"), on SQLite and PostgreSQL.

A seeded generator writes projects as a user would hand them to ``preflab import``: items whose
candidates have their own ids, labelled by preflab judgment records (pairwise in both shown
orders and with every strength, rankings with ties, thumbs, demonstrations, step labels; stated
sources ``human`` / ``ai`` / ``ai_assisted`` or none; relabels; an adjudication now and then;
gold items), and pairs without candidate ids arriving in every shape the import joins (a pair to
label, an item with plain candidates, TRL rows standard and conversational, with and without a
prompt, in both candidate orders, with ``strength``, ``margin`` or neither, by named labelers, by
a labeler the admin declared a model, and unlabeled), plus TRL unpaired rows. A shape the import
must refuse (the same prompt and answers under other candidate ids) is tried in its own file and
must fail with a ``file:line`` error and change nothing.

The oracle below knows nothing of preflab's resolution code: it restates the documented defaults
(``docs/architecture.md`` "The export pipeline", ``docs/gates.md``, ``docs/item-identity.md``,
``preflab.io.export.resolve``'s policy) on the generator's own record of who said what, in which
order, and computes every row of ``trl-preference`` (with ``pair_metadata.jsonl``: n_raters,
agreement), ``trl-reward`` and ``openrlhf`` (margins after the verbosity penalty), ``trl-kto``
(thumbs and pairs, conflicts dropped), ``trl-sft`` and ``trl-stepwise``, with the ``source``
column where the documentation says it appears.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import ImportFailed, ImportOptions, import_files
from preflab.schema.identity import candidate_key, item_key
from preflab.store import db, repo, transaction

pytestmark = pytest.mark.slow

KINDS = ("pairwise", "ranking", "unary", "demonstration", "steps")
RATERS = ("ann", "bob", "cyd", "dee", "eve")
BOT = "judge-bot"  # declared a model with --ai-labeler
T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
FORMATS = ("trl-preference", "trl-reward", "openrlhf", "trl-kto", "trl-sft", "trl-stepwise")


# -- what the raters said: the generator's record ------------------------------------------


@dataclass
class Said:
    """One label as the import will read it, with its place in the files (``seq``)."""

    seq: int
    kind: str
    item: str
    rater: str
    source: str
    minute: int | None = None  # submitted_at; None: not given
    review_pass: int = 0
    pair: tuple[str, str] | None = None  # pairwise: (better, worse) or a tie's two
    tie: bool = False
    shown: tuple[str, str] | None = None  # pairwise record: the order shown (None: TRL row)
    strength: int | None = None  # pairwise; None: unknown
    ranks: dict[str, int] | None = None  # ranking: candidate -> group (0 best)
    candidate: str | None = None  # unary, steps
    thumb: bool = False
    text: str | None = None  # demonstration
    status: str = "pending"
    steps: tuple[str, ...] = ()
    verdicts: tuple[int, ...] = ()

    def identity(self) -> tuple:
        """What makes two records the same judgment (the import keeps the first, adds nothing)."""
        pair = None
        if self.pair is not None:
            better = None if self.tie else self.pair[0]
            pair = (frozenset(self.pair), better, self.strength, self.shown)
        return (
            self.kind,
            self.item,
            self.rater,
            self.source,
            self.minute,
            self.review_pass,
            pair,
            tuple(sorted((self.ranks or {}).items())),
            self.candidate,
            self.thumb,
            self.text,
            self.status,
            self.steps,
            self.verdicts,
        )

    def touches(self) -> set[str]:
        if self.kind == "pairwise":
            return set(self.pair)
        if self.kind == "ranking":
            return set(self.ranks)
        if self.kind in ("unary", "steps"):
            return {self.candidate}
        return set()


@dataclass
class OItem:
    key: str
    prompt: str
    answers: dict[str, str]  # candidate name -> text
    gold: bool = False


@dataclass
class Project:
    items: dict[str, OItem] = field(default_factory=dict)
    said: list[Said] = field(default_factory=list)
    files: list[list[dict[str, Any]]] = field(default_factory=list)  # imported in order
    refused: tuple[list[dict[str, Any]], int] | None = None  # (records, bad line)
    seen: set[tuple] = field(default_factory=set)
    seq: int = 0

    def add(self, s: Said) -> None:
        if s.identity() in self.seen:  # the same judgment again: the import adds nothing
            return
        self.seen.add(s.identity())
        self.said.append(s)


def sentence(rng: random.Random, tag: str, n: int) -> str:
    return " ".join([tag, *rng.choices(WORDS, k=n - 1)])


def generate(seed: int) -> Project:
    rng = random.Random(seed)
    p = Project()
    minutes = iter(rng.sample(range(10_000), 2_000))
    items_file: list[dict[str, Any]] = []
    labels_file: list[dict[str, Any]] = []
    trl_file: list[dict[str, Any]] = []

    def next_seq() -> int:
        p.seq += 1
        return p.seq

    def source_of(rec_prov: dict[str, Any], rater: str) -> str:
        choice = rng.random()
        if choice < 0.55:  # not stated: the import's default, or AI for a declared model
            return "ai" if rater == BOT else "human"
        stated = "human" if choice < 0.7 else "ai" if choice < 0.85 else "ai_assisted"
        rec_prov["source"] = stated
        return stated

    def judgment(
        out: list[dict[str, Any]],
        key: str,
        item_id: str,
        kind: str,
        rater: str,
        body: dict[str, Any],
        **said: Any,
    ) -> Said:
        """A preflab judgment record (``item_id`` and ``body`` in the stored ids) and its Said."""
        prov: dict[str, Any] = {"rater_id": rater}
        source = source_of(prov, rater)
        minute = next(minutes) if rng.random() < 0.85 else None
        if minute is not None:
            prov["submitted_at"] = (T0 + timedelta(minutes=minute)).isoformat()
        review_pass = 2 if kind == "pairwise" and rng.random() < 0.06 else 0
        if review_pass:
            prov["review_pass"] = review_pass
        out.append({"kind": kind, "item_id": item_id, **body, "provenance": prov})
        return Said(
            next_seq(), kind, key, rater, source, minute=minute, review_pass=review_pass, **said
        )

    def pairwise(
        out: list[dict[str, Any]], key: str, item_id: str, rater: str, ids: dict[str, str]
    ) -> None:
        """A pairwise record in a random shown order; ``ids``: candidate name -> stored id."""
        shown = rng.sample(sorted(ids), 2)  # both shown orders
        winner = rng.choice(["a", "b", "tie"])
        strength = 0 if winner == "tie" else rng.choice([1, 2, 3, 3, None])
        body: dict[str, Any] = {"shown_order": [ids[c] for c in shown], "winner": winner}
        if strength is not None:
            body["strength"] = strength
        better = shown if winner != "b" else shown[::-1]
        said = {"pair": tuple(better), "tie": winner == "tie", "shown": tuple(shown)}
        p.add(judgment(out, key, item_id, "pairwise", rater, body, strength=strength, **said))

    # items whose candidates have their own ids (labelled by judgment records)
    for i in range(rng.randint(1, 3)):
        key = f"q{seed}-{i}"
        names = ["a", "b", "c"][: rng.randint(2, 3)]
        rng.shuffle(names)
        answers = {c: sentence(rng, f"ans-{key}-{c}", rng.randint(4, 7)) for c in names}
        item = OItem(key, f"prompt {key}?", answers, gold=rng.random() < 0.2)
        p.items[key] = item
        record: dict[str, Any] = {
            "id": key,
            "prompt": item.prompt,
            "candidates": [{"id": c, "text": answers[c]} for c in names],
        }
        if item.gold:
            gold_pair = sorted(names)[:2]
            record["gold"] = {
                "judgment": {"kind": "pairwise", "shown_order": gold_pair, "winner": "a"}
            }
        items_file.append(record)

        cands = sorted(names)
        steps_of = {c: tuple(f"step {k} of {key}-{c}" for k in range(3)) for c in cands}
        for _ in range(rng.randint(0, 12)):
            rater = rng.choice([*RATERS, BOT])
            kind = rng.choices(KINDS, weights=(5, 2, 2, 1, 1))[0]
            if kind == "pairwise":
                pairwise(labels_file, key, key, rater, {c: c for c in cands})
            elif kind == "ranking":
                ranks = {c: rng.randint(0, len(cands) - 1) for c in cands}
                dense = {r: n for n, r in enumerate(sorted(set(ranks.values())))}
                ranks = {c: dense[r] for c, r in ranks.items()}
                order = [
                    sorted(c for c in cands if ranks[c] == g)
                    for g in range(max(ranks.values()) + 1)
                ]
                p.add(judgment(labels_file, key, key, kind, rater, {"order": order}, ranks=ranks))
            elif kind == "unary":
                cand, thumb = rng.choice(cands), rng.random() < 0.6
                body = {"candidate_id": cand, "label": thumb}
                p.add(
                    judgment(labels_file, key, key, kind, rater, body, candidate=cand, thumb=thumb)
                )
            elif kind == "demonstration":
                text = sentence(rng, f"demo-{key}-{rater}-{p.seq}", 5)
                status = rng.choice(["pending", "accepted", "accepted", "rejected"])
                body = {"text": text, "status": status}
                p.add(judgment(labels_file, key, key, kind, rater, body, text=text, status=status))
            else:
                cand = rng.choice(cands)
                steps = steps_of[cand]
                if rng.random() < 0.1:  # a rater who split the answer otherwise
                    steps = (*steps[:2], "another split")
                verdicts: list[int] = []
                for _ in steps:
                    verdicts.append(rng.choice([1, 1, 0, -1]))
                    if verdicts[-1] == -1:
                        break
                body = {"candidate_id": cand, "steps": list(steps), "verdicts": verdicts}
                said = {"candidate": cand, "steps": steps, "verdicts": tuple(verdicts)}
                p.add(judgment(labels_file, key, key, kind, rater, body, **said))

    # pairs without candidate ids: several shapes of one item, labels as TRL rows
    for i in range(rng.randint(1, 3)):
        key = f"t{seed}-{i}"
        x = sentence(rng, f"ans-{key}-x", rng.randint(4, 7))
        y = sentence(rng, f"ans-{key}-y", rng.randint(4, 7))
        item = OItem(key, f"prompt {key}?", {"x": x, "y": y})
        p.items[key] = item

        def pad(text: str) -> str:  # the same answer after normalisation
            return text + rng.choice(["", "", " ", "\n"])

        for _ in range(rng.randint(0, 2)):
            shape = rng.choice(["pair", "item"])
            a, b = rng.sample([x, y], 2)
            if shape == "pair":
                items_file.append({"prompt": item.prompt, "answer_a": pad(a), "answer_b": b})
            else:
                items_file.append({"prompt": item.prompt, "candidates": [a, pad(b)]})
        for _ in range(rng.randint(1, 8)):
            better = rng.choice(["x", "y"])
            worse = "y" if better == "x" else "x"
            row: dict[str, Any] = {}
            shape = rng.choice(["standard", "standard", "chat", "chat-no-prompt"])
            good, bad = pad(item.answers[better]), item.answers[worse]
            if shape == "standard":
                row.update(prompt=item.prompt, chosen=good, rejected=bad)
            elif shape == "chat":
                row.update(
                    prompt=[{"role": "user", "content": item.prompt}],
                    chosen=[{"role": "assistant", "content": good}],
                    rejected=[{"role": "assistant", "content": bad}],
                )
            else:
                user = {"role": "user", "content": item.prompt}
                row.update(
                    chosen=[user, {"role": "assistant", "content": good}],
                    rejected=[user, {"role": "assistant", "content": bad}],
                )
            who = rng.random()
            rater: str | None
            if who < 0.25:
                rater = None  # a rater of its own
            elif who < 0.35:
                rater = BOT
            else:
                rater = rng.choice(RATERS)
            if rater is not None:
                row["labeler"] = rater
            strength: int | None = None
            how = rng.random()
            if how < 0.35:
                strength = rng.randint(1, 3)
                row["strength"] = strength
            elif how < 0.55:
                margin = rng.choice([0.2, 1.0, 1.6, 2.5, 4.0, -2.2])
                row["margin"] = margin
                strength = min(3, max(1, round(abs(margin))))
            source = "ai" if rater == BOT else "human"
            stated = rng.random()
            if stated < 0.15:
                row["source"] = source = "human"
            elif stated < 0.25:
                row["source"] = source = "ai_assisted"
            if rater is None:
                rater = "anon:" + json.dumps(row, sort_keys=True)
            trl_file.append(row)
            p.add(
                Said(
                    next_seq(),
                    "pairwise",
                    key,
                    rater,
                    source,
                    pair=(better, worse),
                    strength=strength,
                )
            )
        # judgment records of the same pair, by the ids the import derived (a relabel of a TRL
        # row by the same rater: no time on the row, so row order decides)
        ids = {c: candidate_key(t) for c, t in item.answers.items()}
        item_id = item_key(item.prompt, [(ids[c], t) for c, t in item.answers.items()])
        for _ in range(rng.randint(0, 3)):
            pairwise(trl_file, key, item_id, rng.choice([*RATERS, BOT]), ids)

    # TRL unpaired rows: an item of one completion each
    for i in range(rng.randint(0, 2)):
        key = f"u{seed}-{i}"
        item = OItem(key, f"prompt {key}?", {"z": sentence(rng, f"ans-{key}-z", 5)})
        p.items[key] = item
        for _ in range(rng.randint(1, 4)):
            thumb = rng.random() < 0.5
            row = {"prompt": item.prompt, "completion": item.answers["z"], "label": thumb}
            rater = rng.choice([*RATERS, None, BOT])
            if rater is not None:
                row["labeler"] = rater
            source = "ai" if rater == BOT else "human"
            if rng.random() < 0.15:
                row["source"] = source = "ai_assisted"
            if rater is None:
                rater = "anon:" + json.dumps(row, sort_keys=True)
            trl_file.append(row)
            p.add(Said(next_seq(), "unary", key, rater, source, candidate="z", thumb=thumb))

    # the files in import order; seq above follows items -> labels -> TRL rows
    p.files = [items_file, labels_file, trl_file]
    # row order is file order: relabel seq by file (labels_file and trl_file were built in order)
    p.refused = refused_shape(rng, p)
    return p


def refused_shape(rng: random.Random, p: Project) -> tuple[list[dict[str, Any]], int] | None:
    """A file with one record the import must refuse, after a valid one (all or nothing)."""
    own = [it for it in p.items.values() if it.key.startswith("q") and len(it.answers) == 2]
    plain = [it for it in p.items.values() if it.key.startswith("t")]
    valid = {"prompt": "never imported?", "chosen": "one two three", "rejected": "four five six"}
    options = []
    for it in own:
        a, b = it.answers.values()
        options.append({"prompt": it.prompt, "chosen": a, "rejected": b, "labeler": "ann"})
        options.append({"prompt": it.prompt, "candidates": [b, a]})
        options.append({"prompt": it.prompt, "answer_a": a, "answer_b": b})
    for it in plain:
        options.append(
            {
                "id": f"{it.key}-again",
                "prompt": it.prompt,
                "candidates": [
                    {"id": "one", "text": it.answers["x"]},
                    {"id": "two", "text": it.answers["y"]},
                ],
            }
        )
    if not options:
        return None
    return [valid, rng.choice(options)], 2


# -- the oracle --------------------------------------------------------------------------------


def latest(group: list[Said], key=lambda s: s) -> Said:
    """The latest of one rater's labels on one unit: review pass, then time (when every label
    of the group has one), then row order (docs/architecture.md, resolve step 2)."""
    timed = all(key(s).minute is not None for s in group)
    return max(group, key=lambda s: (key(s).review_pass, key(s).minute if timed else 0, key(s).seq))


def unit_of(s: Said) -> tuple:
    if s.kind == "pairwise":
        return ("pair", frozenset(s.pair))
    if s.kind in ("unary", "steps"):
        return ("candidate", s.candidate)
    return ("item",)


def effective(labels: list[Said]) -> list[Said]:
    groups: dict[tuple, list[Said]] = defaultdict(list)
    for s in labels:
        groups[(s.kind, unit_of(s), s.rater)].append(s)
    kept = [latest(g) for g in groups.values()]
    adjudicated = {
        (s.kind, unit_of(s)) for s in kept if s.review_pass >= 2 and s.kind != "demonstration"
    }
    return [
        s
        for s in kept
        if s.kind == "demonstration"
        or (s.kind, unit_of(s)) not in adjudicated
        or s.review_pass >= 2
    ]


@dataclass(frozen=True)
class Vote:
    rater: str
    side: int  # -1: first of the pair better, 1: second, 0: tie
    strength: float | None
    label: Said


def words(text: str) -> int:
    return len(text.split())


@dataclass
class Options:
    include_ai: bool
    include_gold: bool
    min_raters: int
    length_gate: bool


def oracle(p: Project, o: Options) -> dict[str, Any]:
    """Every training export's rows, as the documentation says the raters' labels make them."""
    pairs, thumbs, demos, steps = [], [], [], []
    used: list[Said] = []
    for item in p.items.values():
        if item.gold and not o.include_gold:
            continue
        mine = [s for s in p.said if s.item == item.key and (o.include_ai or s.source != "ai")]
        eff = effective(mine)
        used.extend(eff)
        names = sorted(item.answers)
        for i, lo in enumerate(names):
            for hi in names[i + 1 :]:
                votes: list[Vote] = []
                for s in eff:
                    if s.kind == "pairwise" and set(s.pair) == {lo, hi}:
                        side = 0 if s.tie else (-1 if s.pair[0] == lo else 1)
                        votes.append(Vote(s.rater, side, s.strength, s))
                    elif s.kind == "ranking":
                        diff = s.ranks[lo] - s.ranks[hi]
                        side = (diff > 0) - (diff < 0)
                        votes.append(Vote(s.rater, side, float(min(3, abs(diff))), s))
                if any(v.label.review_pass >= 2 for v in votes):
                    votes = [v for v in votes if v.label.review_pass >= 2]
                per_rater: dict[str, list[Vote]] = defaultdict(list)
                for v in votes:
                    per_rater[v.rater].append(v)
                final = [latest(vs, key=lambda v: v.label) for vs in per_rater.values()]
                if not final:
                    continue
                count = Counter(v.side for v in final)
                ranked = sorted(count.values(), reverse=True) + [0]
                top_side = max(count, key=count.get)
                if ranked[0] == ranked[1] or top_side == 0:
                    continue  # no majority, or a tie won
                known = [v.strength for v in final if v.side == top_side and v.strength is not None]
                chosen, rejected = (lo, hi) if top_side < 0 else (hi, lo)
                pairs.append(
                    {
                        "item": item.key,
                        "chosen": chosen,
                        "rejected": rejected,
                        "strength": float(statistics.median(known)) if known else None,
                        "n_raters": len(final),
                        "agreement": count[top_side] / len(final),
                        "raters": {v.rater for v in final},
                    }
                )
        for cand in names:
            ts = [s for s in eff if s.kind == "unary" and s.candidate == cand]
            up = sum(s.thumb for s in ts)
            if ts and up * 2 != len(ts):
                thumbs.append(
                    {
                        "item": item.key,
                        "candidate": cand,
                        "label": up * 2 > len(ts),
                        "n_raters": len(ts),
                        "raters": {s.rater for s in ts},
                    }
                )
            ss = [s for s in eff if s.kind == "steps" and s.candidate == cand]
            if ss and len({s.steps for s in ss}) == 1:
                labels: list[bool] = []
                for k in range(max(len(s.verdicts) for s in ss)):
                    vs = [s.verdicts[k] != -1 for s in ss if k < len(s.verdicts)]
                    if sum(vs) * 2 == len(vs):
                        labels = []
                        break
                    labels.append(sum(vs) * 2 > len(vs))
                    if not labels[-1]:
                        break
                if labels:
                    steps.append(
                        {
                            "item": item.key,
                            "candidate": cand,
                            "steps": list(ss[0].steps[: len(labels)]),
                            "labels": labels,
                            "n_raters": len(ss),
                            "raters": {s.rater for s in ss},
                        }
                    )
        demos.extend(s for s in eff if s.kind == "demonstration" and s.status == "accepted")

    # gates: min raters (pairs, thumbs, steps), length parity (pairs), verbosity penalty
    pairs = [x for x in pairs if x["n_raters"] >= o.min_raters]
    thumbs = [x for x in thumbs if x["n_raters"] >= o.min_raters]
    steps = [x for x in steps if x["n_raters"] >= o.min_raters]
    for x in pairs:
        item = p.items[x["item"]]
        ratio = words(item.answers[x["chosen"]]) / words(item.answers[x["rejected"]])
        x["keep"] = not o.length_gate or 0.85 <= ratio <= 1.20
        penalty = min(1.0, max(0.0, math.log(ratio))) if ratio > 1 else 0.0
        x["margin"] = None if x["strength"] is None else max(0.0, x["strength"] - penalty)
    pairs = [x for x in pairs if x["keep"]]

    mixed = any(s.source != "human" for s in used)

    def source(row: dict[str, Any], about: set[str]) -> str | None:
        if not mixed:
            return None
        behind = {
            s.source
            for s in used
            if s.item == row["item"] and s.rater in row["raters"] and s.touches() & about
        }
        return "+".join(sorted(behind)) or None

    def t(item: str, cand: str) -> str:
        return p.items[item].answers[cand].strip()

    out: dict[str, Any] = {}
    pref = sorted(
        (
            x["item"],
            t(x["item"], x["chosen"]),
            t(x["item"], x["rejected"]),
            x["n_raters"],
            round(x["agreement"], 9),
            source(x, {x["chosen"], x["rejected"]}),
        )
        for x in pairs
    )
    out["trl-preference"] = pref
    margins = [x["margin"] for x in pairs]
    all_known = bool(pairs) and all(m is not None for m in margins)
    any_known = any(m is not None for m in margins)
    for fmt, written in (("trl-reward", all_known), ("openrlhf", any_known)):
        out[fmt] = sorted(
            (
                x["item"],
                t(x["item"], x["chosen"]),
                t(x["item"], x["rejected"]),
                None if not written or x["margin"] is None else round(x["margin"], 9),
                source(x, {x["chosen"], x["rejected"]}),
            )
            for x in pairs
        )
        out[f"{fmt}:margin"] = written
    kto = [(x["item"], x["candidate"], x["label"], source(x, {x["candidate"]})) for x in thumbs]
    for x in pairs:
        both = {x["chosen"], x["rejected"]}
        kto.append((x["item"], x["chosen"], True, source(x, both)))
        kto.append((x["item"], x["rejected"], False, source(x, both)))
    marks: dict[tuple[str, str], set[bool]] = defaultdict(set)
    for item, cand, label, _ in kto:
        marks[(item, cand)].add(label)
    out["trl-kto"] = sorted(
        (item, t(item, cand), label, src)
        for item, cand, label, src in kto
        if len(marks[(item, cand)]) == 1
    )
    out["trl-sft"] = sorted((s.item, s.text, s.source if mixed else None) for s in demos)
    out["trl-stepwise"] = sorted(
        (x["item"], x["steps"], x["labels"], source(x, {x["candidate"]})) for x in steps
    )
    out["used"] = len(used)
    return out


# -- the system under test ---------------------------------------------------------------------


def text_of(value: Any) -> str:
    """A prompt or answer as text: one user / assistant message is its content."""
    if isinstance(value, list):
        assert len(value) == 1, value
        return value[0]["content"].strip()
    return value.strip()


def read(out: Path, name: str = "train.jsonl") -> list[dict[str, Any]]:
    path = out / name
    return [orjson.loads(x) for x in path.read_bytes().splitlines()] if path.exists() else []


def exported(engine, name: str, p: Project, o: Options, tmp: Path) -> dict[str, Any]:
    by_prompt = {it.prompt.strip(): it.key for it in p.items.values()}
    got: dict[str, Any] = {}
    manifests = {}
    for fmt in FORMATS:
        out = tmp / f"{name}-{fmt}"
        manifests[fmt] = export_project(
            engine,
            name,
            ExportOptions(
                format=fmt,
                out=out,
                include_ai=o.include_ai,
                include_gold=o.include_gold,
                min_raters=o.min_raters,
                length_gate=(0.85, 1.20) if o.length_gate else None,
                length_unit="words",
                force=True,  # random votes disagree by design; the agreement gate has its tests
            ),
        )
        rows = read(out)
        if fmt == "trl-preference":
            meta = read(out, "pair_metadata.jsonl")
            assert len(meta) == len(rows)
            got[fmt] = sorted(
                (
                    m["item_id"] if m["item_id"] in p.items else by_prompt[text_of(r["prompt"])],
                    text_of(r["chosen"]),
                    text_of(r["rejected"]),
                    m["n_raters"],
                    round(m["agreement"], 9),
                    r.get("source"),
                )
                for r, m in zip(rows, meta, strict=True)
            )
        elif fmt in ("trl-reward", "openrlhf"):
            got[f"{fmt}:margin"] = bool(rows) and "margin" in rows[0]
            got[fmt] = sorted(
                (
                    by_prompt[text_of(r["prompt"])],
                    text_of(r["chosen"]),
                    text_of(r["rejected"]),
                    None if r.get("margin") is None else round(r["margin"], 9),
                    r.get("source"),
                )
                for r in rows
            )
        elif fmt == "trl-kto":
            got[fmt] = sorted(
                (
                    by_prompt[text_of(r["prompt"])],
                    text_of(r["completion"]),
                    r["label"],
                    r.get("source"),
                )
                for r in rows
            )
        elif fmt == "trl-sft":
            rows_t = []
            for r in rows:
                if "messages" in r:
                    *prompt, answer = r["messages"]
                    rows_t.append((by_prompt[text_of(prompt)], answer["content"], r.get("source")))
                else:
                    rows_t.append(
                        (by_prompt[r["prompt"].strip()], r["completion"], r.get("source"))
                    )
            got[fmt] = sorted(rows_t)
        else:
            got[fmt] = sorted(
                (by_prompt[r["prompt"].strip()], r["completions"], r["labels"], r.get("source"))
                for r in rows
            )
    got["used"] = manifests["trl-preference"]["counts"]["judgments_used"]
    return got


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def load(engine, name: str, p: Project, tmp: Path) -> None:
    with transaction(engine) as s:
        repo.create_project(s, name, kinds=KINDS)
    options = ImportOptions(ai_labelers=(BOT,))
    paths = [write(tmp / f"{name}-{k}.jsonl", recs) for k, recs in enumerate(p.files) if recs]
    for path in paths:
        import_files(engine, name, [path], options)
    if p.refused is not None:
        records, line = p.refused
        path = write(tmp / f"{name}-refused.jsonl", records)
        with pytest.raises(ImportFailed) as failed:
            import_files(engine, name, [path], options)
        problems = [str(x) for x in failed.value.problems]
        assert len(problems) == 1, problems
        assert problems[0].startswith(f"{path}:{line}: "), problems
        assert "the same prompt and answers are" in problems[0], problems


SEEDS_PER_BLOCK = 8
BLOCKS = 8


@pytest.fixture
def quick_agreement(monkeypatch):
    """Alpha without its 200-replicate bootstrap interval (~0.9 s an export, 85 % of this test's
    time): the agreement gate has its own tests, and these exports are forced past it anyway."""
    from preflab.io.export import agreement_gate

    figures = agreement_gate.agreement_figures
    monkeypatch.setattr(
        agreement_gate, "agreement_figures", lambda labels: figures(labels, n_boot=0)
    )


@pytest.mark.parametrize("block", range(BLOCKS))
def test_every_training_export_equals_the_oracle(db_url, block, quick_agreement):
    engine = db.open_db(db_url)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for seed in range(block * SEEDS_PER_BLOCK, (block + 1) * SEEDS_PER_BLOCK):
                p = generate(seed)
                rng = random.Random(10_000 + seed)
                o = Options(
                    include_ai=rng.random() < 0.4,
                    include_gold=rng.random() < 0.15,
                    min_raters=rng.choice([1, 1, 2]),
                    length_gate=rng.random() < 0.4,
                )
                name = f"p{seed}"
                load(engine, name, p, Path(tmp))
                got = exported(engine, name, p, o, Path(tmp))
                want = oracle(p, o)
                for key in want:
                    assert got[key] == want[key], (seed, o, key)
    finally:
        engine.dispose()
