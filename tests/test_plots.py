import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from matcomp.book.plots.comparisons import ood_panels
from matcomp.book.plots.curves import curves_together, drop_step_strip, loss_curves, relative_strip
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
    from matcomp.analysis.evaluation import TRUTH
    from matcomp.book.plots.comparisons import p_mask_sweep

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

    from matcomp.book.plots.curves import l_mask_twin

    step = np.arange(1, 2001)
    metrics = pd.DataFrame({"step": step, "L_mask": np.where(step < 1000, 0.11, 0.01)})
    ax = plt.subplots()[1]
    twin = l_mask_twin(ax, metrics, detect_drop(metrics))
    assert twin is not ax and np.nanmax(twin.get_lines()[0].get_ydata()) == 0.11
    assert len(ax.get_lines()) == 1  # the drop line


def test_measure_panels_draws_one_panel_per_measure_with_its_onset():
    import matplotlib.pyplot as plt

    from matcomp.book.plots.progress import measure_panels

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

    from matcomp.book.plots.curves import variant_curves

    step = np.arange(1, 1001)
    table = pd.DataFrame({"step": step, "L_mask": np.full(1000, 0.11)})
    fig = variant_curves({("width", 32, 0): table, ("width", 32, 1): table, ("width", 64, 0): table,
                          ("depth", 2, 0): table}, {"width": "hidden", "depth": "layers"}, steps=500, level=0.11)
    left, right = fig.axes
    assert [line.get_label() for line in left.get_lines()][1] == "_child1"  # seed 1 shares seed 0's label
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["hidden 32", "hidden 64", "copying plateau (0.11)"]
    assert left.get_lines()[0].get_color() == left.get_lines()[1].get_color() != left.get_lines()[2].get_color()
    assert [line.get_label() for line in right.get_lines()][0] == "layers 2" and right.get_title().startswith("depth")
    assert left.get_lines()[0].get_xdata().max() <= 500
    plt.close(fig)


def test_masked_example_labels_missing_entries_mask_and_shows_the_token_ids():
    import matplotlib.pyplot as plt
    import torch

    from matcomp.book.plots.matrices import masked_example
    from matcomp.data import make_batch

    values = torch.tensor([[[0.5, -0.25], [1.0, 0.0]]])
    observed = torch.tensor([[[True, False], [True, True]]])
    fig = masked_example(make_batch(values, observed), rank=1, title="example")
    truth, masked, ids = fig.axes
    assert truth.get_title() == "$X = UV^T$ (rank 1), rounded" and fig._suptitle.get_text() == "example"
    assert [t.get_text() for t in masked.texts] == ["0.50", "MASK", "1.00", "0.00"]
    assert [t.get_text() for t in ids.texts] == ["1051", "0", "1101", "1001"]  # id = 1001 + 100x, MASK = 0
    assert masked.get_title() == "mask: 1 of 4 entries missing"
    plt.close(fig)


def test_attention_grids_draw_one_titled_subfigure_per_grid():
    import matplotlib.pyplot as plt
    import pytest

    from matcomp.book.plots.attention import attention_grids

    maps = np.full((2, 3, 4, 4), 0.25)
    fig = attention_grids({"step 10": maps, "step 20": maps}, {"step 20": [["a", "b", "c"], ["d", "e", "f"]]},
                          columns=2)
    assert [sub._suptitle.get_text() for sub in fig.subfigs] == ["step 10", "step 20"]
    assert len(fig.axes) == 12  # 2 grids x 2 layers x 3 heads
    assert [ax.get_title() for ax in fig.subfigs[1].axes][:2] == ["a", "b"]
    assert fig.subfigs[0].axes[0].get_title() == "layer 0, head 0"
    plt.close(fig)
    with pytest.raises(ValueError, match="same \\(layers, heads\\)"):
        attention_grids({"a": maps, "b": maps[:1]})


def probe_table(target: str) -> pd.DataFrame:
    """A ``probe_layers``-shaped table for layers 0-2."""
    table = pd.DataFrame({"layer": [0, 1, 2], "train MSE": [0.3, 0.2, 0.1], "test MSE": [0.4, 0.25, 0.12]})
    if target == "element":
        table["test MSE missing"], table["test MSE observed"] = [0.1, 0.05, 0.02], [0.01, 0.01, 0.005]
    else:
        table["train |cos|"], table["test |cos|"] = [0.3, 0.5, 0.7], [0.2, 0.45, 0.6]
    return table.set_index("layer")


