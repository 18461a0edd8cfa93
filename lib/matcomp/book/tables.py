"""Tables as the chapters show them: pandas Stylers with a number format, a caption and room
between columns (the book's theme packs cells tightly); and ``findings``, the sentences a chapter
computes from its run instead of typing them."""

from __future__ import annotations

import pandas as pd
from IPython.display import Markdown

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


def beside_paper(ours: pd.DataFrame, paper: dict[str, tuple], ours_label: str, paper_label: str) -> pd.DataFrame:
    """``ours`` (conditions x metrics) beside the paper's numbers for the same conditions (``paper``:
    condition -> one value per column of ``ours``, None where not reported), under two column headings;
    rows are ours, then any the paper has and we lack; a missing number is an empty cell."""
    reference = pd.DataFrame.from_dict(paper, orient="index", columns=list(ours.columns)).astype(float)
    return pd.concat({ours_label: ours, paper_label: reference}, axis=1)


def findings(*sentences: str, lead: str = "") -> Markdown:
    """Sentences computed from the chapter's run, shown as prose (Markdown: ``lead`` as a paragraph, then
    one bullet per sentence, or the sentence alone as a paragraph), so that what the text says about
    this run stays true at every preset.

    >>> findings("a.", "b.", lead="At step 5:").data
    'At step 5:\\n\\n- a.\\n- b.'
    >>> findings("One sentence.").data
    'One sentence.'
    """
    body = sentences[0] if len(sentences) == 1 else "\n".join(f"- {s}" for s in sentences)
    return Markdown("\n\n".join(part for part in (lead, body) if part))


def at_step(step, never: str = "at no step of the run") -> str:
    """"at step 4,364" for a step, ``never`` for a missing one (None, NaN, NA): a detected step in a sentence.

    >>> at_step(4364), at_step(None), at_step(float("nan"), "never")
    ('at step 4,364', 'at no step of the run', 'never')
    """
    return never if step is None or pd.isna(step) else f"at step {int(step):,}"


def steps_text(steps, none: str = "none") -> str:
    """Steps (a column of drop steps, say) as "5,060, 6,468, none": each in full, ``none`` where missing.

    >>> steps_text(pd.Series([5060, None, 11275], dtype="Int64"))
    '5,060, none, 11,275'
    """
    return ", ".join(none if pd.isna(step) else f"{int(step):,}" for step in steps)


def variant_findings(table: pd.DataFrame) -> list[str]:
    """One sentence per row of a ``matcomp.analysis.variants.variant_table`` (indexed by axis and value):
    where its L_mask leaves the plateau, where it is below half of it, and its final L_mask."""
    return [f"{axis.capitalize()} {value}: leaves the plateau {at_step(row['leaves plateau'])}, below half "
            f"{at_step(row['drop step'])}, final L_mask {row['final L_mask']:.3f}."
            for (axis, value), row in table.iterrows()]
