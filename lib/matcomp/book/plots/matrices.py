"""Matrices drawn as grids: a masked task, its tokens, and a completion beside the truth. Each function draws on a
given (or new) axis and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def matrix_panel(ax: plt.Axes, values, text=None, missing=None, title: str = "", vmax: float | None = None,
                 fontsize: float = 7) -> plt.Axes:
    """One matrix as a heatmap (red positive, blue negative), each cell labelled by ``text`` (default:
    the value to 2 decimals); cells where ``missing`` is True are grey and hatched."""
    values = np.asarray(values, dtype=float)
    vmax = vmax or max(float(np.abs(values).max()), 1e-6)
    ax.imshow(values, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    rows, cols = values.shape
    if missing is not None:
        missing = np.asarray(missing, dtype=bool)
        for i, j in zip(*np.nonzero(missing)):
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="0.85", edgecolor="0.6", hatch="//"))
    text = np.vectorize(lambda v: f"{v:.2f}")(values) if text is None else np.asarray(text)
    for i in range(rows):
        for j in range(cols):
            dark = abs(values[i, j]) > 0.6 * vmax and (missing is None or not missing[i, j])
            ax.text(j, i, text[i, j], ha="center", va="center", fontsize=fontsize, color="white" if dark else "black")
    ax.set(title=title, xticks=range(cols), yticks=range(rows))
    ax.tick_params(labelsize=7, length=0)
    return ax


def completion_figure(values, observed, prediction, title: str = "") -> plt.Figure:
    """The true matrix, the masked input and the model's prediction (with its squared error at
    missing entries) side by side."""
    values, observed, prediction = (np.asarray(a) for a in (values, observed, prediction))
    vmax = float(np.abs(values).max())
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.8), layout="constrained")
    matrix_panel(axes[0], values, title="true matrix $X$", vmax=vmax)
    matrix_panel(axes[1], np.where(observed, values, 0.0), missing=~observed, title="input: observed entries",
                 vmax=vmax, text=np.where(observed, np.vectorize(lambda v: f"{v:.2f}")(values), "?"))
    err = ((prediction - values) ** 2)[~observed].mean() if (~observed).any() else float("nan")
    matrix_panel(axes[2], prediction, title=f"prediction (MSE at ? = {err:.3g})", vmax=vmax)
    for i, j in zip(*np.nonzero(~observed)):
        axes[2].add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", lw=1.5))
    fig.suptitle(title)
    return fig


def masked_example(batch, rank: int, title: str = "") -> plt.Figure:
    """The first matrix of ``batch`` (a ``matcomp.data.Batch`` of rank-``rank`` matrices) three times,
    the task chapter's picture: the rounded X, its mask (missing entries hatched and labelled MASK) and
    the token ids the model reads."""
    X, observed = batch.values[0], batch.observed[0]
    ids = batch.ids[0].reshape(X.shape)
    shown = np.where(observed, X, 0.0)
    vmax = X.abs().max().item()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.6), layout="constrained")
    matrix_panel(axes[0], X, title=f"$X = UV^T$ (rank {rank}), rounded", vmax=vmax)
    labels = [[f"{v:.2f}" if o else "MASK" for v, o in zip(r, ro)] for r, ro in zip(X.tolist(), observed.tolist())]
    matrix_panel(axes[1], shown, missing=~observed, vmax=vmax, text=labels,
                 title=f"mask: {int((~observed).sum())} of {X.numel()} entries missing")
    matrix_panel(axes[2], shown, missing=~observed, vmax=vmax, text=ids.tolist(), title="token ids the model reads")
    fig.suptitle(title)
    return fig
