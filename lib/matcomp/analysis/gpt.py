"""Analyses of the autoregressive GPT of App. G (``matcomp.models.gpt``): its completions read
back as values, its attention maps and where the writing positions look, and when it learns to copy."""

from __future__ import annotations

import pandas as pd
import torch

from matcomp.data import Batch
from matcomp.metrics import masked_mse
from matcomp.models.gpt import MatrixGPT, sequences
from matcomp.tokenizer import GPT_TOKENS


@torch.no_grad()
def decoded_losses(model: MatrixGPT, batch: Batch) -> dict[str, float]:
    """The MSEs (``matcomp.metrics.METRICS``) of the greedily decoded matrices, comparable with
    BERT's losses: the GPT's completion read back as values."""
    prompt = sequences(batch)[:, :batch.observed.flatten(1).shape[1] + 1]
    pred = GPT_TOKENS.decode(model.complete(prompt)).reshape(batch.values.shape)
    return {k: v.item() for k, v in masked_mse(pred, batch.values, batch.observed).items()}


@torch.no_grad()
def attention_maps(model: MatrixGPT, batch: Batch) -> torch.Tensor:
    """Attention probabilities averaged over the batch: (layers, heads, T, T), T = 2·m·n (the model
    reads all but the last token)."""
    return torch.stack(model.attentions(sequences(batch)[:, :-1])).mean(1)


def attention_scores(maps: torch.Tensor, size: int) -> pd.DataFrame:
    """Where the positions that write the full matrix look, per layer and head (App. G, Fig. 12),
    from ``attention_maps`` of m·n = ``size`` matrices.

    Position t = S + k (S = m·n; SEP for k = 0) predicts entry k of the full matrix. ``to_sep`` is
    its attention to [SEP] (index S), ``to_last_input`` to the last masked-input entry just before
    it (index S - 1), ``to_entry`` to the same entry of the masked input (index k = t - S: the offset
    identity that copies), ``to_written`` to the full-matrix entries already written (indices > S),
    each averaged over k."""
    k = torch.arange(size)
    writers = maps[:, :, size:]  # (layers, heads, S, T): the rows of positions S..2S-1
    table = pd.DataFrame({
        "to_sep": writers[..., size].mean(-1).flatten(),
        "to_last_input": writers[..., size - 1].mean(-1).flatten(),
        "to_entry": writers[:, :, k, k].mean(-1).flatten(),
        "to_written": writers[..., size + 1:].sum(-1).mean(-1).flatten(),
    })
    layers, heads = maps.shape[:2]
    table.index = pd.MultiIndex.from_product([range(1, layers + 1), range(1, heads + 1)], names=["layer", "head"])
    return table


def copy_onset(metrics: pd.DataFrame, level: float = 0.5) -> int | None:
    """The first evaluated step where greedy accuracy at observed entries reaches ``level`` (None if never)."""
    evals = metrics.dropna(subset=["eval_acc_obs"])
    reached = evals[evals.eval_acc_obs >= level]
    return int(reached.step.iloc[0]) if len(reached) else None