def test_probe_panels_draw_each_target_by_layer_beside_layer_zero_and_answering_zero():
    import matplotlib.pyplot as plt

    from matcomp.book.plots.representations import probe_panels

    tables = {target: probe_table(target) for target in ("row", "element")}
    fig = probe_panels(tables, {"row": 0.5, "element": 0.11}, {"row": "masked row"}, "probes")
    top_row, top_element, bottom_row, bottom_element = fig.axes
    lines = {line.get_label(): line for line in top_row.get_lines()}
    assert list(lines["test"].get_xdata()) == [1, 2] and list(lines["test"].get_ydata()) == [0.25, 0.12]
    assert list(lines["test, layer 0"].get_ydata()) == [0.4, 0.4] and list(lines["answer 0"].get_ydata()) == [0.5, 0.5]
    assert top_row.get_title() == "masked row" and top_element.get_title() == "element"
    assert {line.get_label() for line in bottom_element.get_lines()} == {
        "test, missing entries", "test, observed entries", "missing, layer 0"}
    assert bottom_row.get_ylim() == (0, 1.02) and fig._suptitle.get_text() == "probes"
    plt.close(fig)


def test_probe_before_after_draws_one_line_per_checkpoint_and_the_answer_zero_level():
    import matplotlib.pyplot as plt

    from matcomp.book.plots.representations import probe_before_after

    tables = {target: probe_table(target) for target in ("row", "element")}
    fig = probe_before_after({"before": tables, "after": tables}, zero_missing=0.11)
    left, right = fig.axes
    assert [line.get_label() for line in left.get_lines()] == ["before", "after"]
    assert [line.get_linestyle() for line in left.get_lines()] == ["--", "-"]
    assert list(right.get_lines()[0].get_ydata()) == [0.1, 0.05, 0.02]
    assert list(right.get_lines()[-1].get_ydata()) == [0.11, 0.11] and right.get_yscale() == "log"
    plt.close(fig)


def test_against_step_draws_each_measure_with_the_loss_on_a_twin_axis():
    import matplotlib.pyplot as plt

    from matcomp.book.plots.curves import against_step

    step = np.arange(1, 2001)
    metrics = pd.DataFrame({"step": step, "L_mask": np.where(step < 1000, 0.11, 0.01)})
    table = pd.DataFrame({"by row": [0.0, 0.2, 0.5], "by column": [0.1, 0.1, 0.0]}, index=[0, 1000, 2000])
    ax = against_step(table, metrics, detect_drop(metrics), "silhouette", {"by row": "silhouette by row"})
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:2] == ["silhouette by row", "by column"] and ax.get_ylabel() == "silhouette"
    assert list(ax.get_lines()[0].get_ydata()) == [0.0, 0.2, 0.5]
    assert len(ax.figure.axes) == 2  # the measure's axis and L_mask's
    plt.close(ax.figure)


def test_embedding_figures_plot_the_given_points():
    import matplotlib.pyplot as plt

    from matcomp.book.plots.representations import position_panels, token_snapshots, value_token_panels

    values = np.array([-1.0, 0.0, 1.0])
    fig = value_token_panels(values, [2.0, 1.0, 2.0], np.array([[1.0, 0], [0, 1], [-1, 0]]), np.array([0.6, 0.3]))
    assert list(fig.axes[0].get_lines()[0].get_ydata()) == [2.0, 1.0, 2.0]
    assert fig.axes[1].get_xlabel() == "PC1 (60%)"
    plt.close(fig)
    layout = np.arange(8.0).reshape(4, 2)
    fig = position_panels(layout, [1.0, 2.0, 3.0, 4.0], rows=[0, 0, 1, 1], cols=[0, 1, 0, 1], n_cols=2)
    assert [t.get_text() for t in fig.axes[0].texts] == ["0", "1", "2", "3"]
    assert [line.get_xdata()[0] for line in fig.axes[2].get_lines()[1:]] == [1.5]  # one row start
    plt.close(fig)
    fig = token_snapshots({0: layout[:3], 500: layout[1:]}, values)
    assert [ax.get_title() for ax in fig.axes] == ["step 0", "step 500"]
    assert fig.axes[1].collections[0].get_offsets().tolist() == layout[1:].tolist()
    plt.close(fig)


