"""The BERT against the classical completion methods of ``matcomp.analysis.solvers`` (NeurIPS §3.2,
Fig. 3, App. B; WS App. D): what the chapter comparing them computes and stores.

``completion_metrics`` scores completions as the paper does: pooled L, L_obs, L_mask against the rounded
X, and the mean nuclear norm. ``complete_all`` runs every method (and a BERT) on one batch,
``pooled_with_se`` and ``paired_se`` give the standard errors of the pooled losses and of differences
between methods, ``lambda_table`` is App. B's table and ``regularised_objective`` the regularised
problem's objective; ``completion_sweep`` and the λ tables are stored derivations (``matcomp.runs.derived``).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import replace

import pandas as pd
import torch

from matcomp import checks
from matcomp.analysis.evaluation import TRUTH, predict
from matcomp.analysis.solvers import (
    Data,
    als_complete,
    as_tensors,
    nuclear_norm_min,
    nuclear_norm_regularised,
    soft_impute,
)
from matcomp.config import DataConfig
from matcomp.data import Batch, data_config, matrix_count, sample_batch
from matcomp.metrics import LOSSES, PAPER_ORDER, masked_mse, pooled_loss, squared_errors
from matcomp.models.bert import MatrixBert
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.seeding import ANALYSIS_OFFSET, analysis_generator

BERT, NN = "BERT", "nuclear norm min"  # method labels of every table and plot
ALS = "rank-{} ALS (oracle)"  # ``.format(rank)``


# --- scoring -------------------------------------------------------------------------------------------------

def completion_metrics(completions: dict[str, torch.Tensor], data: Data,
                       observed: torch.Tensor | None = None) -> pd.DataFrame:
    """One row per method (the dict's keys): pooled L, L_obs, L_mask against X (for a ``Batch``, the
    rounded X the paper scores), and nuclear_norm, the mean over matrices of ‖completion‖_*."""
    values, observed = as_tensors(data, observed)
    rows = {}
    for name, completed in completions.items():
        if completed.shape != values.shape:
            raise ValueError(f"completion {name!r} has shape {tuple(completed.shape)}; "
                             f"expected {tuple(values.shape)}")
        completed = completed.to(device=values.device, dtype=torch.float64)
        losses = masked_mse(completed, values, observed)
        rows[name] = {key: losses[key].item() for key in LOSSES}
        rows[name]["nuclear_norm"] = torch.linalg.matrix_norm(completed, ord="nuc").mean().item()
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("method")


# --- every method on one batch, and the chapter's tables -----------------------------------------------------



def bert_completion(model: MatrixBert, batch: Batch) -> torch.Tensor:
    """(B, m, n) float64: the BERT's raw output; observed positions are its own predictions, not pasted back."""
    return predict(model, batch.ids).reshape(batch.values.shape).double()


def with_observed_entries(batch: Batch) -> tuple[torch.Tensor, int]:
    """(B,) bool: the matrices with at least one observed entry, and how many have none."""
    keep = batch.observed.flatten(1).any(1)
    return keep, int((~keep).sum())


def complete_all(batch: Batch, lam: float, rank: int, model: MatrixBert | None = None, tol: float = 1e-6,
                 workers: int = 1) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor], int]:
    """Every method's completion of ``batch``: (values, observed, completions, dropped).

    Matrices with no observed entry have no convex completion and are dropped for every method;
    ``dropped`` counts them, and ``values``, ``observed`` (k, m, n) are the rest. ``completions`` maps
    each method to its (k, m, n) float64 completion: "BERT" (``model``'s raw output, if a model is
    given; run on the whole batch, then subset), "nuclear norm min", "regularised, λ=…",
    "soft-impute, λ=…" and "rank-r ALS (oracle)" (all at ``lam``; the iterative ones stop at a
    relative change ``tol``; the convex ones use ``workers`` processes). ALS warnings about matrices
    stopping at ``max_iter`` are silenced: on the chapter's batches they concern a handful of matrices
    and leave pooled L unchanged.
    """
    keep, dropped = with_observed_entries(batch)
    if not keep.any():
        raise ValueError("no matrix of the batch has an observed entry")
    values, observed = batch.values[keep], batch.observed[keep]
    out = {BERT: bert_completion(model, batch)[keep]} if model is not None else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out |= {
            NN: nuclear_norm_min(values, observed, workers=workers),
            REGULARISED.format(lam): nuclear_norm_regularised(values, observed, lam=lam, workers=workers),
            SOFT_IMPUTE.format(lam): soft_impute(values, observed, lam=lam, tol=tol),
            ALS.format(rank): als_complete(values, observed, rank=rank, lam=lam, tol=tol),
        }
    return values, observed, out, dropped


