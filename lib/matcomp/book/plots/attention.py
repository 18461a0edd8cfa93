"""Attention and head figures: attention maps per head, head families, patching heatmaps, intervention bars. Each
function draws on a given (or new) axis and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from matcomp.analysis.heads import family_text
from matcomp.book.plots.curves import LOSS_COLORS, LOSS_LABELS


def attention_grid(maps, titles=None, suptitle: str = "", size: float = 1.9, fig=None) -> plt.Figure:
    """Every head's averaged attention map (L, H, S, S) in a grid, layers down and heads across,
    query position on the vertical axis (the paper's Fig. 4); ``titles[l][h]`` labels each cell.
    Draws on a new figure, or on ``fig`` (a figure or subfigure), and returns it."""
    maps = np.asarray(maps)
    n_layers, n_heads, S = maps.shape[:3]
    if fig is None:
        fig = plt.figure(figsize=(size * n_heads, size * n_layers + 0.4), layout="constrained")
    axes = fig.subplots(n_layers, n_heads, squeeze=False)
    for layer in range(n_layers):
        for head in range(n_heads):
            ax = axes[layer, head]
            ax.imshow(maps[layer, head], cmap="viridis", vmin=0)
            ax.set_xticks([0, S - 1])
            ax.set_yticks([0, S - 1])
            ax.tick_params(labelsize=6, length=2, top=True, labeltop=True, bottom=False, labelbottom=False)
            ax.set_title(titles[layer][head] if titles else f"layer {layer}, head {head}", fontsize=7)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def attention_grids(grids: dict[str, np.ndarray], titles: dict[str, list[list[str]]] | None = None,
                    size: float = 1.9, columns: int = 1) -> plt.Figure:
    """Several ``attention_grid`` s in one figure (one subfigure each, ``columns`` across, titled by
    the key of ``grids``: a checkpoint, a mask), so that a chapter shows them as one captioned figure;
    ``titles[key]`` labels the heads of one grid."""
    if not grids:
        raise ValueError("grids must hold at least one attention grid")
    shapes = {np.asarray(maps).shape[:2] for maps in grids.values()}
    if len(shapes) != 1:
        raise ValueError(f"every grid must have the same (layers, heads); got {sorted(shapes)}")
    (n_layers, n_heads), = shapes
    rows = -(-len(grids) // columns)
    fig = plt.figure(figsize=(size * n_heads * columns, (size * n_layers + 0.4) * rows), layout="constrained")
    panels = np.atleast_1d(np.asarray(fig.subfigures(rows, columns), dtype=object)).flat
    for panel, (name, maps) in zip(panels, grids.items()):
        attention_grid(maps, (titles or {}).get(name), name, size, fig=panel)
    return fig


def head_heatmap(values: pd.DataFrame, ax: plt.Axes, title: str = "", fmt: str = "{:.3f}", cmap: str = "magma_r",
                 vmin: float | None = None, vmax: float | None = None) -> plt.Axes:
    """A (layer x head) table as an annotated heatmap."""
    image = ax.imshow(values.to_numpy(dtype=float), cmap=cmap, vmin=vmin, vmax=vmax)
    for (i, j), v in np.ndenumerate(values.to_numpy(dtype=float)):
        r, g, b, _ = image.cmap(image.norm(v))
        ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=8,
                color="white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black")
    ax.set(xticks=range(values.shape[1]), yticks=range(values.shape[0]), xlabel="head", ylabel="layer", title=title)
    ax.figure.colorbar(image, ax=ax, shrink=0.8)
    return ax


def condition_bars(table: pd.DataFrame, plateau: float | None = None, ax: plt.Axes | None = None) -> plt.Axes:
    """L_obs and L_mask (columns of ``table``) of each intervention (rows) as bars on a log scale,
    with the plateau level r/9 for reference."""
    ax = ax or plt.subplots(figsize=(8, 3.2))[1]
    x = np.arange(len(table))
    for offset, column in ((-0.2, "L_obs"), (0.2, "L_mask")):
        ax.bar(x + offset, table[column], width=0.4, color=LOSS_COLORS[column], label=LOSS_LABELS[column])
    if plateau is not None:
        ax.axhline(plateau, color="gray", ls=":", label=f"predict 0 when missing ({plateau:.3g})")
    ax.set(yscale="log", xticks=x, ylabel="MSE")
    ax.set_xticklabels(table.index, rotation=15, ha="right", fontsize=8)
    ax.legend(fontsize=8)
    return ax


def patching_heatmaps(grid: pd.DataFrame, clean: float, corrupted: float) -> plt.Figure:
    """Single-head patching as two (layer x head) heatmaps on one colour scale: the MSE of the patched
    output to X and to -X at missing entries (``grid``: a ``negation_patching`` table indexed by
    (layer, head)); ``clean`` and ``corrupted`` are the unpatched runs' MSE to X, named in the title."""
    n_layers = grid.index.get_level_values("layer").nunique()
    fig, axes = plt.subplots(1, 2, figsize=(4.2 * 2, 0.7 * n_layers + 2), layout="constrained")
    span = dict(vmin=0, vmax=max(corrupted, grid[["L_mask(X)", "L_mask(-X)"]].max().max()))
    head_heatmap(grid["L_mask(X)"].unstack(), axes[0], title="MSE to $X$ at missing entries", **span)
    head_heatmap(grid["L_mask(-X)"].unstack(), axes[1], title="MSE to $-X$ at missing entries", **span)
    fig.suptitle(f"one head patched (clean {clean:.3f}, corrupted {corrupted:.3f} to $X$)")
    return fig


def family_titles(table: pd.DataFrame) -> list[list[str]]:
    """Titles "(layer,head) families" for ``attention_grid``, from a ``classify_heads`` table indexed by
    (layer, head)."""
    layers, heads = (table.index.get_level_values(level).unique() for level in (0, 1))
    return [[f"({layer},{head}) {family_text(table.loc[(layer, head), 'families'])}" for head in heads]
            for layer in layers]
