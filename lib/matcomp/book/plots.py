"""Figures shared by the chapters. Each function draws on a given (or new) axis and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FormatStrFormatter, MaxNLocator, NullLocator

from matcomp.drop import Drop, smooth

LOSS_COLORS = {"L": "black", "L_obs": "tab:blue", "L_mask": "tab:red"}
LOSS_LABELS = {"L": "$L$ (all entries)", "L_obs": "$L_{obs}$ (observed)", "L_mask": "$L_{mask}$ (missing)"}


def loss_curves(metrics: pd.DataFrame, drop: Drop | None = None, plateau: float | None = None,
                window: int = 101, ax: plt.Axes | None = None) -> plt.Axes:
    """L, L_obs and L_mask against step on a log scale (the paper's Fig. 2), each smoothed over
    ``window`` steps with the raw L_mask faint behind; ``drop`` marks the drop step and
    ``plateau`` draws the level a model predicting 0 at missing entries would reach."""
    ax = ax or plt.subplots(figsize=(7, 4))[1]
    ax.plot(metrics["step"], metrics["L_mask"], color=LOSS_COLORS["L_mask"], alpha=0.15, lw=0.5)
    for column, color in LOSS_COLORS.items():
        ax.plot(smooth(metrics, column, window), color=color, label=LOSS_LABELS[column])
    if plateau is not None:
        ax.axhline(plateau, color="gray", ls=":", label=f"predict 0 when missing ({plateau:.3g})")
    if drop is not None and drop.half_step is not None:
        ax.axvline(drop.half_step, color="gray", ls="--", lw=1, label=f"drop (step {drop.half_step})")
    ax.set(yscale="log", xlabel="training step", ylabel="MSE (smoothed)")
    ax.legend(fontsize=8)
    return ax


def mask_value_curve(metrics: pd.DataFrame, drop: Drop | None = None, window: int = 101,
                     ax: plt.Axes | None = None) -> plt.Axes:
    """Mean |prediction| at missing entries against step: ~0 while the model copies."""
    ax = ax or plt.subplots(figsize=(7, 2.5))[1]
    ax.plot(smooth(metrics, "mask_value", window), color="tab:purple")
    if drop is not None and drop.half_step is not None:
        ax.axvline(drop.half_step, color="gray", ls="--", lw=1)
    ax.set(xlabel="training step", ylabel=r"mean $|\hat X_{ij}|$, missing")
    return ax


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


def attention_grid(maps, titles=None, suptitle: str = "", size: float = 1.9) -> plt.Figure:
    """Every head's averaged attention map (L, H, S, S) in a grid, layers down and heads across,
    query position on the vertical axis (the paper's Fig. 4); ``titles[l][h]`` labels each cell."""
    maps = np.asarray(maps)
    n_layers, n_heads, S = maps.shape[:3]
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(size * n_heads, size * n_layers + 0.4), squeeze=False,
                             layout="constrained")
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


# p_mask sweep (the paper's Fig. 3): a style per method, matched by a key contained in the method's name
SWEEP_STYLES = {"BERT": dict(color="black", lw=2.2, marker="o", ms=4),
                "nuclear norm min": dict(color="tab:red", marker="s", ms=4),
                "regularised": dict(color="tab:orange", marker="^", ms=4),
                "soft-impute": dict(color="tab:green", ls="--", marker="v", ms=4),
                "ALS": dict(color="tab:blue", ls="-.", marker="D", ms=3.5),
                "X (the truth)": dict(color="gray", ls="--", lw=1)}
TRUTH = "X (the truth)"


def sweep_style(method: str, styles: dict | None = None) -> dict:
    """The plot keywords of the first key of ``styles`` (default ``SWEEP_STYLES``) in ``method``'s name
    ({} if none matches)."""
    return next((style for key, style in (styles or SWEEP_STYLES).items() if key in method), {})


def p_mask_sweep(sweep: pd.DataFrame, train_p_mask: float | None = None, title: str = "",
                 styles: dict | None = None) -> plt.Figure:
    """Two panels against p_mask, log scales: the MSE L and the mean nuclear norm of each method's
    completion (the paper's Fig. 3), from the tidy ``sweep`` (columns method, p_mask, L, nuclear_norm;
    one row per method and p_mask). The true matrices (method ``TRUTH``) appear in the norm panel only;
    a dotted vertical line marks ``train_p_mask``, the value the BERT was trained at."""

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), layout="constrained")
    titles = ["MSE $L$ (all entries)", "mean nuclear norm $\\|\\hat X\\|_*$"]
    for ax, column, panel in zip(axes, ["L", "nuclear_norm"], titles):
        for method, part in sweep.groupby("method", sort=False):
            if column == "L" and method == TRUTH:
                continue
            ax.plot(part["p_mask"], part[column], label=method, **sweep_style(method, styles))
        if train_p_mask is not None:
            ax.axvline(train_p_mask, color="gray", ls=":", lw=1)
        ax.set(yscale="log", xlabel="$p_{mask}$ (fraction of entries missing)", title=panel)
        ax.grid(True, which="both", alpha=0.25)
    if train_p_mask is not None:
        axes[0].text(train_p_mask, 0.98, " BERT's training $p_{mask}$", transform=axes[0].get_xaxis_transform(),
                     va="top", fontsize=8, color="gray")
    # the norms span less than a factor of 2: evenly spaced plain ticks read better than log decades
    axes[1].yaxis.set(major_locator=MaxNLocator(7, steps=[1, 2, 5, 10]), major_formatter=FormatStrFormatter("%.3g"),
                      minor_locator=NullLocator())
    axes[1].legend(fontsize=8, loc="lower left")
    if title:
        fig.suptitle(title)
    return fig


