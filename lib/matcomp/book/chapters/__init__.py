"""One module per chapter of the book, named as its notebook, holding what belongs to that chapter only: its
declaration ``CHAPTER`` (``matcomp.book.spec``: parameters, runs, key numbers, shipped tables), most a ``setup``
that opens the chapter's runs and prints what they are, and the sentences and glued numbers only its chapter
says. The notebook imports the library's functions from where they live; ``chapter.`` names only its module's
own. What several chapters share stays in ``matcomp.book`` (the chapter's opening, tables, the ladder, plots).
"""

from __future__ import annotations

import importlib

from matcomp.analysis.seeds import seed_configs, seeds_from
from matcomp.book.chapter import chapter_config, one_model_configs, shipped_paper_scale
from matcomp.book.spec import ChapterSpec
from matcomp.config import RunConfig
from matcomp.sizes import chapter_sizes

# the chapters in the book's order (``_toc.yml``; ``tests/test_book.py`` holds the two together)
CHAPTERS = ("intro", "task", "sudden_drop", "copying_phase", "nuclear_norm", "observed_entries", "attention_patching",
            "head_taxonomy", "embeddings", "probing", "components", "progress", "shortening", "gpt", "width_depth",
            "sizes_ranks", "ood")


def chapter_spec(chapter: str) -> ChapterSpec:
    """The declaration of ``chapter`` (its module's ``CHAPTER``)."""
    if chapter not in CHAPTERS:
        raise ValueError(f"chapter must be one of {list(CHAPTERS)}; got {chapter!r}")
    return importlib.import_module(f"{__name__}.{chapter}").CHAPTER


def chapter_specs() -> list[ChapterSpec]:
    """Every chapter's declaration, in the book's order."""
    return [chapter_spec(chapter) for chapter in CHAPTERS]


def model_runs(preset: str) -> list[RunConfig]:
    """The one-model preset's runs at its seeds, and the paper-scale run where it is shipped with checkpoints:
    what a one-model chapter and its ladder read."""
    paper_scale = shipped_paper_scale(preset)
    return list(one_model_configs(preset).values()) + ([paper_scale.config] if paper_scale is not None else [])


def seed_runs(preset: str, count: str = "seeds") -> list[RunConfig]:
    """The scale's own run at the seeds of ``ChapterSizes.<count>``: a several-seed part's runs."""
    cfg = chapter_config(preset)
    return list(seed_configs(cfg, seeds_from(cfg, getattr(chapter_sizes(preset), count))).values())
