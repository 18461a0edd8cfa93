"""Training one component at a time (NeurIPS §3.3, Fig. 8): the runs, and whether and when each
leaves its plateau. The component groups and how a run starts from a trained one are a recipe
change of training (``matcomp.models.recipe``)."""

from __future__ import annotations

import pandas as pd

from matcomp.config import RunConfig
from matcomp.drop import ON_PLATEAU, final_losses, leave_step


def component_config(cfg: RunConfig, component: str, init_from: str, steps: int, after_drop: int = 0) -> RunConfig:
    """``cfg`` with only ``component`` trained (from its initialisation) and the rest from run ``init_from``,
    for ``steps`` steps or until ``after_drop`` steps past its drop (``train.stop_after_drop``; 0: all
    ``steps``); the config itself rejects an unknown component, naming ``train.component``."""
    return cfg.override({"train.component": component, "train.init_from": init_from, "train.steps": steps,
                         "train.stop_after_drop": after_drop})


def plateau_table(curves: dict[str, pd.DataFrame], level: float, min_plateau: int = 500,
                  near: float = ON_PLATEAU) -> pd.DataFrame:
    """For each metrics table: whether L_mask sits on the copying plateau ``level`` (smoothed, at least
    ``near`` × ``level``) for ``min_plateau`` steps or more, the step it leaves it, the step it is below
    half of it, the steps between the two ("fall (steps)") and, where there is a plateau, whether that fall is
    "sudden" (shorter than the plateau before it) or "gradual" (a fall with no plateau before it is neither),
    and its final L_mask (``drop.final_losses``). Rows: the keys of ``curves``."""
    rows = {}
    for name, metrics in curves.items():
        leaves = leave_step(metrics, level, near)
        half = leave_step(metrics, level, 0.5)
        end = int(metrics["step"].iloc[-1])
        fall = half - leaves if half is not None and leaves is not None else None
        plateau = (leaves or end) >= min_plateau
        rows[name] = {"plateau": "yes" if plateau else "no",
                      "leaves the plateau": leaves, "below half": half, "fall (steps)": fall,
                      "fall": "no fall" if fall is None else "no plateau before it" if not plateau
                      else "sudden" if fall < (leaves or 0) else "gradual",
                      "final L_mask": float(final_losses(metrics)["L_mask"])}
    table = pd.DataFrame.from_dict(rows, orient="index")
    return table.astype({"leaves the plateau": "Int64", "below half": "Int64", "fall (steps)": "Int64"})


def fig8_checks(table: pd.DataFrame) -> dict[str, bool]:
    """The parts of the paper's reading of Fig. 8 (NeurIPS §4), each True or False on a ``plateau_table``
    with rows "token", "mlp", "attention" and "position": the token embeddings and the MLPs have no
    plateau; attention and positions have one and then drop, i.e. fall below half of it suddenly (in fewer
    steps than the plateau lasted; a table without the "fall" column is not read for it); the positions'
    plateau is the longest (they leave it last, or never within the budget while the others do)."""
    def plateau_then_drop(c: str) -> bool:
        sudden = table.loc[c, "fall"] == "sudden" if "fall" in table else True
        return table.loc[c, "plateau"] == "yes" and pd.notna(table.loc[c, "below half"]) and bool(sudden)

    leaves = table.loc[["attention", "mlp", "position", "token"], "leaves the plateau"]
    leaves = leaves.astype("Float64").fillna(float("inf")).astype(float)  # never left: after every step
    others = leaves.drop("position")
    longest = table.loc["position", "plateau"] == "yes" and bool((leaves["position"] > others).all())
    return {"token embeddings: no plateau": table.loc["token", "plateau"] == "no",
            "MLPs: no plateau": table.loc["mlp", "plateau"] == "no",
            "attention: a plateau, then a sudden drop": plateau_then_drop("attention"),
            "position embeddings: a plateau, then a sudden drop": plateau_then_drop("position"),
            "position embeddings: the longest plateau": longest}
