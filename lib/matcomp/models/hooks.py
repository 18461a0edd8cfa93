"""Attention hooks: the one way this package reaches inside a BERT layer's attention, always scoped
to a ``with`` block (the library's files are never edited).

Inside ``attention_hooks(model, ...)`` every layer's self-attention runs through one function
registered with ``transformers.AttentionInterface`` (registered on first use, not at import), which
reads what to do from the ``LayerHooks`` of that layer:

- ``bias`` (S, S): added to the attention scores (the attention-bias recipe, ``matcomp.models.recipe``);
- ``edit``: attention probabilities (B, H, S, S) -> probabilities (head ablations);
- ``record``: a list the probabilities are appended to (``run_with_cache``'s attention maps);
- ``output``: the per-head outputs z (B, S, H, d) before the output projection -> a replacement or
  None (activation patching, and ``run_with_cache``).

With no ``edit`` or ``record`` the scores go through ``F.scaled_dot_product_attention`` (the fast
path training uses); otherwise through an explicit softmax. On leaving the block, also on error,
the model's attention implementation and every module are exactly as before: a test checks that no
hook survives its block. Blocks nest: an inner block's hooks act after the enclosing block's.
Heads are (layer, head) pairs counted from 0; the paper's (l, h) is ``(l - 1, h - 1)`` here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from matcomp.models.attention import attention_implementation
from matcomp.models.bert import MatrixBert

HOOKED = "matcomp_hooks"  # the name the hooked attention function is registered under
HOOKS = "_matcomp_hooks"  # attribute holding a LayerHooks on each hooked BertSelfAttention

Edit = Callable[[torch.Tensor], torch.Tensor]  # probabilities (B, H, S, S) -> probabilities
OutputHook = Callable[[torch.Tensor], torch.Tensor | None]  # z (B, S, H, d) -> new z or None


@dataclass
class LayerHooks:
    """What the hooked attention does in one layer (see the module docstring)."""

    bias: torch.Tensor | None = None
    edit: Edit | None = None
    record: list[torch.Tensor] | None = None
    output: OutputHook | None = None

    def within(self, outer: LayerHooks | None) -> LayerHooks:
        """These hooks applied inside an enclosing block's ``outer`` ones: biases add, edits and
        output hooks run outer first, and both records see the final probabilities."""
        if outer is None:
            return self
        return LayerHooks(bias=_add(outer.bias, self.bias), edit=_chain(outer.edit, self.edit),
                          record=self.record if outer.record is None else _Both(outer.record, self.record),
                          output=_chain(outer.output, self.output))


def _add(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    return b if a is None else a if b is None else a + b


def _chain(first, then):
    """``then`` after ``first``; a hook returning None leaves its input as it was."""
    if first is None or then is None:
        return then or first

    def both(x):
        y = first(x)
        y = x if y is None else y
        z = then(y)
        return y if z is None else z
    return both


class _Both(list):
    """A record that appends to an enclosing block's record as well (and to none if ``inner`` is None)."""

    def __init__(self, outer: list, inner: list | None):
        super().__init__()
        self.outer, self.inner = outer, inner

    def append(self, item) -> None:
        self.outer.append(item)
        if self.inner is not None:
            self.inner.append(item)


def _hooked_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Attention (query, key, value: (B, H, S, d)) with the module's ``LayerHooks`` applied."""
    hooks: LayerHooks = getattr(module, HOOKS)
    mask = attention_mask
    if hooks.bias is not None:
        mask = hooks.bias.to(query.dtype) if mask is None else hooks.bias.to(query.dtype) + mask
    probs = None
    if hooks.edit is None and hooks.record is None:
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling)
    else:
        scaling = query.size(-1) ** -0.5 if scaling is None else scaling
        scores = torch.matmul(query, key.transpose(2, 3)) * scaling
        if mask is not None:
            scores = scores + mask
        probs = F.softmax(scores, dim=-1)
        if hooks.edit is not None:
            probs = hooks.edit(probs)
        if hooks.record is not None:
            hooks.record.append(probs.detach())
        out = torch.matmul(F.dropout(probs, p=dropout, training=module.training), value)
    out = out.transpose(1, 2).contiguous()  # (B, S, H, d)
    if hooks.output is not None:
        replaced = hooks.output(out)
        out = out if replaced is None else replaced
    return out, probs


