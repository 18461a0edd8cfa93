"""Classical completion methods, the BERT's baselines (NeurIPS §3.2, Fig. 3, App. B; WS App. D).

Four estimators of a whole matrix from its observed entries Ω, batched over B matrices m × n:

- ``nuclear_norm_min``: min ‖U‖_* subject to U_ij = X_ij on Ω (Candès & Recht), the paper's Fig. 3 baseline;
- ``nuclear_norm_regularised``: min (1/|Ω|) Σ_Ω (U_ij − X_ij)² + λ‖U‖_*, |Ω| counted per matrix (App. B);
- ``soft_impute``: the same regularised problem by singular-value soft-thresholding (Mazumder, Hastie &
  Tibshirani 2010), in torch, no solver needed (beyond the paper);
- ``als_complete``: U = A Bᵀ of rank r by alternating ridge regressions, the oracle that knows the rank
  (beyond the paper).

The convex problems go to cvxpy with the pinned solver ``SOLVER`` at ``SOLVER_OPTIONS``. Each is
compiled once per call, with the data and the mask as ``cp.Parameter`` s (DPP), and re-solved per matrix.
Every method takes a ``Batch`` or tensors ``values`` (B, m, n) and ``observed`` (B, m, n) bool, and
returns the completed matrices (B, m, n), float64 on the input's device. Observed entries are the
method's own fit and are not pasted back (the paper scores the BERT's raw output the same way).
``matcomp.analysis.baselines`` scores them against the BERT.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from itertools import repeat

import cvxpy as cp
import numpy as np
import torch
from tqdm.auto import tqdm

from matcomp.data import Batch

# Clarabel (interior point) solves these tiny SDPs to 1e-8 in ~11 iterations, about 2x faster than SCS at
# eps 1e-9. Its default tolerances, pinned: on 128 paper matrices, 1e-9 or 1e-10 instead move pooled L by
# < 2e-5 relative (single entries by up to 8e-3: the minimiser is nearly flat along some directions),
# and on exactly low-rank matrices 1e-9 ends at Clarabel's reduced tolerances.
SOLVER = "CLARABEL"
SOLVER_OPTIONS = {"tol_gap_abs": 1e-8, "tol_gap_rel": 1e-8, "tol_feas": 1e-8, "max_iter": 200}
INIT_TOL = 1e-6  # soft-impute tolerance of the ALS starting point, refined by ALS itself

Data = Batch | torch.Tensor


def as_tensors(data: Data, observed: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
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
    values, observed = as_tensors(data, observed)
    return _solve_each(values, observed, _constrained_problem, progress, "nuclear-norm min", workers)


def nuclear_norm_regularised(data: Data, observed: torch.Tensor | None = None, *, lam: float,
                             progress: bool = False, workers: int = 1) -> torch.Tensor:
    """(B, m, n): min (1/|Ω|) Σ_Ω (U_ij − X_ij)² + λ‖U‖_*, |Ω| per matrix (App. B's table)."""
    values, observed = as_tensors(data, observed)
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
    values, observed = as_tensors(data, observed)
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
    values, observed = as_tensors(data, observed)
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