def pooled_with_se(completed: torch.Tensor, values: torch.Tensor, observed: torch.Tensor) -> dict[str, float]:
    """Pooled L_obs, L_mask and L of ``completed`` against ``values`` (B, m, n), each with its standard
    error over the matrices (key "<name> se").

    A pooled loss is a ratio Σ_k s_k / Σ_k c_k of per-matrix sums of squared errors s_k over counts
    c_k of entries; its standard error is the ratio estimate's (``metrics.pooled_loss``).

    >>> v = torch.zeros(2, 1, 2); obs = torch.tensor([[[True, False]], [[True, True]]])
    >>> {k: round(x, 3) for k, x in pooled_with_se(v + torch.tensor([1.0, 2.0]), v, obs).items()}
    {'L_obs': 2.0, 'L_obs se': 0.667, 'L_mask': 4.0, 'L_mask se': 0.0, 'L': 2.5, 'L se': 0.0}
    """
    out = {}
    for name, where in zip(PAPER_ORDER, [observed, ~observed, None]):
        out[name], out[name + " se"] = pooled_loss(completed, values, where)
    return out


def paired_se(a: torch.Tensor, b: torch.Tensor, values: torch.Tensor) -> float:
    """Standard error of mean(MSE_a − MSE_b) over the matrices, paired (both complete the same ``values``
    (B, m, n)): the sample standard deviation of the per-matrix differences over √B."""
    (sums_a, count), (sums_b, _) = squared_errors(a, values), squared_errors(b, values)
    return (sums_a / count - sums_b / count).std().item() / len(values) ** 0.5


def regularised_objective(completed: torch.Tensor, values: torch.Tensor, observed: torch.Tensor,
                          lam: float) -> torch.Tensor:
    """(B,) the regularised problem's objective (1/|Ω|) Σ_Ω (U − X)² + λ‖U‖_* of each matrix."""
    sums, count = squared_errors(completed, values, observed)
    return sums / count + lam * torch.linalg.matrix_norm(completed.double(), ord="nuc")


def lambda_table(batch: Batch, lams, model: MatrixBert | None = None, label: str = BERT,
                 workers: int = 1) -> pd.DataFrame:
    """App. B's table: one row "λ = …" per value of ``lams`` (the regularised problem solved on ``batch``),
    after a first row ``label`` for ``model``'s raw output if a model is given; columns L_obs, L_mask, L
    and their standard errors (``pooled_with_se``). Matrices with no observed entry are dropped."""
    keep, _ = with_observed_entries(batch)
    values, observed = batch.values[keep], batch.observed[keep]
    table = {}
    if model is not None:
        table[label] = pooled_with_se(bert_completion(model, batch)[keep], values, observed)
    for value in lams:
        completed = nuclear_norm_regularised(values, observed, lam=value, workers=workers)
        table[f"λ = {value:g}"] = pooled_with_se(completed, values, observed)
    return pd.DataFrame(table).T


# --- the chapter's sweep over p_mask and its tables ------------------------------------------------------------

REGULARISED = "regularised, λ={:g}"  # method labels (``.format(lam)``) of the regularised problem and soft-impute
SOFT_IMPUTE = "soft-impute, λ={:g}"


SWEEP_COLUMNS = ["method", *LOSSES, "nuclear_norm", "p_mask", "± s.e. of L − L_BERT"]


