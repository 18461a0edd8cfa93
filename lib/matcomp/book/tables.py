"""Tables as the chapters show them: pandas Stylers with a number format, a caption and room
between columns (the book's theme packs cells tightly); and ``findings``, the sentences a chapter
computes from its run instead of typing them."""

from __future__ import annotations

import pandas as pd
from IPython.display import Markdown

from matcomp.analysis.embeddings import position_grouping
from matcomp.metrics import PAPER_ORDER

CELL_CSS = [{"selector": "td, th", "props": "padding: 3px 6px; text-align: right; white-space: nowrap;"},
            {"selector": "th.col_heading", "props": "white-space: normal; max-width: 10em;"},  # long labels wrap
            {"selector": "caption", "props": "caption-side: top; font-weight: bold; padding-bottom: 6px;"}]
WRAPPED_TEXT = "white-space: normal; text-align: left; min-width: 10em; max-width: 24em;"
LONG_TEXT = 30  # characters: a text column or row label longer than this wraps, so a table of claims fits the page


def styled(table: pd.DataFrame, fmt: str = "{:.3g}", caption: str | None = None) -> pd.io.formats.style.Styler:
    """``table``'s numeric columns formatted with ``fmt``, its integer columns (steps, counts) in full with
    thousands separators, empty cells blank; numbers on one line, long text, row labels and column
    headings wrapped, so a table of claims fits the page; captioned and padded."""
    numeric = table.select_dtypes("number").columns
    integer = [c for c in numeric if pd.api.types.is_integer_dtype(table[c])]
    floats = [c for c in numeric if c not in integer]
    long_text = [c for c in table.columns if c not in numeric and table[c].astype(str).str.len().max() > LONG_TEXT]
    style = (table.style.format(fmt, na_rep="", subset=floats).format("{:,}", na_rep="", subset=integer)
             .set_table_styles(CELL_CSS)
             .set_table_styles({c: [{"selector": "td", "props": WRAPPED_TEXT}] for c in long_text}, overwrite=False))
    if max((len(str(label)) for label in table.index), default=0) > LONG_TEXT:
        style = style.set_table_styles([{"selector": "th.row_heading", "props": WRAPPED_TEXT}], overwrite=False)
    return style.set_caption(caption) if caption else style


