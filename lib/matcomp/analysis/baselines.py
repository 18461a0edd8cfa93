"""Classical completion baselines for the BERT (NeurIPS §3.2, Fig. 3, App. B; WS App. D).

Four estimators of a whole matrix from its observed entries Ω, batched over B matrices m × n:

- ``nuclear_norm_min``: min ‖U‖_* subject to U_ij = X_ij on Ω (Candès & Recht), the paper's Fig. 3 baseline;
- ``nuclear_norm_regularised``: min (1/|Ω|) Σ_Ω (U_ij − X_ij)² + λ‖U‖_*, |Ω| counted per matrix (App. B);
- ``soft_impute``: the same regularised problem by singular-value soft-thresholding (Mazumder, Hastie &
  Tibshirani 2010), in torch, no solver needed (beyond the paper);
- ``als_complete``: U = A Bᵀ of rank r by alternating ridge regressions, the oracle that knows the rank
  (beyond the paper).

The convex problems go to cvxpy with the pinned solver ``SOLVER`` at ``SOLVER_OPTIONS``. Each is
compiled once per call, with the data and the mask as ``cp.Parameter`` s (DPP), and re-solved per matrix.
``completion_metrics`` scores completions as the paper does: pooled L, L_obs, L_mask against the rounded
X, and the mean nuclear norm. ``complete_all`` runs every method (and a BERT) on one batch,
``pooled_with_se`` and ``paired_se`` give the standard errors of the pooled losses and of differences
between methods, ``lambda_table`` is App. B's table and ``regularised_objective`` the regularised
problem's objective. Used by the book's chapter comparing the BERT with nuclear-norm minimisation.

Every method takes a ``Batch`` or tensors ``values`` (B, m, n) and ``observed`` (B, m, n) bool, and
returns the completed matrices (B, m, n), float64 on the input's device. Observed entries are the
method's own fit and are not pasted back (the paper scores the BERT's raw output the same way).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from functools import partial
from itertools import repeat

import cvxpy as cp
import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from matcomp.analysis.evaluation import TRUTH, predict
from matcomp.config import DataConfig
from matcomp.data import Batch, sample_batch
from matcomp.metrics import masked_mse
from matcomp.models.bert import MatrixBert
from matcomp.runs.derived import Derivation, load_or_compute
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator

# Clarabel (interior point) solves these tiny SDPs to 1e-8 in ~11 iterations, about 2x faster than SCS at
# eps 1e-9. Its default tolerances, pinned: on 128 paper matrices, 1e-9 or 1e-10 instead move pooled L by
# < 2e-5 relative (single entries by up to 8e-3: the minimiser is nearly flat along some directions),
# and on exactly low-rank matrices 1e-9 ends at Clarabel's reduced tolerances.
SOLVER = "CLARABEL"
SOLVER_OPTIONS = {"tol_gap_abs": 1e-8, "tol_gap_rel": 1e-8, "tol_feas": 1e-8, "max_iter": 200}
INIT_TOL = 1e-6  # soft-impute tolerance of the ALS starting point, refined by ALS itself

Data = Batch | torch.Tensor


def _unpack(data: Data, observed: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Validated (values float64, observed bool), both (B, m, n)."""
    if isinstance(data, Batch):
        if observed is not None:
            raise ValueError("observed must not be given with a Batch, which holds its own mask")
        values, observed = data.values, data.observed
    else:
        values = data
        if observed is None:
            raise ValueError("observed (B, m, n) bool is required when values is a tensor")
    if values.ndim != 3 or values.shape[0] == 0:
        raise ValueError(f"values must have shape (B, m, n) with B >= 1; got {tuple(values.shape)}")
    if observed.shape != values.shape:
        raise ValueError(f"observed has shape {tuple(observed.shape)} but values has {tuple(values.shape)}; "
                         "they must match")
    if observed.dtype != torch.bool:
        raise ValueError(f"observed must be a bool tensor (True = observed); got {observed.dtype}")
    not_finite = ~torch.isfinite(values).flatten(1).all(1)
    if not_finite.any():
        raise ValueError(f"values must be finite; matrix {_first(not_finite)} has NaN or inf "
                         "(put any finite number at missing entries)")
    empty = ~observed.flatten(1).any(1)
    if empty.any():
        raise ValueError(f"matrix {_first(empty)} has no observed entry; every matrix needs at least one")
    return values.double(), observed


