"""Runs that change one property of the chapter's run (App. H and I):
width, depth, rank or matrix size, and the table of their drops.

Every variant changes one property and trains ``steps`` steps; the chapter's own value of the
property is the chapter's run itself (its first ``steps`` steps), so the shipped run serves.
"""

from __future__ import annotations

import pandas as pd
import torch

from matcomp.config import RunConfig
from matcomp.data import random_mask
from matcomp.drop import detect_drop, final_losses, leave_step
from matcomp.models.factory import build_model, count_parameters
from matcomp.runs.run import Run
from matcomp.runs.store import get_or_train

FIELDS = {"width": ("model.hidden",), "depth": ("model.layers",), "rank": ("data.rank",),
          "size": ("data.n_rows", "data.n_cols")}


def own_value(cfg: RunConfig, axis: str) -> int:
    part, name = FIELDS[axis][0].split(".")
    return getattr(getattr(cfg, part), name)


def variant_overrides(cfg: RunConfig, axes: dict[str, list[int]], steps: int) -> dict[tuple[str, int], dict]:
    """``{(axis, value): overrides}`` for every value of every axis (``FIELDS``): {} for ``cfg``'s
    own value, else the changed field(s) and ``train.steps``. A bad value raises ``ValueError``
    naming the field."""
    if not 1 <= steps <= cfg.train.steps:
        raise ValueError(f"steps must be in [1, train.steps = {cfg.train.steps}]; got {steps}")
    variants = {}
    for axis, values in axes.items():
        if axis not in FIELDS:
            raise ValueError(f"axis must be one of {sorted(FIELDS)}; got {axis!r}")
        for value in values:
            changes: dict[str, object] = {field: value for field in FIELDS[axis]}
            cfg.override(changes)  # a bad value fails here, naming the field
            variants[axis, value] = {} if value == own_value(cfg, axis) else {**changes, "train.steps": steps}
    return variants


def variant_runs(cfg: RunConfig, variants: dict[tuple[str, int], dict]) -> dict[tuple[str, int], Run]:
    """The run of every variant (``variant_overrides``'s output), from the store or trained."""
    return {key: get_or_train(cfg.override(change), progress=False)
            for key, change in variants.items()}


def variant_table(runs: dict[tuple[str, int], Run], steps: int) -> pd.DataFrame:
    """Per variant: parameters, plateau, the step it leaves the plateau (below 0.9 × its level), drop
    steps of L_mask, and the final losses, all within the first ``steps`` steps."""
    rows = []
    for (axis, value), run in runs.items():
        metrics = run.metrics[run.metrics.step <= steps]
        drop = detect_drop(metrics)
        final = final_losses(metrics)
        rows.append({"axis": axis, "value": value, "run": run.config.run_id,
                     "parameters": count_parameters(build_model(run.config.model, seed=run.config.train.seed)),
                     "plateau": drop.plateau, "leaves plateau": leave_step(metrics, drop.plateau),
                     "drop step": drop.half_step, "10x step": drop.tenfold_step,
                     "final L": final.L, "final L_mask": final.L_mask})
    steps_columns = {"leaves plateau": "Int64", "drop step": "Int64", "10x step": "Int64"}
    return pd.DataFrame(rows).set_index(["axis", "value"]).astype(steps_columns)


def mixture_overrides(sizes: list[int]) -> dict:
    """The overrides that train on a mixture of square ``sizes`` of rank 1 (App. I, Fig. 16)."""
    n = max(sizes)
    return {"data.sizes": list(sizes), "data.rank": 1, "data.n_rows": n, "data.n_cols": n}


def learning_order(metrics: pd.DataFrame, sizes: list[int], window: int = 5) -> pd.DataFrame:
    """Per size of a mixture: plateau, drop steps and final value of its eval L_mask (smoothed over
    ``window`` evaluations), sorted by drop step: the order in which the sizes are learned."""
    evals = metrics.dropna(subset=["eval_L_mask"])
    rows = []
    for n in sizes:
        table = pd.DataFrame({"step": evals.step, "L_mask": evals[f"eval_L_mask_n{n}"]})
        drop = detect_drop(table, window=window, skip=0, plateau_steps=max(3, len(table) // 20))
        rows.append({"size": f"{n}x{n}", "plateau": drop.plateau, "drop step": drop.half_step,
                     "10x step": drop.tenfold_step, "final L_mask": drop.final})
    table = pd.DataFrame(rows).astype({"drop step": "Int64", "10x step": "Int64"})
    return table.sort_values("drop step", na_position="last").set_index("size")


def undetermined(observed: torch.Tensor) -> torch.Tensor:
    """(N, m, n) bool: the missing entries of masks ``observed`` (N, m, n) that no rank-1 completion can
    recover, whatever the matrix: those whose row and column are not linked through observed entries
    (in the bipartite graph of rows and columns with an edge per observed entry, they lie in different
    components, so the observed entries fix nothing that relates them).

    >>> undetermined(torch.tensor([[[True, False], [False, True]], [[True, True], [True, False]]])).tolist()
    [[[False, True], [True, False]], [[False, False], [False, False]]]
    """
    N, m, n = observed.shape
    label = torch.arange(m + n).repeat(N, 1)  # rows 0..m-1, columns m..m+n-1: each its own component
    while True:  # spread the smallest label along observed entries until nothing changes
        linked = torch.minimum(label[:, :m, None], label[:, None, m:])
        linked = torch.where(observed, linked, torch.full_like(linked, m + n))
        new = torch.cat([torch.minimum(label[:, :m], linked.min(2).values),
                         torch.minimum(label[:, m:], linked.min(1).values)], 1)
        if torch.equal(new, label):
            break
        label = new
    return ~observed & (label[:, :m, None] != label[:, None, m:])


def undetermined_fraction(n_rows: int, n_cols: int, p_mask: float, samples: int = 20000, seed: int = 0) -> float:
    """The share of missing entries that are ``undetermined`` for a rank-1 matrix, over ``samples`` random
    masks of m × n at ``p_mask``: a floor under what any model can complete."""
    observed = random_mask(samples, n_rows, n_cols, p_mask, torch.Generator().manual_seed(seed))
    return (undetermined(observed).sum() / (~observed).sum()).item()
