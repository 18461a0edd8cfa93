"""Training curves: losses against step, over seeds, variants and arms, and drop-step strips. Each function draws on a
given (or new) axis and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import FormatStrFormatter, MaxNLocator

from matcomp.drop import SMOOTHING, Drop, centred_mean

LOSS_COLORS = {"L": "black", "L_obs": "tab:blue", "L_mask": "tab:red"}


LOSS_LABELS = {"L": "$L$ (all entries)", "L_obs": "$L_{obs}$ (observed)", "L_mask": "$L_{mask}$ (missing)"}


def loss_curves(metrics: pd.DataFrame, drop: Drop | None = None, plateau: float | None = None,
                window: int = SMOOTHING, ax: plt.Axes | None = None) -> plt.Axes:
    """L, L_obs and L_mask against step on a log scale (the paper's Fig. 2), each smoothed over
    ``window`` steps with the raw L_mask faint behind; ``drop`` marks the drop step and
    ``plateau`` draws the level a model predicting 0 at missing entries would reach."""
    ax = ax or plt.subplots(figsize=(7, 4))[1]
    ax.plot(metrics["step"], metrics["L_mask"], color=LOSS_COLORS["L_mask"], alpha=0.15, lw=0.5)
    for column, color in LOSS_COLORS.items():
        ax.plot(centred_mean(metrics, column, window), color=color, label=LOSS_LABELS[column])
    if plateau is not None:
        ax.axhline(plateau, color="gray", ls=":", label=f"predict 0 when missing ({plateau:.3g})")
    if drop is not None and drop.half_step is not None:
        ax.axvline(drop.half_step, color="gray", ls="--", lw=1, label=f"drop (step {drop.half_step})")
    ax.set(yscale="log", xlabel="training step", ylabel="MSE (smoothed)")
    ax.legend(fontsize=8)
    return ax


def loss_curve_panels(runs: dict[str, tuple[pd.DataFrame, Drop | None]], plateau: float | None = None,
                      title: str = "", window: int = SMOOTHING) -> plt.Figure:
    """``loss_curves`` of several runs side by side (``runs``: panel title -> its metrics and drop), on shared
    axes, so that their plateaus and drop steps read against each other."""
    if not runs:
        raise ValueError("runs must hold at least one run's metrics")
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4), sharex=True, sharey=True, squeeze=False,
                             layout="constrained")
    for ax, (name, (metrics, drop)) in zip(axes[0], runs.items()):
        loss_curves(metrics, drop=drop, plateau=plateau, window=window, ax=ax)
        ax.set_title(name, fontsize=9)
    if title:
        fig.suptitle(title)
    return fig


def mask_value_curve(metrics: pd.DataFrame, drop: Drop | None = None, window: int = SMOOTHING,
                     ax: plt.Axes | None = None) -> plt.Axes:
    """Mean |prediction| at missing entries against step: ~0 while the model copies."""
    ax = ax or plt.subplots(figsize=(7, 2.5))[1]
    ax.plot(centred_mean(metrics, "mask_value", window), color="tab:purple")
    if drop is not None and drop.half_step is not None:
        ax.axvline(drop.half_step, color="gray", ls="--", lw=1)
    ax.set(xlabel="training step", ylabel=r"mean $|\hat X_{ij}|$, missing")
    return ax


def l_mask_twin(ax: plt.Axes, metrics: pd.DataFrame, drop: Drop | None = None, window: int = SMOOTHING) -> plt.Axes:
    """Smoothed L_mask on a second y-axis of ``ax`` (and the drop step as a dashed line), to read a
    measure plotted against step beside the loss; returns the second axis."""
    twin = ax.twinx()
    twin.plot(centred_mean(metrics, "L_mask", window), color=LOSS_COLORS["L_mask"], alpha=0.6)
    twin.set_ylabel("$L_{mask}$ (smoothed)", color=LOSS_COLORS["L_mask"])
    if drop is not None and drop.half_step is not None:
        ax.axvline(drop.half_step, color="gray", ls="--", lw=1)
    return twin


def curves_together(curves: dict[str, pd.DataFrame], column: str = "L", level: float | None = None,
                    window: int = SMOOTHING, ax: plt.Axes | None = None, styles: dict | None = None) -> plt.Axes:
    """Smoothed ``column`` of several metrics tables against step on one log axis (the paper's
    Fig. 8), one labelled curve each; ``level`` draws the copying plateau; ``styles`` maps a name
    to extra line keywords."""
    ax = ax or plt.subplots(figsize=(7, 4))[1]
    for name, metrics in curves.items():
        ax.plot(centred_mean(metrics, column, window), label=name, **(styles or {}).get(name, {}))
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
            ax.plot(centred_mean(metrics[metrics.step <= steps]), color=colour, lw=1.2,
                    label=f"{label} {value}" if first else None)
        if level is not None:
            ax.axhline(level, color="gray", ls=":", lw=1, label=f"copying plateau ({level:.3g})")
        ax.set(yscale="log", xlabel="training step", ylabel=f"{LOSS_LABELS['L_mask']}, smoothed")
        ax.legend(fontsize=8)
        ax.set_title(f"{axis}: loss at missing entries")
    return fig


def gpt_curves(metrics: pd.DataFrame, onset: int | None = None, window: int = 25) -> plt.Figure:
    """The GPT's losses (left) and accuracies at observed and missing entries (right) against step
    (App. G, Fig. 11): greedy decoding at the evaluated steps, teacher forcing faint behind. Steps
    on a log axis, so that a copy learnt in a few hundred steps and a slow rise over tens of
    thousands both show."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    for column, label, color in (("L", "$L$: every next token", "black"),
                                 ("L_full", "$L_{full}$: the full-matrix half", "tab:purple")):
        left.plot(centred_mean(metrics, column, window), color=color, label=label)
    left.set(yscale="log", xlabel="training step", ylabel="cross-entropy (smoothed)")
    evals = metrics.dropna(subset=["eval_acc_obs"])
    for where, color in (("obs", "tab:blue"), ("mask", "tab:red")):
        right.plot(centred_mean(metrics, f"acc_{where}", window), color=color, alpha=0.3, lw=1)
        right.plot(evals.step, evals[f"eval_acc_{where}"], "o-", ms=2, lw=0.8, color=color,
                   label=f"{'observed' if where == 'obs' else 'missing'} entries (greedy decoding)")
    right.set(xlabel="training step", ylabel="token accuracy", ylim=(-0.02, 1.02))
    for ax in (left, right):
        ax.set_xscale("log")
        if onset is not None:
            ax.axvline(onset, color="gray", ls="--", lw=1, label=f"copying (step {onset})")
        ax.legend(fontsize=8)
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


