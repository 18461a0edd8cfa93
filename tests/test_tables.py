import numpy as np
import pandas as pd

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