def l_mask_twin(ax: plt.Axes, metrics: pd.DataFrame, drop: Drop | None = None, window: int = 101) -> plt.Axes:
    """Smoothed L_mask on a second y-axis of ``ax`` (and the drop step as a dashed line), to read a
    measure plotted against step beside the loss; returns the second axis."""
    twin = ax.twinx()
    twin.plot(smooth(metrics, "L_mask", window), color=LOSS_COLORS["L_mask"], alpha=0.6)
    twin.set_ylabel("$L_{mask}$ (smoothed)", color=LOSS_COLORS["L_mask"])
    if drop is not None and drop.half_step is not None:
        ax.axvline(drop.half_step, color="gray", ls="--", lw=1)
    return twin


def measure_panels(table: pd.DataFrame, metrics: pd.DataFrame, drop: Drop | None = None,
                   onsets: dict[str, int | None] | None = None, columns: int = 4) -> plt.Figure:
    """One panel per column of ``table`` (a measure against step), each with the smoothed L_mask on
    a second axis, the drop as a dashed line and the measure's onset (if given) as a dot."""
    rows = -(-len(table.columns) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.9 * columns, 2.7 * rows), layout="constrained",
                             squeeze=False)
    for ax, measure in zip(axes.flat, table.columns):
        ax.plot(table.index, table[measure], color="black", lw=1.2)
        start = (onsets or {}).get(measure)
        if start is not None and not pd.isna(start):
            ax.plot([start], [table.loc[start, measure]], "o", color="tab:green", ms=6)
        ax.set_title(measure, fontsize=10)
        ax.tick_params(labelsize=8)
        twin = l_mask_twin(ax, metrics, drop)
        twin.set_ylabel("")
        twin.tick_params(labelsize=7, colors=LOSS_COLORS["L_mask"])
    for ax in axes.flat[len(table.columns):]:
        ax.set_visible(False)
    return fig


