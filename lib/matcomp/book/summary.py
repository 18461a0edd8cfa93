"""Every judged finding of the book on one table, for its first page: each chapter's ladder (``matcomp.book.ladder``)
read with the chapter's default parameters, from the same shipped tables the chapter reads, so the table and
the chapters give the same verdict for the same numbers, and a chapter's link beside each row."""

from __future__ import annotations

import json

import pandas as pd

from matcomp.analysis.key_numbers import FINDINGS
from matcomp.book.chapter import ladder_runs, ladder_trained, larger_task_drops, paper_scale_runs, preset_name
from matcomp.book.ladder import Ladder, drop_ladders, finding_ladders, number_text, show_ladder
from matcomp.book.stored import BOOK, finding_parameters
from matcomp.book.verdicts import CATEGORIES, MATCHES


def chapter_ladders(preset: str | None = None) -> dict[str, Ladder]:
    """The ladder of every chapter that judges key numbers (chapter -> ``Ladder``), in the book's order."""
    name = preset_name(preset)
    runs = ladder_runs(name)
    ladders = {"sudden_drop": drop_ladders(ladder_trained(name), larger_task_drops(name))}
    paper_scale = paper_scale_runs(name)  # opened once: each opening hashes its checkpoints
    ladders.update({finding: finding_ladders(finding, runs, finding_parameters(finding, name), paper_scale)
                    for finding in FINDINGS})
    return ladders


def show_chapter_ladder(chapter: str, preset: str | None, params: dict) -> None:
    """Show the ladder of a chapter that judges key numbers, read with the chapter's parameters ``params``
    on every run of its ladder and the paper's scale (``show_ladder``: its tables and glued verdicts)."""
    show_ladder(finding_ladders(chapter, ladder_runs(preset), params, paper_scale_runs(preset)), chapter)


def chapter_title(chapter: str) -> str:
    """A chapter's title: its notebook's first heading."""
    cells = json.loads((BOOK / f"{chapter}.ipynb").read_text())["cells"]
    return "".join(cells[0]["source"]).splitlines()[0].lstrip("# ").strip()


def verdict_table(ladders: dict[str, Ladder]) -> pd.DataFrame:
    """One row per judged key number (chapter, key number; those a ladder sets ``apart`` left out): the paper's
    number, then its verdict where each ladder judges it, with the count of seeds on which it is as the paper's and
    of those that cannot be read ("reproduces (3 of 7; 4 cannot be read)"; "—" where a ladder has no such place)."""
    rows = {}
    for chapter, ladder in ladders.items():
        for key, claim in ladder.claims.items():
            if key in ladder.apart:
                continue
            row = {"the paper": number_text(claim.paper)}
            for where, verdicts in ladder.judged().items():
                v = verdicts[key]
                unread = f"; {len(v.unread)} cannot be read" if v.unread else ""
                row[_place(where)] = f"{v.category} ({v.count(MATCHES)} of {len(v.marks)}{unread})"
            rows[(chapter, key)] = row
    table = pd.DataFrame.from_dict(rows, orient="index").fillna("—")
    return table.rename_axis(["chapter", "key number"])


def _place(where: str) -> str:
    """A judged place as a column: the task and its seeds, or a single run above the ladder by its task and
    preset ("7×7 rank 2 (paper), one seed"): the paper-scale run is one column whichever chapter reads it."""
    if ", seed " not in where:
        return where
    task, _, rest = where.partition(" (")
    return f"{task} ({rest.split(',')[0]}), one seed"


def linked(table: pd.DataFrame) -> pd.DataFrame:
    """``verdict_table`` with each chapter as a link to its page (HTML: the book's pages sit side by side)."""
    chapters = table.index.get_level_values("chapter")
    links = [f'<a href="{c}.html">{chapter_title(c)}</a>' for c in chapters]
    return table.set_axis(pd.MultiIndex.from_arrays([links, table.index.get_level_values(1)],
                                                    names=table.index.names))


def categories_table() -> pd.DataFrame:
    """The verdict categories and what each means (``CATEGORIES``)."""
    return pd.DataFrame({"means": CATEGORIES}).rename_axis("verdict")
