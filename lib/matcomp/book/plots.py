"""Figures shared by the chapters. Each function draws on a given (or new) axis and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FormatStrFormatter, MaxNLocator, NullLocator

from matcomp.analysis.evaluation import TRUTH
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


# p_mask sweep (the paper's Fig. 3): a style per method, matched by a key contained in the method's name
SWEEP_STYLES = {"BERT": dict(color="black", lw=2.2, marker="o", ms=4),
                "nuclear norm min": dict(color="tab:red", marker="s", ms=4),
                "regularised": dict(color="tab:orange", marker="^", ms=4),
                "soft-impute": dict(color="tab:green", ls="--", marker="v", ms=4),
                "ALS": dict(color="tab:blue", ls="-.", marker="D", ms=3.5),
                TRUTH: dict(color="gray", ls="--", lw=1)}


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


def variant_curves(runs: dict[tuple[str, int, int], pd.DataFrame], labels: dict[str, str], steps: int,
                   level: float | None = None) -> plt.Figure:
    """One panel per axis of ``labels`` (axis -> curve label prefix): the smoothed L_mask of every
    variant run (``runs``: (axis, value, seed) -> its metrics table) over its first ``steps`` steps, one
    colour per value (its seeds share it, the first labelled)."""
    fig, axes = plt.subplots(1, len(labels), figsize=(6.5 * len(labels), 4.2), layout="constrained", squeeze=False)
    for ax, (axis, label) in zip(axes[0], labels.items()):
        colours: dict[int, str] = {}  # value -> its colour; a value's first curve carries the label
        for (a, value, _), metrics in runs.items():
            if a != axis:
                continue
            first = value not in colours
            colour = colours.setdefault(value, f"C{len(colours)}")
            ax.plot(smooth(metrics[metrics.step <= steps]), color=colour, lw=1.2,
                    label=f"{label} {value}" if first else None)
        if level is not None:
            ax.axhline(level, color="gray", ls=":", lw=1, label=f"copying plateau ({level:.3g})")
        ax.set(yscale="log", xlabel="training step", ylabel=f"{LOSS_LABELS['L_mask']}, smoothed")
        ax.legend(fontsize=8)
        ax.set_title(f"{axis}: loss at missing entries")
    return fig


def ood_panels(tables: dict[str, pd.DataFrame], trained: dict[str, int],
               columns=("L_mask / E[X²]", "nuclear_norm"), titles: dict[str, str] | None = None) -> plt.Figure:
    """The paper's Fig. 19: one column of panels per varied quantity (``tables``: axis -> a
    ``shifted_losses`` table), one row per measure in ``columns``; a line per method, the trained
    value dashed, and (for the relative loss) the level of answering 0 dotted. ``titles`` replaces an
    axis's default title ("varying the <axis>")."""
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
        axes[0, j].set_title((titles or {}).get(axis, f"varying the {axis}"), fontsize=10)
    axes[0, 0].legend(fontsize=8)
    return fig


def gpt_curves(metrics: pd.DataFrame, onset: int | None = None, window: int = 25) -> plt.Figure:
    """The GPT's losses (left) and accuracies at observed and missing entries (right) against step
    (App. G, Fig. 11): greedy decoding at the evaluated steps, teacher forcing faint behind. Steps
    on a log axis, so that a copy learnt in a few hundred steps and a slow rise over tens of
    thousands both show."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    for column, label, color in (("L", "$L$: every next token", "black"),
                                 ("L_full", "$L_{full}$: the full-matrix half", "tab:purple")):
        left.plot(smooth(metrics, column, window), color=color, label=label)
    left.set(yscale="log", xlabel="training step", ylabel="cross-entropy (smoothed)")
    evals = metrics.dropna(subset=["eval_acc_obs"])
    for where, color in (("obs", "tab:blue"), ("mask", "tab:red")):
        right.plot(smooth(metrics, f"acc_{where}", window), color=color, alpha=0.3, lw=1)
        right.plot(evals.step, evals[f"eval_acc_{where}"], "o-", ms=2, lw=0.8, color=color,
                   label=f"{'observed' if where == 'obs' else 'missing'} entries (greedy decoding)")
    right.set(xlabel="training step", ylabel="token accuracy", ylim=(-0.02, 1.02))
    for ax in (left, right):
        ax.set_xscale("log")
        if onset is not None:
            ax.axvline(onset, color="gray", ls="--", lw=1, label=f"copying (step {onset})")
        ax.legend(fontsize=8)
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


def against_step(table: pd.DataFrame, metrics: pd.DataFrame, drop: Drop | None = None, ylabel: str = "",
                 labels: dict[str, str] | None = None, loc: str = "best") -> plt.Axes:
    """Each column of ``table`` (a measure, indexed by training step) as a line with dots, labelled by
    ``labels`` (default: the column), beside the smoothed L_mask on a second axis (``l_mask_twin``),
    so that a measure reads against the drop; returns the measure's axis."""
    ax = plt.subplots(figsize=(8, 3.5))[1]
    for column in table.columns:
        ax.plot(table.index, table[column], marker=".", label=(labels or {}).get(column, column))
    ax.set(xlabel="training step", ylabel=ylabel)
    l_mask_twin(ax, metrics, drop)
    ax.legend(fontsize=8, loc=loc)  # type: ignore[call-overload]  # matplotlib's stubs list loc's values
    return ax


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


