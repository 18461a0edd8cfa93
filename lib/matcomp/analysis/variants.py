"""Runs that change one property of the chapter's run (App. H and I):
width, depth, rank or matrix size, over several seeds, and the tables of their drops.

Every variant changes one property and trains up to ``steps`` steps (with ``after_drop``, it stops
that many steps after its drop: the drop step is the same, the cost is not); the chapter's own
value of the property is the chapter's run itself, so the shipped runs serve. A point of the table
is one value of one property over its seeds: its verdict against the chapter's own value comes from
the spread of the drop steps, never from one run.
"""

from __future__ import annotations

import pandas as pd
import torch

from matcomp import checks
from matcomp.analysis.seeds import censored, seed_configs
from matcomp.config import RunConfig
from matcomp.data import random_mask
from matcomp.drop import detect_drop, final_losses, leave_step
from matcomp.limits import fits_memory
from matcomp.models.factory import build_model, count_parameters
from matcomp.runs.run import Run
from matcomp.seeding import mask_generator

FIELDS = {"width": ("model.hidden",), "depth": ("model.layers",), "rank": ("data.rank",),
          "size": ("data.n_rows", "data.n_cols")}


def own_value(cfg: RunConfig, axis: str) -> int:
    part, name = FIELDS[axis][0].split(".")
    return getattr(getattr(cfg, part), name)