def test_patching_heatmaps_share_one_scale_and_name_the_references():
    import matplotlib.pyplot as plt

    from matcomp.book.plots.attention import patching_heatmaps

    index = pd.MultiIndex.from_product([[0, 1], [0, 1]], names=["layer", "head"])
    grid = pd.DataFrame({"L_mask(X)": [0.1, 0.2, 0.3, 0.4], "L_mask(-X)": [0.5, 0.4, 0.3, 0.2]}, index=index)
    fig = patching_heatmaps(grid, clean=0.05, corrupted=0.6)
    left, right = fig.axes[:2]  # then a colour bar each
    assert left.images[0].get_clim() == right.images[0].get_clim() == (0, 0.6)
    assert [t.get_text() for t in left.texts] == ["0.100", "0.200", "0.300", "0.400"]
    assert fig._suptitle.get_text() == "one head patched (clean 0.050, corrupted 0.600 to $X$)"
    plt.close(fig)


def test_seed_panels_draw_a_panel_per_seed_with_its_runs_and_marks():
    import matplotlib.pyplot as plt

    from matcomp.book.plots.curves import seed_panels

    step = np.arange(1, 501)
    runs = {"plain": pd.DataFrame({"step": step, "L_mask": np.full(500, 0.11)}),
            "bias": pd.DataFrame({"step": step, "L_mask": np.full(500, 0.05)})}
    fig = seed_panels({0: runs, 1: runs}, {0: 0.11, 1: 0.12}, styles={"bias": {"color": "tab:blue"}},
                      marks={"bias": 200})
    first, second = fig.axes
    assert first.get_title() == "seed 0" and second.get_title() == "seed 1"
    labels = [line.get_label() for line in second.get_lines()]
    assert labels[:3] == ["plain", "bias", "copying plateau (0.12)"]
    assert second.get_lines()[-1].get_xdata()[0] == 200 and second.get_lines()[-1].get_color() == "tab:blue"
    plt.close(fig)


def test_family_titles_label_each_head_with_its_family():
    from matcomp.book.plots.attention import family_titles

    index = pd.MultiIndex.from_product([[0, 1], [0, 1]], names=["layer", "head"])
    families = [frozenset({"row"}), frozenset({"column"}), frozenset(), frozenset({"row", "identity"})]
    table = pd.DataFrame({"families": families}, index=index)
    assert family_titles(table) == [["(0,0) row", "(0,1) column"], ["(1,0) other", "(1,1) identity, row"]]


def test_drop_step_strip_marks_censored_seeds_at_the_budget():
    by_seed = pd.DataFrame({"drop step": pd.array([5060, None, 11275], dtype="Int64")}, index=[0, 1, 2])
    ax = drop_step_strip(by_seed, budget=20000)
    dots, censored, summary = ax.lines[0], ax.lines[1], ax.containers[0]
    assert list(dots.get_xdata()) == [5060.0, 11275.0] and list(censored.get_xdata()) == [20000]
    assert censored.get_markerfacecolor() == "none"
    mean = summary.lines[0].get_xdata()[0]
    assert mean == pytest.approx((5060 + 11275) / 2)
    plt.close(ax.figure)


