"""A trained model on inputs it was not trained on (NeurIPS App. J): other factor
distributions, and other ranks, numbers of rows and numbers of columns, beside nuclear-norm
minimisation on the same matrices.

A variant is a ``DataConfig``; every variant is sampled from the same analysis generator seed, so
two tables made with one seed see the same draws where the shapes agree.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from matcomp.analysis.baselines import (
    BERT,
    NN,
    bert_completion,
    completion_metrics,
    with_observed_entries,
)
from matcomp.analysis.solvers import nuclear_norm_min
from matcomp.config import DataConfig, RunConfig
from matcomp.data import matrix_count, sample_batch, second_moment
from matcomp.drop import detect_drop, final_losses
from matcomp.models.bert import MatrixBert
from matcomp.paper import OOD_SHIFTS, RANK_PANEL_RANK
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator

AXES = {"rank": "rank", "rows": "n_rows", "columns": "n_cols"}  # what Fig. 19 varies -> DataConfig field


def axis_variants(data: DataConfig, axis: str, values) -> dict[int, DataConfig]:
    """``data`` with its rank, number of rows or number of columns (``axis``) set to each of ``values``."""
    if axis not in AXES:
        raise ValueError(f"axis must be one of {sorted(AXES)}; got {axis!r}")
    field = AXES[axis]
    return {int(v): dataclasses.replace(data, **{field: int(v)}) for v in values}  # type: ignore[arg-type]


def distribution_variants(data: DataConfig, shifts: dict[str, dict] | None = None) -> dict[str, DataConfig]:
    """``data`` itself ("trained") and ``data`` with each shift's fields (default: App. J.2's two)."""
    return {"trained": data} | {name: dataclasses.replace(data, **fields)
                                for name, fields in (shifts or OOD_SHIFTS).items()}


def shifted_losses(model: MatrixBert, variants: dict, samples: int = 256, seed: int = 0,
                   baseline: bool = True, workers: int = 1) -> pd.DataFrame:
    """Pooled L_obs, L_mask, L and the mean nuclear norm of the model's completion (and, with
    ``baseline``, of nuclear-norm minimisation's) on ``samples`` matrices of each variant, with E[X²]
    and L_mask / E[X²] (the loss of answering 0, so 1 means no better than that). Rows: (variant,
    method); matrices without an observed entry are left out for both methods."""
    for data in variants.values():
        samples = matrix_count(data, samples, "shifted_losses: samples")
    _check_positions(model, variants)
    frames = {}
    for key, data in variants.items():
        batch = sample_batch(data, samples, analysis_generator(seed, "shifted_losses: seed"))
        keep, _ = with_observed_entries(batch)
        values, observed = batch.values[keep], batch.observed[keep]
        completions = {BERT: bert_completion(model, batch)[keep]}
        if baseline:
            completions[NN] = nuclear_norm_min(values, observed, workers=workers)
        table = completion_metrics(completions, values, observed)
        table["E[X²]"] = second_moment(data)
        table["L_mask / E[X²]"] = table["L_mask"] / table["E[X²]"]
        frames[key] = table
    return pd.concat(frames, names=["variant", "method"])




def axis_derivation(run: Run, step: int, data: DataConfig, axis: str, values, samples: int, seed: int = 0,
                    workers: int = 1) -> Derivation:
    """``shifted_losses`` of checkpoint ``step`` of ``run`` (with nuclear-norm minimisation) on ``data`` with
    its ``axis`` set to each of ``values``, as a stored derivation (``matcomp.runs.derived``), one table
    "losses"; ``workers`` changes only the speed, so it is not in the key."""
    params = {"data": dataclasses.asdict(data), "axis": axis, "values": [int(v) for v in values],
              "samples": int(samples), "seed": int(seed)}

    def compute() -> dict[str, pd.DataFrame]:
        variants = axis_variants(data, axis, values)
        return {"losses": shifted_losses(run.bert(step), variants, samples, seed, workers=workers)}

    return Derivation(f"ood_{axis}", compute, [(run, step)], params)


def panel_derivations(run: Run, step: int, rank_run: Run, rank_step: int, data: DataConfig, axes: dict,
                      samples: int, seed: int = 0, workers: int = 1) -> dict[str, Derivation]:
    """Fig. 19's panels as stored derivations (``axis_derivation``), one per axis of ``axes`` (axis ->
    values, ``default_axes``): the rank panel on checkpoint ``rank_step`` of ``rank_run``, the others on
    ``step`` of ``run``; every variant is ``data`` with one field changed."""
    read = {"rank": (rank_run, rank_step), "rows": (run, step), "columns": (run, step)}
    return {axis: axis_derivation(*read[axis], data, axis, values, samples, seed, workers)
            for axis, values in axes.items()}


def panel_tables(run: Run, step: int, rank_run: Run, rank_step: int, data: DataConfig, axes: dict,
                 samples: int, seed: int = 0, workers: int = 1) -> dict[str, pd.DataFrame]:
    """``panel_derivations``' tables (axis -> a ``shifted_losses`` table): shipped, stored, or computed
    and stored."""
    derivations = panel_derivations(run, step, rank_run, rank_step, data, axes, samples, seed, workers)
    return {axis: load_or_compute(derivation)["losses"] for axis, derivation in derivations.items()}


def _check_positions(model: MatrixBert, variants: dict) -> None:
    """Every variant must fit the model's position table."""
    limit = model.bert.config.max_position_embeddings
    for key, data in variants.items():
        if data.n_rows * data.n_cols > limit:
            raise ValueError(f"variant {key!r}: {data.n_rows}x{data.n_cols} needs {data.n_rows * data.n_cols} "
                             f"positions; the model has {limit}")


