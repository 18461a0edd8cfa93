"""Training one component at a time (NeurIPS §3.3, Fig. 8): the runs, and whether and when each
leaves its plateau. The component groups and how a run starts from a trained one are a recipe
change of training (``matcomp.models.recipe``)."""

from __future__ import annotations

import pandas as pd

from matcomp.config import RunConfig
from matcomp.drop import leave_step, smooth


def component_config(cfg: RunConfig, component: str, init_from: str, steps: int) -> RunConfig:
    """``cfg`` with only ``component`` trained (from its initialisation) and the rest from run ``init_from``;
    the config itself rejects an unknown component, naming ``train.component``."""
    return cfg.override({"train.component": component, "train.init_from": init_from, "train.steps": steps})


def plateau_table(curves: dict[str, pd.DataFrame], level: float, min_plateau: int = 500,
                  near: float = 0.9) -> pd.DataFrame:
    """For each metrics table: whether L_mask sits on the copying plateau ``level`` (smoothed, at least
    ``near`` × ``level``) for ``min_plateau`` steps or more, the step it leaves it, the step it is below
    half of it, and its final smoothed value. Rows: the keys of ``curves``."""
    rows = {}
    for name, metrics in curves.items():
        leaves = leave_step(metrics, level, near)
        half = leave_step(metrics, level, 0.5)
        end = int(metrics["step"].iloc[-1])
        rows[name] = {"plateau": "yes" if (leaves or end) >= min_plateau else "no",
                      "leaves the plateau": leaves, "below half": half,
                      "final L_mask": float(smooth(metrics).dropna().iloc[-1])}
    table = pd.DataFrame.from_dict(rows, orient="index")
    return table.astype({"leaves the plateau": "Int64", "below half": "Int64"})
