"""Building a model of either architecture from its ``ModelConfig``, and what training needs to
know of it (its metrics, its trainable parameters)."""

from __future__ import annotations

from functools import lru_cache

import torch
from torch import nn

from matcomp.config import ModelConfig
from matcomp.models.bert import MatrixBert
from matcomp.models.gpt import MatrixGPT
from matcomp.seeding import seeded

Model = MatrixBert | MatrixGPT  # what build_model returns and a run's checkpoint loads


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters the optimizer updates: all but the frozen ones (token types, a component run's rest)."""
    return [p for p in model.parameters() if p.requires_grad]


def metric_names(cfg: ModelConfig) -> tuple[str, ...]:
    """The per-step metrics of a model of ``cfg`` (``METRICS``, or ``GPT_METRICS`` for the GPT)."""
    return MatrixGPT.metrics if cfg.arch == "gpt" else MatrixBert.metrics


def build_model(cfg: ModelConfig, seed: int, attention: str = "sdpa",
                device: torch.device | str = "cpu") -> Model:
    """A freshly initialised model (``MatrixBert``, or ``MatrixGPT`` for ``arch`` "gpt"); the same
    ``seed`` gives the same weights on every call."""
    with seeded(seed):
        model = (MatrixGPT if cfg.arch == "gpt" else MatrixBert)(cfg, attention)
    return model.to(device)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@lru_cache(maxsize=None)
def parameter_count(cfg: ModelConfig) -> int:
    """How many parameters a model of ``cfg`` has, counted on one built on PyTorch's meta device (no memory, a
    few milliseconds): what the cost of a run is estimated from, exact for either architecture."""
    with torch.device("meta"):
        model = (MatrixGPT if cfg.arch == "gpt" else MatrixBert)(cfg)
    return count_parameters(model)
