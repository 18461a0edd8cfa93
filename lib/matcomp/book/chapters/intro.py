"""The introduction's computed parts: the verdict categories and every chapter's verdicts in one table."""

from __future__ import annotations

from matcomp.book.spec import ChapterSpec, Parameters
from matcomp.config import RunConfig


def runs_read(preset: str) -> list[RunConfig]:
    """None of its own: the verdict table reads the runs of the chapters it summarises."""
    return []


CHAPTER = ChapterSpec("intro", Parameters, runs_read)
