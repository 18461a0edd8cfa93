import pytest

from matcomp.analysis.ood import axis_variants, default_axes, distribution_variants, shifted_losses
from matcomp.config import DataConfig, ModelConfig
from matcomp.data import second_moment
from matcomp.models.factory import build_model


@pytest.fixture(scope="module")
def model():
    return build_model(ModelConfig(hidden=16, layers=1, heads=2, max_positions=32), seed=0).eval()


def test_variants_change_one_field():
    data = DataConfig(n_rows=4, n_cols=4, rank=1, p_mask=0.3)
    columns = axis_variants(data, "columns", [3, 5])
    assert {k: (d.n_rows, d.n_cols) for k, d in columns.items()} == {3: (4, 3), 5: (4, 5)}
    assert [d.rank for d in axis_variants(data, "rank", [1, 2]).values()] == [1, 2]
    assert default_axes(data) == {"rank": [1, 2, 3, 4], "rows": [2, 3, 4, 5, 6], "columns": [2, 3, 4, 5, 6]}
    assert default_axes(DataConfig(n_rows=2, n_cols=3, rank=1), reach=3)["rows"] == [1, 2, 3, 4, 5]
    shifted = distribution_variants(data)
    assert shifted["trained"] == data and second_moment(shifted["gaussian"]) == pytest.approx(0.25 ** 2)
    assert second_moment(shifted["laplace"]) == pytest.approx((2 * 0.25 ** 2) ** 2)
    with pytest.raises(ValueError, match="axis must be one of"):
        axis_variants(data, "depth", [1])
    with pytest.raises(ValueError, match="data.rank"):
        axis_variants(data, "rank", [5])  # a rank above min(m, n) is named by the config


def test_shifted_losses_score_both_methods_against_answering_zero(model):
    data = DataConfig(n_rows=4, n_cols=4, rank=1, p_mask=0.3)
    table = shifted_losses(model, axis_variants(data, "rows", [3, 4]), samples=32)
    assert list(table.index) == [(3, "BERT"), (3, "nuclear norm min"), (4, "BERT"), (4, "nuclear norm min")]
    nuclear = table.xs("nuclear norm min", level="method")
    assert (nuclear["L_obs"] < 1e-6).all()  # it keeps the observed entries
    assert (nuclear["L_mask / E[X²]"] < 0.8).all()  # and completes rank-1 matrices far better than 0
    untrained = table.xs("BERT", level="method")  # a random model is no completer
    assert (untrained["L_mask / E[X²]"] > 0.8).all()
    assert (table["L_mask / E[X²]"] == table["L_mask"] / table["E[X²]"]).all()


def test_shifted_losses_refuse_shapes_beyond_the_positions(model):
    data = DataConfig(n_rows=4, n_cols=4, rank=1)
    with pytest.raises(ValueError, match="variant 9: 4x9 needs 36 positions; the model has 32"):
        shifted_losses(model, axis_variants(data, "columns", [9]), samples=4)
    with pytest.raises(ValueError, match="samples must be >= 1"):
        shifted_losses(model, axis_variants(data, "columns", [4]), samples=0)


def test_relative_curves_divide_l_mask_by_each_runs_second_moment():
    from types import SimpleNamespace

    import pandas as pd

    from matcomp.analysis.ood import relative_curves

    metrics = pd.DataFrame({"step": [1, 2, 3], "L_mask": [0.1, 0.2, 0.4], "L": [1.0, 1.0, 1.0]})
    uniform = SimpleNamespace(metrics=metrics, config=SimpleNamespace(data=DataConfig(n_rows=4, n_cols=4, rank=1)))
    gauss = SimpleNamespace(metrics=metrics, config=SimpleNamespace(data=DataConfig(
        n_rows=4, n_cols=4, rank=2, distribution="gaussian", scale=1.0, clamp=True)))
    curves = relative_curves({"uniform": uniform, "gaussian": gauss}, steps=2)
    assert curves["uniform"]["L_mask"].tolist() == pytest.approx([0.9, 1.8])  # / (1/9)
    assert curves["gaussian"]["L_mask"].tolist() == pytest.approx([0.05, 0.1])  # / r = 2
    assert curves["uniform"]["L"].tolist() == [1.0, 1.0] and metrics["L_mask"].tolist() == [0.1, 0.2, 0.4]
