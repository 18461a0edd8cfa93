import numpy as np
import pytest
import torch

from matcomp.analysis.embeddings import (
    cluster_score,
    component_correlations,
    norm_symmetry,
    principal_components,
    value_embeddings,
)
from matcomp.analysis.probing import fit_probe, probe_layers, probe_scores, probe_targets
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


def test_a_probe_ignores_a_null_direction_of_the_features_whatever_its_rounding():
    # a last column that is the sum of two others, as a LayerNorm's states sum to a constant: the fit must
    # not put weight on the fp32 rounding that breaks the tie, or held-out predictions follow the rounding
    gen = torch.Generator().manual_seed(1)
    base, held_out = torch.randn(3000, 8, generator=gen), torch.randn(400, 8, generator=gen)
    with_null = [torch.cat([x, x[:, :1] + x[:, 1:2]], 1) for x in (base, held_out)]
    targets = base.double() @ torch.randn(8, 1, generator=gen, dtype=torch.float64) \
        + 0.1 * torch.randn(3000, 1, generator=gen, dtype=torch.float64)  # what no probe reads
    rounding = with_null[0] + 1e-7 * torch.randn(3000, 9, generator=gen)
    a, b = fit_probe(with_null[0], targets), fit_probe(rounding, targets)
    assert a.abs().max() < 10 and b.abs().max() < 10
    assert torch.allclose(with_null[1].double() @ a, with_null[1].double() @ b, atol=1e-4)


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


def test_the_element_probe_s_test_mse_is_its_squared_error_pooled_over_missing_or_observed_entries():
    """As ``probe_layers`` wrote it by hand before ``metrics.pooled_loss``: the same to rounding (summed per matrix
    now, over one flat index then)."""
    from matcomp.analysis.probing import layer_features

    data = DataConfig(n_rows=3, n_cols=3, rank=1)
    model = build_model(ModelConfig(hidden=16, layers=2, heads=2), seed=0)
    train, test = (sample_batch(data, n, torch.Generator().manual_seed(s)) for n, s in ((128, 1), (64, 2)))
    table = probe_layers(model, train, test, "element")
    y_train, y_test = probe_targets(train, "element"), probe_targets(test, "element")
    missing = ~test.observed.reshape(-1)
    for layer, (h_train, h_test) in enumerate(zip(layer_features(model, train), layer_features(model, test))):
        error = ((h_test.double() @ fit_probe(h_train, y_train) - y_test.double()) ** 2).squeeze(-1)
        assert table.loc[layer, "test MSE missing"] == pytest.approx(error[missing].mean().item(), rel=1e-12)
        assert table.loc[layer, "test MSE observed"] == pytest.approx(error[~missing].mean().item(), rel=1e-12)


def test_task_values_cover_the_sampled_range_on_the_token_grid():
    from matcomp.analysis.embeddings import task_values

    values = task_values(DataConfig(n_rows=3, n_cols=3, rank=1), 256)
    assert values[0] == -values[-1] and 0.8 < values[-1] <= 1.0  # |U V^T| <= 1 for rank 1
    assert torch.allclose(torch.diff(values), torch.full((len(values) - 1,), 0.01), atol=1e-6)
    assert torch.equal(values, task_values(DataConfig(n_rows=3, n_cols=3, rank=1), 256))  # seeded


def test_position_embeddings_are_the_first_rows_of_the_position_table():
    from matcomp.analysis.embeddings import position_embeddings

    model = build_model(ModelConfig(hidden=16, layers=1, heads=2, max_positions=32), seed=0)
    table = model.bert.embeddings.position_embeddings.weight
    rows = position_embeddings(model, 3, 4)
    assert rows.shape == (12, 16) and torch.equal(rows, table[:12].detach()) and not rows.requires_grad
    with pytest.raises(ValueError, match="a 6x6 matrix needs 36 positions; the model has 32"):
        position_embeddings(model, 6, 6)


def test_position_silhouettes_tell_row_clusters_from_column_clusters():
    from matcomp.analysis.embeddings import position_silhouettes

    rows = torch.arange(12) // 4  # 3 x 4 positions, row-major
    points = torch.stack([10.0 * rows, 0.01 * torch.arange(12)], 1)  # grouped by row only
    scores = position_silhouettes(points, 3, 4)
    assert list(scores) == ["by column", "by row"]
    assert scores["by row"] > 0.9 and scores["by column"] < 0


def test_tsne_layout_is_two_dimensional_and_seeded():
    from matcomp.analysis.embeddings import tsne_layout

    points = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    layout = tsne_layout(points, seed=3)
    assert layout.shape == (16, 2) and np.array_equal(layout, tsne_layout(points, seed=3))


