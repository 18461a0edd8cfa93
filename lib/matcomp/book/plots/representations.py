"""Representation figures: probes by layer, value-token and position embeddings. Each function draws on a given (or
new) axis and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def probe_panels(tables: dict[str, pd.DataFrame], zero: dict[str, float], labels: dict[str, str],
                 title: str = "") -> plt.Figure:
    """The probing chapter's figure (the paper's Fig. 6): one column per probe target (``tables``:
    target -> a ``probe_layers`` table, ``labels``: target -> its name). Top: train and test MSE by
    layer, with the test MSE of layer 0 (the embedding output, dotted) and of answering 0 (``zero``,
    dashed). Bottom: mean |cosine| by layer, or for the ``"element"`` target the test MSE at missing
    and at observed entries."""
    fig, axes = plt.subplots(2, len(tables), figsize=(14 * len(tables) / 3, 6.5), layout="constrained", sharex=True,
                             squeeze=False)
    for column, (target, table) in enumerate(tables.items()):
        top, bottom = axes[0, column], axes[1, column]
        layers, embedding = table.drop(0), table.loc[0]
        top.plot(layers.index, layers["train MSE"], marker="o", label="train")
        top.plot(layers.index, layers["test MSE"], marker="s", label="test")
        top.axhline(embedding["test MSE"], color="C1", lw=1, ls=":", label="test, layer 0")
        top.axhline(zero[target], color="gray", lw=1, ls="--", label="answer 0")
        top.set(title=labels.get(target, target), ylabel="MSE", yscale="log")
        if target == "element":
            bottom.plot(layers.index, layers["test MSE missing"], marker="o", color="C3", label="test, missing entries")
            bottom.plot(layers.index, layers["test MSE observed"], marker="s", color="C2",
                        label="test, observed entries")
            bottom.axhline(embedding["test MSE missing"], color="C3", lw=1, ls=":", label="missing, layer 0")
            bottom.set(ylabel="MSE", yscale="log")
        else:
            bottom.plot(layers.index, layers["train |cos|"], marker="o", label="train")
            bottom.plot(layers.index, layers["test |cos|"], marker="s", label="test")
            bottom.axhline(embedding["test |cos|"], color="C1", lw=1, ls=":", label="test, layer 0")
            bottom.set(ylabel="mean |cosine|", ylim=(0, 1.02))
        bottom.set(xlabel="layer", xticks=list(layers.index))
        top.legend(fontsize=8)
        bottom.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def probe_before_after(models: dict[str, dict[str, pd.DataFrame]], zero_missing: float) -> plt.Figure:
    """The masked-row probe's test |cosine| (left) and the element probe's test MSE at missing entries
    (right) by layer, one line per checkpoint (``models``: label -> {target: ``probe_layers`` table};
    the first dashed, the others solid), with answering 0 at missing entries (``zero_missing``) dashed."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
    for k, (name, tables) in enumerate(models.items()):
        style = "--" if k == 0 else "-"
        left.plot(tables["row"].index, tables["row"]["test |cos|"], ls=style, marker="o", label=name)
        right.plot(tables["element"].index, tables["element"]["test MSE missing"], ls=style, marker="o", label=name)
    left.set(xlabel="layer (0 = embedding output)", ylabel="mean |cosine| (test)", title="masked-row probe",
             ylim=(0, 1.02))
    right.set(xlabel="layer (0 = embedding output)", ylabel="test MSE at missing entries", title="element probe",
              yscale="log")
    right.axhline(zero_missing, color="gray", ls="--", lw=1, label="answer 0")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    return fig


def value_token_panels(values, norms, projections: np.ndarray, explained: np.ndarray, title: str = "") -> plt.Figure:
    """The value tokens' embeddings (the paper's Fig. 7a-b): their norm against the value (left) and
    their projections on the top two principal components, coloured by value (right)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    left.plot(values, norms, color="black")
    left.set(xlabel="value $x$", ylabel="embedding norm", title="token-embedding norm against value")
    points = right.scatter(projections[:, 0], projections[:, 1], c=values, cmap="RdBu_r", s=12)
    fig.colorbar(points, ax=right, label="value $x$")
    right.set(xlabel=f"PC1 ({explained[0]:.0%})", ylabel=f"PC2 ({explained[1]:.0%})", title=title)
    return fig


def position_panels(layout: np.ndarray, norms, rows, cols, n_cols: int, title: str = "", fig=None) -> plt.Figure:
    """The position embeddings (the paper's Fig. 7c-d): a 2-D layout of them (t-SNE) coloured by
    column and by row, each point labelled by its position, and their norm against the position.
    Draws on a new figure, or on ``fig`` (a figure or subfigure), titled ``title``, and returns it."""
    if fig is None:
        fig = plt.figure(figsize=(14, 4), layout="constrained")
    axes = fig.subplots(1, 3)
    for ax, labels, name in ((axes[0], cols, "column"), (axes[1], rows, "row")):
        ax.scatter(layout[:, 0], layout[:, 1], c=labels, cmap="tab10", s=60)
        for p, (x, y) in enumerate(layout):
            ax.annotate(str(p), (x, y), fontsize=7, ha="center", va="center")
        ax.set(title=f"t-SNE of position embeddings, coloured by {name}", xticks=[], yticks=[])
    axes[2].plot(range(len(norms)), norms, marker="o", color="black")
    for boundary in range(n_cols, len(norms), n_cols):
        axes[2].axvline(boundary - 0.5, color="gray", lw=0.5)
    axes[2].set(xlabel="position (row-major; lines at row starts)", ylabel="embedding norm",
                title="position-embedding norm")
    if title:
        fig.suptitle(title)
    return fig


def position_panel_rows(panels: dict[str, tuple[np.ndarray, object]], rows, cols, n_cols: int,
                        title: str = "") -> plt.Figure:
    """``position_panels`` of several checkpoints in one figure, one row each (``panels``: its title -> its
    layout and norms), so that a chapter shows the position embeddings before and after the drop as one figure."""
    if not panels:
        raise ValueError("panels must hold at least one checkpoint's layout and norms")
    fig = plt.figure(figsize=(14, 4.3 * len(panels) + 0.4), layout="constrained")
    subfigures = np.atleast_1d(np.asarray(fig.subfigures(len(panels), 1), dtype=object)).flat
    for subfigure, (name, (layout, norms)) in zip(subfigures, panels.items()):
        position_panels(layout, norms, rows, cols, n_cols, name, fig=subfigure)
    if title:
        fig.suptitle(title)
    return fig


def token_snapshots(points: dict[int, np.ndarray], values, title: str = "") -> plt.Figure:
    """One scatter per checkpoint (``points``: step -> (V, 2) coordinates of the value tokens), coloured
    by value, side by side (the paper's Fig. 9)."""
    fig, axes = plt.subplots(1, len(points), figsize=(3.2 * len(points), 3.2), layout="constrained", squeeze=False)
    for ax, (step, xy) in zip(axes[0], points.items()):
        ax.scatter(xy[:, 0], xy[:, 1], c=values, cmap="RdBu_r", s=6)
        ax.set(title=f"step {step}", xticks=[], yticks=[])
    if title:
        fig.suptitle(title)
    return fig