def completion_sweep(data: DataConfig, p_masks, samples: int, lam: float, model: MatrixBert | None = None,
                     seed: int = 0, workers: int = 1) -> dict[str, pd.DataFrame]:
    """The paper's Fig. 3: every method of ``complete_all`` (and ``model``) on ``samples`` matrices of
    ``data`` at each of ``p_masks``, all from ``analysis_generator(seed)`` (the same matrices, nested
    masks). Returns two tables:

    - "sweep", tidy, one row per method and p_mask (the true matrices as method ``TRUTH``): L, L_obs,
      L_mask, nuclear_norm, p_mask and the paired standard error of L − L_BERT (``paired_se``; NaN
      without a model);
    - "by_p_mask", one row per p_mask: the matrices dropped (nothing observed) and how the regularised
      problem's two solvers agree (``solver_agreement`` of Clarabel's and soft-impute's solutions).
    """
    data = data_config(data, "completion_sweep: data")
    samples = matrix_count(data, samples, "completion_sweep: samples")
    rows, by_p_mask = [], {}
    for p in p_masks:
        batch = sample_batch(replace(data, p_mask=p), samples, analysis_generator(seed, "completion_sweep: seed"))
        values, observed, done, dropped = complete_all(batch, lam, data.rank, model=model, workers=workers)
        done[TRUTH] = values.double()
        table = completion_metrics(done, values, observed).assign(p_mask=p)
        table["± s.e. of L − L_BERT"] = [paired_se(done[m], done[BERT], values) if model is not None
                                         else float("nan") for m in table.index]
        rows.append(table)
        agree = solver_agreement(done[REGULARISED.format(lam)], done[SOFT_IMPUTE.format(lam)], values, observed, lam)
        by_p_mask[p] = {"dropped": dropped, **agree}
    sweep = pd.concat(rows).reset_index()[SWEEP_COLUMNS].rename_axis("row")
    return {"sweep": sweep, "by_p_mask": pd.DataFrame.from_dict(by_p_mask, orient="index").rename_axis("p_mask")}


def sweep_derivation(run: Run, step: int, p_masks, samples: int, lam: float, seed: int = 0,
                     workers: int = 1) -> Derivation:
    """``completion_sweep`` of checkpoint ``step`` of ``run`` on its own task, as a stored derivation
    (``matcomp.runs.derived``): keyed by the checkpoint's SHA-256, the parameters, the source of the code it
    runs and the libraries' versions (``workers`` changes only the speed, so it is not in the key)."""
    data = run.config.data
    params = {"data": dataclasses.asdict(data), "p_masks": [float(p) for p in p_masks], "samples": int(samples),
              "lam": float(lam), "seed": int(seed)}

    def compute() -> dict[str, pd.DataFrame]:
        return completion_sweep(data, p_masks, samples, lam, model=run.bert(step), seed=seed, workers=workers)

    return Derivation("completion_sweep", compute, [(run, step)], params)


def stored_sweep(run: Run, step: int, p_masks, samples: int, lam: float, seed: int = 0,
                 workers: int = 1) -> dict[str, pd.DataFrame]:
    """``completion_sweep``'s tables for checkpoint ``step`` of ``run``: shipped, stored, or computed and
    stored (``sweep_derivation``)."""
    return load_or_compute(sweep_derivation(run, step, p_masks, samples, lam, seed, workers))


def headline_table(sweep: pd.DataFrame, at: float) -> pd.DataFrame:
    """The sweep at one p_mask (``at``), one row per method: L with its ratio to the BERT's and the paired
    standard error of L − L_BERT, L_obs, L_mask, the nuclear norm and its ratio to the BERT's (the
    ratios and s.e. blank in the rows of the BERT and of the truth)."""
    headline = sweep[sweep["p_mask"] == at].set_index("method")
    headline = headline[[*LOSSES, "nuclear_norm", "± s.e. of L − L_BERT"]].copy()
    headline["L / BERT's"] = headline["L"] / headline.loc[BERT, "L"]
    headline["norm / BERT's"] = headline["nuclear_norm"] / headline.loc[BERT, "nuclear_norm"]
    headline.loc[[BERT, TRUTH], ["L / BERT's", "± s.e. of L − L_BERT"]] = float("nan")
    return headline[["L", "L / BERT's", "± s.e. of L − L_BERT", "L_obs", "L_mask", "nuclear_norm", "norm / BERT's"]]


def versus_table(sweep: pd.DataFrame, method: str = NN) -> pd.DataFrame:
    """The BERT against ``method`` at every p_mask of the sweep (rows): both L, the gap L_method − L_BERT
    with its paired standard error and their ratio, and both nuclear norms."""
    L = sweep.pivot(index="p_mask", columns="method", values="L")
    norm = sweep.pivot(index="p_mask", columns="method", values="nuclear_norm")
    se = sweep.pivot(index="p_mask", columns="method", values="± s.e. of L − L_BERT")
    versus = pd.DataFrame({"L, BERT": L[BERT], f"L, {method}": L[method], "L gap (NN − BERT)": L[method] - L[BERT]})
    versus["± s.e."] = se[method]
    versus["norm, BERT"], versus[f"norm, {method}"] = norm[BERT], norm[method]
    versus["gap / s.e."] = versus["L gap (NN − BERT)"] / versus["± s.e."]
    return versus


