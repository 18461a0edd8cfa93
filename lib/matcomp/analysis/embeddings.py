"""Structure in the model's embeddings, as numbers (NeurIPS §3.3, Figs. 7, 9–10).

The paper shows pictures: the token-embedding norm is symmetric in the value, the top principal
components of the value embeddings encode magnitude and sign, and position embeddings cluster by
column. Each picture gets a number here: ``norm_symmetry``, ``component_correlations`` and
``cluster_score`` (silhouette), over training (``silhouettes_over_training``) and seeds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from sklearn.decomposition import PCA
from sklearn.manifold import TSNE
from sklearn.metrics import silhouette_score

from matcomp import checks
from matcomp.config import DataConfig
from matcomp.data import data_config, matrix_count, sample_batch
from matcomp.models.bert import MatrixBert
from matcomp.runs.run import Run
from matcomp.seeding import MAX_TSNE_SEED, analysis_generator
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
    samples = matrix_count(data_config(data, "task_values: data"), samples, "task_values: samples")
    limit = sample_batch(data, samples, analysis_generator(seed, "task_values: seed")).values.abs().max().item()
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
    positions but for a drop around positions 21–26 of 0–48, most of the middle row): their spread (sd / mean),
    the ``lowest`` positions and the middle row, counted from 0 as the figure's axis and the book count them,
    and the middle row's mean norm against the other rows' (in sd of the others' norms; negative: lower).

    >>> norms = 1 + 0.1 * (torch.arange(49) % 2); norms[21:27] = 0.5
    >>> p = position_norm_profile(norms, 7, 7); p["lowest"], p["middle row"], round(p["middle row z"], 1)
    ([21, 22, 23, 24, 25, 26], 3, -9.1)
    """
    norms = norms.double()
    middle = n_rows // 2
    rows = torch.arange(n_rows * n_cols) // n_cols
    inside, outside = norms[rows == middle], norms[rows != middle]
    return {"spread": (norms.std() / norms.mean()).item(),
            "lowest": sorted(torch.argsort(norms)[:lowest].tolist()), "middle row": middle,
            "middle row z": ((inside.mean() - outside.mean()) / outside.std()).item()}


def middle_row_z(run: Run, step: int) -> float:
    """``position_norm_profile``'s middle-row reading on ``run``'s position embeddings at ``step``: the claim
    (d) number, read seed by seed."""
    d = run.config.data
    norms = position_embeddings(run.bert(step), d.n_rows, d.n_cols).norm(dim=1)
    z = position_norm_profile(norms, d.n_rows, d.n_cols)["middle row z"]
    assert isinstance(z, float)
    return z


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


def silhouettes_by_seed(runs: dict[int, Run]) -> pd.DataFrame:
    """``silhouettes_over_training`` of each run of ``runs`` (seed -> run) at its saved checkpoints, indexed
    by seed and step, with "from drop" (the step minus the run's drop step; missing without a drop), so
    that seeds that leave their plateau at different steps read side by side: does the column grouping
    appear at the drop in every run?"""
    tables = {}
    for seed, run in runs.items():
        table = silhouettes_over_training(run)
        half = run.drop.half_step
        table["from drop"] = table.index - half if half is not None else float("nan")
        tables[seed] = table
    return pd.concat(tables, names=["seed", "step"])


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
    seed = checks.integer(seed, "tsne_layout: seed", 0, MAX_TSNE_SEED)
    return TSNE(n_components=2, perplexity=min(30.0, (len(points) - 1) / 3), random_state=seed,
                init="pca").fit_transform(np.asarray(points))


def arrangement_correlation(final: torch.Tensor, earlier: torch.Tensor, k: int = 2) -> float:
    """How closely the value tokens' embeddings ``earlier`` (V, d) lie in their ``final`` arrangement (V, d), as the
    paper's Fig. 9 shows it: both seen on ``final`` 's top ``k`` principal directions (``on_top_components``), the
    correlation of the two pictures' coordinates on each direction, averaged over the ``k``: 1 is the final picture
    up to a stretch and a shift of each axis, about 0 an arrangement unrelated to it (an untrained embedding).

    >>> final = torch.tensor([[-2.0, 0.0, 1.0], [2.0, 0.0, 1.0], [0.0, 1.0, 1.0], [0.0, -1.0, 1.0]])
    >>> stretched, shuffled = 3 * final + 1, final.flip(0)  # each token's place taken by another's
    >>> round(arrangement_correlation(final, stretched), 6), round(arrangement_correlation(final, shuffled), 6)
    (1.0, 0.0)
    """
    seen = [on_top_components(final, points, k).double() for points in (final, earlier)]
    return float(np.mean([np.corrcoef(seen[0][:, i], seen[1][:, i])[0, 1] for i in range(k)]))


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
