"""Interventions on a trained model (NeurIPS §3.1–3.2), through the scoped attention hooks of
``matcomp.models.hooks``:

- ``ablate_heads``: uniform attention 1/S in chosen heads (the paper's ablation) or the head's
  pattern averaged over the batch (what the released code did).
- ``transplant``: a copy of a model with some weights taken from another (model switching).

Heads are (layer, head) pairs counted from 0; the paper's (l, h) is ``(l - 1, h - 1)`` here.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable

import pandas as pd
import torch

from matcomp.analysis.evaluation import predict
from matcomp.data import Batch
from matcomp.metrics import masked_mse
from matcomp.models.bert import MatrixBert
from matcomp.models.hooks import Edit, LayerHooks, attention_hooks, explicit_attention

ABLATION_MODES = ("uniform", "batch_mean")
QKV = r"encoder\.layer\.\d+\.attention\.self\.(query|key|value)\."


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
    (``"batch_mean"``, the released code's); the other heads and layers take the explicit softmax too
    (``explicit_attention``)."""
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

    return attention_hooks(model, explicit_attention(model) | {layer: LayerHooks(edit=edit_for(hs))
                                                               for layer, hs in heads_by_layer(model, heads).items()})


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


def intervention_predictions(model: MatrixBert, donor: MatrixBert, batch: Batch,
                             donor_name: str) -> dict[str, torch.Tensor]:
    """The predictions of ``model`` on ``batch`` as it is ("no intervention"), with every head uniform ("all
    heads uniform", the paper's ablation) or batch-averaged ("all heads batch-mean", the released code's), and
    with the query, key and value weights of ``donor`` ("Q, K, V from <donor_name>", model switching): the four
    conditions of the copying-phase and observed-entries chapters (NeurIPS §3.1, §3.2.1)."""
    predictions = {"no intervention": predict(model, batch.ids)}
    for mode, name in (("uniform", "all heads uniform"), ("batch_mean", "all heads batch-mean")):
        with ablate_heads(model, mode=mode):
            predictions[name] = predict(model, batch.ids)
    predictions[f"Q, K, V from {donor_name}"] = predict(transplant(model, donor), batch.ids)
    return predictions


def attention_interventions(model: MatrixBert, donor: MatrixBert, batch: Batch, donor_name: str) -> pd.DataFrame:
    """L_obs and L_mask of ``model`` on ``batch`` under each condition of ``intervention_predictions``."""
    return interventions_table(intervention_predictions(model, donor, batch, donor_name), batch)


def interventions_table(predictions: dict[str, torch.Tensor], batch: Batch) -> pd.DataFrame:
    """L_obs and L_mask of each condition's predictions (``intervention_predictions``) on ``batch``."""
    return pd.DataFrame({name: {k: v.item() for k, v in masked_mse(pred, batch.values, batch.observed).items()}
                         for name, pred in predictions.items()}).T[["L_obs", "L_mask"]]
