"""Our model beside the baselines: losses against p_mask (Fig. 3) and out-of-distribution panels. Each function draws
on a given (or new) axis and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import FormatStrFormatter, MaxNLocator, NullLocator

from matcomp.analysis.baselines import BERT, NN
from matcomp.analysis.evaluation import TRUTH

# p_mask sweep (the paper's Fig. 3): a style per method, matched by a key contained in the method's name
SWEEP_STYLES = {BERT: dict(color="black", lw=2.2, marker="o", ms=4),
                NN: dict(color="tab:red", marker="s", ms=4),
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
                color = "black" if method == BERT else None
                ax.plot(values.index, values.to_numpy(), "o-", label=method, color=color)
            ax.axvline(trained[axis], color="gray", ls="--", lw=1)
            if column.startswith("L_mask /"):
                ax.axhline(1, color="gray", ls=":", lw=1)
            ax.set(xlabel=axis, ylabel=column if j == 0 else None)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[0, j].set_title((titles or {}).get(axis, f"varying the {axis}"), fontsize=10)
    axes[0, 0].legend(fontsize=8)
    return fig
