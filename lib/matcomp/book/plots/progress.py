"""The progress chapter's figures: measures against step beside the loss, and the leads and alarms over seeds. Each
function draws on a given (or new) axis and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from matcomp.book.plots.curves import LOSS_COLORS, l_mask_twin
from matcomp.drop import Drop


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
