"""Figures shared by the chapters. Each function draws on a given (or new) axis and returns it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

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
