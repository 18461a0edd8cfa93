"""Progress measures: quantities computed on every checkpoint that may move during the plateau,
before L_mask does (the training-dynamics chapter; cf. Gopalani & Hu 2025, "What Happens During
the Loss Plateau?").

``checkpoint_measures`` computes, on one fixed batch:

===========================  ==============================================================
``L_mask (batch)``           the loss at the missing entries of that batch, so that loss and
                             measures are read on the same matrices and smoothed alike
``row attention``            the largest same-row score of any head (``matcomp.analysis.heads``)
``column attention``         the largest same-column score of any head
``collapse``                 mean |cos| between last-layer hidden states of two positions of a
                             matrix (all pairs of distinct positions)
``collapse (missing)``       the same over pairs of missing positions
``prediction spread``        std of the predictions over the missing entries of a matrix
                             (matrices with ≥ 2 missing), averaged: 0 = one repeated output
``column clustering``        silhouette of the position embeddings grouped by column
``row clustering``           the same grouped by row
``‖attention‖`` … ``‖token‖``  L2 norm of each parameter group (``matcomp.models.recipe``)
===========================  ==============================================================

``onset`` says when a measure "starts to move", with one definition for all (see there), and
``lead_table`` turns it into steps before the drop and before the loss's own onset, on the table
smoothed over a few checkpoints (``trailing_mean``). The rule is retrospective: its reference window and
the size of the move are set by the drop step, known only once the drop has happened.
``progress_table`` reads a run's measures from those recorded with it when it was shipped (measured on
dense checkpoints that do not ship; ``tests/test_shipped.py`` recomputes the rows of every checkpoint that
does), else from a derived table (``matcomp.runs.derived``) keyed by the run's checkpoints, the
parameters and the source of the code that measures them.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from matcomp import checks
from matcomp.analysis.embeddings import cluster_score, position_groups
from matcomp.analysis.heads import cached_scores, uniform_row_column
from matcomp.analysis.seeds import seed_configs
from matcomp.config import RunConfig
from matcomp.data import Batch, matrix_count, sample_batch, second_moment
from matcomp.metrics import masked_mse
from matcomp.models.bert import MatrixBert
from matcomp.models.hooks import run_with_cache
from matcomp.models.recipe import COMPONENT_PATTERNS, component_names
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.runs.shipped import REFERENCE_ROOT
from matcomp.seeding import ANALYSIS_OFFSET, analysis_generator

L_MASK = "L_mask (batch)"

CHECKPOINTS = 400  # checkpoints over a progress run's steps (every 50 at the cpu preset), at least every 10 steps


def progress_configs(cfg: RunConfig, seeds, after_drop: int) -> dict[int, RunConfig]:
    """The progress chapter's runs: ``cfg`` at each of ``seeds`` (seed -> config), checkpointed densely
    so that an onset is resolved to a few dozen steps, and ended ``after_drop`` steps past the drop."""
    dense = cfg.override({"train.checkpoint_every": max(cfg.train.steps // CHECKPOINTS, 10),
                          "train.stop_after_drop": after_drop})
    return seed_configs(dense, seeds)


MEASURES = (L_MASK, "row attention", "column attention", "collapse", "collapse (missing)", "prediction spread",
            "column clustering", "row clustering", *(f"‖{group}‖" for group in COMPONENT_PATTERNS))


def _mean_abs_cos(hidden: torch.Tensor, keep: torch.Tensor) -> float:
    """Mean |cos| over pairs of distinct positions k, k' of a matrix with keep[k] and keep[k'];
    hidden (N, S, d), keep (N, S) bool."""
    unit = torch.nn.functional.normalize(hidden.double(), dim=-1)
    cos = (unit @ unit.transpose(1, 2)).abs()  # (N, S, S)
    pairs = keep[:, :, None] & keep[:, None, :] & ~torch.eye(keep.shape[1], dtype=torch.bool)
    if not pairs.any():
        return float("nan")
    return (cos * pairs).sum().item() / pairs.sum().item()


@torch.no_grad()
def checkpoint_measures(model: MatrixBert, batch: Batch) -> dict[str, float]:
    """Every measure of ``MEASURES`` for one model on ``batch`` (see the module's table)."""
    N, m, n = batch.values.shape
    pred, cache = run_with_cache(model, batch.ids, ["probs", "resid"])  # one forward pass for every measure
    scores = cached_scores(cache, batch.observed)
    pred, hidden = pred.float(), cache[f"resid.{model.cfg.layers}"].float()
    missing = ~batch.observed.reshape(N, m * n)
    several = missing.sum(1) >= 2
    spread = torch.stack([pred[i][missing[i]].std() for i in torch.nonzero(several).flatten()])
    positions = model.bert.embeddings.position_embeddings.weight[: m * n].detach()
    rows, cols = position_groups(m, n)
    out = {
        L_MASK: masked_mse(pred, batch.values, batch.observed)["L_mask"].item(),
        "row attention": float(scores["row"].max()),
        "column attention": float(scores["column"].max()),
        "collapse": _mean_abs_cos(hidden, torch.ones_like(missing)),
        "collapse (missing)": _mean_abs_cos(hidden, missing),
        "prediction spread": spread.mean().item() if len(spread) else float("nan"),
        "column clustering": cluster_score(positions, cols) if n > 1 and m > 1 else float("nan"),
        "row clustering": cluster_score(positions, rows) if n > 1 and m > 1 else float("nan"),
    }
    state = dict(model.named_parameters())
    for group in COMPONENT_PATTERNS:
        total = torch.zeros(())
        for name in component_names(model, group):  # summed in order, as the shipped measures were
            total = total + (state[name] ** 2).sum()
        out[f"‖{group}‖"] = total.sqrt().item()
    return out


def measures_over_training(run: Run, steps, batch: Batch) -> pd.DataFrame:
    """``checkpoint_measures`` at each of ``steps`` (all with a checkpoint), one row per step."""
    steps = list(steps)
    absent = [s for s in steps if s not in run.steps]
    if absent:
        raise ValueError(f"steps {absent} have no checkpoint; run.steps = {run.steps}")
    rows = [{"step": s, **checkpoint_measures(run.bert(s, attention="eager"), batch)} for s in steps]
    return pd.DataFrame(rows).set_index("step")


def recorded_path(run: Run, samples: int, seed: int) -> Path:
    """Where the measures recorded with a shipped run lie (``runs/reference/progress/``)."""
    return REFERENCE_ROOT / "progress" / f"{run.path.name}-n{samples}-s{seed}.csv"


def recorded_tables() -> dict[Path, tuple[Run, int, int]]:
    """Every table of measures recorded with a shipped run: its path -> the run, samples and seed it was measured
    with (what ``recorded_path`` names it by)."""
    tables = {}
    for path in sorted((REFERENCE_ROOT / "progress").glob("*.csv")):
        match = re.fullmatch(r"(.+)-n(\d+)-s(\d+)\.csv", path.name)
        if match is None:
            raise ValueError(f"{path} is not named as a recorded table is (<run>-n<samples>-s<seed>.csv)")
        tables[path] = (Run(REFERENCE_ROOT / match[1]), int(match[2]), int(match[3]))
    return tables


def progress_derivation(run: Run, samples: int = 256, seed: int = 0) -> Derivation:
    """The measures of every checkpoint of ``run`` as a derived table (``measures``), on ``samples`` matrices of
    the run's task drawn from ``analysis_generator(seed)``."""
    samples = matrix_count(run.config.data, samples, "progress_derivation: samples")
    seed = checks.seed(seed, "progress_derivation: seed", ANALYSIS_OFFSET)

    def compute() -> dict[str, pd.DataFrame]:
        batch = sample_batch(run.config.data, samples, analysis_generator(seed))
        return {"measures": measures_over_training(run, run.steps, batch)}

    return Derivation(f"progress-{run.path.name}-n{samples}-s{seed}", compute,
                      checkpoints=[(run, step) for step in run.steps], params={"samples": samples, "seed": seed})


def progress_table(run: Run, samples: int = 256, seed: int = 0) -> pd.DataFrame:
    """The measures of every checkpoint of ``run`` (one row per step): those recorded with the run when it was
    shipped, where they hold at least its checkpoints (they may hold more: the dense checkpoints they were
    measured on before the run was narrowed); else ``progress_derivation``'s, stored in the working store
    (never beside a shipped run: the book's build writes nothing into the repository)."""
    recorded = recorded_path(run, samples, seed)
    if recorded.exists():
        table = pd.read_csv(recorded, index_col="step")
        if set(run.steps) <= set(table.index) and list(table.columns) == list(MEASURES):
            return table
    return load_or_compute(progress_derivation(run, samples, seed))["measures"]


def heads_over_uniform(table: pd.DataFrame, n_rows: int, n_cols: int) -> pd.DataFrame:
    """The best row and column head of a ``progress_table`` over uniform attention's scores on
    n_rows × n_cols matrices (``heads.uniform_row_column``; 1 = uniform)."""
    row, column = uniform_row_column(n_rows, n_cols)
    return pd.DataFrame({"best row head / uniform": table["row attention"] / row,
                         "best column head / uniform": table["column attention"] / column})


def against_uniform(run: Run, table: pd.DataFrame) -> pd.DataFrame:
    """A ``progress_table`` of ``run`` read against what a copying model gives: its best heads over
    uniform attention (``heads_over_uniform``), L_mask over the plateau r/9 (1 = copying), and the
    collapse of the missing positions' last hidden states (mean |cos|; 1 = one state for all): the signs
    of a model leaving its plateau, or of one that has not."""
    d = run.config.data
    return heads_over_uniform(table, d.n_rows, d.n_cols).assign(
        **{"L_mask / E[X²]": table[L_MASK] / second_moment(d), "collapse (missing)": table["collapse (missing)"]})


def onset(values: pd.Series, drop_step: int, fraction: float = 0.1, noise: float = 3.0) -> int | None:
    """The step at which a measure starts to move towards its value at the drop, one definition for
    every measure:

    the reference level μ and noise σ are the mean and std of the measure over the checkpoints of
    the middle third of the plateau, [drop/3, 2·drop/3] (copying is learned by then, so early
    transients are left out); Δ = value at the drop − μ. The onset is the first checkpoint after
    that window from which, up to the drop, the measure stays beyond μ + ``fraction`` · Δ (in Δ's
    direction) and more than ``noise`` · σ from μ. None if it does not. So a lead is at most drop/3.

    >>> s = pd.Series([0.0, 0.02, 0.01, -0.01, 0.0, 0.01, 0.3, 0.6, 1.0], index=range(0, 4500, 500))
    >>> onset(s, drop_step=4000), onset(-s, drop_step=4000), onset(0 * s, drop_step=4000)
    (3000, 3000, None)
    """
    lo, hi = drop_step / 3, 2 * drop_step / 3
    ref = values[(values.index >= lo) & (values.index <= hi)].dropna()
    if len(ref) < 2:
        raise ValueError(f"the reference window [{lo:.0f}, {hi:.0f}] (middle third of the plateau) holds "
                         f"{len(ref)} checkpoints; at least 2 are needed")
    mu, sigma = ref.mean(), ref.std()
    before = values[(values.index > hi) & (values.index <= drop_step)].dropna()
    if before.empty:
        return None
    delta = before.iloc[-1] - mu
    moved = (np.sign(delta) * (before - mu) > max(fraction * abs(delta), noise * sigma)).to_numpy()
    stays = np.logical_and.accumulate(moved[::-1])[::-1]  # moved here and at every later checkpoint
    if delta == 0 or not stays[-1]:
        return None
    return int(before.index[np.argmax(stays)])


def trailing_mean(table: pd.DataFrame, window: int) -> pd.DataFrame:
    """Each column of ``table`` (one row per checkpoint) averaged over the last ``window`` checkpoints,
    the current one included: a trailing mean, so a smoothed value never uses a later checkpoint."""
    if window < 1:
        raise ValueError(f"window must be >= 1 checkpoint; got {window}")
    return table.rolling(window, min_periods=1).mean()


def lead_table(table: pd.DataFrame, drop_step: int, **kwargs) -> pd.DataFrame:
    """For each measure: its onset step, lead over the drop (drop step − onset) and, when ``table``
    holds ``L_MASK``, lead over the loss (the loss's onset − the measure's: > 0 when the measure
    moves first); empty where a measure does not move."""
    rows = {}
    for measure in table.columns:
        start = onset(table[measure], drop_step, **kwargs)
        rows[measure] = {"onset step": start, "lead (steps)": None if start is None else drop_step - start}
    out = pd.DataFrame.from_dict(rows, orient="index").rename_axis("measure").astype("Int64")
    if L_MASK in out.index:
        out["lead over the loss (steps)"] = out.loc[L_MASK, "onset step"] - out["onset step"]
    return out


def behaviour(measures) -> list[str]:
    """The measures of the model's behaviour: not the loss, not the weight norms (which grow from
    step 0 and so pass any rule early)."""
    return [m for m in measures if not m.startswith("‖") and m != L_MASK]


def run_leads(run: Run, samples: int = 256, seed: int = 0, window: int = 1) -> pd.DataFrame:
    """``lead_table`` of a run's measures (with the loss on the same batch) smoothed over ``window``
    checkpoints. Needs a drop."""
    drop_step = run.drop.half_step
    if drop_step is None:
        raise ValueError(f"run {run.path.name} shows no drop, so no measure can lead it")
    return lead_table(trailing_mean(progress_table(run, samples, seed), window), drop_step)


def leads_over_seeds(runs: dict[int, Run], windows=(1,), samples: int = 256) -> pd.DataFrame:
    """For each run of ``runs`` (seed -> run, e.g. of ``progress_configs``) and each smoothing window
    (rows seed, window): the drop step, the loss's onset, every behavioural measure's lead over the loss
    and the one that moved first (ties listed together; "none" if none moved). A seed without a drop
    has one row with only its seed (no window, no drop step)."""
    rows: list[dict[str, object]] = []
    for seed, run in runs.items():
        if not run.drop.dropped:
            rows.append({"seed": seed, "window": None, "drop step": None})
            continue
        for window in windows:
            leads = run_leads(run, samples, window=window)
            lead = leads.loc[behaviour(leads.index), "lead over the loss (steps)"]
            ahead = lead.dropna()
            first = ", ".join(ahead[ahead == ahead.max()].index) if len(ahead) else "none"
            rows.append({"seed": seed, "window": window, "drop step": run.drop.half_step,
                         "loss onset": leads.loc[L_MASK, "onset step"], **lead.to_dict(), "first to move": first})
    numbers = ["drop step", "loss onset", *behaviour(MEASURES)]
    table = pd.DataFrame(rows).set_index(["seed", "window"]).reindex(columns=[*numbers, "first to move"])
    return table.astype(dict.fromkeys(numbers, "Int64"))


def _dropped_leads(by_seed: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rows of a ``leads_over_seeds`` table whose seed drops, and its lead columns (the measures)."""
    measures = [c for c in by_seed.columns if c not in ("drop step", "loss onset", "first to move")]
    return by_seed.dropna(subset=["drop step"]), measures


def lead_summary(by_seed: pd.DataFrame, margin: int = 0) -> pd.DataFrame:
    """Per behavioural measure (rows) and smoothing window: over the seeds that drop, how many have the
    measure moving before the loss by more than ``margin`` steps (pass the checkpoint spacing: a lead of
    one checkpoint is within the onset's resolution), and its median lead over the loss (steps; a seed
    where it does not move counts as not ahead and is left out of the median)."""
    dropped, measures = _dropped_leads(by_seed)
    out = {}
    for window, part in dropped.groupby(level="window"):
        seeds = len(part)
        out[(int(window), "seeds ahead")] = {m: f"{int((part[m] > margin).sum())}/{seeds}" for m in measures}
        out[(int(window), "median lead")] = {m: part[m].astype(float).median() for m in measures}
    table = pd.DataFrame(out, index=measures)
    table.columns = pd.MultiIndex.from_tuples(list(out), names=["window (checkpoints)", ""])
    return table


def smoothing_sensitivity(by_seed: pd.DataFrame, margin: int = 0) -> pd.DataFrame:
    """Per behavioural measure of a ``leads_over_seeds`` table, over the seeds that drop: the largest
    change of its lead across the smoothing windows (steps) and on how many seeds whether it moves
    first (lead > ``margin``, as in ``lead_summary``) depends on the window (a seed where it does not
    move at some window counts)."""
    dropped, measures = _dropped_leads(by_seed)
    seeds = dropped.index.get_level_values("seed").unique()
    rows = {}
    for measure in measures:
        leads = dropped[measure].astype(float).unstack("window")  # seed x window
        ahead = leads.gt(margin)
        rows[measure] = {"largest change (steps)": (leads.max(axis=1) - leads.min(axis=1)).max(),
                         "seeds whose verdict changes": f"{int((ahead.any(axis=1) & ~ahead.all(axis=1)).sum())}"
                                                        f"/{len(seeds)}"}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("measure")