def position_panels(layout: np.ndarray, norms, rows, cols, n_cols: int) -> plt.Figure:
    """The position embeddings (the paper's Fig. 7c-d): a 2-D layout of them (t-SNE) coloured by
    column and by row, each point labelled by its position, and their norm against the position."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), layout="constrained")
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


def seed_panels(curves: dict[int, dict[str, pd.DataFrame]], levels: dict[int, float], styles: dict | None = None,
                marks: dict[str, int] | None = None, column: str = "L_mask", window: int = 101,
                columns: int | None = None) -> plt.Figure:
    """One panel per seed (``curves``: seed -> {name: metrics}; ``columns`` to a row, default all),
    each the ``curves_together`` of its runs (smoothed over ``window`` rows) with the seed's copying
    plateau (``levels``) dotted, and a dotted vertical line at each step of ``marks`` (name -> step,
    e.g. where an attention bias ends) in that run's colour."""
    columns = columns or len(curves)
    rows = -(-len(curves) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.8 * rows), layout="constrained", squeeze=False)
    for ax in axes.flat[len(curves):]:
        ax.set_visible(False)
    for ax, (seed, runs) in zip(axes.flat, curves.items()):
        curves_together(runs, column, level=levels[seed], window=window, ax=ax, styles=styles)
        ax.xaxis.set_major_locator(MaxNLocator(5))
        for name, step in (marks or {}).items():
            ax.axvline(step, ls=":", color=(styles or {}).get(name, {}).get("color"))
        ax.set_title(f"seed {seed}")
    return fig


def family_titles(table: pd.DataFrame) -> list[list[str]]:
    """Titles "(layer,head) families" for ``attention_grid``, from a ``classify_heads`` table indexed by
    (layer, head)."""
    layers, heads = (table.index.get_level_values(level).unique() for level in (0, 1))
    return [[f"({layer},{head}) {table.loc[(layer, head), 'families']}" for head in heads] for layer in layers]