def _first(flags: torch.Tensor) -> int:
    return int(flags.nonzero()[0, 0])


def _require_positive(name: str, value, integer: bool = False) -> None:
    kinds, what = ((int,), "an integer") if integer else ((int, float), "a finite number")
    if isinstance(value, bool) or not isinstance(value, kinds) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be {what} > 0; got {value!r}")


def _require_rank(rank, m: int, n: int) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= min(m, n):
        raise ValueError(f"rank must be an integer in [1, min(m, n)] = [1, {min(m, n)}]; got {rank!r}")


# --- the convex problems, with cvxpy -------------------------------------------------------------------------

SetData = Callable[[np.ndarray, np.ndarray], None]


def _constrained_problem(m: int, n: int) -> tuple[cp.Problem, cp.Variable, SetData]:
    """min ‖U‖_* s.t. mask ⊙ U = mask ⊙ X; the mask and the masked X are parameters."""
    U, mask, known = cp.Variable((m, n)), cp.Parameter((m, n)), cp.Parameter((m, n))
    problem = cp.Problem(cp.Minimize(cp.normNuc(U)), [cp.multiply(mask, U) == known])

    def set_data(x: np.ndarray, obs: np.ndarray) -> None:
        mask.value, known.value = obs.astype(float), np.where(obs, x, 0.0)

    return problem, U, set_data


def _regularised_problem(m: int, n: int, lam: float) -> tuple[cp.Problem, cp.Variable, SetData]:
    """min Σ (w ⊙ (U − X))² + λ‖U‖_* with w = mask / √|Ω|: the paper's (1/|Ω|) Σ_Ω, kept DPP (one
    parameter for w, one for w ⊙ X) since a product of two parameters is not."""
    U, weight, target = cp.Variable((m, n)), cp.Parameter((m, n)), cp.Parameter((m, n))
    problem = cp.Problem(cp.Minimize(cp.sum_squares(cp.multiply(weight, U) - target) + lam * cp.normNuc(U)))

    def set_data(x: np.ndarray, obs: np.ndarray) -> None:
        w = obs / math.sqrt(obs.sum())
        weight.value, target.value = w, w * x

    return problem, U, set_data


def _solve_each(values: torch.Tensor, observed: torch.Tensor, build, progress: bool, desc: str,
                workers: int = 1) -> torch.Tensor:
    """Solve the problem ``build(m, n)`` once per matrix, re-using its compiled form; with
    ``workers`` > 1 the matrices are split among that many processes (1.8x faster with 2 on 2 cores)."""
    _require_positive("workers", workers, integer=True)
    X, M = values.cpu().numpy(), observed.cpu().numpy()
    if workers == 1 or len(X) < 2:
        out, inaccurate = _solve_numpy(X, M, build, progress, desc)
    else:
        parts = np.array_split(np.arange(len(X)), workers)
        with ProcessPoolExecutor(workers) as pool:
            done = list(pool.map(_solve_numpy, [X[p] for p in parts], [M[p] for p in parts], repeat(build),
                                 repeat(False), repeat(desc), [int(p[0]) for p in parts]))
        out, inaccurate = np.concatenate([o for o, _ in done]), sum(i for _, i in done)
    if inaccurate:
        warnings.warn(f"{desc}: {inaccurate} of {len(X)} matrices solved only to {SOLVER}'s reduced tolerances")
    return torch.from_numpy(out).to(values.device)


def _solve_numpy(X: np.ndarray, M: np.ndarray, build, progress: bool, desc: str, first: int = 0):
    """The solutions (k, m, n) of matrices X[k] (numbered from ``first`` in errors), and how many were
    solved only to the solver's reduced tolerances."""
    problem, U, set_data = build(*X.shape[1:])
    out, inaccurate = np.empty_like(X), 0
    for k in tqdm(range(len(X)), desc=desc, unit="matrix", disable=not progress):
        set_data(X[k], M[k])
        try:
            problem.solve(solver=SOLVER, **SOLVER_OPTIONS)
        except cp.error.SolverError as err:
            raise RuntimeError(f"{SOLVER} failed on matrix {first + k}: {err}") from err
        if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            raise RuntimeError(f"{SOLVER} returned status {problem.status!r} on matrix {first + k}")
        inaccurate += problem.status == cp.OPTIMAL_INACCURATE
        out[k] = U.value
    return out, inaccurate