def _register() -> None:
    from transformers import AttentionInterface

    if HOOKED not in AttentionInterface._global_mapping:
        AttentionInterface.register(HOOKED, _hooked_attention)


def attention_modules(model: MatrixBert) -> list[torch.nn.Module]:
    """The ``BertSelfAttention`` module of every layer of a ``MatrixBert``."""
    return [layer.attention.self for layer in model.bert.encoder.layer]


@contextmanager
def attention_hooks(model: MatrixBert, hooks: dict[int, LayerHooks] | None = None) -> Iterator[None]:
    """Within the block, layer ``l`` runs with ``hooks[l]`` (every layer hooked, unhooked ones
    plainly). The model is unchanged after the block."""
    modules = attention_modules(model)
    hooks = dict(hooks or {})
    for layer in hooks:
        if not 0 <= layer < len(modules):
            raise ValueError(f"hooked layer {layer} must be in [0, {len(modules)})")
    _register()
    saved = [module.__dict__.get(HOOKS) for module in modules]  # an enclosing block's hooks, if any
    try:
        for i, module in enumerate(modules):
            setattr(module, HOOKS, hooks.get(i, LayerHooks()).within(saved[i]))
        with attention_implementation(model.bert.config, HOOKED):
            yield
    finally:
        for module, outer in zip(modules, saved):
            if outer is None:
                module.__dict__.pop(HOOKS, None)
            else:
                setattr(module, HOOKS, outer)


def explicit_attention(model: MatrixBert) -> dict[int, LayerHooks]:
    """Hooks that send every layer through the explicit softmax and change nothing: an ablation's
    unablated layers and the run it is compared with take them, so that the two differ by the ablation
    alone (PyTorch's fused attention agrees with the explicit softmax to ~1e-7, not bit for bit)."""
    return {layer: LayerHooks(edit=_unchanged) for layer in range(model.cfg.layers)}


def _unchanged(probs: torch.Tensor) -> torch.Tensor:
    return probs


CACHE_POINTS = ("probs", "z", "resid")  # the named hook points of ``run_with_cache``


@torch.no_grad()
def run_with_cache(model: MatrixBert, ids: torch.Tensor,
                   points=CACHE_POINTS) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The model's predictions (B, S) for token ids (B, S) and the activations at the named hook points
    ``points``, as TransformerLens's ``run_with_cache``: ``probs.l``, layer l's attention probabilities
    (B, H, S, S); ``z.l``, its per-head outputs before the output projection (B, S, H, d); ``resid.l``,
    the residual stream after layer l (B, S, hidden; ``resid.0`` is the embedding output). The one
    activation cache of the package: inside an enclosing ``attention_hooks`` block (an ablation, a
    patch) it caches the hooked model. Asking for ``probs`` takes the explicit-softmax path."""
    unknown = sorted(set(points) - set(CACHE_POINTS))
    if unknown:
        raise ValueError(f"hook points must be among {CACHE_POINTS}; got {unknown}")
    ids = ids.to(next(model.parameters()).device)
    cache: dict[str, torch.Tensor] = {}
    layers = range(model.cfg.layers)
    records: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers} if "probs" in points else {}

    def keep(layer: int) -> OutputHook:
        return lambda z: cache.__setitem__(f"z.{layer}", z.detach())

    hooks = {layer: LayerHooks(record=records.get(layer), output=keep(layer) if "z" in points else None)
             for layer in layers}
    hooked = "probs" in points or "z" in points
    with attention_hooks(model, hooks) if hooked else nullcontext():
        if "resid" in points:
            out, states = model.predict_with_states(ids)
            cache |= {f"resid.{layer}": h.detach() for layer, h in enumerate(states)}
        else:
            out = model(ids)
    if "probs" in points:
        cache |= {f"probs.{layer}": records[layer][0] for layer in layers}
    return out, cache


def stacked(cache: dict[str, torch.Tensor], point: str) -> torch.Tensor:
    """The cached activations of ``point`` ("probs", "z" or "resid") of every layer, stacked: (L, ...)."""
    layers = sorted(int(key.split(".")[1]) for key in cache if key.startswith(f"{point}."))
    if not layers:
        raise ValueError(f"no {point!r} in the cache: ask run_with_cache for it")
    return torch.stack([cache[f"{point}.{layer}"] for layer in layers])
