"""Changes to the paper's training recipe, each switched on by a ``TrainConfig`` field and off by
default (the training-dynamics chapters):

- **component training** (``train.component``, the paper's Fig. 8): a group of parameters, named by
  a regular expression on ``MatrixBert`` state-dict names, starts from its initialisation while every
  other parameter is copied from a trained run and frozen (``freeze_all_but``). The token group carries
  the embedding LayerNorm with it, as the authors' ``train_embed.py`` does; the read-out and the
  (zero) token-type row stay frozen in every variant.
- a **nudge** (``train.init_nudge`` k): the k-th initial weight moved by one unit in the last place
  (``nudge_weight``), the smallest change a float32 weight can take.
- **grid positions** (``train.position_init = "grid"``): position (i, j) of an m × n matrix starts at
  (r_i + c_j) / √2, with r_i and c_j drawn like BERT's own initialisation (normal, std 0.02), so
  positions in one row or one column share a direction from step 0.
- an **attention bias** (``train.attention_bias``): every head of every layer adds b_s to its score
  for each same-row or same-column pair (the *target* pairs; each position's own pair included unless
  ``train.attention_diagonal`` is false), with b_s falling linearly from ``train.attention_bias`` at
  step 1 to 0 after ``train.attention_bias_steps`` (then training goes on with plain attention), or
  held at ``train.attention_bias`` throughout (``attention_bias_schedule = "constant"``);
- an **attention scale** (``train.attention_scale`` c): from update ``train.attention_scale_from`` to
  the end, every head multiplies its attention probabilities on the target pairs by c, without
  renormalising: the intervention of the follow-up (Gopalani & Hu 2025, ``tf-loss-plateau``), which
  multiplies the attention weights of the positions a task needs by c from a chosen step and keeps it
  on (there on linear attention, here on the softmax's output).

Both are attention hooks (``matcomp.models.hooks``) held for one training step (``recipe_hooks``);
the ``eval_*`` columns read the model without them.
"""

from __future__ import annotations

import math
import re

import torch

from matcomp.config import TrainConfig
from matcomp.models.bert import MatrixBert
from matcomp.models.hooks import LayerHooks, attention_hooks
from matcomp.seeding import GRID, stream

COMPONENT_PATTERNS = {
    "attention": r"^bert\.encoder\.layer\.\d+\.attention\.",
    "mlp": r"^bert\.encoder\.layer\.\d+\.(intermediate\.dense|output\.(dense|LayerNorm))\.",
    "position": r"^bert\.embeddings\.position_embeddings\.",
    "token": r"^bert\.embeddings\.(word_embeddings|LayerNorm)\.",
}


def component_names(model: MatrixBert, component: str) -> list[str]:
    """The parameter names of ``component`` in ``model``."""
    if component not in COMPONENT_PATTERNS:
        raise ValueError(f"component must be one of {sorted(COMPONENT_PATTERNS)}; got {component!r}")
    regex = re.compile(COMPONENT_PATTERNS[component])
    return [name for name, _ in model.named_parameters() if regex.search(name)]


@torch.no_grad()
def freeze_all_but(model: MatrixBert, trained: dict[str, torch.Tensor], component: str) -> MatrixBert:
    """Copy every parameter outside ``component`` from ``trained`` into ``model`` and freeze it;
    the component keeps its fresh values and stays trainable. Returns ``model``."""
    own = set(component_names(model, component))
    missing = [name for name, _ in model.named_parameters() if name not in trained]
    if missing:
        raise ValueError(f"the trained state lacks parameters {missing[:3]}...: is it from a different model shape?")
    for name, param in model.named_parameters():
        if name in own:
            param.requires_grad_(True)
        else:
            if trained[name].shape != param.shape:
                raise ValueError(f"parameter {name} has shape {tuple(trained[name].shape)} in the trained state, "
                                 f"{tuple(param.shape)} in the model")
            param.copy_(trained[name])
            param.requires_grad_(False)
    return model


