"""Activation patching of per-head attention outputs (NeurIPS §3.2.2 and App. F).

The patched quantity is each head's z_h = softmax(Q_h K_hᵀ/√d) V_h: the output of
``encoder.layer[i].attention.self``, shape (B, S, H·d), before the output projection. The clean
run feeds X ⊙ M and caches z; the patched run feeds the corrupted input −X ⊙ M (same mask) with
the clean z put back at chosen heads ("sites"), at every position. If the missing entries come
back to X, attention carries what completes them; observed entries should still follow −X,
because they are copied through the residual stream (NeurIPS §3.2.1).

Patching every head of every layer restores the missing entries *exactly*, whatever the model:
a missing entry's input (MASK + its position) is the same in both runs, and attention is the
only path between positions. The paper's all-layers number is therefore the clean L_mask by
construction; partial sites (a layer, a head) are the informative ones.

A site is a bool mask (L, H) of heads, counted from 0. ``all_layers`` is the paper's text,
``last_layer`` the released ``patch.py``; ``per_layer`` and ``per_head`` localise the effect.
The hooks (``matcomp.models.hooks``) live only inside ``with`` blocks and are removed on exit, also on error.
"""

from __future__ import annotations

from collections.abc import Hashable
from contextlib import contextmanager

import pandas as pd
import torch

from matcomp.analysis.evaluation import predict
from matcomp.data import Batch
from matcomp.metrics import pooled_loss
from matcomp.models.bert import MatrixBert
from matcomp.models.hooks import LayerHooks, attention_hooks, run_with_cache, stacked
from matcomp.tokenizer import BERT_TOKENS

COLUMNS = ("L_mask(X)", "L_mask(-X)", "L_obs(X)", "L_obs(-X)")


@torch.no_grad()
def check_site(model: MatrixBert, label: Hashable, heads: torch.Tensor) -> torch.Tensor:
    """``heads`` as a bool (L, H) tensor; ValueError naming the expected shape otherwise."""
    shape = (model.cfg.layers, model.cfg.heads)
    if not isinstance(heads, torch.Tensor) or heads.dtype != torch.bool or tuple(heads.shape) != shape:
        got = tuple(heads.shape) if isinstance(heads, torch.Tensor) else type(heads).__name__
        raise ValueError(f"site {label!r} must be a bool mask of shape (layers, heads) = {shape}; got {got}")
    return heads


@contextmanager
def patched_heads(model: MatrixBert, states: torch.Tensor, heads: torch.Tensor):
    """Within the block, the heads selected by ``heads`` (L, H) output ``states`` (L, B, S, H, d)
    (e.g. ``stacked(run_with_cache(model, ids, ["z"])[1], "z")``) at every position instead of their own z."""
    heads = check_site(model, "heads", heads)

    def replace(chosen: torch.Tensor, clean: torch.Tensor):
        def output(z: torch.Tensor) -> torch.Tensor:
            z = z.clone()
            z[:, :, chosen] = clean[:, :, chosen].to(z)
            return z
        return output

    hooks = {layer: LayerHooks(output=replace(chosen, states[layer]))
             for layer, chosen in enumerate(heads) if chosen.any()}
    with attention_hooks(model, hooks):
        yield


@torch.no_grad()
def patch_heads(model: MatrixBert, clean_ids: torch.Tensor, corrupt_ids: torch.Tensor,
                sites: dict[Hashable, torch.Tensor]) -> dict[Hashable, torch.Tensor]:
    """Predictions (B, S) of the corrupted run with the clean run's z patched in, one per site.

    ``sites`` maps a label to a bool mask (L, H) of heads to patch at every position. The clean
    input runs once; each site costs one corrupted run.
    """
    if clean_ids.shape != corrupt_ids.shape:
        raise ValueError(f"corrupt_ids must have the shape of clean_ids {tuple(clean_ids.shape)}; "
                         f"got {tuple(corrupt_ids.shape)}")
    sites = {label: check_site(model, label, heads) for label, heads in sites.items()}
    clean = stacked(run_with_cache(model, clean_ids, ["z"])[1], "z")
    predictions = {}
    for label, heads in sites.items():
        with patched_heads(model, clean, heads):
            predictions[label] = predict(model, corrupt_ids)
    return predictions


