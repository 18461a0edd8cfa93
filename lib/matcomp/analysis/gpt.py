"""Analyses of the autoregressive GPT of App. G (``matcomp.models.gpt``): its completions read
back as values, its attention maps and where the writing positions look, and when it learns to copy."""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd
import torch

from matcomp.analysis.phases import phases
from matcomp.data import Batch, second_moment
from matcomp.metrics import LOSSES, masked_mse
from matcomp.models.gpt import MatrixGPT, sequences
from matcomp.runs.run import Run
from matcomp.tokenizer import GPT_TOKENS


def completion_scores(model: MatrixGPT, batch: Batch) -> pd.DataFrame:
    """The GPT's completions scored two ways, one row each: ``greedy token`` (the argmax token's
    value, with the token accuracies the paper reports at observed and missing entries) and
    ``softmax mean`` (the mean of the predicted distribution; no token, so no accuracy). Columns:
    ``acc_obs``, ``acc_mask`` and the MSEs ``L``, ``L_obs``, ``L_mask``, comparable with BERT's."""
    n = batch.observed.flatten(1).shape[1]
    tokens, means = model.decode(sequences(batch)[:, :n + 1])
    right = tokens == GPT_TOKENS.encode(batch.values).flatten(1)
    observed = batch.observed.flatten(1)
    accuracy = {"greedy token": (right[observed].float().mean().item(), right[~observed].float().mean().item()),
                "softmax mean": (float("nan"), float("nan"))}
    rows = {}
    for name, pred in (("greedy token", GPT_TOKENS.decode(tokens)), ("softmax mean", means)):
        mse = masked_mse(pred.reshape(batch.values.shape), batch.values, batch.observed)
        rows[name] = {"acc_obs": accuracy[name][0], "acc_mask": accuracy[name][1],
                      **{k: mse[k].item() for k in LOSSES}}
    return pd.DataFrame.from_dict(rows, orient="index")


def sign_and_magnitude(pred: torch.Tensor, values: torch.Tensor, observed: torch.Tensor) -> dict[str, float]:
    """How much of each missing entry ``pred`` gets right, in two parts: its sign and its magnitude.

    ``sign right``: the share of missing entries (|x| ≥ 0.01) whose prediction has the sign of x;
    ``|x| MSE``: the mean (|x̂| − |x|)², against ``|x| MSE of E|x|``, that of the best constant answer
    (the variance of |x|); ``MSE``: the mean (x̂ − x)², against ``MSE, random sign``: mean(x² + x̂²), what
    the same magnitudes give with a sign drawn at random; and ``MSE of 0``: mean x², answering 0. A model
    that knows |x| and guesses the sign has ``sign right`` near 0.5, a small ``|x| MSE`` and an ``MSE``
    near ``MSE, random sign``, about twice ``MSE of 0`` when its magnitudes are right.

    >>> x = torch.tensor([[0.5, -0.5, 0.2, -0.2]]); known = torch.zeros_like(x, dtype=torch.bool)
    >>> r = sign_and_magnitude(torch.tensor([[0.5, 0.5, -0.2, -0.2]]), x, known)
    >>> [round(r[k], 4) for k in ("sign right", "|x| MSE", "MSE", "MSE, random sign", "MSE of 0")]
    [0.5, 0.0, 0.29, 0.29, 0.145]
    """
    missing = ~observed & (values.abs() >= 0.01)
    x, p = values[missing].double(), pred.reshape(values.shape)[missing].double()
    return {"sign right": (torch.sign(p) == torch.sign(x)).double().mean().item(),
            "|x| MSE": ((p.abs() - x.abs()) ** 2).mean().item(), "|x| MSE of E|x|": x.abs().var(unbiased=False).item(),
            "MSE": ((p - x) ** 2).mean().item(), "MSE, random sign": (x ** 2 + p ** 2).mean().item(),
            "MSE of 0": (x ** 2).mean().item()}


def greedy_reading(model: MatrixGPT, batch: Batch) -> dict[str, float]:
    """``sign_and_magnitude`` of the GPT's greedy completions (the argmax token's value) of ``batch``."""
    n = batch.observed.flatten(1).shape[1]
    tokens, _ = model.decode(sequences(batch)[:, :n + 1])
    return sign_and_magnitude(GPT_TOKENS.decode(tokens), batch.values, batch.observed)


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


class Completion(NamedTuple):
    """The GPT's completions beside BERT's and answering 0 (``completion_table``): ``table``, one row each with
    its display label (L_obs, L_mask); ``greedy`` and ``means``, the labels of the GPT's greedy-token and
    softmax-mean rows; ``bert``, BERT's rows by the checkpoint they read ("post-shift", "at the GPT's steps", or
    both in one); ``zero``, answering 0's row."""

    table: pd.DataFrame
    greedy: str
    means: str
    bert: dict[str, str]
    zero: str


def completion_table(gpt: Run, bert: Run, batch: Batch) -> Completion:
    """L_obs and L_mask of the GPT's last checkpoint (greedy tokens, softmax means) beside BERT's post-shift
    checkpoint and its checkpoint nearest the GPT's steps, and answering 0 at missing entries, on ``batch``."""
    post, equal = phases(bert).post, bert.nearest_step(gpt.steps[-1])
    bert_steps = {"post-shift": post, "at the GPT's steps": equal} if post != equal else {
        "post-shift = at the GPT's steps": post}
    last = gpt.steps[-1]
    table = completion_scores(gpt.gpt(last), batch)[["L_obs", "L_mask"]]
    table = table.rename(index=lambda reading: f"GPT, {reading} (step {last:,})")
    rows = {name: f"BERT, {name} (step {step:,})" for name, step in bert_steps.items()}
    for name, step in bert_steps.items():
        table.loc[rows[name]] = [bert.checkpoint(step).eval_losses(batch)[k].item() for k in ("L_obs", "L_mask")]
    zero = "predict 0 at missing entries"
    table.loc[zero] = [0.0, second_moment(bert.config.data)]
    return Completion(table, f"GPT, greedy token (step {last:,})", f"GPT, softmax mean (step {last:,})", rows, zero)
