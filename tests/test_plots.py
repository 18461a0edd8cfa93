import numpy as np
import pandas as pd

from matcomp.book.plots import curves_together, loss_curves, ood_panels
from matcomp.drop import detect_drop


def test_loss_curves_draws_three_smoothed_losses_and_the_drop():
    step = np.arange(1, 2001)
    l_mask = np.where(step < 1000, 0.11, 0.01)
    metrics = pd.DataFrame({"step": step, "L_mask": l_mask, "L_obs": np.full(2000, 1e-4), "L": 0.3 * l_mask})
    drop = detect_drop(metrics)
    ax = loss_curves(metrics, drop=drop, plateau=1 / 9)
    labels = [line.get_label() for line in ax.get_lines()]
    assert sum(label.startswith("$L") for label in labels) == 3
    assert any(label == f"drop (step {drop.half_step})" for label in labels)
    assert ax.get_yscale() == "log"
    smoothed_mask = ax.get_lines()[3].get_ydata()  # raw L_mask first, then L, L_obs, L_mask
    assert np.nanmax(smoothed_mask) == 0.11 and np.nanmin(smoothed_mask) == 0.01


def test_p_mask_sweep_draws_a_line_per_method_on_two_log_panels():
    from matcomp.book.plots import TRUTH, p_mask_sweep

    methods = ["BERT", "nuclear norm min", TRUTH]
    sweep = pd.DataFrame([{"method": m, "p_mask": p, "L": 0.01 * (k + 1) * p, "nuclear_norm": 3.0 + k}
                          for k, m in enumerate(methods) for p in (0.1, 0.3, 0.5)])
    fig = p_mask_sweep(sweep, train_p_mask=0.3, title="sweep")
    mse, norm = fig.axes
    assert mse.get_yscale() == norm.get_yscale() == "log"
    curves = {ax: [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
              for ax in (mse, norm)}
    assert curves[mse] == methods[:2] and curves[norm] == methods  # the truth has no MSE
    assert list(mse.get_lines()[0].get_ydata()) == [0.001, 0.003, 0.005]
    assert [line.get_xdata()[0] for line in mse.get_lines() if line.get_linestyle() == ":"] == [0.3]
    assert fig._suptitle.get_text() == "sweep"


def test_l_mask_twin_draws_the_smoothed_loss_on_a_second_axis_and_the_drop():
    import matplotlib.pyplot as plt

    from matcomp.book.plots import l_mask_twin

    step = np.arange(1, 2001)
    metrics = pd.DataFrame({"step": step, "L_mask": np.where(step < 1000, 0.11, 0.01)})
    ax = plt.subplots()[1]
    twin = l_mask_twin(ax, metrics, detect_drop(metrics))
    assert twin is not ax and np.nanmax(twin.get_lines()[0].get_ydata()) == 0.11
    assert len(ax.get_lines()) == 1  # the drop line


def test_measure_panels_draws_one_panel_per_measure_with_its_onset():
    import matplotlib.pyplot as plt

    from matcomp.book.plots import measure_panels

    step = np.arange(1, 2001)
    metrics = pd.DataFrame({"step": step, "L_mask": np.where(step < 1000, 0.11, 0.01)})
    table = pd.DataFrame({"a": np.arange(5.0), "b": np.ones(5), "c": np.zeros(5)}, index=[0, 500, 1000, 1500, 2000])
    fig = measure_panels(table, metrics, detect_drop(metrics), onsets={"a": 500, "b": None}, columns=2)
    shown = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in shown] == ["a", "b", "c"]
    assert len(shown[0].get_lines()) == 3 and len(shown[1].get_lines()) == 2  # measure, onset dot, drop line
    assert sum(not ax.get_visible() for ax in fig.axes) == 1  # the fourth slot of the 2 x 2 grid
    plt.close(fig)


def test_curves_together_draws_one_labelled_smoothed_curve_per_run():
    step = np.arange(1, 1001)
    curves = {"fast": pd.DataFrame({"step": step, "L_mask": np.where(step < 200, 0.11, 0.02)}),
              "slow": pd.DataFrame({"step": step[:600], "L_mask": np.full(600, 0.11)})}
    ax = curves_together(curves, "L_mask", level=0.11, styles={"slow": {"color": "black"}})
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"fast", "slow", "copying plateau (0.11)"}
    assert len(lines["slow"].get_xdata()) == 600 and lines["slow"].get_color() == "black"
    assert np.nanmin(lines["fast"].get_ydata()) == 0.02 and ax.get_yscale() == "log"


def test_ood_panels_draw_a_line_per_method_per_axis_and_measure():
    index = pd.MultiIndex.from_product([[2, 3, 4], ["BERT", "nuclear norm min"]], names=["variant", "method"])
    table = pd.DataFrame({"L_mask / E[X²]": [1.2, 0.5, 0.9, 0.4, 0.2, 0.25], "nuclear_norm": [1, 1, 2, 2, 3, 3.0]},
                         index=index)
    fig = ood_panels({"rows": table, "columns": table}, {"rows": 4, "columns": 4})
    top = fig.axes[0]
    lines = {line.get_label(): line for line in top.get_lines() if not line.get_label().startswith("_")}
    assert set(lines) == {"BERT", "nuclear norm min"} and len(fig.axes) == 4
    assert list(lines["BERT"].get_ydata()) == [1.2, 0.9, 0.2] and list(lines["BERT"].get_xdata()) == [2, 3, 4]


def test_variant_curves_draw_a_panel_per_axis_with_a_curve_per_value():
    import matplotlib.pyplot as plt

    from matcomp.book.plots import variant_curves

    step = np.arange(1, 1001)
    table = pd.DataFrame({"step": step, "L_mask": np.full(1000, 0.11)})
    fig = variant_curves({("width", 32): table, ("width", 64): table, ("depth", 2): table}, {"width": "hidden",
                         "depth": "layers"}, steps=500, level=0.11)
    left, right = fig.axes
    assert [line.get_label() for line in left.get_lines()] == ["hidden 32", "hidden 64", "copying plateau (0.11)"]
    assert [line.get_label() for line in right.get_lines()][0] == "layers 2" and right.get_title().startswith("depth")
    assert left.get_lines()[0].get_xdata().max() <= 500
    plt.close(fig)
