"""Structure in the model's embeddings and hidden states, as numbers (EXPERIMENTS.md §2.8–2.9).

The paper shows pictures: the token-embedding norm is symmetric in the value, the top principal
components of the value embeddings encode magnitude and sign, position embeddings cluster by
column, and linear probes read the masked row from the hidden states of middle layers. Each
picture gets a number here: ``norm_symmetry``, ``component_correlations``, ``cluster_score``
(silhouette), and least-squares probes without intercept (``fit_probe``, ``probe_scores``),
fitted on every layer's hidden states by ``probe_layers`` for the paper's three targets
(``probe_targets``: the masked row, the element, the first left singular vector).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from sklearn.decomposition import PCA
from sklearn.metrics import silhouette_score

from matcomp.data import Batch
from matcomp.models.bert import MatrixBert
from matcomp.tokenizer import Tokenizer


@torch.no_grad()
def value_embeddings(model: MatrixBert, values: torch.Tensor) -> torch.Tensor:
    """(V, hidden): the token embeddings of ``values`` (rounded to the vocabulary's grid)."""
    return model.bert.embeddings.word_embeddings.weight[Tokenizer().encode(values)].detach().cpu()


def norm_symmetry(values: torch.Tensor, norms: torch.Tensor) -> float:
    """Mean |n(x) − n(−x)| over the values whose negation is also given, relative to the mean norm:
    0 for a norm curve symmetric around 0.

    >>> norm_symmetry(torch.tensor([-1.0, 0.0, 1.0]), torch.tensor([2.0, 1.0, 2.0]))
    0.0
    """
    index = {round(v, 2): i for i, v in enumerate(values.tolist())}
    pairs = [(i, index[round(-v, 2)]) for v, i in index.items() if v > 0 and round(-v, 2) in index]
    if not pairs:
        raise ValueError("values must hold at least one pair x, -x with x > 0")
    left, right = (torch.tensor(side) for side in zip(*pairs))
    return ((norms[left] - norms[right]).abs().mean() / norms.mean()).item()


def principal_components(points: torch.Tensor, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The projections (N, k) of ``points`` (N, d) on their top ``k`` principal components, and the
    fraction of variance each explains."""
    if not 1 <= k <= min(points.shape):
        raise ValueError(f"k must be in [1, {min(points.shape)}]; got {k}")
    pca = PCA(n_components=k, svd_solver="full").fit(np.asarray(points, dtype=np.float64))
    return pca.transform(np.asarray(points, dtype=np.float64)), pca.explained_variance_ratio_


def component_correlations(projections: np.ndarray, values: torch.Tensor) -> pd.DataFrame:
    """Pearson correlation of each component (columns ``PC1``, ``PC2``, …) with |x| and sign(x)."""
    x = np.asarray(values, dtype=np.float64)
    features = {"|x|": np.abs(x), "sign(x)": np.sign(x)}
    return pd.DataFrame({f"PC{j + 1}": [np.corrcoef(projections[:, j], f)[0, 1] for f in features.values()]
                         for j in range(projections.shape[1])}, index=list(features))


def position_groups(n_rows: int, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """The row and the column of every position 0..m·n−1 (row-major).

    >>> [a.tolist() for a in position_groups(2, 3)]
    [[0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2]]
    """
    positions = np.arange(n_rows * n_cols)
    return positions // n_cols, positions % n_cols


def cluster_score(points: torch.Tensor, labels) -> float:
    """Silhouette score of ``points`` (N, d) grouped by ``labels`` (Euclidean): near 1 for tight,
    separated groups, near 0 when the labels do not match the geometry."""
    labels = np.asarray(labels)
    if not 2 <= len(np.unique(labels)) < len(labels):
        raise ValueError(f"labels must form between 2 and N - 1 = {len(labels) - 1} groups; "
                         f"got {len(np.unique(labels))}")
    return float(silhouette_score(np.asarray(points, dtype=np.float64), labels))


def fit_probe(features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(d, t): the least-squares linear map from features (N, d) to targets (N, t), no intercept."""
    if features.shape[0] != targets.shape[0]:
        raise ValueError(f"features and targets must have the same number of rows; got {features.shape[0]} "
                         f"and {targets.shape[0]}")
    return torch.linalg.lstsq(features.double(), targets.double()).solution


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


@torch.no_grad()
def layer_features(model: MatrixBert, batch: Batch) -> list[torch.Tensor]:
    """The embedding output (index 0) and the output of each layer 1..L as (B·S, hidden) feature rows."""
    device = next(model.parameters()).device
    states = model.hidden_states(batch.ids.to(device))
    return [h.reshape(-1, h.shape[-1]).float().cpu() for h in states]


def probe_layers(model: MatrixBert, train: Batch, test: Batch, target: str) -> pd.DataFrame:
    """One least-squares probe per layer from hidden states to ``target``, fitted on ``train`` and
    scored on both: MSE and mean |cosine| (row and svd targets), and for ``"element"`` the test MSE
    at missing and at observed entries. Indexed by layer, counted from 1 as in the paper; layer 0,
    the embedding output (token + position, before any attention), is a baseline the paper omits."""
    if target not in PROBE_TARGETS:
        raise ValueError(f"target must be one of {PROBE_TARGETS}; got {target!r}")
    y_train, y_test = probe_targets(train, target), probe_targets(test, target)
    missing = ~test.observed.reshape(-1)
    rows = []
    for layer, (h_train, h_test) in enumerate(zip(layer_features(model, train), layer_features(model, test))):
        weights = fit_probe(h_train, y_train)
        fit, held_out = probe_scores(weights, h_train, y_train), probe_scores(weights, h_test, y_test)
        row = {"layer": layer, "train MSE": fit["mse"], "test MSE": held_out["mse"]}
        if target == "element":
            error = ((h_test.double() @ weights - y_test.double()) ** 2).squeeze(-1)
            row |= {"test MSE missing": error[missing].mean().item(),
                    "test MSE observed": error[~missing].mean().item()}
        else:
            row |= {"train |cos|": fit["abs_cos"], "test |cos|": held_out["abs_cos"]}
        rows.append(row)
    return pd.DataFrame(rows).set_index("layer")
