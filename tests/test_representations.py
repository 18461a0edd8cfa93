import numpy as np
import pytest
import torch

from matcomp.analysis.representations import (
    cluster_score,
    component_correlations,
    fit_probe,
    norm_symmetry,
    principal_components,
    probe_layers,
    probe_scores,
    probe_targets,
    value_embeddings,
)
from matcomp.config import DataConfig, ModelConfig
from matcomp.data import sample_batch
from matcomp.models.factory import build_model


def test_a_probe_recovers_a_planted_linear_map_and_generalises():
    gen = torch.Generator().manual_seed(0)
    W = torch.randn(16, 3, generator=gen, dtype=torch.float64)
    train, test = torch.randn(2000, 16, generator=gen), torch.randn(500, 16, generator=gen)
    noise = 0.01
    fitted = fit_probe(train, train.double() @ W + noise * torch.randn(2000, 3, generator=gen, dtype=torch.float64))
    assert torch.allclose(fitted, W, atol=2e-3)
    scores = probe_scores(fitted, test, test.double() @ W)
    assert scores["mse"] < 1e-5 and scores["abs_cos"] > 0.9999
    unrelated = probe_scores(fitted, test, torch.randn(500, 3, generator=gen))
    assert unrelated["mse"] > 1 and unrelated["abs_cos"] < 0.9


def test_cluster_score_separates_clustered_points_from_shuffled_labels():
    gen = np.random.default_rng(0)
    centres = np.array([[0, 0], [10, 0], [0, 10]])
    labels = np.repeat([0, 1, 2], 30)
    points = centres[labels] + gen.normal(size=(90, 2))
    assert cluster_score(points, labels) > 0.8
    assert abs(cluster_score(points, gen.permutation(labels))) < 0.15
    with pytest.raises(ValueError, match="between 2 and N - 1"):
        cluster_score(points, np.zeros(90))


def test_norm_symmetry_and_components_of_a_built_embedding():
    x = torch.linspace(-1, 1, 201)
    assert norm_symmetry(x, 1 + x.abs()) == pytest.approx(0.0, abs=1e-6)
    assert norm_symmetry(x, 1 + x) > 0.5
    # points whose first direction is |x| and second sign(x): PC correlations must show it
    jitter = 0.01 * torch.randn(201, generator=torch.Generator().manual_seed(0))
    points = torch.stack([3 * x.abs(), torch.sign(x), jitter], 1)
    projections, explained = principal_components(points, k=2)
    corr = component_correlations(projections, x).abs()
    assert corr.loc["sign(x)"].max() > 0.99 and corr.loc["|x|"].max() > 0.99 and explained.sum() > 0.99
    with pytest.raises(ValueError, match="k must be in"):
        principal_components(points, k=5)


def test_value_embeddings_are_the_rows_of_the_value_tokens():
    model = build_model(ModelConfig(hidden=16, layers=1, heads=2), seed=0)
    emb = value_embeddings(model, torch.tensor([0.0, 0.44]))
    weight = model.bert.embeddings.word_embeddings.weight
    assert torch.equal(emb[1], weight[1045].detach()) and torch.equal(emb[0], weight[1001].detach())


def test_svd_target_is_the_normalised_column_space_of_a_rank_one_matrix():
    batch = sample_batch(DataConfig(n_rows=4, n_cols=5, rank=1), 8, torch.Generator().manual_seed(0))
    u = probe_targets(batch, "svd").reshape(8, 20, 4)
    assert torch.equal(u[:, 0], u[:, 19])  # one vector for every position of a matrix
    column = batch.values[:, :, 0] / batch.values[:, :, 0].norm(dim=1, keepdim=True)
    assert torch.allclose((u[:, 0] * column).sum(-1).abs(), torch.ones(8), atol=1e-2)  # ±u ∝ any column (X is rounded)
    rows = probe_targets(batch, "row").reshape(8, 4, 5, 5)
    assert torch.equal(rows[:, 2, 3], batch.values[:, 2] * batch.observed[:, 2])
    with pytest.raises(ValueError, match="target must be one of"):
        probe_targets(batch, "column")


@pytest.mark.parametrize("target", ["row", "element", "svd"])
def test_probe_layers_fits_every_layer_no_worse_than_predicting_zero(target):
    data = DataConfig(n_rows=3, n_cols=3, rank=1)
    model = build_model(ModelConfig(hidden=16, layers=2, heads=2), seed=0)
    train, test = (sample_batch(data, n, torch.Generator().manual_seed(s)) for n, s in ((128, 1), (64, 2)))
    table = probe_layers(model, train, test, target)
    assert list(table.index) == [0, 1, 2]
    assert (table["train MSE"] <= (probe_targets(train, target) ** 2).mean().item() + 1e-9).all()
    extra = ["test MSE missing", "test MSE observed"] if target == "element" else ["train |cos|", "test |cos|"]
    assert set(extra) <= set(table.columns) and np.isfinite(table.to_numpy()).all()