def test_on_top_components_uses_the_reference_axes_and_centre():
    from matcomp.analysis.embeddings import on_top_components

    reference = torch.tensor([[-3.0, 0.0, 1.0], [3.0, 0.0, 1.0], [0.0, 1.0, 1.0], [0.0, -1.0, 1.0]])
    xy = on_top_components(reference, torch.tensor([[2.0, 0.5, 1.0], [0.0, 0.0, 5.0]]))
    assert torch.allclose(xy.abs(), torch.tensor([[2.0, 0.5], [0.0, 0.0]]))  # the third axis is not kept
    assert torch.allclose(on_top_components(reference, reference).abs()[:, 0], torch.tensor([3.0, 3.0, 0.0, 0.0]))


def test_answer_zero_mse_is_the_mean_squared_target():
    from matcomp.analysis.probing import answer_zero_mse
    from matcomp.data import Batch

    batch = Batch(ids=torch.zeros(1, 4, dtype=torch.long), values=torch.tensor([[[1.0, 2.0], [3.0, 4.0]]]),
                  observed=torch.tensor([[[True, False], [True, True]]]))
    assert answer_zero_mse(batch, "element") == pytest.approx(7.5)
    assert answer_zero_mse(batch, "element", missing_only=True) == pytest.approx(4.0)
    assert answer_zero_mse(batch, "row") == pytest.approx((1 + 1 + 25 + 25) / 8)  # rows (1, 0), (3, 4), twice


def test_probe_summary_and_comparison_read_the_tables():
    import pandas as pd

    from matcomp.analysis.probing import probe_comparison, probe_summary
    from matcomp.paper import PROBING

    index = pd.Index([0, 1, 2, 3], name="layer")
    row = pd.DataFrame({"test MSE": [0.08, 0.07, 0.05, 0.06], "test |cos|": [0.3, 0.4, 0.8, 0.5]}, index=index)
    element = pd.DataFrame({"test MSE missing": [0.12, 0.1, 0.05, 0.02],
                            "test MSE observed": [0.01, 0.004, 0.003, 0.001]}, index=index)
    svd = pd.DataFrame({"test MSE": [0.2, 0.21, 0.19, 0.2], "test |cos|": [0.4, 0.45, 0.5, 0.42]}, index=index)
    before = {"element": element.assign(**{"test MSE missing": [0.11, 0.1, 0.1, 0.1]})}
    summary = probe_summary({"row": row, "element": element, "svd": svd}, before, {"row": 0.09, "svd": 0.25})
    assert summary["best layer"] == 2 and summary["row MSE"] == 0.05 and summary["row MSE layer 0"] == 0.08
    assert summary["row cos"] == 0.8 and summary["row cos others"] == 0.45  # median of layers 1 and 3
    assert summary["missing gain"] == pytest.approx(5.0) and summary["missing gain before"] == pytest.approx(1.0)
    assert summary["observed max"] == 0.004 and summary["svd cos"] == 0.5 and summary["svd MSE"] == 0.19
    table = probe_comparison(summary, layers=3)
    assert list(table.index) == list(PROBING) and table.columns[0].startswith("paper (")
    assert table["ours"].iloc[0] == "layer 2 of 3" and table["ours"].iloc[3] == "5.00 (0.1 → 0.02)"


def test_silhouettes_over_training_and_over_seeds_read_each_checkpoint(micro, store):
    from matcomp.analysis.embeddings import (
        position_embeddings,
        position_silhouettes,
        silhouettes_over_seeds,
        silhouettes_over_training,
    )
    from matcomp.runs.store import get_or_train

    micro = micro.override({"train.steps": 200, "train.checkpoint_every": 100, "train.checkpoint_steps": []})
    run = get_or_train(micro, progress=False)  # long enough for the drop detector to read a plateau
    table = silhouettes_over_training(run)
    assert list(table.index) == run.steps and list(table.columns) == ["by column", "by row"]
    last = position_silhouettes(position_embeddings(run.checkpoint(run.steps[-1]), 3, 3), 3, 3)
    assert table.loc[run.steps[-1]].to_dict() == pytest.approx(last)
    second = get_or_train(micro.override({"train.seed": micro.train.seed + 1}), progress=False)
    seeds = silhouettes_over_seeds({micro.train.seed: run, micro.train.seed + 1: second})
    assert list(seeds.index) == [micro.train.seed, micro.train.seed + 1]
    assert seeds.loc[micro.train.seed, "by row"] == pytest.approx(last["by row"])
    assert seeds.loc[micro.train.seed + 1, "by row"] != seeds.loc[micro.train.seed, "by row"]
