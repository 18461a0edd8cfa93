"""Linear probes of the hidden states (NeurIPS Fig. 6, App. K).

The paper reads the masked row from the hidden states of middle layers with linear probes. Here:
least-squares probes without intercept (``fit_probe``, ``probe_scores``), fitted on every layer's
hidden states by ``probe_layers`` for the paper's three targets (``probe_targets``: the masked row,
the element, the first left singular vector).
"""

from __future__ import annotations

import pandas as pd
import torch

from matcomp.data import Batch
from matcomp.metrics import pooled_loss
from matcomp.models.bert import MatrixBert
from matcomp.models.hooks import run_with_cache, stacked
from matcomp.paper import PROBING, PROBING_MODEL

PROBE_RCOND = 1e-6  # singular values of the features below this share of the largest are dropped (fp32 rounding)


def fit_probe(features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(d, t): the least-squares linear map from features (N, d) to targets (N, t), no intercept.

    The minimum-norm solution over the features' directions above ``PROBE_RCOND`` of the largest (SVD
    driver). A layer's states can have an exactly null direction (a LayerNorm's output sums to a constant):
    the authors' ``probe.py`` solves with ``torch.linalg.lstsq``'s default driver, whose weight along it
    is rounding noise, so its held-out MSE moves by several per cent with the thread count; this one does
    not."""
    if features.shape[0] != targets.shape[0]:
        raise ValueError(f"features and targets must have the same number of rows; got {features.shape[0]} "
                         f"and {targets.shape[0]}")
    return torch.linalg.lstsq(features.double(), targets.double(), rcond=PROBE_RCOND, driver="gelsd").solution


def probe_scores(weights: torch.Tensor, features: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """MSE of the probe's predictions (mean over every coordinate) and their mean |cosine| with the
    targets (rows that are all zero count as cosine 0, as in the paper's code)."""
    pred = features.double() @ weights
    target = targets.double()
    cosine = torch.nn.functional.cosine_similarity(pred, target, dim=-1, eps=1e-8)
    return {"mse": ((pred - target) ** 2).mean().item(), "abs_cos": cosine.abs().mean().item()}


PROBE_TARGETS = ("row", "element", "svd")


def probe_targets(batch: Batch, target: str) -> torch.Tensor:
    """(B·S, t) targets for every position (row-major) of every matrix: ``"row"`` the masked row
    (X ⊙ M)_{i,:} of the entry (t = n), ``"element"`` the true X_ij (t = 1), ``"svd"`` the first left
    singular vector of X, the same for all positions of a matrix (t = m, sign arbitrary).

    >>> from matcomp.data import Batch
    >>> b = Batch(ids=torch.zeros(1, 4, dtype=torch.long), values=torch.tensor([[[1., 2.], [3., 4.]]]),
    ...           observed=torch.tensor([[[True, False], [True, True]]]))
    >>> probe_targets(b, "row").tolist(), probe_targets(b, "element").flatten().tolist()
    ([[1.0, 0.0], [1.0, 0.0], [3.0, 4.0], [3.0, 4.0]], [1.0, 2.0, 3.0, 4.0])
    """
    values, observed = batch.values, batch.observed
    B, m, n = values.shape
    if target == "row":
        return (values * observed).repeat_interleave(n, dim=1).reshape(B * m * n, n)
    if target == "element":
        return values.reshape(B * m * n, 1)
    if target == "svd":
        first = torch.linalg.svd(values.double()).U[:, :, 0].float()  # (B, m)
        return first.repeat_interleave(m * n, dim=0)
    raise ValueError(f"target must be one of {PROBE_TARGETS}; got {target!r}")


def answer_zero_mse(batch: Batch, target: str, missing_only: bool = False) -> float:
    """The MSE of a probe that answers 0, the mean squared ``target`` (``probe_targets``): the level a
    probe must beat to read anything; with ``missing_only`` (the element target), over missing entries.

    >>> from matcomp.data import Batch
    >>> b = Batch(ids=torch.zeros(1, 2, dtype=torch.long), values=torch.tensor([[[1.0, 3.0]]]),
    ...           observed=torch.tensor([[[True, False]]]))
    >>> answer_zero_mse(b, "element"), answer_zero_mse(b, "element", missing_only=True)
    (5.0, 9.0)
    """
    if missing_only:
        return (batch.values[~batch.observed] ** 2).mean().item()
    return (probe_targets(batch, target) ** 2).mean().item()


@torch.no_grad()
def layer_features(model: MatrixBert, batch: Batch) -> list[torch.Tensor]:
    """The embedding output (index 0) and the output of each layer 1..L as (B·S, hidden) feature rows."""
    _, cache = run_with_cache(model, batch.ids, ["resid"])
    return [h.reshape(-1, h.shape[-1]).float().cpu() for h in stacked(cache, "resid")]


def probe_layers(model: MatrixBert, train: Batch, test: Batch, target: str) -> pd.DataFrame:
    """One least-squares probe per layer from hidden states to ``target``, fitted on ``train`` and
    scored on both: MSE and mean |cosine| (row and svd targets), and for ``"element"`` the test MSE
    at missing and at observed entries. Indexed by layer, counted from 1 as in the paper; layer 0,
    the embedding output (token + position, before any attention), is a baseline the paper omits."""
    if target not in PROBE_TARGETS:
        raise ValueError(f"target must be one of {PROBE_TARGETS}; got {target!r}")
    y_train, y_test = probe_targets(train, target), probe_targets(test, target)
    rows = []
    for layer, (h_train, h_test) in enumerate(zip(layer_features(model, train), layer_features(model, test))):
        weights = fit_probe(h_train, y_train)
        fit, held_out = probe_scores(weights, h_train, y_train), probe_scores(weights, h_test, y_test)
        row = {"layer": layer, "train MSE": fit["mse"], "test MSE": held_out["mse"]}
        if target == "element":
            guess, truth = ((h_test.double() @ weights).reshape(test.observed.shape),
                            y_test.reshape(test.observed.shape))  # one entry a row: as matrices again
            row |= {f"test MSE {name}": pooled_loss(guess, truth, where)[0]
                    for name, where in (("missing", ~test.observed), ("observed", test.observed))}
        else:
            row |= {"train |cos|": fit["abs_cos"], "test |cos|": held_out["abs_cos"]}
        rows.append(row)
    return pd.DataFrame(rows).set_index("layer")


def probe_summary(tables: dict[str, pd.DataFrame], before: dict[str, pd.DataFrame],
                  zero: dict[str, float]) -> dict[str, float]:
    """The numbers the probing chapter checks the paper's claims with, from the ``probe_layers`` tables of
    the post-shift model (``tables``: target -> table, for "row", "element" and "svd"), of the pre-shift
    model (``before``: at least "element") and the answer-0 MSE of each target (``zero``):

    - ``best layer``: the layer (from 1) where the masked-row probe has its lowest test MSE, with that
      MSE (``row MSE``), the embedding output's (``row MSE layer 0``) and answering 0's (``row MSE zero``);
      its test |cos| there (``row cos``) and the median over the other layers (``row cos others``);
    - ``missing first``, ``missing last``: the element probe's test MSE at missing entries at the first and
      the last layer, and their ratio ``missing gain`` (> 1: deeper layers read the missing value better),
      ``missing gain before`` the same ratio before the drop, ``observed max`` its largest test MSE at
      observed entries over layers 1..L;
    - ``svd cos``, ``svd MSE``, ``svd zero``: the singular-vector probe's best test |cos|, lowest test MSE
      and answering 0's MSE.
    """
    row, element, svd = (tables[target].drop(0) for target in ("row", "element", "svd"))
    best = int(row["test MSE"].idxmin())
    missing = element["test MSE missing"]
    missing_before = before["element"]["test MSE missing"]
    return {"best layer": best, "row MSE": row["test MSE"][best], "row MSE layer 0": tables["row"]["test MSE"][0],
            "row MSE zero": zero["row"], "row cos": row["test |cos|"][best],
            "row cos others": row["test |cos|"].drop(best).median(),
            "missing first": missing.iloc[0], "missing last": missing.iloc[-1],
            "missing gain": missing.iloc[0] / missing.iloc[-1],
            "missing gain before": missing_before.iloc[1] / missing_before.iloc[-1],
            "observed max": element["test MSE observed"].max(),
            "svd cos": svd["test |cos|"].max(), "svd MSE": svd["test MSE"].min(), "svd zero": zero["svd"]}


def probe_comparison(summary: dict[str, float], layers: int) -> pd.DataFrame:
    """The probing chapter's closing table: one row per claim of ``matcomp.paper.PROBING``, the paper's
    finding beside ours (from ``probe_summary`` of a ``layers``-layer model), as text."""
    s = summary
    ours = [f"layer {s['best layer']} of {layers}",
            f"{s['row MSE']:.3g} / {s['row MSE layer 0']:.3g} / {s['row MSE zero']:.3g}",
            f"{s['row cos']:.3f} / {s['row cos others']:.3f}",
            f"{s['missing gain']:.2f} ({s['missing first']:.3g} → {s['missing last']:.3g})",
            f"{s['missing gain before']:.2f}",
            f"{s['svd cos']:.3f} (MSE {s['svd MSE']:.3g}, answer 0: {s['svd zero']:.3g})"]
    return pd.DataFrame({f"paper ({PROBING_MODEL})": list(PROBING.values()), "ours": ours},
                        index=pd.Index(list(PROBING), name="claim"))
