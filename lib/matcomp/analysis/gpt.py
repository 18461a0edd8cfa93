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
def decode(model: MatrixGPT, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding of the m·n entries after ``prompt`` = (masked X, SEP), as the paper decodes:
    the ids (B, m·n) of the argmax tokens, and at each position the mean value of the model's
    distribution over value tokens there (B, m·n), given the greedy entries before it.

    A model trained with cross-entropy predicts a distribution; its argmax is a mode, its mean the
    number an MSE rewards, so the two read the same model differently."""
    n = prompt.shape[1] - 1
    ids = torch.arange(1, GPT_TOKENS.max_id + 1, device=prompt.device)  # the value tokens
    values = GPT_TOKENS.decode(ids)
    seq, means = prompt, []
    for _ in range(n):
        logits = model(seq)[:, -1].float()
        means.append(torch.softmax(logits[:, ids], dim=-1) @ values)
        seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], dim=1)
    return seq[:, prompt.shape[1]:], torch.stack(means, dim=1)


def completion_scores(model: MatrixGPT, batch: Batch) -> pd.DataFrame:
    """The GPT's completions scored two ways, one row each: ``greedy token`` (the argmax token's
    value, with the token accuracies the paper reports at observed and missing entries) and
    ``softmax mean`` (the mean of the predicted distribution; no token, so no accuracy). Columns:
    ``acc_obs``, ``acc_mask`` and the MSEs ``L``, ``L_obs``, ``L_mask``, comparable with BERT's."""
    n = batch.observed.flatten(1).shape[1]
    tokens, means = decode(model, sequences(batch)[:, :n + 1])
    right = tokens == GPT_TOKENS.encode(batch.values).flatten(1)
    observed = batch.observed.flatten(1)
    accuracy = {"greedy token": (right[observed].float().mean().item(), right[~observed].float().mean().item()),
                "softmax mean": (float("nan"), float("nan"))}
    rows = {}
    for name, pred in (("greedy token", GPT_TOKENS.decode(tokens)), ("softmax mean", means)):
        mse = masked_mse(pred.reshape(batch.values.shape), batch.values, batch.observed)
        rows[name] = {"acc_obs": accuracy[name][0], "acc_mask": accuracy[name][1],
                      **{k: mse[k].item() for k in ("L", "L_obs", "L_mask")}}
    return pd.DataFrame.from_dict(rows, orient="index")


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


def late_gain(metrics: pd.DataFrame, column: str = "eval_acc_mask", window: int | None = None) -> pd.Series:
    """Whether ``column`` still moves at the end of a run: the mean of its evaluations in the last
    ``window`` steps (default: a quarter of the run) minus their mean in the ``window`` before, with
    the standard error of that difference (from the evaluations' own scatter). The curve counts as
    flat when the gain is within two standard errors of 0: a rule for "trained until its accuracy
    flattens" that does not depend on a threshold chosen for one run."""
    evals = metrics.dropna(subset=[column])
    last = int(evals.step.max())
    window = window or last // 4
    late = evals[evals.step > last - window][column]
    early = evals[(evals.step > last - 2 * window) & (evals.step <= last - window)][column]
    if len(late) < 2 or len(early) < 2:
        raise ValueError(f"late_gain needs at least 2 evaluations of {column!r} in each of the last two windows "
                         f"of {window} steps; the run has {len(early)} and {len(late)} (a shorter window, or a longer "
                         f"run)")
    se = (late.var() / len(late) + early.var() / len(early)) ** 0.5
    gain = late.mean() - early.mean()
    return pd.Series({"window": window, "earlier": early.mean(), "last": late.mean(), "gain": gain, "se": se,
                      "flat": bool(abs(gain) <= 2 * se)})
