"""Tables as the chapters show them: pandas Stylers with a number format, a caption and room
between columns (the book's theme packs cells tightly)."""

from __future__ import annotations

import pandas as pd

CELL_CSS = [{"selector": "td, th", "props": "padding: 3px 8px; text-align: right; white-space: nowrap;"},
            {"selector": "caption", "props": "caption-side: top; font-weight: bold; padding-bottom: 6px;"}]


def styled(table: pd.DataFrame, fmt: str = "{:.3g}", caption: str | None = None) -> pd.io.formats.style.Styler:
    """``table``'s numeric columns formatted with ``fmt``, its integer columns (steps, counts) in full with
    thousands separators, empty cells blank; captioned and padded."""
    numeric = table.select_dtypes("number").columns
    integer = [c for c in numeric if pd.api.types.is_integer_dtype(table[c])]
    floats = [c for c in numeric if c not in integer]
    style = (table.style.format(fmt, na_rep="", subset=floats).format("{:,}", na_rep="", subset=integer)
             .set_table_styles(CELL_CSS))
    return style.set_caption(caption) if caption else style


def beside(ours: pd.DataFrame, reference: pd.DataFrame, label: str, metrics=("L_obs", "L_mask", "L"),
           show_reference: bool = True, no_difference=(), caption: str | None = None,
           fmt: str = "{:.3g}") -> pd.io.formats.style.Styler:
    """Our numbers beside a reference's, per metric: a column group of ours, its relative standard error
    (when ``ours`` has a "<metric> se" column; shown "±9%"), the reference's (if ``show_reference``) and
    our relative difference from it, ours / reference − 1 (shown "+5%"), under the heading "vs <label>".

    Rows are ``ours``'s, then the reference's rows that ours lacks (their own cells blank); the
    difference is blank where either side is missing and in the rows ``no_difference`` (e.g. a model
    beside itself)."""
    columns = {}
    for name in metrics:
        columns[(name, "ours")] = ours[name]
        if f"{name} se" in ours:
            columns[(name, "± s.e.")] = ours[f"{name} se"] / ours[name]
        if show_reference:
            columns[(name, label)] = reference[name]
        columns[(name, f"vs {label}")] = ours[name] / reference[name].reindex(ours.index) - 1
    index = [*ours.index, *(row for row in reference.index if row not in ours.index)]
    table = pd.DataFrame(columns, index=index)
    error = [c for c in table.columns if c[1] == "± s.e."]
    difference = [c for c in table.columns if c[1] == f"vs {label}"]
    table.loc[[row for row in no_difference if row in table.index], difference] = float("nan")
    return (styled(table, fmt, caption).format("±{:.0%}", subset=error, na_rep="")
            .format("{:+.0%}", subset=difference, na_rep=""))
