"""Times the classical baselines of ``matcomp.analysis.baselines`` on the chapter's default sweep, and
reproduces the paper's regularised nuclear-norm table (NeurIPS App. B; its numbers are those of the workshop
version's App. D) beside its numbers.

    python benchmarks/baselines.py

Sweep: p_mask 0.10, 0.15, …, 0.60 (11 values) × 512 matrices, for 7×7 rank 2 (the paper's data) and
4×4 rank 1 (the ``cpu`` preset's), every method, λ = 1e-3 where a method takes one. Table: 256 7×7
rank-2 matrices at p_mask 0.3, one λ per row. All data come from one generator seeded with ``SEED``.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import replace

import clarabel
import cvxpy as cp
import numpy as np
import pandas as pd
import torch

from matcomp.analysis.baselines import (
    completion_metrics,
)
from matcomp.analysis.solvers import (
    SOLVER,
    SOLVER_OPTIONS,
    als_complete,
    nuclear_norm_min,
    nuclear_norm_regularised,
    soft_impute,
)
from matcomp.data import Batch, sample_batch
from matcomp.paper import LAMBDA_TABLE
from matcomp.presets import preset_config

SEED = 0
P_MASKS = np.round(np.arange(0.1, 0.64, 0.05), 2)  # the reference code's 11 values
SWEEP_MATRICES, TABLE_MATRICES = 512, 256
SWEEP_LAM = 1e-3  # the λ of the paper's table with the lowest L
SETTINGS = {"7x7 rank 2": preset_config("paper").data, "4x4 rank 1": preset_config("cpu").data}

def methods(rank: int) -> dict:
    return {
        "nuclear_norm_min": nuclear_norm_min,
        "nuclear_norm_regularised": lambda b: nuclear_norm_regularised(b, lam=SWEEP_LAM),
        "soft_impute": lambda b: soft_impute(b, lam=SWEEP_LAM),
        f"als_complete rank {rank}": lambda b: als_complete(b, rank=rank, lam=SWEEP_LAM),
    }


def sweep(batches: dict[float, Batch], rank: int) -> tuple[dict[str, float], pd.DataFrame]:
    """Seconds per method over the whole sweep, and L per (p_mask, method)."""
    seconds, losses = {}, {}
    for name, method in methods(rank).items():
        start = time.perf_counter()
        completions = {p: method(batch) for p, batch in batches.items()}
        seconds[name] = time.perf_counter() - start
        losses[name] = {p: completion_metrics({name: c}, batches[p]).loc[name, "L"] for p, c in completions.items()}
    return seconds, pd.DataFrame(losses).rename_axis("p_mask")


def pooled_standard_error(err: torch.Tensor, where: torch.Tensor) -> float:
    """Standard error of a mean of ``err`` pooled over ``where``, from its spread across matrices
    (a ratio estimator: matrices are the independent draws, not entries)."""
    where = where.expand_as(err).double()
    sums, counts = (err * where).sum((1, 2)), where.sum((1, 2))
    mean = sums.sum() / counts.sum()
    return ((sums - mean * counts).std() * len(sums) ** 0.5 / counts.sum()).item()


def lam_table(batch: Batch) -> pd.DataFrame:
    rows = []
    for lam, paper in LAMBDA_TABLE.items():
        completed = nuclear_norm_regularised(batch, lam=lam)
        ours = completion_metrics({"ours": completed}, batch).loc["ours"]
        err = (completed - batch.values.double()) ** 2  # (B, m, n)
        se = {"L_obs": batch.observed, "L_mask": ~batch.observed, "L": torch.ones_like(batch.observed)}
        row = {"lambda": lam}
        for key, theirs in zip(("L_obs", "L_mask", "L"), paper):
            row |= {f"{key} paper": theirs, f"{key} ours": ours[key], f"{key} ±se": pooled_standard_error(err, se[key]),
                    f"{key} rel diff": ours[key] / theirs - 1}
        rows.append(row)
    return pd.DataFrame(rows).set_index("lambda")


def main() -> None:
    torch.set_num_threads(1)  # 7×7 linear algebra gains nothing from threads; one core, as for the solver
    generator = torch.Generator().manual_seed(SEED)
    data = {name: {p: sample_batch(replace(cfg, p_mask=float(p)), SWEEP_MATRICES, generator) for p in P_MASKS}
            for name, cfg in SETTINGS.items()}
    table_batch = sample_batch(preset_config("paper").data, TABLE_MATRICES, generator)

    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f} at start; torch {torch.__version__} on 1 thread, cvxpy {cp.__version__}, "
          f"{SOLVER} {clarabel.__version__} {SOLVER_OPTIONS}; seed {SEED}")
    pd.set_option("display.width", 200)
    for name, cfg in SETTINGS.items():
        seconds, losses = sweep(data[name], cfg.rank)
        n = len(P_MASKS) * SWEEP_MATRICES
        print(f"\n{name}: {len(P_MASKS)} p_mask values × {SWEEP_MATRICES} matrices, λ = {SWEEP_LAM:g}")
        print(pd.DataFrame({"seconds": seconds, "ms per matrix": {k: 1e3 * v / n for k, v in seconds.items()}})
              .round(2).to_string())
        print(f"\npooled L:\n{losses.map(lambda v: f'{v:.3e}').to_string()}")
        print(f"load average now {os.getloadavg()[0]:.2f}")

    print(f"\nRegularised nuclear norm, {TABLE_MATRICES} 7x7 rank-2 matrices, p_mask 0.3, against the paper:")
    print(lam_table(table_batch).map(lambda v: f"{v:.4g}").T.to_string())


if __name__ == "__main__":
    main()
