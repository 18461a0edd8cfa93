"""Evaluating a trained model on fresh batches, as the paper's analysis scripts do (no gradients,
metrics pooled over every (matrix, entry) pair; NeurIPS §2.1, §3.1)."""

from __future__ import annotations

import pandas as pd
import torch

from matcomp.config import DataConfig
from matcomp.data import Batch, data_config, matrix_count, sample_batch, second_moment
from matcomp.metrics import masked_mse
from matcomp.models.bert import MatrixBert
from matcomp.paper import COPY_VALUES
from matcomp.seeding import analysis_generator
from matcomp.tokenizer import BERT_TOKENS

TRUTH = "X (the truth)"  # the true matrices, as a "method" beside the completions (their nuclear norm)


def copy_label(m: float | None) -> str:
    """How the copy table names a replacement: "MASK" (kept) or the value, e.g. "0.44"."""
    return "MASK" if m is None else f"{m:g}"


@torch.no_grad()
def predict(model: MatrixBert, ids: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The model's predictions (B, S) for token ids (B, S), on the CPU."""
    device = next(model.parameters()).device
    positions = None if position_ids is None else position_ids.to(device)
    return model(ids.to(device), position_ids=positions).float().cpu()


def losses(model: MatrixBert, batch: Batch, ids: torch.Tensor | None = None,
           position_ids: torch.Tensor | None = None, target: torch.Tensor | None = None) -> dict[str, float]:
    """L, L_obs, L_mask and mask_value of the model on ``batch`` (or on other ``ids`` with the
    batch's mask), against ``batch.values`` or another ``target``."""
    pred = predict(model, batch.ids if ids is None else ids, position_ids)
    target = batch.values if target is None else target
    return {name: value.item() for name, value in masked_mse(pred, target, batch.observed).items()}


def copy_check(model: MatrixBert, data: DataConfig, samples: int = 512, seed: int = 0,
               values=COPY_VALUES) -> pd.DataFrame:
    """The token intervention of NeurIPS §3.1 (Table 1): every missing entry's MASK is replaced by the token of a
    constant m, on rank-r and on random full-rank matrices.

    One row per (inputs, m): ``L'_mask`` is the MSE at missing entries against m (0 for MASK kept),
    ``L_obs`` the usual MSE at observed entries. A copying model scores ~0 on both.
    """
    data = data_config(data, "copy_check: data")
    samples = matrix_count(data, samples, "copy_check: samples")
    rows = []
    for inputs, full_rank in ((f"rank-{data.rank}", False), ("random", True)):
        batch = sample_batch(data, samples, analysis_generator(seed, "copy_check: seed"), full_rank=full_rank)
        for m in values:
            ids = batch.ids if m is None else BERT_TOKENS.replace_masked(batch.ids, m)
            shown = torch.where(batch.observed, batch.values, 0.0 if m is None else float(m))
            result = losses(model, batch, ids=ids, target=shown)
            rows.append({"inputs": inputs, "m": copy_label(m),
                         "L'_mask": result["L_mask"], "L_obs": result["L_obs"]})
    return pd.DataFrame(rows)


def second_moments(settings, samples: int, seed: int = 1) -> pd.DataFrame:
    """E[X_ij²] of each data config in ``settings`` (r/9 for uniform factors: the loss of a model that
    copies and answers 0 at every MASK, the level of the plateau) beside its Monte Carlo estimate and the
    largest |X_ij| over ``samples`` matrices from ``analysis_generator(seed)``, and their relative
    difference. One row per setting, named "m x n rank r"."""
    settings = [data_config(data, "second_moments: each of settings") for data in settings]
    for data in settings:
        matrix_count(data, samples, "second_moments: samples")
    rows = []
    for data in settings:
        values = sample_batch(data, samples, analysis_generator(seed, "second_moments: seed")).values
        rows.append({"setting": f"{data.n_rows}x{data.n_cols} rank {data.rank}", "r/9": second_moment(data),
                     "mean X_ij^2 (sampled)": values.pow(2).mean().item(), "max |X_ij|": values.abs().max().item()})
    moments = pd.DataFrame(rows).set_index("setting")
    moments["relative difference"] = moments["mean X_ij^2 (sampled)"] / moments["r/9"] - 1
    return moments
