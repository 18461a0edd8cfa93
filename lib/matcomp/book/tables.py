"""Tables as the chapters show them: pandas Stylers with a number format, a caption and room
between columns (the book's theme packs cells tightly); and ``findings``, the sentences a chapter
computes from its run instead of typing them."""

from __future__ import annotations

import pandas as pd
from IPython.display import Markdown
from pandas.io.formats.style import Styler

from matcomp.metrics import PAPER_ORDER
from matcomp.paper import Side

CELL_CSS = [{"selector": "td, th", "props": "padding: 3px 6px; text-align: right; white-space: nowrap;"},
            {"selector": "th.col_heading", "props": "white-space: normal; max-width: 10em;"},  # long labels wrap
            {"selector": "caption", "props": "caption-side: top; font-weight: bold; padding-bottom: 6px;"}]
WRAPPED_TEXT = "white-space: normal; text-align: left; min-width: 10em; max-width: 24em;"
LONG_TEXT = 30  # characters: a text column or row label longer than this wraps, so a table of claims fits the page


class StyledTable(Styler):
    """A Styler whose plain text is its table (its caption, then its cells, empty ones blank), not the Styler's
    object address: what papermill's ``--log-output``, text viewers and a terminal show."""

    def __repr__(self) -> str:
        cells = self.data.astype(object).where(self.data.notna(), "")
        return "\n".join(filter(None, [self.caption if isinstance(self.caption, str) else None, cells.to_string()]))


def styled(table: pd.DataFrame, fmt: str = "{:.3g}", caption: str | None = None) -> StyledTable:
    """``table``'s numeric columns formatted with ``fmt``, its integer columns (steps, counts) in full with
    thousands separators, empty cells blank; numbers on one line, long text, row labels and column
    headings wrapped, so a table of claims fits the page; captioned and padded."""
    numeric = table.select_dtypes("number").columns
    integer = [c for c in numeric if pd.api.types.is_integer_dtype(table[c])]
    floats = [c for c in numeric if c not in integer]
    long_text = [c for c in table.columns if c not in numeric and table[c].astype(str).str.len().max() > LONG_TEXT]
    style = (StyledTable(table).format(fmt, na_rep="", subset=floats).format("{:,}", na_rep="", subset=integer)
             .set_table_styles(CELL_CSS)
             .set_table_styles({c: [{"selector": "td", "props": WRAPPED_TEXT}] for c in long_text}, overwrite=False))
    if max((len(str(label)) for label in table.index), default=0) > LONG_TEXT:
        style = style.set_table_styles([{"selector": "th.row_heading", "props": WRAPPED_TEXT}], overwrite=False)
    return style.set_caption(caption) if caption else style


def beside(ours: pd.DataFrame, reference: pd.DataFrame, label: str, metrics=PAPER_ORDER,
           show_reference: bool = True, no_difference=(), caption: str | None = None,
           fmt: str = "{:.3g}") -> StyledTable:
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


def moves_text(values: pd.Series) -> str:
    """How a positive quantity indexed by step moves from each step to the next, as a clause: which way
    and by what factor, so a sentence says "shrinks" or "grows" from the numbers, not from a guess.

    >>> moves_text(pd.Series([5.2e-4, 4.4e-5, 0.1], index=[1000, 4000, 15000]))
    'shrinks 12× from step 1,000 to 4,000, then grows 2,273× to step 15,000'
    """
    if len(values) < 2 or (values <= 0).any():
        raise ValueError(f"moves_text needs at least two positive values; got {values.tolist()}")
    steps, v = [int(s) for s in values.index], values.to_numpy(dtype=float)
    def move(a: float, b: float) -> str:
        factor = max(a, b) / min(a, b)
        return f"{'grows' if b > a else 'shrinks'} {factor:,.{1 if factor < 10 else 0}f}×"

    moves = [move(a, b) for a, b in zip(v, v[1:])]
    return ", then ".join([f"{moves[0]} from step {steps[0]:,} to {steps[1]:,}",
                           *(f"{move} to step {s:,}" for move, s in zip(moves[1:], steps[2:]))])


def variant_findings(summary: pd.DataFrame, budget: int, after_drop: int) -> list[str]:
    """One sentence per point of a ``matcomp.analysis.variants.variant_summary`` (indexed by axis and
    value): how many of its seeds drop within ``budget`` steps, where (least to most, mean ± sd), L_mask
    ``after_drop`` steps after the drop, and the verdict against the chapter's own value."""
    sentences = []
    for (axis, value), row in summary.iterrows():
        text = f"{axis.capitalize()} {value}: {row['dropped']} of {row['seeds']} seeds drop within {budget:,} steps"
        if row["dropped"] == 1:
            text += f", at step {row['first']:,.0f}"
        elif row["dropped"]:
            spread = f" ± {row['sd']:,.0f}" if pd.notna(row["sd"]) else ""
            text += f", at steps {row['first']:,.0f} to {row['last']:,.0f} (mean {row['mean drop']:,.0f}{spread})"
        if pd.notna(row["L_mask after drop"]):
            text += f"; L_mask {after_drop:,} steps after the drop {row['L_mask after drop']:.3f}"
        verdict = row["verdict"]
        text += "." if verdict == "the chapter's run" else f"; against the chapter's run: {verdict}."
        sentences.append(text)
    return sentences


def span_text(values, fmt: str = "{:,.0f}", between: str = "–") -> str:
    """The smallest and largest of ``values`` (missing ones left out) as "3,804–6,488" (``between`` joins them:
    " to " where a sign would sit beside the dash), one value alone if they print alike, "none" if there is none:
    a range a sentence quotes.

    >>> span_text([6488, 3804, None, 4484]), span_text([0.11, 0.24], "{:.2f}"), span_text([5.0]), span_text([None])
    ('3,804–6,488', '0.11–0.24', '5', 'none')
    >>> span_text([-0.2, 0.0], "{:+.0%}", " to "), span_text([-0.021, -0.018], "{:+.0%}", " to ")
    ('-20% to +0%', '-2%')
    """
    present = [float(v) for v in values if not pd.isna(v)]
    if not present:
        return "none"
    lo, hi = fmt.format(min(present)), fmt.format(max(present))
    return lo if lo == hi else f"{lo}{between}{hi}"


def and_text(items) -> str:
    """Items as "2", "2 and 3" or "0, 1 and 4"; "none" for no item.

    >>> and_text([0, 1, 4]), and_text(["2", "3"]), and_text([])
    ('0, 1 and 4', '2 and 3', 'none')
    """
    items = [str(i) for i in items]
    return "none" if not items else items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def list_text(items) -> str:
    """Items as a table cell lists them, "3, 4, 6"; "none" for no item.

    >>> list_text([3, 4, 6]), list_text([])
    ('3, 4, 6', 'none')
    """
    return ", ".join(map(str, items)) or "none"


def seeds_text(seeds) -> str:
    """Seeds as "0–3" (consecutive) or "0, 2 and 5".

    >>> seeds_text(range(4)), seeds_text([0, 2, 5]), seeds_text([3])
    ('0–3', '0, 2 and 5', '3')
    """
    seeds = list(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return and_text(seeds)


def number_text(value) -> str:
    """A key number as the tables write it: 100 or more (steps) in full with separators, others to three
    significant digits, a missing one "—"; text and the paper's directions (``Side``) as they are.

    >>> [number_text(v) for v in (16406.0, 0.01234, float("nan"), Side(1))]
    ['16,406', '0.0123', '—', '≥ 1']
    """
    if isinstance(value, (str, Side)):
        return str(value)
    return "—" if pd.isna(value) else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
