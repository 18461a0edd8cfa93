"""Two changes to the paper's recipe that give the model the task's row/column structure for free,
to see whether the plateau gets shorter (the training-dynamics chapter):

- ``grid_positions``: position (i, j) of an m × n matrix starts at (r_i + c_j) / √2, with r_i and
  c_j drawn like BERT's own initialisation (normal, std 0.02), so positions in one row or one column
  share a direction from step 0 (``train.position_init = "grid"``).
- an **attention bias**: every head of every layer adds b_s to its score for each same-row or
  same-column pair (the diagonal included), with b_s falling linearly from ``train.attention_bias``
  at step 1 to 0 after ``train.attention_bias_steps``; then training goes on with plain attention.
  It runs through a function registered with ``transformers.AttentionInterface`` (no library edits).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F
from transformers import AttentionInterface

from matcomp.config import TrainConfig
from matcomp.model import MatrixBert

BIASED = "matcomp_row_column_bias"
BIAS = "_matcomp_bias"  # attribute holding the (S, S) additive score bias on each BertSelfAttention
GRID_STREAM = 3  # generator seed for the grid initialisation: seed * 1000 + 3


def same_row_or_column(n_rows: int, n_cols: int) -> torch.Tensor:
    """(S, S) float: 1 where positions k and k' (row-major) share a row or a column, else 0.

    >>> same_row_or_column(2, 2).int().tolist()
    [[1, 1, 1, 0], [1, 1, 0, 1], [1, 0, 1, 1], [0, 1, 1, 1]]
    """
    rows = torch.arange(n_rows * n_cols) // n_cols
    cols = torch.arange(n_rows * n_cols) % n_cols
    return ((rows[:, None] == rows[None, :]) | (cols[:, None] == cols[None, :])).float()


@torch.no_grad()
def grid_positions(model: MatrixBert, n_rows: int, n_cols: int, seed: int) -> None:
    """Overwrite the first m·n position embeddings with (r_i + c_j) / √2 (see the module docstring)."""
    weight = model.bert.embeddings.position_embeddings.weight
    std = model.bert.config.initializer_range
    generator = torch.Generator().manual_seed(seed * 1000 + GRID_STREAM)
    rows = torch.randn(n_rows, 1, weight.size(1), generator=generator) * std
    cols = torch.randn(1, n_cols, weight.size(1), generator=generator) * std
    weight[: n_rows * n_cols] = ((rows + cols) / math.sqrt(2)).reshape(n_rows * n_cols, -1).to(weight)


def bias_strength(tc: TrainConfig, step: int) -> float:
    """b_s for update ``step`` (1-based): linear from ``attention_bias`` to 0 over ``attention_bias_steps``.

    >>> tc = TrainConfig(attention_bias=2.0, attention_bias_steps=4)
    >>> [bias_strength(tc, s) for s in (1, 2, 4, 5)]
    [2.0, 1.5, 0.5, 0.0]
    """
    if tc.attention_bias == 0 or step > tc.attention_bias_steps:
        return 0.0
    return tc.attention_bias * (1 - (step - 1) / tc.attention_bias_steps)


def _biased_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Scaled dot-product attention with ``module._matcomp_bias`` added to the scores."""
    bias = getattr(module, BIAS).to(query.dtype)
    if attention_mask is not None:
        bias = bias + attention_mask
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=bias, dropout_p=dropout, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(BIASED, _biased_attention)


def set_attention_bias(model: MatrixBert, bias: torch.Tensor | None, plain: str = "sdpa") -> None:
    """Make every layer add ``bias`` (S, S) to its attention scores, or (``None``) go back to ``plain``."""
    modules = [layer.attention.self for layer in model.bert.encoder.layer]
    if bias is None:
        for module in modules:
            module.__dict__.pop(BIAS, None)
        model.set_attention(plain)
        return
    for module in modules:
        setattr(module, BIAS, bias)
    model.set_attention(BIASED)
