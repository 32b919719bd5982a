"""Blind side-by-side evaluation of model versions: comparison projects from model outputs,
win rates with Wilson intervals, Bradley–Terry ratings on the Chatbot Arena scale, agreement
between a reward model and people, and the ``human_eval.jsonl`` they produce.

- :mod:`.outputs`: read model outputs (``rollouts.jsonl`` shape) with line-exact errors;
- :mod:`.create`: ``preflab eval create`` (one pairwise item per model pair and prompt);
- :mod:`.arena`: the statistics (pure functions over battles);
- :mod:`.report`: ``preflab eval report`` (battles from a project, JSON, HTML, ``human_eval.jsonl``).
"""