def nuclear_norm_min(data: Data, observed: torch.Tensor | None = None, *, progress: bool = False,
                     workers: int = 1) -> torch.Tensor:
    """(B, m, n): min ‖U‖_* with U equal to X on the observed entries, one SDP per matrix (Fig. 3)."""
    values, observed = _unpack(data, observed)
    return _solve_each(values, observed, _constrained_problem, progress, "nuclear-norm min", workers)


def nuclear_norm_regularised(data: Data, observed: torch.Tensor | None = None, *, lam: float,
                             progress: bool = False, workers: int = 1) -> torch.Tensor:
    """(B, m, n): min (1/|Ω|) Σ_Ω (U_ij − X_ij)² + λ‖U‖_*, |Ω| per matrix (App. B's table)."""
    values, observed = _unpack(data, observed)
    _require_positive("lam", lam)
    build = partial(_regularised_problem, lam=float(lam))
    return _solve_each(values, observed, build, progress, f"regularised nuclear norm, lam={lam:g}", workers)


# --- iterative methods, batched in torch ---------------------------------------------------------------------

def _relative_change(new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """(k,) ‖new − old‖_F / ‖new‖_F per matrix (0 when both are zero)."""
    return torch.linalg.matrix_norm(new - old) / torch.linalg.matrix_norm(new).clamp_min(1e-300)


def _warn_unconverged(method: str, left: int, total: int, max_iter: int) -> None:
    if left:
        warnings.warn(f"{method}: {left} of {total} matrices did not converge in {max_iter} iterations")


def _shrink(A: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """Singular-value soft-thresholding of each matrix of A (k, m, n) by tau (k,)."""
    U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    return (U * (S - tau[:, None]).clamp_min(0)[:, None, :]) @ Vh


def soft_impute(data: Data, observed: torch.Tensor | None = None, *, lam: float, tol: float = 1e-8,
                max_iter: int = 10_000) -> torch.Tensor:
    """(B, m, n): the regularised problem of ``nuclear_norm_regularised``, solved by soft-impute.

    Soft-impute fills the missing entries with the current guess and soft-thresholds the singular
    values by τ = λ|Ω|/2, which makes its objective ½Σ_Ω(Z−X)² + τ‖Z‖_* the paper's times |Ω|/2.
    Nesterov momentum with adaptive restart (O'Donoghue & Candès 2015) keeps the same fixed point:
    at λ = 5e-4 on 7×7 matrices it needs ~700 iterations where plain soft-impute needs over 10,000.
    Small λ (≲ 1e-5) still converges slowly. A matrix stops when ‖ΔZ‖_F / ‖Z‖_F < ``tol``.
    """
    values, observed = _unpack(data, observed)
    _require_positive("lam", lam)
    _require_positive("tol", tol)
    _require_positive("max_iter", max_iter, integer=True)
    tau = lam * observed.sum((1, 2)).double() / 2  # (B,)
    Z = torch.zeros_like(values)  # (B, m, n) current iterate
    Z_prev, t = Z.clone(), torch.ones_like(tau)
    active = torch.arange(len(values), device=values.device)
    for _ in range(max_iter):
        if not len(active):
            break
        z, t_now = Z[active], t[active]
        t_next = (1 + (1 + 4 * t_now ** 2).sqrt()) / 2
        y = z + ((t_now - 1) / t_next)[:, None, None] * (z - Z_prev[active])  # extrapolated point
        z_next = _shrink(torch.where(observed[active], values[active], y), tau[active])
        uphill = ((y - z_next) * (z_next - z)).sum((1, 2)) > 0  # momentum points away from descent
        Z_prev[active], Z[active], t[active] = z, z_next, torch.where(uphill, 1.0, t_next)
        active = active[_relative_change(z_next, z) >= tol]
    _warn_unconverged("soft_impute", len(active), len(values), max_iter)
    return Z


def _ridge_rows(values: torch.Tensor, observed: torch.Tensor, other: torch.Tensor,
                ridge: torch.Tensor) -> torch.Tensor:
    """(k, m, r): each row a_i = argmin Σ_{j observed} (X_ij − a_i·b_j)² + ridge |a_i|², given B = ``other``
    (k, n, r), for values and observed (k, m, n) and ridge (k,)."""
    w = observed.to(values.dtype)
    gram = torch.einsum("kij,kjr,kjs->kirs", w, other, other)  # (k, m, r, r)
    rhs = torch.einsum("kij,kjr->kir", w * values, other)  # (k, m, r)
    eye = torch.eye(other.shape[-1], dtype=values.dtype, device=values.device)
    return torch.linalg.solve(gram + ridge[:, None, None, None] * eye, rhs)


def als_complete(data: Data, observed: torch.Tensor | None = None, *, rank: int, lam: float, tol: float = 1e-8,
                 max_iter: int = 1000) -> torch.Tensor:
    """(B, m, n): U = A Bᵀ with A (m, r), B (n, r) fitted by alternating least squares.

    Minimises (1/|Ω|) Σ_Ω ((ABᵀ)_ij − X_ij)² + (λ/2)(‖A‖²_F + ‖B‖²_F), the regularised problem with
    the rank capped at r (‖U‖_* is the least (‖A‖² + ‖B‖²)/2 over factorisations). The ridge keeps
    rows with fewer than r observed entries solvable. Starts from the rank-r truncation of the
    soft-impute solution at the same λ: from the usual spectral start (zero-filled X) ALS stalls in
    poor local minima (512 7×7 rank-2 matrices, p_mask 0.3, λ = 1e-3: L 1.3e-2 against 3.7e-3 from
    this start). Stops like ``soft_impute``.
    """
    values, observed = _unpack(data, observed)
    _require_rank(rank, *values.shape[1:])
    _require_positive("lam", lam)
    _require_positive("tol", tol)
    _require_positive("max_iter", max_iter, integer=True)
    ridge = lam * observed.sum((1, 2)).double() / 2  # (B,) the paper's scale, times |Ω|
    start = soft_impute(values, observed, lam=lam, tol=INIT_TOL)
    _, S, Vh = torch.linalg.svd(start, full_matrices=False)
    right = Vh.mT[..., :rank] * S[:, None, :rank].sqrt()  # (B, n, r)
    Z = start
    active = torch.arange(len(values), device=values.device)
    for _ in range(max_iter):
        if not len(active):
            break
        x, obs = values[active], observed[active]
        left = _ridge_rows(x, obs, right[active], ridge[active])  # (k, m, r)
        right_next = _ridge_rows(x.mT, obs.mT, left, ridge[active])  # (k, n, r)
        z_next = left @ right_next.mT
        change = _relative_change(z_next, Z[active])
        right[active], Z[active] = right_next, z_next
        active = active[change >= tol]
    _warn_unconverged("als_complete", len(active), len(values), max_iter)
    return Z


# --- scoring -------------------------------------------------------------------------------------------------

def completion_metrics(completions: dict[str, torch.Tensor], data: Data,
                       observed: torch.Tensor | None = None) -> pd.DataFrame:
    """One row per method (the dict's keys): pooled L, L_obs, L_mask against X (for a ``Batch``, the
    rounded X the paper scores), and nuclear_norm, the mean over matrices of ‖completion‖_*."""
    values, observed = _unpack(data, observed)
    rows = {}
    for name, completed in completions.items():
        if completed.shape != values.shape:
            raise ValueError(f"completion {name!r} has shape {tuple(completed.shape)}; "
                             f"expected {tuple(values.shape)}")
        completed = completed.to(device=values.device, dtype=torch.float64)
        losses = masked_mse(completed, values, observed)
        rows[name] = {key: losses[key].item() for key in ("L", "L_obs", "L_mask")}
        rows[name]["nuclear_norm"] = torch.linalg.matrix_norm(completed, ord="nuc").mean().item()
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("method")


# --- every method on one batch, and the chapter's tables -----------------------------------------------------

LOSSES = ("L_obs", "L_mask", "L")  # the columns of App. B's table, in its order


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
    out = {"BERT": bert_completion(model, batch)[keep]} if model is not None else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out |= {
            "nuclear norm min": nuclear_norm_min(values, observed, workers=workers),
            REGULARISED.format(lam): nuclear_norm_regularised(values, observed, lam=lam, workers=workers),
            SOFT_IMPUTE.format(lam): soft_impute(values, observed, lam=lam, tol=tol),
            f"rank-{rank} ALS (oracle)": als_complete(values, observed, rank=rank, lam=lam, tol=tol),
        }
    return values, observed, out, dropped


def pooled_with_se(completed: torch.Tensor, values: torch.Tensor, observed: torch.Tensor) -> dict[str, float]:
    """Pooled L_obs, L_mask and L of ``completed`` against ``values`` (B, m, n), each with its standard
    error over the matrices (key "<name> se").

    A pooled loss is a ratio Σ_k s_k / Σ_k c_k of per-matrix sums of squared errors s_k over counts
    c_k of entries; its standard error is the ratio estimate's,
    sqrt(B/(B−1) Σ_k (s_k − L c_k)²) / Σ_k c_k (NaN for a single matrix).

    >>> v = torch.zeros(2, 1, 2); obs = torch.tensor([[[True, False]], [[True, True]]])
    >>> {k: round(x, 3) for k, x in pooled_with_se(v + torch.tensor([1.0, 2.0]), v, obs).items()}
    {'L_obs': 2.0, 'L_obs se': 0.667, 'L_mask': 4.0, 'L_mask se': 0.0, 'L': 2.5, 'L se': 0.0}
    """
    err = (completed.double() - values.double()) ** 2
    out = {}
    for name, where in zip(LOSSES, [observed, ~observed, torch.ones_like(observed)]):
        sums, counts = (err * where).sum((1, 2)), where.sum((1, 2)).double()
        mean = sums.sum() / counts.sum()
        spread = ((sums - mean * counts) ** 2).sum() * len(sums) / (len(sums) - 1) if len(sums) > 1 else math.nan
        out[name], out[name + " se"] = mean.item(), (torch.as_tensor(spread).sqrt() / counts.sum()).item()
    return out


def paired_se(a: torch.Tensor, b: torch.Tensor, values: torch.Tensor) -> float:
    """Standard error of mean(MSE_a − MSE_b) over the matrices, paired (both complete the same ``values``
    (B, m, n)): the sample standard deviation of the per-matrix differences over √B."""
    target = values.double()
    difference = ((a.double() - target) ** 2).mean((1, 2)) - ((b.double() - target) ** 2).mean((1, 2))
    return difference.std().item() / len(values) ** 0.5


def regularised_objective(completed: torch.Tensor, values: torch.Tensor, observed: torch.Tensor,
                          lam: float) -> torch.Tensor:
    """(B,) the regularised problem's objective (1/|Ω|) Σ_Ω (U − X)² + λ‖U‖_* of each matrix."""
    completed = completed.double()
    fit = ((completed - values.double()) ** 2 * observed).sum((1, 2)) / observed.sum((1, 2))
    return fit + lam * torch.linalg.matrix_norm(completed, ord="nuc")


def lambda_table(batch: Batch, lams, model: MatrixBert | None = None, label: str = "BERT",
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

NN = "nuclear norm min"
REGULARISED = "regularised, λ={:g}"  # method labels (``.format(lam)``) of the regularised problem and soft-impute
SOFT_IMPUTE = "soft-impute, λ={:g}"


SWEEP_COLUMNS = ["method", "L", "L_obs", "L_mask", "nuclear_norm", "p_mask", "± s.e. of L − L_BERT"]


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
    rows, by_p_mask = [], {}
    for p in p_masks:
        batch = sample_batch(replace(data, p_mask=p), samples, analysis_generator(seed))
        values, observed, done, dropped = complete_all(batch, lam, data.rank, model=model, workers=workers)
        done[TRUTH] = values.double()
        table = completion_metrics(done, values, observed).assign(p_mask=p)
        table["± s.e. of L − L_BERT"] = [paired_se(done[m], done["BERT"], values) if model is not None
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
    headline = headline[["L", "L_obs", "L_mask", "nuclear_norm", "± s.e. of L − L_BERT"]].copy()
    headline["L / BERT's"] = headline["L"] / headline.loc["BERT", "L"]
    headline["norm / BERT's"] = headline["nuclear_norm"] / headline.loc["BERT", "nuclear_norm"]
    headline.loc[["BERT", TRUTH], ["L / BERT's", "± s.e. of L − L_BERT"]] = float("nan")
    return headline[["L", "L / BERT's", "± s.e. of L − L_BERT", "L_obs", "L_mask", "nuclear_norm", "norm / BERT's"]]


def versus_table(sweep: pd.DataFrame, method: str = NN) -> pd.DataFrame:
    """The BERT against ``method`` at every p_mask of the sweep (rows): both L, the gap L_method − L_BERT
    with its paired standard error and their ratio, and both nuclear norms."""
    L = sweep.pivot(index="p_mask", columns="method", values="L")
    norm = sweep.pivot(index="p_mask", columns="method", values="nuclear_norm")
    se = sweep.pivot(index="p_mask", columns="method", values="± s.e. of L − L_BERT")
    versus = pd.DataFrame({"L, BERT": L["BERT"], f"L, {method}": L[method], "L gap (NN − BERT)": L[method] - L["BERT"]})
    versus["± s.e."] = se[method]
    versus["norm, BERT"], versus[f"norm, {method}"] = norm["BERT"], norm[method]
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
            "L change": pooled_mse(iterative, values) / pooled_mse(convex, values) - 1}


def pooled_mse(completed: torch.Tensor, values: torch.Tensor) -> float:
    """L, the squared error of ``completed`` pooled over every entry of every matrix of ``values``.

    >>> pooled_mse(torch.ones(2, 1, 2), torch.zeros(2, 1, 2))
    1.0
    """
    return ((completed - values.double()) ** 2).mean().item()


def lambda_draws(data: DataConfig, lam: float, samples: int, seeds, workers: int = 1) -> pd.DataFrame:
    """``lambda_table`` at one λ for several draws of ``samples`` matrices (one row per seed of
    ``analysis_generator``): the draw-to-draw spread of the pooled losses, to set beside one draw's
    standard error."""
    return pd.concat([lambda_table(sample_batch(data, samples, analysis_generator(seed)), [lam], workers=workers)
                      .assign(seed=seed) for seed in seeds]).set_index("seed")


def lambda_derivation(data: DataConfig, lams, samples: int, seed: int = 0, run: Run | None = None,
                      step: int | None = None, label: str = "BERT", workers: int = 1) -> Derivation:
    """``lambda_table`` on ``samples`` matrices of ``data`` from ``analysis_generator(seed)`` (with checkpoint
    ``step`` of ``run`` as its first row ``label``, if a run is given), as a stored derivation named
    "lambda_table" ("lambda_table_model" with a model): one table "lambda", its rows labelled in the index
    level "row"."""
    if (run is None) != (step is None):
        raise ValueError("run and step are given together or not at all")
    params = {"data": dataclasses.asdict(data), "lams": [float(v) for v in lams], "samples": int(samples),
              "seed": int(seed), "label": label if run is not None else None}

    def compute() -> dict[str, pd.DataFrame]:
        batch = sample_batch(data, samples, analysis_generator(seed))
        model = run.bert(step) if run is not None and step is not None else None
        return {"lambda": lambda_table(batch, lams, model=model, label=label, workers=workers).rename_axis("row")}

    checkpoints = [(run, step)] if run is not None and step is not None else []
    return Derivation("lambda_table_model" if checkpoints else "lambda_table", compute, checkpoints, params)


def stored_lambda_table(data: DataConfig, lams, samples: int, seed: int = 0, run: Run | None = None,
                        step: int | None = None, label: str = "BERT", workers: int = 1) -> pd.DataFrame:
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
