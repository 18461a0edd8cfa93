"""The paper's losses (NeurIPS §2.1), pooled over every (matrix, entry) pair of a batch.

L is the MSE over all entries (the training loss); L_obs and L_mask are the same squared error
averaged over observed or missing entries only, pooled over the batch as the reference code does
(not an average of per-matrix MSEs). ``mask_value`` is the mean |prediction| at missing entries,
which stays near 0 while the model copies its input. ``masked_mse`` is the training loss (float32, on the graph);
the analyses score completions through ``squared_errors``, in double and per matrix, so that a pooled loss
(``pooled_loss``) comes with its standard error and every one is summed the same way.
"""

from __future__ import annotations

import math

import torch

from matcomp import checks

LOSSES = ("L", "L_obs", "L_mask")  # the three pooled losses
PAPER_ORDER = ("L_obs", "L_mask", "L")  # the order of the paper's loss tables (Tables 1-2, App. B)
METRICS = (*LOSSES, "mask_value")


def pooled_mean(values: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the True entries of ``where`` (NaN if there are none)."""
    where = where.expand_as(values)
    return (values * where).sum() / where.sum()


def _as_target(pred: torch.Tensor, name: str, target: torch.Tensor) -> torch.Tensor:
    """``pred`` in the shape of ``target`` (a model's (B, m·n) predictions of (B, m, n) matrices), refused by
    ``name`` when it holds another number of entries or matrices."""
    if pred.numel() != target.numel() or (pred.dim() and target.dim() and len(pred) != len(target)):
        raise ValueError(f"{name} has shape {tuple(pred.shape)}, which does not hold the entries of target, "
                         f"{tuple(target.shape)}")
    return pred.reshape(target.shape)


def masked_mse(pred: torch.Tensor, target: torch.Tensor, observed: torch.Tensor) -> dict[str, torch.Tensor]:
    """L, L_obs, L_mask and mask_value of predictions ``pred`` against ``target`` (same shape).

    Returns 0-d tensors, still attached to the graph (``L`` is the training loss).

    >>> t = torch.zeros(1, 2, 2); obs = torch.tensor([[[True, False], [True, True]]])
    >>> {k: round(v.item(), 3) for k, v in masked_mse(t + 0.5, t, obs).items()}
    {'L': 0.25, 'L_obs': 0.25, 'L_mask': 0.25, 'mask_value': 0.5}
    """
    target = checks.tensor(target, "masked_mse: target", "numbers")
    pred = _as_target(checks.tensor(pred, "masked_mse: pred", "numbers"), "masked_mse: pred", target).float()
    checks.fits_shape(checks.tensor(observed, "masked_mse: observed", "mask"), "masked_mse: observed", target.shape,
                      "target")
    err = (pred - target) ** 2
    return {
        "L": err.mean(),
        "L_obs": pooled_mean(err, observed),
        "L_mask": pooled_mean(err, ~observed),
        "mask_value": pooled_mean(pred.abs(), ~observed),
    }


def ratio_estimate(numerators: torch.Tensor, denominators: torch.Tensor) -> tuple[float, float]:
    """Σ_k a_k / Σ_k b_k over matrices k, with its standard error as a ratio estimate,
    sqrt(B/(B−1) Σ_k (a_k − R b_k)²) / Σ_k b_k (NaN for a single matrix): a pooled loss (a_k the squared
    errors of matrix k, b_k its count of entries) or the ratio of two pooled losses on the same entries.

    >>> [round(x, 3) for x in ratio_estimate(torch.tensor([4.0, 2.0]), torch.tensor([2.0, 2.0]))]
    [1.5, 0.5]
    """
    a, b = numerators.double(), denominators.double()
    if len(a) == 0 or b.sum().item() == 0:  # nothing to pool: no ratio to estimate
        return math.nan, math.nan
    ratio = (a.sum() / b.sum()).item()
    n = len(a)
    spread = ((a - ratio * b) ** 2).sum().item() * n / (n - 1) if n > 1 else math.nan
    return ratio, math.sqrt(spread) / b.sum().item()


def squared_errors(pred: torch.Tensor, target: torch.Tensor,
                   where: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per matrix (dimension 0), in double: the sum of the squared errors (pred − target)² over the entries
    ``where`` (all by default), and how many entries that is. A pooled loss is Σ sums / Σ counts, a matrix's own
    loss its sum over its count: the one place an analysis writes the squared error.

    >>> [t.tolist() for t in squared_errors(torch.ones(2, 2), torch.zeros(2, 2), torch.tensor([[1, 0], [1, 1]]) > 0)]
    [[1.0, 2.0], [1, 2]]
    """
    where = torch.ones_like(target, dtype=torch.bool) if where is None else where.expand_as(target)
    return ((pred.double() - target.double()) ** 2 * where).flatten(1).sum(1), where.flatten(1).sum(1)


def pooled_loss(pred: torch.Tensor, target: torch.Tensor, where: torch.Tensor | None = None) -> tuple[float, float]:
    """The squared error of ``pred`` against ``target`` pooled over the entries ``where`` (all by default) of
    every matrix (dimension 0), with its standard error over the matrices (``ratio_estimate``); NaN for both
    where there is no such entry.

    >>> v = torch.zeros(2, 1, 2); obs = torch.tensor([[[True, False]], [[True, True]]])
    >>> [round(x, 3) for x in pooled_loss(v + torch.tensor([1.0, 2.0]), v, obs)]
    [2.0, 0.667]
    """
    target = checks.tensor(target, "pooled_loss: target", "numbers")
    pred = _as_target(checks.tensor(pred, "pooled_loss: pred", "numbers"), "pooled_loss: pred", target)
    if where is not None:
        checks.fits_shape(checks.tensor(where, "pooled_loss: where", "mask"), "pooled_loss: where", target.shape,
                          "target")
    return ratio_estimate(*squared_errors(pred, target, where))


def loss_ratio(pred: torch.Tensor, base: torch.Tensor, target: torch.Tensor,
               where: torch.Tensor) -> tuple[float, float]:
    """The pooled MSE of ``pred`` over that of ``base`` on the same entries (``where``) of the same matrices
    (dimension 0), with its standard error over the matrices (``ratio_estimate``, paired), so an
    intervention's effect is told from the sampling of its matrices.

    >>> t = torch.zeros(2, 2); w = torch.ones(2, 2, dtype=torch.bool)
    >>> [round(x, 3) for x in loss_ratio(torch.tensor([[2.0, 2.0], [2.0, 0.0]]), t + 1, t, w)]
    [3.0, 1.0]
    """
    target = checks.tensor(target, "loss_ratio: target", "numbers")
    pred, base = (_as_target(checks.tensor(p, f"loss_ratio: {name}", "numbers"), f"loss_ratio: {name}", target)
                  for p, name in ((pred, "pred"), (base, "base")))
    checks.fits_shape(checks.tensor(where, "loss_ratio: where", "mask"), "loss_ratio: where", target.shape, "target")
    return ratio_estimate(squared_errors(pred, target, where)[0], squared_errors(base, target, where)[0])
