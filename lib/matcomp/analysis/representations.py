"""Structure in the model's embeddings and hidden states, as numbers (NeurIPS §3.2.2, Figs. 6–7, 9–10,
App. K).

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
from sklearn.manifold import TSNE
from sklearn.metrics import silhouette_score

from matcomp.config import DataConfig
from matcomp.data import Batch, sample_batch
from matcomp.models.bert import MatrixBert
from matcomp.paper import PROBING, PROBING_MODEL
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator
from matcomp.tokenizer import Tokenizer


@torch.no_grad()
def value_embeddings(model: MatrixBert, values: torch.Tensor) -> torch.Tensor:
    """(V, hidden): the token embeddings of ``values`` (rounded to the vocabulary's grid)."""
    return model.bert.embeddings.word_embeddings.weight[Tokenizer().encode(values)].detach().cpu()


def task_values(data: DataConfig, samples: int, seed: int = 0) -> torch.Tensor:
    """Every value token the task uses: the grid -a, -a + 0.01, ..., a, where a is the largest |X_ij|
    in ``samples`` matrices drawn from ``analysis_generator(seed)`` (rounded to the grid).

    >>> from matcomp.config import DataConfig, RunConfig
    >>> v = task_values(DataConfig(n_rows=2, n_cols=2, rank=1), 64)
    >>> bool(v[0] == -v[-1]) and bool(v[-1] <= 1) and len(v) % 2 == 1
    True
    """
    limit = sample_batch(data, samples, analysis_generator(seed)).values.abs().max().item()
    return torch.arange(-round(limit * 100), round(limit * 100) + 1) / 100


@torch.no_grad()
def position_embeddings(model: MatrixBert, n_rows: int, n_cols: int) -> torch.Tensor:
    """(m·n, hidden): the learnt position embeddings of the first m·n positions, those an m × n
    matrix (read row-major) uses; the model's table has more rows, which these matrices never reach."""
    count = n_rows * n_cols
    table = model.bert.embeddings.position_embeddings.weight
    if count > table.shape[0]:
        raise ValueError(f"a {n_rows}x{n_cols} matrix needs {count} positions; the model has {table.shape[0]}")
    return table[:count].detach().cpu()


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


def position_norm_profile(norms: torch.Tensor, n_rows: int, n_cols: int, lowest: int = 6) -> dict[str, object]:
    """The ℓ2 norms of the m·n position embeddings read against WS Fig. 8's claim (nearly constant across
    positions but for a drop around positions 21–26 of 49, most of the middle row): their spread (sd / mean),
    the ``lowest`` positions counted from 1 as the paper counts them, and the middle row's mean norm
    against the other rows' (in sd of the others' norms; negative: lower).

    >>> norms = 1 + 0.1 * (torch.arange(49) % 2); norms[21:27] = 0.5
    >>> p = position_norm_profile(norms, 7, 7); p["lowest"], p["middle row"], round(p["middle row z"], 1)
    ([22, 23, 24, 25, 26, 27], 4, -9.1)
    """
    norms = norms.double()
    middle = n_rows // 2
    rows = torch.arange(n_rows * n_cols) // n_cols
    inside, outside = norms[rows == middle], norms[rows != middle]
    return {"spread": (norms.std() / norms.mean()).item(),
            "lowest": sorted((torch.argsort(norms)[:lowest] + 1).tolist()), "middle row": middle + 1,
            "middle row z": ((inside.mean() - outside.mean()) / outside.std()).item()}


def cluster_score(points: torch.Tensor, labels) -> float:
    """Silhouette score of ``points`` (N, d) grouped by ``labels`` (Euclidean): near 1 for tight,
    separated groups, near 0 when the labels do not match the geometry."""
    labels = np.asarray(labels)
    if not 2 <= len(np.unique(labels)) < len(labels):
        raise ValueError(f"labels must form between 2 and N - 1 = {len(labels) - 1} groups; "
                         f"got {len(np.unique(labels))}")
    return float(silhouette_score(np.asarray(points, dtype=np.float64), labels))


def position_silhouettes(points: torch.Tensor, n_rows: int, n_cols: int) -> dict[str, float]:
    """``cluster_score`` of m·n position embeddings (row-major) grouped by column and by row: a
    clearly positive score "by column" and not "by row" is the paper's column clustering (Fig. 7c)."""
    rows, cols = position_groups(n_rows, n_cols)
    return {"by column": cluster_score(points, cols), "by row": cluster_score(points, rows)}


def silhouettes_over_training(run: Run, steps=None) -> pd.DataFrame:
    """``position_silhouettes`` of the position embeddings at every checkpoint of ``run`` (or at ``steps``),
    one row per step: when the grouping by row or by column appears (the paper's Fig. 10 in one number)."""
    data = run.config.data
    rows = [{"step": step, **position_silhouettes(position_embeddings(run.bert(step), data.n_rows, data.n_cols),
                                                  data.n_rows, data.n_cols)} for step in (steps or run.steps)]
    return pd.DataFrame(rows).set_index("step")


def silhouettes_over_seeds(runs: dict[int, Run]) -> pd.DataFrame:
    """For each run of ``runs`` (seed -> run): its drop step and the ``position_silhouettes`` of its final
    position embeddings, one row per seed: is the grouping the same in every run?"""
    rows = []
    for seed, run in runs.items():
        rows.append({"seed": seed, "drop step": run.drop.half_step,
                     **silhouettes_over_training(run, [run.steps[-1]]).iloc[0].to_dict()})
    return pd.DataFrame(rows).set_index("seed")


def position_grouping(silhouettes: pd.DataFrame, clear: float = 0.1) -> pd.Series:
    """"column", "row" or "neither" for each row of a table with "by column" and "by row" silhouettes
    (``silhouettes_over_seeds``): the grouping whose silhouette is at least ``clear`` and the higher.

    >>> position_grouping(pd.DataFrame({"by column": [0.3, 0.02, 0.2], "by row": [0.05, 0.04, 0.4]})).tolist()
    ['column', 'neither', 'row']
    """
    by_column, by_row = silhouettes["by column"], silhouettes["by row"]
    best = by_column.where(by_column >= by_row, by_row)
    label = pd.Series("row", index=silhouettes.index).where(by_column < by_row, "column")
    return label.where(best >= clear, "neither")


def tsne_layout(points: torch.Tensor, seed: int = 0) -> np.ndarray:
    """(N, 2): a t-SNE layout of ``points`` (N, d) for the picture of the position embeddings
    (perplexity 30, or (N - 1)/3 for fewer than 91 points; PCA start; ``seed`` fixes it)."""
    return TSNE(n_components=2, perplexity=min(30.0, (len(points) - 1) / 3), random_state=seed,
                init="pca").fit_transform(np.asarray(points))


def on_top_components(reference: torch.Tensor, points: torch.Tensor, k: int = 2) -> torch.Tensor:
    """(N, k): ``points`` (N, d) centred on ``reference`` 's mean and projected on the top ``k``
    principal directions of ``reference`` (M, d), so that the value tokens of earlier checkpoints are
    seen in the axes of the final model (the paper's Fig. 9).

    >>> ref = torch.tensor([[-2.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    >>> on_top_components(ref, torch.tensor([[3.0, 0.5]])).abs().tolist()
    [[3.0, 0.5]]
    """
    centre = reference.mean(0)
    basis = torch.linalg.svd(reference - centre, full_matrices=False).Vh[:k]
    return (points - centre) @ basis.T


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
