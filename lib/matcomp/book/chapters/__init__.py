"""One module per chapter of the book, named as its notebook, holding what belongs to that chapter only: its
declaration ``CHAPTER`` (``matcomp.book.spec``: parameters, runs, key numbers, shipped tables), most a ``setup``
that opens the chapter's runs from its ``Parameters``, whole (``p = chapter.CHAPTER.check(globals())`` in the
first cell, then ``chapter.setup(p)``), and prints what they are, and the sentences and glued numbers only its
chapter says. The notebook imports the library's functions from where they live; ``chapter.`` names only its module's
own. What several chapters share stays in ``matcomp.book`` (the chapter's opening, tables, the ladder, plots).
"""

from __future__ import annotations

import importlib
from pathlib import Path, PurePosixPath

import yaml

from matcomp.analysis.seeds import seed_configs, seeds_from
from matcomp.book.chapter import chapter_config, one_model_configs, paper_scale_configs
from matcomp.book.spec import ChapterSpec
from matcomp.config import RunConfig
from matcomp.runs.shipped import REPO
from matcomp.sizes import chapter_sizes


def toc_chapters(root: Path = REPO) -> tuple[str, ...]:
    """The notebooks of the book's table of contents (``_toc.yml`` under ``root``: its root page, then each part's
    chapters) in its order: the chapters, read from the one list the build reads, so that a chapter added, moved
    or dropped there is so here too. A page of prose (``book/status.md``) is no chapter."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"], *(entry["file"] for part in toc["parts"] for entry in part["chapters"])]
    return tuple(PurePosixPath(file).name for file in files if (root / f"{file}.ipynb").exists())


CHAPTERS = toc_chapters()  # the chapters in the book's order, each with its module here


def chapter_spec(chapter: str) -> ChapterSpec:
    """The declaration of ``chapter`` (its module's ``CHAPTER``)."""
    if chapter not in CHAPTERS:
        raise ValueError(f"chapter must be one of {list(CHAPTERS)}; got {chapter!r}")
    return importlib.import_module(f"{__name__}.{chapter}").CHAPTER


def chapter_specs() -> list[ChapterSpec]:
    """Every chapter's declaration, in the book's order."""
    return [chapter_spec(chapter) for chapter in CHAPTERS]


def model_chapter_configs(preset: str) -> list[RunConfig]:
    """The one-model preset's runs at its seeds, and the paper-scale run where it is shipped with checkpoints:
    what a one-model chapter and its ladder read."""
    return list(one_model_configs(preset).values()) + list(paper_scale_configs(preset).values())


def seed_part_configs(preset: str, count: str = "seeds") -> list[RunConfig]:
    """The scale's own run at the seeds of ``ChapterSizes.<count>``: a several-seed part's runs."""
    cfg = chapter_config(preset)
    return list(seed_configs(cfg, seeds_from(cfg, getattr(chapter_sizes(preset), count))).values())
