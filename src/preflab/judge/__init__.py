"""Model judges: label a project through an OpenAI-compatible chat API (``preflab judge run``)
and audit them against the people of the same project (``preflab judge audit``; the
statistics live in :mod:`preflab.quality.judges`). See ``docs/judges.md``.

May import :mod:`preflab.schema`, :mod:`preflab.quality`, :mod:`preflab.store` and the HTTP client
of :mod:`preflab.train.sampling`.
"""

from .runner import JudgeConfig, JudgeStats, judge_rater
from .templates import JudgeTemplate, load_template, shipped

__all__ = ["JudgeConfig", "JudgeStats", "JudgeTemplate", "judge_rater", "load_template", "shipped"]
