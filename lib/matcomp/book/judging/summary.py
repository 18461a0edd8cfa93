"""Every judged finding of the book on one table, for its first page: each chapter's ladder
(``matcomp.book.judging.ladder``) read with the chapter's default parameters, from the same shipped tables the
chapter reads, so the table and the chapters give the same verdict for the same numbers, and a chapter's link beside
each row."""

from __future__ import annotations

import json

import pandas as pd

from matcomp.analysis.key_numbers import reader_parameters
from matcomp.book.chapter import ladder_configs, open_paper_scale, open_runs, paper_task_runs
from matcomp.book.chapters import chapter_specs
from matcomp.book.judging.ladder import Ladder, show_ladder
from matcomp.book.judging.ladder_readings import drop_ladders, finding_ladders
from matcomp.book.judging.register import REGISTER, judged_by, judged_text
from matcomp.book.judging.verdicts import CATEGORIES
from matcomp.book.spec import ChapterSpec
from matcomp.presets import preset_name
from matcomp.runs.shipped import REPO

BOOK = REPO / "book"


def chapter_ladders(preset: str | None = None) -> dict[str, Ladder]:
    """The ladder of every chapter that judges key numbers (chapter -> ``Ladder``), in the book's order."""
    name = preset_name(preset)
    # opened once: each opening hashes its checkpoints
    runs = open_runs(ladder_configs(name), name, with_phases=True)
    paper_scale = open_paper_scale(name)
    ladders = {}
    for chapter in chapter_specs():
        if chapter.key_numbers is None:
            continue
        ladders[chapter.name] = (drop_ladders(chapter, open_runs(ladder_configs(name), name),
                                              dict(paper_task_runs(name)))
                                 if chapter.key_numbers.metrics_only
                                 else finding_ladders(chapter, runs, chapter.defaults(name), paper_scale))
    return ladders


def show_chapter_ladder(chapter: ChapterSpec, namespace: dict) -> None:
    """Show the ladder of a chapter that judges key numbers (``show_ladder``: its tables and glued verdicts) on
    every run of its ladder and the paper's scale, read with the parameters its notebook holds (``namespace``:
    its ``globals()``; those the chapter's reader takes, ``reader_parameters``) at its ``preset``."""
    if chapter.key_numbers is None or chapter.key_numbers.metrics_only:
        raise ValueError(f"the {chapter.name} chapter judges no key numbers read on its checkpoints")
    params = {name: namespace[name] for name in reader_parameters(chapter.key_numbers.read)}
    preset = namespace.get("preset")
    runs = open_runs(ladder_configs(preset), preset, with_phases=True)
    paper_scale = open_paper_scale(preset)
    show_ladder(finding_ladders(chapter, runs, params, paper_scale), chapter.name)


def chapter_title(chapter: str) -> str:
    """A chapter's title: its notebook's first heading."""
    cells = json.loads((BOOK / f"{chapter}.ipynb").read_text())["cells"]
    return "".join(cells[0]["source"]).splitlines()[0].lstrip("# ").strip()


def verdict_table(ladders: dict[str, Ladder]) -> pd.DataFrame:
    """One row per key number that judges a claim of the register (``REGISTER``, in the paper's order; chapter,
    key number): the paper's places it tests and number, then its verdict where each ladder judges it, with the
    count of seeds on which it is as the paper's, which seeds it is read on where not every seed dropped, and how
    many cannot be read ("reproduces (3 of 7; read on the 3 that dropped; 4 cannot be read)"), or why one run
    cannot tell (``Verdict.brief``: "cannot tell: one draw"), or what it is where a ladder shows it apart (a check
    of the method; "—" where a ladder has no such place). Every number a ladder judges is in the register
    (``unregistered`` says which are not)."""
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for claim in REGISTER:
        for number in judged_by(claim):
            assert claim.chapter is not None  # a claim tested by key numbers names its chapter
            ladder, key = ladders[claim.chapter], number.id
            row = rows.setdefault((claim.chapter, number.label), {"in the paper": "", "the paper": number.claim.text()})
            row["in the paper"] = "; ".join(filter(None, (row["in the paper"], claim.places(number))))
            places = ladder.judged()
            for where, verdicts in places.items():
                if key in verdicts:
                    read = (ladder.read_text(key, named=False) if where.startswith(ladder.task)
                            and ladder.dropped != tuple(ladder.seeds.index) else "")  # as the page's headline says
                    row[ladder.column(where)] = verdicts[key].brief(read)
                elif key in ladder.apart or key in ladder.recipe:  # a check anywhere; another recipe's on the ladder
                    row[ladder.column(where)] = ladder.apart.get(key) or ladder.recipe[key]
    table = pd.DataFrame.from_dict(rows, orient="index").fillna("—")
    return table.rename_axis(["chapter", "key number"])


def unregistered(ladders: dict[str, Ladder]) -> list[tuple[str, str]]:
    """The key numbers a ladder shows that test no claim of the register (chapter, id): what the verdict table
    would leave out. How far below its plateau a run ends, shown on every one-model ladder, tests the sudden
    drop's claims, and is judged on its page."""
    keys = {claim.key for claim in REGISTER}
    return [(chapter, key) for chapter, ladder in ladders.items() for key, number in ladder.numbers.items()
            if not set(number.tests) & keys]


def register_table() -> pd.DataFrame:
    """The register as the first page lists it, one row a claim under its place in the paper: the claim, the
    chapter that tests it, and the key numbers that judge it, or why it is not judged here (in part: after them)."""
    return pd.DataFrame({
        "claim": [c.claim for c in REGISTER],
        "chapter": [f'<a href="{c.chapter}.html">{chapter_title(c.chapter)}</a>' if c.chapter else "—"
                    for c in REGISTER],
        "judged here by": [judged_text(c) for c in REGISTER],
    }, index=pd.Index([c.where for c in REGISTER], name="in the paper"))


def linked(table: pd.DataFrame) -> pd.DataFrame:
    """``verdict_table`` with each chapter as a link to its page (HTML: the book's pages sit side by side)."""
    chapters = table.index.get_level_values("chapter")
    links = [f'<a href="{c}.html">{chapter_title(c)}</a>' for c in chapters]
    return table.set_axis(pd.MultiIndex.from_arrays([links, table.index.get_level_values(1)],
                                                    names=table.index.names))


def categories_table() -> pd.DataFrame:
    """The verdict categories and what each means (``CATEGORIES``)."""
    return pd.DataFrame({"means": CATEGORIES}).rename_axis("verdict")