def patching_table(predictions: dict[Hashable, torch.Tensor], batch: Batch) -> pd.DataFrame:
    """The paper's patching table: one row per label, the MSE of its predictions (B, S) to X and
    to −X at missing (``L_mask``) and observed (``L_obs``) entries, pooled over the batch.

    Labels that are all (layer, head) tuples give a MultiIndex (``.unstack()`` makes a heatmap).
    """
    X, observed = batch.values, batch.observed
    rows = [[pooled_loss(pred, target, where)[0] for where in (~observed, observed) for target in (X, -X)]
            for pred in predictions.values()]
    labels = list(predictions)
    if labels and all(isinstance(label, tuple) and len(label) == 2 for label in labels):
        index = pd.MultiIndex.from_tuples(labels, names=["layer", "head"])
    else:
        index = pd.Index(labels, name="site", tupleize_cols=False)
    return pd.DataFrame(rows, index=index, columns=list(COLUMNS))


def negation_patching(model: MatrixBert, batch: Batch, sites: dict[Hashable, torch.Tensor],
                      references: bool = True) -> pd.DataFrame:
    """NeurIPS App. F end to end: the corrupted input is −X with the same mask (``Tokenizer.negate``).

    Returns ``patching_table`` of the sites, preceded (if ``references``) by the unpatched
    ``clean`` (X) and ``corrupted`` (−X) runs.
    """
    corrupt = BERT_TOKENS.negate(batch.ids)
    predictions: dict[Hashable, torch.Tensor] = {}
    if references:
        predictions |= {"clean": predict(model, batch.ids), "corrupted": predict(model, corrupt)}
    predictions.update(patch_heads(model, batch.ids, corrupt, sites))
    return patching_table(predictions, batch)


def restored_fraction(table: pd.DataFrame, min_gap: float = 0.1) -> pd.Series | None:
    """How much of the clean answer each patched site restores at missing entries: 1 − (L_mask(X) of
    the site − clean's) / (corrupted's − clean's), so 1 = the clean run, 0 = the corrupted run; from a
    ``negation_patching`` table with its ``clean`` and ``corrupted`` rows. None when the corrupted run
    is within ``min_gap`` × clean of the clean one at missing entries (a model that answers ~0 there
    whatever its input): then there is nothing to restore.

    >>> t = pd.DataFrame({"L_mask(X)": [0.1, 0.9, 0.1, 0.5]}, index=["clean", "corrupted", "all", "half"])
    >>> restored_fraction(t).round(3).to_dict()
    {'all': 1.0, 'half': 0.5}
    """
    missing = table["L_mask(X)"]
    gap = missing["corrupted"] - missing["clean"]
    if not gap > min_gap * missing["clean"]:
        return None
    sites = [site for site in table.index if site not in ("clean", "corrupted")]
    restored = {site: 1 - (missing[site] - missing["clean"]) / gap for site in sites}
    return pd.Series(restored, name="restored", dtype=float)


def _check_size(layers: int, heads: int) -> None:
    if layers < 1 or heads < 1:
        raise ValueError(f"layers and heads must be >= 1; got layers={layers}, heads={heads}")


def all_layers(layers: int, heads: int) -> dict[str, torch.Tensor]:
    """Every head of every layer (the paper's text)."""
    _check_size(layers, heads)
    return {"all layers": torch.ones(layers, heads, dtype=torch.bool)}


def last_layer(layers: int, heads: int) -> dict[str, torch.Tensor]:
    """Every head of the last layer only (the released ``patch.py``)."""
    _check_size(layers, heads)
    site = torch.zeros(layers, heads, dtype=torch.bool)
    site[-1] = True
    return {"last layer": site}


def per_layer(layers: int, heads: int) -> dict[str, torch.Tensor]:
    """One site per layer, all its heads; labelled ``"layer i"`` (from 0)."""
    _check_size(layers, heads)
    sites = {}
    for i in range(layers):
        site = torch.zeros(layers, heads, dtype=torch.bool)
        site[i] = True
        sites[f"layer {i}"] = site
    return sites


def per_head(layers: int, heads: int) -> dict[tuple[int, int], torch.Tensor]:
    """One site per single head, labelled ``(layer, head)`` (from 0)."""
    _check_size(layers, heads)
    sites = {}
    for i in range(layers):
        for h in range(heads):
            site = torch.zeros(layers, heads, dtype=torch.bool)
            site[i, h] = True
            sites[(i, h)] = site
    return sites