def drop_step_strip(by_seed: pd.DataFrame, budget: int, ax: plt.Axes | None = None,
                    groups: list[str] | None = None) -> plt.Axes:
    """The drop step of every seed (a table with a "drop step" column, indexed by seed, or by ``groups``
    levels then seed) as one dot per seed on a step axis, one line per group, with the mean ± sd of
    the seeds that drop; a seed that does not drop within ``budget`` steps is a hollow marker at the
    budget (censored: it drops later or never)."""
    parts = list(by_seed.groupby(level=groups, sort=False)) if groups else [("", by_seed)]
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * len(parts)), layout="constrained")
    shown: set[str] = set()

    def once(label: str) -> str | None:  # each kind of marker is labelled where it first appears
        first = label not in shown
        shown.add(label)
        return label if first else None

    for y, (name, part) in enumerate(parts):
        steps = part["drop step"].set_axis(part.index.get_level_values(-1))  # indexed by seed
        dropped, censored = steps.dropna().astype(float), steps[steps.isna()]
        if len(dropped):
            ax.plot(dropped, [-y] * len(dropped), "o", color="tab:blue",
                    label=once("drop step (L_mask below half its plateau)"))
        for seed, step in dropped.items():
            ax.annotate(str(seed), (step, -y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
        if len(censored):
            ax.plot([budget] * len(censored), [-y] * len(censored), "o", mfc="none", color="tab:red",
                    label=once(f"no drop within {budget:,} steps"))
            ax.annotate(f"×{len(censored)}", (budget, -y), textcoords="offset points", xytext=(8, -3), fontsize=7)
        if len(dropped) > 1:
            ax.errorbar([dropped.mean()], [-y - 0.3], xerr=[dropped.std(ddof=1)], fmt="s", color="black", capsize=4,
                        ms=4, label=once("mean ± sd of those that drop"))
    labels = [" ".join(map(str, name)) if isinstance(name, tuple) else str(name) for name, _ in parts]
    ax.set(ylim=(-len(parts) + 0.2, 0.8), yticks=[-y for y in range(len(parts))], yticklabels=labels,
           xlim=(0, budget * 1.07), xlabel="training step")
    if not groups:
        ax.set_yticks([])
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax


def lead_strip(by_seed: pd.DataFrame, measures: list[str], resolution: int | None = None) -> plt.Axes:
    """Each measure's lead over the loss's own onset (a ``leads_over_seeds`` table: rows seed, window)
    as one dot per seed, one row per measure and one colour per smoothing window; right of 0 the
    measure moves first. ``resolution`` (the checkpoint spacing) is shaded around 0: a lead inside it
    is one checkpoint or less."""
    dropped = by_seed.dropna(subset=["drop step"])
    windows = sorted(dropped.index.get_level_values("window").unique())
    _, ax = plt.subplots(figsize=(9, 0.9 + 0.55 * len(measures)), layout="constrained")
    colors = plt.cm.viridis(np.linspace(0, 0.85, len(windows)))
    for k, (window, color) in enumerate(zip(windows, colors)):
        part = dropped.xs(window, level="window")
        offset = 0.3 * (k - (len(windows) - 1) / 2) / max(len(windows) - 1, 1)
        for y, measure in enumerate(measures):
            leads = part[measure].dropna().astype(float)
            ax.plot(leads, [-y + offset] * len(leads), "o", color=color, ms=4, alpha=0.8,
                    label=f"{int(window)} checkpoint{'s' if window > 1 else ''}" if y == 0 else None)
    if resolution:
        ax.axvspan(-resolution, resolution, color="0.9", zorder=0, label="± one checkpoint")
    ax.axvline(0, color="tab:red", lw=1)
    ax.set(yticks=[-y for y in range(len(measures))], yticklabels=measures,
           xlabel="lead over the loss's onset (steps; > 0: the measure moves first)")
    ax.legend(title="smoothing", fontsize=8, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)
    return ax


def alarm_strip(groups: dict[str, pd.DataFrame], window: int) -> plt.Axes:
    """Steps from each alarm to the drop (``matcomp.analysis.alarm.score`` tables, one per group of runs:
    fitted, held out, other sizes), one row per signal, one colour per group; inside the shaded
    ``window`` an alarm is a hit, right of it a false alarm (too early), left of 0 a miss (too late).
    Runs without an alarm or without a drop have no dot."""
    signals = list(dict.fromkeys(s for table in groups.values() for s in table.index.get_level_values("signal")))
    _, ax = plt.subplots(figsize=(9, 1.2 + 0.6 * len(signals)), layout="constrained")
    colors = plt.cm.tab10(np.arange(len(groups)))
    for k, ((label, table), color) in enumerate(zip(groups.items(), colors)):
        offset = 0.25 * (k - (len(groups) - 1) / 2) / max(len(groups) - 1, 1)
        for y, name in enumerate(signals):
            part = table.xs(name, level="signal").dropna(subset=["alarm step", "drop step"])
            ahead = (part["drop step"] - part["alarm step"]).astype(float)
            ax.plot(ahead, [-y + offset] * len(ahead), "o", color=color, ms=5, alpha=0.8,
                    label=label if y == 0 else None)
    ax.axvspan(0, window, color="0.9", zorder=0, label=f"hit: the drop within {window:,} steps")
    ax.axvline(0, color="tab:red", lw=1)
    ax.set(yticks=[-y for y in range(len(signals))], yticklabels=signals,
           xlabel="steps from the alarm to the drop (> window: too early; < 0: after the drop)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax
