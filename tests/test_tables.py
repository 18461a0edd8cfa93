import numpy as np
import pandas as pd

from matcomp.tables import styled


def test_styled_formats_numbers_leaves_missing_cells_blank_and_captions():
    html = styled(pd.DataFrame({"a": [0.000123456, np.nan]}), "{:.2e}", "my caption").to_html()
    assert "1.23e-04" in html and "nan" not in html.lower() and "my caption" in html and "padding" in html


def test_styled_leaves_text_and_flags_alone():
    html = styled(pd.DataFrame({"family": ["row"], "flag": [True], "x": [0.5]}), "{:.2f}").to_html()
    assert "row" in html and "True" in html and "0.50" in html