def silhouette_paths(by_seed: pd.DataFrame) -> plt.Axes:
    """The position embeddings' silhouette by column (solid) and by row (dashed) of each seed
    (``matcomp.analysis.embeddings.silhouettes_by_seed``) against the steps from its drop, one colour a
    seed, with the drop as a dotted vertical line."""
    ax = plt.subplots(figsize=(8, 3.5))[1]
    for (seed, table), colour in zip(by_seed.groupby(level="seed"), plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        x = table["from drop"]
        ax.plot(x, table["by column"], marker=".", color=colour, label=f"seed {seed}, by column")
        ax.plot(x, table["by row"], marker=".", ls="--", color=colour, label=f"seed {seed}, by row")
    ax.axvline(0, ls=":", color="grey")
    ax.set(xlabel="steps from the drop (L_mask at half its plateau)", ylabel="silhouette")
    ax.legend(fontsize=8, ncols=2)
    return ax


def seed_panels(curves: dict[int, dict[str, pd.DataFrame]], levels: dict[int, float], styles: dict | None = None,
                marks: dict[str, int] | None = None, column: str = "L_mask", window: int = SMOOTHING,
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


def relative_strip(rows: dict[str, pd.Series], ax: plt.Axes | None = None) -> plt.Axes:
    """Drop steps as multiples of a reference, a row of dots per group (``rows``: label -> the group's ratios), on a
    log axis around 1: how far apart draws of one configuration fall, whatever its scale (seeds beside their
    median, one seed's nudged runs beside its own run). Each row's range is written at its right."""
    if not rows:
        raise ValueError("relative_strip needs at least one row of drop steps; got none")
    ax = ax or plt.subplots(figsize=(8, 0.9 + 0.55 * len(rows)), layout="constrained")[1]
    for y, (label, ratios) in enumerate(rows.items()):
        ratios = ratios.dropna().astype(float)
        ax.plot(ratios, [-y] * len(ratios), "o", ms=5, alpha=0.7, color=f"C{y}")
        ax.annotate(f"{ratios.min():.3f}–{ratios.max():.3f}", (ratios.max(), -y), textcoords="offset points",
                    xytext=(8, -3), fontsize=8)
    ax.axvline(1, color="gray", ls=":", lw=1)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(FormatStrFormatter("%g"))
    low, high = ax.get_xlim()
    ax.set_xlim(low, high * (high / low) ** 0.2)  # room for the ranges written at the right
    ax.set(yticks=[-y for y in range(len(rows))], yticklabels=list(rows), ylim=(-len(rows) + 0.5, 0.5),
           xlabel="drop step ÷ the row's reference")
    return ax


def plateau_panels(readings: dict[str, pd.DataFrame]) -> plt.Figure:
    """Three panels over training for each run of ``readings`` (label -> ``analysis.progress.against_uniform``
    table): the best row head over uniform attention, L_mask over its plateau, and the collapse of the
    missing positions' last states. A copying model sits near 1 in all three; a run leaving its plateau
    moves off 1 in each, the attention and the collapse first."""
    columns = {"best row head / uniform": "best row head / uniform attention",
               "L_mask / E[X²]": "L_mask / E[X²] (256 matrices)",
               "collapse (missing)": "collapse of the missing positions\n(mean |cos| of last states)"}
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), layout="constrained")
    for label, table in readings.items():
        for ax, column in zip(axes, columns):
            ax.plot(table.index, table[column], marker=".", label=label)
    for ax, what in zip(axes, columns.values()):
        ax.axhline(1, color="grey", linestyle=":", linewidth=1)
        ax.set(xlabel="training step", ylabel=what)
    axes[1].set_yscale("log")  # the untrained model's loss, several times the plateau, beside a drop's
    # below the panels: the runs' long labels, inside one panel, would cover its curves and its y label
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return fig
