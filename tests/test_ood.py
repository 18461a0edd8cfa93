import pandas as pd
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
    from matcomp.book.chapters.ood import relative_losses

    (relative,) = relative_losses({"rows": table}).values()  # a column per method, a row per number of rows
    assert relative.index.name == "rows" and list(relative.index) == [3, 4]
    assert relative.loc[4, "nuclear norm min"] == table.loc[(4, "nuclear norm min"), "L_mask / E[X²]"]


def test_shifted_losses_refuse_shapes_beyond_the_positions(model):
    data = DataConfig(n_rows=4, n_cols=4, rank=1)
    with pytest.raises(ValueError, match="variant 9: 4x9 needs 36 positions; the model has 32"):
        shifted_losses(model, axis_variants(data, "columns", [9]), samples=4)
    with pytest.raises(ValueError, match="samples must be an integer >= 1"):
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


def _fake_run(rank: int, l_mask: list[float], distribution: str = "uniform", name: str = "r"):
    """A stand-in for a Run: a metrics table with L_mask, read by detect_drop and final_losses."""
    from types import SimpleNamespace

    from matcomp.drop import detect_drop

    steps = list(range(1, len(l_mask) + 1))
    metrics = pd.DataFrame({"step": steps, "L_mask": l_mask, "L": l_mask, "L_obs": [0.0] * len(steps)})
    data = DataConfig(n_rows=4, n_cols=4, rank=rank, distribution=distribution,
                      **({"scale": 1.0, "clamp": True} if distribution == "gaussian" else {}))
    return SimpleNamespace(metrics=metrics, drop=detect_drop(metrics), last_step=steps[-1],
                           config=SimpleNamespace(data=data, run_id=name))


def test_the_rank_panel_reads_a_rank_2_model_only_if_it_dropped():
    from matcomp.analysis.ood import rank_panel, rank_panel_config
    from matcomp.presets import preset_config

    cfg = preset_config("cpu")
    assert rank_panel_config(cfg, 5000, 2000).data.rank == 2
    assert rank_panel_config(cfg, 5000, 2000).train.stop_after_drop == 2000
    assert rank_panel_config(cfg.override({"data.rank": 2}), 5000) is None  # trained on rank 2 already
    own = _fake_run(1, [0.11] * 3000)
    dropped = _fake_run(2, [0.22] * 1500 + [0.02] * 1500)
    flat = _fake_run(2, [0.22] * 3000)
    assert rank_panel(own, 2500, dropped)[:2] == (dropped, 3000)
    assert "trained on rank 2" in rank_panel(own, 2500, dropped)[2]
    run, step, title = rank_panel(own, 2500, flat)
    assert (run, step) == (own, 2500) and "extrapolation from rank 1" in title and "no drop by step 3,000" in title
    assert rank_panel(own, 2500, None)[2] == "varying the rank (model trained on rank 1)"


def test_the_factor_table_counts_the_seeds_that_drop_within_the_budget():
    from matcomp.analysis.ood import training_table
    from matcomp.book.chapters.ood import factor_table

    runs = {("uniform factors", 0): _fake_run(1, [0.11] * 1000 + [0.02] * 1000, name="u0"),
            ("uniform factors", 1): _fake_run(1, [0.11] * 1500 + [0.02] * 500, name="u1"),
            ("Gaussian factors", 0): _fake_run(1, [1.0] * 2000, "gaussian", name="g0"),
            ("Gaussian factors", 1): _fake_run(1, [1.0] * 1800 + [0.1] * 200, "gaussian", name="g1")}
    table = training_table(runs, steps=2000)
    assert list(table.index.names) == ["factors", "seed"] and table.loc[("Gaussian factors", 0), "run"] == "g0"
    assert pd.isna(table.loc[("Gaussian factors", 0), "drop step"])
    by_factors = factor_table(table, 2000)
    assert by_factors["seeds that drop within 2,000 steps"].tolist() == ["2 of 2", "1 of 2"]
    assert by_factors.loc["Gaussian factors", "at steps"] != "none" and by_factors.index[0] == "uniform factors"
    none_drop = factor_table(training_table({k: v for k, v in runs.items() if k[1] == 0}, steps=1500), 1500)
    gaussian = none_drop.loc["Gaussian factors"]
    assert (gaussian["seeds that drop within 1,500 steps"], gaussian["at steps"]) == ("0 of 1", "none")
    assert none_drop.loc["Gaussian factors", "final L_mask / E[X²]"] == "1.00–1.00"