def beside(ours: pd.DataFrame, reference: pd.DataFrame, label: str, metrics=PAPER_ORDER,
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


def family_findings(counts: pd.DataFrame, label: str) -> list[str]:
    """One sentence per family of a ``matcomp.analysis.heads.family_counts`` table (families x seeds): in how
    many of the seeds it has heads, and how many in each.

    >>> family_findings(pd.DataFrame({0: [2, 0], 1: [1, 0]}, index=["row", "masked-row"]), "random masks")
    ['row heads on random masks: in 2 of 2 seeds (2, 1 heads).', 'masked-row heads on random masks: in 0 of 2 seeds.']
    """
    sentences = []
    for family, row in counts.iterrows():
        heads = f" ({', '.join(str(int(n)) for n in row)} heads)" if row.any() else ""
        sentences.append(f"{family} heads on {label}: in {int((row > 0).sum())} of {len(row)} seeds{heads}.")
    return sentences


def versus_findings(versus: pd.DataFrame, at: float, method: str = "nuclear-norm minimisation") -> str:
    """The sentence that reads a ``matcomp.analysis.baselines.versus_table``: where the BERT's L is below
    ``method``'s and where that is resolved (more than 2 paired s.e.), which way it goes at the training
    p_mask ``at``, where it is behind by more than 2 s.e., and at how many p_mask its nuclear norm is the
    larger. Resolution is said only where it is true; "no p_mask" rather than an empty list.

    >>> v = pd.DataFrame({"L gap (NN − BERT)": [0.002, -0.001, -0.004], "gap / s.e.": [3.0, -1.0, -5.0],
    ...                   "norm, BERT": [2.0, 2.0, 2.0], "norm, x": [1.0, 1.0, 3.0]}, index=[0.1, 0.3, 0.5])
    >>> for clause in versus_findings(v, at=0.3).split("; "): print(clause)
    The BERT's L is below nuclear-norm minimisation's at p_mask 0.1 (by more than 2 paired s.e. at 0.1)
    at its training p_mask 0.3 it is behind by 1.0 s.e.
    it is behind by more than 2 s.e. at 0.5
    its nuclear norm is the larger at 2 of 3 values of p_mask.
    """
    def listed(index) -> str:
        return ", ".join(f"{p:g}" for p in index)

    gap, z = versus["L gap (NN − BERT)"], versus["gap / s.e."]
    ahead, resolved, behind = versus.index[gap > 0], versus.index[z > 2], versus.index[z < -2]
    where = (f"at p_mask {listed(ahead)} (by more than 2 paired s.e. at {listed(resolved) or 'none of them'})"
             if len(ahead) else "at no p_mask")
    other = next(column for column in versus if column.startswith("norm, ") and column != "norm, BERT")
    larger = int((versus["norm, BERT"] > versus[other]).sum())
    side = "ahead" if gap.loc[at] > 0 else "behind"
    return (f"The BERT's L is below {method}'s {where}; at its training p_mask {at:g} it is {side} by "
            f"{abs(z.loc[at]):.1f} s.e.; it is behind by more than 2 s.e. at {listed(behind) or 'no p_mask'}; "
            f"its nuclear norm is the larger at {larger} of {len(versus)} values of p_mask.")


def span_text(values, fmt: str = "{:,.0f}") -> str:
    """The smallest and largest of ``values`` (missing ones left out) as "3,804–6,488", one value alone if
    they are equal, "none" if there is none: a range a sentence quotes.

    >>> span_text([6488, 3804, None, 4484]), span_text([0.11, 0.24], "{:.2f}"), span_text([5.0]), span_text([None])
    ('3,804–6,488', '0.11–0.24', '5', 'none')
    """
    present = [float(v) for v in values if not pd.isna(v)]
    if not present:
        return "none"
    lo, hi = fmt.format(min(present)), fmt.format(max(present))
    return lo if lo == hi else f"{lo}–{hi}"


def and_text(items) -> str:
    """Items as "2", "2 and 3" or "0, 1 and 4"; "none" for no item.

    >>> and_text([0, 1, 4]), and_text(["2", "3"]), and_text([])
    ('0, 1 and 4', '2 and 3', 'none')
    """
    items = [str(i) for i in items]
    return "none" if not items else items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def glue_texts(texts: dict[str, object]) -> None:
    """Glue each value as text under its key (myst-nb ``glue``, not displayed), for the chapter's prose to
    quote with ``{glue:text}`key```: a number in a sentence then comes from the run, not from typing."""
    from myst_nb import glue

    for key, value in texts.items():
        glue(key, str(value), display=False)


def component_findings(table: pd.DataFrame, min_plateau: int) -> list[str]:
    """One sentence per group of a ``matcomp.analysis.components.plateau_table``: whether it has a plateau
    (and how long, against the ``min_plateau`` threshold; "only just" when under twice it), where it
    falls below half, in how many steps and whether suddenly, and its final L_mask.

    >>> t = pd.DataFrame({"plateau": ["yes"], "leaves the plateau": [561], "below half": [2703],
    ...                   "fall (steps)": [2142], "fall": ["gradual"], "final L_mask": [0.02]}, index=["attention"])
    >>> for part in component_findings(t, 500)[0].split("; "): print(part)
    attention: a plateau of 561 steps, only just above the 500-step threshold
    it then falls to half the plateau in 2,142 steps (gradual: longer than the plateau), at step 2,703
    L_mask 0.020 at its last step.
    >>> short = t.assign(plateau="no", **{"leaves the plateau": None, "below half": None})
    >>> for part in component_findings(short, 500)[0].split(", "): print(part)
    attention: on the copying level for the whole of its run
    which is shorter than the 500-step threshold
    so not counted as a plateau; it does not fall below half within its run; L_mask 0.020 at its last step.
    """
    sentences = []
    for name, row in table.iterrows():
        leaves = row["leaves the plateau"]
        if row["plateau"] == "yes":
            close = ", only just above" if pd.notna(leaves) and leaves < 2 * min_plateau else ", against"
            text = (f"{name}: a plateau of {int(leaves):,} steps{close} the {min_plateau:,}-step threshold"
                    if pd.notna(leaves) else f"{name}: a plateau to the end of its run")
        elif pd.isna(leaves):
            text = (f"{name}: on the copying level for the whole of its run, which is shorter than the "
                    f"{min_plateau:,}-step threshold, so not counted as a plateau")
        else:
            text = f"{name}: no plateau (it leaves the copying level {at_step(leaves)})"
        if pd.notna(row["below half"]):
            kind = "longer than" if row["fall"] == "gradual" else "shorter than"
            fall = (f"; it then falls to half the plateau in {int(row['fall (steps)']):,} steps ({row['fall']}: {kind} "
                    f"the plateau), {at_step(row['below half'])}" if row["plateau"] == "yes" and pd.notna(leaves)
                    else f"; below half {at_step(row['below half'])}")
            text += fall
        else:
            text += "; it does not fall below half within its run"
        sentences.append(text + f"; L_mask {row['final L_mask']:.3f} at its last step.")
    return sentences


def silhouette_findings(by_seed: pd.DataFrame) -> list[str]:
    """One sentence per seed of ``matcomp.analysis.embeddings.silhouettes_by_seed``: its silhouette by column
    and by row at its first and last saved checkpoint, and how its final position embeddings group
    (``position_grouping``)."""
    sentences = []
    for seed, table in by_seed.groupby(level="seed"):
        first, last = table.iloc[0], table.iloc[-1]
        steps = table.index.get_level_values("step")
        if pd.isna(first["from drop"]):
            around = "; it has no drop"
        else:
            around = (f" ({abs(first['from drop']):,.0f} steps {'before' if first['from drop'] < 0 else 'after'} its "
                      f"drop to {abs(last['from drop']):,.0f} {'before' if last['from drop'] < 0 else 'after'})")
        grouping = position_grouping(table.iloc[[-1]]).iloc[0]
        sentences.append(f"Seed {seed}: by column {first['by column']:+.2f} → {last['by column']:+.2f} and by row "
                         f"{first['by row']:+.2f} → {last['by row']:+.2f} from step {steps[0]:,} to {steps[-1]:,}"
                         f"{around}; it ends grouped by {grouping}.")
    return sentences