MAX_SIDE = 64  # rows or columns a panel reaches at most: each variant is a nuclear-norm solve per sampled matrix


def default_axes(data: DataConfig, reach: int = 2) -> dict[str, list[int]]:
    """Fig. 19's three sweeps around the trained shape: rank 1..min(m, n); rows and columns from
    ``reach`` below to ``reach`` above the trained count (at least 1). A ``reach`` past ``MAX_SIDE`` rows or columns
    is refused by name rather than cut short in silence."""
    widest = max(data.n_rows, data.n_cols) + reach
    if widest > MAX_SIDE:
        raise ValueError(f"reach = {reach:,} asks for {widest:,} rows or columns; the panels stop at {MAX_SIDE} "
                         f"(matcomp.analysis.ood.MAX_SIDE): give reach <= {MAX_SIDE - max(data.n_rows, data.n_cols)}")

    def around(v: int) -> list[int]:
        return list(range(max(1, v - reach), v + reach + 1))

    return {"rank": list(range(1, min(data.n_rows, data.n_cols) + 1)), "rows": around(data.n_rows),
            "columns": around(data.n_cols)}


def gaussian_config(cfg: RunConfig, steps: int, after_drop: int = 0) -> RunConfig:
    """``cfg`` trained on N(0, 1) factors instead (App. J.1), clipped to the tokens' range, for
    ``steps`` steps, or until ``after_drop`` steps past its drop (``train.stop_after_drop``)."""
    return cfg.override({"data.distribution": "gaussian", "data.scale": 1.0, "data.clamp": True, "train.steps": steps,
                         "train.stop_after_drop": after_drop})


def rank_panel_config(cfg: RunConfig, steps: int, after_drop: int = 0) -> RunConfig | None:
    """The run whose model Fig. 19's rank panel reads: None when ``cfg`` itself is trained on rank 2
    or more, else ``cfg`` on rank-2 matrices (for ``steps`` steps, or until ``after_drop`` past its
    drop), so that the panel tests the paper's claim rather than extrapolating from rank 1."""
    if cfg.data.rank >= RANK_PANEL_RANK:
        return None
    return cfg.override({"data.rank": RANK_PANEL_RANK, "train.steps": steps, "train.stop_after_drop": after_drop})


def rank_panel(own: Run, own_post: int, rank_run: Run | None) -> tuple[Run, int, str]:
    """The run and checkpoint whose model Fig. 19's rank panel reads, with the panel's title: the
    rank-2 run's last checkpoint if it has dropped; else (no such run, or one still on its plateau)
    the chapter's own post-shift model, titled as an extrapolation from the rank it was trained on."""
    if rank_run is None:
        return own, own_post, f"varying the rank (model trained on rank {own.config.data.rank})"
    drop = rank_run.drop
    if drop.dropped:
        return rank_run, rank_run.last_step, f"varying the rank (model trained on rank {rank_run.config.data.rank})"
    return own, own_post, (f"varying the rank: extrapolation from rank {own.config.data.rank}\n"
                           f"(the rank-{rank_run.config.data.rank} run has no drop by step {rank_run.last_step:,})")


def training_table(runs: dict[tuple[str, int], Run], steps: int) -> pd.DataFrame:
    """One row per run (``runs``: (factors, seed) -> run): its id, E[X²] of its factors, its plateau,
    drop step, last step and final losses within its first ``steps`` steps, and the final
    L_mask / E[X²] (1 means no better than answering 0), so that runs on different distributions
    compare."""
    rows = {}
    for key, run in runs.items():
        metrics = run.metrics[run.metrics.step <= steps]
        drop, final, moment = detect_drop(metrics), final_losses(metrics), second_moment(run.config.data)
        rows[key] = {"run": run.config.run_id, "E[X²]": moment, "plateau": drop.plateau, "drop step": drop.half_step,
                     "last step": int(metrics.step.iloc[-1]), "final L": final.L, "final L_mask": final.L_mask,
                     "final L_mask / E[X²]": final.L_mask / moment}
    table = pd.DataFrame.from_dict(rows, orient="index").astype({"drop step": "Int64"})
    table.index = pd.MultiIndex.from_tuples(table.index, names=["factors", "seed"])
    return table


def relative_curves(runs: dict[str, Run], steps: int) -> dict[str, pd.DataFrame]:
    """Each run's metrics over its first ``steps`` steps with L_mask divided by E[X²] of its own factors
    (1 = answering 0 at every missing entry), so that runs on different distributions share one axis."""
    return {name: run.metrics[run.metrics.step <= steps].assign(L_mask=lambda m, r=run: m.L_mask / second_moment(
        r.config.data)) for name, run in runs.items()}