def solver_agreement(convex: torch.Tensor, iterative: torch.Tensor, values: torch.Tensor, observed: torch.Tensor,
                     lam: float) -> dict[str, float]:
    """How two solutions of the regularised problem (the interior-point ``convex`` one and ``iterative``
    soft-impute) compare on the same matrices: the objective gap iterative − convex (``gap max``, ``gap
    mean``), the mean objective (``objective``), the largest difference in an entry (``entry``) and the
    relative difference of their pooled L over all entries (``L change``)."""
    objective = regularised_objective(convex, values, observed, lam)
    gap = regularised_objective(iterative, values, observed, lam) - objective
    return {"gap max": gap.max().item(), "gap mean": gap.mean().item(), "objective": objective.mean().item(),
            "entry": (iterative - convex).abs().max().item(),
            "L change": pooled_loss(iterative, values)[0] / pooled_loss(convex, values)[0] - 1}


def lambda_draws(data: DataConfig, lam: float, samples: int, seeds, workers: int = 1) -> pd.DataFrame:
    """``lambda_table`` at one λ for several draws of ``samples`` matrices (one row per seed of
    ``analysis_generator``): the draw-to-draw spread of the pooled losses, to set beside one draw's
    standard error."""
    samples = matrix_count(data_config(data, "lambda_draws: data"), samples, "lambda_draws: samples")
    seeds = [checks.seed(seed, "lambda_draws: each of seeds", ANALYSIS_OFFSET) for seed in seeds]
    return pd.concat([lambda_table(sample_batch(data, samples, analysis_generator(seed)), [lam], workers=workers)
                      .assign(seed=seed) for seed in seeds]).set_index("seed")


def lambda_derivation(data: DataConfig, lams, samples: int, seed: int = 0, run: Run | None = None,
                      step: int | None = None, label: str = BERT, workers: int = 1) -> Derivation:
    """``lambda_table`` on ``samples`` matrices of ``data`` from ``analysis_generator(seed)`` (with checkpoint
    ``step`` of ``run`` as its first row ``label``, if a run is given), as a stored derivation named
    "lambda_table" ("lambda_table_model" with a model): one table "lambda", its rows labelled in the index
    level "row"."""
    if (run is None) != (step is None):
        raise ValueError("run and step are given together or not at all")
    samples = matrix_count(data_config(data, "lambda_derivation: data"), samples, "lambda_derivation: samples")
    seed = checks.seed(seed, "lambda_derivation: seed", ANALYSIS_OFFSET)
    params = {"data": dataclasses.asdict(data), "lams": [float(v) for v in lams], "samples": int(samples),
              "seed": int(seed), "label": label if run is not None else None}

    def compute() -> dict[str, pd.DataFrame]:
        batch = sample_batch(data, samples, analysis_generator(seed))
        model = run.bert(step) if run is not None and step is not None else None
        return {"lambda": lambda_table(batch, lams, model=model, label=label, workers=workers).rename_axis("row")}

    checkpoints = [(run, step)] if run is not None and step is not None else []
    return Derivation("lambda_table_model" if checkpoints else "lambda_table", compute, checkpoints, params)


def stored_lambda_table(data: DataConfig, lams, samples: int, seed: int = 0, run: Run | None = None,
                        step: int | None = None, label: str = BERT, workers: int = 1) -> pd.DataFrame:
    """``lambda_derivation``'s table (shipped, stored, or computed and stored), indexed as ``lambda_table``'s."""
    table = load_or_compute(lambda_derivation(data, lams, samples, seed, run, step, label, workers))["lambda"]
    return table.rename_axis(None)


def draws_derivation(data: DataConfig, lam: float, samples: int, seeds, workers: int = 1) -> Derivation:
    """``lambda_draws`` as a stored derivation: one table "draws", one row per seed."""
    params = {"data": dataclasses.asdict(data), "lam": float(lam), "samples": int(samples),
              "seeds": [int(s) for s in seeds]}

    def compute() -> dict[str, pd.DataFrame]:
        return {"draws": lambda_draws(data, lam, samples, seeds, workers=workers)}

    return Derivation("lambda_draws", compute, [], params)


def stored_lambda_draws(data: DataConfig, lam: float, samples: int, seeds, workers: int = 1) -> pd.DataFrame:
    """``draws_derivation``'s table: shipped, stored, or computed and stored."""
    return load_or_compute(draws_derivation(data, lam, samples, seeds, workers))["draws"]