def same_row_or_column(n_rows: int, n_cols: int) -> torch.Tensor:
    """(S, S) float: 1 where positions k and k' (row-major) share a row or a column, else 0.

    >>> same_row_or_column(2, 2).int().tolist()
    [[1, 1, 1, 0], [1, 1, 0, 1], [1, 0, 1, 1], [0, 1, 1, 1]]
    """
    rows = torch.arange(n_rows * n_cols) // n_cols
    cols = torch.arange(n_rows * n_cols) % n_cols
    return ((rows[:, None] == rows[None, :]) | (cols[:, None] == cols[None, :])).float()


def nudge_weight(model: torch.nn.Module, k: int) -> str:
    """Move the ``k``-th scalar (from 1, over ``model.parameters()`` in order) up by one unit in the last place, in
    place; returns where it sits ("name[index]"). A ``k`` past the last scalar is a ValueError naming the count."""
    start = 0
    for name, p in model.named_parameters():
        if k <= start + p.numel():
            flat = p.detach().view(-1)
            i = k - start - 1
            flat[i] = torch.nextafter(flat[i], torch.tensor(math.inf, dtype=p.dtype))
            return f"{name}[{i}]"
        start += p.numel()
    raise ValueError(f"train.init_nudge must be at most the model's {start:,} weights; got {k:,}")


@torch.no_grad()
def grid_positions(model: MatrixBert, n_rows: int, n_cols: int, seed: int) -> None:
    """Overwrite the first m·n position embeddings with (r_i + c_j) / √2 (see the module docstring)."""
    weight = model.bert.embeddings.position_embeddings.weight
    std = model.bert.config.initializer_range
    generator = stream(seed, GRID)
    rows = torch.randn(n_rows, 1, weight.size(1), generator=generator) * std
    cols = torch.randn(1, n_cols, weight.size(1), generator=generator) * std
    weight[: n_rows * n_cols] = ((rows + cols) / math.sqrt(2)).reshape(n_rows * n_cols, -1).to(weight)


def attention_targets(n_rows: int, n_cols: int, diagonal: bool = True) -> torch.Tensor:
    """(S, S) float: the pairs the attention recipes act on, those sharing a row or a column, with or
    without each position's own pair.

    >>> attention_targets(2, 2, diagonal=False).int().tolist()
    [[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]]
    """
    targets = same_row_or_column(n_rows, n_cols)
    return targets if diagonal else targets * (1 - torch.eye(len(targets)))


def bias_strength(tc: TrainConfig, step: int) -> float:
    """b_s for update ``step`` (1-based): linear from ``attention_bias`` to 0 over ``attention_bias_steps``,
    or ``attention_bias`` at every step when the schedule is "constant".

    >>> tc = TrainConfig(attention_bias=2.0, attention_bias_steps=4)
    >>> [bias_strength(tc, s) for s in (1, 2, 4, 5)]
    [2.0, 1.5, 0.5, 0.0]
    >>> bias_strength(TrainConfig(attention_bias=2.0, attention_bias_schedule="constant"), 10**6)
    2.0
    """
    if tc.attention_bias_schedule == "constant":
        return tc.attention_bias
    if tc.attention_bias == 0 or step > tc.attention_bias_steps:
        return 0.0
    return tc.attention_bias * (1 - (step - 1) / tc.attention_bias_steps)


def scale_strength(tc: TrainConfig, step: int) -> float:
    """The factor on the target pairs' attention at update ``step``: ``attention_scale`` from
    ``attention_scale_from`` on, else 1.

    >>> [scale_strength(TrainConfig(attention_scale=10.0, attention_scale_from=3), s) for s in (2, 3, 99)]
    [1.0, 10.0, 10.0]
    """
    return tc.attention_scale if step >= tc.attention_scale_from else 1.0


def recipe_hooks(model: MatrixBert, tc: TrainConfig, step: int, targets: torch.Tensor):
    """The attention hooks of update ``step`` (a context manager for every layer), or None when the
    recipe leaves attention alone at that step; ``targets`` from ``attention_targets``."""
    strength, scale = bias_strength(tc, step), scale_strength(tc, step)
    if not strength and scale == 1:
        return None
    bias = strength * targets if strength else None
    edit = None
    if scale != 1:
        factor = 1 + (scale - 1) * targets

        def edit(probs: torch.Tensor) -> torch.Tensor:
            return probs * factor.to(probs.dtype)

    hooks = LayerHooks(bias=bias, edit=edit)
    return attention_hooks(model, dict.fromkeys(range(model.cfg.layers), hooks))
