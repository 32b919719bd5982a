"""How a reward model turns a sequence into one number: the backbone's own classifier head, or
the mean of its last hidden states.

``AutoModelForSequenceClassification`` on a BERT-style encoder reads the first token (``[CLS]``)
through BERT's pooler (a dense layer and tanh); a decoder reads the last token. Sentence
encoders such as all-MiniLM-L6-v2 were trained to produce *mean*-pooled embeddings and their
pooler was never tuned: over a few hundred steps a reward head on ``[CLS]`` first has to teach
the backbone to route the answer's content to that token. :class:`MeanPooledRewardModel` puts a
linear head on the masked mean of the last hidden states instead, the representation the
backbone already has (``--pooling mean``; measured in docs/training.md).

A trained directory records its pooling in ``config.json`` (``preflab_pooling``), so
:func:`load_reward_model` rebuilds the right class for ``rm eval``, ``rm score``, ``bestofn``
and ``rl`` with no other hint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

Pooling = Literal["head", "mean"]
POOLINGS: tuple[str, ...] = ("head", "mean")
CONFIG_KEY = "preflab_pooling"


class MeanPooledRewardModel(PreTrainedModel):
    """A backbone (``AutoModel``) and ``Linear(hidden, 1)`` on its masked mean hidden state."""

    config_class = PretrainedConfig
    base_model_prefix = "backbone"

    def __init__(self, config: PretrainedConfig) -> None:
        super().__init__(config)
        self.backbone = AutoModel.from_config(config)
        dropout = getattr(config, "hidden_dropout_prob", None)
        self.dropout = nn.Dropout(0.1 if dropout is None else dropout)
        self.score = nn.Linear(config.hidden_size, 1)
        self.post_init()  # transformers' weight init (normal, std initializer_range) and bookkeeping

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> SequenceClassifierOutput:
        kwargs.pop("use_cache", None)  # TRL passes it; encoders take no cache
        kwargs.pop("return_dict", None)
        if attention_mask is None:
            if input_ids is None:
                raise ValueError("MeanPooledRewardModel needs input_ids")
            attention_mask = torch.ones_like(input_ids)
        hidden = self.backbone(
            input_ids=input_ids, attention_mask=attention_mask, return_dict=True, **kwargs
        ).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return SequenceClassifierOutput(logits=self.score(self.dropout(pooled)))

    @classmethod
    def from_backbone(cls, backbone: Path) -> MeanPooledRewardModel:
        """A new reward model whose backbone carries the weights of a local model directory."""
        config = AutoConfig.from_pretrained(str(backbone), local_files_only=True)
        config.num_labels = 1
        setattr(config, CONFIG_KEY, "mean")
        model = cls(config)
        pretrained = AutoModel.from_pretrained(str(backbone), local_files_only=True)
        missing, unexpected = model.backbone.load_state_dict(pretrained.state_dict(), strict=False)
        # an encoder saved without its (unused here) pooler is fine; anything else is not
        if unexpected or any(not k.startswith("pooler.") for k in missing):
            raise ValueError(
                f"{backbone}: weights do not fit {type(model.backbone).__name__} "
                f"(missing {missing[:3]}, unexpected {unexpected[:3]})"
            )
        return model


def new_reward_model(backbone: Path, pooling: str) -> Any:
    """A 1-output reward model on ``backbone`` to train, with ``pooling``."""
    if pooling == "mean":
        return MeanPooledRewardModel.from_backbone(backbone)
    if pooling != "head":
        raise ValueError(f"pooling: {pooling!r} is not one of {', '.join(POOLINGS)}")
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(
        str(backbone), num_labels=1, local_files_only=True
    )


def load_reward_model(model_dir: Path) -> Any:
    """A trained reward model (``rm train`` output of either pooling, or any 1-label classifier)."""
    from transformers import AutoModelForSequenceClassification

    config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    cls = (
        MeanPooledRewardModel
        if getattr(config, CONFIG_KEY, "head") == "mean"
        else AutoModelForSequenceClassification
    )
    return cls.from_pretrained(str(model_dir), config=config, local_files_only=True)
