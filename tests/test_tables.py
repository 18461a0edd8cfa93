import re

import numpy as np
import pandas as pd
import pytest

from matcomp.book.chapters.embeddings import silhouette_findings
from matcomp.book.tables import styled


def test_styled_formats_numbers_leaves_missing_cells_blank_and_captions():
    html = styled(pd.DataFrame({"a": [0.000123456, np.nan]}), "{:.2e}", "my caption").to_html()
    assert "1.23e-04" in html and "nan" not in html.lower() and "my caption" in html and "padding" in html


def test_styled_writes_integer_columns_in_full_even_with_missing_cells():
    table = pd.DataFrame({"step": pd.array([11000, None], dtype="Int64"), "params": [361_153, 8],
                          "loss": [11000.0, 0.5]})
    html = styled(table, "{:.4g}").to_html()
    assert "11,000" in html and "361,153" in html and "1.1e+04" in html and "<NA>" not in html


def test_styled_leaves_text_and_flags_alone():
    html = styled(pd.DataFrame({"family": ["row"], "flag": [True], "x": [0.5]}), "{:.2f}").to_html()
    assert "row" in html and "True" in html and "0.50" in html


def test_styled_wraps_long_text_columns_and_keeps_numbers_and_short_text_on_one_line():
    table = pd.DataFrame({"ours": ["layer 2 of 4 (0.069 / 0.072 / 0.074 against answering 0)"], "family": ["row"],
                          "x": [0.5]}, index=pd.Index(["masked row: test MSE at that layer / layer 0"], name="claim"))
    html = styled(table).to_html()
    wrapped = set(re.findall(r"td\.(col\d) \{[^}]*white-space: normal", html))
    assert wrapped == {"col0"}, "only the long text column wraps (a rule on its cells that outranks td's nowrap)"
    assert re.search(r"th\.row_heading \{[^}]*white-space: normal", html), "long row labels wrap"
    assert "row_heading {" not in styled(table.set_axis(["short"])).to_html(), "short row labels stay on a line"


def test_beside_shows_ours_its_error_the_reference_and_the_relative_difference():
    from matcomp.book.tables import beside

    ours = pd.DataFrame({"L": [0.011, 0.02], "L se": [0.0011, 0.001]}, index=["a", "model"])
    reference = pd.DataFrame({"L": [0.01, 0.02, 0.004]}, index=["a", "model", "theirs only"])
    styler = beside(ours, reference, "paper", metrics=["L"], no_difference=["model"], caption="cap")
    table = styler.data
    assert list(table.columns) == [("L", "ours"), ("L", "± s.e."), ("L", "paper"), ("L", "vs paper")]
    assert list(table.index) == ["a", "model", "theirs only"]
    assert np.isnan(table.loc["model", ("L", "vs paper")]) and np.isnan(table.loc["theirs only", ("L", "ours")])
    html = styler.to_html()
    assert "+10%" in html and "±10%" in html and "0.004" in html and "cap" in html and "nan" not in html.lower()
    assert ("L", "paper") not in beside(ours, reference, "paper", metrics=["L"], show_reference=False).data


def test_beside_paper_puts_the_papers_numbers_under_their_own_heading():
    from matcomp.book.tables import beside_paper

    ours = pd.DataFrame({"L_obs": [1e-4, 2e-4, 3e-4], "L_mask": [0.1, 0.2, 0.05]}, index=["clean", "uniform", "extra"])
    table = beside_paper(ours, {"clean": (9e-5, 0.2), "uniform": (3e-3, None)}, "ours", "paper")
    assert list(table.columns) == [("ours", "L_obs"), ("ours", "L_mask"), ("paper", "L_obs"), ("paper", "L_mask")]
    assert list(table.index) == ["clean", "uniform", "extra"]
    assert table.loc["uniform", ("paper", "L_obs")] == 3e-3 and np.isnan(table.loc["uniform", ("paper", "L_mask")])
    assert np.isnan(table.loc["extra", ("paper", "L_obs")]) and table[("paper", "L_mask")].dtype == float


def test_findings_is_markdown_prose_a_bullet_per_sentence():
    from matcomp.book.tables import findings

    shown = findings("Seed 0 drops at step 5,060.", "Seed 1 does not.", lead="**On this run:**")
    assert shown.data == "**On this run:**\n\n- Seed 0 drops at step 5,060.\n- Seed 1 does not."
    assert findings("One sentence.").data == "One sentence." and shown._repr_markdown_() == shown.data


