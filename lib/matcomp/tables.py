"""Tables as the chapters show them: pandas Stylers with a number format, a caption and room
between columns (the book's theme packs cells tightly)."""

from __future__ import annotations

import pandas as pd

CELL_CSS = [{"selector": "td, th", "props": "padding: 3px 8px; text-align: right; white-space: nowrap;"},
            {"selector": "caption", "props": "caption-side: top; font-weight: bold; padding-bottom: 6px;"}]


def styled(table: pd.DataFrame, fmt: str = "{:.3g}", caption: str | None = None) -> pd.io.formats.style.Styler:
    """``table``'s numeric columns formatted with ``fmt`` (empty cells blank), captioned and padded."""
    numeric = table.select_dtypes("number").columns
    style = table.style.format(fmt, na_rep="", subset=numeric).set_table_styles(CELL_CSS)
    return style.set_caption(caption) if caption else style