def test_drop_step_strip_draws_one_line_per_group():
    index = pd.MultiIndex.from_tuples([("width", 32, 0), ("width", 32, 1), ("depth", 6, 0), ("depth", 6, 1)],
                                      names=["axis", "value", "seed"])
    table = pd.DataFrame({"drop step": pd.array([8000, 9000, None, 7000], dtype="Int64")}, index=index)
    ax = drop_step_strip(table, budget=20000, groups=["axis", "value"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["width 32", "depth 6"]
    first, second = ax.lines[0], next(line for line in ax.lines if list(line.get_ydata()) == [-1])
    assert list(first.get_xdata()) == [8000.0, 9000.0] and list(second.get_xdata()) == [7000.0]
    assert any(list(line.get_xdata()) == [20000] and line.get_markerfacecolor() == "none" for line in ax.lines)
    plt.close(ax.figure)


def test_plateau_panels_draw_each_run_on_the_three_measures_of_leaving_a_plateau():
    from matcomp.book.plots.curves import plateau_panels

    steps = [1000, 2000, 3000]
    flat = pd.DataFrame({"best row head / uniform": [1.0, 1.01, 1.02], "L_mask / E[X²]": [1.0] * 3,
                         "collapse (missing)": [0.99] * 3}, index=steps)
    drops = pd.DataFrame({"best row head / uniform": [1.0, 2.0, 6.0], "L_mask / E[X²]": [3.9, 0.9, 0.2],
                          "collapse (missing)": [0.99, 0.8, 0.7]}, index=steps)
    fig = plateau_panels({"flat": flat, "drops": drops})
    assert len(fig.axes) == 3 and fig.axes[1].get_yscale() == "log"
    legend, = fig.legends  # below the panels, so that no panel's curves or y label lie under the runs' labels
    assert [t.get_text() for t in legend.get_texts()] == ["flat", "drops"] and fig.axes[0].get_legend() is None
    fig.canvas.draw()
    label, box = fig.axes[1].yaxis.label.get_window_extent(), legend.get_window_extent()
    assert box.y1 < min(label.y0, fig.axes[1].get_window_extent().y0)  # under every panel, its axis labels included
    assert list(fig.axes[2].lines[1].get_ydata()) == [0.99, 0.8, 0.7]
    plt.close(fig)


def test_relative_strip_draws_a_row_per_group_with_its_range_and_leaves_out_runs_without_a_drop():
    rows = {"seeds ÷ their median": pd.Series([0.8, 1.0, 2.4]),
            "seed 0, nudged ÷ its own run": pd.Series([1.0014, 1.0024, None], dtype="Float64")}
    ax = relative_strip(rows)
    assert [t.get_text() for t in ax.get_yticklabels()] == list(rows) and ax.get_xscale() == "log"
    assert list(ax.lines[0].get_xdata()) == [0.8, 1.0, 2.4] and list(ax.lines[1].get_ydata()) == [-1, -1]
    assert [t.get_text() for t in ax.texts] == ["0.800–2.400", "1.001–1.002"]
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="at least one row"):
        relative_strip({})


def test_loss_curve_panels_draw_each_run_on_shared_axes_with_its_own_drop():
    from matcomp.book.plots.curves import loss_curve_panels

    step = np.arange(1, 3001)
    runs = {}
    for name, at in (("early", 1000), ("late", 2000)):
        l_mask = np.where(step < at, 0.11, 0.01)
        metrics = pd.DataFrame({"step": step, "L_mask": l_mask, "L_obs": np.full(3000, 1e-4), "L": 0.3 * l_mask})
        runs[name] = (metrics, detect_drop(metrics))
    fig = loss_curve_panels(runs, plateau=1 / 9, title="two runs")
    early, late = fig.axes
    assert [early.get_title(), late.get_title()] == ["early", "late"] and fig._suptitle.get_text() == "two runs"
    drops = [[line.get_label() for line in ax.get_lines() if line.get_label().startswith("drop")] for ax in fig.axes]
    assert drops == [[f"drop (step {runs['early'][1].half_step})"], [f"drop (step {runs['late'][1].half_step})"]]
    assert runs["early"][1].half_step < 1100 < 1900 < runs["late"][1].half_step
    assert early.get_shared_y_axes().joined(early, late) and early.get_shared_x_axes().joined(early, late)
    assert all(any(line.get_label().startswith("predict 0") for line in ax.get_lines()) for ax in fig.axes)
    plt.close(fig)
    with pytest.raises(ValueError, match="at least one run"):
        loss_curve_panels({})


def test_position_panel_rows_draw_one_titled_row_of_panels_per_checkpoint():
    from matcomp.book.plots.representations import position_panel_rows

    layout = np.arange(8.0).reshape(4, 2)
    panels = {"step 10 (pre-shift)": (layout, [1.0, 1.0, 1.0, 1.0]),
              "step 90 (post-shift)": (layout[::-1], [1, 2, 3, 4])}
    fig = position_panel_rows(panels, rows=[0, 0, 1, 1], cols=[0, 1, 0, 1], n_cols=2, title="the paper's model")
    assert len(fig.axes) == 6 and fig._suptitle.get_text() == "the paper's model"
    assert [sub._suptitle.get_text() for sub in fig.subfigs] == list(panels)
    assert fig.subfigs[1].axes[0].collections[0].get_offsets().tolist() == layout[::-1].tolist()
    assert list(fig.subfigs[1].axes[2].get_lines()[0].get_ydata()) == [1, 2, 3, 4]
    plt.close(fig)
    with pytest.raises(ValueError, match="at least one checkpoint"):
        position_panel_rows({}, rows=[], cols=[], n_cols=2)