def test_at_step_steps_text_and_variant_findings_write_steps_in_full():
    from matcomp.book.tables import at_step, steps_text, variant_findings

    assert at_step(5060) == "at step 5,060" and at_step(pd.NA) == "at no step of the run"
    assert steps_text(pd.Series([5060, None], dtype="Int64"), none="–") == "5,060, –"
    index = pd.MultiIndex.from_tuples([("width", 64), ("width", 32), ("depth", 6)], names=["axis", "value"])
    summary = pd.DataFrame({"seeds": [3, 3, 3], "dropped": [3, 2, 0], "mean drop": [7601.0, 9000.0, float("nan")],
                            "sd": [3296.0, 1414.2, float("nan")], "first": [5060.0, 8000.0, float("nan")],
                            "last": [11275.0, 10000.0, float("nan")], "L_mask after drop": [0.031, 0.045, float("nan")],
                            "verdict": ["the chapter's run", "within the spread", "later"]}, index=index)
    assert variant_findings(summary, 20000, 2000) == [
        "Width 64: 3 of 3 seeds drop within 20,000 steps, at steps 5,060 to 11,275 (mean 7,601 ± 3,296); "
        "L_mask 2,000 steps after the drop 0.031.",
        "Width 32: 2 of 3 seeds drop within 20,000 steps, at steps 8,000 to 10,000 (mean 9,000 ± 1,414); "
        "L_mask 2,000 steps after the drop 0.045; against the chapter's run: within the spread.",
        "Depth 6: 0 of 3 seeds drop within 20,000 steps; against the chapter's run: later."]


def test_moves_text_says_which_way_and_by_how_much_and_refuses_what_it_cannot_say():
    from matcomp.book.tables import moves_text

    assert moves_text(pd.Series([2.0, 3.0, 0.01], index=[0, 250, 500])) == \
        "grows 1.5× from step 0 to 250, then shrinks 300× to step 500"
    with pytest.raises(ValueError, match="at least two positive"):
        moves_text(pd.Series([1.0], index=[0]))
    with pytest.raises(ValueError, match="at least two positive"):
        moves_text(pd.Series([1.0, 0.0], index=[0, 1]))


def test_versus_values_say_no_p_mask_when_the_bert_is_behind_everywhere():
    from matcomp.book.chapters.nuclear_norm import versus_values

    versus = pd.DataFrame({"L gap (NN − BERT)": [-0.002, -0.004], "gap / s.e.": [-14.2, -1.5],
                           "norm, BERT": [2.0, 2.0], "norm, nuclear norm min": [1.0, 3.0]}, index=[0.3, 0.6])
    assert versus_values(versus, at=0.3) == {"nn_vs_where": "at no p_mask", "nn_vs_at": "0.3", "nn_vs_side": "behind",
                                             "nn_vs_z": "14.2", "nn_vs_behind": "0.3", "nn_vs_larger": "1",
                                             "nn_vs_n": "2"}


def test_a_seeds_silhouette_sentence_gives_its_path_around_its_own_drop_and_its_final_grouping():
    index = pd.MultiIndex.from_tuples([(1, 3000), (1, 18000), (2, 2000), (2, 9000)], names=["seed", "step"])
    paths = pd.DataFrame({"by column": [0.0, 0.3, 0.02, 0.05], "by row": [0.01, 0.05, 0.0, 0.2],
                          "from drop": [-9000, 6000, float("nan"), float("nan")]}, index=index)
    first, second = silhouette_findings(paths)
    assert first == ("Seed 1: by column +0.00 → +0.30 and by row +0.01 → +0.05 from step 3,000 to 18,000 (9,000 "
                     "steps before its drop to 6,000 after); it ends grouped by column.")
    assert second.endswith("from step 2,000 to 9,000; it has no drop; it ends grouped by row.")


def test_a_styled_table_reads_as_its_table_in_plain_text():
    from IPython.core.formatters import PlainTextFormatter

    table = styled(pd.DataFrame({"L_mask": [0.0123, None], "step": [4000, 29000]}, index=["pre", "post"]),
                   caption="Losses")
    text = PlainTextFormatter()(table)  # what papermill's --log-output and text viewers show
    assert "Styler" not in text and text.splitlines()[0] == "Losses"
    assert "0.0123" in text and "29000" in text and "nan" not in text.lower()