def curves_together(curves: dict[str, pd.DataFrame], column: str = "L", level: float | None = None,
                    window: int = 101, ax: plt.Axes | None = None, styles: dict | None = None) -> plt.Axes:
    """Smoothed ``column`` of several metrics tables against step on one log axis (the paper's
    Fig. 8), one labelled curve each; ``level`` draws the copying plateau; ``styles`` maps a name
    to extra line keywords."""
    ax = ax or plt.subplots(figsize=(7, 4))[1]
    for name, metrics in curves.items():
        ax.plot(smooth(metrics, column, window), label=name, **(styles or {}).get(name, {}))
    if level is not None:
        ax.axhline(level, color="gray", ls=":", lw=1, label=f"copying plateau ({level:.3g})")
    ax.set(yscale="log", xlabel="training step", ylabel=f"{LOSS_LABELS.get(column, column)}, smoothed")
    ax.legend(fontsize=8)
    return ax


def variant_curves(runs: dict[tuple[str, int], pd.DataFrame], labels: dict[str, str], steps: int,
                   level: float | None = None) -> plt.Figure:
    """One panel per axis of ``labels`` (axis -> curve label prefix): the smoothed L_mask of every
    variant run (``runs``: (axis, value) -> its metrics table) over its first ``steps`` steps."""
    fig, axes = plt.subplots(1, len(labels), figsize=(6.5 * len(labels), 4.2), layout="constrained", squeeze=False)
    for ax, (axis, label) in zip(axes[0], labels.items()):
        curves = {f"{label} {value}": metrics[metrics.step <= steps]
                  for (a, value), metrics in runs.items() if a == axis}
        curves_together(curves, "L_mask", level=level, ax=ax)
        ax.set_title(f"{axis}: loss at missing entries")
    return fig


def ood_panels(tables: dict[str, pd.DataFrame], trained: dict[str, int],
               columns=("L_mask / E[X²]", "nuclear_norm")) -> plt.Figure:
    """The paper's Fig. 19: one column of panels per varied quantity (``tables``: axis -> a
    ``shifted_losses`` table), one row per measure in ``columns``; a line per method, the trained
    value dashed, and (for the relative loss) the level of answering 0 dotted."""
    fig, axes = plt.subplots(len(columns), len(tables), figsize=(4.3 * len(tables), 3.1 * len(columns)),
                             layout="constrained", squeeze=False)
    for j, (axis, table) in enumerate(tables.items()):
        for i, column in enumerate(columns):
            ax = axes[i, j]
            for method, rows in table[column].groupby(level="method", sort=False):
                values = rows.droplevel("method")
                color = "black" if method == "BERT" else None
                ax.plot(values.index, values.to_numpy(), "o-", label=method, color=color)
            ax.axvline(trained[axis], color="gray", ls="--", lw=1)
            if column.startswith("L_mask /"):
                ax.axhline(1, color="gray", ls=":", lw=1)
            ax.set(xlabel=axis, ylabel=column if j == 0 else None)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[0, j].set_title(f"varying the {axis}")
    axes[0, 0].legend(fontsize=8)
    return fig


def gpt_curves(metrics: pd.DataFrame, onset: int | None = None, window: int = 25) -> plt.Figure:
    """The GPT's losses (left) and accuracies at observed and missing entries (right) against step
    (App. G, Fig. 11): greedy decoding at the evaluated steps, teacher forcing faint behind."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    for column, label, color in (("L", "$L$: every next token", "black"),
                                 ("L_full", "$L_{full}$: the full-matrix half", "tab:purple")):
        left.plot(smooth(metrics, column, window), color=color, label=label)
    left.set(yscale="log", xlabel="training step", ylabel="cross-entropy (smoothed)")
    evals = metrics.dropna(subset=["eval_acc_obs"])
    for where, color in (("obs", "tab:blue"), ("mask", "tab:red")):
        right.plot(smooth(metrics, f"acc_{where}", window), color=color, alpha=0.3, lw=1)
        right.plot(evals.step, evals[f"eval_acc_{where}"], "o-", ms=3, color=color,
                   label=f"{'observed' if where == 'obs' else 'missing'} entries (greedy decoding)")
    right.set(xlabel="training step", ylabel="token accuracy", ylim=(-0.02, 1.02))
    for ax in (left, right):
        if onset is not None:
            ax.axvline(onset, color="gray", ls="--", lw=1, label=f"copying (step {onset})")
        ax.legend(fontsize=8)
    return fig
