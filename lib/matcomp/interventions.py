"""Interventions on a trained model (EXPERIMENTS.md §2.3, §2.5–2.7, §4), none of which edits the
installed ``transformers``:

- ``attention_edits``: inside a ``with`` block, attention runs through our own function (registered
  with ``transformers.AttentionInterface``), which can replace the attention probabilities of chosen
  layers and record them; on leaving the block the model's implementation is restored.
- ``ablate_heads``: uniform attention 1/S in chosen heads (the paper's ablation) or the head's
  pattern averaged over the batch (what the released code did).
- ``transplant``: a copy of a model with some weights taken from another (model switching).

Heads are (layer, head) pairs counted from 0; the paper's (l, h) is ``(l - 1, h - 1)`` here.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable
from contextlib import contextmanager

import torch
from torch.nn import functional as F
from transformers import AttentionInterface

from matcomp.model import MatrixBert

ATTENTION = "matcomp_interventions"
EDIT, RECORD = "_matcomp_edit", "_matcomp_record"  # attributes set on BertSelfAttention modules
ABLATION_MODES = ("uniform", "batch_mean")
QKV = r"encoder\.layer\.\d+\.attention\.self\.(query|key|value)\."

Edit = Callable[[torch.Tensor], torch.Tensor]  # probabilities (B, H, S, S) -> probabilities


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention, with the probabilities passed through ``module._matcomp_edit`` and appended to
    ``module._matcomp_record`` when those are set."""
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = F.softmax(scores, dim=-1)
    edit = getattr(module, EDIT, None)
    if edit is not None:
        probs = edit(probs)
    record = getattr(module, RECORD, None)
    if record is not None:
        record.append(probs.detach())
    probs = F.dropout(probs, p=dropout, training=module.training)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs


AttentionInterface.register(ATTENTION, _attention)


class AttentionRecord:
    """Attention probabilities recorded by ``attention_edits(..., record=True)``."""

    def __init__(self, layers: int):
        self.calls: list[list[torch.Tensor]] = [[] for _ in range(layers)]

    def maps(self, layer: int) -> torch.Tensor:
        """(N, H, S, S) probabilities of ``layer`` for every matrix of every recorded forward pass."""
        if not self.calls[layer]:
            raise ValueError(f"nothing was recorded for layer {layer}: run the model inside the with block")
        return torch.cat(self.calls[layer])

    def mean(self) -> torch.Tensor:
        """(L, H, S, S): each head's map averaged over the recorded matrices (query = row index)."""
        return torch.stack([self.maps(layer).mean(0) for layer in range(len(self.calls))])


@contextmanager
def attention_edits(model: MatrixBert, edits: dict[int, Edit] | None = None, record: bool = False):
    """Within the block, layer ``l``'s attention probabilities become ``edits[l](probs)``; yields an
    ``AttentionRecord`` if ``record`` (else None). The model is unchanged after the block."""
    modules = [layer.attention.self for layer in model.bert.encoder.layer]
    edits = edits or {}
    for layer in edits:
        if not 0 <= layer < len(modules):
            raise ValueError(f"edited layer {layer} must be in [0, {len(modules)})")
    recorded = AttentionRecord(len(modules)) if record else None
    saved = [{name: module.__dict__.get(name) for name in (EDIT, RECORD)} for module in modules]
    previous = model.attention
    try:
        for i, module in enumerate(modules):
            if i in edits:
                setattr(module, EDIT, edits[i])
            if record:
                setattr(module, RECORD, recorded.calls[i])
        model.set_attention(ATTENTION)
        yield recorded
    finally:
        model.set_attention(previous)
        for module, attributes in zip(modules, saved):
            for name, value in attributes.items():
                if value is None:
                    module.__dict__.pop(name, None)
                else:
                    setattr(module, name, value)


def heads_by_layer(model: MatrixBert, heads: Iterable[tuple[int, int]] | None) -> dict[int, list[int]]:
    """``{layer: [head, ...]}`` for (layer, head) pairs (all heads if None), each checked against the model."""
    n_layers, n_heads = model.cfg.layers, model.cfg.heads
    pairs = [(i, h) for i in range(n_layers) for h in range(n_heads)] if heads is None else list(heads)
    out: dict[int, list[int]] = {}
    for layer, head in pairs:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"head {(layer, head)} must have layer in [0, {n_layers}) and head in [0, {n_heads}) "
                             f"(counted from 0)")
        out.setdefault(layer, []).append(head)
    return out


def ablate_heads(model: MatrixBert, heads: Iterable[tuple[int, int]] | None = None, mode: str = "uniform"):
    """Context manager: the chosen heads (all if None) attend uniformly, 1/S to every position
    (``mode="uniform"``, the paper's definition), or with their pattern averaged over the batch
    (``"batch_mean"``, the released code's). Yields an ``AttentionRecord``."""
    if mode not in ABLATION_MODES:
        raise ValueError(f"mode must be one of {ABLATION_MODES}; got {mode!r}")

    def edit_for(head_list: list[int]) -> Edit:
        index = torch.tensor(head_list)

        def edit(probs: torch.Tensor) -> torch.Tensor:
            probs = probs.clone()
            if mode == "uniform":
                probs[:, index] = 1.0 / probs.size(-1)
            else:
                probs[:, index] = probs[:, index].mean(0, keepdim=True)
            return probs
        return edit

    return attention_edits(model, {layer: edit_for(hs) for layer, hs in heads_by_layer(model, heads).items()},
                           record=True)


def transplant(model: MatrixBert, donor: MatrixBert, pattern: str = QKV) -> MatrixBert:
    """A copy of ``model`` whose parameters matching ``pattern`` (a regex on state-dict names; by
    default the query, key and value weights and biases of every layer) come from ``donor``."""
    if model.cfg != donor.cfg:
        raise ValueError(f"models differ in shape: {model.cfg} vs {donor.cfg}")
    regex = re.compile(pattern)
    taken = {name: value for name, value in donor.state_dict().items() if regex.search(name)}
    if not taken:
        raise ValueError(f"pattern {pattern!r} matches no parameter name")
    switched = copy.deepcopy(model)
    switched.load_state_dict(taken, strict=False)
    return switched