def variant_overrides(cfg: RunConfig, axes: dict[str, list[int]], steps: int,
                      after_drop: int = 0) -> dict[tuple[str, int], dict]:
    """``{(axis, value): overrides}`` for every value of every axis (``FIELDS``): {} for ``cfg``'s
    own value, else the changed field(s), ``train.steps`` and, if ``after_drop`` > 0, the stop
    ``after_drop`` steps past the drop (``train.stop_after_drop``). A bad value raises ``ValueError``
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
            stop = {"train.stop_after_drop": after_drop} if after_drop else {}
            variants[axis, value] = {} if value == own_value(cfg, axis) else {**changes, "train.steps": steps, **stop}
    return variants


def variant_configs(cfg: RunConfig, variants: dict[tuple[str, int], dict],
                    seeds=None) -> dict[tuple[str, int, int], RunConfig]:
    """The config of every variant (``variant_overrides``'s output) at every seed of ``seeds`` (default:
    ``cfg``'s own): ``{(axis, value, seed): config}``, whose runs ``variant_table`` reads."""
    seeds = [cfg.train.seed] if seeds is None else list(seeds)
    return {(axis, value, seed): seed_cfg for (axis, value), change in variants.items()
            for seed, seed_cfg in seed_configs(cfg.override(change), seeds).items()}


READ_AFTER_DROP = 2000  # steps after its drop at which a run's L_mask is compared with the others'


def variant_table(runs: dict[tuple[str, int, int], Run], steps: int, after_drop: int = READ_AFTER_DROP) -> pd.DataFrame:
    """Per run (axis, value, seed): parameters, plateau, the step it leaves the plateau (below 0.9 × its
    level), drop steps of L_mask within the first ``steps`` steps, the step it stopped at, and L_mask
    ``after_drop`` steps after its drop (the mean over the 200 steps ending there; empty without a drop),
    a loss read at the same distance from the drop in every run, whether it stopped there or went on, and
    its final L_mask (the same mean at its last step)."""
    rows = []
    for (axis, value, seed), run in runs.items():
        metrics = run.metrics[run.metrics.step <= steps]
        drop = detect_drop(metrics)
        after = float("nan")
        if drop.half_step is not None and drop.half_step + after_drop <= metrics.step.max():
            after = final_losses(metrics[metrics.step <= drop.half_step + after_drop])["L_mask"]
        rows.append({"axis": axis, "value": value, "seed": seed, "run": run.config.run_id,
                     "parameters": count_parameters(build_model(run.config.model, seed=run.config.train.seed)),
                     "plateau": drop.plateau, "leaves plateau": leave_step(metrics, drop.plateau),
                     "drop step": drop.half_step, "10x step": drop.tenfold_step,
                     "last step": int(metrics.step.max()), "L_mask after drop": after,
                     "final L_mask": final_losses(metrics)["L_mask"]})
    steps_columns = {"leaves plateau": "Int64", "drop step": "Int64", "10x step": "Int64"}
    return pd.DataFrame(rows).set_index(["axis", "value", "seed"]).astype(steps_columns)


def width_loss_ratios(table: pd.DataFrame) -> pd.Series:
    """Per seed of a ``variant_table``'s width axis, the L_mask its widest run completes to over its narrowest's
    (read after the drop, or at the run's end where it has none): below 1 where width helps, as App. H finds
    (Fig. 13: d = 64 too small, 128 sub-optimal, wider better).

    >>> index = pd.MultiIndex.from_product([["width"], [32, 128], [0, 1]], names=["axis", "value", "seed"])
    >>> t = pd.DataFrame({"L_mask after drop": [float("nan"), 0.02, 0.01, 0.03],
    ...                   "final L_mask": [0.11, 0.02, 0.01, 0.03]}, index=index)
    >>> width_loss_ratios(t).round(2).to_dict()  # seed 0's narrowest run has no drop: its plateau loss is read
    {0: 0.09, 1: 1.5}
    """
    widths = table.xs("width", level="axis")
    loss = widths["L_mask after drop"].fillna(widths["final L_mask"]).unstack("value")
    return loss[loss.columns.max()] / loss[loss.columns.min()]


def variant_summary(table: pd.DataFrame, own: dict[str, int], budget: int) -> pd.DataFrame:
    """Per point (axis, value) of a ``variant_table``: seeds, how many drop within ``budget`` steps, the
    mean, sd, least and most of their drop steps, the mean L_mask after the drop, and the verdict
    against the point of the chapter's own value (``own``: axis -> value): "earlier" or "later" when
    every seed of the one drops before every seed of the other (a seed without a drop counts as after
    the budget), else "within the spread"; no verdict where either point has a single seed."""
    rows = {}
    for (axis, value), group in table.groupby(level=["axis", "value"], sort=False):
        steps = group["drop step"].astype("Float64")
        dropped = steps.dropna().astype(float)
        rows[axis, value] = {"seeds": len(group), "dropped": len(dropped), "mean drop": dropped.mean(),
                             "sd": dropped.std(ddof=1) if len(dropped) > 1 else float("nan"),
                             "first": dropped.min(), "last": dropped.max(),
                             "L_mask after drop": group["L_mask after drop"].mean()}
    summary = pd.DataFrame.from_dict(rows, orient="index").rename_axis(["axis", "value"])
    late = censored(table["drop step"], budget)  # a seed without a drop: after the budget
    points = {key: group.to_numpy() for key, group in late.groupby(level=["axis", "value"])}
    verdicts = []
    for axis, value in summary.index:
        if value == own[axis]:
            verdicts.append("the chapter's run")
            continue
        mine, base = points[axis, value], points[axis, own[axis]]
        if min(len(mine), len(base)) < 2:
            verdicts.append("one seed: no verdict")
            continue
        verdicts.append("earlier" if mine.max() < base.min() else "later" if mine.min() > base.max()
                        else "within the spread")
    summary["verdict"] = verdicts
    steps = ["mean drop", "sd", "first", "last"]  # in whole steps, so tables print 12,330 rather than 1.233e+04
    summary[steps] = summary[steps].round().astype("Int64")
    return summary.astype({"seeds": "Int64", "dropped": "Int64"})


MIXTURE_EVAL_EVERY = 25  # steps between the per-size test losses: the sizes' drops lie 100-200 steps apart
MIXTURE_EVAL_BATCH = 256  # test matrices of each size at each evaluation, as the authors' App. I script


def mixture_overrides(sizes: list[int]) -> dict:
    """The overrides that train on a mixture of square ``sizes`` of rank 1 (App. I, Fig. 16), with
    a test batch of each size dense enough in steps and matrices to order drops a few hundred steps
    apart."""
    n = max(sizes)
    return {"data.sizes": list(sizes), "data.rank": 1, "data.n_rows": n, "data.n_cols": n,
            "train.eval_every": MIXTURE_EVAL_EVERY, "train.eval_batch": MIXTURE_EVAL_BATCH}


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


def mixture_orders(runs: dict[int, Run], sizes: list[int], window: int = 5) -> pd.DataFrame:
    """The ``learning_order`` of the mixture run of every seed (``runs``: seed -> run), indexed by
    (seed, size) in each seed's order of learning."""
    return pd.concat({seed: learning_order(run.metrics, sizes, window) for seed, run in runs.items()},
                     names=["seed", "size"])


def order_resolution(cfg: RunConfig, window: int = 5) -> int:
    """The steps below which two sizes' drops in one mixture run are a tie: the span of the
    ``window`` evaluations (``train.eval_every`` apart) that smooth each size's test loss."""
    return window * cfg.train.eval_every


def undetermined(observed: torch.Tensor, rank: int = 1, seed: int = 0, chunk: int = 4096) -> torch.Tensor:
    """(N, m, n) bool: the missing entries of masks ``observed`` (N, m, n) that no rank-``rank`` completion
    can recover, whatever the matrix: a floor under what any model can complete.

    Read, for each mask, from the Jacobian of (U, V) -> U Vᵀ at a random (generic) point, U of m × r and
    V of n × r: a missing entry is determined by the observed ones (up to finitely many values) exactly
    when its gradient lies in the span of theirs; else the observed entries leave a direction along which
    it moves freely. At rank 1 this is the bipartite graph of rows and columns with an edge per observed
    entry: a missing entry is undetermined when its row and column lie in different components.

    >>> undetermined(torch.tensor([[[True, False], [False, True]], [[True, True], [True, False]]])).tolist()
    [[[False, True], [True, False]], [[False, False], [False, False]]]
    >>> undetermined(torch.tensor([[[True, True], [True, False]]]), rank=2).tolist()  # 3 entries, 4 degrees of freedom
    [[[False, False], [False, True]]]
    """
    N, m, n = observed.shape
    generator = mask_generator(seed)
    eye_m, eye_n = torch.eye(m, dtype=torch.float64), torch.eye(n, dtype=torch.float64)
    parts = []
    for seen in observed.split(chunk):
        k = len(seen)
        U = torch.randn(k, m, rank, generator=generator, dtype=torch.float64)
        V = torch.randn(k, n, rank, generator=generator, dtype=torch.float64)
        d_U = eye_m[None, :, None, :, None] * V[:, None, :, None, :]  # d X_ij / d U_a = [a = i] V_j
        d_V = eye_n[None, None, :, :, None] * U[:, :, None, None, :]  # d X_ij / d V_b = [b = j] U_i
        J = torch.cat([d_U.flatten(-2), d_V.flatten(-2)], -1).reshape(k, m * n, -1)
        _, s, Vh = torch.linalg.svd(J * seen.reshape(k, m * n, 1), full_matrices=False)
        span = Vh * (s > 1e-9 * s[:, :1])[..., None]  # the observed gradients' row space
        free = (J - J @ span.transpose(1, 2) @ span).norm(dim=-1) > 1e-6 * J.norm(dim=-1)
        parts.append(free.reshape(k, m, n) & ~seen)
    return torch.cat(parts)


MASK_BYTES_PER_ENTRY = 5  # a random mask's draw (float32) and the mask (bool), per entry
MASK_SAMPLES = 4000  # random masks a share of undetermined entries is read over: one draw for the text and the table


def undetermined_fraction(n_rows: int, n_cols: int, p_mask: float, rank: int = 1, samples: int = MASK_SAMPLES,
                          seed: int = 0) -> float:
    """The share of missing entries that are ``undetermined`` for a rank-``rank`` matrix, over ``samples``
    random masks of m × n at ``p_mask``: a floor under what any model can complete (the same masks, and so
    the same number, as ``identifiability``'s at its defaults)."""
    samples = checks.count(samples, "undetermined_fraction: samples")
    fits_memory(samples * n_rows * n_cols * MASK_BYTES_PER_ENTRY, "undetermined_fraction: samples", samples)
    observed = random_mask(samples, n_rows, n_cols, p_mask, mask_generator(seed, "undetermined_fraction: seed"))
    return (undetermined(observed, rank).sum() / (~observed).sum()).item()


def identifiability(tasks, p_mask: float, samples: int = MASK_SAMPLES) -> pd.DataFrame:
    """For each task (m, n, rank) of ``tasks``: the degrees of freedom of an m × n matrix of that rank,
    r(m + n − r), the entries a mask leaves on average, (1 − p_mask)·m·n, and, over ``samples`` random
    masks, the share of missing entries no completion can recover (``undetermined``) and of masks that
    fix the whole matrix. Counting entries is not enough: a row seen fewer than r times stays free however
    many entries the rest of the mask shows.

    >>> identifiability([(2, 2, 1), (2, 2, 2)], 0.0, samples=10).values.tolist()
    [[3.0, 4.0, 0.0, 1.0], [4.0, 4.0, 0.0, 1.0]]
    """
    rows = {}
    for m, n, r in tasks:
        observed = random_mask(samples, m, n, p_mask, mask_generator(0))
        free = undetermined(observed, r)
        missing = (~observed).sum().item()
        rows[f"{m}×{n} rank {r}"] = {
            "degrees of freedom": r * (m + n - r), "entries seen": (1 - p_mask) * m * n,
            "missing undetermined": free.sum().item() / missing if missing else 0.0,
            "masks fixing all": (~free.flatten(1).any(1)).double().mean().item()}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("task")
