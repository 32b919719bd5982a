"""Reading a project for an export: items with their judgments, resolved one chunk at a time.

:class:`Collector` keeps what spans chunks (counts, raters, gold labels, rubrics, drops); its
:meth:`Collector.read` resolves one chunk of items (in item order) into :class:`ExportData`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from ...quality.gold import gold_accuracy, gold_outcomes
from ...schema import Item, Rubric
from ...schema.routing import scored_by_verifier
from ...store.repo import get_rubric
from .base import ExportData, Exporter, ExportOptions, project_policy
from .columnar import PlainItem
from .resolve import (
    LengthFn,
    PairAggregator,
    ResolvedPair,
    accepted_demonstrations,
    aggregate_pairwise,
    counts_as_label,
    effective_judgments,
    item_pair_votes,
    plain_pairwise,
    resolve_steps,
    resolve_unary,
    word_length,
)
from .routing import verifier_pairs, verifier_unary, without_people_preferences
from .telemetry_gate import (
    TelemetryCounts,
    kept_by_reviewers,
    project_telemetry_settings,
    telemetry_filter,
)


def _is_chat(item: Item) -> bool:
    return isinstance(item.prompt, list) or any(c.messages is not None for c in item.candidates)


class Collector:
    """Reads items into :class:`ExportData`, one chunk of items at a time.

    What spans chunks lives here: the counts of ``stats``, the raters seen, the gold labels, the
    rubrics used, the drop log and the telemetry counts (shared by every chunk's data), and
    whether any item is a chat. :func:`collect` reads a whole project as one chunk; a streamed
    export (:mod:`.stream`) reads it chunk by chunk, twice.
    """

    def __init__(
        self,
        session: Any,
        project: Any,
        exporter: Exporter,
        options: ExportOptions,
        *,
        aggregator: PairAggregator = aggregate_pairwise,
        length_fn: LengthFn = word_length,
    ) -> None:
        self.session, self.project = session, project
        self.needs = exporter.needs
        self.options = options
        self.aggregator, self.length_fn = aggregator, length_fn
        self.keep_gold = options.include_gold or not exporter.training
        self.shared = ExportData(project=project.name, items={}, length_fn=length_fn)
        self.shared.policy = project_policy(project.settings)
        self.to_raters = self.shared.policy.verifiable_to_raters
        self.shared.telemetry = TelemetryCounts()
        self.rubric_cache: dict[tuple[str | None, int | None], Rubric | None] = {}
        self.stats: dict[str, Any] = {
            "items_in": 0,
            "judgments_in": 0,
            "judgments_in_by_kind": Counter(),
            "judgments_used": 0,
            "judgments_used_by_kind": Counter(),
            "judgments_used_by_source": Counter(),
            "gold_items": 0,
            "aggregation_margin": getattr(aggregator, "margin", None),
        }
        self.raters_in: set[str] = set()
        #: an item of plain pairwise labels may come as its rows (:class:`.columnar.PlainItem`):
        #: an export that resolves pairs and reads no judgment object (the raw export's
        #: ``judgments``, ``--drop-disagreement``'s labels dropped)
        self.plain_ok = (
            "judgments" not in self.needs
            and "pairs" in self.needs
            and options.drop_disagreement is None
        )
        self.chat = False
        self.gold_labels: list = []
        self.gold_of: dict[str, dict[str, Any]] = {}
        self.flag_filter = (
            None
            if options.include_flagged
            else telemetry_filter(
                project_telemetry_settings(self.shared.policy),
                self.shared.drops,
                self.shared.telemetry,
                kept_by_reviewers(session, project.pk),
            )
        )

    def rubric_for(self, key: str | None, version: int | None) -> Rubric | None:
        if (key, version) not in self.rubric_cache:
            rubric = get_rubric(self.session, self.project, key, version) if key else None
            self.rubric_cache[(key, version)] = rubric
            if rubric is not None:
                self.shared.rubrics[(rubric.id, rubric.version)] = rubric
        return self.rubric_cache[(key, version)]

    def declines(self, item: Item) -> bool:
        """Whether an item of plain labels takes the general path all the same: it has a
        gold answer or is routed to a verifier (:meth:`read`)."""
        return item.gold is not None or scored_by_verifier(item.metadata, self.to_raters)

    def read(self, chunk: Iterable[Any]) -> ExportData:
        """The resolved data of ``chunk`` (items with their judgments, in item order)."""
        shared, needs, stats = self.shared, self.needs, self.stats
        data = ExportData(
            project=shared.project,
            items={},
            length_fn=self.length_fn,
            rubrics=shared.rubrics,
            drops=shared.drops,
            policy=shared.policy,
            telemetry=shared.telemetry,
        )
        data.drops.at("read")
        rubric_for = self.rubric_for
        votes: list[Any] = []
        #: plain items whose units are decided (:attr:`.columnar.PlainItem.resolved`), each
        #: with the number of votes before it: their outcomes go where their votes would
        decided: list[tuple[int, PlainItem]] = []
        plurality = self.aggregator is aggregate_pairwise
        rubric_resolved = []
        verifier_resolved = []
        chat = self.chat
        raters_in = self.raters_in
        # locals, not stats[...] lookups: this loop runs once per judgment of the project
        in_by_kind: Counter[str] = stats["judgments_in_by_kind"]
        used_by_kind: Counter[str] = stats["judgments_used_by_kind"]
        used_by_source: Counter[str] = stats["judgments_used_by_source"]
        resolving = bool(needs - {"judgments"})
        include_ai = self.options.include_ai
        keep_gold = self.keep_gold
        to_raters = self.to_raters
        flag_filter = self.flag_filter
        plain_ok = self.plain_ok
        labels_with_batch, label_index = data.labels_with_batch, data.label_index
        for iwj in chunk:
            if iwj.__class__ is PlainItem:
                item: Any = iwj.item
                if plain_ok and not self.declines(item):
                    # what the loop below does for these labels (see .columnar)
                    stats["items_in"] += 1
                    data.items[item.id] = item
                    chat = chat or _is_chat(item)
                    # the labels set aside and kept as plain_item sorted them (with the
                    # collector's include_ai); a count added only when there is one to add
                    if iwj.labels:
                        in_by_kind["pairwise"] += len(iwj.labels)
                    for gate, reason in iwj.dropped:
                        data.drops.drop(gate, reason, item.id)
                    if iwj.kept:
                        used_by_kind["pairwise"] += len(iwj.kept)
                        for label, _ in iwj.kept:
                            raters_in.add(label.rater_id)
                            used_by_source[label.source] += 1
                            label_index.add(label)  # type: ignore[arg-type]
                        labels_with_batch.extend(iwj.kept)  # type: ignore[arg-type]
                    if iwj.resolved is None:
                        votes.extend(iwj.votes)
                    elif plurality:
                        decided.append((len(votes), iwj))
                    else:  # decided for plurality, read by another aggregator
                        raise RuntimeError("a plain item decided for another aggregator")
                    continue
                iwj = iwj.full()
            item = iwj.item
            stats["items_in"] += 1
            if item.gold is not None:
                stats["gold_items"] += 1
                self.gold_of[item.id] = item.gold.model_dump()
                self.gold_labels.extend(
                    j
                    for j, meta in zip(iwj.judgments, iwj.meta, strict=True)
                    if not meta.get("excluded") and counts_as_label(j, include_ai)
                )
                if (
                    not keep_gold
                ):  # qualification / honeypot items are tests of raters, not training data
                    data.drops.drop("gold", "gold-item", item.id)
                    in_by_kind.update(j.kind for j in iwj.judgments)
                    stats["gold_judgments"] = stats.get("gold_judgments", 0) + len(iwj.judgments)
                    continue
            data.items[item.id] = item
            chat = chat or _is_chat(item)
            routed = scored_by_verifier(item.metadata, to_raters)
            if routed and "pairs" in needs:
                verifier_resolved.extend(verifier_pairs(item, data.drops))
            if routed and "unary" in needs:
                data.unary.extend(verifier_unary(item, data.drops))
            kept, order, batch_of = [], [], {}
            for j, meta in zip(iwj.judgments, iwj.meta, strict=True):
                in_by_kind[j.kind] += 1
                if meta.get("excluded"):
                    data.drops.drop("excluded", meta.get("exclusion_reason") or "excluded", item.id)
                    continue
                if not counts_as_label(j, include_ai):
                    data.drops.drop("source", "ai", item.id)
                    continue
                if flag_filter is not None and not flag_filter(item, j, meta["pk"]):
                    continue
                kept.append(j)
                order.append(meta["pk"])
                batch_of[meta["pk"]] = meta.get("batch_pk")
                raters_in.add(j.provenance.rater_id)
            if "judgments" in needs:
                data.judgments.extend(kept)
            if not kept:
                continue
            # the label set every measure uses (quality.labels): a revised label counts once;
            # an item of plain pairwise labels has its label set and votes at once
            fast = resolving and not routed and "pairs" in needs
            plain = plain_pairwise(kept, order) if fast else None
            if plain is not None:
                effective, plain_votes = plain
            else:
                effective, plain_votes = effective_judgments(kept, order), None
            # "used": what the export reads. A resolving export reads the resolved label set, so
            # the labels a revision or an adjudication set aside are not counted (issue 28 s. 7).
            for j in (j for _, j in effective) if resolving else kept:
                used_by_kind[j.kind] += 1
                used_by_source[j.provenance.source] += 1
            data.labels_with_batch.extend((j, batch_of[pos]) for pos, j in effective)
            for _, j in effective:
                data.label_index.add(j)
            if not resolving:
                continue
            if routed:  # the verifier's call, not people's (see .routing)
                effective = without_people_preferences(effective, item.id, data.drops)
            if plain_votes is not None:  # pairwise judgments only: no thumb, step or demo
                if "pairs" in needs:
                    votes.extend(plain_votes)
                continue
            labels = [j for _, j in effective]
            if "pairs" in needs:
                item_votes, rubric_only = item_pair_votes(
                    item, effective, rubric_for, self.length_fn, data.drops
                )
                votes.extend(item_votes)
                rubric_resolved.extend(rubric_only)
            if "unary" in needs:
                data.unary.extend(resolve_unary(labels, data.drops))
            if "steps" in needs:
                data.steps.extend(resolve_steps(labels, data.drops))
            if "demonstrations" in needs:
                demos = accepted_demonstrations(labels, data.drops)
                data.demonstrations.extend(demos)
                chat = chat or any(d.messages is not None for d in demos)
        if "pairs" in needs:
            position = {item_id: i for i, item_id in enumerate(data.items)}
            data.drops.at("aggregate")
            pairs = (
                _with_decided(votes, decided, data.drops)
                if decided
                else list(self.aggregator(votes, data.drops))
            )
            pairs += rubric_resolved + verifier_resolved
            pairs.sort(
                key=lambda p: (
                    position[p.item_id],
                    min(p.chosen_id, p.rejected_id),
                    max(p.chosen_id, p.rejected_id),
                )
            )
            data.pairs = pairs
        # Rubric versions used: also those of rubric judgments not resolved into pairs (raw export).
        for j in data.judgments:
            if j.provenance.rubric_id:
                rubric_for(j.provenance.rubric_id, j.provenance.rubric_version)
        self.chat = chat
        options = self.options
        data.conversational = chat if options.conversational is None else options.conversational
        return data

    def finish(self) -> dict[str, Any]:
        """The reading's ``stats`` (once every chunk is read)."""
        stats = self.stats
        stats["judgments_in"] = sum(stats["judgments_in_by_kind"].values())
        stats["judgments_used"] = sum(stats["judgments_used_by_kind"].values())
        stats["raters_in"] = len(self.raters_in)
        stats["gold_accuracy"] = gold_figures(self.gold_labels, self.gold_of)
        return stats


def _with_decided(
    votes: list[Any], decided: list[tuple[int, PlainItem]], drops: Any
) -> list[ResolvedPair]:
    """``aggregate_pairwise(votes, drops)`` with the units of ``decided``'s plain items, decided
    already, where their votes would be: the pairs and the drops in the same order (a unit
    lies in one item, an item's votes are consecutive)."""
    pairs: list[ResolvedPair] = []
    start = 0
    for at, plain in decided:
        if at > start:
            pairs.extend(aggregate_pairwise(votes[start:at], drops))
            start = at
        item_id = plain.item.id
        for outcome in plain.resolved or ():
            if outcome.__class__ is str:
                drops.drop("aggregation", outcome, item_id)
            else:
                pairs.append(outcome)  # type: ignore[arg-type]
    if start < len(votes):
        pairs.extend(aggregate_pairwise(votes[start:], drops))
    return pairs


def gold_figures(labels: list, gold_of: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Honeypot (gold) accuracy of the raters, for the manifest and card: overall with its
    Wilson interval, and the raters graded (the quality report's rule, :func:`gold_outcomes`)."""
    outcomes = gold_outcomes(labels, gold_of)
    if not outcomes:
        return None
    overall = gold_accuracy([o for outs in outcomes.values() for o in outs]).as_dict()
    per_rater = [gold_accuracy(outs).accuracy for outs in outcomes.values()]
    return {
        **{k: round(v, 4) if isinstance(v, float) else v for k, v in overall.items()},
        "raters_graded": len(outcomes),
        "raters_below_0.8": sum(a < 0.8 for a in per_rater),
    }
